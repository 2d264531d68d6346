// SPDX-License-Identifier: MIT
/*
 * Fuzz the CFI decoder of guest bytes (ucfi.h): a CIE and an FDE run up
 * to a pc, the same bytes indexed as a whole .eh_frame, and a
 * .eh_frame_hdr search table over them.
 *
 * Input: u16 cie_len, u64 pc, u8 table encoding, then cie_len bytes of
 * CIE content (after its length field) and the FDE content (the rest).
 * The .eh_frame indexed is the whole input after the first 11 bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/ucfi.h"

#define VADDR 0x10000ull

struct mem {
	const uint8_t *bytes;
	size_t size;
};

static struct ivm_error *read_mem(void *ctx, uint64_t va, void *buf,
				  size_t len)
{
	const struct mem *m = ctx;

	if (va < VADDR || va - VADDR > m->size || len > m->size - (va - VADDR))
		return ivm_error_fault(va, "not mapped");
	memcpy(buf, m->bytes + (va - VADDR), len);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ivm_ucfi_scratch scratch;
	struct ivm_ucfi_row row;
	struct ivm_ucfi_index *ix;
	struct ivm_uelf_eh_hdr eh;
	struct mem m;
	struct ivm_kmem_reader r = { read_mem, &m };
	struct ivm_error *err;
	size_t cie_len;
	uint64_t pc, fde;
	uint8_t enc;
	uint8_t *copy;

	if (size < 11)
		return 0;
	cie_len = (size_t)ivm_le_load(data, 2);
	pc = ivm_le64(data + 2);
	enc = data[10];
	m.size = size - 11;
	copy = malloc(m.size ? m.size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 11, m.size);
	m.bytes = copy;
	if (cie_len > m.size)
		cie_len = m.size;
	ivm_error_destroy(ivm_ucfi_execute(copy, cie_len, VADDR,
					   copy + cie_len, m.size - cie_len,
					   VADDR + cie_len, pc, &scratch,
					   &row));
	err = ivm_ucfi_index_build(copy, m.size, VADDR, &ix);
	if (!err) {
		err = ivm_ucfi_index_find(ix, pc, &fde);
		if (!err)
			ivm_error_destroy(ivm_ucfi_row(&r, fde, pc, &scratch,
						       &row));
		ivm_ucfi_index_destroy(ix);
	}
	ivm_error_destroy(err);
	/* The bytes as a search table of (pc, fde) pairs. */
	memset(&eh, 0, sizeof(eh));
	eh.vaddr = VADDR;
	eh.table = VADDR;
	eh.entry_size = enc & 1 ? 8 : 4;
	eh.entry_signed = enc & 2;
	eh.count = m.size / (2u * eh.entry_size);
	err = ivm_ucfi_find(&r, &eh, pc, &fde);
	if (!err)
		ivm_error_destroy(ivm_ucfi_row(&r, fde, pc, &scratch, &row));
	ivm_error_destroy(err);
	free(copy);
	return 0;
}
