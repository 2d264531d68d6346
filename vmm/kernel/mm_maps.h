/* SPDX-License-Identifier: MIT */
/*
 * mm_maps: which files a guest process maps, and where — its VMAs read
 * from its mm_struct in guest memory, the same list the guest's
 * /proc/PID/maps prints.
 *
 * Two layouts, chosen by the kernel's BTF:
 *  - Linux 6.1 and later keep the VMAs in a maple tree (mm->mm_mt): nodes
 *    of 256 bytes (maple_leaf_64, maple_range_64, maple_arange_64,
 *    maple_dense), each slot of a non-leaf node an encoded node pointer
 *    (node address | type << 3 | 4), the root marked by bit 1; a leaf's
 *    slots are the vm_area_struct pointers, its pivots the last address of
 *    each slot's range;
 *  - older kernels keep a list (mm->mmap, vma->vm_next) in address order.
 * Every struct layout (mm_struct, vm_area_struct, maple nodes, file,
 * dentry, inode, super_block, mount) comes from the guest kernel's BTF;
 * node types are the values of its enum maple_type.
 *
 * For a file mapping the path is rebuilt as the kernel's d_path() does:
 * d_name up the d_parent chain to the mount's root, then across to the
 * parent mount's mountpoint (struct mount: mnt_parent, mnt_mountpoint),
 * up to the root of the mount tree; " (deleted)" when the file's dentry
 * is unhashed and not a root, as the kernel says it.  A file on no
 * directory (a pseudo dentry: memfds, SysV shared memory, shared
 * anonymous memory, anonymous inodes) is named as its dentry operations'
 * d_dname names it: "/NAME (deleted)", or "anon_inode:NAME".  Anonymous mappings
 * get the names /proc/PID/maps gives them ([heap], [stack], [vdso],
 * [vvar], [anon:NAME]).  The gate page ([vsyscall]) is in no mm and is
 * not listed.
 *
 * Hostile guest: every pointer followed is checked to be a canonical
 * kernel address; at most max_vmas VMAs (IVM_MM_DEFAULT_MAX_VMAS) and a
 * bounded number of maple nodes are read, no deeper than
 * IVM_MM_MAX_TREE_HEIGHT; a VMA must start after the one before it and
 * lie inside the range its tree slot claims, so a cycle or a forged
 * subtree ends the walk; paths are capped in length and depth.  A fault
 * or an inconsistency mid-walk is not an error: the list ends there,
 * marked truncated, with the reason kept.  On a live guest the tree can
 * change under the walk (a replaced node is dead: its parent points to
 * itself); that too truncates, and a retry usually succeeds.
 */
#ifndef IVM_MM_MAPS_H
#define IVM_MM_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/btf.h"
#include "kernel/kernel_layout.h"

/* Bounds on what a guest may claim. */
#define IVM_MM_DEFAULT_MAX_VMAS 65536u	/* the kernel's default max_map_count */
#define IVM_MM_MAX_VMAS (1u << 22)
#define IVM_MM_MAX_TREE_HEIGHT 31	/* MAPLE_HEIGHT_MAX */
#define IVM_MM_MAX_PATH 4096		/* PATH_MAX, NUL included */
#define IVM_MM_MAX_PATH_DEPTH 256	/* dentries and mounts followed */
#define IVM_MM_MAX_NAME 256		/* one path component (NAME_MAX + 1) */

/* prot of a VMA: the permission letters of /proc/PID/maps, and more. */
enum {
	IVM_VMA_READ = 1,
	IVM_VMA_WRITE = 2,
	IVM_VMA_EXEC = 4,
	IVM_VMA_SHARED = 8,	/* VM_MAYSHARE: 's' rather than 'p' */
	/*
	 * The mapping has an anon_vma: some of its pages may be private
	 * copies (written, relocated), so what it shows is not necessarily
	 * the file's bytes.  Without it (and always when shared) every page
	 * the mapping has is the file's page-cache page.
	 */
	IVM_VMA_ANON_PAGES = 16,
};

/* How much of a file mapping's path could be rebuilt. */
enum ivm_vma_path_state {
	IVM_VMA_PATH_FULL,	/* as the guest's /proc/PID/maps shows it */
	IVM_VMA_PATH_CUT,	/* over a cap: leading components left out */
	IVM_VMA_PATH_FAULT,	/* a dentry or mount was unreadable: likewise */
};

/*
 * A guest file, as the kernel holds it open: which file it is (inode
 * number and device; the inode's address and generation tell a recycled
 * inode from the file once there) and where its page cache is.  All zero
 * for no file.
 */
struct ivm_guest_file {
	uint64_t file;		/* struct file */
	uint64_t inode;		/* struct inode (file->f_inode) */
	uint64_t mapping;	/* inode->i_mapping: its address_space */
	uint64_t ino;		/* inode->i_ino */
	uint64_t dev;		/* i_sb->s_dev, the kernel's dev_t:
				 * major = dev >> 20, minor = dev & 0xfffff */
	uint32_t generation;	/* inode->i_generation */
	uint64_t size;		/* inode->i_size when read, bytes */
};

struct ivm_vma {
	uint64_t start, end;	/* user addresses, [start, end) */
	uint64_t pgoff;		/* file offset of start, bytes; 0 if anonymous */
	uint32_t prot;		/* IVM_VMA_* */
	uint64_t vma;		/* its vm_area_struct */
	struct ivm_guest_file file;	/* all 0 for an anonymous mapping */
	/* The file's path; NULL for anonymous.  Owned by the list. */
	const char *path;
	enum ivm_vma_path_state path_state;
	/* An anonymous mapping's name ("[heap]"...), or NULL.  Owned. */
	const char *name;
};

static inline bool ivm_vma_is_file(const struct ivm_vma *vma)
{
	return vma->file.inode != 0;
}

/*
 * Offsets (bytes) of what the walk reads, from BTF.  IVM_KOFF_NONE marks
 * what this kernel does not have; exactly one of the maple tree
 * (mm_mt_root) and the list (mm_mmap) is present.
 */
struct ivm_mm_offsets {
	/* struct mm_struct */
	uint32_t mm_mt_root;		/* mm_mt.ma_root (6.1+) */
	uint32_t mm_mmap;		/* mmap, the list head (< 6.1) */
	uint32_t mm_exe_file;		/* optional */
	uint32_t mm_start_brk, mm_brk, mm_start_stack;	/* optional, all */
	uint32_t mm_map_count;		/* optional */
	/* struct vm_area_struct */
	uint32_t vma_size;
	uint32_t vma_start, vma_end, vma_flags, vma_pgoff, vma_file;
	uint32_t vma_next;		/* with mm_mmap */
	uint32_t vma_anon_vma;		/* optional */
	uint32_t vma_ops, vma_private_data;	/* optional, both */
	uint32_t vma_anon_name;		/* optional (CONFIG_ANON_VMA_NAME) */
	uint32_t anon_vma_name_name;	/* with vma_anon_name */
	uint32_t special_mapping_name;	/* vm_special_mapping.name, optional */
	/* maple nodes (with mm_mt_root) */
	uint32_t maple_node_size;
	uint32_t mr64_pivot, mr64_slot, mr64_meta_end;
	uint32_t mr64_nr_slots;		/* pivots: one fewer */
	uint32_t ma64_pivot, ma64_slot, ma64_meta_end;
	uint32_t ma64_nr_slots;
	uint32_t dense_slot, dense_nr_slots;
	uint32_t maple_dense, maple_leaf_64, maple_range_64, maple_arange_64;
	/* struct file, path, dentry, qstr, inode, super_block, mount */
	uint32_t file_mnt, file_dentry, file_inode;
	uint32_t dentry_parent, dentry_name_len, dentry_name;
	uint32_t dentry_hash_pprev;	/* d_hash.pprev: NULL when unhashed */
	uint32_t dentry_op, dentry_op_dname;	/* d_op, d_op->d_dname */
	uint32_t inode_ino, inode_sb, inode_mapping, inode_size;
	uint32_t inode_generation;	/* optional */
	uint32_t sb_dev;
	uint32_t vfsmount_root;		/* vfsmount.mnt_root */
	uint32_t mount_mnt;		/* struct mount.mnt: the vfsmount */
	uint32_t mount_parent, mount_mountpoint;
};

/*
 * Fill *ret from btf.  IVM_ERROR_NOT_FOUND naming the first required
 * member that is missing (a kernel with neither layout, or without
 * struct mount in its BTF).
 */
struct ivm_error *ivm_mm_offsets_from_btf(const struct ivm_btf *btf,
					  struct ivm_mm_offsets *ret);

/* Where the walk reads from. */
struct ivm_mm_source {
	struct ivm_mm_offsets off;
	struct ivm_kmem_reader kmem;	/* kernel memory; its ctx borrowed */
	bool la57;			/* 5-level paging: wider kernel range */
	/*
	 * Run-time address of special_mapping_vmops, the vm_ops of the VMAs
	 * named by their vm_special_mapping ([vdso], [vvar]); 0 when unknown
	 * (such VMAs are then unnamed).
	 */
	uint64_t special_vmops;
	/*
	 * Run-time address of anon_inodefs_dname, the d_dname of anonymous
	 * inodes ("anon_inode:NAME"); 0 when unknown.
	 */
	uint64_t anon_inode_dname;
};

/*
 * A source over the guest kernel of layout (its page tables, the direct
 * map read physically) with offsets from btf.  layout must outlive src.
 * Errors as ivm_mm_offsets_from_btf().
 */
struct ivm_error *ivm_mm_source_init(struct ivm_mm_source *src,
				     const struct ivm_kernel_layout *layout,
				     const struct ivm_btf *btf);

struct ivm_mm_maps;

/*
 * Read the VMAs of the mm_struct at mm, in address order, at most
 * max_vmas (0: IVM_MM_DEFAULT_MAX_VMAS; capped at IVM_MM_MAX_VMAS), and
 * its executable (mm->exe_file).  Fails when mm is not a kernel address
 * or the mm_struct itself cannot be read (the reader's error), or for no
 * memory; anything later ends the list, see ivm_mm_maps_truncated().
 * The caller owns *ret.
 */
struct ivm_error *ivm_mm_maps_read(const struct ivm_mm_source *src,
				   uint64_t mm, size_t max_vmas,
				   struct ivm_mm_maps **ret);

void ivm_mm_maps_destroy(struct ivm_mm_maps *maps);

size_t ivm_mm_maps_count(const struct ivm_mm_maps *maps);

/* The bytes maps holds (its VMAs, paths and names); 0 for NULL. */
size_t ivm_mm_maps_memory(const struct ivm_mm_maps *maps);

/* VMA i (address order), or NULL past the end.  Owned by maps. */
const struct ivm_vma *ivm_mm_maps_get(const struct ivm_mm_maps *maps,
				      size_t i);

/* The VMA with start <= addr < end, or NULL.  Owned by maps. */
const struct ivm_vma *ivm_mm_maps_find(const struct ivm_mm_maps *maps,
				       uint64_t addr);

/*
 * NULL when the list is complete; else why it ended early (a fault with
 * its address, a cycle, a cap, a dead node...).  Owned by maps.
 */
const struct ivm_error *ivm_mm_maps_truncated(const struct ivm_mm_maps *maps);

/*
 * The executable (mm->exe_file) and its path (NULL when it could not be
 * rebuilt), or NULL when the mm has none (or the kernel no exe_file).
 * Owned by maps.
 */
const struct ivm_guest_file *ivm_mm_maps_exe(const struct ivm_mm_maps *maps,
					     const char **path);

/*
 * The one VMA of mm covering addr, found by descending the tree (a few
 * node reads, no list), without path or name (both NULL).
 * IVM_ERROR_NOT_FOUND when no VMA covers addr; the reader's error for a
 * fault; IVM_ERROR_PROTOCOL for an inconsistent tree.
 */
struct ivm_error *ivm_mm_vma_at(const struct ivm_mm_source *src, uint64_t mm,
				uint64_t addr, struct ivm_vma *ret);

/*
 * mm->exe_file of mm as a guest file (without a walk).
 * IVM_ERROR_NOT_FOUND when it has none.
 */
struct ivm_error *ivm_mm_exe_file(const struct ivm_mm_source *src,
				  uint64_t mm, struct ivm_guest_file *ret);

/*
 * The path of the struct file at file, rebuilt as described above.  The
 * caller owns *ret (NUL-terminated, at most IVM_MM_MAX_PATH bytes);
 * *state says whether it is whole.  Fails only when file is not a kernel
 * address, its f_path cannot be read, or for no memory.
 */
struct ivm_error *ivm_mm_file_path(const struct ivm_mm_source *src,
				   uint64_t file, char **ret,
				   enum ivm_vma_path_state *state);

#endif /* IVM_MM_MAPS_H */
