// SPDX-License-Identifier: MIT
/*
 * Fuzz target: finding a vCPU's TCG state in QEMU memory (tcg_env.h).  The
 * memory scanned is QEMU's, but what it holds next to the registers is
 * anything the guest put in registers and QEMU copied around.  The input is
 * a header of register values (the exact dump: 17 GPRs and RIP, CR0, CR2,
 * CR3, CR4, FS and GS bases, then six 16-bit selectors) and then the memory
 * window.  Every match must lie inside the window, and decoding it must give
 * back the dump's registers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access/tcg_env.h"

#define HEADER (23 * 8 + 6 * 2)
#define BASE 0x7f1200000000ull

struct ctx {
	const uint8_t *win;
	size_t len;
	const struct ivm_qemu_cpu_regs *dump;
};

static uint64_t take64(const uint8_t **p)
{
	uint64_t v;

	memcpy(&v, *p, 8);
	*p += 8;
	return v;
}

static uint16_t take16(const uint8_t **p)
{
	uint16_t v;

	memcpy(&v, *p, 2);
	*p += 2;
	return v;
}

static bool check(uint64_t anchor, void *arg)
{
	const struct ctx *c = arg;
	const struct ivm_x86_regs *d = &c->dump->regs;
	struct ivm_tcg_env_layout l;
	struct ivm_qemu_cpu_regs out;
	uint64_t at;
	size_t off;

	if (anchor < BASE || anchor - BASE >= c->len || (anchor & 7))
		abort();
	if (!ivm_tcg_env_verify(c->win, c->len, BASE, anchor, c->dump, &at,
				&l))
		return true;
	if (at < BASE || l.seg_off < 144 ||
	    l.seg_off > IVM_TCG_ENV_MAX_SEG_OFF ||
	    l.cr_off < l.seg_off + 6 * 24 ||
	    l.cr_off > IVM_TCG_ENV_MAX_CR_OFF ||
	    at + l.cr_off != anchor)
		abort();
	off = (size_t)(at - BASE);
	if (off + ivm_tcg_env_span(&l) > c->len)
		abort();
	ivm_tcg_env_decode(c->win + off, &l, &out);
	if (out.regs.rax != d->rax || out.regs.r15 != d->r15 ||
	    out.regs.rsp != d->rsp || out.regs.rip != d->rip ||
	    out.regs.cs != d->cs || out.regs.gs != d->gs ||
	    out.regs.fs_base != d->fs_base ||
	    out.regs.gs_base != d->gs_base || out.regs.cr0 != d->cr0 ||
	    out.regs.cr2 != d->cr2 || out.regs.cr3 != d->cr3 ||
	    out.regs.cr4 != d->cr4 || out.cpl != (d->cs & 3))
		abort();
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_qemu_cpu_regs dump;
	struct ivm_x86_regs *r = &dump.regs;
	const uint8_t *p = data;
	struct ctx c;

	if (size < HEADER)
		return 0;
	memset(&dump, 0, sizeof(dump));
	r->rax = take64(&p);
	r->rcx = take64(&p);
	r->rdx = take64(&p);
	r->rbx = take64(&p);
	r->rsp = take64(&p);
	r->rbp = take64(&p);
	r->rsi = take64(&p);
	r->rdi = take64(&p);
	r->r8 = take64(&p);
	r->r9 = take64(&p);
	r->r10 = take64(&p);
	r->r11 = take64(&p);
	r->r12 = take64(&p);
	r->r13 = take64(&p);
	r->r14 = take64(&p);
	r->r15 = take64(&p);
	r->rip = take64(&p);
	r->cr0 = take64(&p);
	r->cr2 = take64(&p);
	r->cr3 = take64(&p);
	r->cr4 = take64(&p);
	r->fs_base = take64(&p);
	r->gs_base = take64(&p);
	r->es = take16(&p);
	r->cs = take16(&p);
	r->ss = take16(&p);
	r->ds = take16(&p);
	r->fs = take16(&p);
	r->gs = take16(&p);
	r->valid = IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
		   IVM_X86_REGS_FS_GS_BASE | IVM_X86_REGS_CRS;
	dump.long_mode = true;
	dump.cpl = r->cs & 3;

	c.win = p;
	c.len = size - HEADER;
	c.dump = &dump;
	ivm_tcg_env_anchors(c.win, c.len, BASE, r->cr0, r->cr4, check, &c);
	/* Any anchor the caller makes up, too: in, out, misaligned. */
	if (c.len >= 8) {
		struct ivm_tcg_env_layout l;
		uint64_t at;

		ivm_tcg_env_verify(c.win, c.len, BASE, BASE + (r->rip % c.len),
				   &dump, &at, &l);
		ivm_tcg_env_verify(c.win, c.len, BASE, r->rsp, &dump, &at, &l);
	}
	return 0;
}
