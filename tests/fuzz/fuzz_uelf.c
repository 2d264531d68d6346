// SPDX-License-Identifier: MIT
/*
 * Fuzz an ELF file read from guest bytes (uelf.h, uimage.h): headers,
 * notes, section headers, the dynamic section and its symbol table, the
 * .eh_frame_hdr table and the .eh_frame index, the CFI rows of a few pcs
 * and their conversion to the unwinder's rules.
 *
 * Input: u64 bias (for a relocated .dynamic), u64 pc, then the file.  A
 * heap copy of exactly the file is read through a bounds-checked reader,
 * so ASan sees any read the reader did not grant.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/uelf.h"
#include "unwind/uimage.h"

struct file {
	const uint8_t *bytes;
	size_t size;
};

static struct ivm_error *read_file(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	const struct file *f = ctx;

	if (off > f->size || len > f->size - off)
		return ivm_error_fault(off, "past the end");
	memcpy(buf, f->bytes + off, len);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct file f;
	struct ivm_kmem_reader r = { read_file, &f };
	struct ivm_uelf_section sec;
	struct ivm_uimage *im;
	struct ivm_error *err;
	uint64_t bias, pc, off;
	uint8_t *copy;
	char row[1024];

	if (size < 16)
		return 0;
	bias = ivm_le64(data);
	pc = ivm_le64(data + 8);
	f.size = size - 16;
	copy = malloc(f.size ? f.size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 16, f.size);
	f.bytes = copy;
	err = ivm_uimage_create(&r, &im);
	if (err) {
		ivm_error_destroy(err);
		free(copy);
		return 0;
	}
	ivm_error_destroy(ivm_uelf_find_section(&r, ivm_uimage_elf(im),
						".gnu_debugdata", &sec));
	for (int i = 0; i < 4; i++) {
		uint64_t at = pc + (uint64_t)i * 0x11;

		ivm_uimage_describe_row(im, &r, at, row, sizeof(row));
		(void)ivm_uimage_symbol(im, &r, bias, at, &off);
	}
	/* Every executable segment's start: real code addresses. */
	for (size_t i = 0; i < ivm_uimage_elf(im)->nr_loads; i++)
		ivm_uimage_describe_row(im, &r,
					ivm_uimage_elf(im)->loads[i].vaddr,
					row, sizeof(row));
	ivm_uimage_destroy(im);
	free(copy);
	return 0;
}
