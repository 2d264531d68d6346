// SPDX-License-Identifier: MIT
/*
 * Locating and reading QEMU's per-vCPU TCG state; see tcg_env.h for why and
 * for the method.  The matching is pure (byte buffers in, offsets out) so
 * that tests and the fuzz target drive it without a QEMU; locate() does the
 * I/O: /proc/PID/maps, process_vm_readv, the monitor.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/proc_maps.h"
#include "access/qemu_discovery.h"
#include "access/tcg_env.h"

/*
 * QEMU's x86 env: target_ulong regs[16]; eip; eflags; ...  It is in QEMU's
 * (the host's) byte order; the hosts idlevm runs on are little-endian.
 */
#define NR_GPRS 16
#define EIP_OFF (NR_GPRS * 8)
#define EFLAGS_OFF (EIP_OFF + 8)
#define GPR_BLOCK (EIP_OFF + 8)		/* regs[] and eip are matched */
/* SegmentCache: uint32_t selector; target_ulong base; uint32_t limit, flags */
#define SEG_SIZE 24
#define SEG_BASE 8
#define NR_SEGS 6			/* ES CS SS DS FS GS */
#define CR_BYTES (5 * 8)		/* cr[0..4] */

/* Scanning: chunk size, and the most anchors worth a second look. */
#define SCAN_CHUNK (1u << 20)
#define MAX_ANCHORS 4096
/* QEMU's private memory beyond this is not scanned (guest RAM excluded). */
#define MAX_SCAN_BYTES (2ull << 30)
#define MAX_CR_PAIRS 4

bool ivm_tcg_env_anchors(const uint8_t *buf, size_t len, uint64_t base,
			 uint64_t cr0, uint64_t cr4,
			 bool (*found)(uint64_t addr, void *arg), void *arg)
{
	size_t off = (size_t)((8 - (base & 7)) & 7);

	for (; len >= CR_BYTES && off <= len - CR_BYTES; off += 8) {
		if (ivm_le64(buf + off) != cr0 || ivm_le64(buf + off + 32) != cr4 ||
		    ivm_le64(buf + off + 8) != 0)
			continue;
		if (!found(base + off, arg))
			return false;
	}
	return true;
}

/*
 * QEMU's order of regs[]: RAX RCX RDX RBX RSP RBP RSI RDI R8..R15, then eip
 * right after them; matching and decoding both go by this one table.
 */
static const size_t gpr_field[NR_GPRS + 1] = {
	offsetof(struct ivm_x86_regs, rax), offsetof(struct ivm_x86_regs, rcx),
	offsetof(struct ivm_x86_regs, rdx), offsetof(struct ivm_x86_regs, rbx),
	offsetof(struct ivm_x86_regs, rsp), offsetof(struct ivm_x86_regs, rbp),
	offsetof(struct ivm_x86_regs, rsi), offsetof(struct ivm_x86_regs, rdi),
	offsetof(struct ivm_x86_regs, r8), offsetof(struct ivm_x86_regs, r9),
	offsetof(struct ivm_x86_regs, r10), offsetof(struct ivm_x86_regs, r11),
	offsetof(struct ivm_x86_regs, r12), offsetof(struct ivm_x86_regs, r13),
	offsetof(struct ivm_x86_regs, r14), offsetof(struct ivm_x86_regs, r15),
	offsetof(struct ivm_x86_regs, rip),
};

static uint64_t *gpr(struct ivm_x86_regs *r, size_t i)
{
	return (uint64_t *)((char *)r + gpr_field[i]);
}

static uint64_t gpr_of(const struct ivm_x86_regs *r, size_t i)
{
	return *(const uint64_t *)((const char *)r + gpr_field[i]);
}

static bool segs_match(const uint8_t *p, const struct ivm_x86_regs *r)
{
	const uint16_t sel[NR_SEGS] = { r->es, r->cs, r->ss, r->ds, r->fs, r->gs };
	size_t i;

	for (i = 0; i < NR_SEGS; i++) {
		if (ivm_le32(p + i * SEG_SIZE) != sel[i])
			return false;
	}
	return ivm_le64(p + 4 * SEG_SIZE + SEG_BASE) == r->fs_base &&
	       ivm_le64(p + 5 * SEG_SIZE + SEG_BASE) == r->gs_base;
}

bool ivm_tcg_env_verify(const uint8_t *win, size_t len, uint64_t base,
			uint64_t anchor, const struct ivm_qemu_cpu_regs *r,
			uint64_t *regs_addr, struct ivm_tcg_env_layout *layout)
{
	const uint32_t need = IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
			      IVM_X86_REGS_FS_GS_BASE | IVM_X86_REGS_CRS;
	uint64_t lo;
	size_t a, o, s;

	if (!r->long_mode || (r->regs.valid & need) != need ||
	    anchor < base || (anchor & 7) || anchor - base > len ||
	    len - (anchor - base) < CR_BYTES)
		return false;
	a = (size_t)(anchor - base);
	if (ivm_le64(win + a) != r->regs.cr0 || ivm_le64(win + a + 8) != 0 ||
	    ivm_le64(win + a + 16) != r->regs.cr2 ||
	    ivm_le64(win + a + 24) != r->regs.cr3 ||
	    ivm_le64(win + a + 32) != r->regs.cr4)
		return false;
	/* regs[0] lies before the segments, which lie before cr[0]. */
	lo = a > IVM_TCG_ENV_MAX_CR_OFF ? a - IVM_TCG_ENV_MAX_CR_OFF : 0;
	lo = (lo + 7) & ~7ull;
	for (o = (size_t)lo; o + GPR_BLOCK + NR_SEGS * SEG_SIZE <= a; o += 8) {
		size_t i;

		for (i = 0; i <= NR_GPRS; i++) {
			if (ivm_le64(win + o + i * 8) != gpr_of(&r->regs, i))
				break;
		}
		if (i <= NR_GPRS)
			continue;
		for (s = o + EFLAGS_OFF + 8;
		     s + NR_SEGS * SEG_SIZE <= a &&
		     s - o <= IVM_TCG_ENV_MAX_SEG_OFF;
		     s += 8) {
			if (!segs_match(win + s, &r->regs))
				continue;
			*regs_addr = base + o;
			layout->seg_off = s - o;
			layout->cr_off = a - o;
			return true;
		}
	}
	return false;
}

void ivm_tcg_env_decode(const uint8_t *span,
			const struct ivm_tcg_env_layout *l,
			struct ivm_qemu_cpu_regs *out)
{
	struct ivm_x86_regs *r = &out->regs;
	const uint8_t *seg = span + l->seg_off, *cr = span + l->cr_off;
	size_t i;

	memset(out, 0, sizeof(*out));
	out->cpu_index = -1;
	out->long_mode = true;
	for (i = 0; i <= NR_GPRS; i++)		/* eip is regs[NR_GPRS] */
		*gpr(r, i) = ivm_le64(span + i * 8);
	/* The arithmetic flags live lazily in cc_*; IF, DF, AC... are here. */
	r->rflags = ivm_le64(span + EFLAGS_OFF);
	r->es = (uint16_t)ivm_le32(seg + 0 * SEG_SIZE);
	r->cs = (uint16_t)ivm_le32(seg + 1 * SEG_SIZE);
	r->ss = (uint16_t)ivm_le32(seg + 2 * SEG_SIZE);
	r->ds = (uint16_t)ivm_le32(seg + 3 * SEG_SIZE);
	r->fs = (uint16_t)ivm_le32(seg + 4 * SEG_SIZE);
	r->gs = (uint16_t)ivm_le32(seg + 5 * SEG_SIZE);
	r->fs_base = ivm_le64(seg + 4 * SEG_SIZE + SEG_BASE);
	r->gs_base = ivm_le64(seg + 5 * SEG_SIZE + SEG_BASE);
	r->cr0 = ivm_le64(cr);
	r->cr2 = ivm_le64(cr + 16);
	r->cr3 = ivm_le64(cr + 24);
	r->cr4 = ivm_le64(cr + 32);
	r->valid = IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
		   IVM_X86_REGS_FS_GS_BASE | IVM_X86_REGS_CRS;
	out->cpl = r->cs & 3;
}

/* ---- locating, in the QEMU process ------------------------------------ */

struct located {
	int cpu_index;
	uint64_t regs_addr;
};

struct ivm_tcg_env {
	pid_t pid;
	struct ivm_tcg_env_layout layout;
	uint64_t pause_ns;
	size_t nr;
	struct located vcpu[];
};

struct range {
	uint64_t lo, hi;
};

struct anchor {
	uint64_t addr;
	uint64_t map_lo;	/* start of its mapping: windows stop there */
};

struct scan {
	pid_t pid;
	struct anchor *anchors;
	size_t nr_anchors;
	bool too_many;
	uint64_t map_lo;
};

static struct ivm_error *read_remote(pid_t pid, uint64_t addr, void *buf,
				     size_t len, size_t *got)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0) {
		if (errno == ESRCH)
			return ivm_error_create(IVM_ERROR_GONE,
						"qemu process exited (pid %d)",
						(int)pid);
		if (errno == EFAULT) {
			*got = 0;
			return NULL;
		}
		return ivm_error_os(errno, "process_vm_readv on qemu process %d",
				    (int)pid);
	}
	*got = (size_t)n;
	return NULL;
}

static bool add_anchor(uint64_t addr, void *arg)
{
	struct scan *sc = arg;
	size_t i;

	for (i = 0; i < sc->nr_anchors; i++) {
		if (sc->anchors[i].addr == addr)
			return true;	/* seen in the chunk overlap */
	}
	if (sc->nr_anchors == MAX_ANCHORS) {
		sc->too_many = true;
		return false;
	}
	sc->anchors[sc->nr_anchors].addr = addr;
	sc->anchors[sc->nr_anchors].map_lo = sc->map_lo;
	sc->nr_anchors++;
	return true;
}

static bool overlaps(const struct range *r, const struct ivm_qemu_ram *ram)
{
	size_t i;

	for (i = 0; i < ram->nr; i++) {
		uint64_t lo = ram->region[i].hva, hi = lo + ram->region[i].size;

		if (r->lo < hi && lo < r->hi)
			return true;
	}
	return false;
}

struct private_search {
	const struct ivm_qemu_ram *ram;
	struct range *out;
	size_t nr, cap;
	uint64_t total;
	bool nomem;
};

static bool add_private(const struct ivm_proc_map *m, void *arg)
{
	struct private_search *ps = arg;
	struct range r = { m->lo, m->hi };

	if (strcmp(m->perms, "rw-p") || m->inode ||
	    (m->name[0] && strcmp(m->name, "[heap]")))
		return true;
	if (overlaps(&r, ps->ram) || ps->total + (r.hi - r.lo) > MAX_SCAN_BYTES)
		return true;
	if (ps->nr == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct range *grown = reallocarray(ps->out, cap, sizeof(*grown));

		if (!grown) {
			ps->nomem = true;
			return false;
		}
		ps->out = grown;
		ps->cap = cap;
	}
	ps->out[ps->nr++] = r;
	ps->total += r.hi - r.lo;
	return true;
}

/*
 * QEMU's private writable, non-executable memory with no file behind it
 * (the heap and malloc's mappings: where QOM objects live), minus guest RAM.
 */
static struct ivm_error *private_ranges(pid_t pid,
					const struct ivm_qemu_ram *ram,
					struct range **ret, size_t *nr_ret)
{
	struct private_search ps = { .ram = ram };
	struct ivm_error *err;

	err = ivm_proc_maps_each(pid, add_private, &ps);
	if (err && err->code == IVM_ERROR_OS && err->errnum == ENOENT) {
		ivm_error_destroy(err);
		err = ivm_error_create(IVM_ERROR_GONE,
				       "qemu process exited (pid %d)", (int)pid);
	}
	if (!err && ps.nomem)
		err = &ivm_enomem;
	if (err) {
		free(ps.out);
		return err;
	}
	*ret = ps.out;
	*nr_ret = ps.nr;
	return NULL;
}

static struct ivm_error *scan_range(struct scan *sc, const struct range *r,
				    uint8_t *buf, const uint64_t (*pairs)[2],
				    size_t nr_pairs)
{
	uint64_t at = r->lo;

	sc->map_lo = r->lo;
	while (at < r->hi && !sc->too_many) {
		size_t want = SCAN_CHUNK, got, i;
		struct ivm_error *err;

		if (r->hi - at < want)
			want = (size_t)(r->hi - at);
		err = read_remote(sc->pid, at, buf, want, &got);
		if (err)
			return err;
		for (i = 0; i < nr_pairs; i++)
			ivm_tcg_env_anchors(buf, got, at, pairs[i][0],
					    pairs[i][1], add_anchor, sc);
		if (got < want) {
			/* Unreadable page: go on after it. */
			at = ((at + got) | 4095) + 1;
			continue;
		}
		if (at + want >= r->hi)
			break;
		/* Overlap so an env straddling two chunks is still seen. */
		at += want - CR_BYTES;
	}
	return NULL;
}

static struct ivm_error *find_anchors(pid_t pid, struct ivm_qmp *qmp,
				      struct scan *sc)
{
	struct ivm_qemu_registers *dump = NULL;
	struct ivm_qemu_ram *ram = NULL;
	struct range *ranges = NULL;
	uint64_t pairs[MAX_CR_PAIRS][2];
	size_t nr_ranges = 0, nr_pairs = 0, i, j;
	uint8_t *buf = NULL;
	struct ivm_error *err;

	err = ivm_qemu_registers_all(qmp, &dump);
	if (err)
		return err;
	for (i = 0; i < dump->nr; i++) {
		const struct ivm_x86_regs *r = &dump->cpu[i].regs;

		if (!(r->valid & IVM_X86_REGS_CRS) || !dump->cpu[i].long_mode) {
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "vCPU %d is not in long mode with known control registers",
					       dump->cpu[i].cpu_index);
			goto out;
		}
		for (j = 0; j < nr_pairs; j++) {
			if (pairs[j][0] == r->cr0 && pairs[j][1] == r->cr4)
				break;
		}
		if (j < nr_pairs)
			continue;
		if (nr_pairs == MAX_CR_PAIRS) {
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "vCPUs disagree on CR0/CR4");
			goto out;
		}
		pairs[nr_pairs][0] = r->cr0;
		pairs[nr_pairs][1] = r->cr4;
		nr_pairs++;
	}
	err = ivm_qemu_ram_regions(qmp, &ram);
	if (err)
		goto out;
	err = private_ranges(pid, ram, &ranges, &nr_ranges);
	if (err)
		goto out;
	buf = malloc(SCAN_CHUNK);
	sc->anchors = calloc(MAX_ANCHORS, sizeof(*sc->anchors));
	if (!buf || !sc->anchors) {
		err = &ivm_enomem;
		goto out;
	}
	for (i = 0; i < nr_ranges && !err && !sc->too_many; i++)
		err = scan_range(sc, &ranges[i], buf,
				 (const uint64_t (*)[2])pairs, nr_pairs);
	if (!err && sc->too_many)
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "more than %d places look like a vCPU's control registers",
				       MAX_ANCHORS);
out:
	free(buf);
	free(ranges);
	free(ram);
	free(dump);
	return err;
}

/* Match every vCPU of an exact dump against the anchors (guest paused). */
static struct ivm_error *match_paused(struct ivm_tcg_env *env,
				      const struct ivm_qemu_registers *dump,
				      const struct scan *sc)
{
	const size_t win_max = IVM_TCG_ENV_MAX_CR_OFF + CR_BYTES;
	uint8_t *win = malloc(win_max);
	size_t *hits = calloc(dump->nr, sizeof(*hits));
	struct ivm_error *err = NULL;
	bool have_layout = false;
	size_t a, i;

	if (!win || !hits) {
		err = &ivm_enomem;
		goto out;
	}
	for (i = 0; i < dump->nr; i++)
		env->vcpu[i].cpu_index = dump->cpu[i].cpu_index;
	for (a = 0; a < sc->nr_anchors && !err; a++) {
		uint64_t lo = sc->anchors[a].addr, end;
		size_t got;

		lo = lo - sc->anchors[a].map_lo > IVM_TCG_ENV_MAX_CR_OFF ?
		     lo - IVM_TCG_ENV_MAX_CR_OFF : sc->anchors[a].map_lo;
		end = sc->anchors[a].addr + CR_BYTES;
		err = read_remote(sc->pid, lo, win, (size_t)(end - lo), &got);
		if (err || got != end - lo)
			continue;
		for (i = 0; i < dump->nr; i++) {
			struct ivm_tcg_env_layout l;
			uint64_t at;

			if (!ivm_tcg_env_verify(win, got, lo,
						sc->anchors[a].addr,
						&dump->cpu[i], &at, &l))
				continue;
			if (have_layout && (l.seg_off != env->layout.seg_off ||
					    l.cr_off != env->layout.cr_off)) {
				err = ivm_error_create(IVM_ERROR_NOT_FOUND,
						       "vCPU states found at different layouts");
				break;
			}
			env->layout = l;
			have_layout = true;
			env->vcpu[i].regs_addr = at;
			hits[i]++;
		}
	}
	for (i = 0; i < dump->nr && !err; i++) {
		if (hits[i] != 1)
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "%s state for vCPU %d in qemu's memory",
					       hits[i] ? "more than one" : "no",
					       dump->cpu[i].cpu_index);
	}
out:
	free(win);
	free(hits);
	return err;
}

struct ivm_error *ivm_tcg_env_locate(pid_t pid, struct ivm_qmp *qmp,
				     struct ivm_tcg_env **ret)
{
	struct scan sc = { .pid = pid };
	struct ivm_qemu_registers *dump = NULL;
	struct ivm_tcg_env *env = NULL;
	enum ivm_qmp_lifecycle state;
	struct ivm_error *err, *cerr;
	bool stopped = false;
	uint64_t t0;

	err = find_anchors(pid, qmp, &sc);
	if (err)
		goto out;
	if (!sc.nr_anchors) {
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "no vCPU state found in qemu's memory");
		goto out;
	}
	err = ivm_qmp_query_status(qmp, &state);
	if (err)
		goto out;
	t0 = ivm_mono_ns();
	if (state == IVM_QMP_RUNNING) {
		err = ivm_qmp_stop(qmp);
		if (err)
			goto out;
		stopped = true;
	}
	err = ivm_qemu_registers_all(qmp, &dump);
	if (!err) {
		env = calloc(1, sizeof(*env) + dump->nr * sizeof(env->vcpu[0]));
		if (!env)
			err = &ivm_enomem;
	}
	if (!err) {
		env->pid = pid;
		env->nr = dump->nr;
		err = match_paused(env, dump, &sc);
	}
	if (stopped) {
		cerr = ivm_qmp_cont(qmp);
		if (cerr) {
			ivm_error_destroy(err);
			err = ivm_error_wrap(cerr, "resuming the guest");
		}
	}
	if (env)
		env->pause_ns = ivm_mono_ns() - t0;
out:
	free(sc.anchors);
	free(dump);
	if (err) {
		free(env);
		return ivm_error_wrap(err, "locating vCPU state in qemu process %d",
				      (int)pid);
	}
	*ret = env;
	return NULL;
}

void ivm_tcg_env_destroy(struct ivm_tcg_env *env)
{
	free(env);
}

uint64_t ivm_tcg_env_pause_ns(const struct ivm_tcg_env *env)
{
	return env->pause_ns;
}

/* A read can catch a vCPU between setting RIP and CS (see tcg_env.h). */
#define READ_TRIES 3
#define KERNEL_HALF 0xffff800000000000ull

struct ivm_error *ivm_tcg_env_read(const struct ivm_tcg_env *env,
				   int cpu_index,
				   struct ivm_qemu_cpu_regs *ret)
{
	uint8_t span[IVM_TCG_ENV_MAX_CR_OFF + CR_BYTES];
	size_t want = ivm_tcg_env_span(&env->layout), got, i;
	struct ivm_error *err;
	int tries;

	for (i = 0; i < env->nr; i++) {
		if (env->vcpu[i].cpu_index == cpu_index)
			break;
	}
	if (i == env->nr)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no state located for vCPU %d",
					cpu_index);
	for (tries = 0; tries < READ_TRIES; tries++) {
		err = read_remote(env->pid, env->vcpu[i].regs_addr, span,
				  want, &got);
		if (err)
			return err;
		/* QEMU alive, its vCPU object not: unplugged. */
		if (got != want)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"vCPU %d state no longer readable in qemu process %d",
						cpu_index, (int)env->pid);
		ivm_tcg_env_decode(span, &env->layout, ret);
		ret->cpu_index = cpu_index;
		if ((ret->regs.rip >= KERNEL_HALF) == (ret->cpl == 0))
			return NULL;
	}
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"vCPU %d: RIP and CPL disagree in %d reads (mode switch)",
				cpu_index, READ_TRIES);
}
