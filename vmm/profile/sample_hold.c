// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile/sample_hold.h"

/* Bump allocation inside the blob, 8-byte aligned. */
static void *take(uint8_t *blob, size_t *at, const void *src, size_t len)
{
	void *dst = blob + *at;

	if (len)
		memcpy(dst, src, len);
	*at += (len + 7) & ~(size_t)7;
	return dst;
}

struct ivm_error *ivm_sample_hold(struct ivm_sample_hold *h,
				  const struct ivm_sample *s)
{
	size_t need, at = 0, i, nk = s->nr_kernel, nu = s->nr_user;
	struct ivm_label *labels;
	uint8_t *blob;

	need = 8 * (size_t)(nk + nu) + 2 * (nk + nu + 8) +
	       sizeof(struct ivm_label) * s->nr_labels +
	       sizeof(struct ivm_counter) * s->nr_counters + 16;
	for (i = 0; i < s->nr_labels; i++)
		need += strlen(s->labels[i].key) + strlen(s->labels[i].value) +
			16;
	blob = malloc(need);
	if (!blob)
		return &ivm_enomem;
	ivm_sample_release(h);
	h->blob = blob;
	h->sample = *s;
	h->sample.kernel_pcs = take(blob, &at, s->kernel_pcs, 8 * nk);
	h->sample.user_pcs = take(blob, &at, s->user_pcs, 8 * nu);
	if (s->kernel_flags)
		h->sample.kernel_flags = take(blob, &at, s->kernel_flags, nk);
	if (s->user_flags)
		h->sample.user_flags = take(blob, &at, s->user_flags, nu);
	h->sample.counters = take(blob, &at, s->counters,
				  sizeof(struct ivm_counter) * s->nr_counters);
	labels = take(blob, &at, s->labels,
		      sizeof(struct ivm_label) * s->nr_labels);
	for (i = 0; i < s->nr_labels; i++) {
		labels[i].key = take(blob, &at, s->labels[i].key,
				     strlen(s->labels[i].key) + 1);
		labels[i].value = take(blob, &at, s->labels[i].value,
				       strlen(s->labels[i].value) + 1);
	}
	h->sample.labels = labels;
	h->held = true;
	return NULL;
}

void ivm_sample_with_counter(const struct ivm_sample *s, uint32_t id,
			     uint64_t value, struct ivm_counter *counters,
			     struct ivm_sample *out)
{
	*out = *s;
	if (s->nr_counters >= IVM_SAMPLE_MAX_COUNTERS)
		return;
	if (s->nr_counters)
		memcpy(counters, s->counters,
		       sizeof(*counters) * s->nr_counters);
	counters[s->nr_counters] = (struct ivm_counter){ id, value };
	out->counters = counters;
	out->nr_counters = (uint16_t)(s->nr_counters + 1);
}

void ivm_sample_release(struct ivm_sample_hold *h)
{
	free(h->blob);
	h->blob = NULL;
	h->held = false;
}
