// SPDX-License-Identifier: MIT
/*
 * Guest kernel stack unwinding by ORC, with a frame-pointer fallback.
 * See kunwind.h for the contract.
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/kunwind.h"

/* struct pt_regs slots (x86-64 ABI, see kunwind.h), in 8-byte units. */
enum {
	PTR_R15, PTR_R14, PTR_R13, PTR_R12, PTR_BP, PTR_BX, PTR_R11, PTR_R10,
	PTR_R9, PTR_R8, PTR_AX, PTR_CX, PTR_DX, PTR_SI, PTR_DI, PTR_ORIG_AX,
	PTR_IP, PTR_CS, PTR_FLAGS, PTR_SP, PTR_SS, PTR_NR,
};

/* An iret frame is pt_regs from ip on: ip, cs, flags, sp, ss. */
#define IRET_FRAME_OFFSET (PTR_IP * 8u)
#define IRET_FRAME_SIZE ((PTR_NR - PTR_IP) * 8u)

/*
 * Hard bound on steps whatever the caller's capacity: no real kernel stack
 * comes near it (the kernel itself gives up far earlier).
 */
#define KUNWIND_MAX_STEPS 4096u

/*
 * Where loadable modules and BPF programs live on x86-64 (MODULES_VADDR ..
 * MODULES_END, with 4- and 5-level paging alike): a frame-pointer guess may
 * land there as well as in the kernel text.
 */
#define MODULES_LO 0xffffffffc0000000ull
#define MODULES_HI 0xffffffffff000000ull

/* Lowest kernel-half address (4-level paging; 5-level is lower still). */
#define KERNEL_HALF_LO 0xff00000000000000ull

enum step {
	STEP_OK,
	STEP_END,	/* clean end of the kernel stack */
	STEP_USER,	/* reached a user-mode pt_regs */
	STEP_FAULT,	/* read failed; fault_addr set */
	STEP_BOUNDS,	/* read outside every stack; fault_addr set */
	STEP_LOOP,	/* sp did not move up */
	STEP_BAD_ORC,	/* unusable unwind information */
};

/* Where register values for ORC's DX/DI/R10/R13/BP rules come from. */
enum regs_kind {
	REGS_NONE,
	REGS_HOST,	/* the start state's vCPU registers */
	REGS_GUEST,	/* a pt_regs in guest memory */
};

struct regs_ref {
	enum regs_kind kind;
	bool full;			/* full pt_regs, not an iret frame */
	const struct ivm_x86_regs *host;
	uint64_t addr;			/* REGS_GUEST: address of pt_regs */
};

struct kunwind {
	const struct ivm_kunwind_config *cfg;
	const struct ivm_kmem_reader *mem;
	const struct ivm_stack_range *stacks;
	size_t nr_stacks;
	uint64_t visited;		/* bit i: stacks[i] was walked */
	int cur;			/* stack holding sp, -1 if none */
	uint64_t text_lo, text_hi;
	uint64_t fault_addr;

	uint64_t pc, sp, bp;
	bool signal;
	struct regs_ref regs, prev_regs;
	/* filled when a user-mode pt_regs is reached */
	struct ivm_x86_regs user;
	bool user_partial;
};

struct ivm_error *ivm_cpu_stacks_layout_from_btf(
	const struct ivm_btf *btf, uint64_t hardirq_stack_ptr,
	uint64_t cea_exception_stacks, struct ivm_cpu_stacks_layout *ret)
{
	static const char *const ist_names[] = {
		"DF_stack", "NMI_stack", "DB_stack", "MCE_stack", "VC_stack",
		"VC2_stack",
	};
	struct ivm_error *err;
	uint64_t size;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	if (hardirq_stack_ptr) {
		err = ivm_btf_type_size(btf, "irq_stack", &size);
		if (err)
			return ivm_error_wrap(err, "irq stack size");
		if (size < 16 || size > (1u << 20))
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"implausible sizeof(struct irq_stack) %llu",
						(unsigned long long)size);
		ret->hardirq_stack_ptr = hardirq_stack_ptr;
		ret->irq_stack_size = (uint32_t)size;
	}
	if (!cea_exception_stacks)
		return NULL;
	ret->cea_exception_stacks = cea_exception_stacks;
	for (i = 0; i < sizeof(ist_names) / sizeof(ist_names[0]); i++) {
		struct ivm_btf_member m;

		err = ivm_btf_member_find(btf, "cea_exception_stacks",
					  ist_names[i], &m);
		if (err) {
			/* an exception stack this kernel does not have */
			ivm_error_destroy(err);
			continue;
		}
		if (m.size == 0 || m.size > (1u << 20) ||
		    m.offset > (1u << 24))
			continue;
		ret->ist[ret->nr_ist].offset = (uint32_t)m.offset;
		ret->ist[ret->nr_ist].size = (uint32_t)m.size;
		ret->nr_ist++;
	}
	return NULL;
}

size_t ivm_kunwind_cpu_stacks(const struct ivm_cpu_stacks_layout *layout,
			      const struct ivm_kmem_reader *mem,
			      uint64_t per_cpu_offset,
			      struct ivm_stack_range *ranges, size_t max)
{
	struct ivm_error *err;
	uint64_t ptr, base;
	size_t n = 0;
	uint32_t i;
	bool ok;

	if (layout->hardirq_stack_ptr && n < max) {
		err = mem->read(mem->ctx, per_cpu_offset +
				layout->hardirq_stack_ptr, &ptr, sizeof(ptr));
		ok = !err;
		ivm_error_destroy(err);
		/* ptr is the top slot: the stack is [ptr + 8 - size, ptr + 8) */
		if (ok && ptr <= UINT64_MAX - 8 &&
		    ptr + 8 >= layout->irq_stack_size) {
			ranges[n++] = (struct ivm_stack_range){
				ptr + 8 - layout->irq_stack_size, ptr + 8,
				IVM_STACK_RANGE_IRQ };
		}
	}
	if (!layout->cea_exception_stacks)
		return n;
	err = mem->read(mem->ctx, per_cpu_offset + layout->cea_exception_stacks,
			&base, sizeof(base));
	if (err) {
		ivm_error_destroy(err);
		return n;
	}
	for (i = 0; i < layout->nr_ist && i < IVM_KUNWIND_MAX_IST && n < max;
	     i++) {
		uint64_t lo = base + layout->ist[i].offset;

		if (lo < base || lo + layout->ist[i].size <= lo)
			continue;
		ranges[n++] = (struct ivm_stack_range){
			lo, lo + layout->ist[i].size, IVM_STACK_RANGE_EXCEPTION };
	}
	return n;
}

/* Index of the stack range holding [addr, addr + len), or -1. */
static int find_stack(const struct kunwind *ku, uint64_t addr, uint64_t len)
{
	size_t i;

	for (i = 0; i < ku->nr_stacks; i++) {
		const struct ivm_stack_range *r = &ku->stacks[i];

		if (addr >= r->lo && addr < r->hi && len <= r->hi - addr)
			return (int)i;
	}
	return -1;
}

/* Read guest stack memory; only inside a known stack range. */
static enum step kread(struct kunwind *ku, uint64_t addr, void *buf,
		       size_t len)
{
	struct ivm_error *err;

	if (find_stack(ku, addr, len) < 0) {
		ku->fault_addr = addr;
		return STEP_BOUNDS;
	}
	err = ku->mem->read(ku->mem->ctx, addr, buf, len);
	if (err) {
		ku->fault_addr = err->code == IVM_ERROR_FAULT ? err->address
							      : addr;
		ivm_error_destroy(err);
		return STEP_FAULT;
	}
	return STEP_OK;
}

static enum step kread_u64(struct kunwind *ku, uint64_t addr, uint64_t *ret)
{
	uint8_t b[8];
	enum step s = kread(ku, addr, b, sizeof(b));

	if (s == STEP_OK)
		*ret = ivm_le64(b);
	return s;
}

static uint64_t host_reg(const struct ivm_x86_regs *r, unsigned int slot)
{
	switch (slot) {
	case PTR_BP:
		return r->rbp;
	case PTR_DX:
		return r->rdx;
	case PTR_DI:
		return r->rdi;
	case PTR_R10:
		return r->r10;
	case PTR_R13:
		return r->r13;
	default:
		return 0;
	}
}

static enum step regs_ref_get(struct kunwind *ku, const struct regs_ref *ref,
			      unsigned int slot, uint64_t *ret)
{
	if (ref->kind == REGS_HOST) {
		*ret = host_reg(ref->host, slot);
		return STEP_OK;
	}
	return kread_u64(ku, ref->addr + 8ull * slot, ret);
}

/*
 * A register saved in the current register set; as in the kernel, an iret
 * frame falls back to the full set it interrupted, if there was one.
 * STEP_BAD_ORC when no register set holds it.
 */
static enum step get_reg(struct kunwind *ku, unsigned int slot, uint64_t *ret)
{
	if (ku->regs.kind != REGS_NONE && ku->regs.full)
		return regs_ref_get(ku, &ku->regs, slot, ret);
	if (ku->prev_regs.kind != REGS_NONE)
		return regs_ref_get(ku, &ku->prev_regs, slot, ret);
	return STEP_BAD_ORC;
}

static bool kernel_text(const struct kunwind *ku, uint64_t pc)
{
	return (pc >= ku->text_lo && pc < ku->text_hi) ||
	       (pc >= MODULES_LO && pc < MODULES_HI);
}

static void fill_user_regs(struct kunwind *ku, const uint8_t *p, bool full)
{
	struct ivm_x86_regs *u = &ku->user;
	const uint8_t *iret = full ? p + IRET_FRAME_OFFSET : p;

	memset(u, 0, sizeof(*u));
	u->rip = ivm_le64(iret + 0);
	u->cs = (uint16_t)ivm_le64(iret + 8);
	u->rflags = ivm_le64(iret + 16);
	u->rsp = ivm_le64(iret + 24);
	u->ss = (uint16_t)ivm_le64(iret + 32);
	ku->user_partial = !full;
	if (!full)
		return;
	u->valid = IVM_X86_REGS_GPRS;
	u->r15 = ivm_le64(p + 8 * PTR_R15);
	u->r14 = ivm_le64(p + 8 * PTR_R14);
	u->r13 = ivm_le64(p + 8 * PTR_R13);
	u->r12 = ivm_le64(p + 8 * PTR_R12);
	u->rbp = ivm_le64(p + 8 * PTR_BP);
	u->rbx = ivm_le64(p + 8 * PTR_BX);
	u->r11 = ivm_le64(p + 8 * PTR_R11);
	u->r10 = ivm_le64(p + 8 * PTR_R10);
	u->r9 = ivm_le64(p + 8 * PTR_R9);
	u->r8 = ivm_le64(p + 8 * PTR_R8);
	u->rax = ivm_le64(p + 8 * PTR_AX);
	u->rcx = ivm_le64(p + 8 * PTR_CX);
	u->rdx = ivm_le64(p + 8 * PTR_DX);
	u->rsi = ivm_le64(p + 8 * PTR_SI);
	u->rdi = ivm_le64(p + 8 * PTR_DI);
}

/* The kernel's guess for code ORC does not cover: push rbp; mov rsp, rbp. */
static const struct ivm_orc_entry fp_entry = {
	.sp_reg = IVM_ORC_REG_BP,
	.sp_offset = 16,
	.bp_reg = IVM_ORC_REG_PREV_SP,
	.bp_offset = -16,
	.type = IVM_ORC_TYPE_CALL,
};

/*
 * One unwind step from (pc, sp, bp) to the caller's by entry e.  On STEP_OK
 * the new frame's flags are in *frame_flags.  The state is only
 * meaningful after STEP_OK.
 */
static enum step step_by(struct kunwind *ku, const struct ivm_orc_entry *ep,
			 bool fallback, uint32_t *frame_flags)
{
	const struct ivm_orc_entry e = *ep;
	uint64_t sp, new_pc, new_sp, new_bp = ku->bp, tmp;
	uint8_t buf[IVM_PT_REGS_SIZE];
	bool user = false;
	enum step s;
	int r;

	/* The caller's stack pointer (the CFA). */
	switch (e.sp_reg) {
	case IVM_ORC_REG_SP:
		sp = ku->sp + (uint64_t)(int64_t)e.sp_offset;
		break;
	case IVM_ORC_REG_BP:
		sp = ku->bp + (uint64_t)(int64_t)e.sp_offset;
		break;
	case IVM_ORC_REG_SP_INDIRECT:
		/* a stack switch: the old sp was saved at the new stack's top */
		s = kread_u64(ku, ku->sp, &sp);
		if (s != STEP_OK)
			return s;
		sp += (uint64_t)(int64_t)e.sp_offset;
		break;
	case IVM_ORC_REG_BP_INDIRECT:
		/* DRAP: the CFA was saved at bp + offset */
		s = kread_u64(ku, ku->bp + (uint64_t)(int64_t)e.sp_offset, &sp);
		if (s != STEP_OK)
			return s;
		break;
	/*
	 * Register-based CFAs take the register as is: the kernel ignores
	 * sp_offset for these (objtool may still write one), and the tables
	 * are only right together with the kernel's reading of them.
	 */
	case IVM_ORC_REG_DX:
		s = get_reg(ku, PTR_DX, &sp);
		if (s != STEP_OK)
			return s;
		break;
	case IVM_ORC_REG_DI:
		s = get_reg(ku, PTR_DI, &sp);
		if (s != STEP_OK)
			return s;
		break;
	case IVM_ORC_REG_R10:
		s = get_reg(ku, PTR_R10, &sp);
		if (s != STEP_OK)
			return s;
		break;
	case IVM_ORC_REG_R13:
		s = get_reg(ku, PTR_R13, &sp);
		if (s != STEP_OK)
			return s;
		break;
	default:
		return STEP_BAD_ORC;
	}

	/* The caller's pc and sp, and the register set now in effect. */
	switch (e.type) {
	case IVM_ORC_TYPE_CALL:
		s = kread_u64(ku, sp - 8, &new_pc);
		if (s != STEP_OK)
			return s;
		new_sp = sp;
		ku->regs.kind = REGS_NONE;
		ku->prev_regs.kind = REGS_NONE;
		ku->signal = e.signal;
		*frame_flags = IVM_FRAME_KERNEL;
		break;
	case IVM_ORC_TYPE_REGS:
		s = kread(ku, sp, buf, IVM_PT_REGS_SIZE);
		if (s != STEP_OK)
			return s;
		new_pc = ivm_le64(buf + 8 * PTR_IP);
		new_sp = ivm_le64(buf + 8 * PTR_SP);
		if ((ivm_le64(buf + 8 * PTR_CS) & 3) == 3) {
			fill_user_regs(ku, buf, true);
			user = true;
		}
		ku->regs = (struct regs_ref){ .kind = REGS_GUEST, .full = true,
					      .addr = sp };
		ku->prev_regs.kind = REGS_NONE;
		ku->signal = true;
		*frame_flags = IVM_FRAME_KERNEL | IVM_FRAME_REGS;
		break;
	case IVM_ORC_TYPE_REGS_PARTIAL:
		s = kread(ku, sp, buf, IRET_FRAME_SIZE);
		if (s != STEP_OK)
			return s;
		new_pc = ivm_le64(buf);
		new_sp = ivm_le64(buf + 24);
		if ((ivm_le64(buf + 8) & 3) == 3) {
			fill_user_regs(ku, buf, false);
			user = true;
		}
		if (ku->regs.kind != REGS_NONE && ku->regs.full)
			ku->prev_regs = ku->regs;
		ku->regs = (struct regs_ref){ .kind = REGS_GUEST, .full = false,
					      .addr = sp - IRET_FRAME_OFFSET };
		ku->signal = true;
		*frame_flags = IVM_FRAME_KERNEL | IVM_FRAME_REGS;
		break;
	default:
		return STEP_BAD_ORC;
	}

	/* The caller's frame pointer. */
	switch (e.bp_reg) {
	case IVM_ORC_REG_UNDEFINED:
		/* unchanged, unless a register set just restored it */
		if (ku->regs.kind != REGS_NONE &&
		    get_reg(ku, PTR_BP, &tmp) == STEP_OK)
			new_bp = tmp;
		break;
	case IVM_ORC_REG_PREV_SP:
		s = kread_u64(ku, sp + (uint64_t)(int64_t)e.bp_offset, &new_bp);
		if (s != STEP_OK)
			return s;
		break;
	case IVM_ORC_REG_BP:
		s = kread_u64(ku, ku->bp + (uint64_t)(int64_t)e.bp_offset,
			      &new_bp);
		if (s != STEP_OK)
			return s;
		break;
	default:
		return STEP_BAD_ORC;
	}

	if (user) {
		/* an iret frame has no bp: the best guess is the one in effect */
		if (ku->user_partial)
			ku->user.rbp = new_bp;
		return STEP_USER;
	}

	if (!kernel_text(ku, new_pc)) {
		/*
		 * The kernel's own walk stops silently at a zero return
		 * address (e.g. the zeroed pt_regs on top of a kernel
		 * thread's stack); anything else is garbage.
		 */
		return new_pc == 0 && !fallback ? STEP_END : STEP_BAD_ORC;
	}

	/*
	 * The stack must move up: strictly within one stack, and onto a
	 * stack never walked before when it switches (IRQ -> task).
	 */
	r = find_stack(ku, new_sp, 1);
	if (r >= 0) {
		if (r == ku->cur) {
			if (new_sp <= ku->sp)
				return STEP_LOOP;
		} else if (ku->visited & (1ull << r)) {
			return STEP_LOOP;
		}
		ku->visited |= 1ull << r;
	}
	ku->cur = r;

	ku->pc = new_pc;
	ku->sp = new_sp;
	ku->bp = new_bp;
	if (fallback)
		*frame_flags |= IVM_FRAME_INEXACT;
	return STEP_OK;
}

/* The extra (module) table whose range holds pc, or NULL. */
static const struct ivm_kunwind_orc_range *
extra_range(const struct ivm_kunwind_config *cfg, uint64_t pc)
{
	size_t i;

	for (i = 0; i < cfg->nr_extra_orc; i++)
		if (pc >= cfg->extra_orc[i].lo && pc < cfg->extra_orc[i].hi)
			return &cfg->extra_orc[i];
	return NULL;
}

/*
 * The ORC entry for runtime address pc: the kernel's table, or for a pc
 * outside the kernel image (which the kernel's table does not cover, so
 * most frames never scan the modules) its module's.
 */
static bool find_orc(const struct ivm_kunwind_config *cfg, uint64_t pc,
		     struct ivm_orc_entry *e)
{
	const struct ivm_kunwind_orc_range *r;

	if (cfg->orc && ivm_orc_lookup(cfg->orc, pc - cfg->orc_slide, e, NULL))
		return true;
	r = extra_range(cfg, pc);
	return r && r->orc && ivm_orc_lookup(r->orc, pc, e, NULL);
}

static enum step step(struct kunwind *ku, uint32_t *frame_flags)
{
	const struct ivm_kunwind_config *cfg = ku->cfg;
	struct ivm_orc_entry e;
	uint64_t lookup;
	enum step s;

	/*
	 * A return address may lie past the end of its call's function (a
	 * call to a noreturn function at the very end): look up pc - 1
	 * unless pc is exact.
	 */
	lookup = ku->signal ? ku->pc : ku->pc - 1;
	if (find_orc(cfg, lookup, &e) && e.type != IVM_ORC_TYPE_UNDEFINED) {
		if (e.type == IVM_ORC_TYPE_END_OF_STACK)
			return STEP_END;
		return step_by(ku, &e, false, frame_flags);
	}
	/*
	 * No information: guess frame pointers.  A guess that goes nowhere
	 * (unreadable, outside the stacks, not moving up) is reported as
	 * what it is, missing unwind information, rather than as a fault.
	 */
	s = step_by(ku, &fp_entry, true, frame_flags);
	if (s == STEP_FAULT || s == STEP_BOUNDS || s == STEP_LOOP)
		s = STEP_BAD_ORC;
	return s;
}

static struct ivm_error *check_args(const struct ivm_kunwind_config *cfg,
				    const struct ivm_kmem_reader *mem,
				    const struct ivm_stack_range *stacks,
				    size_t nr_stacks, struct ivm_stack *st)
{
	size_t i;

	if (!cfg || !mem || !mem->read || !st || !st->frames || !st->cap)
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel unwind: missing config, reader or frame array");
	if (!stacks || nr_stacks == 0 || nr_stacks > IVM_KUNWIND_MAX_STACKS)
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel unwind: need 1 to %u stack ranges, got %zu",
					IVM_KUNWIND_MAX_STACKS, nr_stacks);
	for (i = 0; i < nr_stacks; i++)
		if (stacks[i].lo >= stacks[i].hi)
			return ivm_error_create(IVM_ERROR_INVALID,
						"kernel unwind: empty stack range %#llx-%#llx",
						(unsigned long long)stacks[i].lo,
						(unsigned long long)stacks[i].hi);
	return NULL;
}

static void init_state(struct kunwind *ku, const struct ivm_kunwind_config *cfg,
		       const struct ivm_kmem_reader *mem,
		       const struct ivm_stack_range *stacks, size_t nr_stacks)
{
	memset(ku, 0, sizeof(*ku));
	ku->cfg = cfg;
	ku->mem = mem;
	ku->stacks = stacks;
	ku->nr_stacks = nr_stacks;
	ku->cur = -1;
	ku->text_lo = cfg->text_lo;
	ku->text_hi = cfg->text_hi;
	if (!ku->text_lo && !ku->text_hi) {
		if (cfg->orc) {
			ivm_orc_ip_range(cfg->orc, &ku->text_lo, &ku->text_hi);
			ku->text_lo += cfg->orc_slide;
			ku->text_hi += cfg->orc_slide;
		} else {
			ku->text_lo = KERNEL_HALF_LO;
			ku->text_hi = UINT64_MAX;
		}
	}
}

static void run(struct kunwind *ku, const struct ivm_kunwind_start *start,
		struct ivm_stack *st)
{
	uint32_t flags, steps;

	ku->pc = start->pc;
	ku->sp = start->sp;
	ku->bp = start->bp;
	ku->signal = start->signal;
	if (start->regs) {
		ku->regs.kind = REGS_HOST;
		ku->regs.full = true;
		ku->regs.host = start->regs;
	}
	ku->cur = find_stack(ku, ku->sp, 1);
	if (ku->cur >= 0)
		ku->visited |= 1ull << ku->cur;

	ivm_stack_push(st, ku->pc, ku->sp,
		       IVM_FRAME_KERNEL | (start->signal ? IVM_FRAME_REGS : 0));
	for (steps = 0;; steps++) {
		enum step s;

		if (steps >= KUNWIND_MAX_STEPS) {
			st->flags |= IVM_STACK_TRUNCATED_CAP;
			return;
		}
		flags = 0;
		s = step(ku, &flags);
		switch (s) {
		case STEP_OK:
			if (flags & IVM_FRAME_INEXACT)
				st->flags |= IVM_STACK_FP_FALLBACK;
			if (!ivm_stack_push(st, ku->pc, ku->sp, flags))
				return;
			continue;
		case STEP_END:
			st->flags |= IVM_STACK_END_HINT;
			return;
		case STEP_USER:
			st->flags |= IVM_STACK_REACHED_USER;
			if (ku->user_partial)
				st->flags |= IVM_STACK_USER_REGS_PARTIAL;
			st->user_regs = ku->user;
			return;
		case STEP_FAULT:
			st->flags |= IVM_STACK_TRUNCATED_FAULT;
			st->fault_addr = ku->fault_addr;
			return;
		case STEP_BOUNDS:
			st->flags |= IVM_STACK_TRUNCATED_BOUNDS;
			st->fault_addr = ku->fault_addr;
			return;
		case STEP_LOOP:
			st->flags |= IVM_STACK_TRUNCATED_LOOP;
			return;
		case STEP_BAD_ORC:
			st->flags |= IVM_STACK_TRUNCATED_BAD_ORC;
			return;
		}
	}
}

struct ivm_error *ivm_kunwind(const struct ivm_kunwind_config *cfg,
			      const struct ivm_kmem_reader *mem,
			      const struct ivm_stack_range *stacks,
			      size_t nr_stacks,
			      const struct ivm_kunwind_start *start,
			      struct ivm_stack *st)
{
	struct ivm_error *err;
	struct kunwind ku;

	err = check_args(cfg, mem, stacks, nr_stacks, st);
	if (err)
		return err;
	if (!start)
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel unwind: no start state");
	ivm_stack_reset(st);
	init_state(&ku, cfg, mem, stacks, nr_stacks);
	run(&ku, start, st);
	return NULL;
}

struct ivm_error *ivm_kunwind_regs(const struct ivm_kunwind_config *cfg,
				   const struct ivm_kmem_reader *mem,
				   const struct ivm_stack_range *stacks,
				   size_t nr_stacks,
				   const struct ivm_x86_regs *regs,
				   struct ivm_stack *st)
{
	struct ivm_kunwind_start start;

	if (!regs || !(regs->valid & IVM_X86_REGS_GPRS))
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel unwind: no general registers");
	if ((regs->valid & IVM_X86_REGS_SEGMENTS) && (regs->cs & 3) == 3)
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel unwind: vcpu is in user mode (cs %#x)",
					regs->cs);
	start = (struct ivm_kunwind_start){
		.pc = regs->rip,
		.sp = regs->rsp,
		.bp = regs->rbp,
		.signal = true,
		.regs = regs,
	};
	return ivm_kunwind(cfg, mem, stacks, nr_stacks, &start, st);
}

struct ivm_error *ivm_kunwind_blocked(const struct ivm_kunwind_config *cfg,
				      const struct ivm_kmem_reader *mem,
				      const struct ivm_stack_range *stacks,
				      size_t nr_stacks, uint64_t thread_sp,
				      const struct ivm_switch_frame_layout *layout,
				      struct ivm_stack *st)
{
	struct ivm_kunwind_start start;
	struct ivm_error *err;
	struct kunwind ku;
	uint8_t frame[256];
	enum step s;

	err = check_args(cfg, mem, stacks, nr_stacks, st);
	if (err)
		return err;
	if (!layout || layout->size > sizeof(frame) ||
	    layout->bp > layout->size || layout->size - layout->bp < 8 ||
	    layout->ret_addr > layout->size ||
	    layout->size - layout->ret_addr < 8)
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel unwind: bad inactive_task_frame layout");
	ivm_stack_reset(st);
	init_state(&ku, cfg, mem, stacks, nr_stacks);
	s = kread(&ku, thread_sp, frame, layout->size);
	if (s != STEP_OK) {
		st->flags |= s == STEP_BOUNDS ? IVM_STACK_TRUNCATED_BOUNDS
					      : IVM_STACK_TRUNCATED_FAULT;
		st->fault_addr = ku.fault_addr;
		return NULL;
	}
	start = (struct ivm_kunwind_start){
		.pc = ivm_le64(frame + layout->ret_addr),
		.sp = thread_sp + layout->size,
		.bp = ivm_le64(frame + layout->bp),
	};
	/* A task that never ran "returns" to the first insn of ret_from_fork. */
	start.signal = cfg->ret_from_fork && start.pc == cfg->ret_from_fork;
	run(&ku, &start, st);
	return NULL;
}
