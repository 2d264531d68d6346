// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>

#include "profile/dispatch.h"

#define IDLE_TASK	0xffff888000001000ull
#define TASK_A		0xffff888000a00000ull
#define TASK_B		0xffff888000b00000ull

static struct ivm_dispatch *d;
static uint64_t now_ns;

static void setup(uint32_t idle_every, uint64_t tick_ns)
{
	struct ivm_dispatch_config cfg = { .idle_every = idle_every,
					   .tick_ns = tick_ns };

	cr_assert_null(ivm_dispatch_create(2, &cfg, &d));
	now_ns = 0;
}

static void teardown(void)
{
	ivm_dispatch_destroy(d);
}

/*
 * Observe vcpu running task (0 = idle task), HLT when idle; with counted,
 * also the CPU's context-switch count and its idle task's switch count
 * (idle periods ended), as the profiler's poll reads them.
 */
static bool observe(uint32_t vcpu, uint64_t task, bool counted,
		    uint64_t cpu_switches, uint64_t idle_switches,
		    struct ivm_capture_req *req)
{
	struct ivm_vcpu_obs obs = {
		.time_ns = now_ns += 1000000,
		.halted = task == 0,
		.current_known = true,
		.current = task ? task : IDLE_TASK,
		.current_is_idle = task == 0,
		.idle_switches_known = counted,
		.idle_switches = idle_switches,
		.cpu_switches_known = counted,
		.cpu_switches = cpu_switches,
	};

	return ivm_dispatch_observe(d, vcpu, &obs, req);
}

static bool see(uint32_t vcpu, uint64_t task, struct ivm_capture_req *req)
{
	return observe(vcpu, task, false, 0, 0, req);
}

static bool see_counted(uint32_t vcpu, uint64_t task, uint64_t cpu_switches,
			uint64_t idle_switches, struct ivm_capture_req *req)
{
	return observe(vcpu, task, true, cpu_switches, idle_switches, req);
}

TestSuite(dispatch, .fini = teardown);

Test(dispatch, to_idle_then_from_idle)
{
	struct ivm_capture_req req;

	setup(1, 0);
	cr_assert_not(see(0, TASK_A, &req));	/* A runs */
	cr_assert(see(0, 0, &req));		/* vCPU halts: to-idle A */
	cr_assert_eq(req.kind, IVM_SAMPLE_TO_IDLE);
	cr_assert_eq(req.task, TASK_A);
	cr_assert_eq(req.vcpu, 0);
	ivm_dispatch_capture_done(d, 0);
	cr_assert_not(see(0, 0, &req));		/* still idle: nothing */
	cr_assert(see(0, TASK_B, &req));	/* B wakes first: from-idle B */
	cr_assert_eq(req.kind, IVM_SAMPLE_FROM_IDLE);
	cr_assert_eq(req.task, TASK_B);
	ivm_dispatch_capture_done(d, 0);
	cr_assert_not(see(0, TASK_A, &req));	/* deferred flag consumed */
	cr_assert_eq(ivm_dispatch_stats(d)->idle_transitions, 1);
	cr_assert_eq(ivm_dispatch_stats(d)->wake_transitions, 1);
}

/*
 * The profiler looks again after a wakeup only while the from-idle task is
 * undecided: waiting from the sampled to-idle on, done once it is taken.
 */
Test(dispatch, awaits_from_idle_until_it_is_decided)
{
	struct ivm_capture_req req;

	setup(2, 0);
	cr_assert_not(ivm_dispatch_awaits_from_idle(d, 0));
	see(0, TASK_A, &req);
	cr_assert_not(see(0, 0, &req));		/* 1st transition: not sampled */
	cr_assert_not(ivm_dispatch_awaits_from_idle(d, 0));
	see(0, TASK_A, &req);
	cr_assert(see(0, 0, &req));		/* 2nd: sampled */
	ivm_dispatch_capture_done(d, 0);
	cr_assert(ivm_dispatch_awaits_from_idle(d, 0));
	cr_assert_not(ivm_dispatch_awaits_from_idle(d, 1));
	cr_assert_not(see(0, 0, &req));		/* still idle: still waiting */
	cr_assert(ivm_dispatch_awaits_from_idle(d, 0));
	cr_assert(see(0, TASK_B, &req));	/* seen: decided */
	cr_assert_not(ivm_dispatch_awaits_from_idle(d, 0));
	cr_assert_not(ivm_dispatch_awaits_from_idle(d, 7));	/* no such vCPU */
}

Test(dispatch, one_capture_in_flight_per_vcpu)
{
	struct ivm_capture_req req;

	setup(1, 0);
	see(0, TASK_A, &req);
	cr_assert(see(0, 0, &req));		/* to-idle A, not done yet */
	cr_assert_not(see(0, TASK_B, &req));	/* from-idle B dropped */
	cr_assert_eq(ivm_dispatch_stats(d)->lost_busy, 1);
	/* The other vCPU is independent. */
	see(1, TASK_B, &req);
	cr_assert(see(1, 0, &req));
	cr_assert_eq(req.vcpu, 1);
	cr_assert_eq(req.task, TASK_B);
	cr_assert(ivm_dispatch_in_flight(d, 0));
	ivm_dispatch_capture_done(d, 0);
	cr_assert_not(ivm_dispatch_in_flight(d, 0));
}

Test(dispatch, every_nth_transition)
{
	struct ivm_capture_req req;
	int i, to_idle = 0;

	setup(3, 0);
	for (i = 0; i < 9; i++) {
		if (see(0, TASK_A, &req)) {
			cr_assert_eq(req.kind, IVM_SAMPLE_FROM_IDLE);
			ivm_dispatch_capture_done(d, 0);
		}
		if (see(0, 0, &req)) {
			to_idle++;
			ivm_dispatch_capture_done(d, 0);
		}
	}
	cr_assert_eq(to_idle, 3);
	cr_assert_eq(ivm_dispatch_stats(d)->idle_transitions, 9);
}

Test(dispatch, no_target_before_first_task)
{
	struct ivm_capture_req req;

	setup(1, 0);
	cr_assert_not(see(0, 0, &req));		/* starts idle */
	cr_assert_eq(ivm_dispatch_stats(d)->idle_transitions, 0);
	cr_assert_not(see(0, TASK_A, &req));
	cr_assert(see(0, 0, &req));
}

Test(dispatch, halted_with_real_task_is_inconsistent)
{
	struct ivm_capture_req req;
	struct ivm_vcpu_obs obs = { .time_ns = 1, .halted = true,
				    .current_known = true, .current = TASK_A };

	setup(1, 0);
	cr_assert_not(ivm_dispatch_observe(d, 0, &obs, &req));
	cr_assert_eq(ivm_dispatch_stats(d)->inconsistent, 1);
}

Test(dispatch, hlt_only_signal_without_current)
{
	struct ivm_capture_req req;
	struct ivm_vcpu_obs run = { .time_ns = 1 }, halt = { .time_ns = 2,
							     .halted = true };

	setup(1, 0);
	cr_assert_not(ivm_dispatch_observe(d, 0, &run, &req));
	/* Idle, but no task was ever seen: counted, no request. */
	cr_assert_not(ivm_dispatch_observe(d, 0, &halt, &req));
	cr_assert_eq(ivm_dispatch_stats(d)->idle_transitions, 1);
	cr_assert_eq(ivm_dispatch_stats(d)->lost_no_target, 1);
}

Test(dispatch, on_cpu_ticks)
{
	struct ivm_capture_req req;
	int i, ticks = 0;

	setup(0, 10000000);			/* 10 ms; observations 1 ms */
	for (i = 0; i < 100; i++) {
		if (see(0, TASK_A, &req)) {
			cr_assert_eq(req.kind, IVM_SAMPLE_ON_CPU);
			ticks++;
			ivm_dispatch_capture_done(d, 0);
		}
	}
	cr_assert(ticks >= 9 && ticks <= 11, "ticks %d", ticks);
	/* No ticks while idle. */
	for (i = 0; i < 50; i++)
		cr_assert_not(see(0, 0, &req));
}

Test(dispatch, missed_idle_periods_are_counted)
{
	struct ivm_capture_req req;
	struct ivm_vcpu_obs obs = {
		.current_known = true, .current = TASK_A,
		.idle_switches_known = true, .idle_switches = 10,
	};

	setup(1, 0);
	obs.time_ns = 1;
	ivm_dispatch_observe(d, 0, &obs, &req);
	/* Still running A, but 3 idle periods came and went. */
	obs.time_ns = 2;
	obs.idle_switches = 13;
	ivm_dispatch_observe(d, 0, &obs, &req);
	cr_assert_eq(ivm_dispatch_stats(d)->missed_idle, 3);
	/* Goes idle (seen), then wakes once (seen): nothing missed. */
	obs.time_ns = 3;
	obs.current = IDLE_TASK;
	obs.current_is_idle = true;
	cr_assert(ivm_dispatch_observe(d, 0, &obs, &req));
	ivm_dispatch_capture_done(d, 0);
	obs.time_ns = 4;
	obs.current = TASK_B;
	obs.current_is_idle = false;
	obs.idle_switches = 14;
	cr_assert(ivm_dispatch_observe(d, 0, &obs, &req));
	cr_assert_eq(req.kind, IVM_SAMPLE_FROM_IDLE);
	cr_assert_eq(ivm_dispatch_stats(d)->missed_idle, 3);
}

Test(dispatch, from_idle_target_missed_is_dropped)
{
	struct ivm_capture_req req;
	struct ivm_vcpu_obs obs = {
		.current_known = true, .current = TASK_A,
		.idle_switches_known = true, .idle_switches = 1,
	};

	setup(1, 0);
	obs.time_ns = 1;
	ivm_dispatch_observe(d, 0, &obs, &req);
	obs.time_ns = 2;
	obs.current = IDLE_TASK;
	obs.current_is_idle = true;
	cr_assert(ivm_dispatch_observe(d, 0, &obs, &req));	/* to-idle */
	ivm_dispatch_capture_done(d, 0);
	/* Woke, ran someone, went idle again, woke again: 2 ended. */
	obs.time_ns = 3;
	obs.current = TASK_B;
	obs.current_is_idle = false;
	obs.idle_switches = 3;
	cr_assert_not(ivm_dispatch_observe(d, 0, &obs, &req));
	cr_assert_eq(ivm_dispatch_stats(d)->lost_missed, 1);
	cr_assert_eq(ivm_dispatch_stats(d)->missed_idle, 1);
}

Test(dispatch, bad_arguments)
{
	struct ivm_dispatch_config cfg = { .idle_every = 1 };
	struct ivm_dispatch *bad;
	struct ivm_error *err = ivm_dispatch_create(0, &cfg, &bad);
	struct ivm_capture_req req;
	struct ivm_vcpu_obs obs = { .halted = true };

	cr_assert_not_null(err);
	ivm_error_destroy(err);
	setup(1, 0);
	cr_assert_not(ivm_dispatch_observe(d, 7, &obs, &req));
}

/* One switch since A was seen: A itself went to idle, no doubt. */
Test(dispatch, one_switch_to_idle_is_certain)
{
	struct ivm_capture_req req;

	setup(1, 0);
	cr_assert_not(see_counted(0, TASK_A, 10, 3, &req));
	cr_assert(see_counted(0, 0, 11, 3, &req));
	cr_expect_eq(req.kind, IVM_SAMPLE_TO_IDLE);
	cr_expect_eq(req.task, TASK_A);
	cr_expect_not(req.resolve);
}

/* A -> B -> idle with B unseen: A is only a guess. */
Test(dispatch, more_switches_ask_who_ran_last)
{
	struct ivm_capture_req req;

	setup(1, 0);
	cr_assert_not(see_counted(0, TASK_A, 10, 3, &req));
	cr_assert(see_counted(0, 0, 12, 3, &req));
	cr_expect_eq(req.kind, IVM_SAMPLE_TO_IDLE);
	cr_expect_eq(req.task, TASK_A);
	cr_expect(req.resolve);
	/* The count is from when A was last seen, not first. */
	ivm_dispatch_capture_done(d, 0);
	see_counted(0, TASK_B, 14, 4, &req);
	ivm_dispatch_capture_done(d, 0);
	cr_assert_not(see_counted(0, TASK_B, 20, 4, &req));
	cr_assert(see_counted(0, 0, 21, 4, &req));
	cr_expect_eq(req.task, TASK_B);
	cr_expect_not(req.resolve);
}

/*
 * Idle, then idle again with an idle period ended in between: a task ran
 * and went to idle unseen.  That transition is sampled, to be resolved.
 */
Test(dispatch, idle_periods_between_polls_are_sampled)
{
	struct ivm_capture_req req;

	setup(1, 0);
	see_counted(0, TASK_A, 10, 3, &req);
	cr_assert(see_counted(0, 0, 11, 3, &req));
	ivm_dispatch_capture_done(d, 0);
	cr_assert_not(see_counted(0, 0, 11, 3, &req));	/* nothing new */
	cr_assert(see_counted(0, 0, 13, 4, &req));	/* ran unseen */
	cr_expect_eq(req.kind, IVM_SAMPLE_TO_IDLE);
	cr_expect(req.resolve);
	cr_expect_eq(req.task, 0, "A is no guess after unseen runs");
	cr_expect_eq(ivm_dispatch_stats(d)->unseen_to_idle, 1);
	cr_expect_eq(ivm_dispatch_stats(d)->missed_idle, 0);
	ivm_dispatch_capture_done(d, 0);
	/* Three more periods came and went: one sample, two missed. */
	cr_assert(see_counted(0, 0, 19, 7, &req));
	cr_expect_eq(ivm_dispatch_stats(d)->unseen_to_idle, 2);
	cr_expect_eq(ivm_dispatch_stats(d)->missed_idle, 2);
	ivm_dispatch_capture_done(d, 0);
	/* The from-idle half of that sampled period: the next task seen. */
	cr_assert(see_counted(0, TASK_B, 20, 8, &req));
	cr_expect_eq(req.kind, IVM_SAMPLE_FROM_IDLE);
	cr_expect_eq(req.task, TASK_B);
}

/* Without the CPU's switch count nothing can be resolved: as before. */
Test(dispatch, unseen_periods_need_the_cpu_switch_count)
{
	struct ivm_capture_req req;
	struct ivm_vcpu_obs obs = {
		.halted = true, .current_known = true, .current = IDLE_TASK,
		.current_is_idle = true, .idle_switches_known = true,
	};

	setup(1, 0);
	see(0, TASK_A, &req);
	cr_assert(see(0, 0, &req));
	cr_expect_not(req.resolve);
	ivm_dispatch_capture_done(d, 0);
	obs.time_ns = now_ns += 1000000;
	obs.idle_switches = 3;
	cr_assert_not(ivm_dispatch_observe(d, 0, &obs, &req));
	obs.time_ns = now_ns += 1000000;
	obs.idle_switches = 4;
	cr_assert_not(ivm_dispatch_observe(d, 0, &obs, &req));
	cr_expect_eq(ivm_dispatch_stats(d)->unseen_to_idle, 0);
	cr_expect_eq(ivm_dispatch_stats(d)->missed_idle, 0);
}
