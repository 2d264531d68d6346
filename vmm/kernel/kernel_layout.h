/* SPDX-License-Identifier: MIT */
/*
 * kernel_layout: where the guest kernel is, found from the host alone.
 *
 * From guest memory (vmm/gmem/gmem.h), the vCPUs' registers, the kernel's
 * link-time symbols (vmm/kernel/ksyms.h) and its BTF (vmm/kernel/btf.h), with no help
 * from inside the guest:
 *  - the KASLR slide: linux_banner ("Linux version ...") is looked for at
 *    its link address plus each 2 MiB-aligned slide of the 1 GiB kernel
 *    image range (at most 512 candidates), read through a vCPU's CR3, and
 *    a match is confirmed by init_task's comm being "swapper...";
 *  - phys_base and the kernel's own page table (init_top_pgt), used for
 *    every later read, so no vCPU's CR3 (nor a KPTI user CR3) matters;
 *  - the direct-map base (page_offset_base) and max_pfn;
 *  - per-CPU offsets (__per_cpu_offset[nr_cpu_ids]), the address of each
 *    CPU's `current` (current_task, or pcpu_hot.current_task on 6.2-6.14)
 *    translated once to a guest physical address, and each CPU's idle task.
 * Everything constant is computed once by ivm_kernel_layout_create(); the
 * per-sample calls (ivm_kernel_current_task, ivm_kernel_read_task) do no
 * lookups and no page walks on the hot path.
 *
 * A layout is read-only once created: its functions may be called from
 * several threads at once if the gmem allows concurrent reads.
 *
 * Hostile guest: every pointer read from the guest is checked to be a
 * canonical kernel address before it is followed; list walks are capped
 * and detect cycles; a bad pointer mid-walk ends the walk, marked
 * truncated, with the error kept — never a crash or an endless loop.
 */
#ifndef IVM_KERNEL_LAYOUT_H
#define IVM_KERNEL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/btf.h"
#include "base/error.h"
#include "gmem/gmem.h"
#include "gmem/vmem.h"
#include "kernel/ksyms.h"
#include "base/x86_64_regs.h"

struct ivm_kernel_layout;

/* Bounds on guest-supplied counts. */
#define IVM_KERNEL_MAX_CPUS 4096
#define IVM_KERNEL_MAX_TASKS (1u << 20)
#define IVM_KERNEL_DEFAULT_MAX_TASKS 65536u

/* __START_KERNEL_map: the kernel image mapping of x86-64. */
#define IVM_KERNEL_START_MAP 0xffffffff80000000ull

struct ivm_kernel_layout_config {
	const struct ivm_btf *btf;		/* borrowed; must outlive */
	const struct ivm_ksyms *ksyms;		/* borrowed; must outlive */
	/*
	 * Registers of the vCPUs (index = vCPU number), read only during
	 * create: CR3/CR4 to find the kernel, GS bases to map vCPUs to
	 * guest CPU numbers.  At least one needs valid CRs.
	 */
	const struct ivm_x86_regs *vcpu_regs;
	size_t nr_vcpus;
	/*
	 * A KASLR slide known from elsewhere (VMCOREINFO KERNELOFFSET, the
	 * guest helper): tried first, and an error if the banner says
	 * otherwise.
	 */
	bool has_slide_hint;
	uint64_t slide_hint;
	/*
	 * Optional: the exact linux_banner text of the vmlinux (e.g. read
	 * from its .rodata); when set, the whole banner must match, not just
	 * its "Linux version " prefix.
	 */
	const char *banner;
};

/*
 * Find the layout of the kernel in gmem.  gmem and the config's btf and
 * ksyms are borrowed and must outlive the layout.  Fails with
 * IVM_ERROR_NOT_FOUND when no candidate slide shows the banner (wrong
 * vmlinux, or the kernel has not booted yet), IVM_ERROR_NOT_FOUND naming a
 * missing symbol or member, IVM_ERROR_PROTOCOL when guest data is
 * inconsistent.
 */
struct ivm_error *ivm_kernel_layout_create(
	struct ivm_gmem *gmem, const struct ivm_kernel_layout_config *config,
	struct ivm_kernel_layout **ret);

void ivm_kernel_layout_destroy(struct ivm_kernel_layout *layout);

/* Constant facts found at create. */
uint64_t ivm_kernel_layout_slide(const struct ivm_kernel_layout *layout);
uint64_t ivm_kernel_layout_phys_base(const struct ivm_kernel_layout *layout);
/* The kernel's page-table root (init_top_pgt's physical address). */
uint64_t ivm_kernel_layout_cr3(const struct ivm_kernel_layout *layout);
bool ivm_kernel_layout_la57(const struct ivm_kernel_layout *layout);
uint64_t ivm_kernel_layout_page_offset_base(
	const struct ivm_kernel_layout *layout);
/* nr_cpu_ids, capped at IVM_KERNEL_MAX_CPUS. */
unsigned int ivm_kernel_layout_nr_cpus(const struct ivm_kernel_layout *layout);
/* __per_cpu_offset[cpu] (= GS base of that CPU in kernel mode); 0 if none. */
uint64_t ivm_kernel_layout_per_cpu_offset(
	const struct ivm_kernel_layout *layout, unsigned int cpu);
/* Run-time address of init_task. */
uint64_t ivm_kernel_layout_init_task(const struct ivm_kernel_layout *layout);
/* Idle task of cpu, or 0 if unknown. */
uint64_t ivm_kernel_layout_idle_task(const struct ivm_kernel_layout *layout,
				     unsigned int cpu);
/* Guest CPU of vCPU vcpu as seen at create from its GS bases; -1 unknown. */
int ivm_kernel_layout_vcpu_cpu(const struct ivm_kernel_layout *layout,
			       size_t vcpu);
const struct ivm_kernel_offsets *
ivm_kernel_layout_offsets(const struct ivm_kernel_layout *layout);

/*
 * Run-time address of the kernel symbol name: link address plus the slide
 * for symbols of the kernel image; per-CPU offsets (zero-based per-CPU
 * symbols) are returned as they are.
 */
struct ivm_error *ivm_kernel_symbol(const struct ivm_kernel_layout *layout,
				    const char *name, uint64_t *ret);

/*
 * Read len bytes of kernel virtual memory at va through the kernel's page
 * tables (direct-map addresses are read physically, without a walk).
 */
struct ivm_error *ivm_kernel_read(const struct ivm_kernel_layout *layout,
				  uint64_t va, void *buf, size_t len);

/*
 * A reader of kernel memory over ivm_kernel_read() (layout borrowed, must
 * outlive it), for the walkers that take any struct ivm_kmem_reader.
 */
void ivm_kernel_layout_reader(const struct ivm_kernel_layout *layout,
			      struct ivm_kmem_reader *ret);

/*
 * Guest physical address of kernel virtual address va (the direct map by
 * arithmetic, anything else by a page walk), and in *contiguous how many
 * bytes from there on lie in the same page.  For callers that read the same
 * kernel word over and over (the profiler's poll) and want a physical read
 * without a walk each time.  Nothing here notices the guest remapping va
 * later: such callers translate again from time to time.
 */
struct ivm_error *ivm_kernel_translate(const struct ivm_kernel_layout *layout,
				       uint64_t va, uint64_t *pa,
				       uint64_t *contiguous);

/*
 * The same for the len bytes from va, which must lie at consecutive guest
 * physical addresses from *pa (a slab object in the direct map does, page
 * by page): IVM_ERROR_NOT_FOUND when they do not, errors of
 * ivm_kernel_translate otherwise.  For reading a span of a kernel object
 * as one physical piece.
 */
struct ivm_error *ivm_kernel_translate_range(const struct ivm_kernel_layout *layout,
					     uint64_t va, uint64_t len,
					     uint64_t *pa);

/*
 * Read a pointer at kernel address va and insist that it is a kernel
 * address (IVM_ERROR_PROTOCOL naming what otherwise).
 */
struct ivm_error *ivm_kernel_read_ptr(const struct ivm_kernel_layout *layout,
				      uint64_t va, const char *what,
				      uint64_t *ret);

/* True if va is a canonical upper-half (kernel) address. */
bool ivm_kernel_is_kernel_address(const struct ivm_kernel_layout *layout,
				  uint64_t va);

/*
 * The guest CPU a vCPU is running as, from its GS base: in kernel mode
 * (CPL 0) GS base is that CPU's per-CPU offset, in user mode the kernel GS
 * base is; both are tried (entry code runs briefly in kernel mode with the
 * user GS).  IVM_ERROR_NOT_FOUND when neither is a per-CPU offset (early
 * boot, or registers without GS bases).
 */
struct ivm_error *ivm_kernel_cpu_from_regs(
	const struct ivm_kernel_layout *layout,
	const struct ivm_x86_regs *regs, unsigned int *ret);

/*
 * The guest CPU whose APIC id is apic_id (x86_cpu_to_apicid, read at
 * create).  For a vCPU in user mode when its kernel GS base is unknown (HMP
 * `info registers` does not show it): QMP query-cpus-fast gives each vCPU's
 * topology, hence its APIC id.  A vCPU's guest CPU never changes, so a
 * mapping once found (ivm_kernel_layout_vcpu_cpu, or GS base in kernel
 * mode) can be kept.  IVM_ERROR_NOT_FOUND when no CPU has that id.
 */
#define IVM_KERNEL_NO_APIC_ID UINT32_MAX
struct ivm_error *ivm_kernel_cpu_from_apic_id(
	const struct ivm_kernel_layout *layout, uint32_t apic_id,
	unsigned int *ret);

/*
 * The task_struct address of `current` on guest CPU cpu: one 8-byte
 * physical read.  regs (may be NULL) are that vCPU's registers; when they
 * name a different CPU by GS base, IVM_ERROR_PROTOCOL (the caller's
 * vCPU-to-CPU map is stale).  The pointer is checked to be a canonical
 * kernel address, not that it is a task.
 */
struct ivm_error *ivm_kernel_current_task(
	const struct ivm_kernel_layout *layout, unsigned int cpu,
	const struct ivm_x86_regs *regs, uint64_t *ret);

/*
 * Guest physical address of cpu's `current` slot, translated once at
 * create (the per-CPU area never moves); 0 if it could not be.
 */
uint64_t ivm_kernel_current_pa(const struct ivm_kernel_layout *layout,
			       unsigned int cpu);

/*
 * Address of guest CPU cpu's count of context switches (rq->nr_switches),
 * and that count read now.  Two reads of `current` that agree prove
 * nothing on their own (A, idle, A again); the same count around them
 * does.  IVM_ERROR_NOT_FOUND when the kernel's BTF lacks the field or
 * the symbol table lacks runqueues; IVM_ERROR_INVALID for a CPU beyond
 * nr_cpu_ids.
 */
struct ivm_error *ivm_kernel_cpu_switches_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret);
struct ivm_error *ivm_kernel_cpu_switches(const struct ivm_kernel_layout *layout,
					  unsigned int cpu, uint64_t *ret);

/*
 * Address of guest CPU cpu's rq->curr: the task its scheduler switched
 * to.  A switch writes it next to nr_switches, then switches stacks and
 * only then `current`, so the two differ while a switch is under way.
 * Errors as above.
 */
struct ivm_error *ivm_kernel_cpu_rq_curr_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret);

/*
 * Address of guest CPU cpu's run-queue clock (rq->clock, ns), the clock
 * task_struct.sched_info.last_arrival is stamped with.  Errors as above.
 */
struct ivm_error *ivm_kernel_cpu_rq_clock_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret);

/*
 * Address of guest CPU cpu's rq->idle_stamp: the run queue's clock when
 * the CPU found nothing to run, the same reading the task that went to
 * idle was stamped with (se.exec_start), kept while the CPU idles even
 * when the clock itself moves on; 0 once a task is woken onto it.
 * Errors as above.
 */
struct ivm_error *ivm_kernel_cpu_rq_idle_stamp_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret);

/*
 * Address of guest CPU cpu's count of tasks switched in
 * (rq->rq_sched_info.pcount, CONFIG_SCHEDSTATS): raised with the arriving
 * task's own sched_info.pcount, under the same lock, so the CPUs' counts
 * sum every task's.  Errors as above.
 */
struct ivm_error *ivm_kernel_cpu_rq_pcount_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret);

/* What idlevm reads of a guest task_struct. */
struct ivm_guest_task {
	uint64_t addr;		/* task_struct address */
	int32_t pid;		/* thread id */
	int32_t tgid;		/* process id */
	char comm[64];		/* NUL-terminated; a guest comm without NUL
				 * gives all TASK_COMM_LEN bytes */
	uint64_t state;		/* __state / state */
	uint32_t flags;		/* PF_* */
	uint32_t cpu;		/* CPU it last ran on */
	/*
	 * Executing on a CPU, or still switching out (false when the kernel
	 * has no on_cpu): thread_sp is its stack only while this is false.
	 */
	bool on_cpu;
	uint64_t stack;		/* base of its kernel stack */
	uint64_t thread_sp;	/* saved kernel sp when switched out */
	uint64_t fsbase;	/* 0 if the kernel has no thread.fsbase */
	uint64_t mm;		/* 0 for kernel threads */
	uint64_t active_mm;
	uint64_t signal;
	uint64_t nvcsw, nivcsw;	/* context switch counts */
	bool is_idle;		/* an idle task of some CPU */
};

/* PF_KTHREAD of include/linux/sched.h (stable since 2.6). */
#define IVM_GUEST_PF_KTHREAD 0x00200000u

/*
 * Read the task_struct at task into *ret (one read of the span of the
 * members needed).  comm is always NUL-terminated.
 */
struct ivm_error *ivm_kernel_read_task(const struct ivm_kernel_layout *layout,
				       uint64_t task,
				       struct ivm_guest_task *ret);

/*
 * The same, and in the same read of guest memory the pgd of the mm at
 * mm_guess (0: none), the address space the caller expects the task to
 * have: one system call where the capture's user unwind made a second.
 * *pgd is 0 unless it arrived and the task's mm is mm_guess, so a wrong
 * guess costs nothing but the 8 bytes.
 */
struct ivm_error *ivm_kernel_read_task_pgd(
	const struct ivm_kernel_layout *layout, uint64_t task,
	uint64_t mm_guess, struct ivm_guest_task *ret, uint64_t *pgd);

/*
 * The span of task_struct that ivm_kernel_read_task reads, in bytes from
 * the struct: [lo, hi).  Every member it decodes is in it, and so are
 * tasks, thread_node and thread_group on the kernels met (the walk below
 * uses them from it when they are, and reads them apart when not).
 */
void ivm_kernel_task_span(const struct ivm_kernel_layout *layout,
			  uint32_t *lo, uint32_t *hi);

/*
 * Read that span of the task at task into buf (hi - lo bytes): what
 * ivm_kernel_read_task reads, for a caller that keeps the bytes (the
 * task-list walk takes its links from them).
 */
struct ivm_error *ivm_kernel_read_task_span(
	const struct ivm_kernel_layout *layout, uint64_t task, uint8_t *buf);

/* *ret from span, the bytes of that span of the task at task. */
void ivm_kernel_task_decode(const struct ivm_kernel_layout *layout,
			    uint64_t task, const uint8_t *span,
			    struct ivm_guest_task *ret);

/*
 * CR3 for the task's user address space: the physical address of its
 * mm->pgd.  IVM_ERROR_NOT_FOUND for a kernel thread (no mm).
 */
struct ivm_error *ivm_kernel_task_user_cr3(
	const struct ivm_kernel_layout *layout,
	const struct ivm_guest_task *task, uint64_t *ret);

/* The same from its mm->pgd read already (ivm_kernel_read_task_pgd). */
struct ivm_error *ivm_kernel_user_cr3_of_pgd(
	const struct ivm_kernel_layout *layout,
	const struct ivm_guest_task *task, uint64_t pgd, uint64_t *ret);

struct ivm_guest_task_list {
	struct ivm_guest_task *tasks;
	size_t nr;
	/*
	 * The walk ended early: a pointer could not be read, the lists
	 * loop, or max_tasks was reached; error says which (owned).
	 */
	bool truncated;
	struct ivm_error *error;
	size_t prefetched;	/* tasks read in the hinted walk's batch */
};

/*
 * Walk init_task.tasks (processes) and each process's threads
 * (signal->thread_head, or thread_group on older kernels), then add the
 * idle tasks of the other CPUs, which are on no list.  At most max_tasks
 * (0: IVM_KERNEL_DEFAULT_MAX_TASKS; capped at IVM_KERNEL_MAX_TASKS).  A
 * fault or a cycle mid-walk is not an error: the list is returned truncated
 * (the idle tasks are still added: they do not come from the lists).
 * Fails only for lack of memory.  Free with ivm_guest_task_list_destroy().
 * On a live guest the lists change under the walk; stop the guest for an
 * exact list.
 */
struct ivm_error *ivm_kernel_task_list(const struct ivm_kernel_layout *layout,
				       size_t max_tasks,
				       struct ivm_guest_task_list **ret);

/*
 * The same walk, given the tasks an earlier walk met (hint, nr_hint):
 * their spans, and the heads of the thread lists of those that led a
 * process, are read first in two batches (one process_vm_readv each on
 * the process backend), and the walk takes what it meets of them from
 * there; only what is new since (a task forked, a list relinked) is read
 * one pointer at a time.  A walk of every task of a guest that forks
 * hundreds of children a second (web01 under tests/e2e/web01's hostile
 * program) is redone up to twenty times a second, each of its reads a
 * system call and a page pinned: the batches make most of them one.
 *
 * The batches are read before the walk, so what a task showed in them is
 * older than what the walk would have read, by the batches' time at most:
 * the same walk as one that met its tasks that much sooner, the guest
 * running on meanwhile, as it does under any walk.  A hint that names no
 * task (freed, reused, guest-made) is one the walk never reaches, or reads
 * as garbage that the walk's checks stop at, as they would live.  When a
 * batch cannot be read the walk reads live.  list->prefetched counts the
 * tasks the walk took from the batch.
 */
struct ivm_error *ivm_kernel_task_list_hinted(
	const struct ivm_kernel_layout *layout, size_t max_tasks,
	const uint64_t *hint, size_t nr_hint,
	struct ivm_guest_task_list **ret);

void ivm_guest_task_list_destroy(struct ivm_guest_task_list *list);

#endif /* IVM_KERNEL_LAYOUT_H */
