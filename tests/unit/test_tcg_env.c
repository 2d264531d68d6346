// SPDX-License-Identifier: MIT
/*
 * Finding QEMU's TCG vCPU state by its contents.  The register values are a
 * real QEMU 7.2 `info registers -a` (transcripts/session.json); the state is
 * laid out around them as QEMU 7.2 does (segments at 184, cr[] at 424 from
 * regs[0]) and, to show nothing depends on those numbers, at other offsets.
 * The live check against a real QEMU is `idlevm regs` in t_44_regs.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "access/qemu_registers.h"
#include "access/tcg_env.h"
#include "test_qmp_fake.h"

#define BUF_SIZE 16384
#define BASE 0x7f0000100000ull	/* host address the buffer stands for */

static struct ivm_qemu_registers *dump;

static void load_dump(void)
{
	char *text = fake_recorded_hmp("session.json", "info registers -a", -1);
	struct ivm_error *err;

	err = ivm_qemu_parse_registers(text, strlen(text), &dump);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_geq(dump->nr, 2);
	free(text);
}

static void unload_dump(void)
{
	free(dump);
}

TestSuite(tcg_env, .init = load_dump, .fini = unload_dump);

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* Lay r out as an env at buf + at, with the given offsets. */
static void build_env(uint8_t *buf, size_t at, const struct ivm_x86_regs *r,
		      size_t seg_off, size_t cr_off)
{
	const uint64_t gprs[17] = {
		r->rax, r->rcx, r->rdx, r->rbx, r->rsp, r->rbp, r->rsi, r->rdi,
		r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15,
		r->rip,
	};
	const uint16_t sel[6] = { r->es, r->cs, r->ss, r->ds, r->fs, r->gs };
	uint8_t *env = buf + at;
	size_t i;

	for (i = 0; i < 17; i++)
		put64(env + i * 8, gprs[i]);
	put64(env + 17 * 8, r->rflags & 0x700);	/* lazy flags: not all */
	for (i = 0; i < 6; i++) {
		put32(env + seg_off + i * 24, sel[i]);
		put32(env + seg_off + i * 24 + 16, 0xffffffff);
		put32(env + seg_off + i * 24 + 20, 0xa09b00);
	}
	put64(env + seg_off + 4 * 24 + 8, r->fs_base);
	put64(env + seg_off + 5 * 24 + 8, r->gs_base);
	put64(env + cr_off, r->cr0);
	put64(env + cr_off + 8, 0);
	put64(env + cr_off + 16, r->cr2);
	put64(env + cr_off + 24, r->cr3);
	put64(env + cr_off + 32, r->cr4);
}

struct found {
	uint64_t addr[16];
	size_t nr;
};

static bool collect(uint64_t addr, void *arg)
{
	struct found *f = arg;

	if (f->nr < 16)
		f->addr[f->nr++] = addr;
	return true;
}

static uint8_t *filled_buffer(void)
{
	uint8_t *buf = malloc(BUF_SIZE);
	size_t i;

	cr_assert_not_null(buf);
	/* Heap-like noise that is no register value. */
	for (i = 0; i < BUF_SIZE; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	return buf;
}

Test(tcg_env, qemu72_layout_found_and_decoded)
{
	const struct ivm_qemu_cpu_regs *c = &dump->cpu[0];
	uint8_t *buf = filled_buffer();
	struct ivm_tcg_env_layout l = { 0 };
	struct ivm_qemu_cpu_regs out;
	struct found f = { .nr = 0 };
	uint64_t at = 0;

	build_env(buf, 4096, &c->regs, 184, 424);
	cr_assert(ivm_tcg_env_anchors(buf, BUF_SIZE, BASE, c->regs.cr0,
				      c->regs.cr4, collect, &f));
	cr_assert_eq(f.nr, 1);
	cr_assert_eq(f.addr[0], BASE + 4096 + 424);
	cr_assert(ivm_tcg_env_verify(buf, BUF_SIZE, BASE, f.addr[0], c, &at,
				     &l));
	cr_expect_eq(at, BASE + 4096);
	cr_expect_eq(l.seg_off, 184);
	cr_expect_eq(l.cr_off, 424);
	cr_expect_eq(ivm_tcg_env_span(&l), 464);

	ivm_tcg_env_decode(buf + 4096, &l, &out);
	cr_expect_eq(out.regs.rip, c->regs.rip);
	cr_expect_eq(out.regs.rsp, c->regs.rsp);
	cr_expect_eq(out.regs.rbp, c->regs.rbp);
	cr_expect_eq(out.regs.rcx, c->regs.rcx);
	cr_expect_eq(out.regs.r15, c->regs.r15);
	cr_expect_eq(out.regs.cs, c->regs.cs);
	cr_expect_eq(out.regs.gs_base, c->regs.gs_base);
	cr_expect_eq(out.regs.cr3, c->regs.cr3);
	cr_expect_eq(out.cpl, c->cpl);
	cr_expect(out.long_mode);
	cr_expect_not(out.halted);
	cr_expect_eq(out.regs.valid & IVM_X86_REGS_GPRS, IVM_X86_REGS_GPRS);
	free(buf);
}

Test(tcg_env, other_layouts_and_every_vcpu)
{
	static const size_t layouts[][2] = { { 144, 288 }, { 200, 600 },
					     { 1000, 2000 } };
	uint8_t *buf = NULL;
	size_t k, i;

	for (k = 0; k < 3; k++) {
		free(buf);
		buf = filled_buffer();
		for (i = 0; i < dump->nr && i < 2; i++) {
			const struct ivm_qemu_cpu_regs *c = &dump->cpu[i];
			size_t at = 512 + i * 6144;
			struct ivm_tcg_env_layout l;
			uint64_t found;

			build_env(buf, at, &c->regs, layouts[k][0],
				  layouts[k][1]);
			cr_assert(ivm_tcg_env_verify(buf, BUF_SIZE, BASE,
						     BASE + at + layouts[k][1],
						     c, &found, &l),
				  "layout %zu vCPU %zu", k, i);
			cr_expect_eq(found, BASE + at);
			cr_expect_eq(l.seg_off, layouts[k][0]);
			cr_expect_eq(l.cr_off, layouts[k][1]);
		}
		/* vCPU 0's registers do not match vCPU 1's state. */
		if (dump->cpu[0].regs.rsp != dump->cpu[1].regs.rsp) {
			struct ivm_tcg_env_layout l;
			uint64_t found;

			cr_expect_not(ivm_tcg_env_verify(
				buf, BUF_SIZE, BASE,
				BASE + 512 + 6144 + layouts[k][1],
				&dump->cpu[0], &found, &l));
		}
	}
	free(buf);
}

Test(tcg_env, one_wrong_field_is_no_match)
{
	const struct ivm_qemu_cpu_regs *c = &dump->cpu[0];
	uint8_t *buf = filled_buffer();
	struct ivm_tcg_env_layout l;
	uint64_t at, anchor = BASE + 2048 + 424;
	/* Byte offsets from regs[0] of: RSP, RIP, CS, GS base, CR3, CR2. */
	static const size_t fields[] = { 4 * 8, 16 * 8, 184 + 24,
					 184 + 5 * 24 + 8, 424 + 24,
					 424 + 16 };
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		build_env(buf, 2048, &c->regs, 184, 424);
		cr_assert(ivm_tcg_env_verify(buf, BUF_SIZE, BASE, anchor, c,
					     &at, &l));
		buf[2048 + fields[i]] ^= 0x40;
		cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE, anchor,
						 c, &at, &l),
			      "field at %zu changed, still matched",
			      fields[i]);
	}
	free(buf);
}

Test(tcg_env, gprs_without_the_rest_is_no_match)
{
	const struct ivm_qemu_cpu_regs *c = &dump->cpu[0];
	uint8_t *buf = filled_buffer();
	struct ivm_tcg_env_layout l;
	uint64_t at;

	/* A copy of the register block and CRs, but no segments. */
	build_env(buf, 2048, &c->regs, 184, 424);
	memset(buf + 2048 + 184, 0x5a, 6 * 24);
	cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE,
					 BASE + 2048 + 424, c, &at, &l));
	free(buf);
}

Test(tcg_env, windows_too_short_or_anchor_outside)
{
	const struct ivm_qemu_cpu_regs *c = &dump->cpu[0];
	uint8_t *buf = filled_buffer();
	struct ivm_tcg_env_layout l;
	struct found f = { .nr = 0 };
	uint64_t at;

	build_env(buf, 0, &c->regs, 184, 424);
	/* The window ends inside cr[]. */
	cr_expect_not(ivm_tcg_env_verify(buf, 424 + 32, BASE, BASE + 424, c,
					 &at, &l));
	/* Anchors outside the window, or misaligned. */
	cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE, BASE - 8, c,
					 &at, &l));
	cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE,
					 BASE + BUF_SIZE, c, &at, &l));
	cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE, BASE + 425, c,
					 &at, &l));
	/* The window starts after regs[0]: not enough of env to match. */
	cr_expect_not(ivm_tcg_env_verify(buf + 8, BUF_SIZE - 8, BASE + 8,
					 BASE + 424, c, &at, &l));
	/* Tiny and empty buffers, an unaligned base. */
	cr_expect(ivm_tcg_env_anchors(buf, 39, BASE, c->regs.cr0, c->regs.cr4,
				      collect, &f));
	cr_expect(ivm_tcg_env_anchors(buf, 0, BASE, c->regs.cr0, c->regs.cr4,
				      collect, &f));
	cr_expect_eq(f.nr, 0);
	cr_expect(ivm_tcg_env_anchors(buf + 4, BUF_SIZE - 4, BASE + 4,
				      c->regs.cr0, c->regs.cr4, collect, &f));
	cr_expect_eq(f.nr, 1);
	cr_expect_eq(f.addr[0], BASE + 424);
	free(buf);
}

Test(tcg_env, dump_without_long_mode_or_crs_never_matches)
{
	struct ivm_qemu_cpu_regs c = dump->cpu[0];
	uint8_t *buf = filled_buffer();
	struct ivm_tcg_env_layout l;
	uint64_t at;

	build_env(buf, 1024, &c.regs, 184, 424);
	c.long_mode = false;
	cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE,
					 BASE + 1024 + 424, &c, &at, &l));
	c.long_mode = true;
	c.regs.valid &= ~(uint32_t)IVM_X86_REGS_CRS;
	cr_expect_not(ivm_tcg_env_verify(buf, BUF_SIZE, BASE,
					 BASE + 1024 + 424, &c, &at, &l));
	free(buf);
}

static bool stop_at_first(uint64_t addr, void *arg)
{
	(void)addr;
	(*(int *)arg)++;
	return false;
}

Test(tcg_env, anchor_callback_can_stop)
{
	const struct ivm_qemu_cpu_regs *c = &dump->cpu[0];
	uint8_t *buf = filled_buffer();
	int calls = 0;

	build_env(buf, 0, &c->regs, 184, 424);
	build_env(buf, 8192, &c->regs, 184, 424);
	cr_expect_not(ivm_tcg_env_anchors(buf, BUF_SIZE, BASE, c->regs.cr0,
					  c->regs.cr4, stop_at_first, &calls));
	cr_expect_eq(calls, 1);
	free(buf);
}
