// SPDX-License-Identifier: MIT
/*
 * A hostile guest's page cache: an address_space's xarray (nodes,
 * sibling, value and multi-order entries), struct pages, and the frames
 * they name, all in guest memory the fuzzer owns.
 *
 * Input: 8 bytes of a page index to look up, 8 of a file offset and 2 of
 * a length to read (at most 64 KiB), then kernel memory mapped at
 * FUZZ_BASE.  That memory is also the direct map (frame 0 at FUZZ_BASE)
 * and holds vmemmap from VMEMMAP_OFF on; the address_space is at
 * MAPPING_OFF.  The layout is Debian 6.1's (fuzz_image.h).
 *
 * What is returned must be sane: a frame below max_pfn, no more bytes
 * present than asked, absent ones zero where no page was found.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_image.h"
#include "kernel/gfile.h"

#define FUZZ_BASE 0xffff888000000000ull
#define FUZZ_MAX_IMAGE (1u << 20)
#define MAPPING_OFF 0x100ull
#define VMEMMAP_OFF 0x8000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[1 << 16];
	struct ivm_gfile_config cfg = { 0 };
	struct ivm_gfile_read_info info;
	struct ivm_guest_file file = { 0 };
	struct ivm_gfile *g = NULL;
	struct ivm_error *err;
	struct fuzz_image im;
	uint64_t index, off, pfn;
	uint16_t len;

	if (size < 18 || size - 18 > FUZZ_MAX_IMAGE ||
	    !fuzz_image_init(&im, FUZZ_BASE, data + 18, size - 18))
		return 0;
	memcpy(&index, data, 8);
	memcpy(&off, data + 8, 8);
	memcpy(&len, data + 16, 2);
	cfg.off = (struct ivm_gfile_offsets){
		.mapping_xa_head = 16, .xa_node_shift = 0,
		.xa_node_slots = 40, .xa_chunk_shift = 6, .page_size = 64,
		.page_flags = 0, .page_mapping = 24, .page_index = 32,
		.pg_uptodate = 2,
	};
	cfg.kmem = im.reader;
	cfg.page_offset_base = FUZZ_BASE;
	cfg.vmemmap_base = FUZZ_BASE + VMEMMAP_OFF;
	cfg.max_pfn = im.size / 4096 + 1;
	cfg.cache_pages = 4;
	if (ivm_gfile_create(&cfg, &g)) {
		fuzz_image_fini(&im);
		return 0;
	}
	err = ivm_gfile_page_cache_pfn(g, FUZZ_BASE + MAPPING_OFF, index,
				       &pfn);
	if (!err && pfn >= cfg.max_pfn)
		abort();
	ivm_error_destroy(err);
	file.inode = FUZZ_BASE + 0x200;
	file.mapping = FUZZ_BASE + MAPPING_OFF;
	file.size = 1u << 20;
	err = ivm_gfile_read(g, &file, NULL, NULL, 0, off, buf, len, &info);
	if (!err && (info.present > len ||
		     (info.present < len && info.first_absent == UINT64_MAX)))
		abort();
	ivm_error_destroy(err);
	/* Again: from the cache now, the same bytes. */
	err = ivm_gfile_read(g, &file, NULL, NULL, 0, off, buf, len, &info);
	ivm_error_destroy(err);
	ivm_gfile_destroy(g);
	fuzz_image_fini(&im);
	return 0;
}
