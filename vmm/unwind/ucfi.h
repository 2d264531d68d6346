/* SPDX-License-Identifier: MIT */
/*
 * ucfi: the call frame information of an ELF file read from guest bytes:
 * the .eh_frame_hdr binary search table, then the FDE covering a pc and
 * its CIE in .eh_frame, whose call frame instructions are run up to that
 * pc (DWARF 5, 6.4, with the .eh_frame form of the LSB: augmentations
 * "z", "R", "P", "L", "S").
 *
 * Only the bytes one lookup needs are read: about log2(count) table
 * entries, one FDE and one CIE.  Unlike handing libdw a copy of the whole
 * .eh_frame, that works when the guest holds only some of its pages (a
 * library's .eh_frame is touched only when something unwinds), and a page
 * it lacks costs the lookups that need it, not the whole file.
 *
 * Reads go through a reader by link-time address (uelf.h
 * ivm_uelf_vreader_init).  Everything read is hostile: an entry longer
 * than IVM_UCFI_MAX_ENTRY, an unknown augmentation or instruction, a
 * register rule past the x86-64 return-address column, more than
 * IVM_UCFI_MAX_STATES remembered states, or an entry that runs past its
 * own length is refused with IVM_ERROR_PROTOCOL; a failed read returns the
 * reader's error.  Never a crash, never a read outside what the lengths
 * allow.
 */
#ifndef IVM_UCFI_H
#define IVM_UCFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "unwind/uelf.h"

/* DWARF registers 0..16 of x86-64; 16 is the return address column. */
#define IVM_UCFI_NR_REGS 17
#define IVM_UCFI_RA 16
/* Longest CIE or FDE accepted (glibc's largest are a few hundred bytes). */
#define IVM_UCFI_MAX_ENTRY 8192u
/* DW_CFA_remember_state nesting accepted. */
#define IVM_UCFI_MAX_STATES 16

enum ivm_ucfi_rule_kind {
	IVM_UCFI_UNDEFINED,	/* no value (unspecified registers too) */
	IVM_UCFI_SAME,		/* unchanged by the callee */
	IVM_UCFI_OFFSET,	/* saved at CFA + off */
	IVM_UCFI_VAL_OFFSET,	/* is CFA + off */
	IVM_UCFI_REGISTER,	/* is the value of register reg */
	IVM_UCFI_EXPR,		/* saved at expr(CFA pushed first) */
	IVM_UCFI_VAL_EXPR,	/* is expr(CFA pushed first) */
	IVM_UCFI_CFA_REG,	/* the CFA: register reg + off */
	IVM_UCFI_CFA_EXPR,	/* the CFA: expr (empty stack) */
};

/*
 * One rule.  expr points into the struct ivm_ucfi_scratch of the lookup
 * and is valid until that scratch is used again.
 */
struct ivm_ucfi_rule {
	uint8_t kind;		/* enum ivm_ucfi_rule_kind */
	uint8_t reg;
	int64_t off;
	const uint8_t *expr;
	uint32_t expr_len;
};

/* The rules in force at a pc, and the pcs [start, end) they hold for. */
struct ivm_ucfi_row {
	uint64_t start, end;	/* link-time */
	bool signal;		/* CIE augmentation "S": a signal trampoline */
	struct ivm_ucfi_rule cfa;
	struct ivm_ucfi_rule regs[IVM_UCFI_NR_REGS];
};

/* Buffers of one lookup, the caller's (about 16 KiB: not on a hot stack). */
struct ivm_ucfi_scratch {
	uint8_t cie[IVM_UCFI_MAX_ENTRY];
	uint8_t fde[IVM_UCFI_MAX_ENTRY];
	struct ivm_ucfi_rule states[IVM_UCFI_MAX_STATES][IVM_UCFI_NR_REGS + 1];
};

/*
 * The FDE for link-time pc by the .eh_frame_hdr table eh, read through
 * vmem: *ret gets its address.  IVM_ERROR_NOT_FOUND when pc precedes
 * every entry (whether the FDE found covers pc is ivm_ucfi_row's to say).
 */
struct ivm_error *ivm_ucfi_find(const struct ivm_kmem_reader *vmem,
				const struct ivm_uelf_eh_hdr *eh, uint64_t pc,
				uint64_t *ret);

/*
 * The row of the FDE at fde (link-time address in .eh_frame, whose start
 * is eh_frame) for pc.  IVM_ERROR_NOT_FOUND when the FDE does not cover
 * pc; IVM_ERROR_PROTOCOL as above.
 */
struct ivm_error *ivm_ucfi_row(const struct ivm_kmem_reader *vmem,
			       uint64_t fde, uint64_t pc,
			       struct ivm_ucfi_scratch *scratch,
			       struct ivm_ucfi_row *ret);

/*
 * Run the CFI of one CIE and one FDE held in memory (the bytes after their
 * length fields: cie_len and fde_len bytes; cie_vaddr and fde_vaddr are
 * the link-time addresses of those bytes, for pc-relative pointers) up
 * to pc.  What ivm_ucfi_row does after reading them; for fuzzing.
 */
struct ivm_error *ivm_ucfi_execute(const uint8_t *cie, size_t cie_len,
				   uint64_t cie_vaddr, const uint8_t *fde,
				   size_t fde_len, uint64_t fde_vaddr,
				   uint64_t pc, struct ivm_ucfi_scratch *scratch,
				   struct ivm_ucfi_row *ret);

/*
 * A file without .eh_frame_hdr (a static executable: gcc asks the linker
 * for the header only when linking dynamically) is searched by an index
 * of its .eh_frame built here, once: the pc range start of every FDE and
 * the FDE's address, sorted.  At most IVM_UELF_MAX_FDES entries from a
 * section of at most IVM_UCFI_MAX_EH_FRAME bytes.
 */
#define IVM_UCFI_MAX_EH_FRAME (32u << 20)

struct ivm_ucfi_index {
	uint64_t *pcs;		/* nr, sorted */
	uint64_t *fdes;		/* nr, the FDE of pcs[i] */
	size_t nr;
};

/*
 * Index the .eh_frame at link-time vaddr (size bytes at bytes).  A
 * malformed entry ends the scan (what precedes it is kept); an FDE whose
 * CIE cannot be parsed is skipped.  Errors only for no memory or an empty
 * index (IVM_ERROR_NOT_FOUND).  Caller destroys.
 */
struct ivm_error *ivm_ucfi_index_build(const uint8_t *bytes, size_t size,
				       uint64_t vaddr,
				       struct ivm_ucfi_index **ret);
void ivm_ucfi_index_destroy(struct ivm_ucfi_index *ix);

/* As ivm_ucfi_find, over an index. */
struct ivm_error *ivm_ucfi_index_find(const struct ivm_ucfi_index *ix,
				      uint64_t pc, uint64_t *ret);

#endif /* IVM_UCFI_H */
