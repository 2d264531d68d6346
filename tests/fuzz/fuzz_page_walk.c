// SPDX-License-Identifier: MIT
/*
 * Page walks and virtual reads over hostile guest RAM.
 *
 * Input: cr3 (8 bytes, little-endian), flags (1 byte: bit 0 la57), the
 * number of addresses n (1 byte, at most 32), n addresses of 8 bytes, then
 * guest RAM.  The RAM is mapped at gpa 0 and again at gpa 4 GiB, so 1 GiB
 * pages and tables "beyond" the first copy have something to hit.
 *
 * Every address is read four ways: a plain walk, through the translation
 * cache, through the walk memo (ivm_x86_64_read_virt_memo) and as whole
 * pages (ivm_x86_64_read_pages_memo); all must agree.  After each address
 * the guest "changes its tables": a RAM byte chosen by the address is
 * overwritten, so the memo's predictions go stale and must be caught.
 * (The translation cache is flushed then, as its contract demands; the
 * memo never is.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmem/gmem.h"
#include "gmem/x86_64_paging.h"

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
	static struct ivm_x86_64_walk_memo memo;
	uint8_t *ram;
	size_t ram_size;
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
	ram_size = size - hdr;
	ram = malloc(ram_size);
	if (!ram)
		return 0;
	memcpy(ram, data + hdr, ram_size);
	ivm_x86_64_walk_memo_clear(&memo);
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
		static uint8_t buf[5000], cbuf[5000], pbuf[3][4096];
		void *pages[3] = { pbuf[0], pbuf[1], pbuf[2] };
		uint64_t page = addrs[i] & ~0xfffull, ok, j, pos, nr;

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
		ivm_error_destroy(cerr);
		/* The memo must agree with the plain walk too. */
		cerr = ivm_x86_64_read_virt_memo(gmem, &memo, cr3, la57,
						 addrs[i], cbuf, sizeof(cbuf));
		if (!err != !cerr ||
		    (err && err->address != cerr->address) ||
		    (!err && memcmp(buf, cbuf, sizeof(buf))))
			abort();
		ivm_error_destroy(err);
		ivm_error_destroy(cerr);
		/* Whole pages: each arrives iff a plain read of it does. */
		nr = (page >> 12) <= (UINT64_MAX >> 12) - 2 ? 3 : 1;
		if (!ivm_x86_64_read_pages_memo(gmem, &memo, cr3, la57, page,
						nr, pages, &ok)) {
			for (j = 0; j < nr; j++) {
				err = ivm_gmem_read_virt(gmem, cr3, la57,
							 page + j * 4096,
							 cbuf, 4096);
				if (!err != !!(ok & (1ull << j)) ||
				    (!err && memcmp(cbuf, pbuf[j], 4096)))
					abort();
				ivm_error_destroy(err);
			}
		} else {
			abort();
		}
		/* The guest writes somewhere; tables may change under us. */
		pos = (addrs[i] * 0x9e3779b97f4a7c15ull >> 17) % ram_size;
		ram[pos] ^= (uint8_t)(addrs[i] >> 56) | 1;
		ivm_x86_64_tlb_flush(&tlb);
	}
	ivm_gmem_destroy(gmem);
	free(ram);
	return 0;
}
