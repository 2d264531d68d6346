// SPDX-License-Identifier: MIT
/*
 * VMCOREINFO (vmm/kernel/vmcoreinfo.h): parsing a real-looking page and hostile
 * ones, the checks a found page must pass, and the scan of guest RAM that
 * finds it among decoys.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kallsyms_guest.h"
#include "kernel/vmcoreinfo.h"

/* The head and tail of a 6.1 guest's page, as the kernel writes it. */
static const char real[] =
	"OSRELEASE=6.1.0-56-cloud-amd64\n"
	"BUILD-ID=27c8e2bd8cb1b4d3c8b1b3a7f6ea0c5c01bd5a36\n"
	"PAGESIZE=4096\n"
	"SYMBOL(init_uts_ns)=ffffffff8d9f9b60\n"
	"OFFSET(uts_namespace.name)=0\n"
	"SYMBOL(node_online_map)=ffffffff8da5bb08\n"
	"SYMBOL(swapper_pg_dir)=ffffffff8d80a000\n"
	"SYMBOL(_stext)=ffffffff8be00000\n"
	"SYMBOL(kallsyms_names)=ffffffff8cf75590\n"
	"SYMBOL(kallsyms_num_syms)=ffffffff8cf75588\n"
	"SYMBOL(kallsyms_token_table)=ffffffff8d0c9d08\n"
	"SYMBOL(kallsyms_token_index)=ffffffff8d0ca0a0\n"
	"SYMBOL(kallsyms_offsets)=ffffffff8cf200b0\n"
	"SYMBOL(kallsyms_relative_base)=ffffffff8cf75580\n"
	"LENGTH(mem_section)=2048\n"
	"SIZE(page)=64\n"
	"NUMBER(phys_base)=-2097152\n"
	"SYMBOL(init_top_pgt)=ffffffff8d80a000\n"
	"NUMBER(pgtable_l5_enabled)=0\n"
	"KERNELOFFSET=ae00000\n"
	"NUMBER(KERNEL_IMAGE_SIZE)=1073741824\n"
	"NUMBER(sme_mask)=0\n"
	"CRASHTIME=1763800000\n";

static struct ivm_vmcoreinfo *parse_ok(const char *text, size_t len)
{
	struct ivm_vmcoreinfo *vi = NULL;
	struct ivm_error *err = ivm_vmcoreinfo_parse(text, len, &vi);

	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return vi;
}

Test(vmcoreinfo, real_page)
{
	struct ivm_vmcoreinfo *vi = parse_ok(real, sizeof(real));
	struct ivm_kallsyms_addrs a;
	uint64_t v;
	int64_t n;

	cr_expect_str_eq(ivm_vmcoreinfo_osrelease(vi), "6.1.0-56-cloud-amd64");
	cr_expect_eq(ivm_vmcoreinfo_count(vi), 23);
	cr_expect_str_eq(ivm_vmcoreinfo_get(vi, "PAGESIZE"), "4096");
	cr_assert_null(ivm_vmcoreinfo_symbol(vi, "_stext", &v));
	cr_expect_eq(v, 0xffffffff8be00000ull);
	cr_assert_null(ivm_vmcoreinfo_number(vi, "phys_base", &n));
	cr_expect_eq(n, -2097152);
	cr_assert_null(ivm_vmcoreinfo_kerneloffset(vi, &v));
	cr_expect_eq(v, 0xae00000);
	cr_assert_null(ivm_kallsyms_addrs_from_vmcoreinfo(vi, &a));
	cr_expect_eq(a.names, 0xffffffff8cf75590ull);
	cr_expect_eq(a.relative_base, 0xffffffff8cf75580ull);
	cr_expect_null(ivm_vmcoreinfo_check(vi, "6.1.0-56-cloud-amd64",
					    ivm_kallsyms_vmcoreinfo_symbols));
	ivm_vmcoreinfo_destroy(vi);
}

Test(vmcoreinfo, ends_at_nul)
{
	char page[4096] = { 0 };
	struct ivm_vmcoreinfo *vi;

	/* A zeroed page holding the text: the zeros end it. */
	memcpy(page, real, sizeof(real) - 1);
	vi = parse_ok(page, sizeof(page));
	cr_expect_eq(ivm_vmcoreinfo_count(vi), 23);
	cr_expect_null(ivm_vmcoreinfo_get(vi, "NOPE"));
	ivm_vmcoreinfo_destroy(vi);
}

static void expect_parse_error(const char *text, size_t len, const char *why)
{
	struct ivm_vmcoreinfo *vi = NULL;
	struct ivm_error *err = ivm_vmcoreinfo_parse(text, len, &vi);

	cr_assert_not_null(err, "%s: accepted", why);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL, "%s: %s", why,
		     ivm_error_string(err));
	cr_expect_null(vi);
	ivm_error_destroy(err);
}

Test(vmcoreinfo, hostile_text)
{
	static char big[IVM_VMCOREINFO_MAX_TEXT + 2];
	char line[1024];
	size_t i;

#define BAD(s, why) expect_parse_error(s, sizeof(s) - 1, why)
	BAD("", "empty");
	BAD("PAGESIZE=4096\n", "no OSRELEASE");
	BAD("OSRELEASE=\n", "empty OSRELEASE");
	BAD("OSRELEASE=6.1\nPAGESIZE=4096", "last line cut");
	BAD("OSRELEASE=6.1\nno equals sign\n", "no '='");
	BAD("OSRELEASE=6.1\n=value\n", "empty key");
	BAD("OSRELEASE=6.1\nKEY WITH BLANK=1\n", "blank in key");
	BAD("OSRELEASE=6.1\nKEY=\x01\n", "control byte in value");
	BAD("OSRELEASE=6.1\nKEY=\xff\n", "high byte in value");
	BAD("OSRELEASE=6.1\n\n", "empty line");
#undef BAD
	memset(line, 'x', sizeof(line));
	memcpy(line, "OSRELEASE=", 10);
	line[sizeof(line) - 1] = '\n';
	expect_parse_error(line, sizeof(line), "over-long line");
	/* Over the size cap, and too many lines. */
	for (i = 0; i + 4 <= sizeof(big); i += 4)
		memcpy(big + i, "A=1\n", 4);
	memcpy(big, "OSRELEASE=6\n", 12);
	expect_parse_error(big, sizeof(big), "over the size cap");
	expect_parse_error(big, 4 * (IVM_VMCOREINFO_MAX_ENTRIES + 4),
			   "too many lines");
}

Test(vmcoreinfo, values_that_do_not_parse)
{
	static const char text[] =
		"OSRELEASE=6.1.0\n"
		"SYMBOL(a)=\n"
		"SYMBOL(b)=ffffffff8be00000ff\n"
		"SYMBOL(c)=xyz\n"
		"NUMBER(big)=9223372036854775808\n"
		"NUMBER(min)=-9223372036854775808\n"
		"NUMBER(neg)=-\n"
		"NUMBER(hex)=0x10\n"
		"KERNELOFFSET=g\n";
	struct ivm_vmcoreinfo *vi = parse_ok(text, sizeof(text));
	struct ivm_error *err;
	const char *bad_sym[] = { "a", "b", "c" };
	const char *bad_num[] = { "big", "neg", "hex" };
	uint64_t v;
	int64_t n;
	size_t i;

	for (i = 0; i < 3; i++) {
		err = ivm_vmcoreinfo_symbol(vi, bad_sym[i], &v);
		cr_assert_not_null(err, "SYMBOL(%s)", bad_sym[i]);
		cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
		ivm_error_destroy(err);
		err = ivm_vmcoreinfo_number(vi, bad_num[i], &n);
		cr_assert_not_null(err, "NUMBER(%s)", bad_num[i]);
		cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
		ivm_error_destroy(err);
	}
	cr_assert_null(ivm_vmcoreinfo_number(vi, "min", &n));
	cr_expect_eq(n, INT64_MIN);
	err = ivm_vmcoreinfo_kerneloffset(vi, &v);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_vmcoreinfo_symbol(vi, "absent", &v);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_vmcoreinfo_destroy(vi);
}

/* Replace the value of key in a copy of real. */
static char *with(const char *key, const char *value)
{
	const char *p = strstr(real, key), *nl;
	char *out;

	cr_assert_not_null(p, "%s", key);
	nl = strchr(p, '\n');
	cr_assert(asprintf(&out, "%.*s%s=%s%s", (int)(p - real), real, key,
			   value, nl) > 0);
	return out;
}

static void expect_check_fails(const char *key, const char *value)
{
	char *text = with(key, value);
	struct ivm_vmcoreinfo *vi = parse_ok(text, strlen(text));
	struct ivm_error *err;

	err = ivm_vmcoreinfo_check(vi, "6.1.0-56-cloud-amd64",
				   ivm_kallsyms_vmcoreinfo_symbols);
	cr_expect_not_null(err, "%s=%s passed the check", key, value);
	ivm_error_destroy(err);
	ivm_vmcoreinfo_destroy(vi);
	free(text);
}

Test(vmcoreinfo, check)
{
	struct ivm_vmcoreinfo *vi = parse_ok(real, sizeof(real));
	struct ivm_error *err;

	err = ivm_vmcoreinfo_check(vi, "6.1.0-57-cloud-amd64", NULL);
	cr_assert_not_null(err);
	cr_expect(strstr(ivm_error_string(err), "6.1.0-57"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	cr_expect_null(ivm_vmcoreinfo_check(vi, NULL, NULL));
	ivm_vmcoreinfo_destroy(vi);

	expect_check_fails("KERNELOFFSET", "40000000");
	expect_check_fails("NUMBER(phys_base)", "12345");
	/* Below _text at this slide, in user space, above the image. */
	expect_check_fails("SYMBOL(kallsyms_names)", "ffffffff81000000");
	expect_check_fails("SYMBOL(kallsyms_names)", "7fff00000000");
	expect_check_fails("SYMBOL(kallsyms_offsets)", "ffffffffc0000000");
	expect_check_fails("SYMBOL(kallsyms_token_index)", "nothex");
}

/* Guest RAM of 6 MiB in two regions with a hole, holding decoys. */
Test(vmcoreinfo, find_in_guest_ram)
{
	static uint8_t low[4u << 20], high[2u << 20];
	struct ivm_gmem_region regions[] = {
		{ .gpa = 0, .size = sizeof(low), .hva = (uintptr_t)low },
		{ .gpa = 8u << 20, .size = sizeof(high),
		  .hva = (uintptr_t)high },
	};
	struct ivm_vmcoreinfo *vi = NULL;
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	char *other;

	cr_assert_null(ivm_gmem_buffer_create(regions, 2, &gmem));
	/* Not at a page start; garbage after the key; another release. */
	memcpy(low + 0x10010, real, sizeof(real));
	memcpy(low + 0x20000, "OSRELEASE=\x01\x02", 12);
	other = with("OSRELEASE", "5.10.0-30-amd64");
	memcpy(low + 0x30000, other, strlen(other));
	free(other);
	err = ivm_vmcoreinfo_find(gmem, "6.1.0-56-cloud-amd64",
				  ivm_kallsyms_vmcoreinfo_symbols, &vi);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	cr_expect(strstr(ivm_error_string(err), "2 page(s) refused"), "%s",
		  ivm_error_string(err));
	cr_expect(strstr(ivm_error_string(err), "the banner says"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);

	/*
	 * Linux 5.10's page: its release, but no kallsyms tables named (they
	 * came with 6.0).  The error says why and what will do instead.
	 */
	{
		const char *line = real;
		size_t n = 0;

		memset(low + 0x30000, 0, 4096);
		while (*line) {
			const char *nl = strchr(line, '\n');
			size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);

			if (strncmp(line, "SYMBOL(kallsyms", 15)) {
				memcpy(low + 0x30000 + n, line, len);
				n += len;
			}
			line += len;
		}
	}
	err = ivm_vmcoreinfo_find(gmem, "6.1.0-56-cloud-amd64",
				  ivm_kallsyms_vmcoreinfo_symbols, &vi);
	cr_assert_not_null(err);
	cr_expect(strstr(ivm_error_string(err), "Linux before 6.0") &&
		  strstr(ivm_error_string(err), "vmlinux or System.map"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	memset(low + 0x30000, 0, 4096);

	/* The real page, past the hole, in the last page of RAM. */
	memcpy(high + sizeof(high) - 4096, real, sizeof(real));
	err = ivm_vmcoreinfo_find(gmem, "6.1.0-56-cloud-amd64",
				  ivm_kallsyms_vmcoreinfo_symbols, &vi);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_expect_str_eq(ivm_vmcoreinfo_get(vi, "SYMBOL(_stext)"),
			 "ffffffff8be00000");
	ivm_vmcoreinfo_destroy(vi);
	ivm_gmem_destroy(gmem);
}
