// SPDX-License-Identifier: MIT
/*
 * Page walks and virtual reads over hostile guest RAM.
 *
 * Input: cr3 (8 bytes, little-endian), flags (1 byte: bit 0 la57), the
 * number of addresses n (1 byte, at most 32), n addresses of 8 bytes, then
 * guest RAM.  The RAM is mapped at gpa 0 and again at gpa 4 GiB, so 1 GiB
 * pages and tables "beyond" the first copy have something to hit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmem.h"
#include "x86_64_paging.h"

#define MAX_ADDRS 32
#define HIGH_GPA (4ull << 30)

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_gmem_region regions[2];
	struct ivm_gmem *gmem;
	uint64_t cr3, addrs[MAX_ADDRS];
	size_t n, i, hdr;
	struct ivm_x86_64_tlb tlb = { 0 };
	uint8_t *ram;
	bool la57;

	if (size < 10)
		return 0;
	cr3 = get64(data);
	la57 = data[8] & 1;
	n = data[9] % (MAX_ADDRS + 1);
	hdr = 10 + 8 * n;
	if (size <= hdr)
		return 0;
	for (i = 0; i < n; i++)
		addrs[i] = get64(data + 10 + 8 * i);
	/* A heap copy of exactly the RAM: ASan sees any read past it. */
	ram = malloc(size - hdr);
	if (!ram)
		return 0;
	memcpy(ram, data + hdr, size - hdr);
	regions[0] = (struct ivm_gmem_region){ 0, size - hdr,
					       (uintptr_t)ram };
	regions[1] = (struct ivm_gmem_region){ HIGH_GPA, size - hdr,
					       (uintptr_t)ram };
	if (ivm_gmem_buffer_create(regions, 2, &gmem)) {
		free(ram);
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct ivm_x86_64_translation tr;
		struct ivm_error *err, *cerr;
		uint8_t buf[5000], cbuf[5000];

		err = ivm_x86_64_translate(gmem, cr3, la57, addrs[i], &tr);
		if (!err) {
			/* The page offset survives translation. */
			if ((tr.pa ^ addrs[i]) & (tr.page_size - 1))
				abort();
			if (tr.page_size != IVM_X86_64_PAGE_SIZE_4K &&
			    tr.page_size != IVM_X86_64_PAGE_SIZE_2M &&
			    tr.page_size != IVM_X86_64_PAGE_SIZE_1G)
				abort();
		} else if (err->code != IVM_ERROR_FAULT ||
			   err->address != addrs[i]) {
			abort();
		}
		ivm_error_destroy(err);
		/* Spans two pages: exercises the per-page split and faults. */
		err = ivm_gmem_read_virt(gmem, cr3, la57, addrs[i], buf,
					 sizeof(buf));
		if (err && (err->code != IVM_ERROR_FAULT ||
			    err->address - addrs[i] >= sizeof(buf)))
			abort();
		/*
		 * The tables do not change within one input, so the cached
		 * walk must agree with the uncached one, byte for byte and
		 * fault for fault.
		 */
		cerr = ivm_x86_64_read_virt(gmem, &tlb, cr3, la57, addrs[i],
					    cbuf, sizeof(cbuf));
		if (!err != !cerr ||
		    (err && err->address != cerr->address) ||
		    (!err && memcmp(buf, cbuf, sizeof(buf))))
			abort();
		ivm_error_destroy(err);
		ivm_error_destroy(cerr);
	}
	ivm_gmem_destroy(gmem);
	free(ram);
	return 0;
}
