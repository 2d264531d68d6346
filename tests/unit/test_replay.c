// SPDX-License-Identifier: MIT
/* Idle periods rebuilt from synthetic scheduler stamps (replay.h). */
#include <criterion/criterion.h>

#include "profile/replay.h"

#define A 0xa000
#define B 0xb000
#define C 0xc000

Test(replay, gaps_between_runs_are_idle_periods)
{
	/*
	 * Since 100: A ran from before it to 150, the CPU idled, B ran
	 * 180..200 and switched straight to C (same stamp), C ran to 260.
	 */
	struct ivm_last_ran_run runs[] = {
		{ .task = C, .arrival = 200, .end = 260 },
		{ .task = A, .arrival = 90, .end = 150 },
		{ .task = B, .arrival = 180, .end = 200 },
	};
	struct ivm_replay_gap gaps[4];
	struct ivm_replay_window w = { .since = 100 };
	size_t n = ivm_replay_gaps(runs, 3, &w, gaps, 4);

	cr_assert_eq(n, 1);
	cr_assert_eq(gaps[0].to_idle, A);
	cr_assert_eq(gaps[0].from_idle, B);
	cr_assert_eq(gaps[0].start, 150);
	cr_assert_eq(gaps[0].end, 180);
	cr_assert(gaps[0].start_known);
}

Test(replay, running_task_and_bad_stamps_make_no_gap)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = A, .arrival = 110, .end = 120, .on_cpu = true },
		{ .task = B, .arrival = 300, .end = 250 },	/* ends before it arrived */
		{ .task = C, .arrival = 400, .end = 500 },
	};
	struct ivm_replay_gap gaps[4];
	struct ivm_replay_window w = { .since = 100 };

	/* A still runs: nothing after it is a gap from A; B's stamps are garbage. */
	cr_assert_eq(ivm_replay_gaps(runs, 3, &w, gaps, 4), 0);
}

Test(replay, capped_output)
{
	struct ivm_last_ran_run runs[6];
	struct ivm_replay_gap gaps[2];
	struct ivm_replay_window w = { 0 };
	size_t i;

	for (i = 0; i < 6; i++)
		runs[i] = (struct ivm_last_ran_run){ .task = 0x1000 * (i + 1),
			.arrival = 1000 + i * 100, .end = 1050 + i * 100 };
	cr_assert_eq(ivm_replay_gaps(runs, 6, &w, gaps, 2), 2);
	cr_assert_eq(gaps[1].from_idle, 0x3000);
	cr_assert_eq(ivm_replay_gaps(runs, 0, &w, gaps, 2), 0);
}

#define U IVM_LAST_RAN_UNKNOWN

/*
 * A was running at the look before (clock 100), went to idle, took the CPU
 * back at 300 and went to idle again: its stamps show only 300..350.  Three
 * switches, one out of idle, idle now: A, idle, A, idle and nothing else
 * fits, so the hidden period is rebuilt, ending at 300, its start unknown.
 */
Test(replay, task_current_before_that_came_back_from_idle)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = A, .arrival = 300, .end = 350, .arrivals = U },
	};
	struct ivm_replay_window w = {
		.since = 100, .before = A, .counts_ok = true,
		.switches = 3, .from_idle = 1, .idle_now = true,
	};
	struct ivm_replay_gap gaps[4];

	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 1);
	cr_assert_eq(gaps[0].to_idle, A);
	cr_assert_eq(gaps[0].from_idle, A);
	cr_assert_eq(gaps[0].end, 300);
	cr_assert_eq(gaps[0].start, 300);
	cr_assert_not(gaps[0].start_known);

	/* Counts that a switch to another task explains instead: nothing. */
	runs[0].arrival = 300;
	w.from_idle = 0;
	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 0);
	/* Counts unknown: nothing. */
	w.from_idle = 1;
	w.counts_ok = false;
	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 0);
	/* Another task was current before: A's first run is not hidden. */
	w.counts_ok = true;
	w.before = B;
	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 0);
}

/*
 * The same with more after it: A (current before) came back at 300 and
 * switched straight to B at 350; B went to idle at 400, C came from it at
 * 450 and runs now.  Switches: A-idle, idle-A, A-B, B-idle, idle-C; two
 * out of idle.  Both periods, in time order.
 */
Test(replay, hidden_period_first_then_the_stamped_ones)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = C, .arrival = 450, .end = 470, .on_cpu = true,
		  .arrivals = U },
		{ .task = B, .arrival = 350, .end = 400, .arrivals = U },
		{ .task = A, .arrival = 300, .end = 350, .arrivals = U },
	};
	struct ivm_replay_window w = {
		.since = 100, .before = A, .counts_ok = true,
		.switches = 5, .from_idle = 2, .idle_now = false,
	};
	struct ivm_replay_gap gaps[4];

	cr_assert_eq(ivm_replay_gaps(runs, 3, &w, gaps, 4), 2);
	cr_assert_eq(gaps[0].to_idle, A);
	cr_assert_not(gaps[0].start_known);
	cr_assert_eq(gaps[1].to_idle, B);
	cr_assert_eq(gaps[1].from_idle, C);
	cr_assert_eq(gaps[1].start, 400);
	cr_assert_eq(gaps[1].end, 450);
	cr_assert(gaps[1].start_known);
	/*
	 * The idle state now must agree: C runs, so not idle now.  Counts
	 * the runs do not explain rebuild nothing, not even the stamped
	 * B-idle-C: a run not shown may fill that gap.
	 */
	w.idle_now = true;
	cr_assert_eq(ivm_replay_gaps(runs, 3, &w, gaps, 4), 0);
}

/*
 * Idle at the look before (clock 100): A came from idle (hidden), went to
 * idle, came back at 300 and went to idle at 350.  The mark counts two
 * arrivals for A; switches idle-A, A-idle, idle-A, A-idle, two out of
 * idle.  A task counted once more than its runs show makes it ambiguous.
 */
Test(replay, task_switched_in_twice_from_idle_by_the_mark)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = A, .arrival = 300, .end = 350, .arrivals = 2 },
	};
	struct ivm_replay_window w = {
		.since = 100, .before = 0, .counts_ok = true,
		.switches = 4, .from_idle = 2, .idle_now = true,
	};
	struct ivm_replay_gap gaps[4];

	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 1);
	cr_assert_eq(gaps[0].to_idle, A);
	cr_assert_eq(gaps[0].from_idle, A);
	cr_assert_eq(gaps[0].end, 300);
	/* Counted once, or not at all: its runs are all shown. */
	runs[0].arrivals = 1;
	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 0);
	runs[0].arrivals = U;
	cr_assert_eq(ivm_replay_gaps(runs, 1, &w, gaps, 4), 0);

	/* With B after it, switched in twice as well: which ran when? */
	{
		struct ivm_last_ran_run two[] = {
			{ .task = A, .arrival = 300, .end = 350,
			  .arrivals = 2 },
			{ .task = B, .arrival = 400, .end = 450,
			  .arrivals = 2 },
		};

		/*
		 * Nothing, not even the stamped A-idle-B: B's hidden run
		 * may be between them, A then switched straight to B.
		 */
		w.switches = 6;
		w.from_idle = 3;
		cr_assert_eq(ivm_replay_gaps(two, 2, &w, gaps, 4), 0);
		two[1].arrivals = 1;
		w.switches = 6;
		w.from_idle = 3;
		cr_assert_eq(ivm_replay_gaps(two, 2, &w, gaps, 4), 2);
		cr_assert_not(gaps[0].start_known);
		cr_assert_eq(gaps[1].to_idle, A);
		cr_assert_eq(gaps[1].from_idle, B);
	}
}

/*
 * A run from before since (A, current then and still running): no hidden
 * run.  A went to idle at 150, B came from it at 300 and went to idle at
 * 350: three switches, one out of idle.
 */
Test(replay, run_from_before_since_hides_nothing)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = A, .arrival = 50, .end = 150, .arrivals = U },
		{ .task = B, .arrival = 300, .end = 350, .arrivals = U },
	};
	struct ivm_replay_window w = {
		.since = 100, .before = A, .counts_ok = true,
		.switches = 3, .from_idle = 1, .idle_now = true,
	};
	struct ivm_replay_gap gaps[4];

	cr_assert_eq(ivm_replay_gaps(runs, 2, &w, gaps, 4), 1);
	cr_assert(gaps[0].start_known);
	cr_assert_eq(gaps[0].to_idle, A);
	cr_assert_eq(gaps[0].from_idle, B);
}

/*
 * A window of the kind web01 showed: since the look before (A current),
 * A ran to 1,000,400, B ran 1,350,000..1,420,000 and the CPU is idle now,
 * but the CPU counted 6 switches, 2 out of idle: a run not shown (a task
 * woken onto the other CPU since) fills one of the gaps.  The gap A..B
 * was rebuilt as an idle period that A began, where the guest's trace can
 * have A switch to that task, not to idle: nothing is rebuilt.
 */
Test(replay, runs_that_miss_switches_rebuild_nothing)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = A, .arrival = 900000, .end = 1000400,
		  .arrivals = U },
		{ .task = B, .arrival = 1350000, .end = 1420000,
		  .arrivals = U },
	};
	struct ivm_replay_window w = {
		.since = 950000, .before = A, .counts_ok = true,
		.switches = 6, .from_idle = 2, .idle_now = true,
	};
	struct ivm_replay_gap gaps[4];

	cr_assert_eq(ivm_replay_gaps(runs, 2, &w, gaps, 4), 0);
	/* The counts of A, idle, B, idle: the gap is idle. */
	w.switches = 3;
	w.from_idle = 1;
	cr_assert_eq(ivm_replay_gaps(runs, 2, &w, gaps, 4), 1);
	cr_assert_eq(gaps[0].to_idle, A);
	/* Unknown counts: the stamps alone, as before. */
	w.switches = 6;
	w.from_idle = 2;
	w.counts_ok = false;
	cr_assert_eq(ivm_replay_gaps(runs, 2, &w, gaps, 4), 1);
}
