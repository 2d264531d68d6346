// SPDX-License-Identifier: MIT
/*
 * Finding a process's executable from a hostile guest: its auxiliary
 * vector and its memory.
 *
 * Input: n (1 byte, auxiliary vector pairs, at most 64), the vector (16 n
 * bytes), then the process's memory, mapped at FUZZ_BASE.  A heap copy of
 * exactly that memory is read through a bounds-checked reader, so ASan
 * sees any read the reader did not grant.
 *
 * What is accepted must be consistent: a page-aligned ELF header inside
 * the memory, a page-aligned bias (0 for ET_EXEC), at least one code
 * segment, a build-id of 1..64 bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/uunwind_exe.h"

#define FUZZ_BASE 0x555555554000ull

struct image {
	const uint8_t *mem;
	size_t size;
};

static struct ivm_error *read_image(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	const struct image *im = ctx;

	if (va < FUZZ_BASE || len > im->size ||
	    va - FUZZ_BASE > im->size - len)
		return ivm_error_fault(va, "not mapped");
	memcpy(buf, im->mem + (va - FUZZ_BASE), len);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im;
	struct ivm_kmem_reader reader = { read_image, &im };
	struct ivm_error *err;
	struct ivm_uexe x;
	size_t n, hdr;
	uint8_t *copy;

	if (size < 1)
		return 0;
	n = data[0] % (IVM_UEXE_MAX_AUXV + 1);
	hdr = 1 + 16 * n;
	if (size < hdr)
		return 0;
	im.size = size - hdr;
	copy = malloc(im.size ? im.size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + hdr, im.size);
	im.mem = copy;
	err = ivm_uexe_identify(&reader, data + 1, 16 * n, data[0] & 0x80,
				&x);
	if (!err) {
		if ((x.header | x.bias) & 4095 || x.header < FUZZ_BASE ||
		    x.header - FUZZ_BASE >= im.size || !x.nr_exec ||
		    x.nr_exec > IVM_UBINARY_MAX_EXEC || !x.build_id_len ||
		    x.build_id_len > IVM_UBINARY_MAX_BUILD_ID ||
		    (!x.dyn && x.bias))
			abort();
	}
	ivm_error_destroy(err);
	free(copy);
	return 0;
}
