// SPDX-License-Identifier: MIT
/*
 * The guest kallsyms decoder (vmm/kernel/kallsyms_guest.h): synthetic tables in
 * both offset forms, hostile tables (truncated at every byte, huge counts,
 * bad tokens, endless names), and the real tables of the Debian 6.1 guest
 * vmlinux read out of its data sections, compared with its System.map.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel/kallsyms_guest.h"
#include "kernel/kernel_layout.h"

#define GUEST_DIR "/var/cache/idlevm/6.1.0-56-cloud-amd64"

/* ---- synthetic tables ------------------------------------------------ */

#define TOK_KALLSYMS 0xf0	/* "kallsyms_" */
#define TOK_START 0xf1		/* "start" */

struct synth {
	uint8_t token_table[2048];
	size_t token_table_len;
	uint8_t token_index[512];
	uint8_t names[1 << 16];
	size_t names_len;
	uint8_t offsets[4 * 64];
	uint32_t n;
};

/* Token b is the character b when printable, two are words, the rest "". */
static void synth_init(struct synth *s)
{
	unsigned int b;

	memset(s, 0, sizeof(*s));
	for (b = 0; b < 256; b++) {
		const char *str = "";
		char one[2] = { (char)b, 0 };
		size_t len;

		if (b == TOK_KALLSYMS)
			str = "kallsyms_";
		else if (b == TOK_START)
			str = "start";
		else if (b > ' ' && b < 0x7f)
			str = one;
		len = strlen(str);
		s->token_index[2 * b] = (uint8_t)s->token_table_len;
		s->token_index[2 * b + 1] = (uint8_t)(s->token_table_len >> 8);
		memcpy(s->token_table + s->token_table_len, str, len + 1);
		s->token_table_len += len + 1;
	}
}

static size_t tok_off(const struct synth *s, unsigned int b)
{
	return s->token_index[2 * b] | (size_t)s->token_index[2 * b + 1] << 8;
}

/* Encode type + name greedily with the two word tokens. */
static void synth_add(struct synth *s, char type, const char *name,
		      int32_t offset)
{
	uint8_t toks[4096];
	size_t ntok = 0;
	char full[2048];
	const char *p;

	snprintf(full, sizeof(full), "%c%s", type, name);
	for (p = full; *p;) {
		if (!strncmp(p, "kallsyms_", 9)) {
			toks[ntok++] = TOK_KALLSYMS;
			p += 9;
		} else if (!strncmp(p, "start", 5)) {
			toks[ntok++] = TOK_START;
			p += 5;
		} else {
			toks[ntok++] = (uint8_t)*p++;
		}
	}
	if (ntok < 0x80) {
		s->names[s->names_len++] = (uint8_t)ntok;
	} else {
		s->names[s->names_len++] = (uint8_t)(0x80 | (ntok & 0x7f));
		s->names[s->names_len++] = (uint8_t)(ntok >> 7);
	}
	memcpy(s->names + s->names_len, toks, ntok);
	s->names_len += ntok;
	memcpy(s->offsets + 4 * s->n, &offset, 4);
	s->n++;
}

static struct ivm_kallsyms_tables synth_tables(const struct synth *s,
					       uint64_t relative_base)
{
	struct ivm_kallsyms_tables t = {
		.num_syms = s->n,
		.names = s->names,
		.names_len = s->names_len,
		.token_table = s->token_table,
		.token_table_len = s->token_table_len,
		.token_index = s->token_index,
		.token_index_len = sizeof(s->token_index),
		.offsets = s->offsets,
		.offsets_len = 4 * s->n,
		.relative_base = relative_base,
	};
	return t;
}

static struct ivm_ksyms *decode_ok(const struct ivm_kallsyms_tables *t,
				   uint64_t slide)
{
	struct ivm_ksyms *ksyms = NULL;
	struct ivm_error *err = ivm_kallsyms_decode(t, slide, &ksyms);

	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return ksyms;
}

static void expect_sym(const struct ivm_ksyms *ksyms, const char *name,
		       uint64_t addr, char type)
{
	const struct ivm_ksym *sym = ivm_ksyms_find(ksyms, name);

	cr_assert_not_null(sym, "%s missing", name);
	cr_expect_eq(sym->addr, addr, "%s at %#lx, expected %#lx", name,
		     (unsigned long)sym->addr, (unsigned long)addr);
	cr_expect_eq(sym->type, type, "%s type %c", name, sym->type);
}

#define SLIDE 0x2e00000ull
#define LINK_TEXT 0xffffffff81000000ull

Test(kallsyms_guest, absolute_percpu_form)
{
	static struct synth s;
	uint64_t base = LINK_TEXT + SLIDE;	/* run-time _text */
	struct ivm_kallsyms_tables t;
	struct ivm_ksyms *ksyms;

	synth_init(&s);
	/* Per-CPU: absolute, not slid.  Image: base - 1 - offset. */
	synth_add(&s, 'A', "fixed_percpu_data", 0);
	synth_add(&s, 'A', "current_task", 0x1fb80);
	synth_add(&s, 'T', "_text", -1);
	synth_add(&s, 'T', "kallsyms_start_here", -1 - 0x1234);
	synth_add(&s, 't', "local_fn", -1 - 0x100000);
	synth_add(&s, 'D', "linux_banner", -1 - 0x111ffe0);
	t = synth_tables(&s, base);
	ksyms = decode_ok(&t, SLIDE);
	cr_expect_eq(ivm_ksyms_count(ksyms), 6);
	expect_sym(ksyms, "fixed_percpu_data", 0, 'A');
	expect_sym(ksyms, "current_task", 0x1fb80, 'A');
	expect_sym(ksyms, "_text", LINK_TEXT, 'T');
	expect_sym(ksyms, "kallsyms_start_here", LINK_TEXT + 0x1234, 'T');
	expect_sym(ksyms, "local_fn", LINK_TEXT + 0x100000, 't');
	expect_sym(ksyms, "linux_banner", 0xffffffff8211ffe0ull, 'D');
	ivm_ksyms_destroy(ksyms);

	/* The same tables without a slide give run-time addresses. */
	ksyms = decode_ok(&t, 0);
	expect_sym(ksyms, "_text", base, 'T');
	expect_sym(ksyms, "current_task", 0x1fb80, 'A');
	ivm_ksyms_destroy(ksyms);
}

Test(kallsyms_guest, relative_form)
{
	static struct synth s;
	struct ivm_kallsyms_tables t;
	struct ivm_ksyms *ksyms;

	synth_init(&s);
	synth_add(&s, 'T', "_text", 0);
	synth_add(&s, 'T', "schedule", 0x9a0000);
	synth_add(&s, 'd', "big_offset", 0x3fffffff);
	t = synth_tables(&s, LINK_TEXT + SLIDE);
	ksyms = decode_ok(&t, SLIDE);
	expect_sym(ksyms, "_text", LINK_TEXT, 'T');
	expect_sym(ksyms, "schedule", LINK_TEXT + 0x9a0000, 'T');
	expect_sym(ksyms, "big_offset", LINK_TEXT + 0x3fffffff, 'd');
	ivm_ksyms_destroy(ksyms);
}

Test(kallsyms_guest, long_names_take_two_length_bytes)
{
	static struct synth s;
	struct ivm_kallsyms_tables t;
	struct ivm_ksyms *ksyms;
	struct ivm_error *err;
	char name[600];

	synth_init(&s);
	memset(name, 'x', 300);
	name[300] = '\0';
	synth_add(&s, 'T', name, -1);
	synth_add(&s, 'T', "after_long", -2);
	t = synth_tables(&s, LINK_TEXT);
	ksyms = decode_ok(&t, 0);
	expect_sym(ksyms, name, LINK_TEXT, 'T');
	expect_sym(ksyms, "after_long", LINK_TEXT + 1, 'T');
	ivm_ksyms_destroy(ksyms);

	/* Longer than KSYM_NAME_LEN: refused. */
	synth_init(&s);
	memset(name, 'y', 513);
	name[513] = '\0';
	synth_add(&s, 'T', name, -1);
	t = synth_tables(&s, LINK_TEXT);
	err = ivm_kallsyms_decode(&t, 0, &ksyms);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
}

static void expect_refused(const struct ivm_kallsyms_tables *t,
			   const char *what)
{
	struct ivm_ksyms *ksyms = NULL;
	struct ivm_error *err = ivm_kallsyms_decode(t, 0, &ksyms);

	cr_assert_not_null(err, "%s: accepted", what);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL, "%s: %s", what,
		     ivm_error_string(err));
	cr_expect_null(ksyms);
	ivm_error_destroy(err);
}

Test(kallsyms_guest, hostile_tables)
{
	static struct synth s;
	struct ivm_kallsyms_tables t;
	size_t cut;

	synth_init(&s);
	synth_add(&s, 'T', "_text", -1);
	synth_add(&s, 'T', "kallsyms_start", -2);
	synth_add(&s, 'D', "data", -3);

	/* Names truncated anywhere. */
	for (cut = 0; cut < s.names_len; cut++) {
		t = synth_tables(&s, LINK_TEXT);
		t.names_len = cut;
		expect_refused(&t, "truncated names");
	}
	t = synth_tables(&s, LINK_TEXT);
	t.num_syms = 0;
	expect_refused(&t, "no symbols");
	t.num_syms = UINT32_MAX;
	expect_refused(&t, "4 billion symbols");
	t.num_syms = 4;		/* one more than there are */
	t.offsets_len = 16;
	expect_refused(&t, "count above the names");
	t = synth_tables(&s, LINK_TEXT);
	t.offsets_len = 8;
	expect_refused(&t, "offsets too short");
	t = synth_tables(&s, LINK_TEXT);
	t.token_index_len = 510;
	expect_refused(&t, "token index too short");
	/* The token table cut inside the word tokens: no NUL, or beyond. */
	t = synth_tables(&s, LINK_TEXT);
	t.token_table_len = tok_off(&s, TOK_START) + 2;
	expect_refused(&t, "token without its NUL");
	t.token_table_len = tok_off(&s, TOK_KALLSYMS);
	expect_refused(&t, "token offset beyond the table");

	/* A token with a blank, with a control byte; a digit type. */
	synth_init(&s);
	synth_add(&s, 'T', "kallsyms_start", -1);
	memcpy(s.token_table + tok_off(&s, TOK_START), "st rt", 5);
	t = synth_tables(&s, LINK_TEXT);
	expect_refused(&t, "blank in a name");
	memcpy(s.token_table + tok_off(&s, TOK_START), "st\x01rt", 5);
	expect_refused(&t, "control byte");
	synth_init(&s);
	synth_add(&s, '7', "digit_type", -1);
	t = synth_tables(&s, LINK_TEXT);
	expect_refused(&t, "digit type");
	synth_init(&s);
	synth_add(&s, 'T', "", -1);
	t = synth_tables(&s, LINK_TEXT);
	expect_refused(&t, "type without a name");
	/* A two-byte length claiming 16383 tokens that are not there. */
	synth_init(&s);
	s.names[0] = 0xff;
	s.names[1] = 0x7f;
	s.names_len = 100;
	s.n = 1;
	t = synth_tables(&s, LINK_TEXT);
	expect_refused(&t, "length past the end");
}

/* ---- the guest reader over synthetic memory -------------------------- */

struct fake_mem {
	uint64_t base;
	const uint8_t *bytes;
	size_t len;
	int fill;		/* >= 0: endless memory of this byte */
	size_t reads;
};

static struct ivm_error *fake_read(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	struct fake_mem *m = ctx;

	m->reads++;
	if (m->fill >= 0) {
		memset(buf, m->fill, len);
		return NULL;
	}
	if (va < m->base || va - m->base > m->len || len > m->len - (va - m->base))
		return ivm_error_fault(va, "fake fault at %#lx",
				       (unsigned long)va);
	memcpy(buf, m->bytes + (va - m->base), len);
	return NULL;
}

/* Lay the tables out as 6.1 does, the names last so they end at a fault. */
static size_t lay_out(const struct synth *s, uint8_t *mem, uint64_t base,
		      uint64_t relative_base, struct ivm_kallsyms_addrs *a)
{
	size_t pos = 0;

	a->offsets = base + pos;
	memcpy(mem + pos, s->offsets, 4 * s->n);
	pos += 4 * s->n;
	a->relative_base = base + pos;
	memcpy(mem + pos, &relative_base, 8);
	pos += 8;
	a->num_syms = base + pos;
	memcpy(mem + pos, &s->n, 4);
	pos += 4;
	a->token_table = base + pos;
	memcpy(mem + pos, s->token_table, s->token_table_len);
	pos += s->token_table_len;
	a->token_index = base + pos;
	memcpy(mem + pos, s->token_index, 512);
	pos += 512;
	/* The names end on a page boundary, as mapped memory does. */
	pos = (pos + s->names_len + 4095) / 4096 * 4096 - s->names_len;
	a->names = base + pos;
	memcpy(mem + pos, s->names, s->names_len);
	pos += s->names_len;
	return pos;
}

Test(kallsyms_guest, read_from_memory)
{
	static struct synth s;
	static uint8_t mem[1 << 17];
	uint64_t base = LINK_TEXT + SLIDE + 0x1000000;
	struct fake_mem fm = { .base = base, .bytes = mem, .fill = -1 };
	struct ivm_kmem_reader reader = { .read = fake_read, .ctx = &fm };
	struct ivm_kallsyms_addrs a;
	struct ivm_ksyms *ksyms;
	struct ivm_error *err;
	size_t len;

	synth_init(&s);
	synth_add(&s, 'A', "current_task", 0x1fb80);
	synth_add(&s, 'T', "_text", -1);
	synth_add(&s, 'R', "__start_BTF", -1 - 0x1438070);
	/* The names end exactly where readable memory ends. */
	len = lay_out(&s, mem, base, LINK_TEXT + SLIDE, &a);
	fm.len = len;
	err = ivm_kallsyms_read_guest(&reader, &a, SLIDE, &ksyms);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	expect_sym(ksyms, "current_task", 0x1fb80, 'A');
	expect_sym(ksyms, "_text", LINK_TEXT, 'T');
	expect_sym(ksyms, "__start_BTF", 0xffffffff82438070ull, 'R');
	ivm_ksyms_destroy(ksyms);

	/* Names cut by the end of memory: a fault, not a crash. */
	cr_assert_eq(len % 4096, 0);
	cr_assert_gt(s.names_len, 1);
	fm.len = len - 4096;
	if (fm.len > a.names - base + 1)
		fm.len = len - 1;
	err = ivm_kallsyms_read_guest(&reader, &a, SLIDE, &ksyms);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_FAULT, "%s", ivm_error_string(err));
	ivm_error_destroy(err);

	/* relative_base below the kernel image. */
	fm.len = len;
	memset(mem + (a.relative_base - base), 0, 8);
	err = ivm_kallsyms_read_guest(&reader, &a, SLIDE, &ksyms);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
}

Test(kallsyms_guest, endless_names_stop_at_the_cap)
{
	/* Every byte 0xff: 2 M symbols of 16383 tokens each, never complete. */
	struct fake_mem fm = { .fill = 0xff };
	struct ivm_kmem_reader reader = { .read = fake_read, .ctx = &fm };
	struct ivm_kallsyms_addrs a = {
		.num_syms = LINK_TEXT, .names = LINK_TEXT,
		.token_table = LINK_TEXT, .token_index = LINK_TEXT,
		.offsets = LINK_TEXT, .relative_base = LINK_TEXT,
	};
	struct ivm_ksyms *ksyms;
	struct ivm_error *err;

	/* num_syms 0xffffffff: refused before anything is allocated. */
	err = ivm_kallsyms_read_guest(&reader, &a, 0, &ksyms);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect_eq(fm.reads, 1);
	ivm_error_destroy(err);
	/* 0x01: 1..cap symbols; 0x01 bytes decode as 1-token names: the
	 * token "\x01" is "", so each name is empty and refused. */
	fm.fill = 0x01;
	fm.reads = 0;
	err = ivm_kallsyms_read_guest(&reader, &a, 0, &ksyms);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL, "%s",
		     ivm_error_string(err));
	ivm_error_destroy(err);
}

/* ---- the real tables of the guest vmlinux ---------------------------- */

/* Link-time addresses of the vmlinux file's allocated sections. */
struct vmlinux_mem {
	const uint8_t *map;
	size_t size;
	struct {
		uint64_t addr, size, offset;
	} sec[128];
	size_t nr;
};

static struct ivm_error *vmlinux_read(void *ctx, uint64_t va, void *buf,
				      size_t len)
{
	const struct vmlinux_mem *m = ctx;
	size_t i;

	for (i = 0; i < m->nr; i++) {
		if (va < m->sec[i].addr || va - m->sec[i].addr >= m->sec[i].size)
			continue;
		if (len > m->sec[i].size - (va - m->sec[i].addr))
			break;
		memcpy(buf, m->map + m->sec[i].offset + (va - m->sec[i].addr),
		       len);
		return NULL;
	}
	return ivm_error_fault(va, "not in a vmlinux section");
}

static void vmlinux_open(struct vmlinux_mem *m)
{
	struct stat st;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd;

	fd = open(GUEST_DIR "/vmlinux", O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	m->size = (size_t)st.st_size;
	m->map = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
	cr_assert_neq(m->map, MAP_FAILED);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	cr_assert_not_null(elf);
	while ((scn = elf_nextscn(elf, scn)) && m->nr < 128) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || sh.sh_addr < LINK_TEXT ||
		    sh.sh_offset + sh.sh_size > m->size)
			continue;
		m->sec[m->nr].addr = sh.sh_addr;
		m->sec[m->nr].size = sh.sh_size;
		m->sec[m->nr].offset = sh.sh_offset;
		m->nr++;
	}
	elf_end(elf);
	close(fd);
}

/* System.map as sorted "addr name" strings, for exact pair lookups. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(kallsyms_real, vmlinux_tables_match_system_map, .timeout = 120)
{
	static const char *const names[] = {
		"_text", "_stext", "linux_banner", "init_task",
		"__start_BTF", "__stop_BTF", "__start_orc_unwind_ip",
		"__stop_orc_unwind_ip", "__start_orc_unwind", "ret_from_fork",
		"init_top_pgt", "page_offset_base", "__per_cpu_offset",
		"current_task", "schedule", "idle_threads",
	};
	struct vmlinux_mem vm = { 0 };
	struct ivm_kmem_reader reader = { .read = vmlinux_read, .ctx = &vm };
	struct ivm_kallsyms_addrs a;
	struct ivm_ksyms *map, *ks;
	struct ivm_error *err;
	char **pairs, line[1024];
	size_t nr_pairs = 0, i, matched = 0;
	uint32_t num_syms;
	FILE *f;

	if (access(GUEST_DIR "/vmlinux", R_OK) ||
	    access(GUEST_DIR "/System.map", R_OK))
		cr_skip_test("%s absent: run make image", GUEST_DIR);
	err = ivm_ksyms_load_system_map(GUEST_DIR "/System.map", &map);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	/* The tables' link-time addresses, as VMCOREINFO would give them
	 * (run-time) for a guest at slide 0. */
	cr_assert_null(ivm_ksyms_lookup(map, "kallsyms_num_syms", &a.num_syms));
	cr_assert_null(ivm_ksyms_lookup(map, "kallsyms_names", &a.names));
	cr_assert_null(ivm_ksyms_lookup(map, "kallsyms_token_table",
					&a.token_table));
	cr_assert_null(ivm_ksyms_lookup(map, "kallsyms_token_index",
					&a.token_index));
	cr_assert_null(ivm_ksyms_lookup(map, "kallsyms_offsets", &a.offsets));
	cr_assert_null(ivm_ksyms_lookup(map, "kallsyms_relative_base",
					&a.relative_base));
	vmlinux_open(&vm);
	err = ivm_kallsyms_read_guest(&reader, &a, 0, &ks);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_assert_null(vmlinux_read(&vm, a.num_syms, &num_syms, 4));
	cr_expect_eq(ivm_ksyms_count(ks), num_syms);
	cr_expect_gt(num_syms, 50000);

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct ivm_ksym *want = ivm_ksyms_find(map, names[i]);
		const struct ivm_ksym *got = ivm_ksyms_find(ks, names[i]);

		cr_assert_not_null(want, "%s not in System.map", names[i]);
		cr_assert_not_null(got, "%s not decoded", names[i]);
		cr_expect_eq(got->addr, want->addr, "%s: %#lx vs %#lx",
			     names[i], (unsigned long)got->addr,
			     (unsigned long)want->addr);
	}

	/* Every decoded (address, name) is a System.map line. */
	pairs = calloc(ivm_ksyms_count(map), sizeof(*pairs));
	cr_assert_not_null(pairs);
	f = fopen(GUEST_DIR "/System.map", "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f) && nr_pairs < ivm_ksyms_count(map)) {
		unsigned long long addr;
		char type, name[600];

		if (sscanf(line, "%llx %c %599s", &addr, &type, name) != 3)
			continue;
		cr_assert(asprintf(&pairs[nr_pairs++], "%016llx %s", addr,
				   name) > 0);
	}
	fclose(f);
	qsort(pairs, nr_pairs, sizeof(*pairs), cmp_str);
	for (i = 0; i < ivm_ksyms_count(ks); i++) {
		const struct ivm_ksym *sym = ivm_ksyms_at(ks, i);
		char key[700], *k = key;

		snprintf(key, sizeof(key), "%016llx %s",
			 (unsigned long long)sym->addr, sym->name);
		if (bsearch(&k, pairs, nr_pairs, sizeof(*pairs), cmp_str))
			matched++;
		else if (i - matched < 10)
			cr_log_error("decoded %c %s not in System.map",
				     sym->type, key);
	}
	cr_expect_eq(matched, ivm_ksyms_count(ks), "%zu of %zu matched",
		     matched, ivm_ksyms_count(ks));
	/* kallsyms leaves out only a few kinds of System.map symbols. */
	cr_expect_gt(matched, nr_pairs * 9 / 10, "%zu of %zu map lines",
		     matched, nr_pairs);
	for (i = 0; i < nr_pairs; i++)
		free(pairs[i]);
	free(pairs);
	ivm_ksyms_destroy(ks);
	ivm_ksyms_destroy(map);
	munmap((void *)vm.map, vm.size);
}
