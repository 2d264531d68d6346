// SPDX-License-Identifier: MIT
#include <dwarf.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/gfile.h"
#include "unwind/cfi_rows.h"
#include "unwind/ucfi.h"
#include "unwind/uimage.h"
#include "unwind/uunwind_dwarf.h"

/*
 * Powers of two; rows are 144 bytes.  A cache starts small and doubles
 * while it is over half full, up to 36 KiB: of web01's objects on a stack
 * most show a few dozen distinct pcs in an hour (growing by four, a
 * quarter of them sat at 256 slots with 35-54 rows), and a soak's images
 * grew for 35 minutes as objects met their first row (each took the
 * whole cache then).
 */
#define ROW_CACHE_MIN 16u
#define ROW_CACHE_MAX 256u
_Static_assert(IVM_UUNWIND_DWARF_MAX_OPS + 2 <= UINT8_MAX,
	       "a rule's nops is a byte");
/* Distinct CFI expressions kept per image (glibc's libc has a handful). */
#define MAX_EXPRS 128
/* Longest expression accepted, in bytes. */
#define MAX_EXPR_BYTES 64

/* One expression decoded into libdw's form, which the rows point to. */
struct expr {
	uint8_t bytes[MAX_EXPR_BYTES];
	uint32_t len;
	bool cfa_first, value;		/* libdw's conventions, see below */
	Dwarf_Op ops[IVM_UUNWIND_DWARF_MAX_OPS + 2];
	size_t nops;
};

/*
 * Decoding's scratch (25 KiB): used within one row's decoding only, so
 * one per thread serves every image.
 */
static __thread struct ivm_ucfi_scratch cfi_scratch;

struct ivm_uimage {
	struct ivm_uelf elf;
	struct expr *exprs[MAX_EXPRS];
	size_t nr_exprs;
	/* Names: .dynsym, MiniDebugInfo's, and syms, what lookups use. */
	struct ivm_uelf_syms *dynsym, *mini, *merged;
	const struct ivm_uelf_syms *syms;
	unsigned int sym_tries, debugdata_tries;
	/* Without .eh_frame_hdr: .eh_frame indexed here (see ucfi.h). */
	struct ivm_ucfi_index *index;
	unsigned int index_tries;
	struct ivm_uimage_stats stats;
	/*
	 * Made at the first row looked up: most objects a process maps are
	 * never on a stack, and cost only their headers.
	 */
	struct ivm_cfi_row *cache;
	unsigned int cache_slots, cache_used;
};

struct ivm_error *ivm_uimage_create(const struct ivm_kmem_reader *file,
				    struct ivm_uimage **ret)
{
	struct ivm_uimage *im = calloc(1, sizeof(*im));
	struct ivm_error *err;

	if (!im)
		return &ivm_enomem;
	err = ivm_uelf_parse(file, &im->elf);
	if (err) {
		ivm_uimage_destroy(im);
		return err;
	}
	*ret = im;
	return NULL;
}

void ivm_uimage_destroy(struct ivm_uimage *im)
{
	size_t i;

	if (!im)
		return;
	for (i = 0; i < im->nr_exprs; i++)
		free(im->exprs[i]);
	ivm_uelf_syms_destroy(im->dynsym);
	ivm_uelf_syms_destroy(im->mini);
	ivm_uelf_syms_destroy(im->merged);
	ivm_ucfi_index_destroy(im->index);
	free(im->cache);
	free(im);
}

const struct ivm_uelf *ivm_uimage_elf(const struct ivm_uimage *im)
{
	return &im->elf;
}

/* ---- expressions ------------------------------------------------------------ */

/*
 * Decode a DWARF expression into Dwarf_Ops as libdw hands them out:
 * signed constants sign-extended, bregx's register in number and offset
 * in number2.  Operations CFI never uses (and the unwinder's evaluator
 * refuses) are refused here too.
 */
static bool decode_ops(const uint8_t *bytes, size_t len, Dwarf_Op *ops,
		       size_t cap, size_t *nops)
{
	struct ivm_cursor c;
	size_t n = 0;

	ivm_cursor_init(&c, bytes, len);
	while (c.left) {
		Dwarf_Op *op;
		uint8_t atom;

		if (n == cap)
			return false;
		op = &ops[n++];
		memset(op, 0, sizeof(*op));
		op->offset = len - c.left;
		atom = ivm_get_u8(&c);
		op->atom = atom;
		if (atom >= DW_OP_lit0 && atom <= DW_OP_lit31)
			continue;
		if (atom >= DW_OP_reg0 && atom <= DW_OP_reg31)
			continue;
		if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31) {
			op->number = (uint64_t)ivm_get_sleb(&c);
			continue;
		}
		switch (atom) {
		case DW_OP_addr: case DW_OP_const8u: case DW_OP_const8s:
			op->number = ivm_get_u64(&c);
			break;
		case DW_OP_const1u: case DW_OP_pick: case DW_OP_deref_size:
			op->number = ivm_get_u8(&c);
			break;
		case DW_OP_const1s:
			op->number = (uint64_t)(int64_t)(int8_t)ivm_get_u8(&c);
			break;
		case DW_OP_const2u:
			op->number = ivm_get_u16(&c);
			break;
		case DW_OP_const2s: case DW_OP_skip: case DW_OP_bra:
			op->number = (uint64_t)(int64_t)(int16_t)ivm_get_u16(&c);
			break;
		case DW_OP_const4u:
			op->number = ivm_get_u32(&c);
			break;
		case DW_OP_const4s:
			op->number = (uint64_t)(int64_t)(int32_t)ivm_get_u32(&c);
			break;
		case DW_OP_constu: case DW_OP_plus_uconst: case DW_OP_regx:
		case DW_OP_piece:
			op->number = ivm_get_uleb(&c);
			break;
		case DW_OP_consts: case DW_OP_fbreg:
			op->number = (uint64_t)ivm_get_sleb(&c);
			break;
		case DW_OP_bregx:
			op->number = ivm_get_uleb(&c);
			op->number2 = (uint64_t)ivm_get_sleb(&c);
			break;
		case DW_OP_deref: case DW_OP_dup: case DW_OP_drop:
		case DW_OP_over: case DW_OP_swap: case DW_OP_rot:
		case DW_OP_abs: case DW_OP_and: case DW_OP_div:
		case DW_OP_minus: case DW_OP_mod: case DW_OP_mul:
		case DW_OP_neg: case DW_OP_not: case DW_OP_or:
		case DW_OP_plus: case DW_OP_shl: case DW_OP_shr:
		case DW_OP_shra: case DW_OP_xor: case DW_OP_eq:
		case DW_OP_ge: case DW_OP_gt: case DW_OP_le: case DW_OP_lt:
		case DW_OP_ne: case DW_OP_nop: case DW_OP_call_frame_cfa:
			break;
		default:
			return false;
		}
		if (c.bad)
			return false;
	}
	*nops = n;
	return !c.bad;
}

/*
 * The ops of an expression rule, interned in the image so rows can point
 * to them: libdw's form, DW_OP_call_frame_cfa first for a register's
 * expression (its stack starts with the CFA), DW_OP_stack_value last for
 * a val_expression.  NULL when malformed or over the caps.
 */
static struct expr *intern(struct ivm_uimage *im, const uint8_t *bytes,
			   uint32_t len, bool cfa_first, bool value)
{
	struct expr *e;
	size_t i, n;

	if (len > MAX_EXPR_BYTES)
		return NULL;
	for (i = 0; i < im->nr_exprs; i++) {
		e = im->exprs[i];
		if (e->len == len && e->cfa_first == cfa_first &&
		    e->value == value && !memcmp(e->bytes, bytes, len))
			return e;
	}
	if (im->nr_exprs == MAX_EXPRS || !(e = calloc(1, sizeof(*e))))
		return NULL;
	memcpy(e->bytes, bytes, len);
	e->len = len;
	e->cfa_first = cfa_first;
	e->value = value;
	if (cfa_first)
		e->ops[e->nops++].atom = DW_OP_call_frame_cfa;
	if (!decode_ops(bytes, len, e->ops + e->nops,
			IVM_UUNWIND_DWARF_MAX_OPS - e->nops, &n)) {
		free(e);
		return NULL;
	}
	e->nops += n;
	if (value)
		e->ops[e->nops++].atom = DW_OP_stack_value;
	im->exprs[im->nr_exprs++] = e;
	return e;
}

/* ---- rows ------------------------------------------------------------------- */

/* One register's rule from ucfi's into the unwinder's. */
static bool convert_rule(struct ivm_uimage *im, const struct ivm_ucfi_rule *u,
			 struct ivm_cfi_rule *r)
{
	struct expr *e;

	memset(r, 0, sizeof(*r));
	switch (u->kind) {
	case IVM_UCFI_UNDEFINED:
		r->kind = RULE_UNDEFINED;
		return true;
	case IVM_UCFI_SAME:
		r->kind = RULE_SAME;
		return true;
	case IVM_UCFI_OFFSET:
	case IVM_UCFI_VAL_OFFSET:
		r->kind = RULE_CFA;
		r->off = u->off;
		r->is_value = u->kind == IVM_UCFI_VAL_OFFSET;
		return true;
	case IVM_UCFI_REGISTER:
		r->kind = RULE_REG;
		r->reg = u->reg;
		r->is_value = true;
		return true;
	case IVM_UCFI_EXPR:
	case IVM_UCFI_VAL_EXPR:
		e = intern(im, u->expr, u->expr_len, true,
			   u->kind == IVM_UCFI_VAL_EXPR);
		/* The simple forms come out as libdw's do. */
		return e && ivm_cfi_decode_rule(e->ops, e->nops, NULL, r);
	default:
		return false;
	}
}

static void convert_row(struct ivm_uimage *im, const struct ivm_ucfi_row *u,
			struct ivm_cfi_row *row)
{
	struct expr *e;
	size_t i;

	row->state = ROW_BAD;
	row->signal = u->signal;
	if (u->cfa.kind == IVM_UCFI_CFA_REG) {
		row->cfa.kind = RULE_REG;
		row->cfa.reg = u->cfa.reg;
		row->cfa.off = u->cfa.off;
	} else {
		e = intern(im, u->cfa.expr, u->cfa.expr_len, false, false);
		if (!e || !e->nops)
			return;
		row->cfa.kind = RULE_EXPR;
		row->cfa.ops = e->ops;
		row->cfa.nops = (uint8_t)e->nops;
	}
	row->cfa.is_value = true;
	if (!convert_rule(im, &u->regs[DW_RA], &row->ra))
		return;
	for (i = 0; i < NR_SAVED; i++) {
		if (!convert_rule(im, &u->regs[saved_regs[i]], &row->saved[i]))
			row->saved[i].kind = RULE_LOST;
		/* As for libdw's rows: callee-saved means unchanged. */
		if (row->saved[i].kind == RULE_UNDEFINED)
			row->saved[i].kind = RULE_SAME;
	}
	row->state = ROW_OK;
}

/*
 * Index .eh_frame, found by the section headers, for a file without
 * .eh_frame_hdr.  Retried while the guest lacks the bytes, a few times.
 */
static struct ivm_error *build_index(struct ivm_uimage *im,
				     const struct ivm_kmem_reader *file)
{
	struct ivm_uelf_section sec;
	struct ivm_error *err;
	uint8_t *bytes;

	if (im->index_tries >= IVM_UIMAGE_SYM_TRIES)
		return ivm_error_create(IVM_ERROR_NOT_FOUND, "no CFI");
	im->index_tries++;
	err = ivm_uelf_find_section(file, &im->elf, ".eh_frame", &sec);
	if (!err && (sec.type != SHT_PROGBITS || !sec.size ||
		     sec.size > IVM_UCFI_MAX_EH_FRAME ||
		     !ivm_uelf_in_segment(&im->elf, sec.vaddr, sec.size)))
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "no usable .eh_frame");
	if (err) {
		if (err->code != IVM_ERROR_FAULT)
			im->index_tries = IVM_UIMAGE_SYM_TRIES;
		return err;
	}
	bytes = malloc(sec.size);
	if (!bytes)
		return &ivm_enomem;
	err = file->read(file->ctx, sec.offset, bytes, sec.size);
	if (!err) {
		err = ivm_ucfi_index_build(bytes, sec.size, sec.vaddr,
					   &im->index);
		if (err && err->code != IVM_ERROR_FAULT)
			im->index_tries = IVM_UIMAGE_SYM_TRIES;
	}
	free(bytes);
	return err;
}

static void decode_row(struct ivm_uimage *im,
		       const struct ivm_kmem_reader *file, uint64_t pc,
		       struct ivm_cfi_row *row)
{
	struct ivm_uelf_vreader vr;
	struct ivm_kmem_reader vmem;
	struct ivm_ucfi_row u;
	struct ivm_error *err;
	uint64_t fde;

	memset(row, 0, sizeof(*row));
	row->pc = pc;
	row->state = ROW_NONE;
	ivm_uelf_vreader_init(&vr, file, &im->elf, &vmem);
	if (im->elf.eh.vaddr) {
		err = ivm_ucfi_find(&vmem, &im->elf.eh, pc, &fde);
	} else {
		err = im->index ? NULL : build_index(im, file);
		if (!err)
			err = ivm_ucfi_index_find(im->index, pc, &fde);
	}
	if (!err)
		err = ivm_ucfi_row(&vmem, fde, pc, &cfi_scratch, &u);
	if (!err) {
		convert_row(im, &u, row);
		if (row->state == ROW_BAD)
			im->stats.bad++;
		return;
	}
	if (err->code == IVM_ERROR_FAULT) {
		row->state = ROW_FAULT;
		im->stats.faults++;
	} else if (err->code == IVM_ERROR_PROTOCOL) {
		row->state = ROW_BAD;
		im->stats.bad++;
	}
	ivm_error_destroy(err);
}

/*
 * Decode the row at pc, and say where its bytes came from when the file
 * reader says it (sources: kernel/gfile.h's IVM_GFILE_* bits, which the
 * reader ORs in).  A row the process's page tables did not hold all of,
 * that the file's page cache completed, is what a fork child's unwind
 * lives on: it is counted apart.
 */
static void lookup_uncached(struct ivm_uimage *im,
			    const struct ivm_kmem_reader *file,
			    unsigned int *sources, uint64_t pc,
			    struct ivm_cfi_row *row)
{
	unsigned int before = 0, got;

	if (sources) {
		before = *sources;
		*sources = 0;
	}
	decode_row(im, file, pc, row);
	if (!sources)
		return;
	got = *sources;
	*sources = before | got;
	if (row->state != ROW_OK)
		return;
	if (got & IVM_GFILE_PAGE_CACHE)
		im->stats.page_cache++;
	else if (got & IVM_GFILE_OTHER_MAPPING)
		im->stats.other_mapping++;
}

/* Code addresses cluster; fold the high bits in so pages spread. */
static struct ivm_cfi_row *cache_slot(struct ivm_uimage *im, uint64_t pc)
{
	return &im->cache[(pc ^ (pc >> 8)) & (im->cache_slots - 1)];
}

/*
 * The first cache, or one twice the size with the rows moved in (a row
 * that meets another in its new slot is dropped).  False when out of
 * memory: the cache stays as it was.
 */
static bool grow_cache(struct ivm_uimage *im)
{
	unsigned int n = im->cache ? 2 * im->cache_slots : ROW_CACHE_MIN;
	struct ivm_cfi_row *old = im->cache, *c = calloc(n, sizeof(*c));
	unsigned int i, old_slots = im->cache_slots;

	if (!c)
		return false;
	im->cache = c;
	im->cache_slots = n;
	im->cache_used = 0;
	for (i = 0; i < old_slots; i++) {
		struct ivm_cfi_row *slot;

		if (old[i].state == ROW_EMPTY)
			continue;
		slot = cache_slot(im, old[i].pc);
		im->cache_used += slot->state == ROW_EMPTY;
		*slot = old[i];
	}
	free(old);
	return true;
}

const struct ivm_cfi_row *ivm_uimage_row(struct ivm_uimage *im,
					 const struct ivm_kmem_reader *file,
					 unsigned int *sources, uint64_t pc,
					 struct ivm_cfi_row *scratch)
{
	struct ivm_cfi_row *slot;

	im->stats.lookups++;
	if (!im->cache && !grow_cache(im)) {
		lookup_uncached(im, file, sources, pc, scratch);
		return scratch;
	}
	slot = cache_slot(im, pc);
	if (slot->state != ROW_EMPTY && slot->pc == pc) {
		im->stats.hits++;
		return slot;
	}
	lookup_uncached(im, file, sources, pc, scratch);
	/* What the guest did not hold may be there next time. */
	if (scratch->state == ROW_FAULT)
		return scratch;
	if (2 * (im->cache_used + 1) > im->cache_slots &&
	    im->cache_slots < ROW_CACHE_MAX && grow_cache(im))
		slot = cache_slot(im, pc);
	im->cache_used += slot->state == ROW_EMPTY;
	*slot = *scratch;
	return slot;
}

char *ivm_uimage_describe_row(struct ivm_uimage *im,
			      const struct ivm_kmem_reader *file, uint64_t pc,
			      char *buf, size_t len)
{
	struct ivm_cfi_row row;

	decode_row(im, file, pc, &row);
	return ivm_cfi_row_format(&row, buf, len);
}

/* ---- names ------------------------------------------------------------------- */

const char *ivm_uimage_symbol(struct ivm_uimage *im,
			      const struct ivm_kmem_reader *file,
			      uint64_t bias, uint64_t vaddr, uint64_t *off)
{
	const struct ivm_uelf_syms *syms = ivm_uimage_syms(im, file, bias);

	return syms ? ivm_uelf_syms_lookup(syms, vaddr, off) : NULL;
}

const struct ivm_uelf_syms *ivm_uimage_syms(struct ivm_uimage *im,
					    const struct ivm_kmem_reader *file,
					    uint64_t bias)
{
	struct ivm_uelf_syms *merged;
	struct ivm_error *err;
	bool changed = false;

	if (!im->dynsym && im->sym_tries < IVM_UIMAGE_SYM_TRIES) {
		err = ivm_uelf_read_dynsym(file, &im->elf, bias, &im->dynsym);
		/* Only a page the guest lacked is worth another try. */
		if (err)
			im->sym_tries = err->code == IVM_ERROR_FAULT ?
					im->sym_tries + 1 :
					IVM_UIMAGE_SYM_TRIES;
		changed = !err;
		ivm_error_destroy(err);
	}
	/*
	 * MiniDebugInfo names the local functions .dynsym lacks; it lies in
	 * no segment, so only the page cache may hold it.
	 */
	if (!im->mini && im->debugdata_tries < IVM_UIMAGE_SYM_TRIES) {
		err = ivm_uelf_read_gnu_debugdata(file, &im->elf, &im->mini);
		if (err)
			im->debugdata_tries = err->code == IVM_ERROR_FAULT ?
					      im->debugdata_tries + 1 :
					      IVM_UIMAGE_SYM_TRIES;
		changed |= !err;
		ivm_error_destroy(err);
	}
	if (!changed)
		return im->syms;
	if (im->dynsym && im->mini &&
	    !ivm_uelf_syms_merge(im->dynsym, im->mini, &merged)) {
		ivm_uelf_syms_destroy(im->merged);
		im->merged = merged;
		im->syms = merged;
	} else {
		im->syms = im->dynsym ? im->dynsym : im->mini;
	}
	return im->syms;
}

uint64_t ivm_uimage_faults(const struct ivm_uimage *im)
{
	return im->stats.faults;
}

void ivm_uimage_stats(const struct ivm_uimage *im,
		      struct ivm_uimage_stats *ret)
{
	*ret = im->stats;
	ret->memory = sizeof(*im) +
		      (size_t)im->cache_slots * sizeof(*im->cache) +
		      im->nr_exprs * sizeof(struct expr);
	if (im->index)
		ret->memory += sizeof(*im->index) + 16 * im->index->nr;
	if (im->dynsym)
		ret->memory += sizeof(*im->dynsym) +
			       im->dynsym->nr * sizeof(*im->dynsym->syms) +
			       im->dynsym->strsz;
	if (im->mini)
		ret->memory += sizeof(*im->mini) +
			       im->mini->nr * sizeof(*im->mini->syms) +
			       im->mini->strsz;
	if (im->merged)
		ret->memory += sizeof(*im->merged) +
			       im->merged->nr * sizeof(*im->merged->syms) +
			       im->merged->strsz;
}
