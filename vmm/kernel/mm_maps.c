// SPDX-License-Identifier: MIT
/*
 * A guest process's VMAs, read from its mm_struct: the maple tree of 6.1+
 * or the vm_next list before it, each VMA's file identified and its path
 * rebuilt from the dentry chain.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/hexnum.h"
#include "kernel/mm_int.h"
#include "kernel/mm_maps.h"

/* vm_flags bits of include/linux/mm.h, unchanged since 2.6. */
#define VM_READ 0x1ull
#define VM_WRITE 0x2ull
#define VM_EXEC 0x4ull
#define VM_MAYSHARE 0x80ull

#define PAGE_SHIFT 12

/* Longest name a vm_special_mapping or an anon_vma_name has (80). */
#define MAX_VMA_NAME 96

/* Struct files remembered during one walk (VMAs of one file share one). */
#define FILE_MEMO 32

struct file_memo {
	uint64_t file;			/* 0: empty */
	struct ivm_guest_file gf;
	const char *path;
	enum ivm_vma_path_state state;
};

struct ivm_mm_maps {
	struct ivm_vma *vmas;
	size_t nr, cap;
	struct ivm_error *error;	/* why the list ended early */
	char **strings;			/* paths and names, owned */
	size_t nr_strings, cap_strings;
	size_t string_bytes;		/* theirs, NULs included */
	bool has_exe;
	struct ivm_guest_file exe;
	const char *exe_path;
};

/* What the walk reads of the mm_struct. */
struct mm_fields {
	uint64_t root;			/* mm_mt.ma_root, or mmap */
	uint64_t exe_file;
	uint64_t start_brk, brk, start_stack;
	bool has_brk;
};

struct walk {
	const struct ivm_mm_source *src;
	struct ivm_mm_maps *maps;
	struct mm_fields mm;
	size_t max_vmas;
	size_t nodes, max_nodes;
	uint64_t last_end;		/* end of the last VMA kept */
	bool stopped;
	struct file_memo memo[FILE_MEMO];
};

/* ---- the list and its strings ------------------------------------------ */

static const char *keep_string(struct ivm_mm_maps *maps, const char *s)
{
	char *copy;

	if (maps->nr_strings == maps->cap_strings) {
		size_t cap = maps->cap_strings ? 2 * maps->cap_strings : 16;
		char **n = realloc(maps->strings, cap * sizeof(*n));

		if (!n)
			return NULL;
		maps->strings = n;
		maps->cap_strings = cap;
	}
	copy = strdup(s);
	if (copy) {
		maps->strings[maps->nr_strings++] = copy;
		maps->string_bytes += strlen(copy) + 1;
	}
	return copy;
}

static void walk_stop(struct walk *w, struct ivm_error *err)
{
	w->stopped = true;
	if (!w->maps->error)
		w->maps->error = err;
	else
		ivm_error_destroy(err);
}

/* The file's identity and path, once per walk per struct file. */
static struct file_memo *file_of(struct walk *w, uint64_t file,
				 struct ivm_error **errp)
{
	struct file_memo *m = &w->memo[ivm_hash_addr(file) % FILE_MEMO];
	struct file_fields ff;
	struct ivm_error *err;
	char *path;

	*errp = NULL;
	if (m->file == file)
		return m;
	m->file = 0;
	err = mm_read_file_fields(w->src, file, &ff);
	if (!err)
		err = mm_read_guest_file(w->src, file, ff.inode, &m->gf);
	if (!err)
		err = mm_file_path(w->src, &ff, &path, &m->state);
	if (err) {
		*errp = err;
		return NULL;
	}
	m->path = keep_string(w->maps, path);
	free(path);
	if (!m->path) {
		*errp = &ivm_enomem;
		return NULL;
	}
	m->file = file;
	return m;
}

/* ---- VMAs --------------------------------------------------------------- */

/* The bytes of vm_area_struct read for one VMA. */
static uint32_t vma_span(const struct ivm_mm_offsets *o)
{
	const uint32_t f[] = {
		o->vma_start, o->vma_end, o->vma_flags, o->vma_pgoff,
		o->vma_file, o->vma_next, o->vma_anon_vma, o->vma_ops,
		o->vma_private_data, o->vma_anon_name,
	};
	uint32_t hi = 0;
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i] != IVM_KOFF_NONE && f[i] + 8 > hi)
			hi = f[i] + 8;
	return hi;
}

#define VMA_BUF 512

/* The fields of a vm_area_struct; file identity not yet read. */
static struct ivm_error *read_vma(const struct ivm_mm_source *src,
				  uint64_t addr, uint8_t *b, struct ivm_vma *v)
{
	const struct ivm_mm_offsets *o = &src->off;
	uint32_t span = vma_span(o);
	struct ivm_error *err;
	uint64_t flags, file;

	if (span > VMA_BUF)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"vm_area_struct: %u bytes to read",
					span);
	if (addr & 7)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"VMA pointer 0x%llx is not aligned",
					(unsigned long long)addr);
	err = mm_kread(src, addr, b, span);
	if (err)
		return ivm_error_wrap(err, "reading VMA 0x%llx",
				      (unsigned long long)addr);
	memset(v, 0, sizeof(*v));
	v->vma = addr;
	v->start = ivm_le64(b + o->vma_start);
	v->end = ivm_le64(b + o->vma_end);
	if (v->start >= v->end || (v->start | v->end) & PAGE_MASK_4K)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"VMA 0x%llx: bad range 0x%llx-0x%llx",
					(unsigned long long)addr,
					(unsigned long long)v->start,
					(unsigned long long)v->end);
	flags = ivm_le64(b + o->vma_flags);
	v->prot = (flags & VM_READ ? IVM_VMA_READ : 0) |
		  (flags & VM_WRITE ? IVM_VMA_WRITE : 0) |
		  (flags & VM_EXEC ? IVM_VMA_EXEC : 0) |
		  (flags & VM_MAYSHARE ? IVM_VMA_SHARED : 0);
	if (o->vma_anon_vma != IVM_KOFF_NONE &&
	    ivm_le64(b + o->vma_anon_vma))
		v->prot |= IVM_VMA_ANON_PAGES;
	file = ivm_le64(b + o->vma_file);
	if (file && !mm_kernel_ptr(src, file))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"VMA 0x%llx: vm_file 0x%llx is not a kernel address",
					(unsigned long long)addr,
					(unsigned long long)file);
	v->file.file = file;
	if (file)
		v->pgoff = ivm_le64(b + o->vma_pgoff) << PAGE_SHIFT;
	return NULL;
}

/* The name /proc/PID/maps gives an anonymous VMA, or NULL. */
static const char *anon_name(struct walk *w, const uint8_t *b,
			     const struct ivm_vma *v)
{
	const struct ivm_mm_source *src = w->src;
	const struct ivm_mm_offsets *o = &src->off;
	char name[MAX_VMA_NAME], full[MAX_VMA_NAME + 8];
	struct ivm_error *err;
	uint64_t ptr;

	if (o->vma_ops != IVM_KOFF_NONE && src->special_vmops &&
	    ivm_le64(b + o->vma_ops) == src->special_vmops) {
		uint64_t sm = ivm_le64(b + o->vma_private_data);

		err = mm_kread_ptr(src, sm + o->special_mapping_name,
				   "vm_special_mapping.name", false, &ptr);
		if (!err)
			err = mm_kread_str(src, ptr, name, sizeof(name));
		if (!err)
			return keep_string(w->maps, name);
		ivm_error_destroy(err);
		return NULL;
	}
	if (w->mm.has_brk && v->start <= w->mm.brk &&
	    v->end >= w->mm.start_brk)
		return "[heap]";
	if (w->mm.has_brk && v->start <= w->mm.start_stack &&
	    v->end >= w->mm.start_stack)
		return "[stack]";
	if (o->vma_anon_name == IVM_KOFF_NONE)
		return NULL;
	ptr = ivm_le64(b + o->vma_anon_name);
	if (!ptr)
		return NULL;
	err = mm_kread_str(src, ptr + o->anon_vma_name_name, name, sizeof(name));
	if (err) {
		ivm_error_destroy(err);
		return NULL;
	}
	snprintf(full, sizeof(full), "[anon:%s]", name);
	return keep_string(w->maps, full);
}

static bool maps_push(struct ivm_mm_maps *maps, const struct ivm_vma *v)
{
	if (maps->nr == maps->cap) {
		size_t cap = maps->cap ? 2 * maps->cap : 64;
		struct ivm_vma *n = realloc(maps->vmas, cap * sizeof(*n));

		if (!n)
			return false;
		maps->vmas = n;
		maps->cap = cap;
	}
	maps->vmas[maps->nr++] = *v;
	return true;
}

/*
 * Read the VMA at addr and add it.  want_start/want_end (want_end 0: no
 * check) are the range its tree slot claims.
 */
static void walk_vma(struct walk *w, uint64_t addr, uint64_t want_start,
		     uint64_t want_end)
{
	uint8_t b[VMA_BUF];
	struct ivm_error *err;
	struct file_memo *m;
	struct ivm_vma v;

	if (w->maps->nr >= w->max_vmas) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "more than %zu VMAs: list cut",
					      w->max_vmas));
		return;
	}
	err = read_vma(w->src, addr, b, &v);
	if (err) {
		walk_stop(w, err);
		return;
	}
	if (want_end && (v.start != want_start || v.end != want_end)) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "VMA 0x%llx is 0x%llx-0x%llx, its tree slot 0x%llx-0x%llx",
					      (unsigned long long)addr,
					      (unsigned long long)v.start,
					      (unsigned long long)v.end,
					      (unsigned long long)want_start,
					      (unsigned long long)want_end));
		return;
	}
	/* Address order, no overlap: also what makes a cycle end. */
	if (v.start < w->last_end) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "VMA 0x%llx at 0x%llx is not after the one before it (ends 0x%llx)",
					      (unsigned long long)addr,
					      (unsigned long long)v.start,
					      (unsigned long long)w->last_end));
		return;
	}
	if (v.file.file) {
		m = file_of(w, v.file.file, &err);
		if (!m) {
			walk_stop(w, err);
			return;
		}
		v.file = m->gf;
		v.path = m->path;
		v.path_state = m->state;
	} else {
		v.name = anon_name(w, b, &v);
	}
	if (!maps_push(w->maps, &v)) {
		walk_stop(w, &ivm_enomem);
		return;
	}
	w->last_end = v.end;
}

/* ---- the maple tree ----------------------------------------------------- */

static bool xa_is_node(uint64_t entry)
{
	return (entry & 3) == 2 && entry > MAPLE_RESERVED_RANGE;
}

/*
 * A child in a non-leaf slot: an encoded node (node | type << 3 | 4, with
 * bits 0-1 clear; only the root pointer has bit 1 set).
 */
static bool child_node(const struct ivm_mm_source *src, uint64_t entry)
{
	return !(entry & 3) && mm_kernel_ptr(src, entry & ~MAPLE_NODE_MASK);
}

/* A node as read: where its pivots and slots are, how many are used. */
struct mnode {
	uint8_t buf[MAPLE_NODE_MASK + 1];
	uint64_t addr;
	uint32_t type;
	bool leaf, dense;
	unsigned int nr_slots, nr_pivots;
	uint32_t pivot, slot;
	unsigned int end;		/* last slot used */
};

static uint64_t node_pivot(const struct mnode *n, unsigned int i)
{
	return ivm_le64(n->buf + n->pivot + 8 * i);
}

static uint64_t node_slot(const struct mnode *n, unsigned int i)
{
	return ivm_le64(n->buf + n->slot + 8 * i);
}

/*
 * Read the node of encoded pointer enode covering [min, max] and find its
 * data end as the kernel's ma_data_end() does.
 */
static struct ivm_error *read_node(const struct ivm_mm_source *src,
				   uint64_t enode, uint64_t max,
				   struct mnode *n)
{
	const struct ivm_mm_offsets *o = &src->off;
	struct ivm_error *err;
	uint32_t meta = IVM_KOFF_NONE;
	uint64_t parent;

	n->addr = enode & ~MAPLE_NODE_MASK;
	n->type = (uint32_t)((enode >> MAPLE_NODE_TYPE_SHIFT) &
			     MAPLE_NODE_TYPE_MASK);
	err = mm_kread(src, n->addr, n->buf, o->maple_node_size);
	if (err)
		return ivm_error_wrap(err, "reading maple node 0x%llx",
				      (unsigned long long)n->addr);
	/* A node taken out of the tree points to itself. */
	parent = ivm_le64(n->buf);
	if ((parent & ~MAPLE_NODE_MASK) == n->addr)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"maple node 0x%llx is dead: the tree changed under the walk",
					(unsigned long long)n->addr);
	n->dense = n->type == o->maple_dense;
	n->leaf = n->dense || n->type == o->maple_leaf_64;
	if (n->dense) {
		n->slot = o->dense_slot;
		n->nr_slots = o->dense_nr_slots;
		n->nr_pivots = 0;
		n->end = n->nr_slots - 1;
		return NULL;
	}
	if (n->type == o->maple_leaf_64 || n->type == o->maple_range_64) {
		n->pivot = o->mr64_pivot;
		n->slot = o->mr64_slot;
		n->nr_slots = o->mr64_nr_slots;
		meta = o->mr64_meta_end;
	} else if (n->type == o->maple_arange_64) {
		n->pivot = o->ma64_pivot;
		n->slot = o->ma64_slot;
		n->nr_slots = o->ma64_nr_slots;
		meta = o->ma64_meta_end;
	} else {
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"maple node 0x%llx: unknown type %u",
					(unsigned long long)n->addr, n->type);
	}
	n->nr_pivots = n->nr_slots - 1;
	if (n->type != o->maple_arange_64 &&
	    node_pivot(n, n->nr_pivots - 1)) {
		/* A full node: the last pivot is the max, or implied. */
		n->end = node_pivot(n, n->nr_pivots - 1) == max ?
			 n->nr_pivots - 1 : n->nr_pivots;
	} else if (meta != IVM_KOFF_NONE) {
		n->end = n->buf[meta];
	} else {
		/* No metadata: the data ends at max, or before a 0 pivot. */
		unsigned int i;

		for (i = 0; i < n->nr_pivots; i++)
			if (node_pivot(n, i) >= max ||
			    (i && !node_pivot(n, i)))
				break;
		n->end = i < n->nr_pivots && i && !node_pivot(n, i) ?
			 i - 1 : i;
	}
	if (n->end >= n->nr_slots)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"maple node 0x%llx: data end %u past its %u slots",
					(unsigned long long)n->addr, n->end,
					n->nr_slots);
	return NULL;
}

/*
 * The range [*lo, *hi] of slot i of n, which covers [min, max], given
 * *lo from the slot before.  False when the pivots leave the node's range
 * or go backwards.
 */
static bool slot_range(const struct mnode *n, unsigned int i, uint64_t min,
		       uint64_t max, uint64_t *lo, uint64_t *hi)
{
	if (n->dense) {
		if (min + i < min || min + i > max)
			return false;
		*lo = *hi = min + i;
		return true;
	}
	*hi = i < n->nr_pivots ? node_pivot(n, i) : max;
	return *hi >= *lo && *hi <= max;
}

static void walk_entry(struct walk *w, uint64_t entry, uint64_t lo,
		       uint64_t hi)
{
	if (!entry)
		return;			/* a gap */
	/*
	 * Internal entries (bits '10') are not VMAs: XA_ZERO_ENTRY marks a
	 * range a failed fork left, reserved values below 4096 are the
	 * tree's own.
	 */
	if ((entry & 3) == 2)
		return;
	if (!mm_kernel_ptr(w->src, entry)) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "maple entry 0x%llx for 0x%llx-0x%llx is not a VMA pointer",
					      (unsigned long long)entry,
					      (unsigned long long)lo,
					      (unsigned long long)hi));
		return;
	}
	if (hi == UINT64_MAX) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "a VMA reaches the end of the address space"));
		return;
	}
	walk_vma(w, entry, lo, hi + 1);
}

static void walk_node(struct walk *w, uint64_t enode, uint64_t min,
		      uint64_t max, unsigned int depth)
{
	struct ivm_error *err;
	struct mnode *n;
	uint64_t lo = min, hi = min;
	unsigned int i;

	if (depth > IVM_MM_MAX_TREE_HEIGHT) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "maple tree deeper than %d levels",
					      IVM_MM_MAX_TREE_HEIGHT));
		return;
	}
	if (++w->nodes > w->max_nodes) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "more than %zu maple nodes",
					      w->max_nodes));
		return;
	}
	if (!mm_kernel_ptr(w->src, enode & ~MAPLE_NODE_MASK)) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "maple node pointer 0x%llx is not a kernel address",
					      (unsigned long long)enode));
		return;
	}
	/* One node per level: at most IVM_MM_MAX_TREE_HEIGHT of them. */
	n = malloc(sizeof(*n));
	if (!n) {
		walk_stop(w, &ivm_enomem);
		return;
	}
	err = read_node(w->src, enode, max, n);
	if (err) {
		walk_stop(w, err);
		free(n);
		return;
	}
	for (i = 0; i <= n->end && !w->stopped; i++) {
		uint64_t entry = node_slot(n, i);

		if (!slot_range(n, i, min, max, &lo, &hi)) {
			walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
						      "maple node 0x%llx: slot %u leaves 0x%llx-0x%llx",
						      (unsigned long long)n->addr,
						      i, (unsigned long long)min,
						      (unsigned long long)max));
			break;
		}
		if (n->leaf) {
			walk_entry(w, entry, lo, hi);
		} else if (!child_node(w->src, entry)) {
			walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
						      "maple node 0x%llx: slot %u holds 0x%llx, not a node",
						      (unsigned long long)n->addr,
						      i,
						      (unsigned long long)entry));
		} else {
			walk_node(w, entry, lo, hi, depth + 1);
		}
		if (hi == max)
			break;
		lo = hi + 1;
	}
	/* The slots in use cover the node's whole range. */
	if (!w->stopped && hi != max)
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "maple node 0x%llx: its %u slots end at 0x%llx, before 0x%llx",
					      (unsigned long long)n->addr,
					      n->end + 1,
					      (unsigned long long)hi,
					      (unsigned long long)max));
	free(n);
}

/* ---- the mm ------------------------------------------------------------- */

static struct ivm_error *read_mm(const struct ivm_mm_source *src,
				 uint64_t mm, struct mm_fields *ret)
{
	const struct ivm_mm_offsets *o = &src->off;
	uint32_t root = o->mm_mt_root != IVM_KOFF_NONE ? o->mm_mt_root :
							 o->mm_mmap;
	const struct ivm_kernel_field f[] = {
		{ root, 8 }, { o->mm_exe_file, 8 }, { o->mm_start_brk, 8 },
		{ o->mm_brk, 8 }, { o->mm_start_stack, 8 },
	};
	uint32_t lo, hi;
	struct ivm_error *err;
	uint8_t *b;

	memset(ret, 0, sizeof(*ret));
	if (!mm_kernel_ptr(src, mm))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"mm 0x%llx is not a kernel address",
					(unsigned long long)mm);
	ivm_kernel_fields_span(f, sizeof(f) / sizeof(f[0]), &lo, &hi);
	b = malloc(hi - lo);
	if (!b)
		return &ivm_enomem;
	err = mm_kread(src, mm + lo, b, hi - lo);
	if (err) {
		free(b);
		return ivm_error_wrap(err, "reading mm 0x%llx",
				      (unsigned long long)mm);
	}
	ret->root = ivm_le64(b + root - lo);
	if (o->mm_exe_file != IVM_KOFF_NONE)
		ret->exe_file = ivm_le64(b + o->mm_exe_file - lo);
	if (o->mm_start_brk != IVM_KOFF_NONE) {
		ret->has_brk = true;
		ret->start_brk = ivm_le64(b + o->mm_start_brk - lo);
		ret->brk = ivm_le64(b + o->mm_brk - lo);
		ret->start_stack = ivm_le64(b + o->mm_start_stack - lo);
	}
	free(b);
	return NULL;
}

static void walk_list(struct walk *w)
{
	uint64_t vma = w->mm.root;

	/* Bounded: each step adds a VMA after the last one, or stops. */
	while (vma && !w->stopped) {
		size_t before = w->maps->nr;
		uint64_t next;
		struct ivm_error *err;

		if (!mm_kernel_ptr(w->src, vma)) {
			walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
						      "VMA list: 0x%llx is not a kernel address",
						      (unsigned long long)vma));
			return;
		}
		walk_vma(w, vma, 0, 0);
		if (w->stopped || w->maps->nr == before)
			return;
		err = mm_kread_u64(w->src, vma + w->src->off.vma_next, &next);
		if (err) {
			walk_stop(w, err);
			return;
		}
		vma = next;
	}
}

static void walk_exe(struct walk *w)
{
	struct ivm_mm_maps *maps = w->maps;
	struct ivm_error *err;
	struct file_memo *m;

	if (!w->mm.exe_file)
		return;
	if (!mm_kernel_ptr(w->src, w->mm.exe_file))
		return;
	m = file_of(w, w->mm.exe_file, &err);
	if (!m) {
		ivm_error_destroy(err);
		return;
	}
	maps->has_exe = true;
	maps->exe = m->gf;
	maps->exe_path = m->path;
}

struct ivm_error *ivm_mm_maps_read(const struct ivm_mm_source *src,
				   uint64_t mm, size_t max_vmas,
				   struct ivm_mm_maps **ret)
{
	struct ivm_mm_maps *maps;
	struct ivm_error *err;
	struct walk *w;

	w = calloc(1, sizeof(*w));
	maps = calloc(1, sizeof(*maps));
	if (!w || !maps) {
		free(w);
		free(maps);
		return &ivm_enomem;
	}
	err = read_mm(src, mm, &w->mm);
	if (err) {
		free(w);
		free(maps);
		return err;
	}
	w->src = src;
	w->maps = maps;
	w->max_vmas = max_vmas ? max_vmas : IVM_MM_DEFAULT_MAX_VMAS;
	if (w->max_vmas > IVM_MM_MAX_VMAS)
		w->max_vmas = IVM_MM_MAX_VMAS;
	/* Leaves hold up to 16 VMAs; a tree of mostly empty ones is forged. */
	w->max_nodes = 2 * w->max_vmas + 64;
	if (src->off.mm_mt_root == IVM_KOFF_NONE) {
		walk_list(w);
	} else if (xa_is_node(w->mm.root)) {
		walk_node(w, w->mm.root & ~MAPLE_ROOT_NODE, 0, UINT64_MAX, 1);
	} else {
		/* A tree of one entry keeps it in the root, for index 0. */
		walk_entry(w, w->mm.root, 0, 0);
	}
	if (!w->stopped || maps->error != &ivm_enomem)
		walk_exe(w);
	free(w);
	/* Lists are kept for minutes (a capture engine's address spaces):
	 * not the doubling's slack. */
	if (maps->nr && maps->nr < maps->cap) {
		struct ivm_vma *n = realloc(maps->vmas,
					    maps->nr * sizeof(*n));

		if (n) {
			maps->vmas = n;
			maps->cap = maps->nr;
		}
	}
	*ret = maps;
	return NULL;
}

void ivm_mm_maps_destroy(struct ivm_mm_maps *maps)
{
	size_t i;

	if (!maps)
		return;
	for (i = 0; i < maps->nr_strings; i++)
		free(maps->strings[i]);
	free(maps->strings);
	free(maps->vmas);
	ivm_error_destroy(maps->error);
	free(maps);
}

size_t ivm_mm_maps_count(const struct ivm_mm_maps *maps)
{
	return maps->nr;
}

size_t ivm_mm_maps_memory(const struct ivm_mm_maps *maps)
{
	if (!maps)
		return 0;
	return sizeof(*maps) + maps->cap * sizeof(*maps->vmas) +
	       maps->cap_strings * sizeof(*maps->strings) +
	       maps->string_bytes;
}

const struct ivm_vma *ivm_mm_maps_get(const struct ivm_mm_maps *maps,
				      size_t i)
{
	return i < maps->nr ? &maps->vmas[i] : NULL;
}

const struct ivm_vma *ivm_mm_maps_find(const struct ivm_mm_maps *maps,
				       uint64_t addr)
{
	size_t lo = 0, hi = maps->nr;

	/* The VMAs are sorted and disjoint (the walk checks it). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ivm_vma *v = &maps->vmas[mid];

		if (addr < v->start)
			hi = mid;
		else if (addr >= v->end)
			lo = mid + 1;
		else
			return v;
	}
	return NULL;
}

const struct ivm_error *ivm_mm_maps_truncated(const struct ivm_mm_maps *maps)
{
	return maps->error;
}

const struct ivm_guest_file *ivm_mm_maps_exe(const struct ivm_mm_maps *maps,
					     const char **path)
{
	if (path)
		*path = maps->has_exe ? maps->exe_path : NULL;
	return maps->has_exe ? &maps->exe : NULL;
}

/* ---- one address -------------------------------------------------------- */

struct ivm_error *ivm_mm_vma_at(const struct ivm_mm_source *src, uint64_t mm,
				uint64_t addr, struct ivm_vma *ret)
{
	struct mm_fields f;
	struct ivm_error *err;
	uint8_t b[VMA_BUF];
	uint64_t entry = 0, min = 0, max = UINT64_MAX, enode;
	unsigned int depth;
	struct mnode *n;

	err = read_mm(src, mm, &f);
	if (err)
		return err;
	if (src->off.mm_mt_root == IVM_KOFF_NONE) {
		/* The list: walked to addr, capped like a whole walk. */
		uint64_t vma = f.root, last_end = 0;
		size_t i;

		for (i = 0; vma && i < IVM_MM_DEFAULT_MAX_VMAS; i++) {
			err = read_vma(src, vma, b, ret);
			if (err)
				return err;
			if (ret->start < last_end)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"VMA list out of order at 0x%llx",
							(unsigned long long)vma);
			if (addr < ret->start)
				break;
			if (addr < ret->end)
				goto found;
			last_end = ret->end;
			err = mm_kread_u64(src, vma + src->off.vma_next, &vma);
			if (err)
				return err;
		}
		goto none;
	}
	if (!xa_is_node(f.root)) {
		entry = addr == 0 ? f.root : 0;
		goto entry;
	}
	n = malloc(sizeof(*n));
	if (!n)
		return &ivm_enomem;
	enode = f.root & ~MAPLE_ROOT_NODE;
	for (depth = 1;; depth++) {
		uint64_t lo = min, hi = max;
		unsigned int i;

		if (depth > IVM_MM_MAX_TREE_HEIGHT ||
		    !mm_kernel_ptr(src, enode & ~MAPLE_NODE_MASK)) {
			free(n);
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"maple tree: bad node 0x%llx at depth %u",
						(unsigned long long)enode,
						depth);
		}
		err = read_node(src, enode, max, n);
		if (err) {
			free(n);
			return err;
		}
		for (i = 0; i <= n->end; i++) {
			if (!slot_range(n, i, min, max, &lo, &hi)) {
				err = ivm_error_create(IVM_ERROR_PROTOCOL,
						       "maple node 0x%llx: slot %u out of range",
						       (unsigned long long)n->addr,
						       i);
				free(n);
				return err;
			}
			if (addr <= hi)
				break;
			lo = hi + 1;
		}
		if (i > n->end) {
			free(n);
			goto none;
		}
		entry = node_slot(n, i);
		if (n->leaf)
			break;
		if (!child_node(src, entry)) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "maple node 0x%llx: slot %u is not a node",
					       (unsigned long long)n->addr, i);
			free(n);
			return err;
		}
		enode = entry;
		min = lo;
		max = hi;
	}
	free(n);
entry:
	if (!entry || (entry & 3) == 2)
		goto none;
	if (!mm_kernel_ptr(src, entry))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"maple entry 0x%llx is not a VMA pointer",
					(unsigned long long)entry);
	err = read_vma(src, entry, b, ret);
	if (err)
		return err;
	if (addr < ret->start || addr >= ret->end)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"the VMA the tree has for 0x%llx is 0x%llx-0x%llx",
					(unsigned long long)addr,
					(unsigned long long)ret->start,
					(unsigned long long)ret->end);
found:
	if (ret->file.file) {
		uint64_t file = ret->file.file;

		err = mm_guest_file_of(src, file, &ret->file);
		if (err)
			return err;
	}
	return NULL;
none:
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no VMA at 0x%llx", (unsigned long long)addr);
}

struct ivm_error *ivm_mm_exe_file(const struct ivm_mm_source *src,
				  uint64_t mm, struct ivm_guest_file *ret)
{
	struct mm_fields f;
	struct ivm_error *err;

	if (src->off.mm_exe_file == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel's mm_struct has no exe_file");
	err = read_mm(src, mm, &f);
	if (err)
		return err;
	if (!f.exe_file)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"mm 0x%llx has no executable file",
					(unsigned long long)mm);
	if (!mm_kernel_ptr(src, f.exe_file))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"mm 0x%llx: exe_file 0x%llx is not a kernel address",
					(unsigned long long)mm,
					(unsigned long long)f.exe_file);
	return mm_guest_file_of(src, f.exe_file, ret);
}
