/* SPDX-License-Identifier: MIT */
/*
 * The kernel layout's insides, shared by the files that make it and read
 * through it (never included outside vmm/kernel/kernel_*.c):
 *   kernel_find.c    making a layout: the KASLR slide, the kernel's page
 *                    table, the direct map, the per-CPU areas, the APIC
 *                    ids and the idle tasks, found once at create
 *   kernel_layout.c  reading through it: kernel memory, run queues, the
 *                    per-sample calls (current task, one task_struct)
 */
#ifndef IVM_KERNEL_LAYOUT_INT_H
#define IVM_KERNEL_LAYOUT_INT_H

#include "gmem/x86_64_paging.h"
#include "kernel/kernel_layout.h"

struct ivm_kernel_layout {
	struct ivm_gmem *gmem;
	const struct ivm_btf *btf;
	const struct ivm_ksyms *ksyms;
	struct ivm_kernel_offsets off;

	uint64_t slide;
	uint64_t phys_base;
	uint64_t cr3;
	bool la57;
	uint64_t page_offset_base;
	uint64_t direct_map_end;	/* 0: no physical fast path */
	uint64_t init_task;

	unsigned int nr_cpus;
	uint64_t *per_cpu_offset;
	uint64_t *current_va;		/* address of each CPU's current */
	uint64_t *current_pa;		/* its guest physical address, or 0 */
	uint64_t *idle_task;		/* 0 when unknown */
	uint32_t *apic_id;		/* IVM_KERNEL_NO_APIC_ID when unknown */
	int *vcpu_cpu;
	size_t nr_vcpus;

	/* The span of task_struct that ivm_kernel_read_task reads. */
	uint32_t task_span_lo, task_span_hi;
};

static inline bool is_kernel_ptr(const struct ivm_kernel_layout *l,
				 uint64_t va)
{
	return (va >> 63) && ivm_x86_64_canonical(va, l->la57);
}

/* Run-time address of a link-time address (see ivm_kernel_symbol). */
static inline uint64_t runtime_addr(const struct ivm_kernel_layout *l,
				    uint64_t addr)
{
	/*
	 * Only the kernel image is relocated.  Per-CPU symbols of zero-based
	 * per-CPU kernels (x86-64 before 6.15) are offsets into each CPU's
	 * area and stay as they are.
	 */
	return addr >= IVM_KERNEL_START_MAP ? addr + l->slide : addr;
}

/* Run-time address of an optional symbol: false (no error) when absent. */
static inline bool symbol_opt(const struct ivm_kernel_layout *l,
			      const char *name, uint64_t *ret)
{
	const struct ivm_ksym *sym = ivm_ksyms_find(l->ksyms, name);

	if (!sym)
		return false;
	*ret = runtime_addr(l, sym->addr);
	return true;
}


static inline struct ivm_error *kread_u64(const struct ivm_kernel_layout *l,
					  uint64_t va, uint64_t *ret)
{
	return ivm_kernel_read(l, va, ret, sizeof(*ret));
}

/* Address of per-CPU symbol sym (plus member offset) on cpu. */
static inline uint64_t per_cpu_addr(const struct ivm_kernel_layout *l,
				    uint64_t sym_runtime, unsigned int cpu)
{
	return sym_runtime + l->per_cpu_offset[cpu];
}

#endif /* IVM_KERNEL_LAYOUT_INT_H */
