// SPDX-License-Identifier: MIT
#include <inttypes.h>

#include "x86_64_paging.h"

#define PTE_P (1ull << 0)
#define PTE_RW (1ull << 1)
#define PTE_US (1ull << 2)
#define PTE_PS (1ull << 7)
#define PTE_NX (1ull << 63)

static const char *const level_names[] = {
	[1] = "pt", [2] = "pd", [3] = "pdpt", [4] = "pml4", [5] = "pml5",
};

bool ivm_x86_64_canonical(uint64_t va, bool la57)
{
	int bits = la57 ? 57 : 48;

	/* Sign-extend from the top implemented bit and compare. */
	return (uint64_t)((int64_t)(va << (64 - bits)) >> (64 - bits)) == va;
}

struct ivm_error *ivm_x86_64_translate(struct ivm_gmem *gmem, uint64_t cr3,
				       bool la57, uint64_t va,
				       struct ivm_x86_64_translation *ret)
{
	uint64_t table = cr3 & IVM_X86_64_PTE_ADDR_MASK;
	bool user = true, writable = true, nx = false;
	int level;

	if (!ivm_x86_64_canonical(va, la57))
		return ivm_error_fault(va,
				       "non-canonical virtual address 0x%" PRIx64,
				       va);
	/*
	 * One read per level and no other loop: a hostile table pointing back
	 * at itself ends after at most five reads like any other walk.
	 */
	for (level = la57 ? 5 : 4; level >= 1; level--) {
		unsigned int shift = 12 + 9 * (level - 1);
		uint64_t entry_gpa = table + ((va >> shift) & 511) * 8;
		uint64_t entry;
		struct ivm_error *err;

		err = ivm_gmem_read_phys(gmem, entry_gpa, &entry,
					 sizeof(entry));
		if (err) {
			bool fault = err->code == IVM_ERROR_FAULT;

			if (!fault)
				return ivm_error_wrap(err,
						      "reading %s entry for 0x%" PRIx64,
						      level_names[level], va);
			ivm_error_destroy(err);
			return ivm_error_fault(va,
					       "page table for 0x%" PRIx64 " outside guest ram: %s entry at gpa 0x%" PRIx64,
					       va, level_names[level],
					       entry_gpa);
		}
		if (!(entry & PTE_P))
			return ivm_error_fault(va,
					       "0x%" PRIx64 " not mapped: %s entry at gpa 0x%" PRIx64 " not present",
					       va, level_names[level],
					       entry_gpa);
		user = user && (entry & PTE_US);
		writable = writable && (entry & PTE_RW);
		nx = nx || (entry & PTE_NX);
		if (level == 1 || (entry & PTE_PS)) {
			uint64_t page_size = 1ull << shift;
			uint64_t frame;

			/*
			 * PS in a PML4/PML5 entry is reserved; in a PDPT or PD
			 * entry it makes a large page whose bit 12 is PAT and
			 * bits shift-1:13 are reserved.  In a PT entry bit 7
			 * is PAT and level == 1 ends the walk anyway.
			 */
			if (level > 3)
				return ivm_error_fault(va,
						       "0x%" PRIx64 " not mapped: reserved page size bit in %s entry at gpa 0x%" PRIx64,
						       va, level_names[level],
						       entry_gpa);
			frame = entry & IVM_X86_64_PTE_ADDR_MASK;
			if (level > 1) {
				uint64_t reserved = (page_size - 1) &
						    ~(IVM_X86_64_PAGE_SIZE_4K * 2 - 1);

				if (frame & reserved)
					return ivm_error_fault(va,
							       "0x%" PRIx64 " not mapped: reserved bits set in %s entry 0x%" PRIx64 " at gpa 0x%" PRIx64,
							       va,
							       level_names[level],
							       entry,
							       entry_gpa);
				frame &= ~(page_size - 1);
			}
			ret->pa = frame | (va & (page_size - 1));
			ret->page_size = page_size;
			ret->user = user;
			ret->writable = writable;
			ret->nx = nx;
			return NULL;
		}
		table = entry & IVM_X86_64_PTE_ADDR_MASK;
	}
	/* Not reached: level 1 always returns above. */
	return ivm_error_fault(va, "page walk for 0x%" PRIx64 " did not end",
			       va);
}

void ivm_x86_64_tlb_flush(struct ivm_x86_64_tlb *tlb)
{
	unsigned int i;

	for (i = 0; i < IVM_X86_64_TLB_ENTRIES; i++)
		tlb->entries[i].valid = false;
	tlb->next = 0;
}

struct ivm_error *ivm_x86_64_translate_cached(struct ivm_gmem *gmem,
					      struct ivm_x86_64_tlb *tlb,
					      uint64_t cr3, bool la57,
					      uint64_t va,
					      struct ivm_x86_64_translation *ret)
{
	struct ivm_x86_64_tlb_entry *e;
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;
	unsigned int i;

	if (!tlb)
		return ivm_x86_64_translate(gmem, cr3, la57, va, ret);
	cr3 &= IVM_X86_64_PTE_ADDR_MASK;
	for (i = 0; i < IVM_X86_64_TLB_ENTRIES; i++) {
		e = &tlb->entries[i];
		if (e->valid && e->cr3 == cr3 && e->la57 == la57 &&
		    (va & ~(e->tr.page_size - 1)) == e->va_base) {
			*ret = e->tr;
			ret->pa += va - e->va_base;
			tlb->hits++;
			return NULL;
		}
	}
	tlb->misses++;
	err = ivm_x86_64_translate(gmem, cr3, la57, va, &tr);
	if (err)
		return err;
	e = &tlb->entries[tlb->next];
	tlb->next = (tlb->next + 1) % IVM_X86_64_TLB_ENTRIES;
	e->cr3 = cr3;
	e->la57 = la57;
	e->va_base = va & ~(tr.page_size - 1);
	e->tr = tr;
	e->tr.pa &= ~(tr.page_size - 1);
	e->valid = true;
	*ret = tr;
	return NULL;
}

struct ivm_error *ivm_x86_64_read_virt(struct ivm_gmem *gmem,
				       struct ivm_x86_64_tlb *tlb, uint64_t cr3,
				       bool la57, uint64_t va, void *buf,
				       size_t len)
{
	uint8_t *out = buf;

	while (len) {
		struct ivm_x86_64_translation tr;
		struct ivm_error *err;
		uint64_t chunk;

		err = ivm_x86_64_translate_cached(gmem, tlb, cr3, la57, va,
						  &tr);
		if (err)
			return err;
		/* Each page is translated on its own: the next may be elsewhere. */
		chunk = tr.page_size - (va & (tr.page_size - 1));
		if (chunk > len)
			chunk = len;
		err = ivm_gmem_read_phys(gmem, tr.pa, out, chunk);
		if (err) {
			uint64_t bad_va;

			if (err->code != IVM_ERROR_FAULT)
				return ivm_error_wrap(err,
						      "reading virtual address 0x%" PRIx64,
						      va);
			/*
			 * Report the virtual address of the first missing
			 * byte; the backend named its physical address, inside
			 * [tr.pa, tr.pa + chunk) as long as it keeps its
			 * contract.
			 */
			bad_va = va;
			if (err->address >= tr.pa &&
			    err->address - tr.pa < chunk)
				bad_va = va + (err->address - tr.pa);
			ivm_error_destroy(err);
			return ivm_error_fault(bad_va,
					       "virtual address 0x%" PRIx64 " (gpa 0x%" PRIx64 ") outside guest ram",
					       bad_va,
					       tr.pa + (bad_va - va));
		}
		out += chunk;
		len -= chunk;
		va += chunk;
		if (!va && len)
			return ivm_error_fault(0,
					       "virtual read wraps around the address space");
	}
	return NULL;
}
