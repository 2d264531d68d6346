/* SPDX-License-Identifier: MIT */
/*
 * stage_clock: where a run's time goes, stage by stage (issue 33's "know
 * where the time goes"), cheap enough to leave on: one monotonic clock
 * read (vDSO, ~20 ns) at each change of stage, and every nanosecond of a
 * step is charged to exactly one stage (the one current when it passed).
 *
 * Wall time while the loop works, not CPU time: the loop does not block
 * but on the monitor (stop mode) and the helper (pin mode), whose waits
 * are charged to the capture that made them, and a preemption of the
 * loop (without --realtime) is charged to the stage it interrupted.  The
 * run's CPU time (CLOCK_THREAD_CPUTIME_ID, a syscall) is read once a
 * step, apart.
 *
 * Beside the time, each stage's reads of guest memory (the guest's
 * ivm_gmem_backend_calls(): one process_vm_readv or one batch each), the
 * system calls that were a third of idlevm's CPU on web01 (perf, tests/
 * bench/README.md): read from a counter the clock is given, no call.
 */
#ifndef IVM_STAGE_CLOCK_H
#define IVM_STAGE_CLOCK_H

#include <stdint.h>

#include "base/clock.h"

enum ivm_stage {
	IVM_STAGE_OTHER,	/* the loop's own bookkeeping */
	IVM_STAGE_EVENTS,	/* host records: reading and decoding */
	IVM_STAGE_LOOKS,	/* reading the vCPUs' current tasks and counts */
	IVM_STAGE_STAMPS,	/* the guest scheduler's stamps (who ran) */
	IVM_STAGE_CAPTURE,	/* a capture: registers, task, both unwinds */
	IVM_STAGE_WRITE,	/* the profile file: records and flushes */
	IVM_STAGE_NR,
};

struct ivm_stage_clock {
	enum ivm_stage current;
	uint64_t since;			/* when current began; 0: stopped */
	uint64_t ns[IVM_STAGE_NR];
	const uint64_t *reads_counter;	/* guest reads so far, or NULL */
	uint64_t reads_at;		/* *reads_counter at since */
	uint64_t reads[IVM_STAGE_NR];
};

/* "other", "events", "looks", "stamps", "capture", "write". */
const char *ivm_stage_name(enum ivm_stage s);

/* Make s the current stage (a step begins with it); returns the one before. */
static inline enum ivm_stage ivm_stage_enter(struct ivm_stage_clock *c,
					     enum ivm_stage s)
{
	enum ivm_stage was = c->current;
	uint64_t now = ivm_mono_ns();

	if (c->since)
		c->ns[was] += now - c->since;
	if (c->reads_counter) {
		uint64_t r = __atomic_load_n(c->reads_counter,
					     __ATOMIC_RELAXED);

		if (c->since)
			c->reads[was] += r - c->reads_at;
		c->reads_at = r;
	}
	c->current = s;
	c->since = now;
	return was;
}

/* The step ends: nothing is charged until the next ivm_stage_enter. */
static inline void ivm_stage_stop(struct ivm_stage_clock *c)
{
	ivm_stage_enter(c, IVM_STAGE_OTHER);
	c->since = 0;
}

#endif /* IVM_STAGE_CLOCK_H */
