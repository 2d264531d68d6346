/* SPDX-License-Identifier: MIT */
/*
 * gfile: the bytes of a guest file, read from guest memory alone.
 *
 * A file a process maps (mm_maps.h) is read from, in this order, page by
 * page:
 *  1. the process's own mapping of that offset, through its page tables,
 *     when what the mapping shows there is the file's page (a shared
 *     mapping, or a private one without private copies: no
 *     IVM_VMA_ANON_PAGES);
 *  2. the file's page cache: inode->i_mapping->i_pages, an xarray of
 *     64-slot nodes (xa_node; value entries are shadows and swap, not
 *     pages; a multi-order entry covers 2^order indices), whose entries
 *     are struct page (folio) pointers: the page's frame number is its
 *     index in vmemmap (the guest's KASLR'd vmemmap_base, sizeof(struct
 *     page) from BTF), and its bytes are read there, physically, when the
 *     page is up to date (PG_uptodate);
 *  3. another address space's mapping of the same file, same rule as 1.
 * A page no source has is "not present": the read still succeeds, says
 * which bytes are missing, and leaves them zero.  This is what finds the
 * executable of a fork child, whose page tables never had the pages the
 * child did not touch (the file's first page among them) while the page
 * cache has them.
 *
 * Pages found are kept for the run in a bounded cache keyed by the file's
 * identity (inode address, number, device, generation) and page index, so
 * repeated captures of the same executable cost one hash lookup.  The
 * cache assumes a file's bytes do not change during a run (an executable
 * being run cannot be written); a file replaced on disk is a new inode.
 *
 * Hostile guest: xarray descents are bounded by the index width, every
 * node's shift must shrink by XA_CHUNK_SHIFT per level, every pointer is
 * checked to be a kernel address, a page's frame must lie below max_pfn
 * and its struct page must be one of vmemmap's; a read is at most
 * IVM_GFILE_MAX_READ bytes.  A fault is "not present", never a crash.
 */
#ifndef IVM_GFILE_H
#define IVM_GFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/btf.h"
#include "kernel/kernel_layout.h"
#include "kernel/mm_maps.h"

#define IVM_GFILE_PAGE_SIZE 4096u
#define IVM_GFILE_MAX_READ (64u << 20)
#define IVM_GFILE_DEFAULT_CACHE_PAGES 256u	/* 1 MiB */

/* Offsets (bytes) of what the page-cache walk reads, from BTF. */
struct ivm_gfile_offsets {
	uint32_t mapping_xa_head;	/* address_space.i_pages.xa_head */
	uint32_t xa_node_shift, xa_node_slots;
	uint32_t xa_chunk_shift;	/* log2 of the slots per node */
	uint32_t page_size;		/* sizeof(struct page) */
	uint32_t page_flags, page_mapping, page_index;
	uint32_t pg_uptodate;		/* bit number in page->flags */
};

struct ivm_error *ivm_gfile_offsets_from_btf(const struct ivm_btf *btf,
					     struct ivm_gfile_offsets *ret);

struct ivm_gfile_config {
	struct ivm_gfile_offsets off;
	struct ivm_kmem_reader kmem;	/* kernel memory; ctx borrowed */
	bool la57;
	uint64_t page_offset_base;	/* the direct map of guest RAM */
	uint64_t vmemmap_base;		/* struct page of frame 0 */
	uint64_t max_pfn;		/* frames at or above are rejected */
	size_t cache_pages;		/* 0: IVM_GFILE_DEFAULT_CACHE_PAGES */
};

/*
 * A configuration for the guest kernel of layout (vmemmap_base,
 * page_offset_base and max_pfn read from it; the defaults of x86-64
 * without KASLR, and 52-bit physical memory, where its symbols lack
 * them).  layout must outlive what uses cfg.  IVM_ERROR_NOT_FOUND naming
 * what the kernel's BTF lacks; the reader's error for a fault.
 */
struct ivm_error *ivm_gfile_config_init(struct ivm_gfile_config *cfg,
					const struct ivm_kernel_layout *layout,
					const struct ivm_btf *btf);

struct ivm_gfile;

/* A reader with an empty cache; cfg is copied.  Caller owns *ret. */
struct ivm_error *ivm_gfile_create(const struct ivm_gfile_config *cfg,
				   struct ivm_gfile **ret);
void ivm_gfile_destroy(struct ivm_gfile *g);

/* Where bytes came from (bits of ivm_gfile_read_info.sources). */
enum {
	IVM_GFILE_OWN_MAPPING = 1,
	IVM_GFILE_PAGE_CACHE = 2,
	IVM_GFILE_OTHER_MAPPING = 4,
	/*
	 * This reader's cache, read earlier: with the bit of the source
	 * the page was read from then.
	 */
	IVM_GFILE_CACHED = 8,
};

/* An address space that may map the file: its VMAs and user memory. */
struct ivm_gfile_space {
	const struct ivm_mm_maps *maps;
	const struct ivm_kmem_reader *umem;	/* through its page tables */
};

struct ivm_gfile_read_info {
	size_t present;		/* bytes of the range filled from the guest */
	uint64_t first_absent;	/* file offset of the first byte no source
				 * had; UINT64_MAX when all were there */
	size_t absent_pages;	/* pages of the range with no source */
	bool past_eof;		/* the range reaches i_size: what lies
				 * beyond is absent */
	unsigned int sources;	/* IVM_GFILE_* of the sources used */
};

/*
 * Read [off, off + len) of file into buf: from own's mapping (own may be
 * NULL), the page cache, then others[0..nr_others) (may be NULL), page by
 * page; absent bytes are left zero and counted in *ret.  Errors only for
 * bad arguments (no file, len over IVM_GFILE_MAX_READ, a range that
 * wraps) and no memory: a guest that has none of it is a result.
 */
struct ivm_error *ivm_gfile_read(struct ivm_gfile *g,
				 const struct ivm_guest_file *file,
				 const struct ivm_gfile_space *own,
				 const struct ivm_gfile_space *others,
				 size_t nr_others, uint64_t off, void *buf,
				 size_t len, struct ivm_gfile_read_info *ret);

/*
 * The page-cache page of file page index of the address_space at
 * mapping: its frame number.  IVM_ERROR_NOT_FOUND when the cache does
 * not hold it (no entry, a value entry, not up to date); the reader's
 * error for a fault; IVM_ERROR_PROTOCOL for a malformed xarray.
 */
struct ivm_error *ivm_gfile_page_cache_pfn(struct ivm_gfile *g,
					   uint64_t mapping, uint64_t index,
					   uint64_t *ret);

/* Counters, for tests and benchmarks. */
struct ivm_gfile_stats {
	uint64_t cache_hits, cache_misses, cache_evictions;
	uint64_t pages_from[4];	/* own, page cache, other, absent */
};
void ivm_gfile_stats(const struct ivm_gfile *g, struct ivm_gfile_stats *ret);

/*
 * A reader (struct ivm_kmem_reader) whose addresses are offsets in a
 * guest file, over ivm_gfile_read() with the sources given: for parsers
 * that take a reader, such as an ELF file's headers and notes.  A range
 * not wholly present fails with IVM_ERROR_FAULT at the offset of its
 * first absent byte.  Fill in g, file, own, others and nr_others (all
 * borrowed; own and others may be NULL); sources accumulates the
 * IVM_GFILE_* bits of every read.
 */
struct ivm_gfile_file {
	struct ivm_gfile *g;
	const struct ivm_guest_file *file;
	const struct ivm_gfile_space *own;
	const struct ivm_gfile_space *others;
	size_t nr_others;
	unsigned int sources;
};

void ivm_gfile_file_reader(struct ivm_gfile_file *f,
			   struct ivm_kmem_reader *ret);

/*
 * A reader of a process's user memory (struct ivm_kmem_reader): its page
 * tables first (umem), and for a page they do not map, the page of the
 * file its VMA maps there, when that page is what the process would see
 * (a shared mapping, or a private one without private copies), through
 * ivm_gfile_read with that process as its own source.  So a fork child's
 * untouched executable pages read as its parent's, from the page cache.
 * Faults keep the page-table reader's address.
 *
 * Fill in g, src, mm and umem (all borrowed), zero the rest, then make
 * the reader with ivm_gfile_user_reader().  Not thread-safe.
 */
struct ivm_gfile_user {
	struct ivm_gfile *g;
	const struct ivm_mm_source *src;
	uint64_t mm;
	const struct ivm_kmem_reader *umem;
	/* The VMA looked up last (its range, file, prot), kept. */
	struct ivm_vma last;
	bool has_last;
	uint64_t file_pages;	/* pages read from files, not page tables */
};

void ivm_gfile_user_reader(struct ivm_gfile_user *u,
			   struct ivm_kmem_reader *ret);

#endif /* IVM_GFILE_H */
