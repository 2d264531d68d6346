/* SPDX-License-Identifier: MIT */
/*
 * replay: the idle periods a CPU went through between two looks, rebuilt
 * from the scheduler's own stamps.
 *
 * Why: a look that finds the idle task's switch count moved by more than
 * the looks can explain saw idle periods come and go unseen (shorter than
 * idlevm's latency, or without a halt at all).  Their to-idle and
 * from-idle tasks are not lost: every task keeps when it was last switched
 * in (sched_info.last_arrival) and last accounted (se.exec_start, stamped
 * again when it is switched out), both on its CPU's run-queue clock.
 * Sorted by arrival, the runs since the earlier look tile the CPU's time;
 * on a direct switch the next arrival equals the previous end (one clock
 * update per __schedule), and a gap between an end and the next arrival
 * is the CPU in its idle task: the task before it went to idle, the one
 * after it came from idle.
 *
 * Limits, by design: each task shows only its last run, so a task that ran
 * twice in the window hides its earlier run and the gaps around it; those
 * stay counted as unseen by the caller, never invented here.  Pure: no
 * I/O, tested on synthetic runs.
 */
#ifndef IVM_REPLAY_H
#define IVM_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "kernel/last_ran.h"

/* One idle period found between two runs. */
struct ivm_replay_gap {
	uint64_t to_idle;	/* task that went to idle */
	uint64_t from_idle;	/* task switched in after it */
	uint64_t start, end;	/* run-queue clock, ns */
};

/*
 * The idle periods strictly inside the runs (sorted in place by arrival),
 * runs being what ivm_last_ran_window() gave for the window after since:
 * at most max into gaps, their number returned.  A run that arrived before
 * since (the task current at the earlier look) counts from since.
 */
size_t ivm_replay_gaps(struct ivm_last_ran_run *runs, size_t nr,
		       uint64_t since, struct ivm_replay_gap *gaps, size_t max);

#endif /* IVM_REPLAY_H */
