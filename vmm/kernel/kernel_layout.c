// SPDX-License-Identifier: MIT
/*
 * Reading the guest kernel through its layout (made by kernel_find.c).
 *
 * Everything the hot path needs is computed once at create: the slide, the
 * kernel's own page-table root, the per-CPU offsets, and for each CPU the
 * guest physical address of its `current` pointer, so that reading a
 * vCPU's current task costs one 8-byte physical read and no page walk.
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "gmem/x86_64_paging.h"
#include "kernel/kernel_layout_int.h"

struct ivm_error *ivm_kernel_symbol(const struct ivm_kernel_layout *layout,
				    const char *name, uint64_t *ret)
{
	uint64_t addr;
	struct ivm_error *err = ivm_ksyms_lookup(layout->ksyms, name, &addr);

	if (err)
		return err;
	*ret = runtime_addr(layout, addr);
	return NULL;
}

/* va's guest physical address when [va, va + len) is in the direct map. */
static bool direct_mapped(const struct ivm_kernel_layout *l, uint64_t va,
			  size_t len, uint64_t *gpa)
{
	if (!l->direct_map_end || va < l->page_offset_base ||
	    va >= l->direct_map_end || len > l->direct_map_end - va)
		return false;
	*gpa = va - l->page_offset_base;
	return true;
}

struct ivm_error *ivm_kernel_read(const struct ivm_kernel_layout *layout,
				  uint64_t va, void *buf, size_t len)
{
	const struct ivm_kernel_layout *l = layout;
	uint64_t gpa;

	/* The direct map is linear: skip the page walk. */
	if (direct_mapped(l, va, len, &gpa)) {
		struct ivm_error *err;

		err = ivm_gmem_read_phys(l->gmem, gpa, buf, len);
		if (err && err->code == IVM_ERROR_FAULT)
			err->address += l->page_offset_base;
		return err;
	}
	return ivm_gmem_read_virt(l->gmem, l->cr3, l->la57, va, buf, len);
}

static struct ivm_error *layout_read(void *ctx, uint64_t va, void *buf,
				     size_t len)
{
	return ivm_kernel_read(ctx, va, buf, len);
}

void ivm_kernel_layout_reader(const struct ivm_kernel_layout *layout,
			      struct ivm_kmem_reader *ret)
{
	/* The reader's ctx is not const; ivm_kernel_read only reads it. */
	ret->read = layout_read;
	ret->ctx = (void *)layout;
}

struct ivm_error *ivm_kernel_translate(const struct ivm_kernel_layout *layout,
				       uint64_t va, uint64_t *pa,
				       uint64_t *contiguous)
{
	const struct ivm_kernel_layout *l = layout;
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;

	if (l->direct_map_end && va >= l->page_offset_base &&
	    va < l->direct_map_end) {
		*pa = va - l->page_offset_base;
		*contiguous = IVM_X86_64_PAGE_SIZE_4K -
			      (va & (IVM_X86_64_PAGE_SIZE_4K - 1));
		return NULL;
	}
	err = ivm_x86_64_translate(l->gmem, l->cr3, l->la57, va, &tr);
	if (err)
		return err;
	*pa = tr.pa;
	*contiguous = tr.page_size - (va & (tr.page_size - 1));
	return NULL;
}

struct ivm_error *ivm_kernel_translate_range(const struct ivm_kernel_layout *layout,
					     uint64_t va, uint64_t len,
					     uint64_t *pa)
{
	uint64_t end = va + len, at, pa0, next, contiguous;
	struct ivm_error *err;

	if (end < va)
		return ivm_error_create(IVM_ERROR_INVALID,
					"0x%llx + %llu wraps",
					(unsigned long long)va,
					(unsigned long long)len);
	err = ivm_kernel_translate(layout, va, &pa0, &contiguous);
	for (at = va + contiguous; !err && at < end; at += contiguous) {
		err = ivm_kernel_translate(layout, at, &next, &contiguous);
		if (!err && next != pa0 + (at - va))
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"0x%llx: %llu bytes not contiguous in guest physical memory",
						(unsigned long long)va,
						(unsigned long long)len);
	}
	if (err)
		return err;
	*pa = pa0;
	return NULL;
}

bool ivm_kernel_is_kernel_address(const struct ivm_kernel_layout *layout,
				  uint64_t va)
{
	return is_kernel_ptr(layout, va);
}

uint64_t ivm_kernel_current_pa(const struct ivm_kernel_layout *layout,
			       unsigned int cpu)
{
	return cpu < layout->nr_cpus ? layout->current_pa[cpu] : 0;
}

struct ivm_error *ivm_kernel_read_ptr(const struct ivm_kernel_layout *l,
				      uint64_t va, const char *what,
				      uint64_t *ret)
{
	struct ivm_error *err = kread_u64(l, va, ret);

	if (err)
		return ivm_error_wrap(err, "reading %s", what);
	if (!is_kernel_ptr(l, *ret))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s at 0x%llx is 0x%llx, not a kernel address",
					what, (unsigned long long)va,
					(unsigned long long)*ret);
	return NULL;
}

/* ---- run queues ------------------------------------------------------- */

/*
 * Address of member off of guest CPU cpu's struct rq (what: its name).
 * Offset 0 is the run queue's lock, in every kernel: never a member asked
 * for, only an offset nobody filled in.
 */
static struct ivm_error *rq_member_va(const struct ivm_kernel_layout *layout,
				      unsigned int cpu, uint32_t off,
				      const char *what, uint64_t *ret)
{
	uint64_t runqueues;

	if (cpu >= layout->nr_cpus)
		return ivm_error_create(IVM_ERROR_INVALID,
					"guest CPU %u: the kernel has %u", cpu,
					layout->nr_cpus);
	if (!off || off == IVM_KOFF_NONE ||
	    !symbol_opt(layout, "runqueues", &runqueues))
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel's run queues have no known %s",
					what);
	*ret = per_cpu_addr(layout, runqueues + off, cpu);
	return NULL;
}

struct ivm_error *ivm_kernel_cpu_switches_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_nr_switches,
			    "nr_switches", ret);
}

struct ivm_error *ivm_kernel_cpu_rq_curr_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_curr, "curr", ret);
}

struct ivm_error *ivm_kernel_cpu_rq_clock_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_clock, "clock", ret);
}

struct ivm_error *ivm_kernel_cpu_rq_idle_stamp_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_idle_stamp,
			    "idle_stamp", ret);
}

struct ivm_error *ivm_kernel_cpu_rq_pcount_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_sched_info_pcount,
			    "rq_sched_info.pcount", ret);
}

struct ivm_error *ivm_kernel_cpu_switches(const struct ivm_kernel_layout *layout,
					  unsigned int cpu, uint64_t *ret)
{
	struct ivm_error *err;
	uint64_t va = 0;

	err = ivm_kernel_cpu_switches_va(layout, cpu, &va);
	if (err)
		return err;
	return kread_u64(layout, va, ret);
}

/* ---- getters ----------------------------------------------------------- */

uint64_t ivm_kernel_layout_slide(const struct ivm_kernel_layout *layout)
{
	return layout->slide;
}

uint64_t ivm_kernel_layout_phys_base(const struct ivm_kernel_layout *layout)
{
	return layout->phys_base;
}

uint64_t ivm_kernel_layout_cr3(const struct ivm_kernel_layout *layout)
{
	return layout->cr3;
}

bool ivm_kernel_layout_la57(const struct ivm_kernel_layout *layout)
{
	return layout->la57;
}

uint64_t ivm_kernel_layout_page_offset_base(
	const struct ivm_kernel_layout *layout)
{
	return layout->page_offset_base;
}

unsigned int ivm_kernel_layout_nr_cpus(const struct ivm_kernel_layout *layout)
{
	return layout->nr_cpus;
}

uint64_t ivm_kernel_layout_per_cpu_offset(
	const struct ivm_kernel_layout *layout, unsigned int cpu)
{
	return cpu < layout->nr_cpus ? layout->per_cpu_offset[cpu] : 0;
}

uint64_t ivm_kernel_layout_init_task(const struct ivm_kernel_layout *layout)
{
	return layout->init_task;
}

uint64_t ivm_kernel_layout_idle_task(const struct ivm_kernel_layout *layout,
				     unsigned int cpu)
{
	return cpu < layout->nr_cpus ? layout->idle_task[cpu] : 0;
}

int ivm_kernel_layout_vcpu_cpu(const struct ivm_kernel_layout *layout,
			       size_t vcpu)
{
	return vcpu < layout->nr_vcpus ? layout->vcpu_cpu[vcpu] : -1;
}

const struct ivm_kernel_offsets *
ivm_kernel_layout_offsets(const struct ivm_kernel_layout *layout)
{
	return &layout->off;
}

/* ---- per-sample calls -------------------------------------------------- */

static bool cpu_of_base(const struct ivm_kernel_layout *l, uint64_t base,
			unsigned int *ret)
{
	unsigned int cpu;

	if (!base)
		return false;
	for (cpu = 0; cpu < l->nr_cpus; cpu++) {
		if (l->per_cpu_offset[cpu] == base) {
			*ret = cpu;
			return true;
		}
	}
	return false;
}

/* The CPU of regs by GS base, without building an error (hot path). */
static bool cpu_of_regs(const struct ivm_kernel_layout *layout,
			const struct ivm_x86_regs *regs, unsigned int *ret)
{
	bool has_gs = regs->valid & IVM_X86_REGS_FS_GS_BASE;
	bool has_kgs = regs->valid & IVM_X86_REGS_KERNEL_GS_BASE;
	bool user = (regs->valid & IVM_X86_REGS_SEGMENTS) && (regs->cs & 3);
	uint64_t first = user ? regs->kernel_gs_base : regs->gs_base;
	uint64_t second = user ? regs->gs_base : regs->kernel_gs_base;
	bool has_first = user ? has_kgs : has_gs;
	bool has_second = user ? has_gs : has_kgs;

	return (has_first && cpu_of_base(layout, first, ret)) ||
	       (has_second && cpu_of_base(layout, second, ret));
}

struct ivm_error *ivm_kernel_cpu_from_regs(
	const struct ivm_kernel_layout *layout,
	const struct ivm_x86_regs *regs, unsigned int *ret)
{
	if (cpu_of_regs(layout, regs, ret))
		return NULL;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"neither GS base 0x%llx nor kernel GS base 0x%llx is a per-CPU offset",
				(unsigned long long)regs->gs_base,
				(unsigned long long)regs->kernel_gs_base);
}

struct ivm_error *ivm_kernel_cpu_from_apic_id(
	const struct ivm_kernel_layout *layout, uint32_t apic_id,
	unsigned int *ret)
{
	unsigned int cpu;

	for (cpu = 0; cpu < layout->nr_cpus; cpu++) {
		if (layout->apic_id[cpu] == apic_id) {
			*ret = cpu;
			return NULL;
		}
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no guest CPU has APIC id %u", apic_id);
}

struct ivm_error *ivm_kernel_current_task(
	const struct ivm_kernel_layout *layout, unsigned int cpu,
	const struct ivm_x86_regs *regs, uint64_t *ret)
{
	const struct ivm_kernel_layout *l = layout;
	struct ivm_error *err;
	uint64_t task;

	if (cpu >= l->nr_cpus)
		return ivm_error_create(IVM_ERROR_INVALID,
					"cpu %u out of range (%u CPUs)", cpu,
					l->nr_cpus);
	if (regs) {
		unsigned int regs_cpu;

		/* No per-CPU base in the registers: nothing to check. */
		if (cpu_of_regs(l, regs, &regs_cpu) && regs_cpu != cpu)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"vCPU registers are those of cpu %u, not cpu %u",
						regs_cpu, cpu);
	}
	if (l->current_pa[cpu])
		err = ivm_gmem_read_phys(l->gmem, l->current_pa[cpu], &task,
					 sizeof(task));
	else
		err = kread_u64(l, l->current_va[cpu], &task);
	if (err)
		return ivm_error_wrap(err, "reading cpu %u's current task",
				      cpu);
	if (!is_kernel_ptr(l, task))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"cpu %u's current task 0x%llx is not a kernel address",
					cpu, (unsigned long long)task);
	*ret = task;
	return NULL;
}

void ivm_kernel_task_span(const struct ivm_kernel_layout *layout,
			  uint32_t *lo, uint32_t *hi)
{
	*lo = layout->task_span_lo;
	*hi = layout->task_span_hi;
}

void ivm_kernel_task_decode(const struct ivm_kernel_layout *layout,
			    uint64_t task, const uint8_t *span,
			    struct ivm_guest_task *ret)
{
	const struct ivm_kernel_layout *l = layout;
	const struct ivm_kernel_offsets *o = &l->off;
	uint32_t lo = l->task_span_lo;
	size_t comm_len;
	unsigned int cpu;

#define AT(off) (span + (off) - lo)
	memset(ret, 0, sizeof(*ret));
	ret->addr = task;
	ret->pid = (int32_t)ivm_le32(AT(o->task_pid));
	ret->tgid = (int32_t)ivm_le32(AT(o->task_tgid));
	/* The guest need not NUL-terminate comm; we always do. */
	comm_len = o->task_comm_size < sizeof(ret->comm) ?
			   o->task_comm_size : sizeof(ret->comm) - 1;
	memcpy(ret->comm, AT(o->task_comm), comm_len);
	ret->comm[comm_len < sizeof(ret->comm) ? comm_len :
						 sizeof(ret->comm) - 1] = '\0';
	ret->state = o->task_state_size == 8 ? ivm_le64(AT(o->task_state)) :
					       ivm_le32(AT(o->task_state));
	ret->flags = ivm_le32(AT(o->task_flags));
	ret->cpu = ivm_le32(AT(o->task_cpu));
	if (o->task_on_cpu != IVM_KOFF_NONE)
		ret->on_cpu = ivm_le32(AT(o->task_on_cpu)) != 0;
	ret->stack = ivm_le64(AT(o->task_stack));
	ret->mm = ivm_le64(AT(o->task_mm));
	if (o->task_active_mm != IVM_KOFF_NONE)
		ret->active_mm = ivm_le64(AT(o->task_active_mm));
	ret->nvcsw = ivm_le64(AT(o->task_nvcsw));
	ret->nivcsw = ivm_le64(AT(o->task_nivcsw));
	ret->signal = ivm_le64(AT(o->task_signal));
	ret->thread_sp = ivm_le64(AT(o->task_thread_sp));
	if (o->task_thread_fsbase != IVM_KOFF_NONE)
		ret->fsbase = ivm_le64(AT(o->task_thread_fsbase));
#undef AT
	for (cpu = 0; cpu < l->nr_cpus; cpu++) {
		if (l->idle_task[cpu] == task) {
			ret->is_idle = true;
			break;
		}
	}
}

struct ivm_error *ivm_kernel_read_task_span(
	const struct ivm_kernel_layout *layout, uint64_t task, uint8_t *buf)
{
	const struct ivm_kernel_layout *l = layout;
	uint32_t lo = l->task_span_lo;
	struct ivm_error *err;

	if (!is_kernel_ptr(l, task) || task + l->task_span_hi < task)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task 0x%llx is not a kernel address",
					(unsigned long long)task);
	err = ivm_kernel_read(l, task + lo, buf, l->task_span_hi - lo);
	if (err)
		return ivm_error_wrap(err, "reading task 0x%llx",
				      (unsigned long long)task);
	return NULL;
}

struct ivm_error *ivm_kernel_read_task(const struct ivm_kernel_layout *layout,
				       uint64_t task,
				       struct ivm_guest_task *ret)
{
	struct ivm_error *err;
	uint8_t *buf;

	buf = malloc(layout->task_span_hi - layout->task_span_lo);
	if (!buf)
		return &ivm_enomem;
	err = ivm_kernel_read_task_span(layout, task, buf);
	if (!err)
		ivm_kernel_task_decode(layout, task, buf, ret);
	free(buf);
	return err;
}

struct ivm_error *ivm_kernel_read_task_pgd(
	const struct ivm_kernel_layout *layout, uint64_t task,
	uint64_t mm_guess, struct ivm_guest_task *ret, uint64_t *pgd)
{
	const struct ivm_kernel_layout *l = layout;
	size_t len = l->task_span_hi - l->task_span_lo;
	struct ivm_gmem_piece pieces[2];
	struct ivm_error *err;
	uint64_t word = 0;
	uint8_t *buf;

	*pgd = 0;
	/* Both from the slab, in the direct map; else two reads as before. */
	if (!mm_guess || !is_kernel_ptr(l, task) ||
	    task + l->task_span_hi < task || !is_kernel_ptr(l, mm_guess) ||
	    !direct_mapped(l, task + l->task_span_lo, len, &pieces[0].gpa) ||
	    !direct_mapped(l, mm_guess + l->off.mm_pgd, 8, &pieces[1].gpa))
		return ivm_kernel_read_task(layout, task, ret);
	buf = malloc(len);
	if (!buf)
		return &ivm_enomem;
	pieces[0].buf = buf;
	pieces[0].len = len;
	pieces[1].buf = &word;
	pieces[1].len = 8;
	err = ivm_gmem_read_phys_many(l->gmem, pieces, 2);
	if (err) {
		/* The guess's page, perhaps: the task alone says which. */
		ivm_error_destroy(err);
		free(buf);
		return ivm_kernel_read_task(layout, task, ret);
	}
	ivm_kernel_task_decode(layout, task, buf, ret);
	free(buf);
	if (ret->mm == mm_guess)
		*pgd = ivm_le64((const uint8_t *)&word);
	return NULL;
}

struct ivm_error *ivm_kernel_task_user_cr3(
	const struct ivm_kernel_layout *layout,
	const struct ivm_guest_task *task, uint64_t *ret)
{
	struct ivm_error *err;
	uint64_t pgd;

	if (!task->mm)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"task %d (%s) is a kernel thread: no mm",
					task->pid, task->comm);
	if (!is_kernel_ptr(layout, task->mm))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task %d: mm 0x%llx is not a kernel address",
					task->pid,
					(unsigned long long)task->mm);
	err = ivm_kernel_read_ptr(layout, task->mm + layout->off.mm_pgd, "mm->pgd",
			&pgd);
	if (err)
		return ivm_error_wrap(err, "task %d: user page tables",
				      task->pid);
	return ivm_kernel_user_cr3_of_pgd(layout, task, pgd, ret);
}

struct ivm_error *ivm_kernel_user_cr3_of_pgd(
	const struct ivm_kernel_layout *layout,
	const struct ivm_guest_task *task, uint64_t pgd, uint64_t *ret)
{
	struct ivm_error *err;
	uint64_t pa, contiguous;

	if (!is_kernel_ptr(layout, pgd))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task %d: mm->pgd 0x%llx is not a kernel address",
					task->pid, (unsigned long long)pgd);
	/*
	 * A pgd comes from the page allocator, so it is in the direct map:
	 * translated by arithmetic, not a four-read walk, on every capture.
	 * A pa outside guest RAM faults when the user walk reads it.
	 */
	err = ivm_kernel_translate(layout, pgd, &pa, &contiguous);
	if (err)
		return ivm_error_wrap(err, "task %d: user page tables",
				      task->pid);
	if (pa & 0xfff)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task %d: pgd 0x%llx is not page aligned",
					task->pid, (unsigned long long)pgd);
	*ret = pa;
	return NULL;
}
