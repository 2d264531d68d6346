// SPDX-License-Identifier: MIT
/*
 * Fuzz target: what a hostile guest controls when idlevm has no vmlinux.
 *  - The whole input as VMCOREINFO text: parse, check, and the kallsyms
 *    addresses out of it.
 *  - The input as kallsyms tables, decoded directly:
 *	u32 num_syms, u64 relative_base, u16 token_table_len,
 *	512 bytes token_index, token_table_len bytes token table,
 *	num_syms * 4 bytes offsets (or what is left), the rest names.
 *  - The same tables read through ivm_kallsyms_read_guest() from "guest
 *    memory" that is the input itself mapped at a kernel address, so the
 *    piecewise reads of the names and the token table run on it too.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernel/kallsyms_guest.h"
#include "kernel/kernel_layout.h"
#include "kernel/vmcoreinfo.h"

#define BASE 0xffffffff82000000ull

struct input_mem {
	const uint8_t *data;
	size_t size;
};

static struct ivm_error *input_read(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	const struct input_mem *m = ctx;

	if (va < BASE || va - BASE > m->size || len > m->size - (va - BASE))
		return ivm_error_fault(va, "outside the input");
	memcpy(buf, m->data + (va - BASE), len);
	return NULL;
}

static uint64_t get(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

static void vmcoreinfo(const uint8_t *data, size_t size)
{
	struct ivm_kallsyms_addrs addrs;
	struct ivm_vmcoreinfo *vi;
	struct ivm_error *err;
	uint64_t v;
	int64_t n;

	err = ivm_vmcoreinfo_parse((const char *)data, size, &vi);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	ivm_error_destroy(ivm_vmcoreinfo_check(vi, "6.1.0-56-cloud-amd64",
					       ivm_kallsyms_vmcoreinfo_symbols));
	ivm_error_destroy(ivm_vmcoreinfo_check(vi, NULL, NULL));
	ivm_error_destroy(ivm_vmcoreinfo_kerneloffset(vi, &v));
	ivm_error_destroy(ivm_vmcoreinfo_number(vi, "phys_base", &n));
	ivm_error_destroy(ivm_kallsyms_addrs_from_vmcoreinfo(vi, &addrs));
	ivm_vmcoreinfo_destroy(vi);
}

static void tables(const uint8_t *data, size_t size)
{
	struct input_mem mem = { data, size };
	struct ivm_kmem_reader reader = { .read = input_read, .ctx = &mem };
	struct ivm_kallsyms_tables t = { 0 };
	struct ivm_kallsyms_addrs a;
	struct ivm_ksyms *ksyms;
	struct ivm_error *err;
	size_t pos = 14, tt_len, off_len;

	if (size < pos + IVM_KALLSYMS_TOKEN_INDEX_BYTES)
		return;
	t.num_syms = (uint32_t)get(data, 4);
	t.relative_base = get(data + 4, 8);
	tt_len = (size_t)get(data + 12, 2);
	t.token_index = data + pos;
	t.token_index_len = IVM_KALLSYMS_TOKEN_INDEX_BYTES;
	a.token_index = BASE + pos;
	pos += IVM_KALLSYMS_TOKEN_INDEX_BYTES;
	if (tt_len > size - pos)
		tt_len = size - pos;
	t.token_table = data + pos;
	t.token_table_len = tt_len;
	a.token_table = BASE + pos;
	pos += tt_len;
	off_len = (size_t)t.num_syms * 4;
	if (off_len > size - pos)
		off_len = size - pos;
	t.offsets = data + pos;
	t.offsets_len = off_len;
	a.offsets = BASE + pos;
	pos += off_len;
	t.names = data + pos;
	t.names_len = size - pos;
	a.names = BASE + pos;
	a.num_syms = BASE;
	a.relative_base = BASE + 4;

	err = ivm_kallsyms_decode(&t, 0x1000000, &ksyms);
	if (!err) {
		ivm_ksyms_find(ksyms, "_text");
		ivm_ksyms_symbolize(ksyms, IVM_KERNEL_START_MAP, NULL);
		ivm_ksyms_destroy(ksyms);
	}
	ivm_error_destroy(err);
	err = ivm_kallsyms_read_guest(&reader, &a, 0, &ksyms);
	if (!err)
		ivm_ksyms_destroy(ksyms);
	ivm_error_destroy(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vmcoreinfo(data, size);
	tables(data, size);
	return 0;
}
