// SPDX-License-Identifier: MIT
/*
 * host_sched: a vCPU thread's host run-queue waits from the scheduler's
 * records, on made-up sequences, and live against the host kernel's own
 * account of the same waits (/proc/self/task/TID/schedstat run_delay).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profile/host_sched.h"
#include "profile/profile_file.h"
#include "profile/sched_events.h"
#include "profile/trace_session.h"

#define SLEEP	0x1ull		/* prev_state S */
#define PREEMPT	0x100ull	/* prev_state R+ */

static struct ivm_host_sched *make(size_t n)
{
	struct ivm_host_sched *hs;

	cr_assert_null(ivm_host_sched_create(n, &hs));
	return hs;
}

Test(host_sched, wakeup_wait_and_preemption)
{
	struct ivm_host_sched *hs = make(2);
	const struct ivm_host_vcpu *v;
	const struct ivm_host_instead *in;
	uint64_t d;
	size_t nr;

	/* vCPU 0 runs, sleeps at 1000, woken at 5000, runs at 5300. */
	ivm_host_sched_switch(hs, -1, 0, "swapper/0", 0, "CPU 0/TCG", 500);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "swapper/0", 1000);
	ivm_host_sched_wake(hs, 0, 5000);
	ivm_host_sched_switch(hs, -1, PREEMPT, "hog", 0, "CPU 0/TCG", 5300);
	/* Preempted by the hog at 6000 until 9000. */
	ivm_host_sched_switch(hs, 0, PREEMPT, "CPU 0/TCG", -1, "hog", 6000);
	ivm_host_sched_switch(hs, -1, PREEMPT, "hog", 0, "CPU 0/TCG", 9000);
	v = ivm_host_sched_vcpu(hs, 0);
	cr_assert_eq(v->sleep_ns, 4000);
	cr_assert_eq(v->sleeps, 1);
	cr_assert_eq(v->wakeups, 1);
	cr_assert_eq(v->wake_delay_ns, 300);
	cr_assert_eq(v->preemptions, 1);
	cr_assert_eq(v->steal_ns, 3300);
	cr_assert(ivm_host_sched_wake_delay(hs, 0, 5000, &d));
	cr_assert_eq(d, 300);
	cr_assert_not(ivm_host_sched_wake_delay(hs, 0, 4999, &d));
	cr_assert_not(ivm_host_sched_wake_delay(hs, 1, 5000, &d));
	cr_assert_eq(ivm_host_sched_delays(hs)[0], 1);	/* under 10 us */
	in = ivm_host_sched_instead(hs, &nr);
	cr_assert_eq(nr, 1);
	cr_assert_str_eq(in[0].comm, "hog");
	cr_assert_eq(in[0].ns, 3300);
	cr_assert_eq(in[0].waits, 2);
	cr_assert_eq(ivm_host_sched_vcpu(hs, 1)->steal_ns, 0);
	ivm_host_sched_destroy(hs);
}

/* The stat called name of hs's, or UINT64_MAX when it has none. */
static uint64_t stat_of(struct ivm_host_sched *hs, const char *name)
{
	struct ivm_stat st[IVM_HOST_MAX_STATS];
	size_t n = ivm_host_sched_fill_stats(hs, st, IVM_HOST_MAX_STATS), i;

	for (i = 0; i < n; i++)
		if (!strcmp(st[i].name, name))
			return st[i].value;
	return UINT64_MAX;
}

/*
 * A live run's records (this host's kernel never records a switch away
 * from CPU 1's idle task): asleep, woken on an idle CPU, and the next
 * record is the switch-out of a preemption.  The wait is not counted,
 * but the time it may have taken is: wakeup to switch-out.
 */
Test(host_sched, switch_in_the_host_did_not_record)
{
	struct ivm_host_sched *hs = make(1);
	const struct ivm_host_vcpu *v = ivm_host_sched_vcpu(hs, 0);

	ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG", 92093);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "swapper/1",
			      92269);
	ivm_host_sched_wake(hs, 0, 93334);
	/* "swapper/1 ==> CPU 0/TCG" is not there. */
	ivm_host_sched_switch(hs, 0, PREEMPT, "CPU 0/TCG", -1, "hog", 95100);
	ivm_host_sched_switch(hs, -1, SLEEP, "hog", 0, "CPU 0/TCG", 96118);
	cr_assert_eq(v->steal_ns, 96118 - 95100);
	cr_assert_eq(v->preemptions, 1);
	cr_assert_eq(v->wakeups, 0);
	cr_assert_eq(stat_of(hs, "host_switch_ins_missed"), 1);
	cr_assert_eq(stat_of(hs, "host_switch_ins_missed_ns"), 95100 - 93334);
	/* A preemption's switch-in missed the same way. */
	ivm_host_sched_switch(hs, 0, PREEMPT, "CPU 0/TCG", -1, "tokio", 97000);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 99000);
	cr_assert_eq(stat_of(hs, "host_switch_ins_missed"), 2);
	cr_assert_eq(stat_of(hs, "host_switch_ins_missed_ns"),
		     95100 - 93334 + 99000 - 97000);
	cr_assert_eq(v->steal_ns, 96118 - 95100);
	ivm_host_sched_destroy(hs);
}

/* What waits and sleeps fell inside the guest's idle periods. */
Test(host_sched, waits_and_sleeps_inside_idle_periods)
{
	struct ivm_host_sched *hs = make(1);
	const struct ivm_host_vcpu *v = ivm_host_sched_vcpu(hs, 0);

	/* Asleep 1000-2000, waiting 2000-2500, asleep 3000-4000. */
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 500);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 1000);
	ivm_host_sched_wake(hs, 0, 2000);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 2500);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 3000);
	ivm_host_sched_wake(hs, 0, 4000);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 4100);
	/* The guest was idle 1000-3500: kicked awake once in the middle. */
	ivm_host_sched_idle_period(hs, 0, 1000, 3500);
	cr_assert_eq(v->sleep_idle_ns, 1000 + 500);
	cr_assert_eq(v->steal_idle_ns, 500);
	cr_assert_eq(v->sleep_ns, 2000);
	cr_assert_eq(v->steal_ns, 600);
	/* Nothing of another vCPU or of an empty span. */
	ivm_host_sched_idle_period(hs, 3, 0, 9999);
	ivm_host_sched_idle_period(hs, 0, 4000, 4000);
	cr_assert_eq(v->steal_idle_ns, 500);
	ivm_host_sched_destroy(hs);
}

/*
 * The profiler writes a period once it saw it end; the records of the
 * sleep it held can be read later (a third of web01's idle sleep under
 * TCG): they count when they come, and nothing counts twice.
 */
Test(host_sched, sleeps_recorded_after_their_idle_period)
{
	struct ivm_host_sched *hs = make(1);
	const struct ivm_host_vcpu *v = ivm_host_sched_vcpu(hs, 0);

	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 500);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 1000);
	/* Idle 1000-3500, written before the wakeup's records are read. */
	ivm_host_sched_idle_period(hs, 0, 1000, 3500);
	cr_assert_eq(v->sleep_idle_ns, 0);
	ivm_host_sched_wake(hs, 0, 3000);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 3100);
	cr_assert_eq(v->sleep_idle_ns, 2000);
	cr_assert_eq(v->steal_idle_ns, 100);
	/* Asleep 4200-4800, read before its period 4000-5000: once. */
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 4200);
	ivm_host_sched_wake(hs, 0, 4800);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 4800);
	ivm_host_sched_idle_period(hs, 0, 4000, 5000);
	cr_assert_eq(v->sleep_idle_ns, 2000 + 600);
	/* A sleep after both periods is not theirs. */
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 6000);
	ivm_host_sched_wake(hs, 0, 7000);
	cr_assert_eq(v->sleep_idle_ns, 2000 + 600);
	cr_assert_eq(v->sleep_ns, 2000 + 600 + 1000);
	ivm_host_sched_destroy(hs);
}

/*
 * The waker's record comes first (stamped before the switch-out, which
 * holds the run queue's lock it waits for): the wait runs from the
 * switch-out.  A wakeup while running that the thread outlives is not one.
 */
Test(host_sched, wakeup_racing_the_switch_out)
{
	struct ivm_host_sched *hs = make(1);
	const struct ivm_host_vcpu *v;
	uint64_t d;

	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 100);
	ivm_host_sched_wake(hs, 0, 1000);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 1002);
	ivm_host_sched_switch(hs, -1, PREEMPT, "x", 0, "CPU 0/TCG", 1500);
	v = ivm_host_sched_vcpu(hs, 0);
	cr_assert_eq(v->steal_ns, 498);
	cr_assert_eq(v->wakeups, 1);
	cr_assert_eq(v->sleep_ns, 0);
	cr_assert(ivm_host_sched_wake_delay(hs, 0, 1000, &d));
	/* Woken while running, runs on, sleeps later: woken as usual. */
	ivm_host_sched_wake(hs, 0, 2000);
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/TCG", -1, "x", 3000);
	ivm_host_sched_wake(hs, 0, 4000);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/TCG", 4100);
	cr_assert_eq(v->steal_ns, 598);
	cr_assert_eq(v->sleep_ns, 1000);
	cr_assert_eq(v->wakeups, 2);
	ivm_host_sched_destroy(hs);
}

/* Nothing is counted across lost records; an unknown state starts afresh. */
Test(host_sched, lost_records_end_every_wait)
{
	struct ivm_host_sched *hs = make(1);
	const struct ivm_host_vcpu *v;

	/* A wakeup before any switch, then a switch-out: it was running. */
	ivm_host_sched_wake(hs, 0, 100);
	ivm_host_sched_switch(hs, 0, PREEMPT, "CPU 0/KVM", -1, "x", 900);
	ivm_host_sched_lost(hs);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/KVM", 9000000);
	/* A sleep whose wakeup was lost, then a switch-in: no sleep time. */
	ivm_host_sched_switch(hs, 0, SLEEP, "CPU 0/KVM", -1, "x", 9000100);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/KVM", 9000900);
	v = ivm_host_sched_vcpu(hs, 0);
	cr_assert_eq(v->steal_ns, 0);
	cr_assert_eq(v->sleep_ns, 0);
	cr_assert_eq(v->wakeups + v->preemptions, 0);
	/* Stopped (T): not a sleep; its wakeup (SIGCONT) starts a wait. */
	ivm_host_sched_switch(hs, 0, 0x4, "CPU 0/KVM", -1, "x", 9001000);
	ivm_host_sched_wake(hs, 0, 9002000);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/KVM", 9003000);
	cr_assert_eq(v->steal_ns, 1000);
	cr_assert_eq(v->sleep_ns, 0);
	/* Unknown, woken, switched in: a wait from the wakeup. */
	ivm_host_sched_lost(hs);
	ivm_host_sched_wake(hs, 0, 9100000);
	ivm_host_sched_switch(hs, -1, 0, "x", 0, "CPU 0/KVM", 9100400);
	cr_assert_eq(v->steal_ns, 1400);
	cr_assert_eq(v->wakeups, 2);
	/* Out of range vCPUs are ignored. */
	ivm_host_sched_wake(hs, 7, 1);
	ivm_host_sched_switch(hs, 9, SLEEP, "a", -3, "b", 2);
	ivm_host_sched_destroy(hs);
}

/* The named host tasks are bounded; the rest share one slot. */
Test(host_sched, instead_table_is_bounded_and_stable)
{
	struct ivm_host_sched *hs = make(1);
	const struct ivm_host_instead *in;
	struct ivm_stat st[IVM_HOST_MAX_STATS];
	char comm[16];
	uint64_t t = 1000;
	size_t nr, n, i;

	for (i = 0; i < IVM_HOST_INSTEAD_MAX + 5; i++) {
		snprintf(comm, sizeof(comm), "task%zu", i);
		ivm_host_sched_switch(hs, 0, PREEMPT, "CPU 0/TCG", -1, comm, t);
		ivm_host_sched_switch(hs, -1, PREEMPT, comm, 0, "CPU 0/TCG",
				      t + 10);
		t += 100;
	}
	/* A nameless one is "?", never the rest's "". */
	ivm_host_sched_switch(hs, 0, PREEMPT, "CPU 0/TCG", -1, "", t);
	ivm_host_sched_switch(hs, -1, PREEMPT, "", 0, "CPU 0/TCG", t + 10);
	in = ivm_host_sched_instead(hs, &nr);
	cr_assert_eq(nr, IVM_HOST_INSTEAD_MAX + 1);
	cr_assert_str_eq(in[0].comm, "task0");
	cr_assert_str_eq(in[IVM_HOST_INSTEAD_MAX].comm, "");
	cr_assert_eq(in[IVM_HOST_INSTEAD_MAX].waits, 6);
	cr_assert_eq(in[IVM_HOST_INSTEAD_MAX].ns, 60);
	n = ivm_host_sched_fill_stats(hs, st, IVM_HOST_MAX_STATS);
	cr_assert_leq(n, IVM_HOST_MAX_STATS);
	cr_assert_str_eq(st[0].name, "host_steal_ns");
	cr_assert_eq(st[0].value, 10 * (IVM_HOST_INSTEAD_MAX + 6));
	/* The sums, then the vCPU's own. */
	for (i = 0; i < n && strcmp(st[i].name, "vcpu0.host_steal_ns"); i++)
		cr_assert(!strncmp(st[i].name, "host_", 5), "%s", st[i].name);
	cr_assert_lt(i, n);
	cr_assert_eq(st[i].value, st[0].value);
	cr_assert_str_eq(st[n - 2].name, "host_instead_ns:");
	cr_assert_str_eq(st[n - 2 * (IVM_HOST_INSTEAD_MAX + 1)].name,
			 "host_instead_ns:task0");
	/* A small room is never overrun. */
	cr_assert_eq(ivm_host_sched_fill_stats(hs, st, 3), 3);
	ivm_host_sched_destroy(hs);
}

/* ---- live: against the host kernel's schedstat ------------------------- */

static atomic_bool stop_hog;

/*
 * On the test thread's CPU at real-time priority, in bursts: each time it
 * wakes (every 3 ms) it preempts the test thread and spins for 1 ms, so
 * the test thread's waits behind it are certain whatever else the host
 * runs.
 */
static void *hog(void *arg)
{
	struct sched_param sp = { .sched_priority = 1 };
	cpu_set_t *set = arg;

	prctl(PR_SET_NAME, "ivm-test-hog");
	sched_setaffinity(0, sizeof(*set), set);
	pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	while (!atomic_load(&stop_hog)) {
		struct timespec ts = { 0, 3000000 }, t0, t1;

		nanosleep(&ts, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t1);
		while ((t1.tv_sec - t0.tv_sec) * 1000000000ll +
		       (t1.tv_nsec - t0.tv_nsec) < 1000000);
	}
	return NULL;
}

/* run_delay of this thread (ns), the second field of its schedstat. */
static uint64_t run_delay(pid_t tid)
{
	char path[64];
	unsigned long long run, delay;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%llu %llu", &run, &delay), 2);
	fclose(f);
	return delay;
}

struct live {
	struct ivm_sched_events *ev;
	struct ivm_host_sched *hs;
	int32_t tid;
};

static int on_record(void *ctx, const void *data, size_t size, int cpu,
		     uint64_t ts)
{
	struct live *l = ctx;
	struct ivm_sched_event e;
	struct ivm_error *err = ivm_sched_events_decode(l->ev, data, size, &e);

	(void)cpu;
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (e.kind == IVM_SCHED_SWITCH)
		ivm_host_sched_switch(l->hs, e.prev_tid == l->tid ? 0 : -1,
				      e.prev_state, e.prev_comm,
				      e.next_tid == l->tid ? 0 : -1,
				      e.next_comm, ts);
	else if (e.tid == l->tid)
		ivm_host_sched_wake(l->hs, 0, ts);
	return 0;
}

/*
 * This thread works and sleeps in turn, sharing its CPU with a thread
 * that preempts it in bursts: its waits behind the hog, from the records the profiler takes
 * (the pid list alone on sched_switch, its wakeups), match the kernel's
 * run_delay of it within 5%, and the hog is named as who ran instead.
 * Some hosts never record a switch away from some tasks (here CPU 1's
 * idle task, with nothing lost, in any instance): run_delay counts those
 * waits, the records cannot, so what they may have lasted makes up the
 * difference.
 */
Test(host_sched, live_waits_match_the_kernels_run_delay, .timeout = 30)
{
	/* The profiler's host side: sched_wakeup, the enqueue, where there is one. */
	const char *events[] = { "sched:sched_switch", "sched:sched_wakeup" };
	struct live l = { 0 };
	struct ivm_trace_session *s;
	const struct ivm_host_instead *in;
	const struct ivm_host_vcpu *v;
	struct ivm_error *err;
	pthread_t h;
	cpu_set_t set;
	uint64_t d0, d1, kernel, ours, missed, hog_ns = 0, hog_waits = 0;
	char *filter;
	size_t nr, i;
	int k, cpu = sched_getcpu();

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	l.tid = (int32_t)syscall(SYS_gettid);
	CPU_ZERO(&set);
	CPU_SET(cpu < 0 ? 0 : cpu, &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
	err = ivm_sched_events_load(NULL, &l.ev);
	if (!err && !ivm_sched_events_has_wakeup(l.ev))
		events[1] = "sched:sched_waking";
	if (!err)
		err = ivm_trace_session_create(events, 2, &(pid_t){ l.tid }, 1,
					       0, &s);
	if (err && err->code == IVM_ERROR_OS) {
		cr_skip_test("no tracefs here: %s", err->message);
		return;
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	filter = ivm_sched_wake_filter(&(pid_t){ l.tid }, 1);
	cr_assert_null(ivm_trace_session_filter(s, events[1], filter));
	free(filter);
	cr_assert_null(ivm_host_sched_create(1, &l.hs));
	atomic_store(&stop_hog, false);
	cr_assert_eq(pthread_create(&h, NULL, hog, &set), 0);
	/* Only waits the session saw from their start count on both sides. */
	cr_assert_null(ivm_trace_session_read(s, on_record, &l));
	usleep(20000);
	cr_assert_null(ivm_trace_session_read(s, on_record, &l));
	d0 = run_delay(l.tid);
	ivm_host_sched_destroy(l.hs);
	cr_assert_null(ivm_host_sched_create(1, &l.hs));
	/* A switch seen first: the thread is running now. */
	ivm_host_sched_switch(l.hs, -1, 0, "", 0, "", 0);
	for (k = 0; k < 40; k++) {
		struct timespec ts = { 0, 1000000 }, t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do	/* 3 ms of work, shared with the hog */
			clock_gettime(CLOCK_MONOTONIC, &t1);
		while ((t1.tv_sec - t0.tv_sec) * 1000000000ll +
		       (t1.tv_nsec - t0.tv_nsec) < 3000000);
		nanosleep(&ts, NULL);
	}
	d1 = run_delay(l.tid);
	atomic_store(&stop_hog, true);
	pthread_join(h, NULL);
	cr_assert_null(ivm_trace_session_read(s, on_record, &l));
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	v = ivm_host_sched_vcpu(l.hs, 0);
	kernel = d1 - d0;
	ours = v->steal_ns;
	in = ivm_host_sched_instead(l.hs, &nr);
	for (i = 0; i < nr; i++) {
		cr_log_info("instead: %s %" PRIu64 " ns, %" PRIu64 " waits",
			    in[i].comm, in[i].ns, in[i].waits);
		if (!strcmp(in[i].comm, "ivm-test-hog")) {
			hog_ns = in[i].ns;
			hog_waits = in[i].waits;
		}
	}
	missed = stat_of(l.hs, "host_switch_ins_missed_ns");
	cr_log_info("run_delay %" PRIu64 " ns, ours %" PRIu64 " ns (%" PRIu64
		    " wakeups, %" PRIu64 " preemptions), hog %" PRIu64
		    " ns, %" PRIu64 " switch-ins not recorded (%" PRIu64 " ns)",
		    kernel, ours, v->wakeups, v->preemptions, hog_ns,
		    stat_of(l.hs, "host_switch_ins_missed"), missed);
	cr_assert_gt(kernel, 10000000ull, "waited under 10 ms: %" PRIu64,
		     kernel);
	cr_assert_geq((ours + missed) * 100, kernel * 95, "ours %" PRIu64
		      " (and at most %" PRIu64 " unseen) kernel %" PRIu64,
		      ours, missed, kernel);
	cr_assert_leq(ours * 100, kernel * 105, "ours %" PRIu64 " kernel %"
		      PRIu64, ours, kernel);
	/* Some 40 bursts of 1 ms; other host tasks may take a share too. */
	cr_assert_geq(hog_waits, 10, "hog named in %" PRIu64 " waits", hog_waits);
	cr_assert_geq(hog_ns, 10000000ull, "hog %" PRIu64 " ns of %" PRIu64,
		      hog_ns, ours);
	ivm_trace_session_destroy(s);
	ivm_host_sched_destroy(l.hs);
	ivm_sched_events_destroy(l.ev);
}
