// SPDX-License-Identifier: MIT
/*
 * bench_kunwind: how fast the guest kernel unwinder is.
 *
 *   bench_kunwind [--iterations N]
 *	synthetic memory: a 32-frame ORC call chain in a host buffer.
 *   bench_kunwind --core CORE --vmlinux VMLINUX --system-map MAP
 *		   [--slide HEX] [--print] [--iterations N]
 *	a QEMU dump-guest-memory core (physical, "paging": false): every
 *	task of the guest is found from init_task, blocked tasks are unwound
 *	from their switch frames and the task running on vCPU 0 from its
 *	registers, with its CPU's IRQ and exception stacks
 *	(ivm_kunwind_cpu_stacks); the ORC table is also read out of guest
 *	memory and compared with vmlinux's; --print shows each stack
 *	symbolized (compare with the guest's /proc/PID/stack).  The KASLR
 *	slide comes from the core's VMCOREINFO (KERNELOFFSET) or --slide.
 *
 * Prints stacks per second and the median time per stack in microseconds.
 * Struct offsets come from the vmlinux BTF; THREAD_SIZE is x86-64's 16 KiB
 * (no KASAN in distribution kernels).  Timings of the real dump include
 * the page walks of the core backend; "page cache" adds ivm_kmem_cache,
 * invalidated before every stack as a profiler must.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel/btf.h"
#include "gmem/gmem.h"
#include "kernel/ksyms.h"
#include "unwind/kunwind.h"
#include "kernel/orc.h"

#define THREAD_SIZE (16u << 10)
#define IRQ_STACK_SIZE (16u << 10)
#define MAX_TASKS 4096
#define MAX_FRAMES 128

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, size_t n)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < n; i++)
		total += ns[i];
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("%s: %zu stacks, %.0f stacks/s, median %.2f us/stack, p99 %.2f us\n",
	       what, n, total ? n * 1e9 / (double)total : 0.0, ns[n / 2] / 1e3,
	       ns[n * 99 / 100] / 1e3);
}

/* ---- synthetic --------------------------------------------------------- */

struct synth_mem {
	uint64_t lo;
	uint8_t buf[THREAD_SIZE];
};

static struct ivm_error *synth_read(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	struct synth_mem *m = ctx;

	if (va < m->lo || va - m->lo > sizeof(m->buf) ||
	    len > sizeof(m->buf) - (va - m->lo))
		return ivm_error_fault(va, "synthetic fault");
	memcpy(buf, m->buf + (va - m->lo), len);
	return NULL;
}

static void put_entry(uint8_t *ipb, uint8_t *orcb, size_t i, uint64_t sec,
		      uint64_t ip, int16_t sp_off, uint8_t regs, uint8_t type)
{
	int32_t rel = (int32_t)(ip - (sec + 4 * i));
	int16_t zero = 0;

	memcpy(ipb + 4 * i, &rel, 4);
	memcpy(orcb + 6 * i, &sp_off, 2);
	memcpy(orcb + 6 * i + 2, &zero, 2);
	orcb[6 * i + 4] = regs;
	orcb[6 * i + 5] = type;
}

static int bench_synthetic(unsigned int iterations)
{
	const uint64_t text = 0xffffffff81000000ull, sec = text + 0x100000;
	uint8_t ipb[4 * 4], orcb[6 * 4];
	struct ivm_stack_range range;
	struct ivm_orc_table *table;
	struct ivm_kunwind_config cfg = { 0 };
	struct ivm_kmem_reader reader = { synth_read, NULL };
	struct ivm_kunwind_start start = { 0 };
	struct ivm_frame frames[MAX_FRAMES];
	struct ivm_error *err;
	struct ivm_stack st;
	struct synth_mem *m;
	uint64_t *ns, sp;
	unsigned int i;

	put_entry(ipb, orcb, 0, sec, text, 0, 0, 4);		/* end */
	put_entry(ipb, orcb, 1, sec, text + 0x1000, 40, 5, 0);	/* CFA sp+40 */
	put_entry(ipb, orcb, 2, sec, text + 0x2000, 0, 0, 4);	/* end */
	put_entry(ipb, orcb, 3, sec, text + 0x3000, 0, 0, 0);	/* terminator */
	err = ivm_orc_load_buffer(ipb, sizeof(ipb), sec, orcb, sizeof(orcb),
				  IVM_ORC_FORMAT_V1, &table);
	if (err)
		return ivm_error_report(err);
	m = calloc(1, sizeof(*m));
	ns = calloc(iterations, sizeof(*ns));
	if (!m || !ns)
		return ivm_error_report(&ivm_enomem);
	m->lo = 0xffffc90000000000ull;
	/* 31 frames of 40 bytes returning into the same function, then end */
	sp = m->lo + 0x2000;
	for (i = 0; i < 32; i++) {
		uint64_t ra = i < 31 ? text + 0x1010 : text + 0x2001;
		memcpy(m->buf + (sp - m->lo) + 32, &ra, 8);
		sp += 40;
	}
	reader.ctx = m;
	range = (struct ivm_stack_range){ m->lo, m->lo + THREAD_SIZE,
					  IVM_STACK_RANGE_TASK };
	cfg.orc = table;
	start.pc = text + 0x1010;
	start.sp = m->lo + 0x2000;
	ivm_stack_init(&st, frames, MAX_FRAMES);
	for (i = 0; i < iterations; i++) {
		uint64_t t0 = now_ns();

		err = ivm_kunwind(&cfg, &reader, &range, 1, &start, &st);
		ns[i] = now_ns() - t0;
		if (err)
			return ivm_error_report(err);
	}
	printf("synthetic: %u frames per stack, flags %#x\n", st.nr, st.flags);
	report("synthetic", ns, iterations);
	free(ns);
	free(m);
	ivm_orc_destroy(table);
	return 0;
}

/* ---- a real dump ------------------------------------------------------- */

struct task {
	uint64_t addr, stack, thread_sp;
	uint32_t pid;
	char comm[17];
	bool running;
};

struct dump {
	struct ivm_gmem *gmem;
	struct ivm_kmem_gmem kg;
	struct ivm_kmem_reader reader;
	struct ivm_kernel_offsets off;
	const struct ivm_ksyms *ksyms;
	uint64_t slide;
};

static struct ivm_error *rd(struct dump *d, uint64_t va, void *buf, size_t n)
{
	return d->reader.read(d->reader.ctx, va, buf, n);
}

static struct ivm_error *rd64(struct dump *d, uint64_t va, uint64_t *ret)
{
	return rd(d, va, ret, 8);
}

static struct ivm_error *sym(struct dump *d, const char *name, uint64_t *ret)
{
	return ivm_ksyms_lookup(d->ksyms, name, ret);
}

static struct ivm_error *read_task(struct dump *d, uint64_t addr,
				   struct task *t)
{
	struct ivm_error *err;
	uint32_t pid;

	memset(t, 0, sizeof(*t));
	t->addr = addr;
	err = rd(d, addr + d->off.task_pid, &pid, 4);
	if (!err)
		err = rd64(d, addr + d->off.task_stack, &t->stack);
	if (!err)
		err = rd64(d, addr + d->off.task_thread_sp, &t->thread_sp);
	if (!err)
		err = rd(d, addr + d->off.task_comm, t->comm, 16);
	t->pid = pid;
	t->comm[16] = '\0';
	return err;
}

static void print_stack(struct dump *d, const struct task *t,
			const struct ivm_stack *st)
{
	uint32_t i;

	printf("pid %u (%s)%s: %u frames, flags %#x", t->pid, t->comm,
	       t->running ? " [running on vcpu 0]" : "", st->nr, st->flags);
	if (st->flags & (IVM_STACK_TRUNCATED_FAULT | IVM_STACK_TRUNCATED_BOUNDS))
		printf(", fault at %#" PRIx64, st->fault_addr);
	if (st->flags & IVM_STACK_REACHED_USER)
		printf(", user rip %#" PRIx64 " rsp %#" PRIx64,
		       st->user_regs.rip, st->user_regs.rsp);
	printf("\n");
	for (i = 0; i < st->nr; i++) {
		const struct ivm_frame *f = &st->frames[i];
		const struct ivm_ksym *s;
		uint64_t offset;

		s = ivm_ksyms_symbolize(d->ksyms, f->pc - d->slide, &offset);
		printf("  %#018" PRIx64 " %s+%#" PRIx64 "%s%s\n", f->pc,
		       s ? s->name : "?", s ? offset : 0,
		       f->flags & IVM_FRAME_REGS ? " [regs]" : "",
		       f->flags & IVM_FRAME_INEXACT ? " [inexact]" : "");
	}
}

static uint64_t parse_kerneloffset(const char *vmcoreinfo, bool *found)
{
	const char *p = vmcoreinfo ? strstr(vmcoreinfo, "KERNELOFFSET=") : NULL;

	*found = p != NULL;
	return p ? strtoull(p + strlen("KERNELOFFSET="), NULL, 16) : 0;
}

static int bench_core(const char *core, const char *vmlinux,
		      const char *system_map, const char *slide_arg,
		      bool print, unsigned int iterations)
{
	static const struct ivm_switch_frame_layout layout_fallback = {
		56, 40, 48,
	};
	struct ivm_switch_frame_layout layout = layout_fallback;
	struct ivm_orc_table *table = NULL;
	struct ivm_ksyms *ksyms = NULL;
	struct ivm_btf *btf = NULL;
	struct ivm_kunwind_config cfg = { 0 };
	struct ivm_frame frames[MAX_FRAMES];
	struct ivm_x86_regs regs;
	struct ivm_stack_range ranges[2 + IVM_KUNWIND_MAX_IST];
	struct ivm_cpu_stacks_layout csl;
	struct task *tasks;
	struct ivm_error *err;
	struct ivm_stack st;
	struct dump d = { 0 };
	uint64_t init_task, link, next, current = 0, *ns, pcpu;
	size_t nr_tasks = 0, i, n = 0;
	unsigned int it;
	bool found;

	tasks = calloc(MAX_TASKS, sizeof(*tasks));
	if (!tasks)
		return ivm_error_report(&ivm_enomem);
	err = ivm_orc_load_elf(vmlinux, IVM_ORC_FORMAT_AUTO, &table);
	if (!err)
		err = ivm_btf_load_file(vmlinux, &btf);
	if (!err)
		err = ivm_kernel_offsets_from_btf(btf, &d.off);
	if (!err)
		err = ivm_ksyms_load_system_map(system_map, &ksyms);
	if (!err)
		err = ivm_gmem_core_create(core, &d.gmem);
	if (!err)
		err = ivm_gmem_core_cpu_state(d.gmem, 0, &regs);
	if (err)
		return ivm_error_report(err);
	if (d.off.inactive_task_frame_size != IVM_KOFF_NONE) {
		layout.size = d.off.inactive_task_frame_size;
		layout.bp = d.off.inactive_task_frame_bp;
		layout.ret_addr = d.off.inactive_task_frame_ret_addr;
	}
	d.ksyms = ksyms;
	d.slide = parse_kerneloffset(ivm_gmem_core_vmcoreinfo(d.gmem), &found);
	if (slide_arg)
		d.slide = strtoull(slide_arg, NULL, 16);
	else if (!found)
		return ivm_error_report(ivm_error_create(IVM_ERROR_INVALID,
			"the core has no VMCOREINFO KERNELOFFSET: give --slide"));
	printf("slide %#" PRIx64 ", cr3 %#" PRIx64 ", vcpu 0 rip %#" PRIx64
	       " cs %#x, %zu orc entries\n", d.slide, regs.cr3, regs.rip,
	       regs.cs, ivm_orc_nr_entries(table));
	d.kg = (struct ivm_kmem_gmem){ d.gmem, regs.cr3,
				       (regs.cr4 & IVM_X86_CR4_LA57) != 0,
				       NULL };
	ivm_kmem_reader_gmem(&d.kg, &d.reader);

	cfg.orc = table;
	cfg.orc_slide = d.slide;
	err = sym(&d, "ret_from_fork", &link);
	if (err)
		return ivm_error_report(err);
	cfg.ret_from_fork = link + d.slide;

	/* the same table read out of guest memory must agree with vmlinux */
	{
		uint64_t a, b, o, ip1, ip2;
		struct ivm_orc_table *gt = NULL;
		struct ivm_orc_entry e1, e2;
		size_t k, bad = 0;

		err = sym(&d, "__start_orc_unwind_ip", &a);
		if (!err)
			err = sym(&d, "__stop_orc_unwind_ip", &b);
		if (!err)
			err = sym(&d, "__start_orc_unwind", &o);
		if (!err)
			err = ivm_orc_load_guest(&d.reader, a + d.slide,
						 b + d.slide, o + d.slide,
						 IVM_ORC_FORMAT_V1, &gt);
		if (err)
			return ivm_error_report(err);
		for (k = 0; k < ivm_orc_nr_entries(table); k++) {
			if (!ivm_orc_entry_at(table, k, &ip1, &e1) ||
			    !ivm_orc_entry_at(gt, k, &ip2, &e2) ||
			    ip1 + d.slide != ip2 || memcmp(&e1, &e2, sizeof(e1)))
				bad++;
		}
		printf("orc from guest memory: %zu entries, %zu differ from vmlinux\n",
		       ivm_orc_nr_entries(gt), bad);
		ivm_orc_destroy(gt);
	}

	{
		uint64_t hsp = 0, cea = 0;
		struct ivm_error *e1 = sym(&d, "hardirq_stack_ptr", &hsp);
		struct ivm_error *e2 = sym(&d, "cea_exception_stacks", &cea);

		ivm_error_destroy(e1);
		ivm_error_destroy(e2);
		err = ivm_cpu_stacks_layout_from_btf(btf, hsp, cea, &csl);
		if (err)
			return ivm_error_report(err);
	}

	/* current task of vCPU 0: per-CPU current_task at gs_base (6.1) */
	if ((regs.cs & 3) == 0 && !sym(&d, "current_task", &pcpu))
		rd64(&d, regs.gs_base + pcpu, &current);

	err = sym(&d, "init_task", &link);
	if (err)
		return ivm_error_report(err);
	init_task = link + d.slide;
	next = init_task;
	do {
		if (nr_tasks == MAX_TASKS)
			break;
		err = read_task(&d, next, &tasks[nr_tasks]);
		if (err)
			return ivm_error_report(ivm_error_wrap(err,
					"reading task at %#" PRIx64, next));
		tasks[nr_tasks].running = next == current;
		nr_tasks++;
		err = rd64(&d, next + d.off.task_tasks, &next);
		if (err)
			return ivm_error_report(err);
		next -= d.off.task_tasks;
	} while (next != init_task);
	printf("%zu tasks, current on vcpu 0: %#" PRIx64 "\n", nr_tasks,
	       current);

	ns = calloc((size_t)iterations * nr_tasks, sizeof(*ns));
	if (!ns)
		return ivm_error_report(&ivm_enomem);
	ivm_stack_init(&st, frames, MAX_FRAMES);
	for (it = 0; it < iterations; it++) {
		for (i = 0; i < nr_tasks; i++) {
			const struct task *t = &tasks[i];
			size_t nr_ranges = 1;
			uint64_t t0;

			ranges[0] = (struct ivm_stack_range){
				t->stack, t->stack + THREAD_SIZE,
				IVM_STACK_RANGE_TASK };
			t0 = now_ns();
			if (t->running) {
				nr_ranges += ivm_kunwind_cpu_stacks(
					&csl, &d.reader, regs.gs_base,
					ranges + 1, 1 + IVM_KUNWIND_MAX_IST);
				if (print && it == 0) {
					size_t k;

					for (k = 1; k < nr_ranges; k++)
						printf("vcpu 0 stack %#" PRIx64 "-%#" PRIx64
						       " kind %d\n", ranges[k].lo,
						       ranges[k].hi, ranges[k].kind);
					printf("vcpu 0 rsp %#" PRIx64 "\n", regs.rsp);
				}
				err = ivm_kunwind_regs(&cfg, &d.reader, ranges,
						       nr_ranges, &regs, &st);
			} else {
				err = ivm_kunwind_blocked(&cfg, &d.reader,
							  ranges, 1,
							  t->thread_sp,
							  &layout, &st);
			}
			ns[n++] = now_ns() - t0;
			if (err)
				return ivm_error_report(err);
			if (print && it == 0)
				print_stack(&d, t, &st);
		}
	}
	report("core", ns, n);

	/* the same through a page cache, invalidated before every stack */
	{
		static struct ivm_kmem_cache cache;
		struct ivm_kmem_reader cached;

		ivm_kmem_cache_init(&cache, &d.reader, &cached);
		n = 0;
		for (it = 0; it < iterations; it++) {
			for (i = 0; i < nr_tasks; i++) {
				const struct task *t = &tasks[i];
				uint64_t t0;

				if (t->running)
					continue;
				ranges[0] = (struct ivm_stack_range){
					t->stack, t->stack + THREAD_SIZE,
					IVM_STACK_RANGE_TASK };
				t0 = now_ns();
				ivm_kmem_cache_invalidate(&cache);
				err = ivm_kunwind_blocked(&cfg, &cached, ranges,
							  1, t->thread_sp,
							  &layout, &st);
				ns[n++] = now_ns() - t0;
				if (err)
					return ivm_error_report(err);
			}
		}
		report("core, page cache", ns, n);
	}
	free(ns);
	free(tasks);
	ivm_gmem_destroy(d.gmem);
	ivm_ksyms_destroy(ksyms);
	ivm_btf_destroy(btf);
	ivm_orc_destroy(table);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "core", required_argument, NULL, 'c' },
		{ "vmlinux", required_argument, NULL, 'v' },
		{ "system-map", required_argument, NULL, 'm' },
		{ "slide", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "print", no_argument, NULL, 'p' },
		{ 0 },
	};
	const char *core = NULL, *vmlinux = NULL, *map = NULL, *slide = NULL;
	unsigned int iterations = 0;
	bool print = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': core = optarg; break;
		case 'v': vmlinux = optarg; break;
		case 'm': map = optarg; break;
		case 's': slide = optarg; break;
		case 'n': iterations = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'p': print = true; break;
		default:
			fprintf(stderr, "usage: see the comment at the top of tests/bench/bench_kunwind.c\n");
			return 2;
		}
	}
	if (!core)
		return bench_synthetic(iterations ? iterations : 200000);
	if (!vmlinux || !map) {
		fprintf(stderr, "bench_kunwind: --core needs --vmlinux and --system-map\n");
		return 2;
	}
	return bench_core(core, vmlinux, map, slide, print,
			  iterations ? iterations : 100);
}
