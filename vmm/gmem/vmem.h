/* SPDX-License-Identifier: MIT */
/*
 * Guest virtual memory readers: the one interface through which the kernel
 * and user unwinders, the kernel-layout walkers and the in-memory kallsyms,
 * BTF and ORC loaders read the guest, and its implementations (page walks
 * over gmem with an optional memo, and a small page cache in front of any
 * reader).
 */
#ifndef IVM_VMEM_H
#define IVM_VMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/gmem.h"
#include "gmem/x86_64_paging.h"

/*
 * Guest kernel virtual memory.  read must read exactly len bytes at va or
 * fail; a fault is reported as an IVM_ERROR_FAULT error carrying the
 * failing address (any other error is treated as a fault at va).  The
 * unwinder destroys the errors it gets.
 */
struct ivm_kmem_reader {
	struct ivm_error *(*read)(void *ctx, uint64_t va, void *buf,
				  size_t len);
	void *ctx;
};

/*
 * A reader over ivm_gmem_read_virt with a fixed page-table root.  With a
 * memo (x86_64_paging.h; optional, borrowed, may be shared by readers of
 * different roots), walks are predicted and checked in one round trip per
 * read instead of one per level; what is read is the same either way.
 */
struct ivm_kmem_gmem {
	struct ivm_gmem *gmem;
	uint64_t cr3;
	int la57;
	struct ivm_x86_64_walk_memo *memo;
};

/* True if va is a canonical upper-half address, as kernel pointers are. */
bool ivm_kmem_is_kernel_address(uint64_t va, bool la57);

/*
 * Read len bytes at va through r after checking that va is a kernel
 * address and the range does not wrap (IVM_ERROR_PROTOCOL naming va
 * otherwise): for walkers following pointers read from the guest.
 */
struct ivm_error *ivm_kmem_read_kernel(const struct ivm_kmem_reader *r,
				       bool la57, uint64_t va, void *buf,
				       size_t len);

/*
 * Read up to len bytes at va through r into buf: in one read when it can,
 * else page by page up to the first page that cannot be read; *got says
 * how many bytes were.  Fails (with the reader's error) only when not one
 * byte could be read.  For what may run into memory the guest lacks (a
 * table of unknown length, a process's strings).
 */
struct ivm_error *ivm_kmem_read_upto(const struct ivm_kmem_reader *r,
				     uint64_t va, void *buf, size_t len,
				     size_t *got);

/* Fill *ret with a reader over g; g is borrowed and must outlive it. */
void ivm_kmem_reader_gmem(struct ivm_kmem_gmem *g,
			  struct ivm_kmem_reader *ret);

/*
 * A small page cache in front of a reader, for unwinding several stacks of
 * one stopped (or pinned) guest without re-walking page tables or making a
 * system call per 8-byte read: whole 4 KiB pages are read once and kept
 * (direct-mapped, IVM_KMEM_CACHE_PAGES of them; no allocation).  A page
 * that cannot be read whole is not cached, and the read is passed through
 * as asked, so faults keep their exact address.  The guest changes under
 * a cache: invalidate it whenever the guest may have run since it was
 * filled (before each sample).
 */
#define IVM_KMEM_CACHE_PAGES 16

struct ivm_kmem_cache {
	struct ivm_kmem_reader backing;
	struct ivm_kmem_gmem *batch;	/* for prefetch; NULL: none */
	uint64_t tag[IVM_KMEM_CACHE_PAGES];	/* page va | 1 when valid */
	uint8_t page[IVM_KMEM_CACHE_PAGES][4096];
	uint64_t hits, misses;
	uint64_t prefetched;	/* pages filled by ivm_kmem_cache_prefetch */
};

/* Empty cache over backing (copied); fill *ret with a reader over it. */
void ivm_kmem_cache_init(struct ivm_kmem_cache *cache,
			 const struct ivm_kmem_reader *backing,
			 struct ivm_kmem_reader *ret);

/*
 * The same over ivm_kmem_reader_gmem(g) (g borrowed, must outlive the
 * cache); ivm_kmem_cache_prefetch() then reads pages in batches through
 * g's memo.
 */
void ivm_kmem_cache_init_gmem(struct ivm_kmem_cache *cache,
			      struct ivm_kmem_gmem *g,
			      struct ivm_kmem_reader *ret);

/* Forget every cached page. */
void ivm_kmem_cache_invalidate(struct ivm_kmem_cache *cache);

/*
 * Fill the cache with the pages covering [va, va + len) that it does not
 * hold yet, at most IVM_KMEM_CACHE_PAGES of them (the first ones), in one
 * batch of the backing's read_pages: for a range the caller is about to
 * read, such as a kernel stack from its saved sp to its top.  Best effort:
 * for a cache not made by ivm_kmem_cache_init_gmem(), or pages that cannot
 * be read, nothing happens and later reads go to the backing as usual (and
 * report the faults).  A range wrapping the address space is ignored.
 */
void ivm_kmem_cache_prefetch(struct ivm_kmem_cache *cache, uint64_t va,
			     uint64_t len);

#endif /* IVM_VMEM_H */
