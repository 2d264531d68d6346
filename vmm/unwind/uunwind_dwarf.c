// SPDX-License-Identifier: MIT
/*
 * The unwinder of uunwind_dwarf.h: the CFI rows of a host binary
 * (ubinary.c) or of the guest's own bytes (uimage.c), followed over guest
 * memory.
 */
#include <dwarf.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/cfi_rows.h"
#include "unwind/uimage.h"
#include "unwind/uunwind_dwarf.h"

/* ---- unwinding ----------------------------------------------------------- */

struct regset {
	uint64_t r[NR_DW_REGS];
	uint32_t known;		/* bit per DWARF register */
};

static bool reg_get(const struct regset *rs, unsigned int reg, uint64_t *v)
{
	if (reg >= NR_DW_REGS || !(rs->known & (1u << reg)))
		return false;
	*v = rs->r[reg];
	return true;
}

static void reg_set(struct regset *rs, unsigned int reg, uint64_t v)
{
	rs->r[reg] = v;
	rs->known |= 1u << reg;
}

enum step {
	STEP_OK,
	STEP_FAULT,	/* a read failed: fault_addr */
	STEP_BAD,	/* unusable rule or expression */
};

struct walker {
	const struct ivm_kmem_reader *mem;
	uint64_t fault_addr;
};

static enum step read_u64(struct walker *w, uint64_t va, size_t size,
			  uint64_t *ret)
{
	struct ivm_error *err;
	uint64_t v = 0;

	/* Little endian: a short read fills the low bytes. */
	err = w->mem->read(w->mem->ctx, va, &v, size);
	if (err) {
		w->fault_addr = err->code == IVM_ERROR_FAULT ? err->address :
							       va;
		ivm_error_destroy(err);
		return STEP_FAULT;
	}
	*ret = v;
	return STEP_OK;
}

#define EXPR_STACK 16

/*
 * Evaluate a DWARF expression of CFI (DWARF 5, 2.5): the stack machine
 * subset that call frame rules use (constants, register bases, the CFA,
 * arithmetic, comparisons, dereferences).  Control flow (skip, bra),
 * calls, typed and location operations are refused: no compiler emits
 * them in CFI, and refusing them keeps evaluation a single forward pass.
 */
static enum step eval_expr(struct walker *w, const struct regset *rs,
			   uint64_t cfa, bool have_cfa, const Dwarf_Op *ops,
			   size_t nops, uint64_t *ret)
{
	uint64_t stack[EXPR_STACK];
	size_t sp = 0;

#define NEED(n) do { if (sp < (n)) return STEP_BAD; } while (0)
#define PUSH(v) do {							\
		uint64_t pushed_ = (v);					\
		if (sp == EXPR_STACK)					\
			return STEP_BAD;				\
		stack[sp++] = pushed_;					\
	} while (0)

	if (nops > IVM_UUNWIND_DWARF_MAX_OPS)
		return STEP_BAD;
	for (size_t i = 0; i < nops; i++) {
		const Dwarf_Op *op = &ops[i];
		uint8_t atom = op->atom;
		uint64_t a, b, v;
		enum step s;

		if (atom >= DW_OP_lit0 && atom <= DW_OP_lit31) {
			PUSH(atom - DW_OP_lit0);
			continue;
		}
		if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31) {
			if (!reg_get(rs, atom - DW_OP_breg0, &v))
				return STEP_BAD;
			PUSH(v + op->number);
			continue;
		}
		switch (atom) {
		case DW_OP_const1u: case DW_OP_const1s:
		case DW_OP_const2u: case DW_OP_const2s:
		case DW_OP_const4u: case DW_OP_const4s:
		case DW_OP_const8u: case DW_OP_const8s:
		case DW_OP_constu: case DW_OP_consts:
			/* libdw stores signed constants sign-extended. */
			PUSH(op->number);
			break;
		case DW_OP_bregx:
			if (!reg_get(rs, (unsigned int)op->number, &v))
				return STEP_BAD;
			PUSH(v + op->number2);
			break;
		case DW_OP_call_frame_cfa:
			if (!have_cfa)
				return STEP_BAD;
			PUSH(cfa);
			break;
		case DW_OP_dup:
			NEED(1);
			PUSH(stack[sp - 1]);
			break;
		case DW_OP_drop:
			NEED(1);
			sp--;
			break;
		case DW_OP_over:
			NEED(2);
			PUSH(stack[sp - 2]);
			break;
		case DW_OP_pick:
			if (op->number >= sp)
				return STEP_BAD;
			v = stack[sp - 1 - op->number];
			PUSH(v);
			break;
		case DW_OP_swap:
			NEED(2);
			v = stack[sp - 1];
			stack[sp - 1] = stack[sp - 2];
			stack[sp - 2] = v;
			break;
		case DW_OP_rot:
			NEED(3);
			v = stack[sp - 1];
			stack[sp - 1] = stack[sp - 2];
			stack[sp - 2] = stack[sp - 3];
			stack[sp - 3] = v;
			break;
		case DW_OP_deref:
		case DW_OP_deref_size:
			NEED(1);
			a = atom == DW_OP_deref ? 8 : op->number;
			if (a < 1 || a > 8)
				return STEP_BAD;
			s = read_u64(w, stack[sp - 1], a, &v);
			if (s != STEP_OK)
				return s;
			stack[sp - 1] = v;
			break;
		case DW_OP_plus_uconst:
			NEED(1);
			stack[sp - 1] += op->number;
			break;
		case DW_OP_neg:
			NEED(1);
			stack[sp - 1] = -stack[sp - 1];
			break;
		case DW_OP_not:
			NEED(1);
			stack[sp - 1] = ~stack[sp - 1];
			break;
		case DW_OP_abs:
			NEED(1);
			if ((int64_t)stack[sp - 1] < 0)
				stack[sp - 1] = -stack[sp - 1];
			break;
		case DW_OP_nop:
			break;
		case DW_OP_and: case DW_OP_or: case DW_OP_xor:
		case DW_OP_plus: case DW_OP_minus: case DW_OP_mul:
		case DW_OP_div: case DW_OP_mod:
		case DW_OP_shl: case DW_OP_shr: case DW_OP_shra:
		case DW_OP_eq: case DW_OP_ne: case DW_OP_lt:
		case DW_OP_le: case DW_OP_gt: case DW_OP_ge:
			NEED(2);
			b = stack[--sp];
			a = stack[sp - 1];
			switch (atom) {
			case DW_OP_and: v = a & b; break;
			case DW_OP_or: v = a | b; break;
			case DW_OP_xor: v = a ^ b; break;
			case DW_OP_plus: v = a + b; break;
			case DW_OP_minus: v = a - b; break;
			case DW_OP_mul: v = a * b; break;
			case DW_OP_div:
				/* signed, per DWARF; no traps on hostile input */
				if (!b || ((int64_t)a == INT64_MIN &&
					   (int64_t)b == -1))
					return STEP_BAD;
				v = (uint64_t)((int64_t)a / (int64_t)b);
				break;
			case DW_OP_mod:
				if (!b)
					return STEP_BAD;
				v = a % b;
				break;
			case DW_OP_shl: v = b >= 64 ? 0 : a << b; break;
			case DW_OP_shr: v = b >= 64 ? 0 : a >> b; break;
			case DW_OP_shra:
				v = (uint64_t)((int64_t)a >> (b >= 63 ? 63 : b));
				break;
			case DW_OP_eq: v = a == b; break;
			case DW_OP_ne: v = a != b; break;
			case DW_OP_lt: v = (int64_t)a < (int64_t)b; break;
			case DW_OP_le: v = (int64_t)a <= (int64_t)b; break;
			case DW_OP_gt: v = (int64_t)a > (int64_t)b; break;
			default: v = (int64_t)a >= (int64_t)b; break;
			}
			stack[sp - 1] = v;
			break;
		default:
			return STEP_BAD;
		}
	}
#undef NEED
#undef PUSH
	if (!sp)
		return STEP_BAD;
	*ret = stack[sp - 1];
	return STEP_OK;
}

/*
 * The value of a register in the caller by rule r.  *known is false for
 * an undefined register (not an error).
 */
static enum step apply_rule(struct walker *w, const struct ivm_cfi_rule *r,
			    const struct regset *rs, unsigned int reg,
			    uint64_t cfa, uint64_t *val, bool *known)
{
	uint64_t addr;
	enum step s;

	*known = false;
	switch (r->kind) {
	case RULE_UNDEFINED:
	case RULE_LOST:
		return STEP_OK;
	case RULE_SAME:
		*known = reg_get(rs, reg, val);
		return STEP_OK;
	case RULE_CFA:
		addr = cfa + (uint64_t)r->off;
		break;
	case RULE_REG:
		if (!reg_get(rs, r->reg, &addr))
			return STEP_BAD;
		addr += (uint64_t)r->off;
		break;
	case RULE_EXPR:
		s = eval_expr(w, rs, cfa, true, r->ops, r->nops, &addr);
		if (s != STEP_OK)
			return s;
		break;
	default:
		return STEP_BAD;
	}
	if (!r->is_value) {
		s = read_u64(w, addr, 8, &addr);
		if (s != STEP_OK)
			return s;
	}
	*val = addr;
	*known = true;
	return STEP_OK;
}

static bool user_pc(uint64_t pc, uint64_t max)
{
	/* Page zero is never mapped; a pc there is garbage. */
	return pc >= 4096 && pc < max;
}

static const struct ivm_umapping *find_mapping(const struct ivm_umapping *maps,
					       size_t nr_maps, uint64_t pc)
{
	for (size_t i = 0; i < nr_maps; i++)
		if (pc >= maps[i].start && pc < maps[i].end)
			return &maps[i];
	return NULL;
}

/* What one step found: the caller, or how the stack ends. */
enum outcome {
	OUT_FRAME,	/* caller in *next */
	OUT_END,	/* clean end: return address undefined or zero */
	OUT_FAULT,
	OUT_BAD,
	OUT_LOOP,	/* the CFA does not move up, or leaves the span */
};

/* One step by CFI: rs is the callee's state, next becomes the caller's. */
static enum outcome step_cfi(struct walker *w, const struct ivm_cfi_row *row,
			     const struct regset *rs, uint64_t sp,
			     uint64_t limit, struct regset *next, uint64_t *ra)
{
	uint64_t cfa, v;
	enum step s;
	bool known;

	/*
	 * glibc marks the outermost frames (_start, the thread start in
	 * clone) with DW_CFA_undefined rip: the clean end of a stack,
	 * whatever the CFA.
	 */
	if (row->ra.kind == RULE_UNDEFINED)
		return OUT_END;
	if (row->cfa.kind == RULE_REG) {
		if (!reg_get(rs, row->cfa.reg, &cfa))
			return OUT_BAD;
		cfa += (uint64_t)row->cfa.off;
	} else {
		s = eval_expr(w, rs, 0, false, row->cfa.ops, row->cfa.nops,
			      &cfa);
		if (s != STEP_OK)
			return s == STEP_FAULT ? OUT_FAULT : OUT_BAD;
	}
	/* Checked before any read relative to it: no wild reads. */
	if (cfa <= sp || cfa > limit)
		return OUT_LOOP;
	s = apply_rule(w, &row->ra, rs, DW_RA, cfa, ra, &known);
	if (s != STEP_OK)
		return s == STEP_FAULT ? OUT_FAULT : OUT_BAD;
	if (!known)
		return OUT_BAD;
	memset(next, 0, sizeof(*next));
	for (size_t i = 0; i < NR_SAVED; i++) {
		s = apply_rule(w, &row->saved[i], rs, saved_regs[i], cfa, &v,
			       &known);
		if (s == STEP_FAULT)
			return OUT_FAULT;
		/* A rule we cannot follow loses that register, not the stack. */
		if (s == STEP_OK && known)
			reg_set(next, saved_regs[i], v);
	}
	/* On x86-64 the CFA is, by definition, the caller's rsp. */
	reg_set(next, DW_RSP, cfa);
	return OUT_FRAME;
}

/* One step by the frame pointer, where no CFI covers the pc. */
static enum outcome step_fp(struct walker *w, const struct regset *rs,
			    uint64_t limit, struct regset *next, uint64_t *ra)
{
	uint64_t rbp, rsp, saved_rbp;

	if (!reg_get(rs, DW_RBP, &rbp) || !reg_get(rs, DW_RSP, &rsp))
		return OUT_BAD;
	if (!rbp)
		return OUT_END;	/* the outermost frame clears rbp */
	if (rbp & 7 || rbp < rsp || rbp > limit - 16)
		return OUT_BAD;
	if (read_u64(w, rbp, 8, &saved_rbp) != STEP_OK ||
	    read_u64(w, rbp + 8, 8, ra) != STEP_OK)
		return OUT_FAULT;
	memset(next, 0, sizeof(*next));
	reg_set(next, DW_RBP, saved_rbp);
	reg_set(next, DW_RSP, rbp + 16);
	return OUT_FRAME;
}

/*
 * Return-address scanning, where the CFI of pc exists but the guest did
 * not hold its bytes: the caller's return address is the first word
 * above sp that lies in a mapping's code right after a direct call (e8
 * rel32) of pc's function, or of a PLT stub of the caller's own mapping
 * whose GOT slot holds pc's function (a call into another object): its
 * start by the guest's own symbols when they cover pc, else a place at
 * most IVM_UUNWIND_SCAN_FUNC bytes before pc in pc's mapping.  Indirect calls cannot be checked and are
 * passed over: a caller that made one is skipped, its caller found
 * instead.  A guess, though a checked one: the frame is marked inexact,
 * and the callee-saved registers of the caller are unknown (the skipped
 * code may have saved them anywhere).
 */
#define IVM_UUNWIND_SCAN_FUNC (64u << 10)

/*
 * Where the PLT stub at target jumps: the GOT slot of its jmp *disp32(%rip)
 * (after an endbr64 and a bnd prefix, or not).  False for anything else.
 */
static bool plt_destination(struct walker *w, uint64_t target, uint64_t *ret)
{
	uint8_t b[12];
	struct ivm_error *err = w->mem->read(w->mem->ctx, target, b,
					     sizeof(b));
	size_t i;

	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	for (i = 0; i + 6 <= sizeof(b) && i <= 5; i++) {
		uint64_t slot;

		if (b[i] != 0xff || b[i + 1] != 0x25)
			continue;
		slot = target + i + 6 +
		       (uint64_t)(int64_t)(int32_t)ivm_le32(b + i + 2);
		return read_u64(w, slot, 8, ret) == STEP_OK;
	}
	return false;
}

/* The start of pc's function by the guest's symbols of its mapping. */
static bool function_start(const struct ivm_umapping *m, uint64_t pc,
			   uint64_t *ret)
{
	const struct ivm_uelf_syms *syms;
	const struct ivm_uelf_sym *sym;

	if (!m->image)
		return false;
	syms = ivm_uimage_syms(m->image, m->file, m->bias);
	sym = syms ? ivm_uelf_syms_find(syms, pc - m->bias) : NULL;
	if (!sym)
		return false;
	*ret = sym->vaddr + m->bias;
	return true;
}

/* Whether the code before ra is a direct call that may have called pc. */
static bool after_call(struct walker *w, const struct ivm_umapping *maps,
		       size_t nr_maps, uint64_t ra, uint64_t pc)
{
	const struct ivm_umapping *caller = find_mapping(maps, nr_maps, ra - 1);
	const struct ivm_umapping *callee = find_mapping(maps, nr_maps, pc);
	uint8_t b[5];
	struct ivm_error *err;
	uint64_t target, start;

	if (!caller || ra - caller->start < sizeof(b) || ra == pc + 1 ||
	    ra == pc)
		return false;
	err = w->mem->read(w->mem->ctx, ra - sizeof(b), b, sizeof(b));
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	if (b[0] != 0xe8)
		return false;
	target = ra + (uint64_t)(int64_t)(int32_t)ivm_le32(b + 1);
	/* A call into another object goes through a PLT stub: where to. */
	if (!callee || target < callee->start || target >= callee->end) {
		if (target < caller->start || target >= caller->end ||
		    !plt_destination(w, target, &target))
			return false;
	}
	if (!callee || target < callee->start || target >= callee->end)
		return false;
	if (function_start(callee, pc, &start))
		return target == start;
	return target <= pc && pc - target < IVM_UUNWIND_SCAN_FUNC;
}

/*
 * Bytes of stack scanned for a return address: frames with a path buffer
 * (PHP's php_execute_script holds one of MAXPATHLEN) are over 4 KiB.
 */
#define IVM_UUNWIND_SCAN_BYTES 32768u

static enum outcome step_scan(struct walker *w, const struct ivm_umapping *maps,
			      size_t nr_maps, const struct regset *rs,
			      uint64_t pc, uint64_t limit, struct regset *next,
			      uint64_t *ra)
{
	uint64_t sp, at, v;

	if (!reg_get(rs, DW_RSP, &sp) || sp & 7)
		return OUT_BAD;
	/* Word by word: the reader's page cache makes each one cheap. */
	for (at = sp; at - sp < IVM_UUNWIND_SCAN_BYTES && at < limit - 8;
	     at += 8) {
		if (read_u64(w, at, 8, &v) != STEP_OK)
			return OUT_FAULT;
		if (!find_mapping(maps, nr_maps, v - 1) ||
		    !after_call(w, maps, nr_maps, v, pc))
			continue;
		*ra = v;
		memset(next, 0, sizeof(*next));
		reg_set(next, DW_RSP, at + 8);
		return OUT_FRAME;
	}
	return OUT_BAD;
}

static void load_regs(const struct ivm_x86_regs *regs, struct regset *rs)
{
	memset(rs, 0, sizeof(*rs));
	reg_set(rs, DW_RSP, regs->rsp);
	reg_set(rs, DW_RBP, regs->rbp);
	reg_set(rs, DW_RA, regs->rip);
	if (!(regs->valid & IVM_X86_REGS_GPRS))
		return;
	reg_set(rs, DW_RAX, regs->rax);
	reg_set(rs, DW_RDX, regs->rdx);
	reg_set(rs, DW_RCX, regs->rcx);
	reg_set(rs, DW_RBX, regs->rbx);
	reg_set(rs, DW_RSI, regs->rsi);
	reg_set(rs, DW_RDI, regs->rdi);
	reg_set(rs, DW_R8, regs->r8);
	reg_set(rs, DW_R9, regs->r9);
	reg_set(rs, DW_R10, regs->r10);
	reg_set(rs, DW_R11, regs->r11);
	reg_set(rs, DW_R12, regs->r12);
	reg_set(rs, DW_R13, regs->r13);
	reg_set(rs, DW_R14, regs->r14);
	reg_set(rs, DW_R15, regs->r15);
}

struct ivm_error *ivm_uunwind_dwarf(const struct ivm_kmem_reader *mem,
				    const struct ivm_x86_regs *regs, int la57,
				    const struct ivm_umapping *maps,
				    size_t nr_maps, struct ivm_stack *st)
{
	uint64_t max = la57 ? IVM_USER_ADDR_MAX_LA57 : IVM_USER_ADDR_MAX;
	struct walker w = { .mem = mem };
	struct regset rs;
	uint64_t pc, sp, limit;
	bool exact = true;

	if (!mem || !mem->read || !regs || !st || !st->frames || !st->cap ||
	    (nr_maps && !maps))
		return ivm_error_create(IVM_ERROR_INVALID,
					"user dwarf unwind: bad arguments");
	for (size_t i = 0; i < nr_maps; i++)
		if ((!maps[i].binary && (!maps[i].image || !maps[i].file)) ||
		    maps[i].start >= maps[i].end)
			return ivm_error_create(IVM_ERROR_INVALID,
						"user dwarf unwind: bad mapping %zu",
						i);
	pc = regs->rip;
	sp = regs->rsp;
	if (!user_pc(pc, max))
		return NULL;
	if (!ivm_stack_push(st, pc, sp, IVM_FRAME_USER | IVM_FRAME_REGS))
		return NULL;
	limit = sp + IVM_UUNWIND_MAX_SPAN;
	if (limit < sp || limit > max)
		limit = max;
	load_regs(regs, &rs);

	/*
	 * Each pass pushes one frame or returns, so st->cap bounds the loop;
	 * the strictly growing stack pointer inside [rsp, limit) makes a
	 * cycle impossible besides.
	 */
	for (;;) {
		const struct ivm_umapping *map;
		const struct ivm_cfi_row *row = NULL;
		struct ivm_cfi_row scratch;
		struct regset next;
		enum outcome out;
		uint32_t flags = IVM_FRAME_USER;
		uint64_t ra = 0, cfa;

		/*
		 * A return address is the instruction after a call, which may
		 * begin the next function (a call to a noreturn function
		 * ends one): look up the call itself.
		 */
		uint64_t where = exact ? pc : pc - 1;

		map = find_mapping(maps, nr_maps, where);
		if (map && map->binary)
			row = ivm_ubinary_row(map->binary, where - map->bias,
					      &scratch);
		else if (map)
			row = ivm_uimage_row(map->image, map->file,
					     map->file_sources,
					     where - map->bias, &scratch);
		if (row && row->state == ROW_OK) {
			out = step_cfi(&w, row, &rs, sp, limit, &next, &ra);
		} else if (row && row->state == ROW_FAULT) {
			/*
			 * The CFI exists but the guest did not hold its bytes:
			 * a return address checked against its call, else the
			 * frame pointer; one that leads nowhere (or reads rbp
			 * 0, which code without frame pointers uses as it
			 * likes) is no clean end: say why it ends.
			 */
			flags |= IVM_FRAME_INEXACT;
			out = step_scan(&w, maps, nr_maps, &rs, where, limit,
					&next, &ra);
			/*
			 * Frame pointers only where they lead to a direct
			 * call of pc's function: rbp may be any value in code
			 * built without them.
			 */
			if (out != OUT_FRAME &&
			    step_fp(&w, &rs, limit, &next, &ra) == OUT_FRAME &&
			    after_call(&w, maps, nr_maps, ra, where))
				out = OUT_FRAME;
			if (out != OUT_FRAME) {
				st->flags |= IVM_STACK_TRUNCATED_NO_CFI;
				return NULL;
			}
		} else {
			out = step_fp(&w, &rs, limit, &next, &ra);
			flags |= IVM_FRAME_INEXACT;
		}
		switch (out) {
		case OUT_FRAME:
			break;
		case OUT_END:
			return NULL;
		case OUT_FAULT:
			st->flags |= IVM_STACK_TRUNCATED_FAULT;
			st->fault_addr = w.fault_addr;
			return NULL;
		case OUT_BAD:
			st->flags |= IVM_STACK_TRUNCATED_BAD_ORC;
			return NULL;
		case OUT_LOOP:
			st->flags |= IVM_STACK_TRUNCATED_LOOP;
			return NULL;
		}
		if (!ra)
			return NULL;	/* a zeroed return address ends it */
		cfa = next.r[DW_RSP];
		if (cfa <= sp || cfa > limit) {
			st->flags |= IVM_STACK_TRUNCATED_LOOP;
			return NULL;
		}
		if (!user_pc(ra, max)) {
			st->flags |= IVM_STACK_TRUNCATED_BAD_ORC;
			return NULL;
		}
		/*
		 * The caller of a signal frame is the interrupted context,
		 * restored from a sigcontext: its pc is exact.
		 */
		exact = !(flags & IVM_FRAME_INEXACT) && row->signal;
		if (exact)
			flags |= IVM_FRAME_REGS;
		if (!ivm_stack_push(st, ra, cfa, flags))
			return NULL;
		/* Only a frame actually kept makes the stack inexact. */
		if (flags & IVM_FRAME_INEXACT)
			st->flags |= IVM_STACK_FP_FALLBACK;
		pc = ra;
		sp = cfa;
		reg_set(&next, DW_RA, ra);
		rs = next;
	}
}
