// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/ucfi.h"

/* ---- the search table ------------------------------------------------------ */

static uint64_t table_value(const uint8_t *p, const struct ivm_uelf_eh_hdr *eh)
{
	uint64_t v = ivm_le_load(p, eh->entry_size);

	if (eh->entry_signed && eh->entry_size == 4)
		v = (uint64_t)(int64_t)(int32_t)v;
	return v + eh->vaddr;	/* datarel: from .eh_frame_hdr */
}

struct ivm_error *ivm_ucfi_find(const struct ivm_kmem_reader *vmem,
				const struct ivm_uelf_eh_hdr *eh, uint64_t pc,
				uint64_t *ret)
{
	uint64_t lo = 0, hi = eh->count, size = 2ull * eh->entry_size;
	uint8_t entry[16];
	struct ivm_error *err;
	bool found = false;

	if (!eh->vaddr || !eh->count)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no .eh_frame_hdr table");
	/* The last entry whose initial location is <= pc. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		err = vmem->read(vmem->ctx, eh->table + mid * size, entry,
				 size);
		if (err)
			return err;
		if (table_value(entry, eh) <= pc) {
			*ret = table_value(entry + eh->entry_size, eh);
			found = true;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	/*
	 * lo moved only past entries it probed as <= pc, so the last of
	 * those, lo - 1, gave *ret.
	 */
	if (!found)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"pc %#llx precedes the CFI",
					(unsigned long long)pc);
	return NULL;
}

/* ---- reading entries ------------------------------------------------------- */

/*
 * A DW_EH_PE-encoded pointer at the cursor; base is the link-time address
 * of the cursor's first byte (for pcrel).  Indirect and aligned pointers
 * are refused: no x86-64 toolchain emits them in FDEs.
 */
static bool get_pointer(struct ivm_cursor *c, uint8_t enc, uint64_t base,
			const uint8_t *start, bool absolute, uint64_t *ret)
{
	uint64_t field = base + (uint64_t)(c->p - start), v;

	if (enc == 0xff) {	/* DW_EH_PE_omit */
		*ret = 0;
		return true;
	}
	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c:
		v = ivm_get_u64(c);
		break;
	case 0x01:
		v = ivm_get_uleb(c);
		break;
	case 0x09:
		v = (uint64_t)ivm_get_sleb(c);
		break;
	case 0x02:
		v = ivm_get_u16(c);
		break;
	case 0x0a:
		v = (uint64_t)(int64_t)(int16_t)ivm_get_u16(c);
		break;
	case 0x03:
		v = ivm_get_u32(c);
		break;
	case 0x0b:
		v = (uint64_t)(int64_t)(int32_t)ivm_get_u32(c);
		break;
	default:
		return false;
	}
	if (!absolute) {
		switch (enc & 0x70) {
		case 0x00:
			break;
		case 0x10:
			v += field;
			break;
		default:
			return false;
		}
	}
	*ret = v;
	return !c->bad;
}

/* What a CIE says for every FDE of it. */
struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;	/* DW_EH_PE of pc_begin */
	bool has_aug_data;	/* "z": FDEs carry an augmentation length */
	bool signal;
	const uint8_t *insns;
	size_t insns_len;
	uint64_t insns_vaddr;
};

static struct ivm_error *bad(const char *what)
{
	return ivm_error_create(IVM_ERROR_PROTOCOL, "CFI: %s", what);
}

static struct ivm_error *parse_cie(const uint8_t *p, size_t len,
				   uint64_t vaddr, struct cie *cie)
{
	struct ivm_cursor c;
	const char *aug;
	size_t aug_len;
	uint8_t version;

	memset(cie, 0, sizeof(*cie));
	cie->fde_enc = 0;	/* absptr unless "R" says */
	ivm_cursor_init(&c, p, len);
	if (ivm_get_u32(&c) != 0)
		return bad("not a CIE");
	version = ivm_get_u8(&c);
	if (version != 1 && version != 3 && version != 4)
		return bad("unknown CIE version");
	aug = (const char *)c.p;
	aug_len = strnlen(aug, c.left);
	if (aug_len == c.left)
		return bad("unterminated augmentation");
	ivm_cursor_take(&c, aug_len + 1);
	if (aug_len && aug[0] != 'z')
		return bad("augmentation without 'z'");
	if (version == 4) {
		if (ivm_get_u8(&c) != 8 || ivm_get_u8(&c) != 0)
			return bad("address or segment size");
	}
	cie->code_align = ivm_get_uleb(&c);
	cie->data_align = ivm_get_sleb(&c);
	if (version == 1) {
		if (ivm_get_u8(&c) != IVM_UCFI_RA)
			return bad("return address column");
	} else if (ivm_get_uleb(&c) != IVM_UCFI_RA) {
		return bad("return address column");
	}
	if (aug_len) {
		uint64_t data_len = ivm_get_uleb(&c);
		struct ivm_cursor d;
		const uint8_t *data = ivm_cursor_take(&c, data_len);
		size_t i;

		if (!data)
			return bad("augmentation data");
		cie->has_aug_data = true;
		ivm_cursor_init(&d, data, data_len);
		for (i = 1; i < aug_len; i++) {
			uint64_t ignored;
			uint8_t enc;

			switch (aug[i]) {
			case 'R':
				cie->fde_enc = ivm_get_u8(&d);
				break;
			case 'L':
				ivm_get_u8(&d);
				break;
			case 'P':
				enc = ivm_get_u8(&d);
				if (!get_pointer(&d, enc & 0x7f, 0, data, true,
						 &ignored))
					return bad("personality");
				break;
			case 'S':
				cie->signal = true;
				break;
			default:
				return bad("unknown augmentation");
			}
			if (d.bad)
				return bad("augmentation data");
		}
	}
	if (c.bad || !cie->code_align)
		return bad("truncated CIE");
	cie->insns = c.p;
	cie->insns_len = c.left;
	cie->insns_vaddr = vaddr + (uint64_t)(c.p - p);
	return NULL;
}

/* ---- running the instructions --------------------------------------------- */

/* a * b as two's complement: hostile factors must not overflow signed. */
static int64_t mul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* regs[0..16] and, in slot IVM_UCFI_NR_REGS, the CFA. */
#define CFA_SLOT IVM_UCFI_NR_REGS

struct machine {
	struct ivm_ucfi_rule rules[IVM_UCFI_NR_REGS + 1];
	struct ivm_ucfi_rule initial[IVM_UCFI_NR_REGS + 1];
	struct ivm_ucfi_rule sink;	/* rules of untracked registers */
	struct ivm_ucfi_rule (*states)[IVM_UCFI_NR_REGS + 1];
	unsigned int nr_states;
	const struct cie *cie;
	uint8_t fde_enc;
	uint64_t loc, pc, end;	/* current location, target, FDE end */
	bool done;		/* the next row starts after pc */
};

static struct ivm_ucfi_rule *reg_rule(struct machine *m, uint64_t reg)
{
	/* Rules for registers beyond the ones we track are parsed, dropped. */
	return reg < IVM_UCFI_NR_REGS ? &m->rules[reg] : &m->sink;
}

static void advance(struct machine *m, uint64_t delta)
{
	uint64_t next = m->loc + delta;

	if (next < m->loc || next > m->pc) {
		m->end = next < m->loc ? UINT64_MAX : next;
		m->done = true;
		return;
	}
	m->loc = next;
}

static struct ivm_error *run(struct machine *m, const uint8_t *insns,
			     size_t len, uint64_t vaddr)
{
	const struct cie *cie = m->cie;
	struct ivm_cursor c;

	ivm_cursor_init(&c, insns, len);
	while (c.left && !m->done) {
		uint8_t op = ivm_get_u8(&c);
		struct ivm_ucfi_rule *r;
		uint64_t reg, v;
		int64_t off;
		const uint8_t *expr;

		switch (op & 0xc0) {
		case 0x40:	/* advance_loc */
			advance(m, (op & 0x3f) * cie->code_align);
			continue;
		case 0x80:	/* offset */
			r = reg_rule(m, op & 0x3f);
			v = ivm_get_uleb(&c);
			*r = (struct ivm_ucfi_rule){ IVM_UCFI_OFFSET, 0,
				mul((int64_t)v, cie->data_align), NULL, 0 };
			continue;
		case 0xc0:	/* restore */
			if ((op & 0x3f) < IVM_UCFI_NR_REGS)
				m->rules[op & 0x3f] = m->initial[op & 0x3f];
			continue;
		}
		switch (op) {
		case 0x00:	/* nop */
			break;
		case 0x01:	/* set_loc */
			if (!get_pointer(&c, m->fde_enc, vaddr, insns, false,
					 &v))
				return bad("set_loc");
			if (v < m->loc)
				return bad("set_loc backwards");
			advance(m, v - m->loc);
			break;
		case 0x02:
			advance(m, ivm_get_u8(&c) * cie->code_align);
			break;
		case 0x03:
			advance(m, ivm_get_u16(&c) * cie->code_align);
			break;
		case 0x04:
			advance(m, ivm_get_u32(&c) * cie->code_align);
			break;
		case 0x05:	/* offset_extended */
			r = reg_rule(m, ivm_get_uleb(&c));
			v = ivm_get_uleb(&c);
			*r = (struct ivm_ucfi_rule){ IVM_UCFI_OFFSET, 0,
				mul((int64_t)v, cie->data_align), NULL, 0 };
			break;
		case 0x06:	/* restore_extended */
			reg = ivm_get_uleb(&c);
			if (reg < IVM_UCFI_NR_REGS)
				m->rules[reg] = m->initial[reg];
			break;
		case 0x07:	/* undefined */
		case 0x08:	/* same_value */
			r = reg_rule(m, ivm_get_uleb(&c));
			*r = (struct ivm_ucfi_rule){ op == 0x07 ?
				IVM_UCFI_UNDEFINED : IVM_UCFI_SAME, 0, 0,
				NULL, 0 };
			break;
		case 0x09:	/* register */
			r = reg_rule(m, ivm_get_uleb(&c));
			reg = ivm_get_uleb(&c);
			if (reg >= IVM_UCFI_NR_REGS)
				return bad("register rule from an untracked register");
			*r = (struct ivm_ucfi_rule){ IVM_UCFI_REGISTER,
				(uint8_t)reg, 0, NULL, 0 };
			break;
		case 0x0a:	/* remember_state */
			if (m->nr_states == IVM_UCFI_MAX_STATES)
				return bad("too many remembered states");
			memcpy(m->states[m->nr_states++], m->rules,
			       sizeof(m->rules));
			break;
		case 0x0b:	/* restore_state: the CFA too, as GCC expects */
			if (!m->nr_states)
				return bad("restore_state with no state");
			m->nr_states--;
			memcpy(m->rules, m->states[m->nr_states],
			       sizeof(m->rules));
			break;
		case 0x0c:	/* def_cfa */
		case 0x12:	/* def_cfa_sf */
			reg = ivm_get_uleb(&c);
			off = op == 0x0c ? (int64_t)ivm_get_uleb(&c) :
			      mul(ivm_get_sleb(&c), cie->data_align);
			if (reg >= IVM_UCFI_NR_REGS)
				return bad("CFA register");
			m->rules[CFA_SLOT] = (struct ivm_ucfi_rule){
				IVM_UCFI_CFA_REG, (uint8_t)reg, off, NULL, 0 };
			break;
		case 0x0d:	/* def_cfa_register */
			reg = ivm_get_uleb(&c);
			if (reg >= IVM_UCFI_NR_REGS ||
			    m->rules[CFA_SLOT].kind != IVM_UCFI_CFA_REG)
				return bad("CFA register");
			m->rules[CFA_SLOT].reg = (uint8_t)reg;
			break;
		case 0x0e:	/* def_cfa_offset */
		case 0x13:	/* def_cfa_offset_sf */
			off = op == 0x0e ? (int64_t)ivm_get_uleb(&c) :
			      mul(ivm_get_sleb(&c), cie->data_align);
			if (m->rules[CFA_SLOT].kind != IVM_UCFI_CFA_REG)
				return bad("CFA offset without a CFA register");
			m->rules[CFA_SLOT].off = off;
			break;
		case 0x0f:	/* def_cfa_expression */
			v = ivm_get_uleb(&c);
			expr = ivm_cursor_take(&c, v);
			if (!expr || v > UINT32_MAX)
				return bad("CFA expression");
			m->rules[CFA_SLOT] = (struct ivm_ucfi_rule){
				IVM_UCFI_CFA_EXPR, 0, 0, expr, (uint32_t)v };
			break;
		case 0x10:	/* expression */
		case 0x16:	/* val_expression */
			r = reg_rule(m, ivm_get_uleb(&c));
			v = ivm_get_uleb(&c);
			expr = ivm_cursor_take(&c, v);
			if (!expr || v > UINT32_MAX)
				return bad("register expression");
			*r = (struct ivm_ucfi_rule){ op == 0x10 ?
				IVM_UCFI_EXPR : IVM_UCFI_VAL_EXPR, 0, 0, expr,
				(uint32_t)v };
			break;
		case 0x11:	/* offset_extended_sf */
		case 0x14:	/* val_offset */
		case 0x15:	/* val_offset_sf */
			r = reg_rule(m, ivm_get_uleb(&c));
			off = op == 0x14 ? (int64_t)ivm_get_uleb(&c) : ivm_get_sleb(&c);
			*r = (struct ivm_ucfi_rule){ op == 0x11 ?
				IVM_UCFI_OFFSET : IVM_UCFI_VAL_OFFSET, 0,
				mul(off, cie->data_align), NULL, 0 };
			break;
		case 0x2e:	/* GNU_args_size */
			ivm_get_uleb(&c);
			break;
		case 0x2f:	/* GNU_negative_offset_extended */
			r = reg_rule(m, ivm_get_uleb(&c));
			v = ivm_get_uleb(&c);
			*r = (struct ivm_ucfi_rule){ IVM_UCFI_OFFSET, 0,
				mul((int64_t)(0 - v), cie->data_align), NULL, 0 };
			break;
		default:
			return bad("unknown instruction");
		}
		if (c.bad)
			return bad("truncated instruction");
	}
	if (c.bad)
		return bad("truncated instruction");
	return NULL;
}

struct ivm_error *ivm_ucfi_execute(const uint8_t *cie_bytes, size_t cie_len,
				   uint64_t cie_vaddr, const uint8_t *fde,
				   size_t fde_len, uint64_t fde_vaddr,
				   uint64_t pc, struct ivm_ucfi_scratch *scratch,
				   struct ivm_ucfi_row *ret)
{
	struct machine m;
	struct cie cie;
	struct ivm_cursor c;
	struct ivm_error *err;
	uint64_t begin, range;
	size_t i;

	err = parse_cie(cie_bytes, cie_len, cie_vaddr, &cie);
	if (err)
		return err;
	ivm_cursor_init(&c, fde, fde_len);
	if (!ivm_get_u32(&c))
		return bad("an FDE pointing at no CIE");
	if (!get_pointer(&c, cie.fde_enc, fde_vaddr, fde, false, &begin) ||
	    !get_pointer(&c, cie.fde_enc & 0x0f, fde_vaddr, fde, true, &range))
		return bad("FDE range");
	if (pc < begin || pc - begin >= range)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no FDE covers %#llx",
					(unsigned long long)pc);
	if (cie.has_aug_data &&
	    !ivm_cursor_take(&c, ivm_get_uleb(&c)))
		return bad("FDE augmentation data");
	if (c.bad)
		return bad("truncated FDE");

	memset(&m, 0, sizeof(m));
	m.states = scratch->states;
	m.cie = &cie;
	m.fde_enc = cie.fde_enc;
	/* The CIE's instructions set the initial rules: no advance counts. */
	m.loc = begin;
	m.pc = UINT64_MAX;
	err = run(&m, cie.insns, cie.insns_len, cie.insns_vaddr);
	if (err)
		return err;
	if (m.done)
		return bad("location advanced in a CIE");
	memcpy(m.initial, m.rules, sizeof(m.rules));
	m.nr_states = 0;
	m.loc = begin;
	m.pc = pc;
	m.end = begin + range;
	err = run(&m, c.p, c.left, fde_vaddr + (uint64_t)(c.p - fde));
	if (err)
		return err;
	if (m.rules[CFA_SLOT].kind != IVM_UCFI_CFA_REG &&
	    m.rules[CFA_SLOT].kind != IVM_UCFI_CFA_EXPR)
		return bad("no CFA rule");
	ret->start = m.loc;
	ret->end = m.end < begin + range ? m.end : begin + range;
	ret->signal = cie.signal;
	ret->cfa = m.rules[CFA_SLOT];
	for (i = 0; i < IVM_UCFI_NR_REGS; i++)
		ret->regs[i] = m.rules[i];
	return NULL;
}

/* Read one CIE or FDE (the bytes after its length) into buf. */
static struct ivm_error *read_entry(const struct ivm_kmem_reader *vmem,
				    uint64_t at, uint8_t *buf, size_t *len,
				    uint64_t *content)
{
	uint8_t hdr[4];
	struct ivm_error *err;
	uint32_t n;

	err = vmem->read(vmem->ctx, at, hdr, sizeof(hdr));
	if (err)
		return err;
	n = ivm_le32(hdr);
	/* 0xffffffff announces a 64-bit length: no entry of ours is that big. */
	if (n < 8 || n > IVM_UCFI_MAX_ENTRY)
		return bad("entry length");
	err = vmem->read(vmem->ctx, at + 4, buf, n);
	if (err)
		return err;
	*len = n;
	*content = at + 4;
	return NULL;
}

struct ivm_error *ivm_ucfi_row(const struct ivm_kmem_reader *vmem,
			       uint64_t fde, uint64_t pc,
			       struct ivm_ucfi_scratch *scratch,
			       struct ivm_ucfi_row *ret)
{
	size_t fde_len, cie_len;
	uint64_t fde_vaddr, cie_vaddr, cie_at;
	struct ivm_error *err;
	uint32_t back;

	err = read_entry(vmem, fde, scratch->fde, &fde_len, &fde_vaddr);
	if (err)
		return err;
	/* The CIE pointer counts back from its own field. */
	back = ivm_le32(scratch->fde);
	if (!back || back > fde_vaddr)
		return bad("CIE pointer");
	cie_at = fde_vaddr - back;
	err = read_entry(vmem, cie_at, scratch->cie, &cie_len, &cie_vaddr);
	if (err)
		return err;
	return ivm_ucfi_execute(scratch->cie, cie_len, cie_vaddr,
				scratch->fde, fde_len, fde_vaddr, pc, scratch,
				ret);
}

/* ---- an index of .eh_frame ----------------------------------------------- */

struct index_entry {
	uint64_t pc, fde;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct index_entry *x = a, *y = b;

	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	return x->fde < y->fde ? -1 : x->fde > y->fde;
}

struct ivm_error *ivm_ucfi_index_build(const uint8_t *bytes, size_t size,
				       uint64_t vaddr,
				       struct ivm_ucfi_index **ret)
{
	struct index_entry *entries = NULL;
	struct ivm_ucfi_index *ix;
	size_t nr = 0, cap = 0, off = 0, i;
	/* The last CIE parsed: FDEs mostly share one. */
	size_t cie_off = SIZE_MAX;
	struct cie cie;

	while (size - off >= 8) {
		uint32_t len = ivm_le32(bytes + off);
		uint32_t id;
		size_t content = off + 4;
		struct ivm_cursor c;
		uint64_t pc;

		/* A zero length terminates; 64-bit lengths are not ours. */
		if (!len || len == 0xffffffffu || len > size - content ||
		    len < 4)
			break;
		id = ivm_le32(bytes + content);
		off = content + len;
		if (!id)
			continue;	/* a CIE */
		if (id > content)
			continue;
		if (content - id != cie_off) {
			size_t at = content - id, clen;
			struct ivm_error *err;

			if (size - at < 8)
				continue;
			clen = ivm_le32(bytes + at);
			if (clen < 4 || clen > size - at - 4)
				continue;
			err = parse_cie(bytes + at + 4, clen, vaddr + at + 4,
					&cie);
			if (err) {
				ivm_error_destroy(err);
				cie_off = SIZE_MAX;
				continue;
			}
			cie_off = at;
		}
		ivm_cursor_init(&c, bytes + content + 4, len - 4);
		if (!get_pointer(&c, cie.fde_enc, vaddr + content + 4,
				 bytes + content + 4, false, &pc))
			continue;
		if (nr == cap) {
			size_t ncap = cap ? 2 * cap : 256;
			struct index_entry *n;

			if (ncap > IVM_UELF_MAX_FDES)
				break;
			n = realloc(entries, ncap * sizeof(*n));
			if (!n) {
				free(entries);
				return &ivm_enomem;
			}
			entries = n;
			cap = ncap;
		}
		entries[nr].pc = pc;
		entries[nr].fde = vaddr + content - 4;
		nr++;
	}
	if (!nr) {
		free(entries);
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no FDE in .eh_frame");
	}
	qsort(entries, nr, sizeof(*entries), cmp_entry);
	ix = calloc(1, sizeof(*ix));
	if (ix) {
		ix->pcs = malloc(nr * sizeof(*ix->pcs));
		ix->fdes = malloc(nr * sizeof(*ix->fdes));
	}
	if (!ix || !ix->pcs || !ix->fdes) {
		ivm_ucfi_index_destroy(ix);
		free(entries);
		return &ivm_enomem;
	}
	for (i = 0; i < nr; i++) {
		ix->pcs[i] = entries[i].pc;
		ix->fdes[i] = entries[i].fde;
	}
	ix->nr = nr;
	free(entries);
	*ret = ix;
	return NULL;
}

void ivm_ucfi_index_destroy(struct ivm_ucfi_index *ix)
{
	if (!ix)
		return;
	free(ix->pcs);
	free(ix->fdes);
	free(ix);
}

struct ivm_error *ivm_ucfi_index_find(const struct ivm_ucfi_index *ix,
				      uint64_t pc, uint64_t *ret)
{
	size_t lo = 0, hi = ix->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix->pcs[mid] <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"pc %#llx precedes the CFI",
					(unsigned long long)pc);
	*ret = ix->fdes[lo - 1];
	return NULL;
}
