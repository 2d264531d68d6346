/* SPDX-License-Identifier: MIT */
/*
 * uunwind_dwarf: unwinding a guest user-space stack from the host by the
 * DWARF call frame information (CFI) of the binaries it runs.
 *
 * Frame pointers lose frames in code built without them (glibc, and any
 * -fomit-frame-pointer build): the CFI in .eh_frame (and .debug_frame when
 * present) says, for every instruction, how to find the caller's stack
 * pointer (the CFA), its return address and the callee-saved registers.
 * When the host has the binary a guest process runs, this unwinder follows
 * those rules over guest memory read through the same callback as the
 * other unwinders (vmm/unwind/kunwind.h struct ivm_kmem_reader).
 *
 * Two objects:
 *  - struct ivm_ubinary: one ELF file on the host (an executable or a
 *    shared library), opened once with libelf/libdw, with its CFI, build-id
 *    and executable segments.  It keeps a small cache of decoded CFI rows
 *    by pc.  Not thread-safe (libdw's CFI cache is not either): use one
 *    per thread, or serialize.
 *  - struct ivm_umapping: "guest user addresses [start, end) are the code
 *    of binary B loaded at bias L" (guest address = link-time address + L).
 *    A static non-PIE executable has bias 0; a PIE executable or a shared
 *    library has the bias of where the loader put it (ivm_ubinary_bias()
 *    computes it from a /proc/PID/maps-style line).
 *
 * Hostile input: the guest stack is hostile; so, to a lesser degree, is
 * the ELF file (it comes from the user).  A corrupt or foreign ELF is
 * refused by ivm_ubinary_open() with IVM_ERROR_ELF or IVM_ERROR_INVALID;
 * CFI that libdw cannot parse for a pc ends the stack there
 * (IVM_STACK_TRUNCATED_BAD_ORC), it never crashes.
 */
#ifndef IVM_UUNWIND_DWARF_H
#define IVM_UUNWIND_DWARF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "unwind/kunwind.h"
#include "unwind/unwind.h"
#include "unwind/uunwind.h"
#include "base/x86_64_regs.h"

struct ivm_ubinary;

/* Executable PT_LOAD segments kept per binary (ld.so makes one or two). */
#define IVM_UBINARY_MAX_EXEC 8
/* Longest build-id accepted (GNU ld makes 20-byte SHA-1 ones). */
#define IVM_UBINARY_MAX_BUILD_ID 64

/* One executable PT_LOAD of a binary, in link-time addresses. */
struct ivm_ubinary_segment {
	uint64_t vaddr;		/* p_vaddr */
	uint64_t memsz;		/* p_memsz, > 0 */
	uint64_t offset;	/* p_offset */
};

/*
 * Open the ELF file at path: it must be an x86-64 ET_EXEC or ET_DYN file
 * with at least one executable PT_LOAD segment and call frame information
 * (.eh_frame, or .debug_frame) with bytes in the file: a separate debug
 * file's .eh_frame is SHT_NOBITS, which is no CFI.  Otherwise IVM_ERROR_INVALID (not x86-64,
 * wrong type, no code, no CFI), IVM_ERROR_ELF (corrupt, not ELF) or
 * IVM_ERROR_OS (cannot open).  The caller owns *ret
 * (ivm_ubinary_destroy).
 */
struct ivm_error *ivm_ubinary_open(const char *path,
				   struct ivm_ubinary **ret);

void ivm_ubinary_destroy(struct ivm_ubinary *b);

/* The path given to ivm_ubinary_open (owned by b). */
const char *ivm_ubinary_path(const struct ivm_ubinary *b);

/* Whether b is ET_DYN (PIE executable or shared library): needs a bias. */
bool ivm_ubinary_is_dyn(const struct ivm_ubinary *b);

/*
 * The GNU build-id of b: *bytes (owned by b) and *len.  Returns false,
 * with *bytes NULL and *len 0, when b has none.
 */
bool ivm_ubinary_build_id(const struct ivm_ubinary *b, const uint8_t **bytes,
			  size_t *len);

/* The executable PT_LOAD segments of b (at least one), in file order. */
size_t ivm_ubinary_nr_exec(const struct ivm_ubinary *b);
const struct ivm_ubinary_segment *ivm_ubinary_exec(const struct ivm_ubinary *b,
						   size_t i);

/*
 * The load bias of b from one of its file mappings, as /proc/PID/maps (or
 * the guest helper's MAPS answer) shows it: the mapping starts at guest
 * address map_start and maps the file from offset map_offset (both page
 * aligned).  The loader maps each PT_LOAD from its page-rounded p_offset
 * to its page-rounded p_vaddr plus the bias, so the segment whose
 * page-rounded p_offset is map_offset gives the bias.  IVM_ERROR_NOT_FOUND
 * when no PT_LOAD starts at that offset.
 */
struct ivm_error *ivm_ubinary_bias(const struct ivm_ubinary *b,
				   uint64_t map_start, uint64_t map_offset,
				   uint64_t *ret);

struct ivm_uimage;

/*
 * Guest user addresses [start, end) are code of binary, loaded at bias
 * (guest address = link-time address + bias).  The CFI comes from the
 * host copy binary when there is one, else from the guest's own bytes of
 * the file: image (uimage.h), read through file (a reader by file offset,
 * valid for the unwind).  All borrowed.
 */
struct ivm_umapping {
	uint64_t start, end;
	uint64_t bias;
	struct ivm_ubinary *binary;
	struct ivm_uimage *image;
	const struct ivm_kmem_reader *file;
	/* NULL, or where file ORs its sources (cfi_rows.h ivm_uimage_row). */
	unsigned int *file_sources;
};

/*
 * Fill maps (up to cap entries) with one mapping per executable segment of
 * b loaded at bias, and return how many b has (which may exceed cap).  For
 * a static non-PIE executable, bias is 0.  A segment whose range wraps at
 * this bias is left out.
 */
size_t ivm_ubinary_mappings(struct ivm_ubinary *b, uint64_t bias,
			    struct ivm_umapping *maps, size_t cap);

/*
 * Decoded CFI lookups kept per binary: direct-mapped by pc, a hit saves a
 * dwarf_cfi_addrframe() call (a malloc and a run of the FDE's
 * instructions).  Counters for benchmarks and tests.
 */
struct ivm_ubinary_stats {
	uint64_t lookups, hits;
};
void ivm_ubinary_stats(const struct ivm_ubinary *b,
		       struct ivm_ubinary_stats *ret);
/* Turn the row cache off (or back on), empty it, zero the counters. */
void ivm_ubinary_set_cache(struct ivm_ubinary *b, bool on);

/* The row libdw gives at link-time pc, as text (cfi_rows.h); for tests. */
char *ivm_ubinary_describe_row(struct ivm_ubinary *b, uint64_t pc, char *buf,
			       size_t len);

/* Most DWARF expression operations evaluated for one rule. */
#define IVM_UUNWIND_DWARF_MAX_OPS 64

/*
 * Append the user frames of regs to st by CFI: regs->rip first (exact pc,
 * IVM_FRAME_REGS), then each caller, found by the CFI row of its callee's
 * pc.  A return address is looked up at pc - 1, the call instruction; the
 * caller of a signal frame (glibc's __restore_rt) has an exact pc from a
 * sigcontext and is marked IVM_FRAME_REGS too.  The rules give the CFA
 * (register plus offset, or a DWARF expression: the common operations are
 * evaluated), the return address and rbx, rbp, r12-r15 (rsp is the CFA);
 * registers no rule recovers keep their value when CFI says "same value"
 * and become unknown otherwise.  Reads go through mem; la57 widens the
 * user address range.
 *
 * Where no mapping or no CFI covers a pc, that one step follows the frame
 * pointer instead ([rbp] saved rbp, [rbp + 8] return address) if rbp is
 * known, 8-aligned and above the stack pointer: the frame found is marked
 * IVM_FRAME_INEXACT and the stack IVM_STACK_FP_FALLBACK; an rbp of 0 there
 * ends the stack cleanly (the outermost frame clears rbp).  Otherwise the
 * stack ends there with IVM_STACK_TRUNCATED_BAD_ORC.
 *
 * Ends cleanly (no truncation flag) when the CFI marks the return address
 * undefined (glibc's _start and thread start) or the return address is 0.
 * Bounds: st->cap frames; each frame's stack pointer (the callee's CFA)
 * must strictly grow and stay within IVM_UUNWIND_MAX_SPAN of regs->rsp
 * (TRUNCATED_LOOP otherwise); pcs must be canonical user addresses
 * (TRUNCATED_BAD_ORC); a failed read ends the stack with TRUNCATED_FAULT
 * and fault_addr; an expression longer than IVM_UUNWIND_DWARF_MAX_OPS
 * steps, or one using what is not known, ends it with TRUNCATED_BAD_ORC.
 * Frames carry IVM_FRAME_USER.
 *
 * Errors only for caller mistakes: NULL pointers, zero capacity, a
 * mapping without binary or with start >= end.  The binaries are used
 * (their row caches change) but not otherwise modified.
 */
struct ivm_error *ivm_uunwind_dwarf(const struct ivm_kmem_reader *mem,
				    const struct ivm_x86_regs *regs, int la57,
				    const struct ivm_umapping *maps,
				    size_t nr_maps, struct ivm_stack *st);

#endif /* IVM_UUNWIND_DWARF_H */
