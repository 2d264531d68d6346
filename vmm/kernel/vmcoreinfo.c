// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hexnum.h"
#include "kernel/kernel_layout.h"
#include "kernel/vmcoreinfo.h"

/*
 * The text is copied once; each line's '=' and '\n' become NULs so keys
 * and values are C strings pointing into the copy.
 */
struct vmcoreinfo_entry {
	const char *key;
	const char *value;
};

struct ivm_vmcoreinfo {
	char *text;
	struct vmcoreinfo_entry *entries;
	size_t nr;
	const char *osrelease;
};

void ivm_vmcoreinfo_destroy(struct ivm_vmcoreinfo *vi)
{
	if (!vi)
		return;
	free(vi->text);
	free(vi->entries);
	free(vi);
}

static bool key_char(char c)
{
	return c > ' ' && c < 0x7f && c != '=';
}

static bool value_char(char c)
{
	return c >= ' ' && c < 0x7f;
}

struct ivm_error *ivm_vmcoreinfo_parse(const char *text, size_t len,
				       struct ivm_vmcoreinfo **ret)
{
	struct ivm_vmcoreinfo *vi;
	size_t pos = 0, line_no = 0, cap = 0;
	struct ivm_error *err = NULL;

	len = strnlen(text, len);
	if (len > IVM_VMCOREINFO_MAX_TEXT)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo of %zu bytes exceeds the %u byte cap",
					len, IVM_VMCOREINFO_MAX_TEXT);
	vi = calloc(1, sizeof(*vi));
	if (!vi)
		return &ivm_enomem;
	vi->text = malloc(len + 1);
	if (!vi->text) {
		free(vi);
		return &ivm_enomem;
	}
	memcpy(vi->text, text, len);
	vi->text[len] = '\0';
	while (pos < len) {
		char *line = vi->text + pos;
		char *nl = memchr(line, '\n', len - pos);
		size_t line_len = nl ? (size_t)(nl - line) : len - pos;
		size_t k, i;

		line_no++;
		pos += line_len + (nl ? 1 : 0);
		/* The kernel ends every line with '\n'; a last partial line is
		 * what a truncated copy looks like: refuse it too. */
		if (!nl || line_len > IVM_VMCOREINFO_MAX_LINE)
			goto bad_line;
		for (k = 0; k < line_len && key_char(line[k]); k++)
			;
		if (k == 0 || k == line_len || line[k] != '=')
			goto bad_line;
		for (i = k + 1; i < line_len; i++)
			if (!value_char(line[i]))
				goto bad_line;
		if (vi->nr == IVM_VMCOREINFO_MAX_ENTRIES) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "vmcoreinfo has more than %u lines",
					       IVM_VMCOREINFO_MAX_ENTRIES);
			goto fail;
		}
		if (vi->nr == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct vmcoreinfo_entry *n;

			n = reallocarray(vi->entries, ncap, sizeof(*n));
			if (!n) {
				err = &ivm_enomem;
				goto fail;
			}
			vi->entries = n;
			cap = ncap;
		}
		line[k] = '\0';
		line[line_len] = '\0';
		vi->entries[vi->nr].key = line;
		vi->entries[vi->nr].value = line + k + 1;
		vi->nr++;
		continue;
bad_line:
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "vmcoreinfo line %zu is not KEY=VALUE",
				       line_no);
		goto fail;
	}
	vi->osrelease = ivm_vmcoreinfo_get(vi, "OSRELEASE");
	if (!vi->osrelease || !*vi->osrelease) {
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "vmcoreinfo has no OSRELEASE");
		goto fail;
	}
	*ret = vi;
	return NULL;
fail:
	ivm_vmcoreinfo_destroy(vi);
	return err;
}

const char *ivm_vmcoreinfo_osrelease(const struct ivm_vmcoreinfo *vi)
{
	return vi->osrelease;
}

size_t ivm_vmcoreinfo_count(const struct ivm_vmcoreinfo *vi)
{
	return vi->nr;
}

const char *ivm_vmcoreinfo_get(const struct ivm_vmcoreinfo *vi,
			       const char *key)
{
	size_t i;

	/* A hundred-odd lines, looked up a dozen times: a scan is enough. */
	for (i = 0; i < vi->nr; i++)
		if (!strcmp(vi->entries[i].key, key))
			return vi->entries[i].value;
	return NULL;
}

static bool parse_dec(const char *s, int64_t *ret)
{
	bool neg = *s == '-';
	uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX;
	size_t i;

	s += neg;
	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (limit - (uint64_t)(s[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0)
		return false;
	/* -(INT64_MIN) does not fit: build it from the unsigned value. */
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

static struct ivm_error *lookup(const struct ivm_vmcoreinfo *vi,
				const char *key, const char **ret)
{
	*ret = ivm_vmcoreinfo_get(vi, key);
	if (!*ret)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"vmcoreinfo has no %s", key);
	return NULL;
}

struct ivm_error *ivm_vmcoreinfo_symbol(const struct ivm_vmcoreinfo *vi,
					const char *name, uint64_t *ret)
{
	struct ivm_error *err;
	const char *value;
	char key[IVM_VMCOREINFO_MAX_LINE + 16];

	if (snprintf(key, sizeof(key), "SYMBOL(%s)", name) >= (int)sizeof(key))
		return ivm_error_create(IVM_ERROR_INVALID,
					"symbol name too long");
	err = lookup(vi, key, &value);
	if (err)
		return err;
	if (!ivm_parse_hex64(value, strlen(value), ret))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo %s is not an address: '%s'",
					key, value);
	return NULL;
}

struct ivm_error *ivm_vmcoreinfo_number(const struct ivm_vmcoreinfo *vi,
					const char *name, int64_t *ret)
{
	struct ivm_error *err;
	const char *value;
	char key[IVM_VMCOREINFO_MAX_LINE + 16];

	if (snprintf(key, sizeof(key), "NUMBER(%s)", name) >= (int)sizeof(key))
		return ivm_error_create(IVM_ERROR_INVALID,
					"number name too long");
	err = lookup(vi, key, &value);
	if (err)
		return err;
	if (!parse_dec(value, ret))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo %s is not a number: '%s'",
					key, value);
	return NULL;
}

struct ivm_error *ivm_vmcoreinfo_kerneloffset(const struct ivm_vmcoreinfo *vi,
					      uint64_t *ret)
{
	struct ivm_error *err;
	const char *value;

	err = lookup(vi, "KERNELOFFSET", &value);
	if (err)
		return err;
	if (!ivm_parse_hex64(value, strlen(value), ret))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo KERNELOFFSET is not hex: '%s'",
					value);
	return NULL;
}

/* x86-64 KERNEL_IMAGE_SIZE with KASLR: the image lives in its top 1 GiB. */
#define KERNEL_IMAGE_AREA (1ull << 30)

struct ivm_error *ivm_vmcoreinfo_check(const struct ivm_vmcoreinfo *vi,
				       const char *release,
				       const char *const *symbols)
{
	struct ivm_error *err;
	uint64_t offset, addr;
	int64_t phys_base;
	size_t i;

	if (release && strcmp(vi->osrelease, release))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo is of kernel %.64s, the banner says %s",
					vi->osrelease, release);
	err = ivm_vmcoreinfo_kerneloffset(vi, &offset);
	if (err)
		return err;
	if (offset >= KERNEL_IMAGE_AREA)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo KERNELOFFSET %#" PRIx64 " is outside the kernel image area",
					offset);
	err = ivm_vmcoreinfo_number(vi, "phys_base", &phys_base);
	if (err)
		return err;
	if ((uint64_t)phys_base & 4095)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vmcoreinfo phys_base %" PRId64 " is not page aligned",
					phys_base);
	for (i = 0; symbols && symbols[i]; i++) {
		err = ivm_vmcoreinfo_symbol(vi, symbols[i], &addr);
		if (err)
			return err;
		if (addr < IVM_KERNEL_START_MAP + offset ||
		    addr - IVM_KERNEL_START_MAP >= KERNEL_IMAGE_AREA)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"vmcoreinfo SYMBOL(%s)=%#" PRIx64 " is not in the kernel image",
						symbols[i], addr);
	}
	return NULL;
}

#define SCAN_CHUNK	(2ull << 20)
#define SCAN_PAGE	4096ull

static const char osrelease_key[] = "OSRELEASE=";

/*
 * Try a page starting with "OSRELEASE=" (SCAN_PAGE bytes, the kernel's
 * whole vmcoreinfo_data); true with *ret set when it is the one, else
 * why not in why (size WHY_MAX).
 */
#define WHY_MAX 160
static bool try_page(const char *page, const char *release,
		     const char *const *symbols, struct ivm_vmcoreinfo **ret,
		     char *why)
{
	struct ivm_vmcoreinfo *vi;
	struct ivm_error *err;

	err = ivm_vmcoreinfo_parse(page, SCAN_PAGE, &vi);
	if (!err) {
		err = ivm_vmcoreinfo_check(vi, release, symbols);
		if (err)
			ivm_vmcoreinfo_destroy(vi);
	}
	if (err) {
		snprintf(why, WHY_MAX, "%s", ivm_error_string(err));
		ivm_error_destroy(err);
		return false;
	}
	*ret = vi;
	return true;
}

static bool page_readable(struct ivm_gmem *gmem, uint64_t gpa, char *buf)
{
	struct ivm_error *err = ivm_gmem_read_phys(gmem, gpa, buf, SCAN_PAGE);

	ivm_error_destroy(err);
	return !err;
}

struct ivm_error *ivm_vmcoreinfo_find(struct ivm_gmem *gmem,
				      const char *release,
				      const char *const *symbols,
				      struct ivm_vmcoreinfo **ret)
{
	uint64_t gpa, refused = 0;
	char why[WHY_MAX] = "", *buf;

	buf = malloc(SCAN_CHUNK);
	if (!buf)
		return &ivm_enomem;
	for (gpa = 0; gpa < IVM_VMCOREINFO_SCAN_LIMIT; gpa += SCAN_CHUNK) {
		struct ivm_error *err;
		uint64_t off;
		bool whole;

		err = ivm_gmem_read_phys(gmem, gpa, buf, SCAN_CHUNK);
		whole = !err;
		ivm_error_destroy(err);
		/*
		 * Guest RAM regions start and end on 2 MiB boundaries but
		 * for a few low holes: a chunk unreadable at both ends is a
		 * hole (or past the end of RAM) and is skipped without
		 * trying its 512 pages.
		 */
		if (!whole && !page_readable(gmem, gpa, buf) &&
		    !page_readable(gmem, gpa + SCAN_CHUNK - SCAN_PAGE, buf))
			continue;
		for (off = 0; off < SCAN_CHUNK; off += SCAN_PAGE) {
			char *page = buf + off;

			/*
			 * A chunk across a hole or the end of RAM: read its
			 * pages one by one (a hole costs no system call).
			 */
			if (!whole) {
				err = ivm_gmem_read_phys(gmem, gpa + off, page,
							 SCAN_PAGE);
				if (err) {
					ivm_error_destroy(err);
					continue;
				}
			}
			if (memcmp(page, osrelease_key,
				   sizeof(osrelease_key) - 1))
				continue;
			if (try_page(page, release, symbols, ret, why)) {
				free(buf);
				return NULL;
			}
			refused++;
		}
	}
	free(buf);
	if (!refused)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no VMCOREINFO page in guest memory: is it Linux with CONFIG_CRASH_CORE?");
	/*
	 * Linux names its kallsyms tables in VMCOREINFO only since 6.0:
	 * an older kernel's page is there but cannot give its symbols.
	 */
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no usable VMCOREINFO in guest memory (%" PRIu64 " page(s) refused, the last: %s)%s",
				refused, why,
				strstr(why, "kallsyms") ?
				": Linux before 6.0 does not name its kallsyms tables there, so its symbols need its vmlinux or System.map" : "");
}
