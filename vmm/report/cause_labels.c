// SPDX-License-Identifier: MIT
#include <string.h>

#include "profile/host_sched.h"
#include "report/cause_labels.h"
#include "report/idle_summary.h"

void ivm_cause_labels_init(struct ivm_cause_labels *cl)
{
	memset(cl, 0, sizeof(*cl));
}

void ivm_cause_labels_period(struct ivm_cause_labels *cl,
			     const struct ivm_idle_record *r)
{
	uint32_t *next;

	/* Without its start, a period's samples are not of its time. */
	if (r->vcpu >= IVM_CAUSE_LABELS_VCPUS ||
	    (r->flags & IVM_IDLE_START_UNKNOWN))
		return;
	next = &cl->next[r->vcpu];
	cl->recent[r->vcpu][*next % IVM_CAUSE_LABELS_RECENT].start_ns =
		r->start_ns;
	cl->recent[r->vcpu][*next % IVM_CAUSE_LABELS_RECENT].end_ns = r->end_ns;
	cl->recent[r->vcpu][*next % IVM_CAUSE_LABELS_RECENT].wake_mask =
		r->wake_mask;
	(*next)++;
}

/* The wake mask of the period s belongs to; false when none. */
static bool period_of(const struct ivm_cause_labels *cl,
		      const struct ivm_sample *s, uint32_t *wake_mask)
{
	uint32_t n = cl->next[s->vcpu], i;
	uint64_t t = s->time_ns;

	for (i = 0; i < IVM_CAUSE_LABELS_RECENT && i < n; i++) {
		const uint32_t k = (n - 1 - i) % IVM_CAUSE_LABELS_RECENT;
		uint64_t start = cl->recent[s->vcpu][k].start_ns;
		uint64_t end = cl->recent[s->vcpu][k].end_ns;
		bool in = s->kind == IVM_SAMPLE_TO_IDLE ?
			  start <= t && t <= end :
			  end <= t && t - end <= IVM_CAUSE_LABELS_LATE_NS;

		if (in) {
			*wake_mask = cl->recent[s->vcpu][k].wake_mask;
			return true;
		}
		/* Older periods ended before this one: no later match. */
		if (end < t && s->kind == IVM_SAMPLE_FROM_IDLE)
			return false;
	}
	return false;
}

static const char *const wake_buckets[IVM_HOST_DELAY_BUCKETS] = {
	"lt_10us", "lt_100us", "lt_1ms", "lt_10ms", "lt_100ms", "ge_100ms",
};

static const char *host_wake_bucket(const struct ivm_sample *s)
{
	unsigned int i;
	size_t b;

	for (i = 0; i < s->nr_counters; i++) {
		if (s->counters[i].id != IVM_COUNTER_HOST_WAKE_NS)
			continue;
		for (b = 0; b + 1 < IVM_HOST_DELAY_BUCKETS &&
			    s->counters[i].value >=
			    ivm_host_sched_delay_bound(b); b++)
			;
		return wake_buckets[b];
	}
	return NULL;
}

const struct ivm_sample *ivm_cause_labels_sample(struct ivm_cause_labels *cl,
						 const struct ivm_sample *s,
						 struct ivm_sample *copy,
						 struct ivm_label *labels)
{
	const char *wake = NULL, *host_wake = NULL;
	uint32_t mask;
	size_t n;

	if (s->kind != IVM_SAMPLE_TO_IDLE && s->kind != IVM_SAMPLE_FROM_IDLE)
		return s;
	if (s->vcpu < IVM_CAUSE_LABELS_VCPUS && period_of(cl, s, &mask)) {
		wake = ivm_idle_cause_name(ivm_idle_cause_of(mask));
		cl->matched++;
	} else {
		cl->unmatched++;
	}
	if (s->kind == IVM_SAMPLE_FROM_IDLE)
		host_wake = host_wake_bucket(s);
	if ((!wake && !host_wake) || s->nr_labels >= IVM_SAMPLE_MAX_LABELS)
		return s;
	*copy = *s;
	n = s->nr_labels;
	memcpy(labels, s->labels, n * sizeof(*labels));
	if (wake)
		labels[n++] = (struct ivm_label){ IVM_CAUSE_LABEL_WAKE, wake };
	if (host_wake && n < IVM_SAMPLE_MAX_LABELS)
		labels[n++] = (struct ivm_label){ IVM_CAUSE_LABEL_HOST_WAKE,
						  host_wake };
	copy->labels = labels;
	copy->nr_labels = (uint16_t)n;
	return copy;
}

bool ivm_cause_label_key(const char *key)
{
	return !strcmp(key, IVM_CAUSE_LABEL_WAKE) ||
	       !strcmp(key, IVM_CAUSE_LABEL_HOST_WAKE);
}
