// SPDX-License-Identifier: MIT
/*
 * Kernel symbols from System.map text (with malformed lines) and from the
 * guest vmlinux's .symtab.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "profile/ksym_hits.h"

#define GUEST_DIR "/var/cache/idlevm/6.1.0-56-cloud-amd64"

static struct ivm_ksyms *parse(const char *text, size_t len)
{
	struct ivm_ksyms *ksyms = NULL;
	struct ivm_error *err = ivm_ksyms_parse_system_map(text, len, &ksyms);

	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return ksyms;
}

Test(ksyms_map, good_and_malformed_lines)
{
	static const char text[] =
		"0000000000000000 D __per_cpu_start\n"
		"000000000001fb80 D current_task\n"
		"ffffffff81000000 T _text\n"
		"ffffffff81000000 T _stext\n"
		"ffffffff81000000 t startup_64\n"
		"ffffffff81001000 t local_fn\n"
		"ffffffff81002000 T global_fn\n"
		"ffffffff81003000 t dup\n"
		"ffffffff81004000 T dup\n"
		"ffffffffa0000000 t mod_fn\t[some_module]\r\n"
		"\n"
		"zzzzzzzzzzzzzzzz T bad_hex\n"		/* malformed */
		"ffffffff81005000 T\n"			/* no name */
		"ffffffff81005000  T two_spaces\n"	/* bad separator */
		"ffffffff81005000 1 digit_type\n"	/* type not a letter */
		"1ffffffff81005000 T seventeen\n"	/* 17 hex digits */
		"ffffffff81005000 T name with blanks\n"	/* trailing junk */
		"ffffffff81005000 T modjunk\t[x\n"	/* unclosed module */
		"ffffffff81005000 T nul\0byte\n"	/* embedded NUL */
		"ffffffff82000000 D last_no_newline";
	struct ivm_ksyms *ksyms = parse(text, sizeof(text) - 1);
	const struct ivm_ksym *sym;
	uint64_t addr, off;
	struct ivm_error *err;

	cr_expect_eq(ivm_ksyms_count(ksyms), 11, "count %zu",
		     ivm_ksyms_count(ksyms));
	cr_expect_eq(ivm_ksyms_malformed(ksyms), 8, "malformed %zu",
		     ivm_ksyms_malformed(ksyms));
	cr_assert_null(ivm_ksyms_lookup(ksyms, "current_task", &addr));
	cr_expect_eq(addr, 0x1fb80);
	cr_assert_null(ivm_ksyms_lookup(ksyms, "last_no_newline", &addr));
	cr_expect_eq(addr, 0xffffffff82000000ull);
	cr_assert_null(ivm_ksyms_lookup(ksyms, "mod_fn", &addr));
	cr_expect_eq(addr, 0xffffffffa0000000ull);
	/* A global wins over a local of the same name. */
	sym = ivm_ksyms_find(ksyms, "dup");
	cr_assert_not_null(sym);
	cr_expect_eq(sym->type, 'T');
	cr_expect_eq(sym->addr, 0xffffffff81004000ull);
	err = ivm_ksyms_lookup(ksyms, "bad_hex", &addr);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	cr_expect(strstr(ivm_error_string(err), "bad_hex"));
	ivm_error_destroy(err);
	cr_expect_null(ivm_ksyms_find(ksyms, "nul"));
	cr_expect_null(ivm_ksyms_find(ksyms, "seventeen"));
	cr_expect_null(ivm_ksyms_find(ksyms, "name"));

	/* Address to name: aliases prefer a global, then by name. */
	sym = ivm_ksyms_symbolize(ksyms, 0xffffffff81000010ull, &off);
	cr_assert_not_null(sym);
	cr_expect_str_eq(sym->name, "_stext");
	cr_expect_eq(off, 0x10);
	sym = ivm_ksyms_symbolize(ksyms, 0xffffffff81001fffull, &off);
	cr_assert_not_null(sym);
	cr_expect_str_eq(sym->name, "local_fn");
	cr_expect_eq(off, 0xfff);
	sym = ivm_ksyms_symbolize(ksyms, 0xffffffff81002000ull, &off);
	cr_assert_not_null(sym);
	cr_expect_str_eq(sym->name, "global_fn");
	cr_expect_eq(off, 0);
	sym = ivm_ksyms_symbolize(ksyms, UINT64_MAX, &off);
	cr_assert_not_null(sym);
	cr_expect_str_eq(sym->name, "mod_fn");
	ivm_ksyms_destroy(ksyms);
}

Test(ksyms_map, below_every_symbol)
{
	static const char text[] = "ffffffff81000000 T _text\n";
	struct ivm_ksyms *ksyms = parse(text, sizeof(text) - 1);

	cr_expect_null(ivm_ksyms_symbolize(ksyms, 0xffffffff80ffffffull, NULL));
	ivm_ksyms_destroy(ksyms);
}

Test(ksyms_map, nothing_parses)
{
	static const char text[] = "garbage\nmore garbage\n\xff\xfe\n";
	struct ivm_ksyms *ksyms = NULL;
	struct ivm_error *err;

	err = ivm_ksyms_parse_system_map(text, sizeof(text) - 1, &ksyms);
	cr_assert_not_null(err);
	cr_expect_null(ksyms);
	ivm_error_destroy(err);
	err = ivm_ksyms_parse_system_map("", 0, &ksyms);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}

Test(ksyms_map, over_long_name_refused)
{
	char line[IVM_KSYMS_MAX_NAME + 64];
	struct ivm_ksyms *ksyms;
	int n;

	n = snprintf(line, sizeof(line), "ffffffff81000000 T ");
	memset(line + n, 'a', IVM_KSYMS_MAX_NAME + 1);
	memcpy(line + n + IVM_KSYMS_MAX_NAME + 1, "\nffffffff81000000 T ok\n",
	       sizeof("\nffffffff81000000 T ok\n"));
	ksyms = parse(line, strlen(line));
	cr_expect_eq(ivm_ksyms_count(ksyms), 1);
	cr_expect_eq(ivm_ksyms_malformed(ksyms), 1);
	ivm_ksyms_destroy(ksyms);
}

Test(ksyms_real, system_map_and_vmlinux_agree)
{
	static const char *const names[] = {
		"linux_banner", "init_task", "__per_cpu_offset",
		"current_task", "page_offset_base", "init_top_pgt",
		"phys_base", "nr_cpu_ids", "idle_threads",
	};
	struct ivm_ksyms *map, *elf;
	struct ivm_error *err;
	size_t i;

	if (access(GUEST_DIR "/vmlinux", R_OK) ||
	    access(GUEST_DIR "/System.map", R_OK))
		cr_skip_test("%s absent: run make image", GUEST_DIR);
	err = ivm_ksyms_load_system_map(GUEST_DIR "/System.map", &map);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	err = ivm_ksyms_load_elf(GUEST_DIR "/vmlinux", &elf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_expect_gt(ivm_ksyms_count(map), 50000);
	cr_expect_eq(ivm_ksyms_malformed(map), 0);
	cr_expect_geq(ivm_ksyms_count(elf), ivm_ksyms_count(map));
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct ivm_ksym *a = ivm_ksyms_find(map, names[i]);
		const struct ivm_ksym *b = ivm_ksyms_find(elf, names[i]);

		cr_assert_not_null(a, "%s not in System.map", names[i]);
		cr_assert_not_null(b, "%s not in vmlinux", names[i]);
		cr_expect_eq(a->addr, b->addr, "%s differs", names[i]);
		cr_expect_eq(a->type, b->type, "%s: %c vs %c", names[i],
			     a->type, b->type);
	}
	/* 6.1 x86-64: zero-based per-CPU variables. */
	cr_expect_lt(ivm_ksyms_find(map, "current_task")->addr, 0x100000);
	{
		uint64_t off;
		const struct ivm_ksym *s;

		s = ivm_ksyms_symbolize(elf, ivm_ksyms_find(elf,
				"schedule")->addr + 3, &off);
		cr_assert_not_null(s);
		cr_expect_str_eq(s->name, "schedule");
		cr_expect_eq(off, 3);
		cr_expect_gt(s->size, 3);
	}
	ivm_ksyms_destroy(map);
	ivm_ksyms_destroy(elf);
}

Test(ksyms_real, not_elf)
{
	struct ivm_ksyms *ksyms = NULL;
	struct ivm_error *err = ivm_ksyms_load_elf("/proc/self/status", &ksyms);

	cr_assert_not_null(err);
	cr_expect_null(ksyms);
	ivm_error_destroy(err);
}

/* The symbols a profile hit: each said once, again after a forget. */
Test(ksym_hits, once_each_and_again_after_forget)
{
	static const char map[] =
		"ffffffff81000000 T _stext\n"
		"ffffffff81000100 T schedule\n"
		"ffffffff81000200 T do_idle\n";
	const uint64_t slide = 0x1000000, pcs[] = {
		0xffffffff81000150ull + slide, 0xffffffff81000160ull + slide,
		0xffffffff81000210ull + slide,
	};
	const struct ivm_ksym *const *syms;
	struct ivm_ksym_hits *h;
	struct ivm_ksyms *ks;
	size_t nr;

	cr_assert_null(ivm_ksyms_parse_system_map(map, sizeof(map) - 1, &ks));
	cr_assert_null(ivm_ksym_hits_create(ks, slide, &h));
	cr_assert_null(ivm_ksym_hits_add(h, pcs, 3));
	syms = ivm_ksym_hits_take_new(h, &nr);
	cr_assert_eq(nr, 2);
	cr_assert_str_eq(syms[0]->name, "schedule");
	cr_assert_str_eq(syms[1]->name, "do_idle");
	cr_assert_null(ivm_ksym_hits_add(h, pcs, 3));
	ivm_ksym_hits_take_new(h, &nr);
	cr_assert_eq(nr, 0, "said once");
	/* A new file of a continuous run gets them again. */
	ivm_ksym_hits_forget(h);
	cr_assert_null(ivm_ksym_hits_add(h, pcs + 2, 1));
	syms = ivm_ksym_hits_take_new(h, &nr);
	cr_assert_eq(nr, 1);
	cr_assert_str_eq(syms[0]->name, "do_idle");
	ivm_ksym_hits_destroy(h);
	ivm_ksyms_destroy(ks);
}
