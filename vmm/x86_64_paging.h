/* SPDX-License-Identifier: MIT */
/*
 * x86-64 page-table walks over guest physical memory (vmm/gmem.h).
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

#include "gmem.h"

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

#endif /* IVM_X86_64_PAGING_H */
