/* SPDX-License-Identifier: MIT */
/*
 * Synthetic guest kernel memory for the VMA walk and page-cache tests: a
 * sparse set of kernel-address regions (anything outside them faults),
 * and builders that lay out mm_structs, maple trees or VMA lists, files,
 * dentries, mounts, inodes and page-cache xarrays at the offsets the code
 * under test finds in a BTF — the guest's real 6.1 BTF (when the image
 * cache has its vmlinux) or a hand-built one of another layout — so what
 * is tested is the walk, not a copy of its constants.
 */
#ifndef IVM_TEST_SYNTH_MM_H
#define IVM_TEST_SYNTH_MM_H

#include <criterion/criterion.h>
#include <bpf/btf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/gfile.h"
#include "kernel/mm_maps.h"

#define SYNTH_VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"

#define SKM_MAX_REGIONS 8192
#define SKM_SLAB 0xffff888000100000ull	/* where objects are carved */
#define SKM_POB 0xffff888000000000ull	/* the direct map */
#define SKM_VMEMMAP 0xffffea0000000000ull

struct skm_region {
	uint64_t va;
	size_t size;
	uint8_t *buf;
	bool poisoned;		/* reads fault */
};

struct skm {
	struct skm_region r[SKM_MAX_REGIONS];
	size_t nr;
	uint64_t next;
	unsigned long reads;
};

static inline void skm_init(struct skm *k)
{
	k->nr = 0;
	k->next = SKM_SLAB;
	k->reads = 0;
}

static inline void skm_fini(struct skm *k)
{
	size_t i;

	for (i = 0; i < k->nr; i++)
		free(k->r[i].buf);
	k->nr = 0;
}

/* A zeroed region at va (must not overlap another). */
static inline uint8_t *skm_region_at(struct skm *k, uint64_t va, size_t size)
{
	struct skm_region *r;

	cr_assert(k->nr < SKM_MAX_REGIONS, "synthetic memory: too many regions");
	r = &k->r[k->nr++];
	r->va = va;
	r->size = size;
	r->buf = calloc(1, size);
	r->poisoned = false;
	cr_assert(r->buf);
	return r->buf;
}

/* A new object of size bytes aligned to align, with a gap after it. */
static inline uint64_t skm_alloc(struct skm *k, size_t size, size_t align)
{
	uint64_t va = (k->next + align - 1) & ~(uint64_t)(align - 1);

	skm_region_at(k, va, size);
	k->next = va + size + 64;
	return va;
}

static inline struct skm_region *skm_find(struct skm *k, uint64_t va,
					  size_t len)
{
	size_t i;

	for (i = 0; i < k->nr; i++) {
		struct skm_region *r = &k->r[i];

		if (va >= r->va && len <= r->size && va - r->va <= r->size - len)
			return r;
	}
	return NULL;
}

static inline uint8_t *skm_at(struct skm *k, uint64_t va, size_t len)
{
	struct skm_region *r = skm_find(k, va, len);

	cr_assert(r, "synthetic memory: no region for 0x%llx+%zu",
		  (unsigned long long)va, len);
	return r->buf + (va - r->va);
}

static inline void skm_w64(struct skm *k, uint64_t va, uint64_t v)
{
	memcpy(skm_at(k, va, 8), &v, 8);
}

static inline void skm_w32(struct skm *k, uint64_t va, uint32_t v)
{
	memcpy(skm_at(k, va, 4), &v, 4);
}

static inline void skm_w8(struct skm *k, uint64_t va, uint8_t v)
{
	*skm_at(k, va, 1) = v;
}

static inline void skm_poison(struct skm *k, uint64_t va)
{
	struct skm_region *r = skm_find(k, va, 1);

	cr_assert(r);
	r->poisoned = true;
}

static inline struct ivm_error *skm_read(void *ctx, uint64_t va, void *buf,
					 size_t len)
{
	struct skm *k = ctx;
	struct skm_region *r = skm_find(k, va, len);

	k->reads++;
	if (!r || r->poisoned)
		return ivm_error_fault(va, "synthetic fault at 0x%llx",
				       (unsigned long long)va);
	memcpy(buf, r->buf + (va - r->va), len);
	return NULL;
}

/* ---- BTF ---------------------------------------------------------------- */

/* The guest's own 6.1 BTF, loaded once; NULL when the cache lacks it. */
static inline struct ivm_btf *synth_real_btf(void)
{
	static struct ivm_btf *btf;
	static bool tried;
	struct ivm_error *err;

	if (!tried) {
		tried = true;
		if (access(SYNTH_VMLINUX, R_OK))
			return NULL;
		err = ivm_btf_load_file(SYNTH_VMLINUX, &btf);
		cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	}
	return btf;
}

/*
 * A hand-built BTF of everything the walk and the page cache read, at
 * offsets unlike any kernel's, with smaller maple nodes (8 and 6 slots)
 * than 6.1's; list: the VMA list of kernels before 6.1, no maple tree.
 */
static inline struct ivm_btf *synth_hand_btf(bool list)
{
	struct btf *b = btf__new_empty();
	int t_u8, t_u32, t_int, t_ulong, t_ptr, t_char, t_hlist_bl, t_qstr;
	int t_path, t_vfsmount, t_xarray, t_meta, t_mt, id;
	struct ivm_btf *btf;
	struct ivm_error *err;
	const void *raw;
	uint32_t size;

	t_u8 = btf__add_int(b, "unsigned char", 1, 0);
	t_u32 = btf__add_int(b, "unsigned int", 4, 0);
	t_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	t_ulong = btf__add_int(b, "long unsigned int", 8, 0);
	t_char = btf__add_int(b, "char", 1, BTF_INT_CHAR);
	t_ptr = btf__add_ptr(b, 0);

	t_hlist_bl = btf__add_struct(b, "hlist_bl_node", 16);
	btf__add_field(b, "next", t_ptr, 0, 0);
	btf__add_field(b, "pprev", t_ptr, 64, 0);
	/* qstr: { union { struct { hash, len }; hash_len }; name } */
	id = btf__add_struct(b, NULL, 8);
	btf__add_field(b, "hash", t_u32, 0, 0);
	btf__add_field(b, "len", t_u32, 32, 0);
	btf__add_union(b, NULL, 8);
	btf__add_field(b, NULL, id, 0, 0);
	btf__add_field(b, "hash_len", t_ulong, 0, 0);
	t_qstr = btf__add_struct(b, "qstr", 16);
	btf__add_field(b, NULL, id + 1, 0, 0);
	btf__add_field(b, "name", t_ptr, 64, 0);
	t_path = btf__add_struct(b, "path", 16);
	btf__add_field(b, "mnt", t_ptr, 0, 0);
	btf__add_field(b, "dentry", t_ptr, 64, 0);

	btf__add_struct(b, "dentry", 0xa0);
	btf__add_field(b, "d_flags", t_u32, 0, 0);
	btf__add_field(b, "d_op", t_ptr, 0x10 * 8, 0);
	btf__add_field(b, "d_name", t_qstr, 0x28 * 8, 0);
	btf__add_field(b, "d_hash", t_hlist_bl, 0x48 * 8, 0);
	btf__add_field(b, "d_parent", t_ptr, 0x68 * 8, 0);
	btf__add_struct(b, "dentry_operations", 0x50);
	btf__add_field(b, "d_revalidate", t_ptr, 0, 0);
	btf__add_field(b, "d_dname", t_ptr, 0x38 * 8, 0);
	btf__add_struct(b, "inode", 0x100);
	btf__add_field(b, "i_mode", t_u32, 0, 0);
	btf__add_field(b, "i_generation", t_u32, 0x1c * 8, 0);
	btf__add_field(b, "i_size", t_ulong, 0x30 * 8, 0);
	btf__add_field(b, "i_mapping", t_ptr, 0x48 * 8, 0);
	btf__add_field(b, "i_sb", t_ptr, 0x58 * 8, 0);
	btf__add_field(b, "i_ino", t_ulong, 0x90 * 8, 0);
	btf__add_struct(b, "super_block", 0x40);
	btf__add_field(b, "s_blocksize", t_ulong, 0, 0);
	btf__add_field(b, "s_dev", t_u32, 0x24 * 8, 0);
	t_vfsmount = btf__add_struct(b, "vfsmount", 0x20);
	btf__add_field(b, "mnt_sb", t_ptr, 0, 0);
	btf__add_field(b, "mnt_root", t_ptr, 0x10 * 8, 0);
	btf__add_struct(b, "mount", 0x80);
	btf__add_field(b, "mnt_mountpoint", t_ptr, 0x8 * 8, 0);
	btf__add_field(b, "mnt", t_vfsmount, 0x20 * 8, 0);
	btf__add_field(b, "mnt_parent", t_ptr, 0x48 * 8, 0);
	btf__add_struct(b, "file", 0x60);
	btf__add_field(b, "f_inode", t_ptr, 0x8 * 8, 0);
	btf__add_field(b, "f_path", t_path, 0x30 * 8, 0);
	btf__add_struct(b, "vm_special_mapping", 0x20);
	btf__add_field(b, "pages", t_ptr, 0, 0);
	btf__add_field(b, "name", t_ptr, 0x10 * 8, 0);
	id = btf__add_array(b, t_int, t_char, 0);
	btf__add_struct(b, "anon_vma_name", 8);
	btf__add_field(b, "kref", t_int, 0, 0);
	btf__add_field(b, "name", id, 4 * 8, 0);

	btf__add_struct(b, "vm_area_struct", 0xc0);
	btf__add_field(b, "vm_file", t_ptr, 0x08 * 8, 0);
	btf__add_field(b, "vm_pgoff", t_ulong, 0x18 * 8, 0);
	btf__add_field(b, "vm_end", t_ulong, 0x28 * 8, 0);
	btf__add_field(b, "vm_start", t_ulong, 0x30 * 8, 0);
	btf__add_field(b, "vm_flags", t_ulong, 0x40 * 8, 0);
	btf__add_field(b, "anon_vma", t_ptr, 0x50 * 8, 0);
	btf__add_field(b, "vm_ops", t_ptr, 0x60 * 8, 0);
	btf__add_field(b, "vm_private_data", t_ptr, 0x70 * 8, 0);
	btf__add_field(b, "anon_name", t_ptr, 0x78 * 8, 0);
	if (list)
		btf__add_field(b, "vm_next", t_ptr, 0x98 * 8, 0);

	if (!list) {
		int t_pivot8, t_slot8, t_pivot6, t_slot6, t_gap6, t_pad, t_dslot;

		t_meta = btf__add_struct(b, "maple_metadata", 2);
		btf__add_field(b, "end", t_u8, 0, 0);
		btf__add_field(b, "gap", t_u8, 8, 0);
		/* 8-slot range nodes: parent, pivot[7], slot[8] | meta. */
		t_pivot8 = btf__add_array(b, t_int, t_ulong, 7);
		t_slot8 = btf__add_array(b, t_int, t_ptr, 8);
		t_pad = btf__add_array(b, t_int, t_ptr, 7);
		id = btf__add_struct(b, NULL, 58);
		btf__add_field(b, "pad", t_pad, 0, 0);
		btf__add_field(b, "meta", t_meta, 56 * 8, 0);
		btf__add_union(b, NULL, 64);
		btf__add_field(b, "slot", t_slot8, 0, 0);
		btf__add_field(b, NULL, id, 0, 0);
		btf__add_struct(b, "maple_range_64", 128);
		btf__add_field(b, "parent", t_ptr, 0, 0);
		btf__add_field(b, "pivot", t_pivot8, 64, 0);
		btf__add_field(b, NULL, id + 1, 64 * 8, 0);
		/* 6-slot allocation range nodes. */
		t_pivot6 = btf__add_array(b, t_int, t_ulong, 5);
		t_slot6 = btf__add_array(b, t_int, t_ptr, 6);
		t_gap6 = btf__add_array(b, t_int, t_ulong, 6);
		btf__add_struct(b, "maple_arange_64", 144);
		btf__add_field(b, "parent", t_ptr, 0, 0);
		btf__add_field(b, "pivot", t_pivot6, 64, 0);
		btf__add_field(b, "slot", t_slot6, 48 * 8, 0);
		btf__add_field(b, "gap", t_gap6, 96 * 8, 0);
		btf__add_field(b, "meta", t_meta, 142 * 8, 0);
		t_dslot = btf__add_array(b, t_int, t_ptr, 31);
		btf__add_struct(b, "maple_node", 256);
		btf__add_field(b, "parent", t_ptr, 0, 0);
		btf__add_field(b, "slot", t_dslot, 64, 0);
		btf__add_enum(b, "maple_type", 4);
		btf__add_enum_value(b, "maple_dense", 0);
		btf__add_enum_value(b, "maple_leaf_64", 1);
		btf__add_enum_value(b, "maple_range_64", 2);
		btf__add_enum_value(b, "maple_arange_64", 3);
		t_mt = btf__add_struct(b, "maple_tree", 24);
		btf__add_field(b, "ma_lock", t_u32, 0, 0);
		btf__add_field(b, "ma_flags", t_u32, 32, 0);
		btf__add_field(b, "ma_root", t_ptr, 128, 0);
	}
	btf__add_struct(b, "mm_struct", 0x200);
	btf__add_field(b, "map_count", t_int, 0x10 * 8, 0);
	if (list)
		btf__add_field(b, "mmap", t_ptr, 0x20 * 8, 0);
	else
		btf__add_field(b, "mm_mt", t_mt, 0x40 * 8, 0);
	btf__add_field(b, "start_brk", t_ulong, 0x80 * 8, 0);
	btf__add_field(b, "brk", t_ulong, 0x88 * 8, 0);
	btf__add_field(b, "start_stack", t_ulong, 0x90 * 8, 0);
	btf__add_field(b, "exe_file", t_ptr, 0x1f0 * 8, 0);

	/* The page cache. */
	t_xarray = btf__add_struct(b, "xarray", 16);
	btf__add_field(b, "xa_lock", t_u32, 0, 0);
	btf__add_field(b, "xa_head", t_ptr, 64, 0);
	btf__add_struct(b, "address_space", 0x40);
	btf__add_field(b, "host", t_ptr, 0, 0);
	btf__add_field(b, "i_pages", t_xarray, 0x18 * 8, 0);
	id = btf__add_array(b, t_int, t_ptr, 64);
	btf__add_struct(b, "xa_node", 0x220);
	btf__add_field(b, "count", t_u8, 0, 0);
	btf__add_field(b, "shift", t_u8, 8, 0);
	btf__add_field(b, "slots", id, 0x18 * 8, 0);
	btf__add_struct(b, "page", 0x50);
	btf__add_field(b, "index", t_ulong, 0x10 * 8, 0);
	btf__add_field(b, "flags", t_ulong, 0x20 * 8, 0);
	btf__add_field(b, "mapping", t_ptr, 0x30 * 8, 0);
	btf__add_enum(b, "pageflags", 4);
	btf__add_enum_value(b, "PG_locked", 0);
	btf__add_enum_value(b, "PG_referenced", 1);
	btf__add_enum_value(b, "PG_uptodate", 5);

	raw = btf__raw_data(b, &size);
	cr_assert_not_null(raw);
	err = ivm_btf_load_blob(raw, size, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	btf__free(b);
	return btf;
}

/*
 * The BTFs a test runs with: the hand-built maple layout, and 6.1's when
 * the image cache has it.  Kept for the test process's life.
 */
static inline size_t synth_btfs(struct ivm_btf **out)
{
	static struct ivm_btf *hand;
	size_t n = 0;

	if (!hand)
		hand = synth_hand_btf(false);
	out[n++] = hand;
	if (synth_real_btf())
		out[n++] = synth_real_btf();
	return n;
}

/* ---- a guest: files, mounts, VMAs, an mm -------------------------------- */

/* vm_flags bits. */
#define SW_R 0x1ull
#define SW_W 0x2ull
#define SW_X 0x4ull
#define SW_MAYSHARE 0x80ull

struct sworld {
	struct skm k;
	struct ivm_btf *btf;
	struct ivm_mm_source src;
	struct ivm_gfile_config gcfg;
	const struct ivm_mm_offsets *o;
	uint64_t root_mount, root_dentry;
	uint64_t mm;
	uint32_t node_size;
};

static inline void sw_init(struct sworld *w, struct ivm_btf *btf)
{
	struct ivm_error *err;
	uint64_t sb;

	memset(w, 0, sizeof(*w));
	skm_init(&w->k);
	w->btf = btf;
	err = ivm_mm_offsets_from_btf(btf, &w->src.off);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	w->src.kmem.read = skm_read;
	w->src.kmem.ctx = &w->k;
	w->o = &w->src.off;
	err = ivm_gfile_offsets_from_btf(btf, &w->gcfg.off);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	w->gcfg.kmem = w->src.kmem;
	w->gcfg.page_offset_base = SKM_POB;
	w->gcfg.vmemmap_base = SKM_VMEMMAP;
	w->gcfg.max_pfn = 0x100000;
	w->node_size = w->o->maple_node_size;
	/* The root file system: a mount that is its own parent. */
	sb = skm_alloc(&w->k, 0x800, 64);
	skm_w32(&w->k, sb + w->o->sb_dev, 2);
	w->root_mount = skm_alloc(&w->k, w->o->mount_mnt + 0x80, 64);
	w->root_dentry = skm_alloc(&w->k, 0x100, 64);
	skm_w64(&w->k, w->root_dentry + w->o->dentry_parent, w->root_dentry);
	skm_w64(&w->k, w->root_mount + w->o->mount_parent, w->root_mount);
	skm_w64(&w->k, w->root_mount + w->o->mount_mountpoint,
		w->root_dentry);
	skm_w64(&w->k, w->root_mount + w->o->mount_mnt + w->o->vfsmount_root,
		w->root_dentry);
	w->mm = skm_alloc(&w->k, 0x800, 64);
}

static inline void sw_fini(struct sworld *w)
{
	skm_fini(&w->k);
}

/* The vfsmount of a mount (what file->f_path.mnt points to). */
static inline uint64_t sw_vfsmount(const struct sworld *w, uint64_t mount)
{
	return mount + w->o->mount_mnt;
}

/* A string in kernel memory (in a region of at least 64 bytes). */
static inline uint64_t sw_string(struct sworld *w, const char *s)
{
	uint64_t va = skm_alloc(&w->k, strlen(s) < 64 ? 64 : strlen(s) + 1,
				8);

	memcpy(skm_at(&w->k, va, strlen(s) + 1), s, strlen(s) + 1);
	return va;
}

/* A hashed dentry named name under parent. */
static inline uint64_t sw_dentry(struct sworld *w, uint64_t parent,
				 const char *name)
{
	uint64_t d = skm_alloc(&w->k, 0x100, 64);

	skm_w64(&w->k, d + w->o->dentry_parent, parent ? parent : d);
	skm_w32(&w->k, d + w->o->dentry_name_len, (uint32_t)strlen(name));
	skm_w64(&w->k, d + w->o->dentry_name, sw_string(w, name));
	skm_w64(&w->k, d + w->o->dentry_hash_pprev, d + 8);
	return d;
}

/* A mount of a new file system on mountpoint (in parent); its root. */
static inline uint64_t sw_mount(struct sworld *w, uint64_t parent,
				uint64_t mountpoint, uint64_t *root)
{
	uint64_t m = skm_alloc(&w->k, w->o->mount_mnt + 0x80, 64);

	*root = sw_dentry(w, 0, "/");
	skm_w64(&w->k, m + w->o->mount_parent, parent);
	skm_w64(&w->k, m + w->o->mount_mountpoint, mountpoint);
	skm_w64(&w->k, m + w->o->mount_mnt + w->o->vfsmount_root, *root);
	return m;
}

struct sw_file {
	uint64_t file, inode, mapping, sb;
};

/* An open file of inode ino (on a device dev) at (mount, dentry). */
static inline struct sw_file sw_file(struct sworld *w, uint64_t mount,
				     uint64_t dentry, uint64_t ino,
				     uint32_t dev, uint64_t size)
{
	struct sw_file f;

	f.sb = skm_alloc(&w->k, 0x800, 64);
	skm_w32(&w->k, f.sb + w->o->sb_dev, dev);
	f.mapping = skm_alloc(&w->k, 0x100, 64);
	f.inode = skm_alloc(&w->k, 0x400, 64);
	skm_w64(&w->k, f.inode + w->o->inode_ino, ino);
	skm_w64(&w->k, f.inode + w->o->inode_sb, f.sb);
	skm_w64(&w->k, f.inode + w->o->inode_mapping, f.mapping);
	skm_w64(&w->k, f.inode + w->o->inode_size, size);
	if (w->o->inode_generation != IVM_KOFF_NONE)
		skm_w32(&w->k, f.inode + w->o->inode_generation,
			(uint32_t)ino * 3);
	f.file = skm_alloc(&w->k, 0x100, 64);
	skm_w64(&w->k, f.file + w->o->file_inode, f.inode);
	skm_w64(&w->k, f.file + w->o->file_mnt, sw_vfsmount(w, mount));
	skm_w64(&w->k, f.file + w->o->file_dentry, dentry);
	return f;
}

/* A VMA; file 0 for anonymous memory. */
static inline uint64_t sw_vma(struct sworld *w, uint64_t start, uint64_t end,
			      uint64_t flags, uint64_t pgoff, uint64_t file)
{
	uint64_t v = skm_alloc(&w->k, w->o->vma_size, 64);

	skm_w64(&w->k, v + w->o->vma_start, start);
	skm_w64(&w->k, v + w->o->vma_end, end);
	skm_w64(&w->k, v + w->o->vma_flags, flags);
	skm_w64(&w->k, v + w->o->vma_pgoff, pgoff);
	skm_w64(&w->k, v + w->o->vma_file, file);
	return v;
}

static inline uint64_t sw_vma_start(struct sworld *w, uint64_t v)
{
	uint64_t x;

	memcpy(&x, skm_at(&w->k, v + w->o->vma_start, 8), 8);
	return x;
}

static inline uint64_t sw_vma_end(struct sworld *w, uint64_t v)
{
	uint64_t x;

	memcpy(&x, skm_at(&w->k, v + w->o->vma_end, 8), 8);
	return x;
}

/* mm->brk and friends. */
static inline void sw_brk(struct sworld *w, uint64_t start_brk, uint64_t brk,
			  uint64_t start_stack)
{
	skm_w64(&w->k, w->mm + w->o->mm_start_brk, start_brk);
	skm_w64(&w->k, w->mm + w->o->mm_brk, brk);
	skm_w64(&w->k, w->mm + w->o->mm_start_stack, start_stack);
}

/* The old layout: vmas[] (in address order) as mm->mmap, vm_next. */
static inline void sw_list(struct sworld *w, const uint64_t *vmas, size_t n)
{
	size_t i;

	skm_w64(&w->k, w->mm + w->o->mm_mmap, n ? vmas[0] : 0);
	for (i = 0; i < n; i++)
		skm_w64(&w->k, vmas[i] + w->o->vma_next,
			i + 1 < n ? vmas[i + 1] : 0);
}

/* ---- maple trees -------------------------------------------------------- */

struct sw_entry {
	uint64_t lo, hi, val;	/* val 0: a gap */
};

struct sw_child {
	uint64_t enode, min, max, node;
};

static inline uint64_t sw_enode(uint64_t node, uint32_t type)
{
	return node | (uint64_t)type << 3 | 4;
}

/* A node of the given type with entries e[0..n) (n <= its slots). */
static inline struct sw_child sw_node(struct sworld *w, uint32_t type,
				      const struct sw_entry *e, size_t n)
{
	const struct ivm_mm_offsets *o = w->o;
	bool arange = type == o->maple_arange_64;
	uint32_t pivot = arange ? o->ma64_pivot : o->mr64_pivot;
	uint32_t slot = arange ? o->ma64_slot : o->mr64_slot;
	uint32_t nslots = arange ? o->ma64_nr_slots : o->mr64_nr_slots;
	uint32_t meta = arange ? o->ma64_meta_end : o->mr64_meta_end;
	struct sw_child c;
	size_t i;

	cr_assert(n >= 1 && n <= nslots);
	c.node = skm_alloc(&w->k, w->node_size, 256);
	for (i = 0; i < n; i++) {
		skm_w64(&w->k, c.node + slot + 8 * i, e[i].val);
		if (i < nslots - 1)
			skm_w64(&w->k, c.node + pivot + 8 * i, e[i].hi);
	}
	/* Range nodes keep it in their last slot, when that is free. */
	if ((arange || n < nslots) && meta != IVM_KOFF_NONE)
		skm_w8(&w->k, c.node + meta, (uint8_t)(n - 1));
	c.enode = sw_enode(c.node, type);
	c.min = e[0].lo;
	c.max = e[n - 1].hi;
	return c;
}

/*
 * A maple tree of vmas[] (address order) in mm->mm_mt, as the kernel
 * builds it: leaves of leaf_fill ranges (gaps and VMAs alternating), then
 * allocation-range nodes of node_fill children up to one root.  Returns
 * the root node's address.
 */
static inline uint64_t sw_maple(struct sworld *w, const uint64_t *vmas,
				size_t n, size_t leaf_fill, size_t node_fill)
{
	const struct ivm_mm_offsets *o = w->o;
	struct sw_entry *e = calloc(2 * n + 2, sizeof(*e));
	struct sw_child *c = calloc(2 * n + 2, sizeof(*c));
	size_t ne = 0, nc = 0, i;
	uint64_t cur = 0;

	cr_assert(e && c);
	for (i = 0; i < n; i++) {
		uint64_t s = sw_vma_start(w, vmas[i]), end = sw_vma_end(w, vmas[i]);

		if (s > cur)
			e[ne++] = (struct sw_entry){ cur, s - 1, 0 };
		e[ne++] = (struct sw_entry){ s, end - 1, vmas[i] };
		cur = end;
	}
	e[ne++] = (struct sw_entry){ cur, UINT64_MAX, 0 };
	for (i = 0; i < ne; i += leaf_fill) {
		size_t k = ne - i < leaf_fill ? ne - i : leaf_fill;

		c[nc++] = sw_node(w, o->maple_leaf_64, e + i, k);
	}
	while (nc > 1) {
		size_t m = 0;

		for (i = 0; i < nc; i += node_fill) {
			size_t k = nc - i < node_fill ? nc - i : node_fill, j;
			struct sw_entry pe[64];
			struct sw_child p;

			for (j = 0; j < k; j++)
				pe[j] = (struct sw_entry){ c[i + j].min,
							   c[i + j].max,
							   c[i + j].enode };
			p = sw_node(w, o->maple_arange_64, pe, k);
			for (j = 0; j < k; j++)
				skm_w64(&w->k, c[i + j].node,
					p.node | j << 3 | 6);
			c[m++] = p;
		}
		nc = m;
	}
	/* The root's parent is the tree, marked by bit 0. */
	skm_w64(&w->k, c[0].node, w->mm | 1);
	skm_w64(&w->k, w->mm + o->mm_mt_root, c[0].enode | 2);
	free(e);
	i = c[0].node;
	free(c);
	return i;
}

/* ---- the page cache ----------------------------------------------------- */

/* The struct page of frame pfn, and the frame's bytes (direct map). */
static inline uint64_t sw_page(struct sworld *w, uint64_t pfn,
			       uint64_t mapping, uint64_t index,
			       bool uptodate, uint8_t fill)
{
	const struct ivm_gfile_offsets *g = &w->gcfg.off;
	uint64_t page = SKM_VMEMMAP + pfn * g->page_size;
	uint8_t *data;

	if (!skm_find(&w->k, page, g->page_size))
		skm_region_at(&w->k, page, g->page_size);
	skm_w64(&w->k, page + g->page_mapping, mapping);
	skm_w64(&w->k, page + g->page_index, index);
	skm_w64(&w->k, page + g->page_flags,
		uptodate ? 1ull << g->pg_uptodate : 0);
	data = skm_find(&w->k, SKM_POB + (pfn << 12), 4096) ?
	       skm_at(&w->k, SKM_POB + (pfn << 12), 4096) :
	       skm_region_at(&w->k, SKM_POB + (pfn << 12), 4096);
	memset(data, fill, 4096);
	return page;
}

/* An xa_node of the given shift; its slots are set with sw_xa_set. */
static inline uint64_t sw_xa_node(struct sworld *w, uint8_t shift)
{
	uint64_t n = skm_alloc(&w->k, w->gcfg.off.xa_node_slots +
				      (8u << w->gcfg.off.xa_chunk_shift), 64);

	skm_w8(&w->k, n + w->gcfg.off.xa_node_shift, shift);
	return n;
}

static inline void sw_xa_set(struct sworld *w, uint64_t node, unsigned slot,
			     uint64_t entry)
{
	skm_w64(&w->k, node + w->gcfg.off.xa_node_slots + 8 * slot, entry);
}

/* An entry pointing at a node. */
static inline uint64_t sw_xa_mknode(uint64_t node)
{
	return node | 2;
}

static inline void sw_xa_head(struct sworld *w, uint64_t mapping,
			      uint64_t head)
{
	skm_w64(&w->k, mapping + w->gcfg.off.mapping_xa_head, head);
}

#endif /* IVM_TEST_SYNTH_MM_H */
