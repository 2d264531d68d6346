// SPDX-License-Identifier: MIT
#include "unwind/uunwind.h"

static bool user_pc(uint64_t pc, uint64_t max)
{
	/* Page zero is never mapped; a pc there is garbage. */
	return pc >= 4096 && pc < max;
}

struct ivm_error *ivm_uunwind_fp(const struct ivm_kmem_reader *mem,
				 const struct ivm_x86_regs *regs, int la57,
				 struct ivm_stack *st)
{
	uint64_t max = la57 ? IVM_USER_ADDR_MAX_LA57 : IVM_USER_ADDR_MAX;
	uint64_t fp, sp, limit;

	if (!mem || !regs || !st || !st->cap)
		return ivm_error_create(IVM_ERROR_INVALID,
					"user unwind: bad arguments");
	if (!user_pc(regs->rip, max))
		return NULL;
	if (!ivm_stack_push(st, regs->rip, regs->rsp,
			    IVM_FRAME_USER | IVM_FRAME_REGS))
		return NULL;
	sp = regs->rsp;
	fp = regs->rbp;
	limit = sp + IVM_UUNWIND_MAX_SPAN;
	if (limit < sp || limit > max)
		limit = max;

	/*
	 * The frame cap bounds the loop; the strictly growing frame pointer
	 * inside [sp, limit) makes a cycle impossible anyway.
	 */
	while (st->nr < st->cap) {
		uint64_t frame[2];	/* saved rbp, return address */
		struct ivm_error *err;

		if (!fp)
			break;	/* the outermost frame clears rbp */
		if (fp & 7 || fp < sp || fp > limit - sizeof(frame)) {
			st->flags |= IVM_STACK_TRUNCATED_LOOP;
			break;
		}
		err = mem->read(mem->ctx, fp, frame, sizeof(frame));
		if (err) {
			st->flags |= IVM_STACK_TRUNCATED_FAULT;
			st->fault_addr = err->code == IVM_ERROR_FAULT ?
					 err->address : fp;
			ivm_error_destroy(err);
			break;
		}
		if (!user_pc(frame[1], max)) {
			/* A zero return address ends a chain cleanly. */
			if (frame[1])
				st->flags |= IVM_STACK_TRUNCATED_BAD_ORC;
			break;
		}
		ivm_stack_push(st, frame[1], fp + 16,
			       IVM_FRAME_USER | IVM_FRAME_INEXACT);
		sp = fp + 16;
		fp = frame[0];
		if (fp && fp < sp) {
			st->flags |= IVM_STACK_TRUNCATED_LOOP;
			break;
		}
	}
	if (st->nr == st->cap && fp)
		st->flags |= IVM_STACK_TRUNCATED_CAP;
	return NULL;
}
