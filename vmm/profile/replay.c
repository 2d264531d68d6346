// SPDX-License-Identifier: MIT
/* Idle periods rebuilt from the scheduler's stamps; see replay.h. */
#include <stdlib.h>

#include "profile/replay.h"

static int by_arrival(const void *a, const void *b)
{
	const struct ivm_last_ran_run *x = a, *y = b;

	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	return x->task < y->task ? -1 : x->task > y->task;
}

/*
 * Whether the first run of the window (runs sorted, nr > 0, none from
 * before since) hides an earlier run of its task: it was the task current
 * at the look before, or, from idle, the mark counts two arrivals for it
 * and one for every other task.
 */
static bool first_ran_before(const struct ivm_last_ran_run *runs, size_t nr,
			     const struct ivm_replay_window *w)
{
	size_t i;

	if (w->before)
		return runs[0].task == w->before;
	if (runs[0].arrivals != 2)
		return false;
	for (i = 1; i < nr; i++)
		if (runs[i].arrivals != 1)
			return false;
	return true;
}

/*
 * Whether the window's counts are exactly those of the runs as their
 * stamps tile the window, and idle at the end if the CPU is idle now (else
 * the last run is the task current now); hidden: with the first task's
 * hidden run before them ((from idle, a switch into) it, idle, its shown
 * run).  Without it, the first run is from idle at since, or the task
 * current then, running on from before since.
 */
static bool counts_fit(const struct ivm_last_ran_run *runs, size_t nr,
		       const struct ivm_replay_window *w, bool from_before,
		       bool hidden)
{
	uint64_t switches = w->before ? 0 : 1, from_idle = w->before ? 0 : 1;
	size_t i;

	if (hidden) {
		switches += 2;
		from_idle++;
	} else if (w->before ? !from_before || runs[0].task != w->before :
			       from_before) {
		return false;
	}
	for (i = 0; i < nr; i++) {
		if (runs[i].end < runs[i].arrival)
			return false;
		if (i + 1 == nr)
			break;
		if (runs[i].on_cpu || runs[i + 1].arrival < runs[i].end)
			return false;
		if (runs[i + 1].arrival == runs[i].end) {
			switches++;
		} else {
			switches += 2;
			from_idle++;
		}
	}
	if (runs[nr - 1].on_cpu == w->idle_now)
		return false;
	switches += w->idle_now;
	return switches == w->switches && from_idle == w->from_idle;
}

size_t ivm_replay_gaps(struct ivm_last_ran_run *runs, size_t nr,
		       const struct ivm_replay_window *w,
		       struct ivm_replay_gap *gaps, size_t max)
{
	bool from_before = false, hidden;
	size_t i, n = 0;

	for (i = 0; i < nr; i++)
		if (runs[i].arrival <= w->since) {
			runs[i].arrival = w->since;
			from_before = true;
		}
	qsort(runs, nr, sizeof(*runs), by_arrival);
	if (!nr || !max)
		return 0;
	hidden = w->counts_ok && !from_before &&
		 first_ran_before(runs, nr, w) &&
		 counts_fit(runs, nr, w, from_before, true);
	/*
	 * Counts the runs do not explain: some run is not shown (a task
	 * that ran here and was woken onto another CPU since, one that ran
	 * twice, one forked and gone), and a gap between two stamps may be
	 * that run rather than idle; its end would name a task that did not
	 * go to idle.  Nothing is rebuilt: the caller counts them unseen.
	 */
	if (w->counts_ok && !hidden &&
	    !counts_fit(runs, nr, w, from_before, false))
		return 0;
	if (hidden)
		gaps[n++] = (struct ivm_replay_gap){
			.to_idle = runs[0].task, .from_idle = runs[0].task,
			.start = runs[0].arrival, .end = runs[0].arrival,
		};
	for (i = 0; i + 1 < nr && n < max; i++) {
		const struct ivm_last_ran_run *x = &runs[i], *y = &runs[i + 1];

		/*
		 * A task still running ends nothing; an end after the next
		 * arrival is a stamp out of order (guest data): no gap.
		 */
		if (x->on_cpu || y->arrival <= x->end || x->end < x->arrival)
			continue;
		gaps[n++] = (struct ivm_replay_gap){
			.to_idle = x->task, .from_idle = y->task,
			.start = x->end, .end = y->arrival,
			.start_known = true,
		};
	}
	return n;
}
