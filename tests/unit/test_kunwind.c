// SPDX-License-Identifier: MIT
/*
 * Kernel unwinder over synthetic guest stacks: host buffers standing for a
 * task stack and an IRQ stack at kernel virtual addresses, and a hand-made
 * ORC table (V1 bitfields, as Debian's 6.1) at link-time addresses with a
 * KASLR slide applied at runtime.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "unwind/kunwind.h"
#include "test_kunwind_real.h"
#include "test_paging_synth.h"

#define LINK_BASE 0xffffffff81000000ull
#define SLIDE 0x2a00000ull
#define LINK(off) (LINK_BASE + (off))
#define RT(off) (LINK(off) + SLIDE)

/* Functions of the synthetic kernel: each owns 0x1000 bytes of text. */
enum {
	F_LEAF = 0x1000,	/* CALL, CFA = sp + 24 */
	F_MID = 0x2000,		/* CALL, CFA = sp + 8 */
	F_FP = 0x3000,		/* CALL, CFA = bp + 16, bp at CFA - 16 */
	F_ENTRY_REGS = 0x4000,	/* REGS at sp */
	F_ENTRY_IRET = 0x5000,	/* REGS_PARTIAL at sp */
	F_TOP = 0x6000,		/* end of stack */
	F_SWITCH = 0x7000,	/* CALL, CFA = *sp + 16 (IRQ stack switch) */
	F_UNDEF = 0x8000,	/* no information */
	F_DX = 0x9000,		/* CALL, CFA = dx (offset 8 ignored) */
	F_GARBAGE = 0xa000,	/* sp_reg 12: nonsense */
	F_LOOP = 0xb000,	/* CALL, CFA = sp + 0 */
	F_REC = 0xc000,		/* CALL, CFA = sp + 16 */
	F_BADBP = 0xd000,	/* CALL, CFA = sp + 8, bp_reg 11: nonsense */
	F_BPIND = 0xe000,	/* CALL, CFA = *(bp + 8) */
	F_END = 0xf000,		/* terminator */
};

#define TASK_LO 0xffffc90000100000ull
#define TASK_SIZE 0x4000ull
#define TASK_HI (TASK_LO + TASK_SIZE)
#define IRQ_LO 0xffff88807fc00000ull
#define IRQ_SIZE 0x4000ull
#define IRQ_HI (IRQ_LO + IRQ_SIZE)

/* ---- synthetic memory --------------------------------------------- */

struct smem {
	uint8_t task[TASK_SIZE];
	uint8_t irq[IRQ_SIZE];
	uint64_t hole_lo, hole_hi;	/* reads touching this fault */
	unsigned int reads;
};

static uint8_t *smem_ptr(struct smem *m, uint64_t va, size_t len)
{
	if (va >= TASK_LO && va < TASK_HI && len <= TASK_HI - va)
		return m->task + (va - TASK_LO);
	if (va >= IRQ_LO && va < IRQ_HI && len <= IRQ_HI - va)
		return m->irq + (va - IRQ_LO);
	return NULL;
}

static struct ivm_error *smem_read(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	struct smem *m = ctx;
	uint8_t *p;

	m->reads++;
	if (va < m->hole_hi && va + len > m->hole_lo)
		return ivm_error_fault(va > m->hole_lo ? va : m->hole_lo,
				       "synthetic fault");
	p = smem_ptr(m, va, len);
	if (!p)
		return ivm_error_fault(va, "unmapped synthetic address");
	memcpy(buf, p, len);
	return NULL;
}

static void put64(struct smem *m, uint64_t va, uint64_t v)
{
	uint8_t *p = smem_ptr(m, va, 8);

	cr_assert_not_null(p, "test writes outside its stacks at %#lx",
			   (unsigned long)va);
	memcpy(p, &v, 8);
}

/* ---- synthetic ORC table ------------------------------------------ */

static void put_entry(uint8_t *ipb, uint8_t *orcb, size_t i, uint64_t sec,
		      uint64_t ip, int16_t sp_off, int16_t bp_off,
		      unsigned int sp_reg, unsigned int bp_reg,
		      unsigned int type, unsigned int end)
{
	int32_t rel = (int32_t)(ip - (sec + 4 * i));
	uint8_t *p = orcb + 6 * i;

	memcpy(ipb + 4 * i, &rel, 4);
	memcpy(p, &sp_off, 2);
	memcpy(p + 2, &bp_off, 2);
	p[4] = (uint8_t)(sp_reg | bp_reg << 4);
	p[5] = (uint8_t)(type | end << 2);
}

static struct ivm_orc_table *make_table(void)
{
	const uint64_t sec = 0xffffffff82c00000ull;
	uint8_t ipb[4 * 16], orcb[6 * 16];
	struct ivm_orc_table *t = NULL;
	size_t n = 0;

	/* V1: type 0 CALL, 1 REGS, 2 REGS_PARTIAL; regs SP 5, BP 4 ... */
	put_entry(ipb, orcb, n++, sec, LINK(0), 0, 0, 0, 0, 0, 1);
	put_entry(ipb, orcb, n++, sec, LINK(F_LEAF), 24, 0, 5, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_MID), 8, 0, 5, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_FP), 16, -16, 4, 1, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_ENTRY_REGS), 0, 0, 5, 0, 1, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_ENTRY_IRET), 0, 0, 5, 0, 2, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_TOP), 0, 0, 0, 0, 0, 1);
	put_entry(ipb, orcb, n++, sec, LINK(F_SWITCH), 16, 0, 9, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_UNDEF), 0, 0, 0, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_DX), 8, 0, 2, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_GARBAGE), 8, 0, 12, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_LOOP), 0, 0, 5, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_REC), 16, 0, 5, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_BADBP), 8, 0, 5, 11, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_BPIND), 8, 0, 8, 0, 0, 0);
	put_entry(ipb, orcb, n++, sec, LINK(F_END), 0, 0, 0, 0, 0, 0);
	cr_assert_null(ivm_orc_load_buffer(ipb, 4 * n, sec, orcb, 6 * n,
					   IVM_ORC_FORMAT_V1, &t));
	return t;
}

/* ---- fixture ------------------------------------------------------ */

static struct smem *mem;
static struct ivm_orc_table *table;
static struct ivm_kunwind_config cfg;
static struct ivm_kmem_reader reader;
static const struct ivm_stack_range stacks[] = {
	{ IRQ_LO, IRQ_HI, IVM_STACK_RANGE_IRQ },
	{ TASK_LO, TASK_HI, IVM_STACK_RANGE_TASK },
};
static struct ivm_frame frames[64];
static struct ivm_stack st;

static void setup(void)
{
	mem = calloc(1, sizeof(*mem));
	cr_assert_not_null(mem);
	table = make_table();
	memset(&cfg, 0, sizeof(cfg));
	cfg.orc = table;
	cfg.orc_slide = SLIDE;
	reader.read = smem_read;
	reader.ctx = mem;
	ivm_stack_init(&st, frames, 64);
}

static void teardown(void)
{
	ivm_orc_destroy(table);
	free(mem);
}

static void unwind_from(uint64_t pc, uint64_t sp, uint64_t bp, bool signal)
{
	struct ivm_kunwind_start start = {
		.pc = pc, .sp = sp, .bp = bp, .signal = signal,
	};

	cr_assert_null(ivm_kunwind(&cfg, &reader, stacks, 2, &start, &st));
}

static void expect_frame(uint32_t i, uint64_t pc, uint64_t sp,
			 uint32_t flags)
{
	cr_assert_lt(i, st.nr, "frame %u missing (nr %u)", i, st.nr);
	cr_assert_eq(st.frames[i].pc, pc, "frame %u pc %#lx, want %#lx", i,
		     (unsigned long)st.frames[i].pc, (unsigned long)pc);
	cr_assert_eq(st.frames[i].sp, sp, "frame %u sp %#lx, want %#lx", i,
		     (unsigned long)st.frames[i].sp, (unsigned long)sp);
	cr_assert_eq(st.frames[i].flags, flags, "frame %u flags %#x, want %#x",
		     i, st.frames[i].flags, flags);
}

#define K IVM_FRAME_KERNEL

TestSuite(kunwind, .init = setup, .fini = teardown);

Test(kunwind, call_chain_to_end_hint)
{
	uint64_t s = TASK_LO + 0x3000;

	put64(mem, s + 16, RT(F_MID) + 0x20);	/* leaf's return address */
	put64(mem, s + 24, RT(F_FP) + 0x30);	/* mid's */
	put64(mem, s + 48, 0x4242);		/* fp's saved bp */
	put64(mem, s + 56, RT(F_TOP) + 5);	/* fp's return address */

	unwind_from(RT(F_LEAF) + 0x10, s, s + 48, true);
	cr_assert_eq(st.nr, 4);
	expect_frame(0, RT(F_LEAF) + 0x10, s, K | IVM_FRAME_REGS);
	expect_frame(1, RT(F_MID) + 0x20, s + 24, K);
	expect_frame(2, RT(F_FP) + 0x30, s + 32, K);
	expect_frame(3, RT(F_TOP) + 5, s + 64, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
	cr_assert_not(ivm_stack_truncated(&st));
}

Test(kunwind, return_address_looked_up_minus_one)
{
	uint64_t s = TASK_LO + 0x3000;

	/*
	 * mid returns to exactly RT(F_MID): the call was the last
	 * instruction of leaf (a noreturn call), so leaf's entry applies.
	 */
	put64(mem, s, RT(F_MID));
	put64(mem, s + 8, 0xdeadull);		/* what mid's entry would use */
	put64(mem, s + 24, RT(F_TOP) + 1);
	unwind_from(RT(F_MID) + 4, s, 0, true);
	cr_assert_eq(st.nr, 3);
	expect_frame(1, RT(F_MID), s + 8, K);
	expect_frame(2, RT(F_TOP) + 1, s + 32, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
}

/*
 * A module's code, with its own ORC table (runtime ips, as read from the
 * guest): leaf returns into the module function, whose frame is 16 bytes,
 * and that returns to the top.
 */
Test(kunwind, module_orc_table)
{
	const uint64_t mod = 0xffffffffc0100000ull, sec = mod + 0x8000;
	uint8_t ipb[4 * 3], orcb[6 * 3];
	struct ivm_orc_table *mt = NULL;
	struct ivm_kunwind_orc_range r;
	uint64_t s = TASK_LO + 0x3000;

	put_entry(ipb, orcb, 0, sec, mod, 0, 0, 0, 0, 0, 1);
	put_entry(ipb, orcb, 1, sec, mod + 0x100, 16, 0, 5, 0, 0, 0);
	put_entry(ipb, orcb, 2, sec, mod + 0x200, 0, 0, 0, 0, 0, 0);
	cr_assert_null(ivm_orc_load_buffer(ipb, sizeof(ipb), sec, orcb,
					   sizeof(orcb), IVM_ORC_FORMAT_V1,
					   &mt));
	put64(mem, s + 16, mod + 0x150);	/* leaf returns into the module */
	put64(mem, s + 24 + 8, RT(F_TOP) + 3);	/* the module's return */

	/* Without the module's table: a frame-pointer guess that fails. */
	unwind_from(RT(F_LEAF) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 2);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_BAD_ORC);

	r = (struct ivm_kunwind_orc_range){ mod, mod + 0x200, mt };
	cfg.extra_orc = &r;
	cfg.nr_extra_orc = 1;
	unwind_from(RT(F_LEAF) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 3);
	expect_frame(1, mod + 0x150, s + 24, K);
	expect_frame(2, RT(F_TOP) + 3, s + 40, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
	cfg.extra_orc = NULL;
	cfg.nr_extra_orc = 0;
	ivm_orc_destroy(mt);
}

static void put_pt_regs(uint64_t at, uint64_t ip, uint64_t cs, uint64_t sp,
			uint64_t bp)
{
	unsigned int i;

	/* r15..di: 0x1000 + slot, so every register is told apart */
	for (i = 0; i < 21; i++)
		put64(mem, at + 8 * i, 0x1000 + i);
	put64(mem, at + 8 * 4, bp);
	put64(mem, at + 8 * 16, ip);
	put64(mem, at + 8 * 17, cs);
	put64(mem, at + 8 * 18, 0x246);
	put64(mem, at + 8 * 19, sp);
	put64(mem, at + 8 * 20, cs == 0x33 ? 0x2b : 0x18);
}

Test(kunwind, syscall_reaches_user)
{
	uint64_t s = TASK_HI - IVM_PT_REGS_SIZE - 24;

	put64(mem, s + 16, RT(F_ENTRY_REGS) + 0x6e);
	put_pt_regs(s + 24, 0x401000, 0x33, 0x7ffd0000, 0x7ffd0100);
	unwind_from(RT(F_LEAF) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 2);
	expect_frame(1, RT(F_ENTRY_REGS) + 0x6e, s + 24, K);
	cr_assert_eq(st.flags, IVM_STACK_REACHED_USER);
	cr_assert_eq(st.user_regs.valid, IVM_X86_REGS_GPRS);
	cr_assert_eq(st.user_regs.rip, 0x401000);
	cr_assert_eq(st.user_regs.rsp, 0x7ffd0000);
	cr_assert_eq(st.user_regs.rbp, 0x7ffd0100);
	cr_assert_eq(st.user_regs.rflags, 0x246);
	cr_assert_eq(st.user_regs.cs, 0x33);
	cr_assert_eq(st.user_regs.ss, 0x2b);
	cr_assert_eq(st.user_regs.r15, 0x1000);
	cr_assert_eq(st.user_regs.r14, 0x1001);
	cr_assert_eq(st.user_regs.r13, 0x1002);
	cr_assert_eq(st.user_regs.r12, 0x1003);
	cr_assert_eq(st.user_regs.rbx, 0x1005);
	cr_assert_eq(st.user_regs.r11, 0x1006);
	cr_assert_eq(st.user_regs.r10, 0x1007);
	cr_assert_eq(st.user_regs.r9, 0x1008);
	cr_assert_eq(st.user_regs.r8, 0x1009);
	cr_assert_eq(st.user_regs.rax, 0x100a);
	cr_assert_eq(st.user_regs.rcx, 0x100b);
	cr_assert_eq(st.user_regs.rdx, 0x100c);
	cr_assert_eq(st.user_regs.rsi, 0x100d);
	cr_assert_eq(st.user_regs.rdi, 0x100e);
}

Test(kunwind, iret_frame_reaches_user_partially)
{
	uint64_t s = TASK_HI - 40 - 24;

	put64(mem, s + 16, RT(F_ENTRY_IRET) + 0x8);
	put64(mem, s + 24, 0x402000);		/* ip */
	put64(mem, s + 32, 0x33);		/* cs */
	put64(mem, s + 40, 0x202);		/* flags */
	put64(mem, s + 48, 0x7ffe0000);		/* sp */
	put64(mem, s + 56, 0x2b);		/* ss */
	unwind_from(RT(F_LEAF) + 0x10, s, 0x7ffe0040, true);
	cr_assert_eq(st.nr, 2);
	cr_assert_eq(st.flags,
		     IVM_STACK_REACHED_USER | IVM_STACK_USER_REGS_PARTIAL);
	cr_assert_eq(st.user_regs.valid, 0);
	cr_assert_eq(st.user_regs.rip, 0x402000);
	cr_assert_eq(st.user_regs.rsp, 0x7ffe0000);
	cr_assert_eq(st.user_regs.rflags, 0x202);
	cr_assert_eq(st.user_regs.cs, 0x33);
	cr_assert_eq(st.user_regs.rbp, 0x7ffe0040);
}

Test(kunwind, irq_stack_to_task_stack_through_kernel_regs)
{
	uint64_t i = IRQ_HI - 8 - 24;		/* leaf's sp on the IRQ stack */
	uint64_t t = TASK_LO + 0x2000;		/* sp saved by the switch */
	uint64_t t2 = t + 24 + IVM_PT_REGS_SIZE; /* interrupted sp */

	put64(mem, i + 16, RT(F_SWITCH) + 0x10);
	put64(mem, IRQ_HI - 8, t);		/* old sp at the IRQ stack top */
	put64(mem, t + 8, RT(F_MID) + 0x40);
	put64(mem, t + 16, RT(F_ENTRY_REGS) + 0x6e);
	put_pt_regs(t + 24, RT(F_LEAF) + 0x80, 0x10, t2, 0x5555);
	put64(mem, t2 + 16, RT(F_TOP) + 3);

	unwind_from(RT(F_LEAF) + 0x10, i, 0, true);
	cr_assert_eq(st.nr, 6, "nr %u flags %#x", st.nr, st.flags);
	expect_frame(0, RT(F_LEAF) + 0x10, i, K | IVM_FRAME_REGS);
	expect_frame(1, RT(F_SWITCH) + 0x10, i + 24, K);
	expect_frame(2, RT(F_MID) + 0x40, t + 16, K);
	expect_frame(3, RT(F_ENTRY_REGS) + 0x6e, t + 24, K);
	expect_frame(4, RT(F_LEAF) + 0x80, t2, K | IVM_FRAME_REGS);
	expect_frame(5, RT(F_TOP) + 3, t2 + 24, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
}

Test(kunwind, switch_back_to_walked_stack_is_a_loop)
{
	uint64_t i = IRQ_HI - 8 - 24;
	uint64_t t = TASK_LO + 0x2000;

	put64(mem, i + 16, RT(F_SWITCH) + 0x10);
	put64(mem, IRQ_HI - 8, t);
	/* on the task stack, another switch whose saved sp is the IRQ stack */
	put64(mem, t + 8, RT(F_SWITCH) + 0x20);
	put64(mem, t + 16, IRQ_LO + 0x100);
	put64(mem, IRQ_LO + 0x100 + 8, RT(F_MID) + 1);
	unwind_from(RT(F_LEAF) + 0x10, i, 0, true);
	cr_assert_eq(st.nr, 3);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_LOOP);
}

Test(kunwind, sp_not_moving_up_is_a_loop)
{
	uint64_t s = TASK_LO + 0x3000;

	put64(mem, s - 8, RT(F_LOOP) + 0x10);
	unwind_from(RT(F_LOOP) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_LOOP);
}

Test(kunwind, frame_pointer_fallback)
{
	uint64_t s = TASK_LO + 0x3000;

	put64(mem, s + 16, s + 48);		/* saved bp */
	put64(mem, s + 24, RT(F_UNDEF) + 0x50);	/* return address */
	put64(mem, s + 48, 0);
	put64(mem, s + 56, RT(F_MID) + 8);
	put64(mem, s + 64, RT(F_TOP) + 1);	/* mid's, found by ORC */
	unwind_from(RT(F_UNDEF) + 0x10, s, s + 16, true);
	cr_assert_eq(st.nr, 4, "nr %u flags %#x", st.nr, st.flags);
	expect_frame(1, RT(F_UNDEF) + 0x50, s + 32, K | IVM_FRAME_INEXACT);
	expect_frame(2, RT(F_MID) + 8, s + 64, K | IVM_FRAME_INEXACT);
	expect_frame(3, RT(F_TOP) + 1, s + 72, K);
	cr_assert_eq(st.flags, IVM_STACK_FP_FALLBACK | IVM_STACK_END_HINT);
}

Test(kunwind, frame_pointer_fallback_outside_orc_and_without_table)
{
	uint64_t s = TASK_LO + 0x3000;

	/* module code has no ORC here: its bp chain leads back to ORC text */
	put64(mem, s, 0);
	put64(mem, s + 8, RT(F_MID) + 8);
	put64(mem, s + 16, RT(F_TOP) + 1);
	unwind_from(0xffffffffc0001234ull, s - 16, s, true);
	cr_assert_eq(st.nr, 3, "nr %u flags %#x", st.nr, st.flags);
	expect_frame(1, RT(F_MID) + 8, s + 16, K | IVM_FRAME_INEXACT);
	cr_assert_eq(st.flags, IVM_STACK_FP_FALLBACK | IVM_STACK_END_HINT);

	/* no table at all: frame pointers all the way, then garbage */
	cfg.orc = NULL;
	put64(mem, s, s + 32);
	put64(mem, s + 32, 0);
	put64(mem, s + 40, 0x1234);		/* not kernel text */
	unwind_from(RT(F_LEAF), s - 16, s, true);
	cr_assert_eq(st.nr, 2);
	expect_frame(1, RT(F_MID) + 8, s + 16, K | IVM_FRAME_INEXACT);
	cr_assert_eq(st.flags,
		     IVM_STACK_FP_FALLBACK | IVM_STACK_TRUNCATED_BAD_ORC);
}

Test(kunwind, frame_pointer_garbage_is_bad_orc)
{
	uint64_t s = TASK_LO + 0x3000;

	put64(mem, s + 8, 0x4141414141414141ull);
	unwind_from(RT(F_UNDEF) + 0x10, s - 8, s, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC);

	/* a bp that points nowhere: the guess failed, not the memory */
	unwind_from(RT(F_UNDEF) + 0x10, s - 8, 0x1234, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC);
	/* ...while ORC-directed reads outside the stacks are bounds faults */
	unwind_from(RT(F_LEAF) + 0x10, TASK_HI - 8, 0x1234, true);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BOUNDS);
}

Test(kunwind, fault_truncates_with_address)
{
	uint64_t s = TASK_LO + 0x3000;

	put64(mem, s + 16, RT(F_MID) + 0x20);
	put64(mem, s + 24, RT(F_TOP) + 1);
	mem->hole_lo = s + 24;
	mem->hole_hi = s + 32;
	unwind_from(RT(F_LEAF) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 2);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_FAULT);
	cr_assert_eq(st.fault_addr, s + 24);
}

Test(kunwind, read_outside_stacks_truncates)
{
	uint64_t s = TASK_HI - 8;

	unwind_from(RT(F_LEAF) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BOUNDS);
	cr_assert_eq(st.fault_addr, TASK_HI + 8);
	/* the guard: memory out there was never asked for */
	cr_assert_eq(mem->reads, 0);
}

Test(kunwind, frame_cap)
{
	uint64_t s = TASK_LO + 0x1000, sp = s;
	struct ivm_frame small[8];
	int i;

	/* 20 recursive frames of 16 bytes, then the top */
	for (i = 0; i < 20; i++, sp += 16)
		put64(mem, sp + 8, RT(F_REC) + 0x10);
	put64(mem, sp + 8, RT(F_TOP) + 1);

	ivm_stack_init(&st, small, 8);
	unwind_from(RT(F_REC) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 8);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_CAP);

	/* start + 20 returns into rec + the top: exactly 22 fit in 22 */
	ivm_stack_init(&st, frames, 22);
	unwind_from(RT(F_REC) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 22);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
	ivm_stack_init(&st, frames, 21);
	unwind_from(RT(F_REC) + 0x10, s, 0, true);
	cr_assert_eq(st.nr, 21);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_CAP);
}

Test(kunwind, garbage_orc_entries)
{
	uint64_t s = TASK_LO + 0x3000;
	struct ivm_x86_regs regs = { 0 };
	struct ivm_kunwind_start start = { 0 };

	unwind_from(RT(F_GARBAGE) + 1, s, 0, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC);

	put64(mem, s, RT(F_MID) + 1);
	unwind_from(RT(F_BADBP) + 1, s, 0, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC);

	/* DX-based CFA: no register set to take dx from */
	unwind_from(RT(F_DX) + 1, s, 0, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BAD_ORC);

	/* ...but the running vCPU's registers have it */
	regs.valid = IVM_X86_REGS_GPRS;
	regs.rip = RT(F_DX) + 1;
	regs.rsp = s - 0x100;
	regs.rdx = s + 0x48;	/* as in the kernel, sp_offset is not added */
	put64(mem, s + 0x40, RT(F_TOP) + 1);
	cr_assert_null(ivm_kunwind_regs(&cfg, &reader, stacks, 2, &regs, &st));
	cr_assert_eq(st.nr, 2, "nr %u flags %#x", st.nr, st.flags);
	expect_frame(1, RT(F_TOP) + 1, s + 0x48, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);

	/* BP_INDIRECT (DRAP): CFA stored at bp + 8 */
	start.pc = RT(F_BPIND) + 1;
	start.sp = s;
	start.bp = s + 0x80;
	put64(mem, s + 0x88, s + 0x100);
	put64(mem, s + 0xf8, RT(F_TOP) + 1);
	cr_assert_null(ivm_kunwind(&cfg, &reader, stacks, 2, &start, &st));
	cr_assert_eq(st.nr, 2);
	expect_frame(1, RT(F_TOP) + 1, s + 0x100, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
}

static const struct ivm_switch_frame_layout layout_6_1 = {
	.size = 56, .bp = 40, .ret_addr = 48,
};

Test(kunwind, blocked_task_from_switch_frame)
{
	uint64_t ts = TASK_LO + 0x3800;

	put64(mem, ts + 40, 0x7777);		/* bp */
	put64(mem, ts + 48, RT(F_MID) + 0x20);	/* ret_addr, in "__schedule" */
	put64(mem, ts + 56, RT(F_TOP) + 2);
	cr_assert_null(ivm_kunwind_blocked(&cfg, &reader, stacks, 2, ts,
					   &layout_6_1, &st));
	cr_assert_eq(st.nr, 2);
	expect_frame(0, RT(F_MID) + 0x20, ts + 56, K);
	expect_frame(1, RT(F_TOP) + 2, ts + 64, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);

	/* a task that never ran: ret_addr is ret_from_fork, an exact pc */
	cfg.ret_from_fork = RT(F_TOP);
	put64(mem, ts + 48, RT(F_TOP));
	cr_assert_null(ivm_kunwind_blocked(&cfg, &reader, stacks, 2, ts,
					   &layout_6_1, &st));
	cr_assert_eq(st.nr, 1);
	expect_frame(0, RT(F_TOP), ts + 56, K | IVM_FRAME_REGS);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);

	/* thread.sp outside every stack, or unreadable */
	cr_assert_null(ivm_kunwind_blocked(&cfg, &reader, stacks, 2,
					   0xffff888000001000ull, &layout_6_1,
					   &st));
	cr_assert_eq(st.nr, 0);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_BOUNDS);
	cr_assert_eq(st.fault_addr, 0xffff888000001000ull);
	mem->hole_lo = ts + 48;
	mem->hole_hi = ts + 49;
	cr_assert_null(ivm_kunwind_blocked(&cfg, &reader, stacks, 2, ts,
					   &layout_6_1, &st));
	cr_assert_eq(st.nr, 0);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_FAULT);
	cr_assert_eq(st.fault_addr, ts + 48);
}

Test(kunwind, caller_mistakes_are_errors)
{
	struct ivm_kunwind_start start = { .pc = RT(F_LEAF), .sp = TASK_LO };
	const struct ivm_stack_range empty = { TASK_LO, TASK_LO, 0 };
	const struct ivm_switch_frame_layout bad = { 56, 52, 48 };
	struct ivm_x86_regs regs = { 0 };
	struct ivm_stack none;
	struct ivm_error *err;

	err = ivm_kunwind(&cfg, &reader, stacks, 0, &start, &st);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_kunwind(&cfg, &reader, &empty, 1, &start, &st);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_stack_init(&none, frames, 0);
	err = ivm_kunwind(&cfg, &reader, stacks, 2, &start, &none);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_kunwind(&cfg, &reader, stacks, 2, NULL, &st);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_kunwind_blocked(&cfg, &reader, stacks, 2, TASK_LO, &bad, &st);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);

	/* no registers, or a vCPU in user mode */
	err = ivm_kunwind_regs(&cfg, &reader, stacks, 2, &regs, &st);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	regs.valid = IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS;
	regs.cs = 0x33;
	err = ivm_kunwind_regs(&cfg, &reader, stacks, 2, &regs, &st);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	cr_assert(strstr(ivm_error_string(err), "user mode"));
	ivm_error_destroy(err);
}

/*
 * The same unwind through the real guest-memory path: page tables in
 * synthetic RAM (gmem buffer backend), the stack mapped page by page, one
 * page left unmapped to fault.
 */
Test(kunwind, through_gmem_page_walk)
{
	struct ivm_gmem_region region;
	struct ivm_kmem_gmem kg;
	struct ivm_gmem *gmem = NULL;
	struct synth s;
	uint64_t sp = TASK_LO + 0x1ff0, pa = 0x10000, p;
	uint8_t *ram;

	synth_init(&s, 1 << 20, false);
	/* map the task stack's 4 pages, all but the fourth */
	for (p = 0; p < 3; p++)
		synth_map(&s, TASK_LO + p * 4096, pa + p * 4096,
			  IVM_X86_64_PAGE_SIZE_4K, SYNTH_P | SYNTH_RW);
	ram = s.ram + pa;
	/* leaf at sp: return address at sp + 16 (crosses into page 2) */
	*(uint64_t *)(ram + 0x1ff0 + 16) = RT(F_MID) + 0x20;
	*(uint64_t *)(ram + 0x1ff0 + 24) = RT(F_TOP) + 1;

	region = (struct ivm_gmem_region){ .gpa = 0, .size = s.size,
					   .hva = (uint64_t)(uintptr_t)s.ram };
	cr_assert_null(ivm_gmem_buffer_create(&region, 1, &gmem));
	kg = (struct ivm_kmem_gmem){ .gmem = gmem, .cr3 = s.root, .la57 = 0 };
	ivm_kmem_reader_gmem(&kg, &reader);
	unwind_from(RT(F_LEAF) + 0x10, sp, 0, true);
	cr_assert_eq(st.nr, 3, "nr %u flags %#x", st.nr, st.flags);
	expect_frame(1, RT(F_MID) + 0x20, sp + 24, K);
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);

	/* the same shape two pages up lands its reads on the unmapped page */
	sp = TASK_LO + 0x2ff0;
	*(uint64_t *)(ram + 0x2ff0 + 16) = RT(F_MID) + 0x20;
	unwind_from(RT(F_LEAF) + 0x10, sp, 0, true);
	cr_assert_eq(st.nr, 1);
	cr_assert_eq(st.flags, IVM_STACK_TRUNCATED_FAULT);
	cr_assert_eq(st.fault_addr, TASK_LO + 0x3000);

	ivm_gmem_destroy(gmem);
	synth_fini(&s);
}

Test(kunwind, page_cache_reader)
{
	static struct ivm_kmem_cache cache;
	struct ivm_kmem_reader backing = reader;
	uint64_t s = TASK_LO + 0x3000;
	struct ivm_error *err;
	uint8_t buf[32];

	put64(mem, s + 16, RT(F_MID) + 0x20);
	put64(mem, s + 24, RT(F_FP) + 0x30);
	put64(mem, s + 48, 0x4242);
	put64(mem, s + 56, RT(F_TOP) + 5);
	ivm_kmem_cache_init(&cache, &backing, &reader);
	unwind_from(RT(F_LEAF) + 0x10, s, s + 48, true);
	cr_assert_eq(st.nr, 4);
	expect_frame(3, RT(F_TOP) + 5, s + 64, K);
	cr_assert_eq(cache.misses, 1, "one page read for the whole stack");
	cr_assert_gt(cache.hits, 2);
	cr_assert_eq(mem->reads, 1);

	/* a stale cache answers from the page it holds... */
	put64(mem, s + 56, RT(F_MID) + 1);
	unwind_from(RT(F_LEAF) + 0x10, s, s + 48, true);
	expect_frame(3, RT(F_TOP) + 5, s + 64, K);
	/* ...until invalidated */
	ivm_kmem_cache_invalidate(&cache);
	put64(mem, s + 56, RT(F_TOP) + 6);
	unwind_from(RT(F_LEAF) + 0x10, s, s + 48, true);
	expect_frame(3, RT(F_TOP) + 6, s + 64, K);

	/* reads across pages, and a fault keeps its exact address */
	put64(mem, TASK_LO + 0xff8, 0x1111111111111111ull);
	put64(mem, TASK_LO + 0x1000, 0x2222222222222222ull);
	cr_assert_null(reader.read(reader.ctx, TASK_LO + 0xff8, buf, 16));
	cr_assert_eq(buf[0], 0x11);
	cr_assert_eq(buf[8], 0x22);
	mem->hole_lo = TASK_LO + 0x2010;
	mem->hole_hi = TASK_LO + 0x2018;
	err = reader.read(reader.ctx, TASK_LO + 0x2000, buf, 32);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, TASK_LO + 0x2010);
	ivm_error_destroy(err);
	err = reader.read(reader.ctx, TASK_HI - 8, buf, 16);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	ivm_error_destroy(err);
}

Test(kunwind, cpu_stack_ranges)
{
	struct ivm_cpu_stacks_layout layout = {
		.hardirq_stack_ptr = 0x10,
		.irq_stack_size = 0x4000,
		.cea_exception_stacks = 0x18,
		.nr_ist = 2,
		.ist = { { 0x1000, 0x2000 }, { 0x4000, 0x2000 } },
	};
	const uint64_t pcpu = IRQ_LO + 0x1000;
	struct ivm_stack_range r[4];

	put64(mem, pcpu + 0x10, 0xffffc90000204000ull - 8);
	put64(mem, pcpu + 0x18, 0xfffffe0000010000ull);
	cr_assert_eq(ivm_kunwind_cpu_stacks(&layout, &reader, pcpu, r, 4), 3);
	cr_assert_eq(r[0].lo, 0xffffc90000200000ull);
	cr_assert_eq(r[0].hi, 0xffffc90000204000ull);
	cr_assert_eq(r[0].kind, IVM_STACK_RANGE_IRQ);
	cr_assert_eq(r[1].lo, 0xfffffe0000011000ull);
	cr_assert_eq(r[1].hi, 0xfffffe0000013000ull);
	cr_assert_eq(r[1].kind, IVM_STACK_RANGE_EXCEPTION);
	cr_assert_eq(r[2].lo, 0xfffffe0000014000ull);
	cr_assert_eq(r[2].hi, 0xfffffe0000016000ull);

	/* room for two only */
	cr_assert_eq(ivm_kunwind_cpu_stacks(&layout, &reader, pcpu, r, 2), 2);
	/* a hostile pointer that would wrap, and an unreadable one */
	put64(mem, pcpu + 0x10, UINT64_MAX - 4);
	put64(mem, pcpu + 0x18, UINT64_MAX - 0x1800);
	cr_assert_eq(ivm_kunwind_cpu_stacks(&layout, &reader, pcpu, r, 4), 0);
	cr_assert_eq(ivm_kunwind_cpu_stacks(&layout, &reader, 0x1000, r, 4), 0);
}

/* The ORC tables read out of guest memory (no vmlinux): runtime ips. */
Test(kunwind, orc_from_guest_memory)
{
	const uint64_t ip_at = IRQ_LO + 0x100, orc_at = IRQ_LO + 0x200;
	/* relative 32-bit ips: the "text" must lie within 2 GiB of the table */
	const uint64_t ips[3] = { ip_at + 0x1000, ip_at + 0x2000,
				  ip_at + 0x3000 };
	struct ivm_orc_table *t = NULL;
	struct ivm_orc_entry e;
	struct ivm_error *err;
	uint64_t start;
	unsigned int i;

	for (i = 0; i < 3; i++) {
		int32_t rel = (int32_t)(ips[i] - (ip_at + 4 * i));
		uint8_t raw[6] = { 24, 0, 0, 0, 5, 0 };

		if (i != 1)
			memset(raw, 0, sizeof(raw));
		memcpy(mem->irq + 0x100 + 4 * i, &rel, 4);
		memcpy(mem->irq + 0x200 + 6 * i, raw, 6);
	}
	cr_assert_null(ivm_orc_load_guest(&reader, ip_at, ip_at + 12, orc_at,
					  IVM_ORC_FORMAT_V1, &t));
	cr_assert_eq(ivm_orc_nr_entries(t), 3);
	cr_assert(ivm_orc_lookup(t, ip_at + 0x2010, &e, &start));
	cr_assert_eq(start, ip_at + 0x2000);
	cr_assert_eq(e.sp_offset, 24);
	cr_assert_eq(e.type, IVM_ORC_TYPE_CALL);
	ivm_orc_destroy(t);

	/* an unreadable entry table is the reader's fault, with its address */
	mem->hole_lo = orc_at + 8;
	mem->hole_hi = orc_at + 9;
	err = ivm_orc_load_guest(&reader, ip_at, ip_at + 12, orc_at,
				 IVM_ORC_FORMAT_V1, &t);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	cr_assert_eq(err->address, orc_at + 8);
	ivm_error_destroy(err);

	/* symbol addresses that make no table */
	err = ivm_orc_load_guest(&reader, ip_at, ip_at + 10, orc_at,
				 IVM_ORC_FORMAT_V1, &t);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_orc_load_guest(&reader, ip_at, ip_at, orc_at,
				 IVM_ORC_FORMAT_V1, &t);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_orc_load_guest(&reader, 0, 0xfffffffffffffffcull, orc_at,
				 IVM_ORC_FORMAT_V1, &t);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
}

/* ---- real 6.1 stacks (test_kunwind_real.h) ------------------------------ */

#define VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"
#define SYSTEM_MAP "/var/cache/idlevm/6.1.0-56-cloud-amd64/System.map"

struct piece {
	uint64_t va;
	const uint8_t *bytes;
	size_t len;
};

struct pieces {
	struct piece p[2];
	unsigned int n;
};

static struct ivm_error *pieces_read(void *ctx, uint64_t va, void *buf,
				     size_t len)
{
	const struct pieces *ps = ctx;
	unsigned int i;

	for (i = 0; i < ps->n; i++) {
		const struct piece *p = &ps->p[i];

		if (va >= p->va && va - p->va <= p->len &&
		    len <= p->len - (va - p->va)) {
			memcpy(buf, p->bytes + (va - p->va), len);
			return NULL;
		}
	}
	return ivm_error_fault(va, "not in the fixture");
}

/* frames[first..] symbolized as /proc/PID/stack prints them */
static void expect_symbols(const struct ivm_ksyms *ks, uint64_t slide,
			   uint32_t first, const char *const *want, uint32_t n)
{
	uint32_t i;

	cr_assert_geq(st.nr, first + n);
	for (i = 0; i < n; i++) {
		const struct ivm_ksym *sym;
		uint64_t offset;
		char got[256];

		sym = ivm_ksyms_symbolize(ks, st.frames[first + i].pc - slide,
					  &offset);
		cr_assert_not_null(sym);
		snprintf(got, sizeof(got), "%s+%#lx", sym->name,
			 (unsigned long)offset);
		cr_assert_str_eq(got, want[i], "frame %u", first + i);
	}
}

static void expect_pcs(const uint64_t *pcs, uint32_t n)
{
	uint32_t i;

	cr_assert_eq(st.nr, n, "nr %u flags %#x", st.nr, st.flags);
	for (i = 0; i < n; i++)
		cr_assert_eq(st.frames[i].pc, pcs[i], "frame %u", i);
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

Test(kunwind_real, debian_6_1_guest_stacks, .timeout = 120)
{
	static const struct ivm_switch_frame_layout layout = { 56, 40, 48 };
	/* the guest's own /proc/82/stack, /proc/84/stack, /proc/36/stack */
	static const char *const sleep_proc[] = {
		"hrtimer_nanosleep+0x9e", "common_nsleep+0x3f",
		"__x64_sys_clock_nanosleep+0xdb", "do_syscall_64+0x5d",
		"entry_SYSCALL_64_after_hwframe+0x6e",
	};
	static const char *const cat_proc[] = {
		"wait_for_partner+0x63", "fifo_open+0x2bb",
		"do_dentry_open+0x1e5", "path_openat+0xb7d",
		"do_filp_open+0xaf", "do_sys_openat2+0xaf",
		"__x64_sys_openat+0x6a", "do_syscall_64+0x5d",
		"entry_SYSCALL_64_after_hwframe+0x6e",
	};
	static const char *const kswapd_proc[] = {
		"kswapd+0x380", "kthread+0xda", "ret_from_fork+0x22",
	};
	static const char *const nested[] = {
		"lapic_next_event+0x1c", "clockevents_program_event+0x96",
		"hrtimer_interrupt+0x11d", "__sysvec_apic_timer_interrupt+0x5d",
		"sysvec_apic_timer_interrupt+0x35",
		"asm_sysvec_apic_timer_interrupt+0x16",
		"arch_release_task_struct+0", "free_task+0x35",
		"rcu_do_batch+0x19a", "rcu_core+0x1b5", "handle_softirqs+0xd7",
		"__irq_exit_rcu+0xac", "sysvec_apic_timer_interrupt+0x6e",
		"asm_sysvec_apic_timer_interrupt+0x16",
		"_raw_spin_unlock_irqrestore+0x19", "do_nanosleep+0x6f",
		"hrtimer_nanosleep+0x9e", "common_nsleep+0x3f",
		"__x64_sys_clock_nanosleep+0xdb", "do_syscall_64+0x5d",
		"entry_SYSCALL_64_after_hwframe+0x6e",
	};
	static const char *const irq_top[] = {
		"lapic_next_event+0x1c", "clockevents_program_event+0x96",
		"hrtimer_interrupt+0x11d", "__sysvec_apic_timer_interrupt+0x5d",
		"sysvec_apic_timer_interrupt+0x69",
		"asm_sysvec_apic_timer_interrupt+0x16", "native_safe_halt+0xb",
	};
	struct ivm_stack_range ranges[2];
	struct ivm_ksyms *ks = NULL;
	struct ivm_error *err;
	struct pieces ps;
	uint32_t i;

	if (access(VMLINUX, R_OK) || access(SYSTEM_MAP, R_OK))
		cr_skip_test("%s or System.map not present", VMLINUX);
	ivm_stack_init(&st, frames, 64);
	cr_assert_null(ivm_orc_load_elf(VMLINUX, IVM_ORC_FORMAT_AUTO, &table));
	cr_assert_null(ivm_ksyms_load_system_map(SYSTEM_MAP, &ks));
	memset(&cfg, 0, sizeof(cfg));
	cfg.orc = table;
	cfg.orc_slide = REAL_SLIDE;
	cr_assert_null(ivm_ksyms_lookup(ks, "ret_from_fork",
					&cfg.ret_from_fork));
	cfg.ret_from_fork += REAL_SLIDE;
	reader.read = pieces_read;
	reader.ctx = &ps;

	/* sleep 100000: blocked in clock_nanosleep, ends in its pt_regs */
	ps = (struct pieces){ { { SLEEP_task_VA, SLEEP_task,
				  sizeof(SLEEP_task) } }, 1 };
	ranges[0] = (struct ivm_stack_range){ SLEEP_STACK, SLEEP_STACK + 16384,
					      IVM_STACK_RANGE_TASK };
	err = ivm_kunwind_blocked(&cfg, &reader, ranges, 1, SLEEP_THREAD_SP,
				  &layout, &st);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	expect_pcs(SLEEP_pcs, NELEM(SLEEP_pcs));
	cr_assert_eq(st.flags, IVM_STACK_REACHED_USER);
	cr_assert_eq(st.user_regs.rip, SLEEP_USER_RIP);
	cr_assert_eq(st.user_regs.rsp, SLEEP_USER_RSP);
	cr_assert_eq(st.user_regs.cs, 0x33);
	expect_symbols(ks, REAL_SLIDE, 3, sleep_proc, NELEM(sleep_proc));

	/* cat on a FIFO nobody writes: blocked in open */
	ps = (struct pieces){ { { CAT_task_VA, CAT_task, sizeof(CAT_task) } },
			      1 };
	ranges[0] = (struct ivm_stack_range){ CAT_STACK, CAT_STACK + 16384,
					      IVM_STACK_RANGE_TASK };
	cr_assert_null(ivm_kunwind_blocked(&cfg, &reader, ranges, 1,
					   CAT_THREAD_SP, &layout, &st));
	expect_pcs(CAT_pcs, NELEM(CAT_pcs));
	cr_assert_eq(st.flags, IVM_STACK_REACHED_USER);
	cr_assert_eq(st.user_regs.rip, CAT_USER_RIP);
	expect_symbols(ks, REAL_SLIDE, 2, cat_proc, NELEM(cat_proc));

	/* a kernel thread: ends at the end-of-stack hint of ret_from_fork */
	ps = (struct pieces){ { { KSWAPD_task_VA, KSWAPD_task,
				  sizeof(KSWAPD_task) } }, 1 };
	ranges[0] = (struct ivm_stack_range){ KSWAPD_STACK,
					      KSWAPD_STACK + 16384,
					      IVM_STACK_RANGE_TASK };
	cr_assert_null(ivm_kunwind_blocked(&cfg, &reader, ranges, 1,
					   KSWAPD_THREAD_SP, &layout, &st));
	expect_pcs(KSWAPD_pcs, NELEM(KSWAPD_pcs));
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
	expect_symbols(ks, REAL_SLIDE, 2, kswapd_proc, NELEM(kswapd_proc));

	/*
	 * The idle task caught by the timer interrupt on vCPU 0: from the
	 * vCPU registers on the IRQ stack, across call_on_irqstack's saved
	 * sp and the interrupt's pt_regs, to the top of the boot stack.
	 */
	ps = (struct pieces){ { { IRQ_irq_VA, IRQ_irq, sizeof(IRQ_irq) },
				{ IRQ_task_VA, IRQ_task, sizeof(IRQ_task) } },
			      2 };
	ranges[0] = (struct ivm_stack_range){ IRQ_STACK, IRQ_STACK + 16384,
					      IVM_STACK_RANGE_TASK };
	ranges[1] = (struct ivm_stack_range){ IRQ_IRQ_HI - 16384, IRQ_IRQ_HI,
					      IVM_STACK_RANGE_IRQ };
	cr_assert_null(ivm_kunwind_regs(&cfg, &reader, ranges, 2, &IRQ_regs,
					&st));
	expect_pcs(IRQ_pcs, NELEM(IRQ_pcs));
	cr_assert_eq(st.flags, IVM_STACK_END_HINT);
	expect_symbols(ks, REAL_SLIDE, 0, irq_top, NELEM(irq_top));
	for (i = 0; i < st.nr; i++) {
		bool on_irq = st.frames[i].sp >= IRQ_IRQ_HI - 16384 &&
			      st.frames[i].sp <= IRQ_IRQ_HI;

		/* frame 4's sp is the saved-sp slot on top of the IRQ stack */
		cr_assert_eq(on_irq, i < 5, "frame %u sp %#lx", i,
			     (unsigned long)st.frames[i].sp);
		cr_assert_eq(!!(st.frames[i].flags & IVM_FRAME_REGS),
			     i == 0 || i == 6, "frame %u", i);
	}

	/*
	 * Nested: an interrupt on the IRQ stack during softirqs that run on
	 * the IRQ stack at the exit of an interrupt that hit a syscall.
	 */
	ps = (struct pieces){ { { NESTED_irq_VA, NESTED_irq,
				  sizeof(NESTED_irq) },
				{ NESTED_task_VA, NESTED_task,
				  sizeof(NESTED_task) } }, 2 };
	ranges[0] = (struct ivm_stack_range){ NESTED_STACK,
					      NESTED_STACK + 16384,
					      IVM_STACK_RANGE_TASK };
	ranges[1] = (struct ivm_stack_range){ NESTED_IRQ_HI - 16384,
					      NESTED_IRQ_HI,
					      IVM_STACK_RANGE_IRQ };
	cfg.orc_slide = NESTED_SLIDE;
	cr_assert_null(ivm_kunwind_regs(&cfg, &reader, ranges, 2,
					&NESTED_regs, &st));
	expect_pcs(NESTED_pcs, NELEM(NESTED_pcs));
	cr_assert_eq(st.flags, IVM_STACK_REACHED_USER);
	cr_assert_eq(st.user_regs.rip, NESTED_USER_RIP);
	cr_assert_eq(st.user_regs.rsp, NESTED_USER_RSP);
	for (i = 0; i < st.nr; i++)
		cr_assert_eq(!!(st.frames[i].flags & IVM_FRAME_REGS),
			     i == 0 || i == 6 || i == 14, "frame %u", i);
	expect_symbols(ks, NESTED_SLIDE, 0, nested, NELEM(nested));
	cfg.orc_slide = REAL_SLIDE;

	/* where the per-CPU stacks of this kernel are, from its BTF */
	{
		struct ivm_cpu_stacks_layout csl;
		struct ivm_btf *btf = NULL;
		uint64_t hsp, cea;

		cr_assert_null(ivm_ksyms_lookup(ks, "hardirq_stack_ptr", &hsp));
		cr_assert_null(ivm_ksyms_lookup(ks, "cea_exception_stacks",
						&cea));
		cr_assert_null(ivm_btf_load_file(VMLINUX, &btf));
		cr_assert_null(ivm_cpu_stacks_layout_from_btf(btf, hsp, cea,
							      &csl));
		cr_assert_eq(csl.hardirq_stack_ptr, 0x1fb48);
		cr_assert_eq(csl.irq_stack_size, 16384);
		cr_assert_eq(csl.cea_exception_stacks, 0x1fe78);
		/* DF NMI DB MCE VC VC2, 8 KiB each after a 4 KiB guard */
		cr_assert_eq(csl.nr_ist, 6);
		for (i = 0; i < 6; i++) {
			cr_assert_eq(csl.ist[i].offset, 4096 + 12288 * i);
			cr_assert_eq(csl.ist[i].size, 8192);
		}
		ivm_btf_destroy(btf);
	}
	ivm_ksyms_destroy(ks);
	ivm_orc_destroy(table);
}
