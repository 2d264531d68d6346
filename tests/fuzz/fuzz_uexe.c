// SPDX-License-Identifier: MIT
/*
 * Finding a process's executable from a hostile guest: its auxiliary
 * vector and its memory.
 *
 * Input: n (1 byte, auxiliary vector pairs, at most 64), the vector (16 n
 * bytes), then the process's memory, mapped at FUZZ_BASE (fuzz_image.h).
 *
 * What is accepted must be consistent: a page-aligned ELF header inside
 * the memory, a page-aligned bias (0 for ET_EXEC), at least one code
 * segment, a build-id of 1..64 bytes.  The same memory is then read as a
 * file (from offset 0) for its build-id note, as `idlevm maps` reads a
 * guest file's.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_image.h"
#include "unwind/uunwind_exe.h"

#define FUZZ_BASE 0x555555554000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_image im, file;
	struct ivm_error *err;
	struct ivm_uexe x;
	size_t n, hdr;

	if (size < 1)
		return 0;
	n = data[0] % (IVM_UEXE_MAX_AUXV + 1);
	hdr = 1 + 16 * n;
	if (size < hdr || !fuzz_image_init(&im, FUZZ_BASE, data + hdr,
					   size - hdr))
		return 0;
	err = ivm_uexe_identify(&im.reader, data + 1, 16 * n, data[0] & 0x80,
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
	/* The same bytes as a file: addresses are offsets in it. */
	file = im;
	file.base = 0;
	file.reader.ctx = &file;
	{
		uint8_t id[IVM_UBINARY_MAX_BUILD_ID];
		size_t len = 0;

		err = ivm_uexe_file_build_id(&file.reader, id, &len);
		if (!err && (!len || len > sizeof(id)))
			abort();
		ivm_error_destroy(err);
	}
	fuzz_image_fini(&im);
	return 0;
}
