/* SPDX-License-Identifier: MIT */
/*
 * cpu_budget: keep one guest's run under a share of a host core
 * (`profile --cpu-budget PERCENT`, issue 33) by watching the guest only
 * part of the time.
 *
 * Why whole slices of time, not every Nth transition: most of a run's
 * cost is paid per host event and per look at the guest (reading the
 * vCPUs' current tasks, the scheduler's stamps), before any capture is
 * decided; skipping captures alone saves a third at most.  A slice not
 * watched costs nothing: the run's tracefs sessions are switched off, no
 * event wakes the loop and nothing of the guest is read.  A slice that
 * begins starts from nothing, as a run does (no idle period or task
 * carried over from before the gap).
 *
 * How: time is cut in IVM_CPU_BUDGET_SLICE_NS slices, each watched or
 * not.  The share of slices watched, f, follows the run's measured cost:
 * with c_on and c_off the CPU shares of a watched and of an unwatched
 * slice (moving averages over the last slices of each), f is set so that
 * f * c_on + (1 - f) * c_off = budget, within [IVM_CPU_BUDGET_MIN_SHARE,
 * 1], the budget less what the run spent beyond it so far (its start
 * included) spread over the next seconds.  Which slices are watched is spread evenly (a running credit of f
 * per slice; a slice is watched when the credit reaches one), so counts
 * taken in watched slices, scaled by all time / watched time, estimate
 * the whole run's for a workload that is steady over a few slices.
 *
 * Invariants: a run begins watched (its cost is unknown); the watched and
 * total times only grow; a budget of 0 never leaves the watched state.
 */
#ifndef IVM_CPU_BUDGET_H
#define IVM_CPU_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define IVM_CPU_BUDGET_SLICE_NS 100000000ull	/* 100 ms */
/* The least share of time watched: some samples, whatever the cost. */
#define IVM_CPU_BUDGET_MIN_SHARE 0.02

struct ivm_cpu_budget {
	double budget;		/* share of one core; 0: no budget */
	double share;		/* f: share of slices watched now */
	double credit;
	bool watching;		/* the current slice is watched */
	uint64_t slice_start, slice_cpu;	/* the current slice */
	double cost_on, cost_off;		/* < 0: not measured yet */
	uint64_t watched_ns, total_ns;		/* whole slices so far */
	uint64_t cpu_ns;			/* ... and the CPU they took */
	uint64_t slices, watched_slices;
};

/* A run starts at now (monotonic ns); percent of a core, 0 for none. */
void ivm_cpu_budget_init(struct ivm_cpu_budget *b, double percent,
			 uint64_t now);

/* The run's CPU time (ns) spent since the last charge. */
static inline void ivm_cpu_budget_charge(struct ivm_cpu_budget *b,
					 uint64_t cpu_ns)
{
	b->slice_cpu += cpu_ns;
}

/*
 * Close the slices that ended by now and choose the next one's state.
 * Returns true when the state changed (the caller starts or stops
 * watching); b->watching is the new state.
 */
bool ivm_cpu_budget_tick(struct ivm_cpu_budget *b, uint64_t now);

/* When the current slice ends (the loop must step then). */
static inline uint64_t ivm_cpu_budget_slice_end(const struct ivm_cpu_budget *b)
{
	return b->slice_start + IVM_CPU_BUDGET_SLICE_NS;
}

/*
 * Time watched so far (ns) up to now, the current slice included when it
 * is watched: the profile's "watched_ms" beside its "elapsed_ms".
 */
uint64_t ivm_cpu_budget_watched_ns(const struct ivm_cpu_budget *b,
				   uint64_t now);

#endif /* IVM_CPU_BUDGET_H */
