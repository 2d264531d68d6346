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

size_t ivm_replay_gaps(struct ivm_last_ran_run *runs, size_t nr,
		       uint64_t since, struct ivm_replay_gap *gaps, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < nr; i++)
		if (runs[i].arrival < since)
			runs[i].arrival = since;
	qsort(runs, nr, sizeof(*runs), by_arrival);
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
		};
	}
	return n;
}
