// SPDX-License-Identifier: MIT
/*
 * `info registers` parser.  QEMU lays the dump out as "NAME=value" tokens,
 * some names padded with a space before the '=' ("R8 =", "CS ="), segment
 * lines carrying base, limit and flags after the selector, and a "CPU#N"
 * line before each vCPU.  The parser walks tokens in place; it knows the
 * fields idlevm needs and skips everything else (FPU, XMM, DR...), so a
 * newer QEMU that adds fields still parses.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hexnum.h"
#include "access/qemu_registers.h"

/* A vCPU index above this is not one QEMU would print. */
#define MAX_CPU_INDEX (1 << 20)
/* Characters of hostile text quoted in an error message. */
#define QUOTE_MAX 48

enum field_kind {
	F_GPR64,	/* 64-bit layout general register, counts toward GPRS */
	F_GPR32,	/* 32-bit layout (EAX=...), zero-extended */
	F_SEG,		/* selector, then base */
	F_CR,
	F_EFER,
	F_CPL,
	F_HLT,
};

struct field {
	const char *name;
	enum field_kind kind;
	size_t offset;		/* of the uint64_t (or selector) in the regs */
	size_t base_offset;	/* F_SEG: fs_base/gs_base, or 0 */
};

#define R(f) offsetof(struct ivm_x86_regs, f)

static const struct field fields[] = {
	{ "RAX", F_GPR64, R(rax), 0 }, { "RBX", F_GPR64, R(rbx), 0 },
	{ "RCX", F_GPR64, R(rcx), 0 }, { "RDX", F_GPR64, R(rdx), 0 },
	{ "RSI", F_GPR64, R(rsi), 0 }, { "RDI", F_GPR64, R(rdi), 0 },
	{ "RBP", F_GPR64, R(rbp), 0 }, { "RSP", F_GPR64, R(rsp), 0 },
	{ "R8", F_GPR64, R(r8), 0 }, { "R9", F_GPR64, R(r9), 0 },
	{ "R10", F_GPR64, R(r10), 0 }, { "R11", F_GPR64, R(r11), 0 },
	{ "R12", F_GPR64, R(r12), 0 }, { "R13", F_GPR64, R(r13), 0 },
	{ "R14", F_GPR64, R(r14), 0 }, { "R15", F_GPR64, R(r15), 0 },
	{ "RIP", F_GPR64, R(rip), 0 }, { "RFL", F_GPR64, R(rflags), 0 },
	{ "EAX", F_GPR32, R(rax), 0 }, { "EBX", F_GPR32, R(rbx), 0 },
	{ "ECX", F_GPR32, R(rcx), 0 }, { "EDX", F_GPR32, R(rdx), 0 },
	{ "ESI", F_GPR32, R(rsi), 0 }, { "EDI", F_GPR32, R(rdi), 0 },
	{ "EBP", F_GPR32, R(rbp), 0 }, { "ESP", F_GPR32, R(rsp), 0 },
	{ "EIP", F_GPR32, R(rip), 0 }, { "EFL", F_GPR32, R(rflags), 0 },
	{ "ES", F_SEG, R(es), 0 }, { "CS", F_SEG, R(cs), 0 },
	{ "SS", F_SEG, R(ss), 0 }, { "DS", F_SEG, R(ds), 0 },
	{ "FS", F_SEG, R(fs), R(fs_base) }, { "GS", F_SEG, R(gs), R(gs_base) },
	{ "CR0", F_CR, R(cr0), 0 }, { "CR2", F_CR, R(cr2), 0 },
	{ "CR3", F_CR, R(cr3), 0 }, { "CR4", F_CR, R(cr4), 0 },
	{ "EFER", F_EFER, R(efer), 0 },
	{ "CPL", F_CPL, 0, 0 },
	{ "HLT", F_HLT, 0, 0 },
};

#define NR_FIELDS (sizeof(fields) / sizeof(fields[0]))
_Static_assert(NR_FIELDS <= 64, "seen mask is 64 bits");

/* Masks of fields[] indices making up each complete group. */
static uint64_t mask_of(enum field_kind kind)
{
	uint64_t mask = 0;
	size_t i;

	for (i = 0; i < NR_FIELDS; i++) {
		if (fields[i].kind == kind)
			mask |= 1ull << i;
	}
	return mask;
}

static size_t field_index(const char *name)
{
	size_t i;

	for (i = 0; i < NR_FIELDS; i++) {
		if (!strcmp(fields[i].name, name))
			break;
	}
	return i;
}

struct parser {
	const char *text;
	size_t len;
	struct ivm_qemu_cpu_regs *cpus;
	size_t nr, cap;
	struct ivm_qemu_cpu_regs *cur;	/* NULL until a header or a field */
	uint64_t seen;			/* fields[] seen for cur */
	uint32_t seg_bases;		/* FS, GS bases seen for cur */
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static bool is_word(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
	       (c >= 'a' && c <= 'z') || c == '#' || c == '_';
}

/* Quote hostile text for a message: printable ASCII only, bounded. */
static void quote(const char *p, size_t n, char out[QUOTE_MAX + 1])
{
	size_t i;

	if (n > QUOTE_MAX)
		n = QUOTE_MAX;
	for (i = 0; i < n && p[i] != '\n'; i++)
		out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
	out[i] = '\0';
}

/*
 * A hex number of 1..16 digits at *pos, which must end at whitespace or the
 * end of the line.  Advances *pos past it.
 */
static bool parse_hex(const char *p, size_t end, size_t *pos, uint64_t *ret)
{
	size_t i = *pos;
	uint64_t v;

	if (!ivm_hex_span(p, end, &i, &v) || (i < end && !is_space(p[i])))
		return false;
	*pos = i;
	*ret = v;
	return true;
}

static struct ivm_error *finish_cpu(struct parser *ps)
{
	struct ivm_qemu_cpu_regs *cpu = ps->cur;
	uint64_t gpr64 = mask_of(F_GPR64), segs = mask_of(F_SEG);
	uint64_t crs = mask_of(F_CR);
	uint64_t ip = (1ull << field_index("RIP")) | (1ull << field_index("EIP"));

	if (!cpu)
		return NULL;
	if (!(ps->seen & ip))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"qemu register dump: CPU#%d has no instruction pointer",
					cpu->cpu_index);
	if ((ps->seen & gpr64) == gpr64) {
		cpu->regs.valid |= IVM_X86_REGS_GPRS;
		cpu->long_mode = true;
	}
	if ((ps->seen & segs) == segs)
		cpu->regs.valid |= IVM_X86_REGS_SEGMENTS;
	if (ps->seg_bases == 3)
		cpu->regs.valid |= IVM_X86_REGS_FS_GS_BASE;
	if ((ps->seen & crs) == crs)
		cpu->regs.valid |= IVM_X86_REGS_CRS;
	if (ps->seen & mask_of(F_EFER))
		cpu->regs.valid |= IVM_X86_REGS_EFER;
	if (cpu->cpl < 0 && (cpu->regs.valid & IVM_X86_REGS_SEGMENTS))
		cpu->cpl = cpu->regs.cs & 3;
	ps->cur = NULL;
	return NULL;
}

static struct ivm_error *start_cpu(struct parser *ps, int cpu_index)
{
	struct ivm_error *err;
	size_t i;

	err = finish_cpu(ps);
	if (err)
		return err;
	for (i = 0; cpu_index >= 0 && i < ps->nr; i++) {
		if (ps->cpus[i].cpu_index == cpu_index)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"qemu register dump: CPU#%d appears twice",
						cpu_index);
	}
	if (ps->nr == IVM_QEMU_MAX_VCPUS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"qemu register dump: more than %d vCPUs",
					IVM_QEMU_MAX_VCPUS);
	if (ps->nr == ps->cap) {
		size_t ncap = ps->cap ? ps->cap * 2 : 4;
		struct ivm_qemu_cpu_regs *n;

		if (ncap > IVM_QEMU_MAX_VCPUS)
			ncap = IVM_QEMU_MAX_VCPUS;
		n = realloc(ps->cpus, ncap * sizeof(*n));
		if (!n)
			return &ivm_enomem;
		ps->cpus = n;
		ps->cap = ncap;
	}
	ps->cur = &ps->cpus[ps->nr++];
	memset(ps->cur, 0, sizeof(*ps->cur));
	ps->cur->cpu_index = cpu_index;
	ps->cur->cpl = -1;
	ps->seen = 0;
	ps->seg_bases = 0;
	return NULL;
}

/* "CPU#N" as a line's first token. */
static struct ivm_error *parse_header(struct parser *ps, size_t start,
				      size_t end)
{
	const char *p = ps->text;
	size_t i = start + 4;
	long n = 0;

	if (i >= end)
		goto bad;
	while (i < end && p[i] >= '0' && p[i] <= '9') {
		n = n * 10 + (p[i] - '0');
		if (n > MAX_CPU_INDEX)
			goto bad;
		i++;
	}
	if (i == start + 4 || (i < end && !is_space(p[i])))
		goto bad;
	return start_cpu(ps, (int)n);
bad:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"qemu register dump: bad CPU header");
}

/* Parse the value of fields[f] at *pos (just after the '='). */
static struct ivm_error *parse_field(struct parser *ps, size_t f, size_t *pos,
				     size_t end)
{
	const struct field *fd = &fields[f];
	struct ivm_qemu_cpu_regs *cpu;
	char *regs;
	uint64_t v;
	size_t i;

	if (!ps->cur) {
		/* Output without "CPU#" headers: one implicit vCPU. */
		struct ivm_error *err = start_cpu(ps, -1);

		if (err)
			return err;
	}
	cpu = ps->cur;
	regs = (char *)&cpu->regs;
	if (ps->seen & (1ull << f))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"qemu register dump: %s appears twice for CPU#%d",
					fd->name, cpu->cpu_index);
	if (!parse_hex(ps->text, end, pos, &v))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"qemu register dump: malformed %s for CPU#%d",
					fd->name, cpu->cpu_index);
	ps->seen |= 1ull << f;
	switch (fd->kind) {
	case F_GPR32:
		if (v > UINT32_MAX)
			goto range;
		/* fall through */
	case F_GPR64:
	case F_CR:
	case F_EFER:
		memcpy(regs + fd->offset, &v, sizeof(v));
		break;
	case F_SEG: {
		uint16_t sel = (uint16_t)v;

		if (v > UINT16_MAX)
			goto range;
		memcpy(regs + fd->offset, &sel, sizeof(sel));
		if (!fd->base_offset)
			break;
		i = *pos;
		while (i < end && is_space(ps->text[i]))
			i++;
		if (parse_hex(ps->text, end, &i, &v)) {
			memcpy(regs + fd->base_offset, &v, sizeof(v));
			ps->seg_bases |= fd->base_offset == R(fs_base) ? 1 : 2;
			*pos = i;
		}
		break;
	}
	case F_CPL:
		if (v > 3)
			goto range;
		cpu->cpl = (int)v;
		break;
	case F_HLT:
		if (v > 1)
			goto range;
		cpu->halted = v;
		break;
	}
	return NULL;
range:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"qemu register dump: %s out of range for CPU#%d",
				fd->name, cpu->cpu_index);
}

static struct ivm_error *parse_line(struct parser *ps, size_t start,
				    size_t end)
{
	const char *p = ps->text;
	struct ivm_error *err;
	size_t i = start;
	bool first = true;

	while (i < end) {
		size_t name, name_len, j, f;

		while (i < end && is_space(p[i]))
			i++;
		if (i >= end)
			break;
		name = i;
		while (i < end && is_word(p[i]))
			i++;
		name_len = i - name;
		if (first && name_len >= 4 && !memcmp(p + name, "CPU#", 4)) {
			err = parse_header(ps, name, end);
			if (err)
				return err;
			/* The header line holds nothing else of interest. */
			return NULL;
		}
		first = false;
		j = i;
		while (j < end && p[j] == ' ')
			j++;
		if (!name_len || j >= end || p[j] != '=') {
			/* Not a NAME=value token: skip it. */
			if (!name_len)
				i++;
			while (i < end && !is_space(p[i]))
				i++;
			continue;
		}
		i = j + 1;
		for (f = 0; f < NR_FIELDS; f++) {
			if (strlen(fields[f].name) == name_len &&
			    !memcmp(fields[f].name, p + name, name_len))
				break;
		}
		if (f == NR_FIELDS) {
			/* Unknown field: skip its value. */
			while (i < end && !is_space(p[i]))
				i++;
			continue;
		}
		err = parse_field(ps, f, &i, end);
		if (err)
			return err;
	}
	return NULL;
}

struct ivm_error *ivm_qemu_parse_registers(const char *text, size_t len,
					   struct ivm_qemu_registers **ret)
{
	struct parser ps = { .text = text, .len = len };
	struct ivm_qemu_registers *out;
	struct ivm_error *err = NULL;
	size_t start = 0, end;

	while (start < len) {
		const char *nl = memchr(text + start, '\n', len - start);

		end = nl ? (size_t)(nl - text) : len;
		err = parse_line(&ps, start, end);
		if (err)
			goto fail;
		start = end + 1;
	}
	err = finish_cpu(&ps);
	if (err)
		goto fail;
	if (!ps.nr) {
		char q[QUOTE_MAX + 1];

		start = 0;
		while (start < len && (is_space(text[start]) ||
				       text[start] == '\n'))
			start++;
		quote(text + start, len - start, q);
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "qemu register dump holds no registers: \"%s\"",
				       q);
		goto fail;
	}
	out = malloc(sizeof(*out) + ps.nr * sizeof(out->cpu[0]));
	if (!out) {
		err = &ivm_enomem;
		goto fail;
	}
	out->nr = ps.nr;
	memcpy(out->cpu, ps.cpus, ps.nr * sizeof(out->cpu[0]));
	free(ps.cpus);
	*ret = out;
	return NULL;
fail:
	free(ps.cpus);
	return err;
}

const struct ivm_qemu_cpu_regs *
ivm_qemu_registers_find(const struct ivm_qemu_registers *regs, int cpu_index)
{
	size_t i;

	for (i = 0; regs && i < regs->nr; i++) {
		if (regs->cpu[i].cpu_index == cpu_index)
			return &regs->cpu[i];
	}
	return NULL;
}
