/* SPDX-License-Identifier: MIT */
/*
 * sample_hold: a sample kept aside until its value is known, as one
 * allocation holding its frames, labels and counters (a struct ivm_sample
 * borrows all of them).
 *
 * A to-idle sample is taken when its idle period opens; how long the
 * period lasts (its IVM_COUNTER_IDLE_NS) is known only when it ends.  The
 * profiler holds one such sample per vCPU and writes it with its value
 * then, or without one when the period's end is not in this file (the run
 * or its window ended first).  A held sample is lost with the process on
 * SIGKILL: one per vCPU at most.
 */
#ifndef IVM_SAMPLE_HOLD_H
#define IVM_SAMPLE_HOLD_H

#include <stdbool.h>

#include "base/error.h"
#include "profile/sample.h"

struct ivm_sample_hold {
	bool held;
	struct ivm_sample sample;	/* points into blob */
	void *blob;
};

/* Copy s into h (replacing what h held).  h must be zeroed at first. */
struct ivm_error *ivm_sample_hold(struct ivm_sample_hold *h,
				  const struct ivm_sample *s);

/*
 * The held sample with one more counter (id, value), into *out, which
 * borrows from h and from counters (room for IVM_SAMPLE_MAX_COUNTERS);
 * a sample that already has the most counters keeps its own.
 */
void ivm_sample_with_counter(const struct ivm_sample *s, uint32_t id,
			     uint64_t value, struct ivm_counter *counters,
			     struct ivm_sample *out);

/* Forget what h holds and free it. */
void ivm_sample_release(struct ivm_sample_hold *h);

#endif /* IVM_SAMPLE_HOLD_H */
