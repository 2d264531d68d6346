/* SPDX-License-Identifier: MIT */
/*
 * idle_gate: the sched idle source's wakeups, decided in the host kernel.
 *
 * Under TCG every sleep of a vCPU thread wakes the profiler's loop for a
 * look at the guest, and most find the vCPU in the idle period the last
 * look saw: a halted vCPU kicked awake (an interrupt, QEMU's work) halts
 * again without switching.  On web01 that was some 57% of the loop's looks
 * after sleeps, each a wakeup of a few tens of microseconds on this
 * project's host.  The gate is a BPF program on sched_switch
 * (idle_gate.bpf.c) that reads, at each such sleep, the vCPU's guest run
 * queue's switch count and interrupt counts from QEMU's memory, and wakes
 * the loop (a record in a ring buffer) only when the switch count moved,
 * for the first sleep, or when it cannot read them.  The sleeps it lets
 * pass are counted, and the next record carries the interrupt counts of
 * the last of them, which a look at it would have read: what woke the
 * vCPU is told as closely as without the gate (idle_periods.h,
 * ivm_idle_periods_passed()).
 *
 * The trace session keeps recording every sleep and wakeup, read at each
 * step as before; only what wakes the loop changes.  Root, a kernel with
 * BPF and sched_switch's prev_state argument (5.18 on), a live guest;
 * without them the loop wakes at every sleep as before.  Not for KVM,
 * whose HLT exits wake the loop (profiler_events.c).
 *
 * The words' host addresses are taken once: the run queues and interrupt
 * counts are per-CPU data, fixed for the kernel's life.  A guest that
 * remaps them only makes the gate read other memory: it then wakes the
 * loop more or less often, and every look still reads the guest itself.
 */
#ifndef IVM_IDLE_GATE_H
#define IVM_IDLE_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "kernel/guest.h"
#include "kernel/irq_stat.h"
#include "profile/idle_gate_abi.h"

struct ivm_idle_gate;

/*
 * Load the program for the live guest g's vCPUs and attach it (a vCPU
 * whose guest CPU or words are not known wakes the loop at every sleep); irq_stat (or NULL: no interrupt counts) and g must
 * outlive the gate.  IVM_ERROR_NOT_FOUND when no vCPU's words can be
 * placed, IVM_ERROR_OS when the kernel refuses the program (not root, no
 * BPF, no prev_state), IVM_ERROR_INVALID for a core.
 */
struct ivm_error *ivm_idle_gate_create(struct ivm_guest *g,
				       const struct ivm_irq_stat *irq_stat,
				       struct ivm_idle_gate **ret);
void ivm_idle_gate_destroy(struct ivm_idle_gate *gate);

/*
 * Off, the program reads, counts and records nothing (--cpu-budget's
 * slices not watched); on again, each vCPU's next sleep wakes the loop as
 * a first one.  On when created.
 */
struct ivm_error *ivm_idle_gate_enable(struct ivm_idle_gate *gate, bool on);

/* Whether this host takes the program (idlevm doctor): load, attach, go. */
struct ivm_error *ivm_idle_gate_probe(void);

/* Readable (POLLIN) when records wait: poll it instead of the session. */
int ivm_idle_gate_fd(const struct ivm_idle_gate *gate);

/*
 * Hand each record waiting to fn, oldest first; returns how many.  Does
 * not block.  discard (fn NULL) drops them: a gap in watching.
 */
size_t ivm_idle_gate_read(struct ivm_idle_gate *gate,
			  void (*fn)(void *ctx,
				     const struct ivm_gate_record *r),
			  void *ctx);

/* The interrupt counts a record carries of its last sleep let pass. */
void ivm_idle_gate_passed_irqs(const struct ivm_idle_gate *gate,
			       const struct ivm_gate_record *r,
			       struct ivm_irq_counts *ret);

/* The program's counts, summed over the vCPUs. */
struct ivm_idle_gate_stats {
	uint64_t sleeps;
	uint64_t records;
	uint64_t first;
	uint64_t read_failed;
	uint64_t switch_moved;
	uint64_t irq_moved;
	uint64_t none_moved;
	uint64_t ring_full;
};

void ivm_idle_gate_stats(const struct ivm_idle_gate *gate,
			 struct ivm_idle_gate_stats *ret);

#endif /* IVM_IDLE_GATE_H */
