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
 * A task that ran twice in the window shows only its last run, and hides
 * its earlier run and the idle period after it.  The commonest case on
 * web01 (php-fpm and redis going to idle and taking the CPU back from it,
 * seen 1 ms late) is rebuilt when the window says so for certain: the
 * first task of the window ran before its shown run too, because it was
 * the task current at the look before (its arrival since says it was
 * switched in again), or because the CPU's mark counts two arrivals for it
 * and one for every other task (ivm_last_ran_window).  The window's own
 * counts (context switches, and switches out of idle, between the two
 * looks) must then be exactly those of the sequence so rebuilt: the task,
 * idle, the task again, the other runs.  That hidden idle period's end is
 * the task's shown arrival; its start is not known (start_known false).
 *
 * Limits, by design: other hidden runs (two tasks that ran twice, a task
 * that ran here and was woken onto another CPU since) stay counted as
 * unseen by the caller, never invented here.  With the window's counts
 * known, its gaps are rebuilt only when the runs explain those counts
 * exactly: a hidden run can sit in a gap between two stamps, and the gap
 * taken for idle then named a to-idle task that had switched straight to
 * it (web01: 38 of 310 rebuilt periods in two 15 s profiles named a task
 * with no switch to idle on that CPU within 100 ms in the guest's trace).
 * Pure: no I/O, tested on synthetic runs.
 */
#ifndef IVM_REPLAY_H
#define IVM_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/last_ran.h"

/* The window between two looks at a CPU. */
struct ivm_replay_window {
	uint64_t since;		/* run-queue clock at the look before */
	uint64_t before;	/* task current then; 0: the CPU was idle */
	bool counts_ok;		/* the two counts below are known */
	uint64_t switches;	/* context switches on the CPU in the window */
	uint64_t from_idle;	/* ... of them out of its idle task */
	bool idle_now;		/* the CPU is idle at the later look */
};

/* One idle period found between two runs. */
struct ivm_replay_gap {
	uint64_t to_idle;	/* task that went to idle */
	uint64_t from_idle;	/* task switched in after it */
	uint64_t start, end;	/* run-queue clock, ns */
	bool start_known;	/* else start is end: the start is not known */
};

/*
 * The idle periods inside the window, in time order, runs being what
 * ivm_last_ran_window() gave for it (sorted in place by arrival): at most
 * max into gaps, their number returned.  A run that arrived before since
 * (the task current at the earlier look) counts from since.
 */
size_t ivm_replay_gaps(struct ivm_last_ran_run *runs, size_t nr,
		       const struct ivm_replay_window *w,
		       struct ivm_replay_gap *gaps, size_t max);

#endif /* IVM_REPLAY_H */
