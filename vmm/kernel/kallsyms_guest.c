// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/kallsyms_guest.h"
#include "kernel/kernel_layout.h"

/*
 * The 256 tokens, each checked once: where it starts and how long it is,
 * or len -1 when its offset or its NUL lies outside the table.  A bad
 * token is an error only when a name uses it.
 */
struct tokens {
	const char *str[256];
	int len[256];
};

static void tokens_init(const struct ivm_kallsyms_tables *t,
			struct tokens *tok)
{
	unsigned int i;

	for (i = 0; i < 256; i++) {
		size_t off = ivm_le_load(t->token_index + 2 * i, 2), n;

		tok->len[i] = -1;
		if (off >= t->token_table_len)
			continue;
		n = strnlen((const char *)t->token_table + off,
			    t->token_table_len - off);
		if (n == t->token_table_len - off || n > IVM_KSYMS_MAX_NAME)
			continue;
		tok->str[i] = (const char *)t->token_table + off;
		tok->len[i] = (int)n;
	}
}

/*
 * The entry at *pos: its token bytes in [*toks, *toks + *ntok); advances
 * *pos past it.  False if it runs past the end.
 */
static bool next_entry(const uint8_t *names, size_t len, size_t *pos,
		       const uint8_t **toks, size_t *ntok)
{
	size_t p = *pos, n;

	if (p >= len)
		return false;
	n = names[p++];
	/* Linux 6.1+: a long name takes a second length byte. */
	if (n & 0x80) {
		if (p >= len)
			return false;
		n = (n & 0x7f) | (size_t)names[p++] << 7;
	}
	if (n > len - p)
		return false;
	*toks = names + p;
	*ntok = n;
	*pos = p + n;
	return true;
}

static bool name_char_ok(char c)
{
	return c > ' ' && c < 0x7f;
}

/*
 * Expand one entry into out (IVM_KSYMS_MAX_NAME + 2 bytes): type letter,
 * name, NUL.  Returns the name's length, or 0 when the entry is malformed.
 */
static size_t expand(const struct tokens *tok, const uint8_t *toks,
		     size_t ntok, char *out)
{
	size_t i, n = 0, j;

	for (i = 0; i < ntok; i++) {
		int l = tok->len[toks[i]];

		if (l < 0 || n + (size_t)l > IVM_KSYMS_MAX_NAME + 1)
			return 0;
		memcpy(out + n, tok->str[toks[i]], (size_t)l);
		n += (size_t)l;
	}
	if (n < 2 || !isalpha((unsigned char)out[0]))
		return 0;
	for (j = 1; j < n; j++)
		if (!name_char_ok(out[j]))
			return 0;
	out[n] = '\0';
	return n - 1;
}

struct ivm_error *ivm_kallsyms_decode(const struct ivm_kallsyms_tables *t,
				      uint64_t slide, struct ivm_ksyms **ret)
{
	char name[IVM_KSYMS_MAX_NAME + 2];
	struct ivm_ksym *syms = NULL;
	struct tokens tok;
	size_t i, pos, arena_len = 0, n;
	bool absolute_percpu = false;
	char *arena = NULL;

	if (t->num_syms == 0 || t->num_syms > IVM_KALLSYMS_MAX_SYMS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"kallsyms: %" PRIu32 " symbols (1..%u expected)",
					t->num_syms, IVM_KALLSYMS_MAX_SYMS);
	if (t->offsets_len / 4 < t->num_syms ||
	    t->token_index_len < IVM_KALLSYMS_TOKEN_INDEX_BYTES ||
	    !t->names || !t->token_table || !t->token_index || !t->offsets)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"kallsyms: tables shorter than %" PRIu32 " symbols need",
					t->num_syms);
	tokens_init(t, &tok);

	/* Pass 1: every entry well-formed, and the arena's size. */
	for (i = 0, pos = 0; i < t->num_syms; i++) {
		const uint8_t *toks;
		size_t ntok;

		if (!next_entry(t->names, t->names_len, &pos, &toks, &ntok))
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"kallsyms: names end at symbol %zu of %" PRIu32,
						i, t->num_syms);
		n = expand(&tok, toks, ntok, name);
		if (!n)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"kallsyms: symbol %zu has a malformed name",
						i);
		arena_len += n + 1;
		if ((int32_t)ivm_le32(t->offsets + 4 * i) < 0)
			absolute_percpu = true;
	}

	/* Pass 2: the same entries, into the arena. */
	arena = malloc(arena_len);
	syms = calloc(t->num_syms, sizeof(*syms));
	if (!arena || !syms) {
		free(arena);
		free(syms);
		return &ivm_enomem;
	}
	for (i = 0, pos = 0, arena_len = 0; i < t->num_syms; i++) {
		int32_t off = (int32_t)ivm_le32(t->offsets + 4 * i);
		const uint8_t *toks;
		size_t ntok;
		uint64_t addr;

		next_entry(t->names, t->names_len, &pos, &toks, &ntok);
		n = expand(&tok, toks, ntok, name);
		memcpy(arena + arena_len, name + 1, n + 1);
		syms[i].name = arena + arena_len;
		syms[i].type = name[0];
		arena_len += n + 1;
		/* Modular, as the kernel's own kallsyms_sym_address(). */
		if (!absolute_percpu)
			addr = t->relative_base + (uint32_t)off - slide;
		else if (off >= 0)
			addr = (uint64_t)off;
		else
			addr = t->relative_base - 1 - (uint64_t)(int64_t)off -
			       slide;
		syms[i].addr = addr;
	}
	return ivm_ksyms_adopt(syms, t->num_syms, arena, "guest kallsyms",
			       ret);
}

const char *const ivm_kallsyms_vmcoreinfo_symbols[] = {
	"kallsyms_num_syms",
	"kallsyms_names",
	"kallsyms_token_table",
	"kallsyms_token_index",
	"kallsyms_offsets",
	"kallsyms_relative_base",
	NULL,
};

struct ivm_error *ivm_kallsyms_addrs_from_vmcoreinfo(
	const struct ivm_vmcoreinfo *vi, struct ivm_kallsyms_addrs *ret)
{
	uint64_t *dst[] = {
		&ret->num_syms, &ret->names, &ret->token_table,
		&ret->token_index, &ret->offsets, &ret->relative_base,
	};
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < sizeof(dst) / sizeof(dst[0]); i++) {
		err = ivm_vmcoreinfo_symbol(vi,
					    ivm_kallsyms_vmcoreinfo_symbols[i],
					    dst[i]);
		if (err && err->code == IVM_ERROR_NOT_FOUND &&
		    ivm_vmcoreinfo_get(vi, "SYMBOL(kallsyms_addresses)")) {
			ivm_error_destroy(err);
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"the guest kernel's kallsyms are not base-relative (kallsyms_addresses): not supported");
		}
		if (err)
			return err;
	}
	return NULL;
}

/*
 * kallsyms_names: read in growing pieces until num_syms entries are
 * complete; *len is where the last one ends.
 */
static struct ivm_error *read_names(const struct ivm_kmem_reader *mem,
				    uint64_t va, uint32_t num_syms,
				    uint8_t **ret, size_t *len)
{
	size_t have = 0, cap = 0, pos = 0, chunk = 256u << 10;
	uint8_t *buf = NULL;
	uint32_t i = 0;

	while (i < num_syms) {
		const uint8_t *toks;
		size_t ntok, got, p = pos;
		struct ivm_error *err;

		if (next_entry(buf, have, &p, &toks, &ntok)) {
			pos = p;
			i++;
			continue;
		}
		if (have == IVM_KALLSYMS_MAX_NAMES_BYTES) {
			free(buf);
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"kallsyms: names of %" PRIu32 " symbols exceed %u bytes",
						num_syms,
						IVM_KALLSYMS_MAX_NAMES_BYTES);
		}
		if (have == cap) {
			size_t ncap = cap + chunk;
			uint8_t *n;

			if (ncap > IVM_KALLSYMS_MAX_NAMES_BYTES)
				ncap = IVM_KALLSYMS_MAX_NAMES_BYTES;
			n = realloc(buf, ncap);
			if (!n) {
				free(buf);
				return &ivm_enomem;
			}
			buf = n;
			cap = ncap;
			chunk *= 2;
		}
		err = ivm_kmem_read_upto(mem, va + have, buf + have, cap - have, &got);
		if (err) {
			free(buf);
			return ivm_error_wrap(err,
					      "kallsyms_names, symbol %" PRIu32 " of %" PRIu32,
					      i, num_syms);
		}
		have += got;
	}
	*ret = buf;
	*len = pos;
	return NULL;
}

struct ivm_error *ivm_kallsyms_read_guest(const struct ivm_kmem_reader *mem,
					  const struct ivm_kallsyms_addrs *a,
					  uint64_t slide,
					  struct ivm_ksyms **ret)
{
	uint8_t index[IVM_KALLSYMS_TOKEN_INDEX_BYTES], raw[8];
	struct ivm_kallsyms_tables t = { 0 };
	uint8_t *offsets = NULL, *table = NULL, *names = NULL;
	size_t max_off = 0, want, i;
	struct ivm_error *err;

	err = mem->read(mem->ctx, a->num_syms, raw, 4);
	if (err)
		return ivm_error_wrap(err, "kallsyms_num_syms");
	t.num_syms = ivm_le32(raw);
	if (t.num_syms == 0 || t.num_syms > IVM_KALLSYMS_MAX_SYMS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"kallsyms: %" PRIu32 " symbols (1..%u expected)",
					t.num_syms, IVM_KALLSYMS_MAX_SYMS);
	err = mem->read(mem->ctx, a->relative_base, raw, 8);
	if (err)
		return ivm_error_wrap(err, "kallsyms_relative_base");
	t.relative_base = ivm_le64(raw);
	if (t.relative_base < IVM_KERNEL_START_MAP + slide)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"kallsyms_relative_base %#" PRIx64 " is not in the kernel image",
					t.relative_base);
	err = mem->read(mem->ctx, a->token_index, index, sizeof(index));
	if (err)
		return ivm_error_wrap(err, "kallsyms_token_index");
	t.token_index = index;
	t.token_index_len = sizeof(index);
	for (i = 0; i < 256; i++)
		if (ivm_le_load(index + 2 * i, 2) > max_off)
			max_off = ivm_le_load(index + 2 * i, 2);
	want = max_off + IVM_KALLSYMS_TOKEN_SLACK;
	table = malloc(want);
	offsets = malloc((size_t)t.num_syms * 4);
	if (!table || !offsets) {
		err = &ivm_enomem;
		goto out;
	}
	/* The table may end just before unmapped memory: take what reads. */
	err = ivm_kmem_read_upto(mem, a->token_table, table, want, &t.token_table_len);
	if (err) {
		err = ivm_error_wrap(err, "kallsyms_token_table");
		goto out;
	}
	t.token_table = table;
	err = mem->read(mem->ctx, a->offsets, offsets, (size_t)t.num_syms * 4);
	if (err) {
		err = ivm_error_wrap(err, "kallsyms_offsets");
		goto out;
	}
	t.offsets = offsets;
	t.offsets_len = (size_t)t.num_syms * 4;
	err = read_names(mem, a->names, t.num_syms, &names, &t.names_len);
	if (err)
		goto out;
	t.names = names;
	err = ivm_kallsyms_decode(&t, slide, ret);
out:
	free(table);
	free(offsets);
	free(names);
	return err;
}

/* x86-64 KERNEL_IMAGE_SIZE with KASLR. */
#define IMAGE_AREA (1ull << 30)

static struct ivm_error *image_read(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	const struct ivm_kmem_image *img = ctx;
	struct ivm_error *err;
	uint64_t pa;

	if (va < IVM_KERNEL_START_MAP || len > IMAGE_AREA ||
	    va - IVM_KERNEL_START_MAP > IMAGE_AREA - len)
		return ivm_error_fault(va, "%#" PRIx64 " is outside the kernel image mapping",
				       va);
	pa = va - IVM_KERNEL_START_MAP + img->phys_base;
	err = ivm_gmem_read_phys(img->gmem, pa, buf, len);
	if (err && err->code == IVM_ERROR_FAULT)
		err->address = err->address - img->phys_base +
			       IVM_KERNEL_START_MAP;
	return err;
}

void ivm_kmem_reader_image(struct ivm_kmem_image *image,
			   struct ivm_kmem_reader *ret)
{
	*ret = (struct ivm_kmem_reader){ .read = image_read, .ctx = image };
}
