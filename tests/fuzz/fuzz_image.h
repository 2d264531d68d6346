/* SPDX-License-Identifier: MIT */
/*
 * Guest memory for fuzz targets: a heap copy of exactly the bytes the
 * fuzzer gave, mapped at base, read through a bounds-checked reader (a
 * struct ivm_kmem_reader), so ASan sees any read the reader did not grant
 * and anything outside faults as a guest would.
 */
#ifndef IVM_FUZZ_IMAGE_H
#define IVM_FUZZ_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmem/vmem.h"

struct fuzz_image {
	uint64_t base;
	uint8_t *mem;
	size_t size;
	struct ivm_kmem_reader reader;
};

static inline struct ivm_error *fuzz_image_read(void *ctx, uint64_t va,
						void *buf, size_t len)
{
	const struct fuzz_image *im = ctx;

	if (va < im->base || len > im->size || va - im->base > im->size - len)
		return ivm_error_fault(va, "not mapped");
	memcpy(buf, im->mem + (va - im->base), len);
	return NULL;
}

/* Copy size bytes of data to the heap, at base; false for no memory. */
static inline bool fuzz_image_init(struct fuzz_image *im, uint64_t base,
				   const uint8_t *data, size_t size)
{
	im->base = base;
	im->size = size;
	im->mem = malloc(size ? size : 1);
	if (!im->mem)
		return false;
	memcpy(im->mem, data, size);
	im->reader.read = fuzz_image_read;
	im->reader.ctx = im;
	return true;
}

static inline void fuzz_image_fini(struct fuzz_image *im)
{
	free(im->mem);
	im->mem = NULL;
}

#endif /* IVM_FUZZ_IMAGE_H */
