/* SPDX-License-Identifier: MIT */
/*
 * kunwind: unwinding a guest kernel stack from the host.
 *
 * The same algorithm as the kernel's own ORC unwinder
 * (arch/x86/kernel/unwind_orc.c), run over guest memory read through a
 * callback: from a start state (pc, sp, bp and, for a running vCPU, its
 * registers), each step looks up the ORC entry of the pc, computes the
 * caller's stack pointer, and reads either a return address (CALL) or a
 * pt_regs (REGS, REGS_PARTIAL: an interrupt, exception or syscall entry).
 * A pt_regs from user mode ends the kernel stack with the user registers;
 * an end-of-stack hint, or a zero return address (as the kernel's own walk
 * treats it), ends it cleanly.  Where ORC has nothing for a pc (module
 * code, BPF, an undefined entry), the rbp frame-pointer chain is followed
 * instead and those frames are marked inexact; a guess that leads nowhere
 * ends the stack with IVM_STACK_TRUNCATED_BAD_ORC.  A pc reached through
 * ORC or a guess is kept only if it lies in the kernel text or the module
 * area.  Not handled: return addresses rewritten by the function-graph
 * tracer or kretprobes (return_to_handler, the rethook trampoline) are
 * reported as they are, not recovered.
 *
 * Every read must fall inside one of the stack ranges the caller gives
 * (task stack, IRQ stacks, exception stacks of the CPU); within one range
 * the stack pointer must strictly grow, and a range once left is never
 * re-entered.  Together with the caller's frame cap this bounds every
 * unwind.  A fault, a loop or garbage unwind information ends the stack and
 * marks it (see unwind.h); it is never an error.  Errors are returned only
 * for caller mistakes (no stack ranges, zero capacity, NULL pointers).
 *
 * Layout assumptions: struct pt_regs is the x86-64 user ABI layout
 * (arch/x86/include/uapi/asm/ptrace.h, also what PTRACE_GETREGS returns):
 * 21 8-byte slots r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di
 * orig_ax ip cs flags sp ss; it has not changed since x86-64 Linux began,
 * so it is a constant here.  struct inactive_task_frame (what
 * task_struct.thread.sp points to) is not an ABI: its size and the offsets
 * of bp and ret_addr come from the caller (BTF).
 */
#ifndef IVM_KUNWIND_H
#define IVM_KUNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "kernel/btf.h"
#include "base/error.h"
#include "gmem/gmem.h"
#include "kernel/orc.h"
#include "unwind/unwind.h"
#include "gmem/vmem.h"
#include "gmem/x86_64_paging.h"
#include "base/x86_64_regs.h"

/* sizeof(struct pt_regs) on x86-64 (ABI). */
#define IVM_PT_REGS_SIZE 168u

enum ivm_stack_kind {
	IVM_STACK_RANGE_TASK,		/* task_struct.stack, THREAD_SIZE */
	IVM_STACK_RANGE_IRQ,		/* per-CPU hardirq stack */
	IVM_STACK_RANGE_EXCEPTION,	/* IST stacks: NMI, #DB, #MC, #DF, #VC */
	IVM_STACK_RANGE_ENTRY,		/* entry trampoline stack */
	IVM_STACK_RANGE_OTHER,
};

/* One stack: guest virtual addresses [lo, hi). */
struct ivm_stack_range {
	uint64_t lo, hi;
	enum ivm_stack_kind kind;
};

/* At most this many stack ranges per unwind. */
#define IVM_KUNWIND_MAX_STACKS 64

/*
 * Where one guest kernel keeps the per-CPU stacks a running vCPU may be on
 * besides its task's stack: the hardirq stack (per-CPU hardirq_stack_ptr
 * points at its top slot, which holds the interrupted task's sp) and the
 * IST exception stacks in the CPU entry area (per-CPU cea_exception_stacks
 * points at a struct cea_exception_stacks: DF, NMI, DB, MCE, VC, VC2
 * stacks between guard pages).  Found once per guest; the stack addresses
 * themselves are read per CPU by ivm_kunwind_cpu_stacks().
 */
#define IVM_KUNWIND_MAX_IST 8

struct ivm_cpu_stacks_layout {
	uint64_t hardirq_stack_ptr;	/* per-CPU offset of it; 0: none */
	uint32_t irq_stack_size;	/* sizeof(struct irq_stack) */
	uint64_t cea_exception_stacks;	/* per-CPU offset of it; 0: none */
	uint32_t nr_ist;
	struct {
		uint32_t offset, size;	/* of an *_stack member */
	} ist[IVM_KUNWIND_MAX_IST];
};

/*
 * Fill *ret from the guest kernel's BTF and the per-CPU offsets (link-time
 * System.map values, which per-CPU symbols keep at run time) of
 * hardirq_stack_ptr and cea_exception_stacks; either may be 0 if the
 * kernel lacks it.  Exception stacks the kernel does not have (VC without
 * SEV support) are left out.  IVM_ERROR_NOT_FOUND if hardirq_stack_ptr is
 * given but struct irq_stack is not in the BTF.
 */
struct ivm_error *ivm_cpu_stacks_layout_from_btf(
	const struct ivm_btf *btf, uint64_t hardirq_stack_ptr,
	uint64_t cea_exception_stacks, struct ivm_cpu_stacks_layout *ret);

/*
 * The IRQ and exception stack ranges of the CPU whose per-CPU area starts
 * at per_cpu_offset (its GS base in kernel mode), read through mem, into
 * ranges (at most max); returns how many were stored.  A pointer that
 * cannot be read, or that gives a range wrapping the address space, is
 * left out: a lying guest yields fewer ranges, never an error.  Add the
 * running task's stack to these before ivm_kunwind_regs().
 */
size_t ivm_kunwind_cpu_stacks(const struct ivm_cpu_stacks_layout *layout,
			      const struct ivm_kmem_reader *mem,
			      uint64_t per_cpu_offset,
			      struct ivm_stack_range *ranges, size_t max);

/* What stays the same for every unwind of one guest kernel. */
struct ivm_kunwind_orc_range {
	uint64_t lo, hi;
	const struct ivm_orc_table *orc;
};

struct ivm_kunwind_config {
	/* ORC table; NULL means frame pointers only (every frame inexact). */
	const struct ivm_orc_table *orc;
	/*
	 * Added to a table ip to get a runtime address: the KASLR slide for
	 * a table from vmlinux, 0 for one read from guest memory.
	 */
	uint64_t orc_slide;
	/*
	 * Runtime kernel text [text_lo, text_hi): a frame-pointer guess is
	 * kept only if its pc falls here.  0, 0: the table's ip range plus
	 * orc_slide, or the whole kernel half of the address space without
	 * a table.
	 */
	uint64_t text_lo, text_hi;
	/*
	 * Runtime address of ret_from_fork, 0 if unknown: a blocked task
	 * that never ran has it as its switch-frame return address, which
	 * is then an exact pc rather than a return address.
	 */
	uint64_t ret_from_fork;
	/*
	 * ORC tables of code outside the kernel image (loaded modules), each
	 * for the runtime range [lo, hi), its ips runtime addresses (read
	 * from guest memory).  Consulted for a pc in one of the ranges; a pc
	 * there also counts as kernel text for frame-pointer guesses.
	 */
	const struct ivm_kunwind_orc_range *extra_orc;
	size_t nr_extra_orc;
};

/* Where struct inactive_task_frame keeps what the unwinder needs. */
struct ivm_switch_frame_layout {
	uint32_t size;		/* sizeof(struct inactive_task_frame): 56 on 6.1 */
	uint32_t bp;		/* offsetof(..., bp): 40 on 6.1 */
	uint32_t ret_addr;	/* offsetof(..., ret_addr): 48 on 6.1 */
};

/* A start state for ivm_kunwind(). */
struct ivm_kunwind_start {
	uint64_t pc, sp, bp;
	/*
	 * pc is exact (an interrupted instruction, as from vCPU registers),
	 * not a return address: its own ORC entry applies, not pc - 1's.
	 */
	bool signal;
	/*
	 * Optional full register set at the start (a running vCPU): ORC
	 * entries based on DX, DI, R10 or R13 need it.  Borrowed.
	 */
	const struct ivm_x86_regs *regs;
};

/*
 * Unwind from start into st (emptied first).  frames[0] is the start pc.
 * stacks/nr_stacks (1..IVM_KUNWIND_MAX_STACKS, non-empty ranges) bound
 * every read.  Returns an error only if an argument is invalid; whatever
 * the guest memory holds, it returns NULL with st describing the stack.
 */
struct ivm_error *ivm_kunwind(const struct ivm_kunwind_config *cfg,
			      const struct ivm_kmem_reader *mem,
			      const struct ivm_stack_range *stacks,
			      size_t nr_stacks,
			      const struct ivm_kunwind_start *start,
			      struct ivm_stack *st);

/*
 * Unwind a vCPU that is executing in the guest kernel, from its registers
 * (rip, rsp, rbp and the rest for ORC).  IVM_ERROR_INVALID if regs lack
 * GPRS or say user mode (cs RPL 3, when segments are valid): there is no
 * kernel stack to unwind then.
 */
struct ivm_error *ivm_kunwind_regs(const struct ivm_kunwind_config *cfg,
				   const struct ivm_kmem_reader *mem,
				   const struct ivm_stack_range *stacks,
				   size_t nr_stacks,
				   const struct ivm_x86_regs *regs,
				   struct ivm_stack *st);

/*
 * Unwind a task that is not running, from its saved switch frame:
 * thread_sp is task_struct.thread.sp, pointing at its struct
 * inactive_task_frame.  As the kernel does, the first frame is the frame's
 * ret_addr (in __schedule, or ret_from_fork) with sp just above the frame.
 * If the frame cannot be read, st is empty with TRUNCATED_FAULT (or
 * TRUNCATED_BOUNDS if it is not inside a known stack).
 */
struct ivm_error *ivm_kunwind_blocked(const struct ivm_kunwind_config *cfg,
				      const struct ivm_kmem_reader *mem,
				      const struct ivm_stack_range *stacks,
				      size_t nr_stacks, uint64_t thread_sp,
				      const struct ivm_switch_frame_layout *layout,
				      struct ivm_stack *st);

#endif /* IVM_KUNWIND_H */
