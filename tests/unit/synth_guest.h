// SPDX-License-Identifier: MIT
/*
 * A synthetic guest for the kernel-layout tests (test_kernel_layout.c,
 * test_last_ran.c, test_vcpu_watch.c): page tables mapping a fake kernel
 * image at a KASLR slide (with a decoy banner at a lower slide), a direct
 * map, two CPUs' per-CPU areas and run queues, and a task list.
 *
 * The struct layouts come from a hand-built BTF, and the fixture writes the
 * tasks at the offsets kernel_layout itself found in it, so the tests test
 * the walk, not a copy of its constants.  Each test file has its own copy
 * of the switches below (g_*), set before fixture_init().
 */
#ifndef IVM_TEST_SYNTH_GUEST_H
#define IVM_TEST_SYNTH_GUEST_H
#include <criterion/criterion.h>
#include <bpf/btf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel_layout.h"
#include "kernel/last_ran.h"

#define START_MAP 0xffffffff80000000ull
#define SLIDE 0x2a00000ull
#define POB 0xffff9a4000000000ull
#define A_SIZE (4ull << 20)		/* gpa 0: tables, direct-map data */
#define B_GPA (0x1200000ull + SLIDE)	/* kernel image page, phys_base 0 */
#define B_SIZE (2ull << 20)
#define LINK_BASE 0xffffffff81200000ull

/* Link addresses of the fake kernel. */
#define L_BANNER (LINK_BASE + 0x0)
#define L_INIT_TASK (LINK_BASE + 0x1000)
#define L_INIT_TOP_PGT (LINK_BASE + 0x100000)
#define L_PER_CPU_OFFSET (LINK_BASE + 0x101000)
#define L_NR_CPU_IDS (LINK_BASE + 0x102000)
#define L_PAGE_OFFSET_BASE (LINK_BASE + 0x102008)
#define L_PHYS_BASE (LINK_BASE + 0x102010)
#define L_MAX_PFN (LINK_BASE + 0x102018)
#define L_TOTAL_FORKS (LINK_BASE + 0x102020)
#define PCPU_CURRENT_TASK 0x100ull
#define PCPU_IDLE_THREADS 0x200ull
#define PCPU_APICID 0x300ull
#define PCPU_RUNQUEUES 0x400ull
#define RQ_NR_SWITCHES 0x48ull
#define RQ_CURR 0x50ull
#define RQ_SCHED_INFO 0x80ull
#define RQ_CLOCK 0xc0ull

/* Physical addresses in region A. */
#define PA_VCPU_PML4 0x6000ull	/* 8 KiB aligned, as under KPTI */
#define PA_PDPT_K 0x2000ull
#define PA_PD_K 0x3000ull
#define PA_PDPT_D 0x4000ull
#define PA_PCPU0 0x10000ull
#define PA_PCPU1 0x20000ull
#define PA_TASK(i) (0x40000ull + (i) * 0x2000ull)	/* room for si_off */
#define PA_SIGNAL(i) (0x80000ull + (i) * 0x100ull)
#define PA_MM 0x90000ull
#define PA_USER_PGD 0x91000ull
#define PA_DECOY 0x200000ull

#define DM(pa) (POB + (pa))		/* direct-map address of pa */
#define KVA(link) ((link) + SLIDE)	/* run-time kernel image address */

#define BANNER "Linux version 6.1.0-ivm-test (synthetic) #1 SMP\n"

enum { P1, P2, T51, T52, IDLE1, NR_TASKS };

/* 6.2..6.14: `current` is pcpu_hot.current_task, no current_task symbol. */
static bool g_pcpu_hot;
/* CONFIG_SCHEDSTATS: the run queues count switch-ins (rq_sched_info). */
static bool g_rq_pcount;
#define PCPU_HOT 0x180ull
#define PCPU_HOT_CURRENT 0x10ull

struct fixture {
	uint8_t *a, *b;
	struct ivm_gmem *gmem;
	struct ivm_btf *btf;
	struct ivm_ksyms *ksyms;
	struct ivm_kernel_offsets off;
	struct ivm_x86_regs regs[2];
	struct ivm_kernel_layout_config config;
};

static inline uint8_t *at(struct fixture *f, uint64_t va)
{
	if (va >= POB && va < POB + A_SIZE)
		return f->a + (va - POB);
	cr_assert(va >= KVA(LINK_BASE) && va < KVA(LINK_BASE) + B_SIZE,
		  "fixture address 0x%llx", (unsigned long long)va);
	return f->b + (va - KVA(LINK_BASE));
}

static inline void w64(struct fixture *f, uint64_t va, uint64_t v)
{
	memcpy(at(f, va), &v, 8);
}

static inline void w32(struct fixture *f, uint64_t va, uint32_t v)
{
	memcpy(at(f, va), &v, 4);
}

static inline void pte(uint8_t *table, unsigned int index, uint64_t value)
{
	memcpy(table + index * 8, &value, 8);
}

static inline unsigned int idx(uint64_t va, int level)
{
	return (unsigned int)(va >> (12 + 9 * (level - 1))) & 511;
}

/*
 * Where the fixture's task_struct has sched_info: 0x110, next to the rest
 * that last_ran reads (one piece per task), or past 4 KiB from them, far
 * enough to be a piece of its own (a randomized task_struct layout).
 */
static uint32_t si_off = 0x110;

/*
 * The kernel structures idlevm reads, at offsets unlike any real kernel.
 * thread_group_only: a kernel before signal->thread_head (< 2.6.38 had
 * neither; 6.7+ has no thread_group): threads only on thread_group.
 */
static inline struct ivm_btf *build_btf(bool thread_group_only)
{
	static const char *const regs[] = {
		"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9",
		"r8", "ax", "cx", "dx", "si", "di", "orig_ax", "ip", "cs",
		"flags", "sp", "ss",
	};
	struct btf *b = btf__new_empty();
	int t_int, t_uint, t_ulong, t_char, t_ptr, t_list, t_ti, t_thread;
	int t_comm, t_se, t_si;
	struct ivm_btf *btf;
	struct ivm_error *err;
	const void *raw;
	uint32_t size;
	size_t i;

	t_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	t_uint = btf__add_int(b, "unsigned int", 4, 0);
	t_ulong = btf__add_int(b, "long unsigned int", 8, 0);
	t_char = btf__add_int(b, "char", 1, BTF_INT_CHAR);
	t_ptr = btf__add_ptr(b, 0);
	t_list = btf__add_struct(b, "list_head", 16);
	btf__add_field(b, "next", t_list + 1, 0, 0);
	btf__add_field(b, "prev", t_list + 1, 64, 0);
	cr_assert_eq(btf__add_ptr(b, t_list), t_list + 1);
	t_ti = btf__add_struct(b, "thread_info", 24);
	btf__add_field(b, "flags", t_ulong, 0, 0);
	btf__add_field(b, "cpu", t_uint, 160, 0);
	t_thread = btf__add_struct(b, "thread_struct", 16);
	btf__add_field(b, "sp", t_ulong, 0, 0);
	btf__add_field(b, "fsbase", t_ulong, 64, 0);
	t_comm = btf__add_array(b, t_int, t_char, 16);
	t_se = btf__add_struct(b, "sched_entity", 16);
	/* With the run queues' counts, where the task's CPU changes too. */
	btf__add_field(b, g_rq_pcount ? "nr_migrations" : "load", t_ulong, 0,
		       0);
	btf__add_field(b, "exec_start", t_ulong, 64, 0);
	t_si = btf__add_struct(b, "sched_info", 24);
	btf__add_field(b, "pcount", t_ulong, 0, 0);
	btf__add_field(b, "last_arrival", t_ulong, 128, 0);
	btf__add_struct(b, "task_struct",
			si_off < 0x300 ? 0x300 : si_off + 0x20);
	btf__add_field(b, "thread_info", t_ti, 0, 0);
	btf__add_field(b, "__state", t_uint, 24 * 8, 0);
	btf__add_field(b, "stack", t_ptr, 32 * 8, 0);
	/* Older synthetic kernels have no on_cpu (a !CONFIG_SMP build). */
	if (!thread_group_only)
		btf__add_field(b, "on_cpu", t_int, 40 * 8, 0);
	btf__add_field(b, "flags", t_uint, 44 * 8, 0);
	btf__add_field(b, "tasks", t_list, 0x80 * 8, 0);
	btf__add_field(b, "mm", t_ptr, 0x90 * 8, 0);
	btf__add_field(b, "active_mm", t_ptr, 0x98 * 8, 0);
	btf__add_field(b, "pid", t_int, 0xa0 * 8, 0);
	btf__add_field(b, "tgid", t_int, 0xa4 * 8, 0);
	if (!thread_group_only)
		btf__add_field(b, "thread_node", t_list, 0xb0 * 8, 0);
	btf__add_field(b, "thread_group", t_list, 0xc0 * 8, 0);
	btf__add_field(b, "nvcsw", t_ulong, 0xd0 * 8, 0);
	btf__add_field(b, "nivcsw", t_ulong, 0xd8 * 8, 0);
	btf__add_field(b, "comm", t_comm, 0xe0 * 8, 0);
	btf__add_field(b, "signal", t_ptr, 0xf0 * 8, 0);
	/* ... and no se.exec_start, so no last_ran. */
	if (!thread_group_only) {
		btf__add_field(b, "se", t_se, 0x100 * 8, 0);
		/* last_arrival at 0x120, unless moved (see si_off) */
		btf__add_field(b, "sched_info", t_si, si_off * 8, 0);
	}
	btf__add_field(b, "thread", t_thread, 0x200 * 8, 0);
	btf__add_struct(b, "signal_struct", 0x40);
	if (!thread_group_only)
		btf__add_field(b, "thread_head", t_list, 0x10 * 8, 0);
	btf__add_struct(b, "mm_struct", 0x80);
	btf__add_field(b, "pgd", t_ptr, 0x48 * 8, 0);
	/* ... nor run queues with a switch count. */
	if (!thread_group_only) {
		btf__add_struct(b, "rq", 0x100);
		btf__add_field(b, "nr_running", t_uint, 0, 0);
		btf__add_field(b, "nr_switches", t_ulong,
			       RQ_NR_SWITCHES * 8, 0);
		btf__add_field(b, "curr", t_ptr, RQ_CURR * 8, 0);
		if (g_rq_pcount) {
			btf__add_field(b, "rq_sched_info", t_si,
				       RQ_SCHED_INFO * 8, 0);
			btf__add_field(b, "clock", t_ulong, RQ_CLOCK * 8, 0);
		}
	}
	if (g_pcpu_hot) {
		btf__add_struct(b, "pcpu_hot", 64);
		btf__add_field(b, "preempt_count", t_int, 0, 0);
		btf__add_field(b, "current_task", t_ptr, PCPU_HOT_CURRENT * 8,
			       0);
	}
	btf__add_struct(b, "pt_regs", 21 * 8);
	for (i = 0; i < 21; i++)
		btf__add_field(b, regs[i], t_ulong, (uint32_t)i * 64, 0);
	raw = btf__raw_data(b, &size);
	err = ivm_btf_load_blob(raw, size, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	btf__free(b);
	return btf;
}

/*
 * minimal: only what a layout cannot do without (no page_offset_base,
 * max_pfn, phys_base, init_top_pgt, idle_threads, x86_cpu_to_apicid).
 */
static bool g_minimal_symbols;

static inline struct ivm_ksyms *build_ksyms(void)
{
	char text[2048];
	struct ivm_ksyms *ksyms;
	struct ivm_error *err;
	int n;

	n = snprintf(text, sizeof(text),
		     "%016llx D current_task\n%016llx d idle_threads\n"
		     "%016llx D linux_banner\n%016llx D init_task\n"
		     "%016llx D init_top_pgt\n%016llx D __per_cpu_offset\n"
		     "%016llx D nr_cpu_ids\n%016llx D page_offset_base\n"
		     "%016llx D phys_base\n%016llx D max_pfn\n"
		     "%016llx D x86_cpu_to_apicid\n%016llx D runqueues\n"
		     "%016llx D total_forks\n",
		     PCPU_CURRENT_TASK, PCPU_IDLE_THREADS, L_BANNER,
		     L_INIT_TASK, L_INIT_TOP_PGT, L_PER_CPU_OFFSET,
		     L_NR_CPU_IDS, L_PAGE_OFFSET_BASE, L_PHYS_BASE, L_MAX_PFN,
		     PCPU_APICID, PCPU_RUNQUEUES, L_TOTAL_FORKS);
	if (g_minimal_symbols)
		n = snprintf(text, sizeof(text),
			     "%016llx D current_task\n%016llx D linux_banner\n"
			     "%016llx D init_task\n%016llx D __per_cpu_offset\n"
			     "%016llx D nr_cpu_ids\n",
			     PCPU_CURRENT_TASK, L_BANNER, L_INIT_TASK,
			     L_PER_CPU_OFFSET, L_NR_CPU_IDS);
	if (g_pcpu_hot) {
		/* Rename current_task out of the way; add pcpu_hot. */
		char *p = strstr(text, "D current_task");

		memcpy(p, "D current_tasX", 14);
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "%016llx D pcpu_hot\n", PCPU_HOT);
	}
	err = ivm_ksyms_parse_system_map(text, (size_t)n, &ksyms);
	cr_assert_null(err);
	return ksyms;
}

static inline uint64_t task_va(int t)
{
	return DM(PA_TASK(t));
}

static inline void set_task(struct fixture *f, uint64_t task, int pid, int tgid,
		     const char *comm, uint64_t signal, uint64_t mm,
		     uint32_t cpu)
{
	const struct ivm_kernel_offsets *o = &f->off;

	w32(f, task + o->task_pid, (uint32_t)pid);
	w32(f, task + o->task_tgid, (uint32_t)tgid);
	strncpy((char *)at(f, task + o->task_comm), comm, 16);
	w64(f, task + o->task_signal, signal);
	w64(f, task + o->task_mm, mm);
	w32(f, task + o->task_cpu, cpu);
	w64(f, task + o->task_nvcsw, (uint64_t)pid * 10);
	w64(f, task + o->task_nivcsw, (uint64_t)pid * 10 + 1);
	w64(f, task + o->task_thread_sp, task + 0x5000);
	w64(f, task + o->task_stack, task + 0x8000);
	if (!pid)
		w32(f, task + o->task_flags, IVM_GUEST_PF_KTHREAD);
}

/* Make a circular list: head -> nodes[0] -> ... -> head. */
static inline void link_ring(struct fixture *f, uint64_t head, const uint64_t *nodes,
		      size_t n)
{
	uint64_t prev = head;
	size_t i;

	for (i = 0; i < n; i++) {
		w64(f, prev, nodes[i]);
		w64(f, nodes[i] + 8, prev);
		prev = nodes[i];
	}
	w64(f, prev, head);
	w64(f, head + 8, prev);
}

static inline void fixture_init_with(struct fixture *f, bool thread_group_only)
{
	struct ivm_gmem_region regions[2];
	struct ivm_error *err;
	uint64_t init_task = KVA(L_INIT_TASK), tn, th;
	uint8_t *kpml4;
	int i;

	memset(f, 0, sizeof(*f));
	f->a = calloc(1, A_SIZE);
	f->b = calloc(1, B_SIZE);
	cr_assert(f->a && f->b);
	f->btf = build_btf(thread_group_only);
	f->ksyms = build_ksyms();
	err = ivm_kernel_offsets_from_btf(f->btf, &f->off);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");

	/* Page tables: kernel PML4 at init_top_pgt, a process copy. */
	kpml4 = at(f, KVA(L_INIT_TOP_PGT));
	pte(kpml4, idx(KVA(LINK_BASE), 4), PA_PDPT_K | 3);
	pte(kpml4, idx(POB, 4), PA_PDPT_D | 3);
	pte(f->a + PA_PDPT_K, idx(KVA(LINK_BASE), 3), PA_PD_K | 3);
	pte(f->a + PA_PD_K, idx(KVA(LINK_BASE), 2), B_GPA | 0x83);
	/* The decoy: a banner one slide lower, without a swapper. */
	pte(f->a + PA_PD_K, idx(KVA(LINK_BASE) - (2u << 20), 2),
	    PA_DECOY | 0x83);
	memcpy(f->a + PA_DECOY, BANNER, sizeof(BANNER));
	pte(f->a + PA_PDPT_D, idx(POB, 3), 0 | 0x83);	/* 1 GiB page */
	memcpy(f->a + PA_VCPU_PML4, kpml4, 4096);

	/* Kernel variables. */
	memcpy(at(f, KVA(L_BANNER)), BANNER, sizeof(BANNER));
	w32(f, KVA(L_NR_CPU_IDS), 2);
	w64(f, KVA(L_PAGE_OFFSET_BASE), POB);
	w64(f, KVA(L_PHYS_BASE), 0);
	w64(f, KVA(L_MAX_PFN), 0x4000);
	w64(f, KVA(L_PER_CPU_OFFSET), DM(PA_PCPU0));
	w64(f, KVA(L_PER_CPU_OFFSET) + 8, DM(PA_PCPU1));
	w64(f, DM(PA_PCPU0) + PCPU_CURRENT_TASK, task_va(T51));
	w64(f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(IDLE1));
	w64(f, DM(PA_PCPU0) + PCPU_IDLE_THREADS, init_task);
	w64(f, DM(PA_PCPU1) + PCPU_IDLE_THREADS, task_va(IDLE1));
	w32(f, DM(PA_PCPU0) + PCPU_APICID, 0xffff0000);	/* u16 0 */
	w32(f, DM(PA_PCPU1) + PCPU_APICID, 2);

	/* Tasks. */
	set_task(f, init_task, 0, 0, "swapper/0", DM(PA_SIGNAL(0)), 0, 0);
	set_task(f, task_va(P1), 1, 1, "init", DM(PA_SIGNAL(1)), DM(PA_MM), 1);
	set_task(f, task_va(P2), 50, 50, "sleeper", DM(PA_SIGNAL(2)),
		 DM(PA_MM), 0);
	set_task(f, task_va(T51), 51, 50, "sleeper-t1", DM(PA_SIGNAL(2)),
		 DM(PA_MM), 0);
	set_task(f, task_va(T52), 52, 50, "sleeper-t2", DM(PA_SIGNAL(2)),
		 DM(PA_MM), 1);
	set_task(f, task_va(IDLE1), 0, 0, "swapper/1", DM(PA_SIGNAL(0)), 0, 1);
	w64(f, DM(PA_MM) + f->off.mm_pgd, DM(PA_USER_PGD));
	{
		const uint64_t procs[] = {
			task_va(P1) + f->off.task_tasks,
			task_va(P2) + f->off.task_tasks,
		};

		link_ring(f, init_task + f->off.task_tasks, procs, 2);
	}
	tn = f->off.task_thread_node;
	th = f->off.signal_thread_head;
	if (thread_group_only) {
		/* A ring through the leader, with no separate head. */
		uint64_t tg = f->off.task_thread_group;
		const uint64_t t2[] = { task_va(T51) + tg, task_va(T52) + tg };

		link_ring(f, init_task + tg, NULL, 0);
		link_ring(f, task_va(P1) + tg, NULL, 0);
		link_ring(f, task_va(P2) + tg, t2, 2);
	} else {
		const uint64_t t0[] = { init_task + tn };
		const uint64_t t1[] = { task_va(P1) + tn };
		const uint64_t t2[] = { task_va(P2) + tn, task_va(T51) + tn,
					task_va(T52) + tn };

		link_ring(f, DM(PA_SIGNAL(0)) + th, t0, 1);
		link_ring(f, DM(PA_SIGNAL(1)) + th, t1, 1);
		link_ring(f, DM(PA_SIGNAL(2)) + th, t2, 3);
	}

	regions[0] = (struct ivm_gmem_region){ 0, A_SIZE,
					       (uint64_t)(uintptr_t)f->a };
	regions[1] = (struct ivm_gmem_region){ B_GPA, B_SIZE,
					       (uint64_t)(uintptr_t)f->b };
	err = ivm_gmem_buffer_create(regions, 2, &f->gmem);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");

	/* vCPU 0: kernel mode on CPU 0; vCPU 1: user mode on CPU 1. */
	for (i = 0; i < 2; i++) {
		f->regs[i].valid = IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
				   IVM_X86_REGS_FS_GS_BASE |
				   IVM_X86_REGS_KERNEL_GS_BASE |
				   IVM_X86_REGS_CRS;
		f->regs[i].cr3 = PA_VCPU_PML4;
		f->regs[i].cr4 = 0x6b0;
	}
	f->regs[0].cs = 0x10;
	f->regs[0].gs_base = DM(PA_PCPU0);
	f->regs[1].cs = 0x33;
	f->regs[1].gs_base = 0x7f0000001000ull;
	f->regs[1].kernel_gs_base = DM(PA_PCPU1);
	f->config = (struct ivm_kernel_layout_config){
		.btf = f->btf, .ksyms = f->ksyms,
		.vcpu_regs = f->regs, .nr_vcpus = 2,
	};
}

static inline void fixture_init(struct fixture *f)
{
	fixture_init_with(f, false);
}

static inline void fixture_fini(struct fixture *f)
{
	ivm_gmem_destroy(f->gmem);
	ivm_ksyms_destroy(f->ksyms);
	ivm_btf_destroy(f->btf);
	free(f->a);
	free(f->b);
}

static inline struct ivm_kernel_layout *create_ok(struct fixture *f)
{
	struct ivm_kernel_layout *l = NULL;
	struct ivm_error *err;

	err = ivm_kernel_layout_create(f->gmem, &f->config, &l);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return l;
}

static inline struct ivm_error *create_err(struct fixture *f)
{
	struct ivm_kernel_layout *l = NULL;
	struct ivm_error *err;

	err = ivm_kernel_layout_create(f->gmem, &f->config, &l);
	cr_assert_not_null(err, "layout found in a broken guest");
	cr_expect_null(l);
	return err;
}

#endif
