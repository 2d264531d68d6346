// SPDX-License-Identifier: MIT
/*
 * kernel_layout over synthetic guest memory: page tables mapping a fake
 * kernel image at a KASLR slide (with a decoy banner at a lower slide), a
 * direct map, two CPUs' per-CPU areas, and a task list — then broken in
 * the ways a hostile or half-updated guest breaks it.
 *
 * The struct layouts come from a hand-built BTF, and the fixture writes the
 * tasks at the offsets kernel_layout itself found in it, so this tests the
 * walk, not a copy of its constants.
 */
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

static uint8_t *at(struct fixture *f, uint64_t va)
{
	if (va >= POB && va < POB + A_SIZE)
		return f->a + (va - POB);
	cr_assert(va >= KVA(LINK_BASE) && va < KVA(LINK_BASE) + B_SIZE,
		  "fixture address 0x%llx", (unsigned long long)va);
	return f->b + (va - KVA(LINK_BASE));
}

static void w64(struct fixture *f, uint64_t va, uint64_t v)
{
	memcpy(at(f, va), &v, 8);
}

static void w32(struct fixture *f, uint64_t va, uint32_t v)
{
	memcpy(at(f, va), &v, 4);
}

static void pte(uint8_t *table, unsigned int index, uint64_t value)
{
	memcpy(table + index * 8, &value, 8);
}

static unsigned int idx(uint64_t va, int level)
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
static struct ivm_btf *build_btf(bool thread_group_only)
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

static struct ivm_ksyms *build_ksyms(void)
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

static uint64_t task_va(int t)
{
	return DM(PA_TASK(t));
}

static void set_task(struct fixture *f, uint64_t task, int pid, int tgid,
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
static void link_ring(struct fixture *f, uint64_t head, const uint64_t *nodes,
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

static void fixture_init_with(struct fixture *f, bool thread_group_only)
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

static void fixture_init(struct fixture *f)
{
	fixture_init_with(f, false);
}

static void fixture_fini(struct fixture *f)
{
	ivm_gmem_destroy(f->gmem);
	ivm_ksyms_destroy(f->ksyms);
	ivm_btf_destroy(f->btf);
	free(f->a);
	free(f->b);
}

static struct ivm_kernel_layout *create_ok(struct fixture *f)
{
	struct ivm_kernel_layout *l = NULL;
	struct ivm_error *err;

	err = ivm_kernel_layout_create(f->gmem, &f->config, &l);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return l;
}

static struct ivm_error *create_err(struct fixture *f)
{
	struct ivm_kernel_layout *l = NULL;
	struct ivm_error *err;

	err = ivm_kernel_layout_create(f->gmem, &f->config, &l);
	cr_assert_not_null(err, "layout found in a broken guest");
	cr_expect_null(l);
	return err;
}

Test(kernel_layout, finds_slide_past_decoy_and_per_cpu)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	uint64_t addr;

	fixture_init(&f);
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	cr_expect_eq(ivm_kernel_layout_phys_base(l), 0);
	/* The kernel's own page table, not the vCPU's copy. */
	cr_expect_eq(ivm_kernel_layout_cr3(l), B_GPA + 0x100000);
	cr_expect_not(ivm_kernel_layout_la57(l));
	cr_expect_eq(ivm_kernel_layout_page_offset_base(l), POB);
	cr_expect_eq(ivm_kernel_layout_nr_cpus(l), 2);
	cr_expect_eq(ivm_kernel_layout_per_cpu_offset(l, 1), DM(PA_PCPU1));
	cr_expect_eq(ivm_kernel_layout_per_cpu_offset(l, 2), 0);
	cr_expect_eq(ivm_kernel_layout_init_task(l), KVA(L_INIT_TASK));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 0), KVA(L_INIT_TASK));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 1), task_va(IDLE1));
	/* vCPU 1 is in user mode: found through its kernel GS base. */
	cr_expect_eq(ivm_kernel_layout_vcpu_cpu(l, 0), 0);
	cr_expect_eq(ivm_kernel_layout_vcpu_cpu(l, 1), 1);
	cr_expect_eq(ivm_kernel_layout_vcpu_cpu(l, 2), -1);
	/* Image symbols slide, zero-based per-CPU ones do not. */
	cr_assert_null(ivm_kernel_symbol(l, "max_pfn", &addr));
	cr_expect_eq(addr, KVA(L_MAX_PFN));
	cr_assert_null(ivm_kernel_symbol(l, "current_task", &addr));
	cr_expect_eq(addr, PCPU_CURRENT_TASK);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, slide_hint_and_exact_banner)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_error *err;

	fixture_init(&f);
	f.config.has_slide_hint = true;
	f.config.slide_hint = SLIDE;
	f.config.banner = BANNER;
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	ivm_kernel_layout_destroy(l);
	/* A hint the banner contradicts is an error, not a silent pick. */
	f.config.slide_hint = SLIDE + (4u << 20);
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "hint"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	/* A different exact banner (another build) is not found. */
	f.config.has_slide_hint = false;
	f.config.banner = "Linux version 6.1.0-other\n";
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	fixture_fini(&f);
}

Test(kernel_layout, no_banner_anywhere)
{
	struct fixture f;
	struct ivm_error *err;

	fixture_init(&f);
	memset(at(&f, KVA(L_BANNER)), 0, sizeof(BANNER));
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	/* The decoy was seen and rejected by its init_task. */
	cr_expect(strstr(ivm_error_string(err), "1 banner(s)"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	fixture_fini(&f);
}

Test(kernel_layout, no_usable_registers)
{
	struct fixture f;
	struct ivm_error *err;

	fixture_init(&f);
	f.regs[0].valid = f.regs[1].valid = IVM_X86_REGS_GPRS;
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	cr_expect(strstr(ivm_error_string(err), "CR3"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	fixture_fini(&f);
}

Test(kernel_layout, kpti_user_cr3_falls_back_to_kernel_copy)
{
	struct fixture f;
	struct ivm_kernel_layout *l;

	fixture_init(&f);
	/*
	 * Both vCPUs in user mode under KPTI: CR3 points at the user copy
	 * (bit 12 set), which maps no kernel data.
	 */
	memset(f.a + PA_VCPU_PML4 + 0x1000, 0, 4096);
	f.regs[0].cr3 = f.regs[1].cr3 = PA_VCPU_PML4 | (1u << 12);
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, current_task_per_cpu)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;
	struct ivm_error *err;
	uint64_t task;
	unsigned int cpu;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_current_task(l, 0, &f.regs[0], &task));
	cr_expect_eq(task, task_va(T51));
	cr_assert_null(ivm_kernel_current_task(l, 1, NULL, &task));
	cr_expect_eq(task, task_va(IDLE1));
	cr_assert_null(ivm_kernel_read_task(l, task, &t));
	cr_expect(t.is_idle);
	cr_expect_str_eq(t.comm, "swapper/1");
	/* The cached physical slot follows the guest's updates. */
	w64(&f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(T52));
	cr_assert_null(ivm_kernel_current_task(l, 1, &f.regs[1], &task));
	cr_expect_eq(task, task_va(T52));
	/* Registers of the other CPU: the caller's map is stale. */
	err = ivm_kernel_current_task(l, 0, &f.regs[1], &task);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_kernel_current_task(l, 2, NULL, &task);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	/* A garbage current pointer is refused. */
	w64(&f, DM(PA_PCPU0) + PCPU_CURRENT_TASK, 0x1234);
	err = ivm_kernel_current_task(l, 0, NULL, &task);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	/* APIC ids, for vCPUs whose registers name no per-CPU area. */
	cr_assert_null(ivm_kernel_cpu_from_apic_id(l, 2, &cpu));
	cr_expect_eq(cpu, 1);
	cr_assert_null(ivm_kernel_cpu_from_apic_id(l, 0, &cpu));
	cr_expect_eq(cpu, 0);
	err = ivm_kernel_cpu_from_apic_id(l, 1, &cpu);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	/* Kernel entry before swapgs: GS is still the user's. */
	f.regs[1].cs = 0x10;
	cr_assert_null(ivm_kernel_cpu_from_regs(l, &f.regs[1], &cpu));
	cr_expect_eq(cpu, 1);
	f.regs[1].kernel_gs_base = 0;
	err = ivm_kernel_cpu_from_regs(l, &f.regs[1], &cpu);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, task_list_complete)
{
	static const struct {
		int pid, tgid;
		const char *comm;
	} want[] = {
		{ 0, 0, "swapper/0" }, { 1, 1, "init" },
		{ 50, 50, "sleeper" }, { 51, 50, "sleeper-t1" },
		{ 52, 50, "sleeper-t2" }, { 0, 0, "swapper/1" },
	};
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t cr3;
	size_t i;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	cr_assert_eq(list->nr, 6, "%zu tasks", list->nr);
	for (i = 0; i < 6; i++) {
		cr_expect_eq(list->tasks[i].pid, want[i].pid, "task %zu", i);
		cr_expect_eq(list->tasks[i].tgid, want[i].tgid, "task %zu", i);
		cr_expect_str_eq(list->tasks[i].comm, want[i].comm);
		cr_expect_eq(list->tasks[i].nvcsw, (uint64_t)want[i].pid * 10);
		cr_expect_eq(list->tasks[i].nivcsw,
			     (uint64_t)want[i].pid * 10 + 1);
		cr_expect_eq(list->tasks[i].thread_sp,
			     list->tasks[i].addr + 0x5000);
		cr_expect_eq(list->tasks[i].is_idle, want[i].pid == 0);
	}
	cr_expect_eq(list->tasks[4].cpu, 1);
	cr_expect(list->tasks[0].flags & IVM_GUEST_PF_KTHREAD);
	cr_assert_null(ivm_kernel_task_user_cr3(l, &list->tasks[1], &cr3));
	cr_expect_eq(cr3, PA_USER_PGD);
	{
		struct ivm_error *err;

		err = ivm_kernel_task_user_cr3(l, &list->tasks[0], &cr3);
		cr_assert_not_null(err);
		cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
		ivm_error_destroy(err);
	}
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A process of 600 threads: the walk's room, which starts small, grows
 * past it with every task read whole, and a cap still cuts the list.
 */
#define PA_MANY(i) (0x220000ull + (i) * 0x400ull)	/* task_struct 0x300 */
#define NR_MANY 600

Test(kernel_layout, task_list_grows)
{
	uint64_t ring[NR_MANY + 3];
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t tn;
	size_t i;

	fixture_init(&f);
	tn = f.off.task_thread_node;
	ring[0] = task_va(P2) + tn;
	ring[1] = task_va(T51) + tn;
	ring[2] = task_va(T52) + tn;
	for (i = 0; i < NR_MANY; i++) {
		char comm[16];

		snprintf(comm, sizeof(comm), "many-%zu", i);
		set_task(&f, DM(PA_MANY(i)), 1000 + (int)i, 50, comm,
			 DM(PA_SIGNAL(2)), DM(PA_MM), (uint32_t)(i & 1));
		ring[3 + i] = DM(PA_MANY(i)) + tn;
	}
	link_ring(&f, DM(PA_SIGNAL(2)) + f.off.signal_thread_head, ring,
		  NR_MANY + 3);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	cr_assert_eq(list->nr, 6 + NR_MANY, "%zu tasks", list->nr);
	for (i = 0; i < NR_MANY; i++) {
		const struct ivm_guest_task *t = &list->tasks[5 + i];

		cr_assert_eq(t->pid, 1000 + (int)i, "task %zu", i);
		cr_expect_eq(t->nvcsw, (uint64_t)t->pid * 10);
		cr_expect_eq(t->addr, DM(PA_MANY(i)));
	}
	cr_expect_str_eq(list->tasks[5 + NR_MANY].comm, "swapper/1");
	ivm_guest_task_list_destroy(list);
	/* A cap past the first room, short of the tasks: cut there. */
	cr_assert_null(ivm_kernel_task_list(l, 300, &list));
	cr_expect(list->truncated);
	cr_expect_eq(list->nr, 300);
	cr_expect(strstr(ivm_error_string(list->error), "more than 300"));
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, thread_group_kernels)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;

	fixture_init_with(&f, true);
	cr_expect_eq(f.off.task_thread_node, IVM_KOFF_NONE);
	cr_expect_eq(f.off.signal_thread_head, IVM_KOFF_NONE);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated, "%s",
		      list->error ? ivm_error_string(list->error) : "");
	cr_assert_eq(list->nr, 6, "%zu tasks", list->nr);
	cr_expect_eq(list->tasks[3].pid, 51);
	cr_expect_eq(list->tasks[4].pid, 52);
	ivm_guest_task_list_destroy(list);
	/* A thread ring that never returns to its leader. */
	w64(&f, task_va(T52) + f.off.task_thread_group,
	    task_va(T51) + f.off.task_thread_group);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"));
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, current_in_pcpu_hot)
{
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t task;

	g_pcpu_hot = true;
	fixture_init(&f);
	cr_expect_eq(f.off.pcpu_hot_current_task, PCPU_HOT_CURRENT);
	w64(&f, DM(PA_PCPU0) + PCPU_HOT + PCPU_HOT_CURRENT, task_va(P2));
	w64(&f, DM(PA_PCPU1) + PCPU_HOT + PCPU_HOT_CURRENT, task_va(T52));
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_current_task(l, 0, NULL, &task));
	cr_expect_eq(task, task_va(P2));
	cr_assert_null(ivm_kernel_current_task(l, 1, NULL, &task));
	cr_expect_eq(task, task_va(T52));
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* Optional symbols missing: defaults, page walks, no idle tasks but CPU 0's. */
Test(kernel_layout, minimal_symbols)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t task;
	unsigned int cpu;
	struct ivm_error *err;

	g_minimal_symbols = true;
	fixture_init(&f);
	l = create_ok(&f);
	cr_expect_eq(ivm_kernel_layout_slide(l), SLIDE);
	/* phys_base from where the banner really is. */
	cr_expect_eq(ivm_kernel_layout_phys_base(l), 0);
	/* Without init_top_pgt: the vCPU's page table. */
	cr_expect_eq(ivm_kernel_layout_cr3(l), PA_VCPU_PML4);
	cr_expect_eq(ivm_kernel_layout_page_offset_base(l),
		     0xffff888000000000ull);
	cr_assert_null(ivm_kernel_current_task(l, 0, NULL, &task));
	cr_expect_eq(task, task_va(T51));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 0), KVA(L_INIT_TASK));
	cr_expect_eq(ivm_kernel_layout_idle_task(l, 1), 0);
	err = ivm_kernel_cpu_from_apic_id(l, 0, &cpu);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	cr_assert_null(ivm_kernel_task_list(l, 0, &list));
	cr_expect_not(list->truncated);
	cr_expect_eq(list->nr, 5);
	ivm_guest_task_list_destroy(list);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

static struct ivm_guest_task_list *walk(struct fixture *f, size_t max)
{
	struct ivm_guest_task_list *list;
	struct ivm_kernel_layout *l = create_ok(f);

	cr_assert_null(ivm_kernel_task_list(l, max, &list));
	ivm_kernel_layout_destroy(l);
	return list;
}

Test(kernel_layout, thread_list_cycle_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;
	uint64_t tn;

	fixture_init(&f);
	tn = f.off.task_thread_node;
	/* T52 points back at T51 instead of the head: a ring without end. */
	w64(&f, task_va(T52) + tn, task_va(T51) + tn);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_assert_not_null(list->error);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	/*
	 * What was read before the cycle is kept (init, P1, P2, T51, T52),
	 * and the idle task of CPU 1, found apart from the lists.
	 */
	cr_expect_eq(list->nr, 6);
	cr_expect_str_eq(list->tasks[5].comm, "swapper/1");
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, leader_self_loop_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;
	uint64_t tn;

	fixture_init(&f);
	tn = f.off.task_thread_node;
	w64(&f, task_va(P1) + tn, task_va(P1) + tn);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, process_list_cycle_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;
	uint64_t tt;

	fixture_init(&f);
	tt = f.off.task_tasks;
	w64(&f, task_va(P2) + tt, task_va(P1) + tt);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_expect(strstr(ivm_error_string(list->error), "loops"), "%s",
		  ivm_error_string(list->error));
	cr_expect_eq(list->nr, 6);
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, bad_pointer_mid_walk_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;

	fixture_init(&f);
	/* P1's next process lies in unmapped vmalloc space. */
	w64(&f, task_va(P1) + f.off.task_tasks, 0xffffc90000001000ull);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_assert_not_null(list->error);
	cr_expect_eq(list->error->code, IVM_ERROR_FAULT, "%s",
		     ivm_error_string(list->error));
	/* init_task and P1 were read, and CPU 1's idle task. */
	cr_expect_eq(list->nr, 3);
	cr_expect_eq(list->tasks[1].pid, 1);
	cr_expect_str_eq(list->tasks[2].comm, "swapper/1");
	ivm_guest_task_list_destroy(list);

	/* A user-space pointer is refused before it is followed. */
	w64(&f, task_va(P1) + f.off.task_tasks, 0x400000);
	list = walk(&f, 0);
	cr_expect(list->truncated);
	cr_expect_eq(list->error->code, IVM_ERROR_PROTOCOL);
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, cap_truncates)
{
	struct fixture f;
	struct ivm_guest_task_list *list;

	fixture_init(&f);
	list = walk(&f, 3);
	cr_expect(list->truncated);
	cr_expect_eq(list->nr, 3);
	cr_expect(strstr(ivm_error_string(list->error), "more than 3"));
	ivm_guest_task_list_destroy(list);
	fixture_fini(&f);
}

Test(kernel_layout, comm_without_nul)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;

	fixture_init(&f);
	memset(at(&f, task_va(P1) + f.off.task_comm), 'A', 16);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task(l, task_va(P1), &t));
	cr_expect_eq(strlen(t.comm), 16);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * on_cpu says whether a task's saved switch frame is its stack; a kernel
 * without the member reads as "not on a CPU", whatever the bytes there.
 */
Test(kernel_layout, on_cpu_read_when_the_kernel_has_it)
{
	struct fixture f;
	struct ivm_kernel_layout *l;
	struct ivm_guest_task t;

	fixture_init(&f);
	cr_assert_eq(f.off.task_on_cpu, 40);
	w32(&f, task_va(P1) + 40, 1);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task(l, task_va(P1), &t));
	cr_expect(t.on_cpu);
	cr_assert_null(ivm_kernel_read_task(l, task_va(T51), &t));
	cr_expect_not(t.on_cpu);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);

	fixture_init_with(&f, true);
	cr_assert_eq(f.off.task_on_cpu, IVM_KOFF_NONE);
	w32(&f, task_va(P1) + 40, 1);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_read_task(l, task_va(P1), &t));
	cr_expect_not(t.on_cpu);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Who ran last on an idle CPU: the greatest se.exec_start among the tasks
 * of that CPU, never an idle task, one still on a CPU, or the helper's.
 * CPU 1 holds init (pid 1) and sleeper-t2 (52); CPU 0 sleeper (50) and
 * sleeper-t1 (51).
 */
Test(kernel_layout, cpu_switches_per_cpu)
{
	struct ivm_kernel_layout *l;
	struct fixture f;
	struct ivm_error *err;
	uint64_t va, n;

	fixture_init(&f);
	cr_assert_eq(f.off.rq_nr_switches, RQ_NR_SWITCHES);
	w64(&f, DM(PA_PCPU0) + PCPU_RUNQUEUES + RQ_NR_SWITCHES, 1234);
	w64(&f, DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_NR_SWITCHES, 98765);
	l = create_ok(&f);
	cr_assert_null(ivm_kernel_cpu_switches_va(l, 1, &va));
	cr_expect_eq(va, DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_NR_SWITCHES);
	cr_assert_null(ivm_kernel_cpu_switches(l, 0, &n));
	cr_expect_eq(n, 1234);
	cr_assert_null(ivm_kernel_cpu_switches(l, 1, &n));
	cr_expect_eq(n, 98765);
	/* Beyond nr_cpu_ids (2 here). */
	err = ivm_kernel_cpu_switches(l, 2, &n);
	cr_expect(err && err->code == IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);

	/* A kernel whose BTF has no rq.nr_switches. */
	fixture_init_with(&f, true);
	l = create_ok(&f);
	err = ivm_kernel_cpu_switches(l, 0, &n);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, last_ran_on_a_cpu)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task, t = 0;
	struct ivm_error *err;

	fixture_init(&f);
	cr_assert_eq(f.off.task_se_exec_start, 0x108);
	w64(&f, task_va(P1) + 0x108, 500);
	w64(&f, task_va(T52) + 0x108, 900);
	w64(&f, task_va(P2) + 0x108, 2000);
	w64(&f, task_va(T51) + 0x108, 100);
	/* The idle tasks' stamps are the newest, and never the answer. */
	w64(&f, task_va(IDLE1) + 0x108, 99999);
	w64(&f, KVA(L_INIT_TASK) + 0x108, 99999);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	cr_assert_null(ivm_last_ran_find(lr, 0, 0, t, &task));
	cr_expect_eq(task, task_va(P2));

	/*
	 * Running there (the CPU left idle since), or still switching out
	 * (then it is the one): the next one would be a guess.
	 */
	w32(&f, task_va(T52) + 40, 1);
	err = ivm_last_ran_find(lr, 1, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(ivm_last_ran_stats(lr)->running_refused, 1);
	/* Running on CPU 0 does not say CPU 1 left idle. */
	cr_assert_null(ivm_last_ran_find(lr, 0, 0, t, &task));
	cr_expect_eq(task, task_va(P2));
	w32(&f, task_va(T52) + 40, 0);

	/* Values are read anew at each lookup, the list kept: 52 moved. */
	w32(&f, task_va(T52) + f.off.task_cpu, 0);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(P1));

	/* CPU 0 now holds only process 50's threads, newest 50 itself. */
	cr_assert_null(ivm_last_ran_find(lr, 0, 1, t, &task));
	cr_expect_eq(task, task_va(P2));
	/* As the helper's process, 50 is never named: nobody is left. */
	err = ivm_last_ran_find(lr, 0, 50, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);

	/* No task on that CPU. */
	err = ivm_last_ran_find(lr, 7, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);

	/* A kernel whose task_struct has no se.exec_start. */
	fixture_init_with(&f, true);
	l = create_ok(&f);
	err = ivm_last_ran_create(l, f.gmem, &lr);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Tasks forked since the walk (the kernel's total_forks moved): a lookup
 * no exact stamp answers walks again, at most every IVM_LAST_RAN_STALE_NS,
 * and fails rather than name an older task when it cannot; an exact stamp
 * still answers.
 */
Test(kernel_layout, last_ran_refuses_stale_candidates)
{
	const uint64_t stale_ns = IVM_LAST_RAN_STALE_NS;
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task, arrival, t = 5;
	struct ivm_error *err;

	fixture_init(&f);
	w64(&f, task_va(P1) + 0x108, 500);
	w64(&f, task_va(T52) + 0x108, 900);
	w64(&f, task_va(T52) + f.off.task_sched_info_last_arrival, 600);
	w64(&f, KVA(L_TOTAL_FORKS), 1000);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* A child forked (and gone) since: the latest candidate may not be. */
	w64(&f, KVA(L_TOTAL_FORKS), 1001);
	err = ivm_last_ran_find(lr, 1, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	err = ivm_last_ran_first_since(lr, 1, 0, 100, t, &task, &arrival);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_refused, 1);
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_refused_first, 1);
	/* The switch to idle stamped T52: exact whatever forked... */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* ... also once the clock moved on, by the CPU's idle stamp. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 1200, 900, t, &task));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->exact, 2);
	/* Later, a walk of its own: the candidates are whole again. */
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t + stale_ns, &task));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_walks, 1);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 100, t + stale_ns,
						&task, &arrival));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_refused, 1);
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_local, 0);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Task t's scheduler stamps as the fixture lays them out: switched in at
 * arrival (sched_info.last_arrival), last accounted at end
 * (se.exec_start, 0x108).
 */
static void stamps(struct fixture *f, int t, uint64_t arrival, uint64_t end)
{
	w64(f, task_va(t) + f->off.task_sched_info_last_arrival, arrival);
	w64(f, task_va(t) + 0x108, end);
}

/* ... and how many times it was switched in (sched_info.pcount). */
static void switched_in(struct fixture *f, int t, uint64_t pcount)
{
	w64(f, task_va(t) + f->off.task_sched_info_pcount, pcount);
}

/*
 * The same tasks with their switch-in stamps (sched_info.last_arrival at
 * 0x120): the exact to-idle task by the idle CPU's clock, the first task
 * switched in since a clock, and the runs of a window.
 */
Test(kernel_layout, last_ran_by_stamps)
{
	struct ivm_last_ran_run runs[8];
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task, arrival, t = 0;
	struct ivm_error *err;
	size_t nr;

	fixture_init(&f);
	cr_assert_eq(f.off.task_sched_info_last_arrival, 0x120);
	cr_assert_eq(f.off.task_sched_info_pcount, 0x110);
	/* CPU 1: init ran 400..500, sleeper-t2 600..900. */
	stamps(&f, P1, 400, 500);
	stamps(&f, T52, 600, 900);
	/* CPU 0: sleeper 1000..2000. */
	stamps(&f, P2, 1000, 2000);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));

	/* Clock 900 on CPU 1: sleeper-t2 switched out at it. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* It was woken onto CPU 0 since: still the one, by its stamp... */
	w32(&f, task_va(T52) + f.off.task_cpu, 0);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* ... where the plain lookup names an earlier task. */
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* A clock nobody stamped: the plain lookup's answer. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 950, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	w32(&f, task_va(T52) + f.off.task_cpu, 1);

	/* The first task switched in on CPU 1 after 450: sleeper-t2, at 600. */
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 450, t, &task,
						&arrival));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(arrival, 600);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 300, t, &task,
						&arrival));
	cr_expect_eq(task, task_va(P1));
	cr_expect_eq(arrival, 400);
	err = ivm_last_ran_first_since(lr, 1, 0, 900, t, &task, NULL);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);

	/* The runs of CPU 1 after 450: init's (ended 500) and sleeper-t2's. */
	cr_assert_null(ivm_last_ran_window(lr, 1, 0, 450, IVM_LAST_RAN_UNKNOWN, t,
					   runs, 8, &nr));
	cr_expect_eq(nr, 2);
	cr_assert_null(ivm_last_ran_window(lr, 1, 0, 450, IVM_LAST_RAN_UNKNOWN, t,
					   runs, 1, &nr));
	cr_expect_eq(runs[0].arrivals, IVM_LAST_RAN_UNKNOWN);
	cr_expect_eq(nr, 1);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A run-queue clock that stood still over several switches (TCG's
 * sched_clock held to the tick's): every task that stopped in that while
 * has the stamp of the switch to idle.  The last is the one that arrived
 * at it; two arrived at it, and no task is named, not even the latest.
 */
Test(kernel_layout, last_ran_tied_stamps)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task = 0, t = 0;
	struct ivm_error *err;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	/* CPU 1 at 900: sleeper-t2 ran since 600, init in and out at 900. */
	stamps(&f, T52, 600, 900);
	stamps(&f, P1, 900, 900);
	stamps(&f, P2, 1000, 2000);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* The same by the idle stamp, the clock moved on. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 1300, 900, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* The other way round: init first, sleeper-t2 in and out at 900. */
	stamps(&f, P1, 400, 900);
	stamps(&f, T52, 900, 900);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->exact, 3);
	/* Both switched in at 900: either ran last. */
	stamps(&f, P1, 900, 900);
	task = 0;
	err = ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(task, 0);
	cr_expect_eq(ivm_last_ran_stats(lr)->tied_refused, 1);
	cr_expect_eq(ivm_last_ran_stats(lr)->latest, 0);
	/* Alone on the stamp but running: the clock was of its switch in. */
	stamps(&f, P1, 400, 500);
	w32(&f, task_va(T52) + 40, 1);
	err = ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(ivm_last_ran_stats(lr)->tied_refused, 2);
	w32(&f, task_va(T52) + 40, 0);
	/* A task of CPU 0 on CPU 1's stamp does not tie with them. */
	stamps(&f, P1, 400, 500);
	stamps(&f, P2, 900, 900);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Held, lookups answer from the first read of the hold: a stamp written
 * since is not seen until the release (or a new hold), last_arrival
 * included, which comes in the same piece as the rest here (the words are
 * less than 4 KiB apart).  Released, every lookup reads again.
 */
Test(kernel_layout, last_ran_held_reads_once)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	struct ivm_error *err;
	uint64_t task, t = 0;

	fixture_init(&f);
	/* CPU 1: init ran 400..500, sleeper-t2 600..900. */
	stamps(&f, P1, 400, 500);
	stamps(&f, T52, 600, 900);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));

	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* init runs again, 1000..1100: the hold still has the old stamps. */
	stamps(&f, P1, 1000, 1100);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* last_arrival came in the same piece: init's new one is not seen. */
	err = ivm_last_ran_first_since(lr, 1, 0, 950, t, &task, NULL);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	/* A new hold reads again. */
	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 950, t, &task, NULL));
	cr_expect_eq(task, task_va(P1));
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* Released: each lookup reads. */
	ivm_last_ran_release(lr);
	stamps(&f, T52, 1200, 1300);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * CPU 1 idle since clock 450, marked then: init (switched in 10 times so
 * far) and sleeper-t2 (20).  After the wakeup init ran first at 500,
 * sleeper-t2 cut in at 600, init came back at 700 and shows only that
 * arrival: the smallest arrival names sleeper-t2, the mark init.
 */
static void cut_in(struct fixture *f)
{
	stamps(f, P1, 300, 400);
	stamps(f, T52, 200, 450);
	switched_in(f, P1, 10);
	switched_in(f, T52, 20);
}

static void after_cut_in(struct fixture *f)
{
	stamps(f, P1, 700, 800);
	switched_in(f, P1, 12);
	stamps(f, T52, 600, 650);
	switched_in(f, T52, 21);
}

static uint64_t first_after(struct ivm_last_ran *lr, uint64_t since,
			    uint64_t now)
{
	uint64_t task = 0;

	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, since, now, &task,
						NULL));
	ivm_last_ran_release(lr);
	return task;
}

/* The caller's name for the stretch of idle the marks are taken in. */
#define EPOCH 7

/* Marked at clock at, idle: the look reads (find_at) and marks. */
static void mark_at(struct ivm_last_ran *lr, uint64_t at)
{
	uint64_t task;

	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, at, 0, 0, &task));
	ivm_last_ran_mark(lr, 1, at, EPOCH);
	ivm_last_ran_release(lr);
}

/* The cut-in, marked at clock at; the answer at now. */
static uint64_t first_marked_at(struct fixture *f, struct ivm_last_ran *lr,
				uint64_t at, uint64_t now)
{
	cut_in(f);
	mark_at(lr, at);
	after_cut_in(f);
	return first_after(lr, 450, now);
}

static void first_by_mark(uint32_t sched_info_at)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;

	si_off = sched_info_at;
	fixture_init(&f);
	si_off = 0x110;
	cr_assert_eq(f.off.task_sched_info_pcount, sched_info_at);
	cut_in(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));

	/* No mark: the smallest arrival, the task that cut in. */
	after_cut_in(&f);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));

	/* Marked while idle: init, switched in twice since, ran first. */
	cr_expect_eq(first_marked_at(&f, lr, 450, 0), task_va(P1));
	/* Outside a hold nothing was read to mark: the mark stands (taken
	 * now, it would hold init's second arrival). */
	ivm_last_ran_mark(lr, 1, 450, EPOCH);
	cr_expect_eq(first_after(lr, 450, 0), task_va(P1));

	/* A mark of an earlier idle period (its clock before since). */
	cr_expect_eq(first_marked_at(&f, lr, 300, 0), task_va(T52));

	/* Taken after the first arrival: counts that already hold it. */
	mark_at(lr, 620);
	switched_in(&f, P1, 14);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));

	/* Two switched in twice since: either could be first. */
	cut_in(&f);
	w32(&f, task_va(P2) + f.off.task_cpu, 1);
	stamps(&f, P2, 100, 200);
	switched_in(&f, P2, 5);
	mark_at(lr, 450);
	after_cut_in(&f);
	stamps(&f, P2, 650, 660);
	switched_in(&f, P2, 7);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));
	/* A count that went back is not a count to go by. */
	switched_in(&f, P2, 4);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));
	/* Switched in once since: init again. */
	switched_in(&f, P2, 6);
	cr_expect_eq(first_after(lr, 450, 0), task_va(P1));
	w32(&f, task_va(P2) + f.off.task_cpu, 0);

	/* The candidates walked again since the mark: marks are void. */
	cr_expect_eq(first_marked_at(&f, lr, 450, 2000000000ull),
		     task_va(T52));

	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* sched_info read with the rest (one piece), and apart (two). */
Test(kernel_layout, last_ran_first_by_mark)
{
	first_by_mark(0x110);
	first_by_mark(0x1100);
}

/* CPU 1's runs after since, and how often each task arrived by the mark. */
static void window_arrivals(struct ivm_last_ran *lr, uint64_t since,
			    uint64_t epoch, uint64_t *init, uint64_t *t2)
{
	struct ivm_last_ran_run runs[8];
	size_t nr, i;

	*init = *t2 = 0;
	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_window(lr, 1, 0, since, epoch, 0, runs, 8,
					   &nr));
	ivm_last_ran_release(lr);
	cr_assert_eq(nr, 2);
	for (i = 0; i < nr; i++) {
		if (runs[i].task == task_va(P1))
			*init = runs[i].arrivals;
		else if (runs[i].task == task_va(T52))
			*t2 = runs[i].arrivals;
	}
}

/*
 * The cut-in again: init ran at 500 and 700, sleeper-t2 at 600.  A window
 * from the look at 450, in the stretch of idle the mark was taken in,
 * says init was switched in twice (its run at 500 hidden by the one at
 * 700) and sleeper-t2 once; a window from another stretch, or from before
 * the mark, says nothing.
 */
Test(kernel_layout, last_ran_window_counts_arrivals_by_the_mark)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t init, t2;

	fixture_init(&f);
	cut_in(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	after_cut_in(&f);
	/* No mark yet. */
	window_arrivals(lr, 450, EPOCH, &init, &t2);
	cr_expect_eq(init, IVM_LAST_RAN_UNKNOWN);
	cr_expect_eq(t2, IVM_LAST_RAN_UNKNOWN);

	cut_in(&f);
	mark_at(lr, 450);
	after_cut_in(&f);
	window_arrivals(lr, 450, EPOCH, &init, &t2);
	cr_expect_eq(init, 2);
	cr_expect_eq(t2, 1);
	/* A later look in the same stretch of idle (clock 460). */
	window_arrivals(lr, 460, EPOCH, &init, &t2);
	cr_expect_eq(init, 2);
	/* Another stretch of idle, or none named: unknown. */
	window_arrivals(lr, 450, EPOCH + 1, &init, &t2);
	cr_expect_eq(init, IVM_LAST_RAN_UNKNOWN);
	window_arrivals(lr, 450, IVM_LAST_RAN_UNKNOWN, &init, &t2);
	cr_expect_eq(t2, IVM_LAST_RAN_UNKNOWN);
	/* A window from before the mark: arrivals before it are not counted. */
	window_arrivals(lr, 440, EPOCH, &init, &t2);
	cr_expect_eq(init, IVM_LAST_RAN_UNKNOWN);

	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A span of a kernel object as one physical piece: only if its pages are
 * adjacent in guest physical memory.  Four 4 KiB pages above the image:
 * the first two apart, the second and third adjacent, the fourth absent.
 */
Test(kernel_layout, translate_range)
{
	uint64_t va = KVA(LINK_BASE) + (2u << 20), pa = 0;
	struct ivm_kernel_layout *l;
	struct ivm_error *err;
	struct fixture f;

	fixture_init(&f);
	pte(f.a + PA_PD_K, idx(va, 2), 0x8000 | 3);
	pte(f.a + 0x8000, 0, 0xa000 | 3);
	pte(f.a + 0x8000, 1, 0xc000 | 3);
	pte(f.a + 0x8000, 2, 0xd000 | 3);
	l = create_ok(&f);
	err = ivm_kernel_translate_range(l, va + 0xff0, 0x20, &pa);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND, "%s",
		  err ? ivm_error_string(err) : "no error");
	ivm_error_destroy(err);
	cr_assert_null(ivm_kernel_translate_range(l, va + 0x1ff0, 0x20, &pa));
	cr_expect_eq(pa, 0xcff0);
	cr_assert_null(ivm_kernel_translate_range(l, va + 0x10, 0x20, &pa));
	cr_expect_eq(pa, 0xa010);
	/* Running into the absent page: the walk's error. */
	err = ivm_kernel_translate_range(l, va + 0x2ff0, 0x20, &pa);
	cr_expect(err && err->code != IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	/* The direct map, by arithmetic, is adjacent across pages. */
	cr_assert_null(ivm_kernel_translate_range(l, DM(0x40ff0), 0x20, &pa));
	cr_expect_eq(pa, 0x40ff0);
	err = ivm_kernel_translate_range(l, ~0ull - 8, 0x20, &pa);
	cr_expect(err && err->code == IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(kernel_layout, hostile_per_cpu_data)
{
	struct fixture f;
	struct ivm_error *err;

	fixture_init(&f);
	/* A huge nr_cpu_ids is capped, and then the offsets are bogus. */
	w32(&f, KVA(L_NR_CPU_IDS), 0xffffffffu);
	err = create_err(&f);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL, "%s",
		     ivm_error_string(err));
	ivm_error_destroy(err);
	w32(&f, KVA(L_NR_CPU_IDS), 0);
	err = create_err(&f);
	ivm_error_destroy(err);
	w32(&f, KVA(L_NR_CPU_IDS), 2);
	w64(&f, KVA(L_PER_CPU_OFFSET) + 8, 0x1000);
	err = create_err(&f);
	cr_expect(strstr(ivm_error_string(err), "__per_cpu_offset[1]"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	w64(&f, KVA(L_PER_CPU_OFFSET) + 8, DM(PA_PCPU1));
	w64(&f, KVA(L_MAX_PFN), ~0ull);
	err = create_err(&f);
	cr_expect(strstr(ivm_error_string(err), "max_pfn"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	fixture_fini(&f);
}

/* ---- vcpu_watch over the same synthetic guest --------------------------- */

#include "profile/vcpu_watch.h"

Test(vcpu_watch, one_batch_for_all_vcpus)
{
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = KVA(L_INIT_TASK) },	/* image: walk */
		{ .cpu = 1, .idle_task = task_va(IDLE1) },	/* direct map */
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t failed = 0;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, &failed));
	cr_expect_eq(failed, 0);
	cr_expect(v[0].current_ok && v[1].current_ok);
	cr_expect_eq(v[0].current, task_va(T51));
	cr_expect_eq(v[1].current, task_va(IDLE1));
	/* set_task: nvcsw = pid * 10, nivcsw = pid * 10 + 1, idle pid 0. */
	cr_expect(v[0].idle_switches_ok && v[1].idle_switches_ok);
	cr_expect_eq(v[0].idle_switches, 1);
	cr_expect_eq(v[1].idle_switches, 1);

	/* The guest moves on; the next poll sees it, still in one batch. */
	w64(&f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(T52));
	w64(&f, KVA(L_INIT_TASK) + f.off.task_nvcsw, 41);
	cr_assert_null(ivm_vcpu_watch_read(w, 2, v, &failed));
	cr_expect_eq(v[1].current, task_va(T52));
	cr_expect_eq(v[0].idle_switches, 42);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->batches, 2);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->fallbacks, 0);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->translations, 1);

	/* A garbage current is not passed on, the other vCPU still is. */
	w64(&f, DM(PA_PCPU0) + PCPU_CURRENT_TASK, 0x1234);
	cr_assert_null(ivm_vcpu_watch_read(w, 3, v, &failed));
	cr_expect_not(v[0].current_ok);
	cr_expect(v[1].current_ok);
	cr_expect_eq(failed, 1);

	/* Translations are redone after IVM_VCPU_WATCH_RETRANSLATE_NS. */
	cr_assert_null(ivm_vcpu_watch_read(w, 3 + IVM_VCPU_WATCH_RETRANSLATE_NS,
					   v, NULL));
	cr_expect_eq(ivm_vcpu_watch_stats(w)->translations, 2);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A second read that only checks the first (profiler.c settle_views):
 * the words that tell a switch, and none of the others.
 */
Test(vcpu_watch, switches_alone)
{
	const uint64_t clock0 = DM(PA_PCPU0) + PCPU_RUNQUEUES + 0x90;
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = KVA(L_INIT_TASK),
		  .rq_clock_va = clock0 },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;
	unsigned int i;

	fixture_init(&f);
	l = create_ok(&f);
	for (i = 0; i < 2; i++)
		cr_assert_null(ivm_kernel_cpu_switches_va(l, i,
							  &targets[i].switches_va));
	w64(&f, DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_NR_SWITCHES, 77);
	w64(&f, clock0, 5000);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read_switches(w, 1, v));
	cr_expect(v[0].current_ok && v[1].current_ok);
	cr_expect_eq(v[0].current, task_va(T51));
	cr_expect(v[0].idle_switches_ok && v[1].idle_switches_ok);
	cr_expect_eq(v[1].idle_switches, 1);
	cr_expect(v[1].cpu_switches_ok);
	cr_expect_eq(v[1].cpu_switches, 77);
	/* The run queue's clock is not a switch's word: left unread. */
	cr_expect_not(v[0].rq_clock_ok);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->batches, 1);
	/* ... which a whole read has. */
	cr_assert_null(ivm_vcpu_watch_read(w, 2, v, NULL));
	cr_expect(v[0].rq_clock_ok);
	cr_expect_eq(v[0].rq_clock, 5000);
	cr_expect_eq(v[1].cpu_switches, 77);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A switch under way: rq->curr is the task arriving while current is
 * still the one leaving (its stacks not switched yet).  The view says so,
 * in a whole read and in the check of the switch words alone.
 */
Test(vcpu_watch, mid_switch)
{
	const uint64_t curr1 = DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_CURR;
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = KVA(L_INIT_TASK) },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_kernel_layout *l;
	struct ivm_vcpu_watch_view v[2];
	struct fixture f;
	struct ivm_vcpu_watch *w;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_eq(f.off.rq_curr, RQ_CURR);
	cr_assert_null(ivm_kernel_cpu_rq_curr_va(l, 0, &targets[0].rq_curr_va));
	cr_assert_null(ivm_kernel_cpu_rq_curr_va(l, 1, &targets[1].rq_curr_va));
	cr_expect_eq(targets[1].rq_curr_va, curr1);
	/* CPU 0 settled on T51; CPU 1 idle, switching to T52. */
	w64(&f, DM(PA_PCPU0) + PCPU_RUNQUEUES + RQ_CURR, task_va(T51));
	w64(&f, curr1, task_va(T52));
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, NULL));
	cr_expect_eq(v[1].current, task_va(IDLE1));
	cr_expect(v[1].mid_switch);
	cr_expect_not(v[0].mid_switch);
	cr_assert_null(ivm_vcpu_watch_read_switches(w, 2, v));
	cr_expect(v[1].mid_switch);
	/* The stacks switched: current caught up. */
	w64(&f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(T52));
	cr_assert_null(ivm_vcpu_watch_read_switches(w, 3, v));
	cr_expect_not(v[1].mid_switch);
	cr_expect_eq(v[1].current, task_va(T52));
	ivm_vcpu_watch_destroy(w);
	/* Not watched: never taken as a switch under way. */
	targets[1].rq_curr_va = 0;
	w64(&f, curr1, task_va(P1));
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 4, v, NULL));
	cr_expect_not(v[1].mid_switch);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(vcpu_watch, unreadable_word_falls_back_alone)
{
	/* An idle task whose counters lie past the end of guest RAM. */
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = DM(A_SIZE + 0x1000) },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t failed = 0;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, &failed));
	cr_expect_not(v[0].idle_switches_ok);
	cr_expect(v[0].current_ok);
	cr_expect(v[1].current_ok && v[1].idle_switches_ok);
	cr_expect_eq(failed, 2);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->fallbacks, 1);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(vcpu_watch, unwatched_vcpu_and_no_counters)
{
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = -1, .idle_task = 0 },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     IVM_KOFF_NONE, IVM_KOFF_NONE, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, NULL));
	cr_expect_not(v[0].current_ok);
	cr_expect(v[1].current_ok);
	cr_expect_not(v[1].idle_switches_ok);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* CPU cpu's count of switch-ins (rq->rq_sched_info.pcount). */
static void rq_switched_in(struct fixture *f, int cpu, uint64_t pcount)
{
	w64(f, DM(cpu ? PA_PCPU1 : PA_PCPU0) + PCPU_RUNQUEUES + RQ_SCHED_INFO,
	    pcount);
}

/* Task t ran on CPU 1 from arrival to end, its count and the CPU's raised. */
static void ran_on_1(struct fixture *f, int t, uint64_t arrival, uint64_t end,
		     uint64_t pcount, uint64_t rq_pcount)
{
	stamps(f, t, arrival, end);
	switched_in(f, t, pcount);
	rq_switched_in(f, 1, rq_pcount);
}

/*
 * CPU 1: init ran 400..500, sleeper-t2 600..900; CPU 0: sleeper; their
 * counts of switch-ins and the CPUs'.
 */
static void counted_runs(struct fixture *f)
{
	stamps(f, P1, 400, 500);
	switched_in(f, P1, 3);
	stamps(f, T52, 600, 900);
	switched_in(f, T52, 5);
	stamps(f, P2, 1000, 2000);
	switched_in(f, P2, 7);
	rq_switched_in(f, 0, 100);
	rq_switched_in(f, 1, 200);
}

/* The task that went to idle on CPU 1 at clock, looked up at now_ns. */
static uint64_t to_idle_on_1(struct ivm_last_ran *lr, uint64_t clock,
			     uint64_t now_ns)
{
	uint64_t task = 0;

	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, clock, 0, now_ns,
					    &task));
	return task;
}

/* The stamps' reads so far: of all tasks, of the hot ones, and missed. */
static void reads_were(const struct ivm_last_ran_stats *st, uint64_t full,
		       uint64_t hot, uint64_t misses)
{
	cr_expect_eq(st->full_reads, full);
	cr_expect_eq(st->hot_reads, hot);
	cr_expect_eq(st->hot_misses, misses);
}

static void hot_reads(uint32_t sched_info_at)
{
	const uint64_t s = 1000000000ull;	/* a walk's and the hot set's span */
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	const struct ivm_last_ran_stats *st;
	struct fixture f;
	uint64_t task, arrival;

	si_off = sched_info_at;
	g_rq_pcount = true;
	fixture_init(&f);
	si_off = 0x110;
	g_rq_pcount = false;
	counted_runs(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	st = ivm_last_ran_stats(lr);

	cr_expect_eq(to_idle_on_1(lr, 900, 0), task_va(T52));
	/* A walk later: nobody switched in for a second, all of them cold. */
	cr_expect_eq(to_idle_on_1(lr, 900, 2 * s), task_va(T52));
	reads_were(st, 2, 0, 0);
	/* The counts have not moved: a read of none of the tasks stands. */
	cr_expect_eq(to_idle_on_1(lr, 900, 2 * s + 1), task_va(T52));
	reads_were(st, 2, 1, 0);

	/* Sleeper-t2, cold, ran again: the counts say so, all are read. */
	ran_on_1(&f, T52, 1700, 1800, 6, 201);
	cr_expect_eq(to_idle_on_1(lr, 1800, 2 * s + 2), task_va(T52));
	reads_were(st, 3, 1, 1);
	/* ... and again: hot now, read alone, and all it shows stands. */
	ran_on_1(&f, T52, 1900, 2000, 7, 202);
	cr_expect_eq(to_idle_on_1(lr, 2000, 2 * s + 3), task_va(T52));
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 1850, 2 * s + 3,
						&task, &arrival));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(arrival, 1900);
	reads_were(st, 3, 3, 1);

	/*
	 * Words of a cold task that moved with no count (no kernel does
	 * that) are not read again: the proof the hot read left it out.
	 */
	stamps(&f, P1, 2100, 2200);
	cr_expect_eq(to_idle_on_1(lr, 2200, 2 * s + 4), task_va(T52));
	/* Counted, as the scheduler does: read, and named by its stamp. */
	ran_on_1(&f, P1, 2100, 2200, 4, 203);
	cr_expect_eq(to_idle_on_1(lr, 2200, 2 * s + 5), task_va(P1));
	reads_were(st, 4, 4, 2);

	/* A task's count that went back is another task's: all are read. */
	ran_on_1(&f, T52, 2300, 2400, 6, 204);
	cr_expect_eq(to_idle_on_1(lr, 2400, 2 * s + 6), task_va(T52));
	reads_were(st, 5, 4, 3);

	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * With the run queues' counts of switch-ins (last_ran.h "hot reads"): a
 * lookup reads the tasks that ran lately, and all of them when the counts
 * say another ran; its answers are those of a full read.  sched_info read
 * with the rest (one piece), and apart (two).
 */
Test(kernel_layout, last_ran_hot_reads)
{
	hot_reads(0x110);
	hot_reads(0x1100);
}

/* CPU cpu's run-queue clock, and task t's count of changes of CPU. */
static void rq_clock_is(struct fixture *f, int cpu, uint64_t clock)
{
	w64(f, DM(cpu ? PA_PCPU1 : PA_PCPU0) + PCPU_RUNQUEUES + RQ_CLOCK,
	    clock);
}

static void migrated(struct fixture *f, int t, uint64_t nr_migrations)
{
	w64(f, task_va(t) + f->off.task_se_nr_migrations, nr_migrations);
}

/*
 * CPU 1's latest task, which must also be the first switched in there
 * since since.
 */
static uint64_t latest_and_first_on_1(struct ivm_last_ran *lr, uint64_t since)
{
	uint64_t latest, first, arrival;

	cr_assert_null(ivm_last_ran_find(lr, 1, 0, 0, &latest));
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, since, 0, &first,
						&arrival));
	cr_expect_eq(first, latest);
	return latest;
}

/* A lookup on cpu that stale candidates must refuse, counted in *count. */
static void refused(struct ivm_error *err, const uint64_t *count,
		    uint64_t want)
{
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(*count, want);
}

/*
 * Forks seen one CPU at a time (last_ran.h): a child forked since the walk
 * and switched in on CPU 0 only leaves CPU 1's lookups answered; one
 * switched in on CPU 1 refuses them until a candidate runs there after
 * it.  A candidate that changed CPU counts for neither CPU, even where
 * its cpu field is back and its rise would hide a child's.
 */
Test(kernel_layout, last_ran_forks_one_cpu_at_a_time)
{
	const struct ivm_last_ran_stats *st;
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct ivm_error *err;
	struct fixture f;
	uint64_t task, arrival;
	size_t nr;

	g_rq_pcount = true;
	fixture_init(&f);
	g_rq_pcount = false;
	cr_assert_neq(f.off.task_se_nr_migrations, IVM_KOFF_NONE);
	cr_assert_eq(f.off.rq_clock, RQ_CLOCK);
	counted_runs(&f);
	rq_clock_is(&f, 0, 2500);
	rq_clock_is(&f, 1, 1000);
	w64(&f, KVA(L_TOTAL_FORKS), 1000);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	st = ivm_last_ran_stats(lr);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, 0, &task));
	cr_expect_eq(task, task_va(T52));

	/* A child forked, ran on CPU 0 and is gone: CPU 1 still answers. */
	w64(&f, KVA(L_TOTAL_FORKS), 1001);
	rq_switched_in(&f, 0, 101);
	rq_clock_is(&f, 0, 2600);
	rq_clock_is(&f, 1, 1100);
	cr_expect_eq(latest_and_first_on_1(lr, 450), task_va(T52));
	cr_expect_eq(st->stale_local, 2);
	/* CPU 0's latest task may be older than the child: refused. */
	refused(ivm_last_ran_find(lr, 0, 0, 0, &task), &st->stale_refused, 1);
	refused(ivm_last_ran_first_since(lr, 0, 0, 2500, 0, &task, &arrival),
		&st->stale_refused_first, 1);
	/* Since a clock after CPU 0's count moved, it answers again. */
	err = ivm_last_ran_first_since(lr, 0, 0, 2600, 0, &task, &arrival);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(st->stale_refused_first, 1);
	cr_expect_eq(st->stale_local, 3);

	/*
	 * Sleeper-t2 woken onto CPU 0, run there, woken back onto CPU 1 and
	 * waiting; a child ran on CPU 1.  Its rise of one would hide the
	 * child's switch-in on CPU 1, but it changed CPU: CPU 1 refuses.
	 */
	w64(&f, KVA(L_TOTAL_FORKS), 1002);
	switched_in(&f, T52, 6);
	migrated(&f, T52, 2);
	rq_switched_in(&f, 0, 102);
	rq_switched_in(&f, 1, 201);
	rq_clock_is(&f, 0, 2700);
	rq_clock_is(&f, 1, 1200);
	refused(ivm_last_ran_find(lr, 1, 0, 0, &task), &st->stale_refused, 2);
	refused(ivm_last_ran_window(lr, 1, 0, 450, IVM_LAST_RAN_UNKNOWN, 0,
				    NULL, 0, &nr),
		&st->stale_refused_window, 1);
	/* Nothing ran since: still nothing known after the child. */
	refused(ivm_last_ran_find(lr, 1, 0, 0, &task), &st->stale_refused, 3);
	/* Init runs there after it: the latest task, and known. */
	ran_on_1(&f, P1, 1250, 1300, 4, 202);
	rq_clock_is(&f, 1, 1300);
	cr_expect_eq(latest_and_first_on_1(lr, 1200), task_va(P1));
	refused(ivm_last_ran_first_since(lr, 1, 0, 1100, 0, &task, &arrival),
		&st->stale_refused_first, 2);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}
