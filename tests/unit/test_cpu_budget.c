// SPDX-License-Identifier: MIT
/*
 * cpu_budget: the share of slices watched follows the measured cost so
 * that the run's CPU meets the budget, watched slices are spread evenly,
 * and a run without a budget is watched throughout.
 */
#include <criterion/criterion.h>

#include "profile/cpu_budget.h"
#include "report/calltree.h"

#define SLICE IVM_CPU_BUDGET_SLICE_NS

/*
 * Run n slices of a loop whose CPU share is on while watching and off
 * otherwise; the run's CPU share over the last half in *share.
 */
static void run(struct ivm_cpu_budget *b, int n, double on, double off,
		double *share, uint64_t *t)
{
	double cpu = 0;
	uint64_t half = 0;
	int i;

	for (i = 0; i < n; i++) {
		double c = (b->watching ? on : off) * (double)SLICE;

		ivm_cpu_budget_charge(b, (uint64_t)c);
		if (i >= n / 2) {
			cpu += c;
			half += SLICE;
		}
		*t += SLICE;
		ivm_cpu_budget_tick(b, *t);
	}
	*share = cpu / (double)half;
}

Test(cpu_budget, meets_the_budget_by_watching_part_of_the_time)
{
	struct ivm_cpu_budget b;
	uint64_t t = 1000;
	double share;

	ivm_cpu_budget_init(&b, 1, t);
	cr_assert(b.watching, "a run begins watched");
	/* Watching costs 7% of a core, a gap 0.05%: about 1/7 watched. */
	run(&b, 400, 0.07, 0.0005, &share, &t);
	cr_assert(share > 0.009 && share < 0.011, "share %f", share);
	cr_assert(b.share > 0.12 && b.share < 0.15, "f %f", b.share);
	/* The time watched is the slices watched. */
	cr_assert_eq(b.watched_ns, b.watched_slices * SLICE);
	cr_assert_eq(b.total_ns, 400 * SLICE);
}

Test(cpu_budget, spreads_the_watched_slices)
{
	struct ivm_cpu_budget b;
	uint64_t t = 0;
	double share;
	int i, run_len = 0, longest_gap = 0;

	ivm_cpu_budget_init(&b, 2, t);
	run(&b, 100, 0.08, 0, &share, &t);	/* settle at f = 1/4 */
	for (i = 0; i < 100; i++) {
		ivm_cpu_budget_charge(&b, b.watching ? SLICE * 8 / 100 : 0);
		t += SLICE;
		ivm_cpu_budget_tick(&b, t);
		if (b.watching) {
			run_len = 0;
		} else if (++run_len > longest_gap) {
			longest_gap = run_len;
		}
	}
	/* f about 1/4: never more than five unwatched slices in a row. */
	cr_assert(longest_gap <= 5, "gap of %d slices", longest_gap);
}

Test(cpu_budget, holds_over_the_run_its_start_included)
{
	struct ivm_cpu_budget b;
	uint64_t t = 0;
	double share;

	/* Opening the run took 50 ms of CPU; a minute at 1%. */
	ivm_cpu_budget_init(&b, 1, t);
	ivm_cpu_budget_charge(&b, 50000000);
	run(&b, 600, 0.09, 0.0005, &share, &t);
	share = (double)b.cpu_ns / (double)b.total_ns;
	cr_assert(share > 0.009 && share < 0.011, "run's share %f", share);
}

Test(cpu_budget, under_budget_or_none_watches_throughout)
{
	struct ivm_cpu_budget b;
	uint64_t t = 0;
	double share;

	ivm_cpu_budget_init(&b, 5, t);
	run(&b, 50, 0.03, 0, &share, &t);
	cr_assert_eq(b.watched_slices, b.slices);
	ivm_cpu_budget_init(&b, 0, t);
	run(&b, 50, 0.9, 0, &share, &t);
	cr_assert_eq(b.watched_slices, 50);
	cr_assert_eq(ivm_cpu_budget_watched_ns(&b, t + 7), 50 * SLICE + 7);
}

Test(cpu_budget, never_below_the_least_share)
{
	struct ivm_cpu_budget b;
	uint64_t t = 0;
	double share;

	/* A gap alone costs more than the budget: still some watching. */
	ivm_cpu_budget_init(&b, 0.1, t);
	run(&b, 300, 0.5, 0.01, &share, &t);
	cr_assert_float_eq(b.share, IVM_CPU_BUDGET_MIN_SHARE, 1e-9);
	cr_assert(b.watched_slices >= 5);
}

Test(cpu_budget, a_late_step_closes_one_long_slice)
{
	struct ivm_cpu_budget b;

	ivm_cpu_budget_init(&b, 1, 0);
	cr_assert_not(ivm_cpu_budget_tick(&b, SLICE - 1));
	ivm_cpu_budget_charge(&b, SLICE / 2);	/* 50%: over budget */
	ivm_cpu_budget_tick(&b, 5 * SLICE);
	cr_assert_eq(b.slices, 1);
	cr_assert_eq(b.total_ns, 5 * SLICE);
	cr_assert_eq(ivm_cpu_budget_slice_end(&b), 6 * SLICE);
}

Test(calltree, scale_weighs_counts_and_sums_totals)
{
	struct ivm_calltree *tree;
	uint64_t k1[2] = { 0xffffffff81000010ull, 0xffffffff81000020ull };
	uint64_t k2[2] = { 0xffffffff81000030ull, 0xffffffff81000020ull };
	struct ivm_sample a = { .kind = IVM_SAMPLE_TO_IDLE, .pid = 7, .tid = 7,
				.comm = "w", .nr_kernel = 2, .kernel_pcs = k1 };
	struct ivm_sample b = a;
	const struct ivm_calltree_node *root;
	int i;

	b.kernel_pcs = k2;
	cr_assert_null(ivm_calltree_create(0, &tree));
	for (i = 0; i < 3; i++)
		cr_assert_null(ivm_calltree_add(tree, &a));
	cr_assert_null(ivm_calltree_add(tree, &b));
	ivm_calltree_scale(tree, 2.5);
	root = ivm_calltree_node(tree, 0);
	/* 3 * 2.5 = 7.5 -> 8 and 1 * 2.5 -> 3: the root sums them. */
	cr_assert_eq(ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE), 11);
	cr_assert_eq(root->total[IVM_SAMPLE_TO_IDLE], 11);
	ivm_calltree_destroy(tree);
}
