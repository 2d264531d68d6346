// SPDX-License-Identifier: MIT
/*
 * vcpu_watch over the synthetic guest (synth_guest.h): the words of every
 * vCPU read in one batch, the switch words alone, and what a look does
 * with words it could not read.
 */
#include "synth_guest.h"
#include "profile/vcpu_watch.h"

Test(vcpu_watch, one_batch_for_all_vcpus)
{
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = KVA(L_INIT_TASK) },	/* image: walk */
		{ .cpu = 1, .idle_task = task_va(IDLE1) },	/* direct map */
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t failed = 0;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, &failed));
	cr_expect_eq(failed, 0);
	cr_expect(v[0].current_ok && v[1].current_ok);
	cr_expect_eq(v[0].current, task_va(T51));
	cr_expect_eq(v[1].current, task_va(IDLE1));
	/* set_task: nvcsw = pid * 10, nivcsw = pid * 10 + 1, idle pid 0. */
	cr_expect(v[0].idle_switches_ok && v[1].idle_switches_ok);
	cr_expect_eq(v[0].idle_switches, 1);
	cr_expect_eq(v[1].idle_switches, 1);

	/* The guest moves on; the next poll sees it, still in one batch. */
	w64(&f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(T52));
	w64(&f, KVA(L_INIT_TASK) + f.off.task_nvcsw, 41);
	cr_assert_null(ivm_vcpu_watch_read(w, 2, v, &failed));
	cr_expect_eq(v[1].current, task_va(T52));
	cr_expect_eq(v[0].idle_switches, 42);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->batches, 2);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->fallbacks, 0);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->translations, 1);

	/* A garbage current is not passed on, the other vCPU still is. */
	w64(&f, DM(PA_PCPU0) + PCPU_CURRENT_TASK, 0x1234);
	cr_assert_null(ivm_vcpu_watch_read(w, 3, v, &failed));
	cr_expect_not(v[0].current_ok);
	cr_expect(v[1].current_ok);
	cr_expect_eq(failed, 1);

	/* Translations are redone after IVM_VCPU_WATCH_RETRANSLATE_NS. */
	cr_assert_null(ivm_vcpu_watch_read(w, 3 + IVM_VCPU_WATCH_RETRANSLATE_NS,
					   v, NULL));
	cr_expect_eq(ivm_vcpu_watch_stats(w)->translations, 2);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A second read that only checks the first (profiler.c settle_views):
 * the words that tell a switch, and none of the others.
 */
Test(vcpu_watch, switches_alone)
{
	const uint64_t clock0 = DM(PA_PCPU0) + PCPU_RUNQUEUES + 0x90;
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = KVA(L_INIT_TASK),
		  .rq_clock_va = clock0 },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;
	unsigned int i;

	fixture_init(&f);
	l = create_ok(&f);
	for (i = 0; i < 2; i++)
		cr_assert_null(ivm_kernel_cpu_switches_va(l, i,
							  &targets[i].switches_va));
	w64(&f, DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_NR_SWITCHES, 77);
	w64(&f, clock0, 5000);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read_switches(w, 1, v));
	cr_expect(v[0].current_ok && v[1].current_ok);
	cr_expect_eq(v[0].current, task_va(T51));
	cr_expect(v[0].idle_switches_ok && v[1].idle_switches_ok);
	cr_expect_eq(v[1].idle_switches, 1);
	cr_expect(v[1].cpu_switches_ok);
	cr_expect_eq(v[1].cpu_switches, 77);
	/* The run queue's clock is not a switch's word: left unread. */
	cr_expect_not(v[0].rq_clock_ok);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->batches, 1);
	/* ... which a whole read has. */
	cr_assert_null(ivm_vcpu_watch_read(w, 2, v, NULL));
	cr_expect(v[0].rq_clock_ok);
	cr_expect_eq(v[0].rq_clock, 5000);
	cr_expect_eq(v[1].cpu_switches, 77);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A switch under way: rq->curr is the task arriving while current is
 * still the one leaving (its stacks not switched yet).  The view says so,
 * in a whole read and in the check of the switch words alone.
 */
Test(vcpu_watch, mid_switch)
{
	const uint64_t curr1 = DM(PA_PCPU1) + PCPU_RUNQUEUES + RQ_CURR;
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = KVA(L_INIT_TASK) },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_kernel_layout *l;
	struct ivm_vcpu_watch_view v[2];
	struct fixture f;
	struct ivm_vcpu_watch *w;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_eq(f.off.rq_curr, RQ_CURR);
	cr_assert_null(ivm_kernel_cpu_rq_curr_va(l, 0, &targets[0].rq_curr_va));
	cr_assert_null(ivm_kernel_cpu_rq_curr_va(l, 1, &targets[1].rq_curr_va));
	cr_expect_eq(targets[1].rq_curr_va, curr1);
	/* CPU 0 settled on T51; CPU 1 idle, switching to T52. */
	w64(&f, DM(PA_PCPU0) + PCPU_RUNQUEUES + RQ_CURR, task_va(T51));
	w64(&f, curr1, task_va(T52));
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, NULL));
	cr_expect_eq(v[1].current, task_va(IDLE1));
	cr_expect(v[1].mid_switch);
	cr_expect_not(v[0].mid_switch);
	cr_assert_null(ivm_vcpu_watch_read_switches(w, 2, v));
	cr_expect(v[1].mid_switch);
	/* The stacks switched: current caught up. */
	w64(&f, DM(PA_PCPU1) + PCPU_CURRENT_TASK, task_va(T52));
	cr_assert_null(ivm_vcpu_watch_read_switches(w, 3, v));
	cr_expect_not(v[1].mid_switch);
	cr_expect_eq(v[1].current, task_va(T52));
	ivm_vcpu_watch_destroy(w);
	/* Not watched: never taken as a switch under way. */
	targets[1].rq_curr_va = 0;
	w64(&f, curr1, task_va(P1));
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 4, v, NULL));
	cr_expect_not(v[1].mid_switch);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(vcpu_watch, unreadable_word_falls_back_alone)
{
	/* An idle task whose counters lie past the end of guest RAM. */
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = 0, .idle_task = DM(A_SIZE + 0x1000) },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;
	uint64_t failed = 0;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     f.off.task_nvcsw,
					     f.off.task_nivcsw, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, &failed));
	cr_expect_not(v[0].idle_switches_ok);
	cr_expect(v[0].current_ok);
	cr_expect(v[1].current_ok && v[1].idle_switches_ok);
	cr_expect_eq(failed, 2);
	cr_expect_eq(ivm_vcpu_watch_stats(w)->fallbacks, 1);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

Test(vcpu_watch, unwatched_vcpu_and_no_counters)
{
	struct ivm_vcpu_watch_target targets[2] = {
		{ .cpu = -1, .idle_task = 0 },
		{ .cpu = 1, .idle_task = task_va(IDLE1) },
	};
	struct ivm_vcpu_watch_view v[2];
	struct ivm_vcpu_watch *w;
	struct ivm_kernel_layout *l;
	struct fixture f;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_vcpu_watch_create(l, f.gmem, targets, 2,
					     IVM_KOFF_NONE, IVM_KOFF_NONE, NULL, &w));
	cr_assert_null(ivm_vcpu_watch_read(w, 1, v, NULL));
	cr_expect_not(v[0].current_ok);
	cr_expect(v[1].current_ok);
	cr_expect_not(v[1].idle_switches_ok);
	ivm_vcpu_watch_destroy(w);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}
