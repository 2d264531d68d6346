// SPDX-License-Identifier: MIT
#include <stdlib.h>

#include "base/bytes.h"
#include "kernel/irq_stat.h"

/* irq_cpustat_t is a cache line or two; more is not it. */
#define MAX_STAT_LEN 512

struct ivm_irq_stat {
	const struct ivm_kernel_layout *layout;
	uint64_t irq_stat, kstat;	/* per-CPU symbols; 0: absent */
	uint32_t lo, len;		/* of irq_stat read */
	uint32_t off[IVM_IRQ_DEVICE];	/* from lo; IVM_KOFF_NONE: absent */
	uint32_t size[IVM_IRQ_DEVICE];
	uint32_t sum_off, sum_size;
};

const char *ivm_irq_kind_name(enum ivm_irq_kind kind)
{
	static const char *const names[] = { "timer", "resched", "call",
					     "tlb", "device" };

	return (unsigned int)kind < IVM_IRQ_NR_KINDS ? names[kind] : "?";
}

struct ivm_error *ivm_irq_stat_create(const struct ivm_btf *btf,
				      const struct ivm_kernel_layout *layout,
				      struct ivm_irq_stat **ret)
{
	static const char *const fields[] = { "apic_timer_irqs",
					      "irq_resched_count",
					      "irq_call_count",
					      "irq_tlb_count" };
	struct ivm_kernel_field f[IVM_IRQ_DEVICE];
	struct ivm_irq_stat *is = calloc(1, sizeof(*is));
	struct ivm_btf_member m;
	struct ivm_error *err;
	uint32_t lo, hi;
	int k;

	if (!is)
		return &ivm_enomem;
	is->layout = layout;
	for (k = 0; k < IVM_IRQ_DEVICE; k++) {
		f[k].off = IVM_KOFF_NONE;
		f[k].size = 0;
		err = ivm_btf_member_find(btf, "irq_cpustat_t", fields[k], &m);
		if (!err && (m.size == 4 || m.size == 8) &&
		    m.offset + m.size < MAX_STAT_LEN) {
			f[k].off = (uint32_t)m.offset;
			f[k].size = (uint32_t)m.size;
		}
		ivm_error_destroy(err);
	}
	err = ivm_kernel_symbol(layout, "irq_stat", &is->irq_stat);
	if (err || !ivm_kernel_fields_span(f, IVM_IRQ_DEVICE, &lo, &hi)) {
		ivm_error_destroy(err);
		is->irq_stat = 0;
	} else {
		is->lo = lo;
		is->len = hi - lo;
		for (k = 0; k < IVM_IRQ_DEVICE; k++) {
			is->off[k] = f[k].off == IVM_KOFF_NONE ? IVM_KOFF_NONE :
				     f[k].off - lo;
			is->size[k] = f[k].size;
		}
	}
	err = ivm_btf_member_find(btf, "kernel_stat", "irqs_sum", &m);
	if (!err && (m.size == 4 || m.size == 8)) {
		is->sum_off = (uint32_t)m.offset;
		is->sum_size = (uint32_t)m.size;
		ivm_error_destroy(err);
		err = ivm_kernel_symbol(layout, "kstat", &is->kstat);
	}
	if (err) {
		ivm_error_destroy(err);
		is->kstat = 0;
	}
	if (!is->irq_stat && !is->kstat) {
		free(is);
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"the guest kernel's irq_stat and kstat cannot be placed");
	}
	*ret = is;
	return NULL;
}

void ivm_irq_stat_destroy(struct ivm_irq_stat *is)
{
	free(is);
}

struct ivm_error *ivm_irq_stat_words(const struct ivm_irq_stat *is,
				     unsigned int cpu,
				     struct ivm_irq_stat_words *ret)
{
	uint64_t base;

	if (cpu >= ivm_kernel_layout_nr_cpus(is->layout))
		return ivm_error_create(IVM_ERROR_INVALID,
					"guest CPU %u: the kernel has %u", cpu,
					ivm_kernel_layout_nr_cpus(is->layout));
	base = ivm_kernel_layout_per_cpu_offset(is->layout, cpu);
	ret->stat_va = is->irq_stat ? is->irq_stat + base + is->lo : 0;
	ret->stat_len = is->irq_stat ? is->len : 0;
	ret->sum_va = is->kstat ? is->kstat + base + is->sum_off : 0;
	return NULL;
}

void ivm_irq_stat_decode(const struct ivm_irq_stat *is, const uint8_t *stat,
			 const uint8_t *sum, struct ivm_irq_counts *ret)
{
	int k;

	ret->known = 0;
	for (k = 0; k < IVM_IRQ_NR_KINDS; k++)
		ret->count[k] = 0;
	for (k = 0; stat && is->irq_stat && k < IVM_IRQ_DEVICE; k++) {
		if (is->off[k] == IVM_KOFF_NONE)
			continue;
		ret->count[k] = ivm_le_load(stat + is->off[k], is->size[k]);
		ret->known |= 1u << k;
	}
	if (sum && is->kstat) {
		ret->count[IVM_IRQ_DEVICE] = ivm_le_load(sum, is->sum_size);
		ret->known |= 1u << IVM_IRQ_DEVICE;
	}
}
