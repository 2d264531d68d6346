// SPDX-License-Identifier: MIT
/*
 * A hostile guest's VMAs: maple nodes (or the VMA list), VMAs, files,
 * inodes, dentry chains and mounts, all in guest memory the fuzzer owns.
 *
 * Input: a flags byte (bit 0: the VMA list of kernels before 6.1, else
 * the maple tree; bits 1-7: max VMAs - 1, 0 for the default), 8 bytes of
 * an address to look up alone, then kernel memory mapped at FUZZ_BASE,
 * whose first bytes are the mm_struct.  The layout is Debian 6.1's
 * (checked against its BTF by the unit tests), the list's the same with
 * vm_next where 6.1 has vm_userfaultfd_ctx (fuzz_image.h).
 *
 * What is returned must be sane: at most max VMAs, in address order,
 * page aligned and disjoint, paths NUL-terminated within PATH_MAX.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_image.h"
#include "kernel/mm_maps.h"

#define FUZZ_BASE 0xffff888000000000ull
#define FUZZ_MAX_IMAGE (1u << 20)

/* Debian 6.1.0-56-cloud-amd64's layout. */
static void layout_6_1(struct ivm_mm_offsets *o, bool list)
{
	memset(o, 0xff, sizeof(*o));
	if (list) {
		o->mm_mmap = 8;
		o->vma_next = 144;
	} else {
		o->mm_mt_root = 8;
		o->maple_node_size = 256;
		o->mr64_pivot = 8;
		o->mr64_slot = 128;
		o->mr64_meta_end = 248;
		o->mr64_nr_slots = 16;
		o->ma64_pivot = 8;
		o->ma64_slot = 80;
		o->ma64_meta_end = 240;
		o->ma64_nr_slots = 10;
		o->dense_slot = 8;
		o->dense_nr_slots = 31;
		o->maple_dense = 0;
		o->maple_leaf_64 = 1;
		o->maple_range_64 = 2;
		o->maple_arange_64 = 3;
	}
	o->mm_exe_file = 944;
	o->mm_start_brk = 288;
	o->mm_brk = 296;
	o->mm_start_stack = 304;
	o->vma_size = 152;
	o->vma_start = 0;
	o->vma_end = 8;
	o->vma_flags = 32;
	o->vma_anon_vma = 88;
	o->vma_ops = 96;
	o->vma_pgoff = 104;
	o->vma_file = 112;
	o->vma_private_data = 120;
	o->vma_anon_name = 40;
	o->anon_vma_name_name = 4;
	o->special_mapping_name = 0;
	o->file_mnt = 16;
	o->file_dentry = 24;
	o->file_inode = 32;
	o->dentry_hash_pprev = 16;
	o->dentry_parent = 24;
	o->dentry_name_len = 36;
	o->dentry_name = 40;
	o->dentry_op = 96;
	o->dentry_op_dname = 72;
	o->inode_sb = 40;
	o->inode_mapping = 48;
	o->inode_ino = 64;
	o->inode_size = 80;
	o->inode_generation = 592;
	o->sb_dev = 16;
	o->vfsmount_root = 0;
	o->mount_parent = 16;
	o->mount_mountpoint = 24;
	o->mount_mnt = 32;
}

static void check(const struct ivm_vma *v, uint64_t *last_end)
{
	if (v->start >= v->end || (v->start | v->end) & 4095 ||
	    v->start < *last_end)
		abort();
	*last_end = v->end;
	if (ivm_vma_is_file(v) != (v->path != NULL))
		abort();
	if (v->path && strnlen(v->path, IVM_MM_MAX_PATH) >= IVM_MM_MAX_PATH)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_mm_source src = { 0 };
	struct ivm_mm_maps *maps = NULL;
	struct ivm_guest_file gf;
	struct ivm_error *err;
	struct ivm_vma v;
	struct fuzz_image im;
	uint64_t addr, last_end = 0;
	size_t max, i;

	if (size < 9 || size - 9 > FUZZ_MAX_IMAGE ||
	    !fuzz_image_init(&im, FUZZ_BASE, data + 9, size - 9))
		return 0;
	layout_6_1(&src.off, data[0] & 1);
	max = data[0] >> 1 ? (size_t)(data[0] >> 1) + 1 : 0;
	memcpy(&addr, data + 1, 8);
	src.kmem = im.reader;
	/* Reachable from the image, so the fuzzer can name them. */
	src.special_vmops = FUZZ_BASE + 0x40;
	src.anon_inode_dname = FUZZ_BASE + 0x48;

	err = ivm_mm_maps_read(&src, FUZZ_BASE, max, &maps);
	if (!err) {
		if (max && ivm_mm_maps_count(maps) > max)
			abort();
		for (i = 0; i < ivm_mm_maps_count(maps); i++)
			check(ivm_mm_maps_get(maps, i), &last_end);
		if (ivm_mm_maps_get(maps, i))
			abort();
		ivm_mm_maps_exe(maps, NULL);
		ivm_mm_maps_find(maps, addr);
	}
	ivm_mm_maps_destroy(maps);
	ivm_error_destroy(err);

	err = ivm_mm_vma_at(&src, FUZZ_BASE, addr, &v);
	if (!err && (addr < v.start || addr >= v.end || v.path || v.name))
		abort();
	ivm_error_destroy(err);
	err = ivm_mm_exe_file(&src, FUZZ_BASE, &gf);
	ivm_error_destroy(err);
	fuzz_image_fini(&im);
	return 0;
}
