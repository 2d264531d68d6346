// SPDX-License-Identifier: MIT
/*
 * sample_hold: a held sample owns copies of everything its original
 * borrowed, and takes one more counter when there is room.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "profile/sample_hold.h"

Test(sample_hold, deep_copy_then_one_more_counter)
{
	uint64_t kpcs[3] = { 1, 2, 3 }, upcs[2] = { 4, 5 };
	uint8_t kflags[3] = { 1, 0, 0 };
	char key[8] = "tier", value[8] = "gold";
	struct ivm_label label = { key, value };
	struct ivm_counter counters[IVM_SAMPLE_MAX_COUNTERS] = {
		{ 1, 10 },
	};
	struct ivm_counter room[IVM_SAMPLE_MAX_COUNTERS];
	struct ivm_sample s = {
		.kind = IVM_SAMPLE_TO_IDLE, .vcpu = 1, .tid = 9,
		.comm = "ls-worker-0", .nr_kernel = 3, .nr_user = 2,
		.nr_labels = 1, .nr_counters = 1, .kernel_pcs = kpcs,
		.user_pcs = upcs, .kernel_flags = kflags, .labels = &label,
		.counters = counters,
	}, out;
	struct ivm_sample_hold h = { 0 };

	cr_assert_null(ivm_sample_hold(&h, &s));
	/* The original's buffers change: the held copy does not. */
	kpcs[0] = upcs[1] = 99;
	kflags[0] = 0;
	strcpy(value, "lead");
	counters[0].value = 11;
	cr_assert(h.held);
	cr_assert_eq(h.sample.kernel_pcs[0], 1);
	cr_assert_eq(h.sample.user_pcs[1], 5);
	cr_assert_eq(h.sample.kernel_flags[0], 1);
	cr_assert_null(h.sample.user_flags);
	cr_assert_str_eq(h.sample.labels[0].value, "gold");
	cr_assert_str_eq(h.sample.comm, "ls-worker-0");
	cr_assert_eq(h.sample.counters[0].value, 10);
	ivm_sample_with_counter(&h.sample, IVM_COUNTER_IDLE_NS, 5000, room,
				&out);
	cr_assert_eq(out.nr_counters, 2);
	cr_assert_eq(out.counters[1].id, IVM_COUNTER_IDLE_NS);
	cr_assert_eq(out.counters[1].value, 5000);
	/* Holding again replaces; a full sample keeps its own counters. */
	s.nr_counters = IVM_SAMPLE_MAX_COUNTERS;
	cr_assert_null(ivm_sample_hold(&h, &s));
	ivm_sample_with_counter(&h.sample, IVM_COUNTER_IDLE_NS, 5000, room,
				&out);
	cr_assert_eq(out.nr_counters, IVM_SAMPLE_MAX_COUNTERS);
	ivm_sample_release(&h);
	cr_assert_not(h.held);
	ivm_sample_release(&h);		/* twice is harmless */
}
