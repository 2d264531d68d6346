/* SPDX-License-Identifier: MIT */
/*
 * What the walk of a process's mappings (mm_maps.c) shares with the
 * reading of the files they map (mm_files.c).  Every pointer read from
 * the guest is checked to be a kernel address before it is followed, and
 * every string is bounded: this is guest-controlled memory.
 */
#ifndef IVM_MM_INT_H
#define IVM_MM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/mm_maps.h"

#define PAGE_MASK_4K 4095ull

/* Maple tree encodings (include/linux/maple_tree.h, lib/maple_tree.c). */
#define MAPLE_NODE_MASK 255ull
#define MAPLE_NODE_TYPE_SHIFT 3
#define MAPLE_NODE_TYPE_MASK 0xfull
#define MAPLE_ROOT_NODE 2ull
#define MAPLE_RESERVED_RANGE 4096ull
/* The most slots any node type has (dense: 31 on 64-bit). */
#define MAX_SLOTS 64

bool mm_kernel_ptr(const struct ivm_mm_source *src, uint64_t va);
struct ivm_error *mm_kread(const struct ivm_mm_source *src, uint64_t va,
			   void *buf, size_t len);
struct ivm_error *mm_kread_u64(const struct ivm_mm_source *src, uint64_t va,
			       uint64_t *ret);
/* A kernel pointer (or 0 when zero_ok) at va, named what in errors. */
struct ivm_error *mm_kread_ptr(const struct ivm_mm_source *src, uint64_t va,
			       const char *what, bool zero_ok, uint64_t *ret);
/*
 * Up to cap - 1 bytes of the NUL-terminated string at va, never across a
 * page.
 */
struct ivm_error *mm_kread_str(const struct ivm_mm_source *src, uint64_t va,
			       char *buf, size_t cap);

/* What a struct file says: where it is (mount, dentry) and its inode. */
struct file_fields {
	uint64_t mnt, dentry, inode;
};

struct ivm_error *mm_read_file_fields(const struct ivm_mm_source *src,
				      uint64_t file, struct file_fields *ret);
/* The inode's identity: one read of its fields, one of its device. */
struct ivm_error *mm_read_guest_file(const struct ivm_mm_source *src,
				     uint64_t file, uint64_t inode,
				     struct ivm_guest_file *ret);
/* The path of the file ff names (malloc'd), and how whole it is. */
struct ivm_error *mm_file_path(const struct ivm_mm_source *src,
			       const struct file_fields *ff, char **ret,
			       enum ivm_vma_path_state *state);
/* The identity of the struct file at file. */
struct ivm_error *mm_guest_file_of(const struct ivm_mm_source *src,
				   uint64_t file, struct ivm_guest_file *ret);

#endif /* IVM_MM_INT_H */
