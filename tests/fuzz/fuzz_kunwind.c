// SPDX-License-Identifier: MIT
/*
 * Fuzz the kernel unwinder: the input is a small guest memory image (two
 * stacks), a start state, register values and a hand-made ORC table.
 * Whatever the bytes, ivm_kunwind must return NULL, stay inside its frame
 * array, keep the struct ivm_stack invariants, and stop.
 *
 * Input layout (little endian; short inputs are zero-padded):
 *   u8  nr_entries (mod 33)   u8 mode   u8 cap (mod 64, +1)   u8 unused
 *   u16 pc_off   u16 sp_off   u64 bp   u64 rdx rdi r10 r13
 *   nr_entries x { u16 ip_off, u8 raw_entry[6] }
 *   the rest: stack A (first half, up to 2 KiB) and stack B (second half)
 * mode: bit 0 signal, bit 1 start from registers, bits 2-3 ORC format
 * (V1..V3), bit 4 blocked-task start, bit 5 no ORC table, bit 6 stack B
 * is the start stack, bit 7 read through the page cache.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/kunwind.h"

#define TEXT 0x1000000ull
#define STACK_A 0x10000ull
#define STACK_B 0x20000ull
#define STACK_MAX 2048u
#define MAX_ENTRIES 32u

struct image {
	const uint8_t *a, *b;
	size_t a_len, b_len;
};

static struct ivm_error *image_read(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	const struct image *im = ctx;

	if (va >= STACK_A && va - STACK_A <= im->a_len &&
	    len <= im->a_len - (va - STACK_A)) {
		memcpy(buf, im->a + (va - STACK_A), len);
		return NULL;
	}
	if (va >= STACK_B && va - STACK_B <= im->b_len &&
	    len <= im->b_len - (va - STACK_B)) {
		memcpy(buf, im->b + (va - STACK_B), len);
		return NULL;
	}
	return ivm_error_fault(va, "fuzz image fault");
}

static void check(const struct ivm_stack *st, uint32_t cap)
{
	uint32_t reasons = st->flags & IVM_STACK_TRUNCATED_MASK;

	if (st->nr > cap || st->cap != cap)
		abort();
	/* at most one truncation reason */
	if (reasons & (reasons - 1))
		abort();
	if ((st->flags & IVM_STACK_REACHED_USER) && reasons)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t ipb[4 * MAX_ENTRIES], orcb[6 * MAX_ENTRIES];
	const uint64_t sec = TEXT + 0x100000;
	struct ivm_stack_range stacks[2];
	struct ivm_orc_table *table = NULL;
	struct ivm_kunwind_config cfg = { 0 };
	struct ivm_kmem_reader reader;
	struct ivm_kunwind_start start = { 0 };
	struct ivm_x86_regs regs = { 0 };
	struct ivm_frame frames[64];
	struct ivm_stack st;
	struct ivm_cursor c;
	struct image im;
	unsigned int nr, mode, cap, i;
	uint16_t pc_off, sp_off;
	enum ivm_orc_format fmt;
	struct ivm_error *err;
	size_t rest;

	ivm_cursor_init(&c, data, size);
	nr = ivm_get_u8(&c) % (MAX_ENTRIES + 1);
	mode = ivm_get_u8(&c);
	cap = ivm_get_u8(&c) % 64 + 1;
	ivm_get_u8(&c);
	pc_off = ivm_get_u16(&c);
	sp_off = ivm_get_u16(&c);
	start.bp = ivm_get_u64(&c);
	regs.rdx = ivm_get_u64(&c);
	regs.rdi = ivm_get_u64(&c);
	regs.r10 = ivm_get_u64(&c);
	regs.r13 = ivm_get_u64(&c);
	for (i = 0; i < nr; i++) {
		uint16_t ip_off = ivm_get_u16(&c);
		const uint8_t *raw = ivm_cursor_take(&c, 6);
		int32_t rel = (int32_t)(TEXT + ip_off - (sec + 4 * i));

		memcpy(ipb + 4 * i, &rel, 4);
		if (raw)
			memcpy(orcb + 6 * i, raw, 6);
		else
			memset(orcb + 6 * i, 0, 6);
	}
	if (c.bad) {
		c.left = 0;
		c.p = data + size;
	}
	rest = c.left;
	im.a = c.p;
	im.a_len = rest / 2 < STACK_MAX ? rest / 2 : STACK_MAX;
	im.b = c.p + rest / 2;
	im.b_len = rest - rest / 2 < STACK_MAX ? rest - rest / 2 : STACK_MAX;

	fmt = (enum ivm_orc_format)(1 + ((mode >> 2) & 3) % 3);
	if (nr && !(mode & 0x20)) {
		err = ivm_orc_load_buffer(ipb, 4 * nr, sec, orcb, 6 * nr, fmt,
					  &table);
		if (err)
			abort();	/* sizes are consistent by construction */
	}
	cfg.orc = table;
	cfg.text_lo = TEXT;
	cfg.text_hi = TEXT + 0x10000;
	cfg.ret_from_fork = TEXT + 0x100;
	reader.read = image_read;
	reader.ctx = &im;
	if (mode & 0x80) {
		static struct ivm_kmem_cache cache;
		struct ivm_kmem_reader direct = reader;

		ivm_kmem_cache_init(&cache, &direct, &reader);
	}
	/* a stack range is never empty: give a token one for a short input */
	stacks[0] = (struct ivm_stack_range){ STACK_A, STACK_A + im.a_len + 1,
					      IVM_STACK_RANGE_TASK };
	stacks[1] = (struct ivm_stack_range){ STACK_B, STACK_B + im.b_len + 1,
					      IVM_STACK_RANGE_IRQ };

	start.pc = TEXT + pc_off;
	start.sp = ((mode & 0x40) ? STACK_B : STACK_A) + sp_off % STACK_MAX;
	start.signal = mode & 1;
	ivm_stack_init(&st, frames, cap);
	if (mode & 0x10) {
		static const struct ivm_switch_frame_layout layout = {
			56, 40, 48,
		};

		err = ivm_kunwind_blocked(&cfg, &reader, stacks, 2, start.sp,
					  &layout, &st);
	} else if (mode & 2) {
		regs.valid = IVM_X86_REGS_GPRS;
		regs.rip = start.pc;
		regs.rsp = start.sp;
		regs.rbp = start.bp;
		err = ivm_kunwind_regs(&cfg, &reader, stacks, 2, &regs, &st);
	} else {
		err = ivm_kunwind(&cfg, &reader, stacks, 2, &start, &st);
	}
	if (err)
		abort();
	check(&st, cap);

	/* per-CPU stack ranges from pointers in the image */
	{
		static const struct ivm_cpu_stacks_layout csl = {
			.hardirq_stack_ptr = 0x10, .irq_stack_size = 0x4000,
			.cea_exception_stacks = 0x18, .nr_ist = 2,
			.ist = { { 0x1000, 0x2000 }, { 0x4000, 0x2000 } },
		};
		struct ivm_stack_range cpu[4];
		size_t k, ncpu;

		ncpu = ivm_kunwind_cpu_stacks(&csl, &reader, STACK_A, cpu, 3);
		if (ncpu > 3)
			abort();
		for (k = 0; k < ncpu; k++)
			if (cpu[k].lo >= cpu[k].hi)
				abort();
	}
	ivm_orc_destroy(table);
	return 0;
}
