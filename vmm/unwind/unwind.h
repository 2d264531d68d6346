/* SPDX-License-Identifier: MIT */
/*
 * The result of unwinding one guest call stack, shared by the kernel
 * unwinder (vmm/unwind/kunwind.h) and the user-space unwinder.
 *
 * The caller owns a fixed-capacity frame array and hands it in; an unwinder
 * never allocates, so the profiler can unwind on its hot path.  Frames are
 * leaf first.  Kernel pcs are runtime (KASLR-slid) guest addresses.
 *
 * Invariants of a struct ivm_stack after any unwinder returned:
 *  - nr <= cap, and frames[0..nr) are initialized; frames[nr..cap) are not
 *    touched.
 *  - flags says how the stack ended.  At most one IVM_STACK_TRUNCATED_*
 *    reason is set; none set means the unwinder reached a clean end (an
 *    end-of-stack hint, or user space with IVM_STACK_REACHED_USER).
 *  - fault_addr is meaningful only with IVM_STACK_TRUNCATED_FAULT or
 *    IVM_STACK_TRUNCATED_BOUNDS: the first guest address that could not be
 *    read, or that lay outside every known stack.
 *  - user_regs is meaningful only with IVM_STACK_REACHED_USER: the user
 *    register state saved on kernel entry (valid groups in user_regs.valid).
 *  - A truncated stack is still a stack: every frame before the truncation
 *    point was found by the rules, and is kept.
 */
#ifndef IVM_UNWIND_H
#define IVM_UNWIND_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/x86_64_regs.h"

enum {
	IVM_FRAME_KERNEL	= 1u << 0,  /* guest kernel address */
	IVM_FRAME_USER		= 1u << 1,  /* guest user address */
	/*
	 * pc is an exact interrupted instruction taken from a register set
	 * (vCPU registers or a pt_regs on the stack), not a return address:
	 * symbolize pc itself, not pc - 1.
	 */
	IVM_FRAME_REGS		= 1u << 2,
	/* found by the frame-pointer fallback: a guess, maybe wrong */
	IVM_FRAME_INEXACT	= 1u << 3,
};

struct ivm_frame {
	uint64_t pc;
	uint64_t sp;		/* stack pointer of this frame at pc */
	uint32_t flags;		/* IVM_FRAME_* */
};

/*
 * Stack flags.  The first four share their bit with the IVM_STACK_TRUNC_*
 * flags of vmm/profile/sample.h of the same meaning, so the profiler can copy them.
 */
enum {
	IVM_STACK_TRUNCATED_FAULT	= 1u << 0,  /* guest memory unreadable */
	IVM_STACK_TRUNCATED_CAP		= 1u << 1,  /* frame array full */
	IVM_STACK_TRUNCATED_LOOP	= 1u << 2,  /* sp did not move up */
	IVM_STACK_TRUNCATED_BAD_ORC	= 1u << 3,  /* no usable unwind info */
	IVM_STACK_FP_FALLBACK		= 1u << 4,  /* some frames inexact */
	/* a read fell outside every known stack range (fault_addr set) */
	IVM_STACK_TRUNCATED_BOUNDS	= 1u << 8,
	/* the kernel stack ended in a user-mode pt_regs; user_regs valid */
	IVM_STACK_REACHED_USER		= 1u << 9,
	/* user_regs came from an iret frame only: rip, rsp, rflags, cs, ss */
	IVM_STACK_USER_REGS_PARTIAL	= 1u << 10,
	/* an end-of-stack hint (top of a kernel thread, entry code) */
	IVM_STACK_END_HINT		= 1u << 11,
	/* the CFI for a pc exists, but the guest did not hold its bytes */
	IVM_STACK_TRUNCATED_NO_CFI	= 1u << 12,
};

#define IVM_STACK_TRUNCATED_MASK                                        \
	(IVM_STACK_TRUNCATED_FAULT | IVM_STACK_TRUNCATED_CAP |          \
	 IVM_STACK_TRUNCATED_LOOP | IVM_STACK_TRUNCATED_BAD_ORC |       \
	 IVM_STACK_TRUNCATED_BOUNDS | IVM_STACK_TRUNCATED_NO_CFI)

struct ivm_stack {
	struct ivm_frame *frames;	/* caller-owned, cap entries */
	uint32_t nr, cap;
	uint32_t flags;			/* IVM_STACK_* */
	struct ivm_x86_regs user_regs;	/* valid with REACHED_USER */
	uint64_t fault_addr;		/* valid with TRUNCATED_FAULT/BOUNDS */
};

/* Point st at the caller's array of cap frames and empty it. */
static inline void ivm_stack_init(struct ivm_stack *st,
				  struct ivm_frame *frames, uint32_t cap)
{
	memset(st, 0, sizeof(*st));
	st->frames = frames;
	st->cap = cap;
}

/* Empty st for reuse, keeping its frame array. */
static inline void ivm_stack_reset(struct ivm_stack *st)
{
	struct ivm_frame *frames = st->frames;
	uint32_t cap = st->cap;

	ivm_stack_init(st, frames, cap);
}

/* Append a frame; when full, set IVM_STACK_TRUNCATED_CAP and return false. */
static inline bool ivm_stack_push(struct ivm_stack *st, uint64_t pc,
				  uint64_t sp, uint32_t flags)
{
	if (st->nr >= st->cap) {
		st->flags |= IVM_STACK_TRUNCATED_CAP;
		return false;
	}
	st->frames[st->nr].pc = pc;
	st->frames[st->nr].sp = sp;
	st->frames[st->nr].flags = flags;
	st->nr++;
	return true;
}

static inline bool ivm_stack_truncated(const struct ivm_stack *st)
{
	return (st->flags & IVM_STACK_TRUNCATED_MASK) != 0;
}

#endif /* IVM_UNWIND_H */
