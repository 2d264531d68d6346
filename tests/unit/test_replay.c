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
	size_t n = ivm_replay_gaps(runs, 3, 100, gaps, 4);

	cr_assert_eq(n, 1);
	cr_assert_eq(gaps[0].to_idle, A);
	cr_assert_eq(gaps[0].from_idle, B);
	cr_assert_eq(gaps[0].start, 150);
	cr_assert_eq(gaps[0].end, 180);
}

Test(replay, running_task_and_bad_stamps_make_no_gap)
{
	struct ivm_last_ran_run runs[] = {
		{ .task = A, .arrival = 110, .end = 120, .on_cpu = true },
		{ .task = B, .arrival = 300, .end = 250 },	/* ends before it arrived */
		{ .task = C, .arrival = 400, .end = 500 },
	};
	struct ivm_replay_gap gaps[4];

	/* A still runs: nothing after it is a gap from A; B's stamps are garbage. */
	cr_assert_eq(ivm_replay_gaps(runs, 3, 100, gaps, 4), 0);
}

Test(replay, capped_output)
{
	struct ivm_last_ran_run runs[6];
	struct ivm_replay_gap gaps[2];
	size_t i;

	for (i = 0; i < 6; i++)
		runs[i] = (struct ivm_last_ran_run){ .task = 0x1000 * (i + 1),
			.arrival = 1000 + i * 100, .end = 1050 + i * 100 };
	cr_assert_eq(ivm_replay_gaps(runs, 6, 0, gaps, 2), 2);
	cr_assert_eq(gaps[1].from_idle, 0x3000);
	cr_assert_eq(ivm_replay_gaps(runs, 0, 0, gaps, 2), 0);
}
