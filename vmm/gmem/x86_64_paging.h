/* SPDX-License-Identifier: MIT */
/*
 * x86-64 page-table walks over guest physical memory (vmm/gmem/gmem.h).
 *
 * 4-level (PML4) and 5-level (PML5, CR4.LA57) paging, with 1 GiB and 2 MiB
 * pages.  The tables are guest data and hostile: a walk reads at most one
 * entry per level (5 reads), so cyclic or self-referencing tables end like
 * any other; entries pointing outside guest RAM, or into a hole, fail with
 * IVM_ERROR_FAULT; reserved bits the CPU would fault on fault here too.
 * Physical addresses are taken as 52 bits wide (the architectural maximum):
 * bits 51:12 of an entry; NX (bit 63), protection keys (62:59) and the
 * software-available bits are ignored for addressing.
 */
#ifndef IVM_X86_64_PAGING_H
#define IVM_X86_64_PAGING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmem/gmem.h"

#define IVM_X86_64_PAGE_SIZE_4K (1ull << 12)
#define IVM_X86_64_PAGE_SIZE_2M (1ull << 21)
#define IVM_X86_64_PAGE_SIZE_1G (1ull << 30)

/* Bits 51:12: the frame address in CR3 and in every paging entry. */
#define IVM_X86_64_PTE_ADDR_MASK 0x000ffffffffff000ull

struct ivm_x86_64_translation {
	uint64_t pa;		/* guest physical address of the byte at va */
	uint64_t page_size;	/* IVM_X86_64_PAGE_SIZE_{4K,2M,1G} */
	bool user;		/* U/S set at every level */
	bool writable;		/* R/W set at every level */
	bool nx;		/* XD set at some level */
};

/*
 * True if va is canonical: bits 63:47 (4-level) or 63:56 (5-level) all
 * equal.
 */
bool ivm_x86_64_canonical(uint64_t va, bool la57);

/*
 * Translate va through the page tables rooted at cr3 (PCID in bits 11:0 and
 * the no-flush bit 63 are ignored).  Fails with IVM_ERROR_FAULT carrying va
 * itself when va is non-canonical, not mapped (an entry is not present) or a
 * table cannot be read; the message names the level and the entry's gpa.
 * The translated pa is not checked to be in guest RAM: reading it is what
 * tells.
 */
struct ivm_error *ivm_x86_64_translate(struct ivm_gmem *gmem, uint64_t cr3,
				       bool la57, uint64_t va,
				       struct ivm_x86_64_translation *ret);

/*
 * A tiny translation cache, owned by the caller (one per unwinder or per
 * vCPU; not thread-safe).  An unwinder reads dozens of words from the same
 * stack page; through the process backend each uncached virtual read costs
 * a walk of four or five process_vm_readv() calls before the data's own
 * (about 9 us instead of 2 us per 8-byte read, see tests/bench/bench_gmem.c).
 *
 * Only successful translations are cached, keyed by the address bits of
 * cr3, la57 and the page.  Nothing here notices the guest changing its page
 * tables: an entry stays until ivm_x86_64_tlb_flush() or until it is
 * evicted (round robin).  Flush whenever the guest may have run since the
 * entries were filled and staleness matters, e.g. at the start of each
 * sample; what is read through a stale entry is then caught by the sample's
 * consistency check, like any other race with the running guest.
 * Zero-initialized is empty: `struct ivm_x86_64_tlb tlb = { 0 };`.
 */
#define IVM_X86_64_TLB_ENTRIES 8

struct ivm_x86_64_tlb_entry {
	uint64_t cr3;		/* address bits only */
	uint64_t va_base;	/* va & ~(page_size - 1) */
	struct ivm_x86_64_translation tr;	/* tr.pa: the page's base */
	bool la57;
	bool valid;
};

struct ivm_x86_64_tlb {
	struct ivm_x86_64_tlb_entry entries[IVM_X86_64_TLB_ENTRIES];
	unsigned int next;	/* round-robin victim */
	uint64_t hits, misses;	/* statistics, never reset by a flush */
};

void ivm_x86_64_tlb_flush(struct ivm_x86_64_tlb *tlb);

/* ivm_x86_64_translate() through tlb (NULL: no cache). */
struct ivm_error *ivm_x86_64_translate_cached(struct ivm_gmem *gmem,
					      struct ivm_x86_64_tlb *tlb,
					      uint64_t cr3, bool la57,
					      uint64_t va,
					      struct ivm_x86_64_translation *ret);

/*
 * ivm_gmem_read_virt() (see gmem.h for the contract) translating through
 * tlb (NULL: no cache).
 */
struct ivm_error *ivm_x86_64_read_virt(struct ivm_gmem *gmem,
				       struct ivm_x86_64_tlb *tlb, uint64_t cr3,
				       bool la57, uint64_t va, void *buf,
				       size_t len);

/*
 * A memo of page-table entries, kept across samples (one per capture
 * engine; not thread-safe).  Through the process backend a walk costs one
 * process_vm_readv() per level, four or five before the data's own, and
 * that was most of a live capture's time.  The memo remembers the last
 * value seen at the guest physical address of every entry it was given,
 * so the whole walk can be *predicted*: the entries at each level and then
 * the data are all read in one round trip (ivm_gmem_read_phys_many), and
 * only then is the prediction checked, top level first, against what was
 * just read.  The first entry that differs from its prediction (or was
 * never seen) is applied as read: it was read where a fresh walk would
 * read it, since every entry above it matched.  Whatever was read below it
 * is thrown away and the walk goes on from there in another round trip.
 *
 * So the memo is never believed, only checked: a memoized read returns what
 * a fresh walk followed by the data read would have returned at the moment
 * of the round trip (which reads the entries top-down, then the data), the
 * same bytes and the same faults.  A guest changing its tables costs extra
 * round trips, never a wrong translation; there is no staleness to bound
 * and nothing to flush (ivm_x86_64_walk_memo_clear() only forgets).  A warm
 * read of one page is one system call with five small ranges instead of
 * five system calls; pages that share their upper tables (a kernel stack)
 * read their shared entries once, adjacent PTEs as one range.
 *
 * Hostile tables: each round trip reads at most one entry per level per
 * page and takes every unfinished page at least one level down, so a batch
 * ends within six round trips, however the tables loop.  A memo slot is
 * keyed by the entry's gpa alone (cr3 and la57 need no part in it: the gpa
 * of an entry says what it is), direct-mapped; collisions only evict.
 * Zero-initialized is empty.
 */
#define IVM_X86_64_MEMO_BITS 10
#define IVM_X86_64_MEMO_SLOTS (1u << IVM_X86_64_MEMO_BITS)

struct ivm_x86_64_memo_slot {
	uint64_t tag;		/* entry gpa | 1; 0: empty */
	uint64_t entry;		/* its value when last read */
};

struct ivm_x86_64_walk_memo {
	struct ivm_x86_64_memo_slot slots[IVM_X86_64_MEMO_SLOTS];
	/* Entries read through the memo, by how the prediction fared. */
	uint64_t confirmed, changed, unknown;
};

/* Forget every entry (statistics are kept). */
void ivm_x86_64_walk_memo_clear(struct ivm_x86_64_walk_memo *memo);

/*
 * ivm_gmem_read_virt() (see gmem.h for the contract: the same bytes, the
 * same faults at the same addresses) with walks predicted by memo (NULL:
 * no predictions, a plain walk per page, though the pages of one call
 * still share round trips).
 */
struct ivm_error *ivm_x86_64_read_virt_memo(struct ivm_gmem *gmem,
					    struct ivm_x86_64_walk_memo *memo,
					    uint64_t cr3, bool la57,
					    uint64_t va, void *buf,
					    size_t len);

/*
 * Read nr (at most 64) whole 4 KiB pages va, va + 4 KiB, ... (va page
 * aligned) into pages[i], walks predicted by memo, all pages sharing round
 * trips: a warm stack of four pages is one system call.  pages[i] NULL
 * skips page i.  *ret gets bit i set for each page read whole; a page that
 * is not mapped or not in guest RAM just leaves its bit clear (read it
 * with ivm_x86_64_read_virt_memo() for its fault).  Fails only for a bad
 * range (IVM_ERROR_INVALID) or errors other than faults (IVM_ERROR_GONE
 * when QEMU exited), with *ret 0.
 */
struct ivm_error *ivm_x86_64_read_pages_memo(struct ivm_gmem *gmem,
					     struct ivm_x86_64_walk_memo *memo,
					     uint64_t cr3, bool la57,
					     uint64_t va, size_t nr,
					     void *const *pages,
					     uint64_t *ret);

#endif /* IVM_X86_64_PAGING_H */
