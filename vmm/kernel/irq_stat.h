/* SPDX-License-Identifier: MIT */
/*
 * irq_stat: a guest CPU's interrupt counts, the "what woke it" of an idle
 * period.
 *
 * x86 keeps the counts /proc/interrupts prints for the system vectors in
 * the per-CPU irq_cpustat_t irq_stat: apic_timer_irqs (LOC),
 * irq_resched_count (RES), irq_call_count (CAL), irq_tlb_count (TLB).
 * Device interrupts go through irq_descs and are summed per CPU in
 * kstat.irqs_sum (struct kernel_stat), which the system vectors never
 * touch.  Offsets come from the guest kernel's BTF; the per-CPU addresses
 * from its symbols and __per_cpu_offset.  A kernel whose BTF lacks a field
 * leaves that count unknown, never guessed.
 *
 * The words are fixed for the kernel's life, so a caller reads them in its
 * own batched read (vmm/profile/vcpu_watch.h) and decodes them here.
 */
#ifndef IVM_IRQ_STAT_H
#define IVM_IRQ_STAT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "kernel/btf.h"
#include "kernel/kernel_layout.h"

enum ivm_irq_kind {
	IVM_IRQ_TIMER,		/* LOC: local APIC timer */
	IVM_IRQ_RESCHED,	/* RES: rescheduling IPI */
	IVM_IRQ_CALL,		/* CAL: function-call IPI */
	IVM_IRQ_TLB,		/* TLB: shootdown (also counted in CAL) */
	IVM_IRQ_DEVICE,		/* every device interrupt (kstat.irqs_sum) */
	IVM_IRQ_NR_KINDS,
};

/* Where one CPU's counts are: two ranges of kernel virtual memory. */
struct ivm_irq_stat_words {
	uint64_t stat_va;	/* irq_stat on that CPU; 0: unknown */
	uint32_t stat_len;	/* bytes from stat_va covering the fields */
	uint64_t sum_va;	/* kstat.irqs_sum on that CPU; 0: unknown */
};

struct ivm_irq_counts {
	uint32_t known;		/* bit per enum ivm_irq_kind */
	uint64_t count[IVM_IRQ_NR_KINDS];
};

struct ivm_irq_stat;

/*
 * The layout for the kernel of btf and layout (borrowed, must outlive).
 * IVM_ERROR_NOT_FOUND when neither irq_stat nor kstat can be placed.
 */
struct ivm_error *ivm_irq_stat_create(const struct ivm_btf *btf,
				      const struct ivm_kernel_layout *layout,
				      struct ivm_irq_stat **ret);
void ivm_irq_stat_destroy(struct ivm_irq_stat *is);

/* The words of guest CPU cpu; IVM_ERROR_INVALID past nr_cpu_ids. */
struct ivm_error *ivm_irq_stat_words(const struct ivm_irq_stat *is,
				     unsigned int cpu,
				     struct ivm_irq_stat_words *ret);

/*
 * Decode what was read: stat (stat_len bytes, or NULL) and sum (8 bytes,
 * or NULL).  Kinds whose bytes are missing stay unknown.
 */
void ivm_irq_stat_decode(const struct ivm_irq_stat *is, const uint8_t *stat,
			 const uint8_t *sum, struct ivm_irq_counts *ret);

/* "timer", "resched", "call", "tlb", "device". */
const char *ivm_irq_kind_name(enum ivm_irq_kind kind);

#endif /* IVM_IRQ_STAT_H */
