/* SPDX-License-Identifier: MIT */
/*
 * vcpu_watch: what the profiler reads of the guest on every poll — each
 * vCPU's `current` task, the switch counts of its idle task, its run
 * queue's count of context switches and its interrupt counts
 * (vmm/kernel/irq_stat.h) — in one read for all vCPUs.
 *
 * The poll runs about a thousand times a second while the guest runs, so
 * its cost is the profiler's overhead.  Through QEMU's private RAM every
 * separate read is a process_vm_readv() (about 2 us) and every page walk
 * four or five more; these words never move (the per-CPU areas and the
 * idle tasks live as long as the kernel), so they are translated to guest
 * physical addresses once and read together with ivm_gmem_read_phys_many():
 * one system call per poll, whatever the number of vCPUs.
 *
 * Staleness is bounded: the translations are redone every
 * IVM_VCPU_WATCH_RETRANSLATE_NS, and at once after any failed read.  A
 * guest that remaps one of these words in between only makes us read other
 * guest data for a while, which is checked like any value from the guest
 * (a `current` must be a kernel address; captures check their targets).
 *
 * Invariants: results are per vCPU in the order given at create; a result
 * is only marked valid when its bytes were read in this call.
 */
#ifndef IVM_VCPU_WATCH_H
#define IVM_VCPU_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/gmem.h"
#include "kernel/irq_stat.h"
#include "kernel/kernel_layout.h"

#define IVM_VCPU_WATCH_RETRANSLATE_NS 1000000000ull

/* What create needs to know of one vCPU. */
struct ivm_vcpu_watch_target {
	int cpu;		/* guest CPU it runs as; -1: not watched */
	uint64_t idle_task;	/* that CPU's idle task; 0: unknown */
	uint64_t switches_va;	/* its rq->nr_switches; 0: not watched */
	uint64_t rq_clock_va;	/* its rq->clock; 0: not watched */
	uint64_t rq_idle_stamp_va;	/* its rq->idle_stamp; 0: not watched */
	uint64_t rq_curr_va;	/* its rq->curr; 0: not watched */
};

/* One poll's view of one vCPU. */
struct ivm_vcpu_watch_view {
	bool current_ok;
	uint64_t current;	/* a kernel address when current_ok */
	bool idle_switches_ok;
	uint64_t idle_switches;	/* nvcsw + nivcsw of its idle task */
	bool cpu_switches_ok;
	uint64_t cpu_switches;	/* context switches on its CPU so far */
	struct ivm_irq_counts irqs;	/* .known says which were read */
	bool rq_clock_ok;
	uint64_t rq_clock;	/* its run queue's clock (ns) */
	bool idle_stamp_ok;
	uint64_t idle_stamp;	/* its clock when it went idle; 0: not idle */
	/*
	 * Its rq->curr was read and is not current: a switch is under way
	 * (ivm_kernel_cpu_rq_curr_va), current is the task leaving and the
	 * counts, clock and stamps may already be of the one arriving.
	 */
	bool mid_switch;
};

struct ivm_vcpu_watch;

/*
 * Watch nr vCPUs of the guest described by layout, whose memory is gmem
 * (both borrowed: they must outlive the watch).  nvcsw_off / nivcsw_off are task_struct offsets of the
 * switch counters (IVM_KOFF_NONE or 0: no idle switch counts).  Only
 * IVM_ERROR_NOMEM; words that cannot be translated now are retried later.
 */
struct ivm_error *ivm_vcpu_watch_create(const struct ivm_kernel_layout *layout,
					struct ivm_gmem *gmem,
					const struct ivm_vcpu_watch_target *targets,
					size_t nr, uint32_t nvcsw_off,
					uint32_t nivcsw_off,
					const struct ivm_irq_stat *irq_stat,
					struct ivm_vcpu_watch **ret);
void ivm_vcpu_watch_destroy(struct ivm_vcpu_watch *w);

/*
 * Read every watched word, normally in one batched physical read, and fill
 * views[0..nr).  now_ns (monotonic) paces the re-translation.  Returns an
 * error only when the guest is gone (IVM_ERROR_GONE); a word that cannot
 * be read leaves its view invalid and is counted in *failed when failed is
 * not NULL.
 */
struct ivm_error *ivm_vcpu_watch_read(struct ivm_vcpu_watch *w, uint64_t now_ns,
				      struct ivm_vcpu_watch_view *views,
				      uint64_t *failed);

/*
 * The same, of the words that tell a switch alone (current, the idle
 * task's switch counts, the CPU's count of switches, rq->curr): the other fields of
 * views are left unread (invalid, zero).  Half the pieces of a full read:
 * what a second read that only checks the first needs.
 */
struct ivm_error *
ivm_vcpu_watch_read_switches(struct ivm_vcpu_watch *w, uint64_t now_ns,
			     struct ivm_vcpu_watch_view *views);

/* Batched reads made, and reads that fell back to one word at a time. */
struct ivm_vcpu_watch_stats {
	uint64_t batches;
	uint64_t fallbacks;
	uint64_t translations;
};

const struct ivm_vcpu_watch_stats *
ivm_vcpu_watch_stats(const struct ivm_vcpu_watch *w);

#endif /* IVM_VCPU_WATCH_H */
