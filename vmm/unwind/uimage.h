/* SPDX-License-Identifier: MIT */
/*
 * uimage: one ELF file (an executable or a shared library) as the guest
 * holds it, for unwinding and naming user frames with no host copy.
 *
 * Made once per file (the caller keys them by build-id, for the run) from
 * its headers (uelf.h); what it needs later is read when first needed,
 * through a reader by file offset that the caller hands in each time (the
 * bytes may come from the mapping of whichever process is being unwound,
 * or from the page cache):
 *  - CFI rows for the user unwinder (uunwind_dwarf.h, through a
 *    struct ivm_umapping with this image): .eh_frame_hdr and .eh_frame by
 *    ucfi.h, each row decoded to the unwinder's rules and kept in a
 *    direct-mapped cache by pc.  A row whose bytes the guest did not hold
 *    is not cached: a later lookup may find them.
 *  - names: the dynamic symbol table (.dynsym/.dynstr through
 *    PT_DYNAMIC), read whole at the first lookup that can read it.
 *
 * Not thread-safe.  The image owns everything it returns.
 */
#ifndef IVM_UIMAGE_H
#define IVM_UIMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "unwind/uelf.h"

struct ivm_uimage;

/*
 * Read the headers of the file through file (uelf.h ivm_uelf_parse, whose
 * errors it returns).  A file without .eh_frame_hdr is fine: it has no
 * rows, and its frames fall back as the unwinder says.
 */
struct ivm_error *ivm_uimage_create(const struct ivm_kmem_reader *file,
				    struct ivm_uimage **ret);
void ivm_uimage_destroy(struct ivm_uimage *im);

const struct ivm_uelf *ivm_uimage_elf(const struct ivm_uimage *im);

/*
 * The dynamic symbol holding link-time vaddr (uelf.h
 * ivm_uelf_syms_lookup), reading the table through file at the first call
 * that can (bias as ivm_uelf_read_dynsym); NULL when no symbol covers it
 * or the table is unreadable.  A table the guest did not hold is tried
 * again by later calls, at most IVM_UIMAGE_SYM_TRIES times.
 */
#define IVM_UIMAGE_SYM_TRIES 8
const char *ivm_uimage_symbol(struct ivm_uimage *im,
			      const struct ivm_kmem_reader *file,
			      uint64_t bias, uint64_t vaddr, uint64_t *off);

/* The table itself, read as above; NULL when there is none (yet). */
const struct ivm_uelf_syms *ivm_uimage_syms(struct ivm_uimage *im,
					    const struct ivm_kmem_reader *file,
					    uint64_t bias);

/* Counters for tests and benchmarks. */
struct ivm_uimage_stats {
	uint64_t lookups, hits;		/* CFI rows, and from the cache */
	uint64_t faults;		/* rows whose bytes were not held */
	uint64_t bad;			/* rows refused as malformed */
	/*
	 * Rows decoded whose bytes the process's page tables lacked, in
	 * part, and the file's page cache (or another process's mapping)
	 * had: counted only when the reader says its sources.
	 */
	uint64_t page_cache, other_mapping;
	size_t memory;			/* bytes the image holds */
};
void ivm_uimage_stats(const struct ivm_uimage *im,
		      struct ivm_uimage_stats *ret);
/* Its stats' faults alone: asked per object at every capture. */
uint64_t ivm_uimage_faults(const struct ivm_uimage *im);

/* The unwinder's row at pc as text (cfi_rows.h), uncached; for tests. */
char *ivm_uimage_describe_row(struct ivm_uimage *im,
			      const struct ivm_kmem_reader *file, uint64_t pc,
			      char *buf, size_t len);

#endif /* IVM_UIMAGE_H */
