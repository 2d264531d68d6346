// SPDX-License-Identifier: MIT
/*
 * last_ran over the synthetic guest (synth_guest.h): the task that went to
 * idle and the first since a clock, named from the scheduler's stamps, and
 * refused when the stamps cannot tell (tasks forked since the walk, tied
 * stamps, a CPU running again).
 */
#include "synth_guest.h"

Test(last_ran, on_a_cpu)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task, t = 0;
	struct ivm_error *err;

	fixture_init(&f);
	cr_assert_eq(f.off.task_se_exec_start, 0x108);
	w64(&f, task_va(P1) + 0x108, 500);
	w64(&f, task_va(T52) + 0x108, 900);
	w64(&f, task_va(P2) + 0x108, 2000);
	w64(&f, task_va(T51) + 0x108, 100);
	/* The idle tasks' stamps are the newest, and never the answer. */
	w64(&f, task_va(IDLE1) + 0x108, 99999);
	w64(&f, KVA(L_INIT_TASK) + 0x108, 99999);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	cr_assert_null(ivm_last_ran_find(lr, 0, 0, t, &task));
	cr_expect_eq(task, task_va(P2));

	/*
	 * Running there (the CPU left idle since), or still switching out
	 * (then it is the one): the next one would be a guess.
	 */
	w32(&f, task_va(T52) + 40, 1);
	err = ivm_last_ran_find(lr, 1, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(ivm_last_ran_stats(lr)->running_refused, 1);
	/* Running on CPU 0 does not say CPU 1 left idle. */
	cr_assert_null(ivm_last_ran_find(lr, 0, 0, t, &task));
	cr_expect_eq(task, task_va(P2));
	w32(&f, task_va(T52) + 40, 0);

	/* Values are read anew at each lookup, the list kept: 52 moved. */
	w32(&f, task_va(T52) + f.off.task_cpu, 0);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(P1));

	/* CPU 0 now holds only process 50's threads, newest 50 itself. */
	cr_assert_null(ivm_last_ran_find(lr, 0, 1, t, &task));
	cr_expect_eq(task, task_va(P2));
	/* As the helper's process, 50 is never named: nobody is left. */
	err = ivm_last_ran_find(lr, 0, 50, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);

	/* No task on that CPU. */
	err = ivm_last_ran_find(lr, 7, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);

	/* A kernel whose task_struct has no se.exec_start. */
	fixture_init_with(&f, true);
	l = create_ok(&f);
	err = ivm_last_ran_create(l, f.gmem, &lr);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Tasks forked since the walk (the kernel's total_forks moved): a lookup
 * no exact stamp answers walks again, at most every IVM_LAST_RAN_STALE_NS,
 * and fails rather than name an older task when it cannot; an exact stamp
 * still answers.
 */
Test(last_ran, refuses_stale_candidates)
{
	const uint64_t stale_ns = IVM_LAST_RAN_STALE_NS;
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task, arrival, t = 5;
	struct ivm_error *err;

	fixture_init(&f);
	w64(&f, task_va(P1) + 0x108, 500);
	w64(&f, task_va(T52) + 0x108, 900);
	w64(&f, task_va(T52) + f.off.task_sched_info_last_arrival, 600);
	w64(&f, KVA(L_TOTAL_FORKS), 1000);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* A child forked (and gone) since: the latest candidate may not be. */
	w64(&f, KVA(L_TOTAL_FORKS), 1001);
	err = ivm_last_ran_find(lr, 1, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	err = ivm_last_ran_first_since(lr, 1, 0, 100, t, &task, &arrival);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_refused, 1);
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_refused_first, 1);
	/* The switch to idle stamped T52: exact whatever forked... */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* ... also once the clock moved on, by the CPU's idle stamp. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 1200, 900, t, &task));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->exact, 2);
	/* Later, a walk of its own: the candidates are whole again. */
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t + stale_ns, &task));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_walks, 1);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 100, t + stale_ns,
						&task, &arrival));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_refused, 1);
	cr_expect_eq(ivm_last_ran_stats(lr)->stale_local, 0);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Task t's scheduler stamps as the fixture lays them out: switched in at
 * arrival (sched_info.last_arrival), last accounted at end
 * (se.exec_start, 0x108).
 */
static void stamps(struct fixture *f, int t, uint64_t arrival, uint64_t end)
{
	w64(f, task_va(t) + f->off.task_sched_info_last_arrival, arrival);
	w64(f, task_va(t) + 0x108, end);
}

/* ... and how many times it was switched in (sched_info.pcount). */
static void switched_in(struct fixture *f, int t, uint64_t pcount)
{
	w64(f, task_va(t) + f->off.task_sched_info_pcount, pcount);
}

/*
 * The same tasks with their switch-in stamps (sched_info.last_arrival at
 * 0x120): the exact to-idle task by the idle CPU's clock, the first task
 * switched in since a clock, and the runs of a window.
 */
Test(last_ran, by_stamps)
{
	struct ivm_last_ran_run runs[8];
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task, arrival, t = 0;
	struct ivm_error *err;
	size_t nr;

	fixture_init(&f);
	cr_assert_eq(f.off.task_sched_info_last_arrival, 0x120);
	cr_assert_eq(f.off.task_sched_info_pcount, 0x110);
	/* CPU 1: init ran 400..500, sleeper-t2 600..900. */
	stamps(&f, P1, 400, 500);
	stamps(&f, T52, 600, 900);
	/* CPU 0: sleeper 1000..2000. */
	stamps(&f, P2, 1000, 2000);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));

	/* Clock 900 on CPU 1: sleeper-t2 switched out at it. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* It was woken onto CPU 0 since: still the one, by its stamp... */
	w32(&f, task_va(T52) + f.off.task_cpu, 0);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* ... where the plain lookup names an earlier task. */
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* A clock nobody stamped: the plain lookup's answer. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 950, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	w32(&f, task_va(T52) + f.off.task_cpu, 1);

	/* The first task switched in on CPU 1 after 450: sleeper-t2, at 600. */
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 450, t, &task,
						&arrival));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(arrival, 600);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 300, t, &task,
						&arrival));
	cr_expect_eq(task, task_va(P1));
	cr_expect_eq(arrival, 400);
	err = ivm_last_ran_first_since(lr, 1, 0, 900, t, &task, NULL);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);

	/* The runs of CPU 1 after 450: init's (ended 500) and sleeper-t2's. */
	cr_assert_null(ivm_last_ran_window(lr, 1, 0, 450, IVM_LAST_RAN_UNKNOWN, t,
					   runs, 8, &nr));
	cr_expect_eq(nr, 2);
	cr_assert_null(ivm_last_ran_window(lr, 1, 0, 450, IVM_LAST_RAN_UNKNOWN, t,
					   runs, 1, &nr));
	cr_expect_eq(runs[0].arrivals, IVM_LAST_RAN_UNKNOWN);
	cr_expect_eq(nr, 1);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * A run-queue clock that stood still over several switches (TCG's
 * sched_clock held to the tick's): every task that stopped in that while
 * has the stamp of the switch to idle.  The last is the one that arrived
 * at it; two arrived at it, and no task is named, not even the latest.
 */
Test(last_ran, tied_stamps)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t task = 0, t = 0;
	struct ivm_error *err;

	fixture_init(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	/* CPU 1 at 900: sleeper-t2 ran since 600, init in and out at 900. */
	stamps(&f, T52, 600, 900);
	stamps(&f, P1, 900, 900);
	stamps(&f, P2, 1000, 2000);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* The same by the idle stamp, the clock moved on. */
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 1300, 900, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* The other way round: init first, sleeper-t2 in and out at 900. */
	stamps(&f, P1, 400, 900);
	stamps(&f, T52, 900, 900);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(ivm_last_ran_stats(lr)->exact, 3);
	/* Both switched in at 900: either ran last. */
	stamps(&f, P1, 900, 900);
	task = 0;
	err = ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(task, 0);
	cr_expect_eq(ivm_last_ran_stats(lr)->tied_refused, 1);
	cr_expect_eq(ivm_last_ran_stats(lr)->latest, 0);
	/* Alone on the stamp but running: the clock was of its switch in. */
	stamps(&f, P1, 400, 500);
	w32(&f, task_va(T52) + 40, 1);
	err = ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(ivm_last_ran_stats(lr)->tied_refused, 2);
	w32(&f, task_va(T52) + 40, 0);
	/* A task of CPU 0 on CPU 1's stamp does not tie with them. */
	stamps(&f, P1, 400, 500);
	stamps(&f, P2, 900, 900);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, 900, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * Held, lookups answer from the first read of the hold: a stamp written
 * since is not seen until the release (or a new hold), last_arrival
 * included, which comes in the same piece as the rest here (the words are
 * less than 4 KiB apart).  Released, every lookup reads again.
 */
Test(last_ran, held_reads_once)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	struct ivm_error *err;
	uint64_t task, t = 0;

	fixture_init(&f);
	/* CPU 1: init ran 400..500, sleeper-t2 600..900. */
	stamps(&f, P1, 400, 500);
	stamps(&f, T52, 600, 900);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));

	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* init runs again, 1000..1100: the hold still has the old stamps. */
	stamps(&f, P1, 1000, 1100);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	/* last_arrival came in the same piece: init's new one is not seen. */
	err = ivm_last_ran_first_since(lr, 1, 0, 950, t, &task, NULL);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	/* A new hold reads again. */
	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 950, t, &task, NULL));
	cr_expect_eq(task, task_va(P1));
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(P1));
	/* Released: each lookup reads. */
	ivm_last_ran_release(lr);
	stamps(&f, T52, 1200, 1300);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, t, &task));
	cr_expect_eq(task, task_va(T52));
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * CPU 1 idle since clock 450, marked then: init (switched in 10 times so
 * far) and sleeper-t2 (20).  After the wakeup init ran first at 500,
 * sleeper-t2 cut in at 600, init came back at 700 and shows only that
 * arrival: the smallest arrival names sleeper-t2, the mark init.
 */
static void cut_in(struct fixture *f)
{
	stamps(f, P1, 300, 400);
	stamps(f, T52, 200, 450);
	switched_in(f, P1, 10);
	switched_in(f, T52, 20);
}

static void after_cut_in(struct fixture *f)
{
	stamps(f, P1, 700, 800);
	switched_in(f, P1, 12);
	stamps(f, T52, 600, 650);
	switched_in(f, T52, 21);
}

static uint64_t first_after(struct ivm_last_ran *lr, uint64_t since,
			    uint64_t now)
{
	uint64_t task = 0;

	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, since, now, &task,
						NULL));
	ivm_last_ran_release(lr);
	return task;
}

/* The caller's name for the stretch of idle the marks are taken in. */
#define EPOCH 7

/* Marked at clock at, idle: the look reads (find_at) and marks. */
static void mark_at(struct ivm_last_ran *lr, uint64_t at)
{
	uint64_t task;

	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, at, 0, 0, &task));
	ivm_last_ran_mark(lr, 1, at, EPOCH);
	ivm_last_ran_release(lr);
}

/* The cut-in, marked at clock at; the answer at now. */
static uint64_t first_marked_at(struct fixture *f, struct ivm_last_ran *lr,
				uint64_t at, uint64_t now)
{
	cut_in(f);
	mark_at(lr, at);
	after_cut_in(f);
	return first_after(lr, 450, now);
}

static void first_by_mark(uint32_t sched_info_at)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;

	si_off = sched_info_at;
	fixture_init(&f);
	si_off = 0x110;
	cr_assert_eq(f.off.task_sched_info_pcount, sched_info_at);
	cut_in(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));

	/* No mark: the smallest arrival, the task that cut in. */
	after_cut_in(&f);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));

	/* Marked while idle: init, switched in twice since, ran first. */
	cr_expect_eq(first_marked_at(&f, lr, 450, 0), task_va(P1));
	/* Outside a hold nothing was read to mark: the mark stands (taken
	 * now, it would hold init's second arrival). */
	ivm_last_ran_mark(lr, 1, 450, EPOCH);
	cr_expect_eq(first_after(lr, 450, 0), task_va(P1));

	/* A mark of an earlier idle period (its clock before since). */
	cr_expect_eq(first_marked_at(&f, lr, 300, 0), task_va(T52));

	/* Taken after the first arrival: counts that already hold it. */
	mark_at(lr, 620);
	switched_in(&f, P1, 14);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));

	/* Two switched in twice since: either could be first. */
	cut_in(&f);
	w32(&f, task_va(P2) + f.off.task_cpu, 1);
	stamps(&f, P2, 100, 200);
	switched_in(&f, P2, 5);
	mark_at(lr, 450);
	after_cut_in(&f);
	stamps(&f, P2, 650, 660);
	switched_in(&f, P2, 7);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));
	/* A count that went back is not a count to go by. */
	switched_in(&f, P2, 4);
	cr_expect_eq(first_after(lr, 450, 0), task_va(T52));
	/* Switched in once since: init again. */
	switched_in(&f, P2, 6);
	cr_expect_eq(first_after(lr, 450, 0), task_va(P1));
	w32(&f, task_va(P2) + f.off.task_cpu, 0);

	/* The candidates walked again since the mark: marks are void. */
	cr_expect_eq(first_marked_at(&f, lr, 450, 2000000000ull),
		     task_va(T52));

	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* sched_info read with the rest (one piece), and apart (two). */
Test(last_ran, first_by_mark)
{
	first_by_mark(0x110);
	first_by_mark(0x1100);
}

/* CPU 1's runs after since, and how often each task arrived by the mark. */
static void window_arrivals(struct ivm_last_ran *lr, uint64_t since,
			    uint64_t epoch, uint64_t *init, uint64_t *t2)
{
	struct ivm_last_ran_run runs[8];
	size_t nr, i;

	*init = *t2 = 0;
	ivm_last_ran_hold(lr);
	cr_assert_null(ivm_last_ran_window(lr, 1, 0, since, epoch, 0, runs, 8,
					   &nr));
	ivm_last_ran_release(lr);
	cr_assert_eq(nr, 2);
	for (i = 0; i < nr; i++) {
		if (runs[i].task == task_va(P1))
			*init = runs[i].arrivals;
		else if (runs[i].task == task_va(T52))
			*t2 = runs[i].arrivals;
	}
}

/*
 * The cut-in again: init ran at 500 and 700, sleeper-t2 at 600.  A window
 * from the look at 450, in the stretch of idle the mark was taken in,
 * says init was switched in twice (its run at 500 hidden by the one at
 * 700) and sleeper-t2 once; a window from another stretch, or from before
 * the mark, says nothing.
 */
Test(last_ran, window_counts_arrivals_by_the_mark)
{
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct fixture f;
	uint64_t init, t2;

	fixture_init(&f);
	cut_in(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	after_cut_in(&f);
	/* No mark yet. */
	window_arrivals(lr, 450, EPOCH, &init, &t2);
	cr_expect_eq(init, IVM_LAST_RAN_UNKNOWN);
	cr_expect_eq(t2, IVM_LAST_RAN_UNKNOWN);

	cut_in(&f);
	mark_at(lr, 450);
	after_cut_in(&f);
	window_arrivals(lr, 450, EPOCH, &init, &t2);
	cr_expect_eq(init, 2);
	cr_expect_eq(t2, 1);
	/* A later look in the same stretch of idle (clock 460). */
	window_arrivals(lr, 460, EPOCH, &init, &t2);
	cr_expect_eq(init, 2);
	/* Another stretch of idle, or none named: unknown. */
	window_arrivals(lr, 450, EPOCH + 1, &init, &t2);
	cr_expect_eq(init, IVM_LAST_RAN_UNKNOWN);
	window_arrivals(lr, 450, IVM_LAST_RAN_UNKNOWN, &init, &t2);
	cr_expect_eq(t2, IVM_LAST_RAN_UNKNOWN);
	/* A window from before the mark: arrivals before it are not counted. */
	window_arrivals(lr, 440, EPOCH, &init, &t2);
	cr_expect_eq(init, IVM_LAST_RAN_UNKNOWN);

	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/* CPU cpu's count of switch-ins (rq->rq_sched_info.pcount). */
static void rq_switched_in(struct fixture *f, int cpu, uint64_t pcount)
{
	w64(f, DM(cpu ? PA_PCPU1 : PA_PCPU0) + PCPU_RUNQUEUES + RQ_SCHED_INFO,
	    pcount);
}

/* Task t ran on CPU 1 from arrival to end, its count and the CPU's raised. */
static void ran_on_1(struct fixture *f, int t, uint64_t arrival, uint64_t end,
		     uint64_t pcount, uint64_t rq_pcount)
{
	stamps(f, t, arrival, end);
	switched_in(f, t, pcount);
	rq_switched_in(f, 1, rq_pcount);
}

/*
 * CPU 1: init ran 400..500, sleeper-t2 600..900; CPU 0: sleeper; their
 * counts of switch-ins and the CPUs'.
 */
static void counted_runs(struct fixture *f)
{
	stamps(f, P1, 400, 500);
	switched_in(f, P1, 3);
	stamps(f, T52, 600, 900);
	switched_in(f, T52, 5);
	stamps(f, P2, 1000, 2000);
	switched_in(f, P2, 7);
	rq_switched_in(f, 0, 100);
	rq_switched_in(f, 1, 200);
}

/* The task that went to idle on CPU 1 at clock, looked up at now_ns. */
static uint64_t to_idle_on_1(struct ivm_last_ran *lr, uint64_t clock,
			     uint64_t now_ns)
{
	uint64_t task = 0;

	cr_assert_null(ivm_last_ran_find_at(lr, 1, 0, clock, 0, now_ns,
					    &task));
	return task;
}

/* The stamps' reads so far: of all tasks, of the hot ones, and missed. */
static void reads_were(const struct ivm_last_ran_stats *st, uint64_t full,
		       uint64_t hot, uint64_t misses)
{
	cr_expect_eq(st->full_reads, full);
	cr_expect_eq(st->hot_reads, hot);
	cr_expect_eq(st->hot_misses, misses);
}

static void hot_reads(uint32_t sched_info_at)
{
	const uint64_t s = 1000000000ull;	/* a walk's and the hot set's span */
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	const struct ivm_last_ran_stats *st;
	struct fixture f;
	uint64_t task, arrival;

	si_off = sched_info_at;
	g_rq_pcount = true;
	fixture_init(&f);
	si_off = 0x110;
	g_rq_pcount = false;
	counted_runs(&f);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	st = ivm_last_ran_stats(lr);

	cr_expect_eq(to_idle_on_1(lr, 900, 0), task_va(T52));
	/* A walk later: nobody switched in for a second, all of them cold. */
	cr_expect_eq(to_idle_on_1(lr, 900, 2 * s), task_va(T52));
	reads_were(st, 2, 0, 0);
	/* The counts have not moved: a read of none of the tasks stands. */
	cr_expect_eq(to_idle_on_1(lr, 900, 2 * s + 1), task_va(T52));
	reads_were(st, 2, 1, 0);

	/* Sleeper-t2, cold, ran again: the counts say so, all are read. */
	ran_on_1(&f, T52, 1700, 1800, 6, 201);
	cr_expect_eq(to_idle_on_1(lr, 1800, 2 * s + 2), task_va(T52));
	reads_were(st, 3, 1, 1);
	/* ... and again: hot now, read alone, and all it shows stands. */
	ran_on_1(&f, T52, 1900, 2000, 7, 202);
	cr_expect_eq(to_idle_on_1(lr, 2000, 2 * s + 3), task_va(T52));
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, 1850, 2 * s + 3,
						&task, &arrival));
	cr_expect_eq(task, task_va(T52));
	cr_expect_eq(arrival, 1900);
	reads_were(st, 3, 3, 1);

	/*
	 * Words of a cold task that moved with no count (no kernel does
	 * that) are not read again: the proof the hot read left it out.
	 */
	stamps(&f, P1, 2100, 2200);
	cr_expect_eq(to_idle_on_1(lr, 2200, 2 * s + 4), task_va(T52));
	/* Counted, as the scheduler does: read, and named by its stamp. */
	ran_on_1(&f, P1, 2100, 2200, 4, 203);
	cr_expect_eq(to_idle_on_1(lr, 2200, 2 * s + 5), task_va(P1));
	reads_were(st, 4, 4, 2);

	/* A task's count that went back is another task's: all are read. */
	ran_on_1(&f, T52, 2300, 2400, 6, 204);
	cr_expect_eq(to_idle_on_1(lr, 2400, 2 * s + 6), task_va(T52));
	reads_were(st, 5, 4, 3);

	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}

/*
 * With the run queues' counts of switch-ins (last_ran.h "hot reads"): a
 * lookup reads the tasks that ran lately, and all of them when the counts
 * say another ran; its answers are those of a full read.  sched_info read
 * with the rest (one piece), and apart (two).
 */
Test(last_ran, hot_reads)
{
	hot_reads(0x110);
	hot_reads(0x1100);
}

/* CPU cpu's run-queue clock, and task t's count of changes of CPU. */
static void rq_clock_is(struct fixture *f, int cpu, uint64_t clock)
{
	w64(f, DM(cpu ? PA_PCPU1 : PA_PCPU0) + PCPU_RUNQUEUES + RQ_CLOCK,
	    clock);
}

static void migrated(struct fixture *f, int t, uint64_t nr_migrations)
{
	w64(f, task_va(t) + f->off.task_se_nr_migrations, nr_migrations);
}

/*
 * CPU 1's latest task, which must also be the first switched in there
 * since since.
 */
static uint64_t latest_and_first_on_1(struct ivm_last_ran *lr, uint64_t since)
{
	uint64_t latest, first, arrival;

	cr_assert_null(ivm_last_ran_find(lr, 1, 0, 0, &latest));
	cr_assert_null(ivm_last_ran_first_since(lr, 1, 0, since, 0, &first,
						&arrival));
	cr_expect_eq(first, latest);
	return latest;
}

/* A lookup on cpu that stale candidates must refuse, counted in *count. */
static void refused(struct ivm_error *err, const uint64_t *count,
		    uint64_t want)
{
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(*count, want);
}

/*
 * Forks seen one CPU at a time (last_ran.h): a child forked since the walk
 * and switched in on CPU 0 only leaves CPU 1's lookups answered; one
 * switched in on CPU 1 refuses them until a candidate runs there after
 * it.  A candidate that changed CPU counts for neither CPU, even where
 * its cpu field is back and its rise would hide a child's.
 */
Test(last_ran, forks_one_cpu_at_a_time)
{
	const struct ivm_last_ran_stats *st;
	struct ivm_kernel_layout *l;
	struct ivm_last_ran *lr;
	struct ivm_error *err;
	struct fixture f;
	uint64_t task, arrival;
	size_t nr;

	g_rq_pcount = true;
	fixture_init(&f);
	g_rq_pcount = false;
	cr_assert_neq(f.off.task_se_nr_migrations, IVM_KOFF_NONE);
	cr_assert_eq(f.off.rq_clock, RQ_CLOCK);
	counted_runs(&f);
	rq_clock_is(&f, 0, 2500);
	rq_clock_is(&f, 1, 1000);
	w64(&f, KVA(L_TOTAL_FORKS), 1000);
	l = create_ok(&f);
	cr_assert_null(ivm_last_ran_create(l, f.gmem, &lr));
	st = ivm_last_ran_stats(lr);
	cr_assert_null(ivm_last_ran_find(lr, 1, 0, 0, &task));
	cr_expect_eq(task, task_va(T52));

	/* A child forked, ran on CPU 0 and is gone: CPU 1 still answers. */
	w64(&f, KVA(L_TOTAL_FORKS), 1001);
	rq_switched_in(&f, 0, 101);
	rq_clock_is(&f, 0, 2600);
	rq_clock_is(&f, 1, 1100);
	cr_expect_eq(latest_and_first_on_1(lr, 450), task_va(T52));
	cr_expect_eq(st->stale_local, 2);
	/* CPU 0's latest task may be older than the child: refused. */
	refused(ivm_last_ran_find(lr, 0, 0, 0, &task), &st->stale_refused, 1);
	refused(ivm_last_ran_first_since(lr, 0, 0, 2500, 0, &task, &arrival),
		&st->stale_refused_first, 1);
	/* Since a clock after CPU 0's count moved, it answers again. */
	err = ivm_last_ran_first_since(lr, 0, 0, 2600, 0, &task, &arrival);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_expect_eq(st->stale_refused_first, 1);
	cr_expect_eq(st->stale_local, 3);

	/*
	 * Sleeper-t2 woken onto CPU 0, run there, woken back onto CPU 1 and
	 * waiting; a child ran on CPU 1.  Its rise of one would hide the
	 * child's switch-in on CPU 1, but it changed CPU: CPU 1 refuses.
	 */
	w64(&f, KVA(L_TOTAL_FORKS), 1002);
	switched_in(&f, T52, 6);
	migrated(&f, T52, 2);
	rq_switched_in(&f, 0, 102);
	rq_switched_in(&f, 1, 201);
	rq_clock_is(&f, 0, 2700);
	rq_clock_is(&f, 1, 1200);
	refused(ivm_last_ran_find(lr, 1, 0, 0, &task), &st->stale_refused, 2);
	refused(ivm_last_ran_window(lr, 1, 0, 450, IVM_LAST_RAN_UNKNOWN, 0,
				    NULL, 0, &nr),
		&st->stale_refused_window, 1);
	/* Nothing ran since: still nothing known after the child. */
	refused(ivm_last_ran_find(lr, 1, 0, 0, &task), &st->stale_refused, 3);
	/* Init runs there after it: the latest task, and known. */
	ran_on_1(&f, P1, 1250, 1300, 4, 202);
	rq_clock_is(&f, 1, 1300);
	cr_expect_eq(latest_and_first_on_1(lr, 1200), task_va(P1));
	refused(ivm_last_ran_first_since(lr, 1, 0, 1100, 0, &task, &arrival),
		&st->stale_refused_first, 2);
	ivm_last_ran_destroy(lr);
	ivm_kernel_layout_destroy(l);
	fixture_fini(&f);
}
