// SPDX-License-Identifier: MIT
/*
 * Fuzz the profile-file reader: any bytes as a profile must decode without
 * crashing, reading out of bounds or looping, and everything it returns must
 * respect the caps promised in sample.h.  Thread records go through the
 * threads report too; host spans must be in order, of known kinds, and
 * drawn by the timeline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/calltree.h"
#include "report/idle_summary.h"
#include "report/timeline.h"
#include "report/threads.h"
#include "profile/profile_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_calltree *tree;
	struct ivm_idle_summary idle;
	FILE *sink;
	struct ivm_threads *threads;
	struct ivm_error *err;
	size_t i;

	err = ivm_profile_reader_from_memory(data, size, &r);
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (ivm_calltree_create(IVM_CALLTREE_BY_PROCESS |
				IVM_CALLTREE_BY_THREAD, &tree)) {
		ivm_profile_reader_destroy(r);
		return 0;
	}
	if (ivm_threads_create(&threads)) {
		ivm_calltree_destroy(tree);
		ivm_profile_reader_destroy(r);
		return 0;
	}
	ivm_idle_summary_init(&idle);
	while (ivm_profile_reader_next(r, &rec)) {
		ivm_error_destroy(ivm_idle_summary_add(&idle, &rec));
		if (rec.type == IVM_RECORD_SAMPLE) {
			const struct ivm_sample *s = &rec.sample;

			if (s->nr_kernel > IVM_SAMPLE_MAX_FRAMES ||
			    s->nr_user > IVM_SAMPLE_MAX_FRAMES ||
			    strnlen(s->comm, IVM_COMM_LEN) == IVM_COMM_LEN)
				abort();
			for (i = 0; i < s->nr_labels; i++)
				if (strlen(s->labels[i].key) >
				    IVM_SAMPLE_MAX_STRING)
					abort();
			ivm_error_destroy(ivm_calltree_add(tree, s));
		} else if (rec.type == IVM_RECORD_IDLE_PERIOD) {
			const struct ivm_idle_record *ir = &rec.idle;

			if (strnlen(ir->to_idle.comm, IVM_COMM_LEN) ==
			    IVM_COMM_LEN ||
			    strnlen(ir->from_idle.comm, IVM_COMM_LEN) ==
			    IVM_COMM_LEN || ir->end_ns < ir->start_ns ||
			    ir->wake_mask >> IVM_IRQ_NR_KINDS ||
			    ir->after.irqs.known >> IVM_IRQ_NR_KINDS)
				abort();
		} else if (rec.type == IVM_RECORD_THREAD) {
			const struct ivm_thread_record *t = &rec.thread;

			if (t->nr_counters > IVM_SAMPLE_MAX_COUNTERS ||
			    strnlen(t->comm, IVM_COMM_LEN) == IVM_COMM_LEN ||
			    t->last_ns < t->first_ns)
				abort();
			ivm_error_destroy(ivm_threads_add(threads, t));
		} else if (rec.type == IVM_RECORD_HOST_SPANS) {
			const struct ivm_spans_record *sr = &rec.spans;

			if (sr->nr > IVM_SPANS_MAX ||
			    (sr->lane >= IVM_SPAN_MAX_VCPUS &&
			     sr->lane != IVM_SPAN_LANE_DISK))
				abort();
			for (i = 0; i < sr->nr; i++)
				if (sr->spans[i].kind >= IVM_SPAN_NR_KINDS ||
				    (i && sr->spans[i].start_ns <
					  sr->spans[i - 1].start_ns) ||
				    sr->spans[i].start_ns + sr->spans[i].dur_ns <
				    sr->spans[i].start_ns)
					abort();
		} else if (rec.type == IVM_RECORD_META) {
			for (i = 0; i < rec.meta.nr; i++)
				(void)strlen(rec.meta.items[i].value);
		}
	}
	/* The idle and threads reports over whatever the file held. */
	sink = fopen("/dev/null", "w");
	if (sink) {
		ivm_idle_summary_print(&idle, sink);
		ivm_idle_summary_print_periods(&idle, sink);
		ivm_error_destroy(ivm_timeline_json(&idle, sink));
		ivm_error_destroy(ivm_timeline_html(&idle, sink));
		ivm_threads_print(threads, (enum ivm_threads_sort)(size % 9),
				  size % 5, sink);
		fclose(sink);
	}
	ivm_idle_summary_deinit(&idle);
	ivm_threads_destroy(threads);
	ivm_calltree_destroy(tree);
	ivm_profile_reader_destroy(r);
	return 0;
}
