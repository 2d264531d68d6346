/* SPDX-License-Identifier: MIT */
/*
 * cfi_rows: the CFI row the user unwinder follows, shared by its two
 * sources of rows: libdw over a host file (ubinary.c) and the
 * guest's own bytes (uimage.c).  Internal to vmm/unwind/.
 */
#ifndef IVM_CFI_ROWS_H
#define IVM_CFI_ROWS_H

#include <elfutils/libdw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * DWARF register numbers of x86-64 (System V psABI, figure 3.36): not the
 * order of struct pt_regs.  16 is the return address column.
 */
enum {
	DW_RAX, DW_RDX, DW_RCX, DW_RBX, DW_RSI, DW_RDI, DW_RBP, DW_RSP,
	DW_R8, DW_R9, DW_R10, DW_R11, DW_R12, DW_R13, DW_R14, DW_R15,
	DW_RA,
	NR_DW_REGS
};

/*
 * Registers recovered from caller to caller.  The others are caller-saved
 * by the ABI: after one step they are unknown, and an expression that
 * needs one ends the stack.  rsp is not here: it is the CFA.
 */
static const uint8_t saved_regs[] __attribute__((unused)) = {
	DW_RBX, DW_RBP, DW_R12, DW_R13, DW_R14, DW_R15,
};
#define NR_SAVED (sizeof(saved_regs) / sizeof(saved_regs[0]))

enum rule_kind {
	RULE_UNDEFINED,		/* no value (call-clobbered, end of stack) */
	RULE_SAME,		/* the callee did not change it */
	RULE_CFA,		/* CFA + off */
	RULE_REG,		/* register reg + off */
	RULE_EXPR,		/* a DWARF expression: ops, nops */
	RULE_LOST,		/* a rule we cannot follow: value unknown */
};

/*
 * One register's rule, decoded from libdw's location expression.  With
 * is_value the result is the register's value; otherwise it is the guest
 * address where the value is saved.  ops of RULE_EXPR belong to the
 * binary's Dwarf_CFI (libdw interns them there), so a row stays valid as
 * long as the binary is open.
 */
struct ivm_cfi_rule {
	uint8_t kind;		/* enum rule_kind */
	uint8_t reg;		/* RULE_REG */
	bool is_value;
	uint8_t nops;		/* RULE_EXPR: at most IVM_UUNWIND_DWARF_MAX_OPS */
	/* 16 bytes a rule, 144 a row: images keep hundreds of rows each. */
	union {
		int64_t off;		/* RULE_CFA, RULE_REG */
		const Dwarf_Op *ops;	/* RULE_EXPR */
	};
};

enum row_state {
	ROW_EMPTY,		/* cache slot unused */
	ROW_OK,
	ROW_NONE,		/* no CFI covers this pc */
	ROW_BAD,		/* CFI exists but cannot be used */
	ROW_FAULT,		/* the guest did not hold the CFI's bytes */
};

/* What the CFI says at one pc, reduced to what the unwinder uses. */
struct ivm_cfi_row {
	uint64_t pc;		/* link-time lookup address (cache key) */
	uint8_t state;		/* enum row_state */
	bool signal;		/* a signal trampoline: caller pc is exact */
	struct ivm_cfi_rule cfa;	/* RULE_REG or RULE_EXPR, is_value */
	struct ivm_cfi_rule ra;
	struct ivm_cfi_rule saved[NR_SAVED];
};

/*
 * Reduce a location description in libdw's form (DW_OP_call_frame_cfa
 * first for a DW_CFA_expression, DW_OP_stack_value last for a val_ rule)
 * to a rule.  Expressions that are not one of the simple forms are
 * pointed to, not copied: unless ops == ops_mem (scratch that dies with
 * the call: refused), they must live as long as the row.
 */
bool ivm_cfi_decode_rule(const Dwarf_Op *ops, size_t nops,
			 const Dwarf_Op *ops_mem, struct ivm_cfi_rule *r);

/* A row as text, for tests comparing the two sources.  Returns buf. */
char *ivm_cfi_row_format(const struct ivm_cfi_row *row, char *buf,
			 size_t len);

struct ivm_ubinary;
struct ivm_uimage;
struct ivm_kmem_reader;

/*
 * The row of link-time pc in host binary b (ubinary.c, by libdw): from
 * its cache (decoded into a slot on a miss) when the cache is on, else
 * decoded into scratch.  Never NULL.
 */
const struct ivm_cfi_row *ivm_ubinary_row(struct ivm_ubinary *b, uint64_t pc,
					  struct ivm_cfi_row *scratch);

/*
 * The row of link-time pc in image im, its bytes read through file: from
 * the image's cache, or decoded into a cache slot, or (uncached, for a
 * ROW_FAULT) into scratch.  Never NULL.  sources: NULL, or where file
 * ORs the IVM_GFILE_* bits of its reads (kernel/gfile.h, struct
 * ivm_gfile_file): then the image's stats say which rows the page cache
 * gave (uimage.h).
 */
const struct ivm_cfi_row *ivm_uimage_row(struct ivm_uimage *im,
					 const struct ivm_kmem_reader *file,
					 unsigned int *sources, uint64_t pc,
					 struct ivm_cfi_row *scratch);

#endif /* IVM_CFI_ROWS_H */
