/* SPDX-License-Identifier: MIT */
/*
 * cause_labels: the why-idle causes as labels of the samples, so a
 * profile viewer can filter by them (`go tool pprof -tagfocus=wake=device`):
 *
 *   wake       on a to-idle sample, what ended the idle period it began;
 *              on a from-idle sample, what ended the one it ended
 *              ("device", "ipi", "timer", "unknown": idle_summary.h's
 *              causes, from the period's wake_mask);
 *   host_wake  on a from-idle sample with a host wake delay (its
 *              host_wake_ns value), the delay's bucket ("lt_10us",
 *              "lt_100us", "lt_1ms", "lt_10ms", "lt_100ms", "ge_100ms",
 *              host_sched.h's): the delays themselves are the pprof's
 *              host_wake_ns values, summed per stack, so a bucket is what
 *              a filter can use.
 *
 * A sample is matched to the period of its vCPU among the last few the
 * file gave before it (a to-idle sample is written once its period ended,
 * a from-idle one after its period's record): a to-idle sample taken
 * within the period, a from-idle one at or soon after its end.  A sample
 * with no such period gets no wake label.
 */
#ifndef IVM_CAUSE_LABELS_H
#define IVM_CAUSE_LABELS_H

#include <stdbool.h>
#include <stdint.h>

#include "profile/profile_file.h"

#define IVM_CAUSE_LABELS_VCPUS	256
#define IVM_CAUSE_LABELS_RECENT	8
/* A from-idle sample this long after its period's end still matches it. */
#define IVM_CAUSE_LABELS_LATE_NS	100000000ull

#define IVM_CAUSE_LABEL_WAKE		"wake"
#define IVM_CAUSE_LABEL_HOST_WAKE	"host_wake"

struct ivm_cause_labels {
	struct {
		uint64_t start_ns, end_ns;
		uint32_t wake_mask;
	} recent[IVM_CAUSE_LABELS_VCPUS][IVM_CAUSE_LABELS_RECENT];
	uint32_t next[IVM_CAUSE_LABELS_VCPUS];
	uint64_t matched, unmatched;	/* to-idle and from-idle samples */
};

void ivm_cause_labels_init(struct ivm_cause_labels *cl);

/* An idle period of the file, in file order. */
void ivm_cause_labels_period(struct ivm_cause_labels *cl,
			     const struct ivm_idle_record *r);

/*
 * s with its cause labels after its own (as many as fit under
 * IVM_SAMPLE_MAX_LABELS): s itself when it gets none, else *copy, whose
 * labels are in labels (IVM_SAMPLE_MAX_LABELS of them).
 */
const struct ivm_sample *ivm_cause_labels_sample(struct ivm_cause_labels *cl,
						 const struct ivm_sample *s,
						 struct ivm_sample *copy,
						 struct ivm_label *labels);

/* Whether key is one of these labels' (a "-" of them means none). */
bool ivm_cause_label_key(const char *key);

#endif /* IVM_CAUSE_LABELS_H */
