// SPDX-License-Identifier: MIT
/*
 * The user frame-pointer unwinder over a synthetic user stack: a chain, its
 * clean end, and every way a hostile guest can bend it.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "unwind/uunwind.h"

#define STACK_LO 0x7ffff000ull	/* base of the fake stack page */
#define STACK_WORDS 512

static uint64_t stack_mem[STACK_WORDS];

static struct ivm_error *read_stack(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	(void)ctx;
	if (va < STACK_LO || va + len > STACK_LO + sizeof(stack_mem) ||
	    va + len < va)
		return ivm_error_fault(va, "unmapped");
	memcpy(buf, (uint8_t *)stack_mem + (va - STACK_LO), len);
	return NULL;
}

static const struct ivm_kmem_reader reader = { read_stack, NULL };
static struct ivm_frame frames[64];
static struct ivm_stack st;

static uint64_t addr(unsigned int word)
{
	return STACK_LO + 8ull * word;
}

/* A frame at word w: saved rbp then return address. */
static void frame(unsigned int w, uint64_t saved_rbp, uint64_t ret)
{
	stack_mem[w] = saved_rbp;
	stack_mem[w + 1] = ret;
}

static struct ivm_x86_regs start(uint64_t rip, unsigned int sp_word,
				 uint64_t rbp)
{
	struct ivm_x86_regs r = { .valid = IVM_X86_REGS_GPRS };

	r.rip = rip;
	r.rsp = addr(sp_word);
	r.rbp = rbp;
	return r;
}

static void init(void)
{
	memset(stack_mem, 0, sizeof(stack_mem));
	ivm_stack_init(&st, frames, 64);
}

TestSuite(uunwind, .init = init);

Test(uunwind, follows_the_chain_to_a_clean_end)
{
	struct ivm_x86_regs r = start(0x401010, 10, addr(20));

	frame(20, addr(40), 0x401200);	/* leaf's caller */
	frame(40, addr(60), 0x401300);
	frame(60, 0, 0x401400);		/* outermost: rbp cleared next */
	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 4);
	cr_assert_eq(st.frames[0].pc, 0x401010);
	cr_assert(st.frames[0].flags & IVM_FRAME_REGS);
	cr_assert_eq(st.frames[1].pc, 0x401200);
	cr_assert_eq(st.frames[3].pc, 0x401400);
	cr_assert(st.frames[3].flags & IVM_FRAME_USER);
	cr_assert_not(ivm_stack_truncated(&st), "flags %#x", st.flags);
}

Test(uunwind, loop_is_cut)
{
	struct ivm_x86_regs r = start(0x401010, 10, addr(20));

	frame(20, addr(40), 0x401200);
	frame(40, addr(20), 0x401300);	/* points back down: a cycle */
	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 3);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_LOOP);
}

Test(uunwind, self_loop_is_cut)
{
	struct ivm_x86_regs r = start(0x401010, 10, addr(20));

	frame(20, addr(20), 0x401200);
	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 2);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_LOOP);
}

Test(uunwind, fault_is_marked_with_its_address)
{
	struct ivm_x86_regs r = start(0x401010, 10, addr(20));
	uint64_t beyond = STACK_LO + sizeof(stack_mem) + 0x100;

	frame(20, beyond, 0x401200);
	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 2);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_FAULT);
	cr_assert_eq(st.fault_addr, beyond);
}

Test(uunwind, kernel_or_null_return_addresses_end_it)
{
	struct ivm_x86_regs r = start(0x401010, 10, addr(20));

	frame(20, addr(40), 0xffffffff81000000ull);
	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 1);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_BAD_ORC);
}

Test(uunwind, misaligned_or_below_sp_frame_pointer)
{
	struct ivm_x86_regs r = start(0x401010, 30, addr(20) + 3);

	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 1);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_LOOP);
}

Test(uunwind, frame_cap)
{
	struct ivm_x86_regs r = start(0x401010, 0, addr(2));
	unsigned int w;

	/* 100 frames two words apart; the stack holds only 8. */
	for (w = 2; w + 2 < STACK_WORDS && w < 202; w += 2)
		frame(w, addr(w + 2), 0x401000 + w);
	ivm_stack_init(&st, frames, 8);
	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 8);
	cr_assert(st.flags & IVM_STACK_TRUNCATED_CAP);
}

Test(uunwind, garbage_start)
{
	struct ivm_x86_regs r = start(0, 10, addr(20));
	struct ivm_error *err;

	cr_assert_null(ivm_uunwind_fp(&reader, &r, 0, &st));
	cr_assert_eq(st.nr, 0);
	err = ivm_uunwind_fp(&reader, NULL, 0, &st);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}
