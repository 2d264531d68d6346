/* SPDX-License-Identifier: MIT */
/*
 * uunwind: unwinding a guest user-space stack from the host by frame
 * pointers.
 *
 * Starts from the user registers saved on kernel entry (the pt_regs at the
 * top of a blocked task's kernel stack, see kunwind.h) or from a vCPU's
 * registers in user mode, and follows the rbp chain: [rbp] is the caller's
 * rbp, [rbp + 8] the return address.  Memory is read through the task's own
 * page tables (its mm->pgd) with the same reader callback as the kernel
 * unwinder.
 *
 * Code built without frame pointers gives a short or wrong chain here; the
 * DWARF CFI unwinder (when the binary is on the host) is the answer for
 * those, and frames found by this one are marked as frame-pointer frames.
 *
 * Bounds against a hostile guest: the caller's frame cap; every pc must be
 * a canonical user address; the frame pointer must be 8-aligned, strictly
 * grow and stay within IVM_UUNWIND_MAX_SPAN bytes of the starting stack
 * pointer; a fault ends the stack.  Never an error for bad guest data.
 */
#ifndef IVM_UUNWIND_H
#define IVM_UUNWIND_H

#include "base/error.h"
#include "unwind/kunwind.h"
#include "unwind/unwind.h"

/* Largest user stack walked: glibc thread stacks default to 8 MiB. */
#define IVM_UUNWIND_MAX_SPAN (64ull << 20)

/* Top of the x86-64 user half (4-level paging; 5-level allows more). */
#define IVM_USER_ADDR_MAX 0x0000800000000000ull
#define IVM_USER_ADDR_MAX_LA57 0x0100000000000000ull

/*
 * Append the user frames of regs (rip, rsp, rbp) to st: regs->rip first.
 * la57 widens the user address range.  Frames carry IVM_FRAME_USER; all
 * but the first also IVM_FRAME_INEXACT (a frame-pointer chain is only as
 * good as the code's discipline).
 */
struct ivm_error *ivm_uunwind_fp(const struct ivm_kmem_reader *mem,
				 const struct ivm_x86_regs *regs, int la57,
				 struct ivm_stack *st);

#endif /* IVM_UUNWIND_H */
