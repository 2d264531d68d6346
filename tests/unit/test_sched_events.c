// SPDX-License-Identifier: MIT
/*
 * sched tracepoint decoding against the real event formats and real raw
 * records of this development host (tests/unit/data/sched/), and the
 * trace session against live records of this process.
 *
 * The records were made by the recorder below (IVM_RECORD_SCHED=DIR): a
 * thread of ours sleeps in nanosleep and is woken by its timer, so the
 * host shows it switched out sleeping, woken and switched in.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profile/sched_events.h"
#include "profile/trace_session.h"
#include "trace_records.h"

#define DATA "tests/unit/data/sched/"

static struct ivm_sched_events *load(void)
{
	char *s = read_format(DATA, "sched_switch");
	char *g = read_format(DATA, "sched_waking");
	char *u = read_format(DATA, "sched_wakeup");
	struct ivm_sched_events *ev;
	struct ivm_error *err = ivm_sched_events_parse(s, g, u, &ev);

	cr_assert_null(err, "%s", err ? err->message : "");
	free(s);
	free(g);
	free(u);
	return ev;
}

Test(sched_events, decodes_recorded_records_of_this_host)
{
	struct ivm_sched_events *ev = load();
	static struct recorded recs[512];
	size_t n = read_records(DATA "sched.records", recs, 512), i;
	int32_t me = 0;
	unsigned int sleeps = 0, runs = 0, wakings = 0, wakeups = 0;
	uint64_t last_ts = 0;

	cr_assert_gt(n, 10);
	/* The recorder's thread is the prev of the first switch. */
	for (i = 0; i < n; i++) {
		struct ivm_sched_event e;
		struct ivm_error *err = ivm_sched_events_decode(ev, recs[i].data,
								recs[i].size, &e);

		cr_assert_null(err, "record %zu: %s", i, err ? err->message : "");
		cr_assert_geq(recs[i].ts, last_ts, "records are in time order");
		last_ts = recs[i].ts;
		if (!me && e.kind == IVM_SCHED_SWITCH)
			me = e.prev_tid;
		switch (e.kind) {
		case IVM_SCHED_SWITCH:
			cr_assert(e.prev_tid == me || e.next_tid == me);
			if (e.prev_tid == me &&
			    ivm_sched_state_sleeping(e.prev_state))
				sleeps++;
			if (e.next_tid == me)
				runs++;
			break;
		case IVM_SCHED_WAKING:
			cr_assert_eq(e.tid, me);
			wakings++;
			break;
		case IVM_SCHED_WAKEUP:
			cr_assert_eq(e.tid, me);
			wakeups++;
			break;
		}
	}
	/* Five sleeps, each one switched out, woken and switched in. */
	cr_assert_geq(sleeps, 5);
	cr_assert_geq(runs, 5);
	cr_assert_geq(wakings, 5);
	cr_assert_geq(wakeups, 5);
	ivm_sched_events_destroy(ev);
}

static void put(uint8_t *rec, int off, uint64_t v, int size)
{
	int i;

	for (i = 0; i < size; i++)
		rec[off + i] = (uint8_t)(v >> (8 * i));
}

Test(sched_events, states_and_preemption)
{
	struct ivm_sched_events *ev = load();
	struct ivm_sched_event e;
	uint8_t rec[64] = { 0 };

	/* Offsets of the recorded format: prev_pid 24, prev_state 32, next_pid 56; ID 372. */
	put(rec, 0, 372, 2);
	put(rec, 24, 777, 4);
	put(rec, 56, 778, 4);
	put(rec, 32, 0x100, 8);		/* R+: preempted */
	cr_assert_null(ivm_sched_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert_eq(e.prev_tid, 777);
	cr_assert_eq(e.next_tid, 778);
	cr_assert_not(ivm_sched_state_sleeping(e.prev_state));
	put(rec, 32, 0, 8);		/* R */
	cr_assert_null(ivm_sched_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert_not(ivm_sched_state_sleeping(e.prev_state));
	put(rec, 32, 1, 8);		/* S */
	cr_assert_null(ivm_sched_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert(ivm_sched_state_sleeping(e.prev_state));
	put(rec, 32, 2, 8);		/* D */
	cr_assert_null(ivm_sched_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert(ivm_sched_state_sleeping(e.prev_state));
	put(rec, 32, 4, 8);		/* T: stopped, not a halt */
	cr_assert_null(ivm_sched_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert_not(ivm_sched_state_sleeping(e.prev_state));
	ivm_sched_events_destroy(ev);
}

Test(sched_events, short_foreign_and_missing)
{
	struct ivm_sched_events *ev = load();
	struct ivm_sched_event e;
	struct ivm_error *err;
	uint8_t rec[64] = { 0 };
	char *s = read_format(DATA, "sched_switch"), *w;

	put(rec, 0, 372, 2);
	err = ivm_sched_events_decode(ev, rec, 40, &e);	/* next_pid cut */
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_sched_events_decode(ev, rec, 1, &e);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	put(rec, 0, 9999, 2);
	err = ivm_sched_events_decode(ev, rec, sizeof(rec), &e);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_sched_events_destroy(ev);
	/* A wakeup format where sched_switch's should be: no prev_state. */
	w = read_format(DATA, "sched_wakeup");
	err = ivm_sched_events_parse(w, NULL, s, &ev);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID, "%s", err->message);
	ivm_error_destroy(err);
	err = ivm_sched_events_parse(s, NULL, NULL, &ev);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	free(w);
	free(s);
}

struct live {
	struct ivm_sched_events *ev;
	int32_t tid;
	FILE *out;
	unsigned int sleeps, wakes, runs;
	uint64_t first_ts, last_ts;
};

static int on_live(void *ctx, const void *data, size_t size, int cpu,
		   uint64_t ts)
{
	struct live *l = ctx;
	struct ivm_sched_event e;
	struct ivm_error *err = ivm_sched_events_decode(l->ev, data, size, &e);
	size_t i;

	(void)cpu;
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (e.kind == IVM_SCHED_SWITCH && e.prev_tid == l->tid &&
	    ivm_sched_state_sleeping(e.prev_state)) {
		/* The nanosleeps: a preemption may come after them. */
		if (l->sleeps++ < 5) {
			if (!l->first_ts)
				l->first_ts = ts;
			l->last_ts = ts;
		}
	}
	if (e.kind == IVM_SCHED_SWITCH && e.next_tid == l->tid)
		l->runs++;
	if (e.kind != IVM_SCHED_SWITCH && e.tid == l->tid)
		l->wakes++;
	if (l->out) {
		fprintf(l->out, "%" PRIu64 " ", ts);
		for (i = 0; i < size; i++)
			fprintf(l->out, "%02x", ((const uint8_t *)data)[i]);
		fputc('\n', l->out);
	}
	return 0;
}

/*
 * Live: this thread's own sleeps through a session, with monotonic stamps
 * and a wait that returns once events are there.  With IVM_RECORD_SCHED
 * set, the records are also written to $IVM_RECORD_SCHED/sched.records.
 */
Test(sched_events, record_live_sleeps_of_this_thread)
{
	const char *events[] = { "sched:sched_switch", "sched:sched_waking",
				 "sched:sched_wakeup" };
	const char *dir = getenv("IVM_RECORD_SCHED");
	struct ivm_trace_session *s;
	struct live l = { 0 };
	struct ivm_error *err;
	struct timespec t0, t1;
	bool ready = false;
	int i;

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = ivm_sched_events_load(NULL, &l.ev);
	if (!err)
		err = ivm_trace_session_create(events, 3, (pid_t[]){
			(pid_t)syscall(SYS_gettid) }, 1, 0, &s);
	if (err && err->code == IVM_ERROR_OS) {
		cr_skip_test("no tracefs here: %s", err->message);
		return;
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	l.tid = (int32_t)syscall(SYS_gettid);
	if (dir) {
		char path[512];

		snprintf(path, sizeof(path), "%s/sched.records", dir);
		l.out = fopen(path, "w");
		cr_assert_not_null(l.out, "%s", path);
	}
	for (i = 0; i < 5; i++) {
		struct timespec ts = { 0, 2000000 };

		nanosleep(&ts, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* The buffers hold events now: the wait must say so at once. */
	cr_assert_null(ivm_trace_session_wait(s, 1000000000ull, &ready));
	cr_assert(ready);
	cr_assert_null(ivm_trace_session_read(s, on_live, &l));
	if (l.out)
		fclose(l.out);
	cr_assert_geq(l.sleeps, 5, "sleeps %u", l.sleeps);
	cr_assert_geq(l.wakes, 5, "wakes %u", l.wakes);
	/*
	 * Not l.runs: with set_event_pid this host drops some switches
	 * *into* a filtered thread when it runs under Criterion (seen 0 to
	 * 5 of 5); the idle signal needs only the sleeps and the wakeups.
	 */
	/* trace_clock mono: the sleeps' stamps fall inside our window. */
	cr_assert_geq(l.first_ts, (uint64_t)t0.tv_sec * 1000000000ull +
				  (uint64_t)t0.tv_nsec);
	cr_assert_leq(l.last_ts, (uint64_t)t1.tv_sec * 1000000000ull +
				  (uint64_t)t1.tv_nsec);
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(l.ev);
}

/* n sleeps of this thread, 2 ms each: a switch and a wakeup each. */
static void sleep_n(int n)
{
	struct timespec ts = { 0, 2000000 };

	while (n-- > 0)
		nanosleep(&ts, NULL);
}

/*
 * A poll's findings spare reads of the buffers it found empty, and lose
 * nothing: what a skipped buffer holds comes with the next read.
 */
Test(sched_events, polled_hint_skips_empty_buffers_and_loses_nothing)
{
	const char *events[] = { "sched:sched_switch", "sched:sched_waking" };
	struct pollfd fds[1024];
	const struct pollfd *mine;
	struct ivm_trace_session *s;
	struct live l = { 0 };
	struct ivm_error *err;
	size_t n, i;

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	l.tid = (int32_t)syscall(SYS_gettid);
	err = ivm_sched_events_load(NULL, &l.ev);
	if (!err)
		err = ivm_trace_session_create(events, 2, (pid_t[]){ l.tid }, 1,
					       0, &s);
	if (err && err->code == IVM_ERROR_OS) {
		cr_skip_test("no tracefs here: %s", err->message);
		return;
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	n = ivm_trace_session_pollfds(s, &mine);
	cr_assert(n > 0 && n <= 1024);
	sleep_n(5);
	/* A poll that found every buffer empty: nothing is read... */
	for (i = 0; i < n; i++) {
		fds[i] = mine[i];
		fds[i].revents = 0;
	}
	ivm_trace_session_polled(s, fds, n);
	cr_assert_null(ivm_trace_session_read(s, on_live, &l));
	cr_assert_eq(l.sleeps + l.wakes, 0, "read %u, %u", l.sleeps, l.wakes);
	/* ...once: the next read, without one, has every event. */
	cr_assert_null(ivm_trace_session_read(s, on_live, &l));
	cr_assert_geq(l.sleeps, 5, "sleeps %u", l.sleeps);
	cr_assert_geq(l.wakes, 5, "wakes %u", l.wakes);
	/* A real poll: the buffers it found events in are read, all of them. */
	l.sleeps = l.wakes = 0;
	sleep_n(5);
	for (i = 0; i < n; i++)
		fds[i] = mine[i];
	cr_assert_gt(poll(fds, n, 1000), 0);
	ivm_trace_session_polled(s, fds, n);
	cr_assert_null(ivm_trace_session_read(s, on_live, &l));
	cr_assert_geq(l.sleeps, 5, "sleeps %u", l.sleeps);
	cr_assert_geq(l.wakes, 5, "wakes %u", l.wakes);
	/* Descriptors that are not all the session's: no hint taken. */
	l.sleeps = l.wakes = 0;
	sleep_n(5);
	for (i = 0; i < n; i++) {
		fds[i] = mine[i];
		fds[i].revents = 0;
	}
	ivm_trace_session_polled(s, fds, n - 1);
	if (n > 1) {
		cr_assert_null(ivm_trace_session_read(s, on_live, &l));
		cr_assert_geq(l.sleeps, 5, "sleeps %u", l.sleeps);
	}
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(l.ev);
}

/*
 * A thread pinned to one host CPU that sleeps 100 us as many times as it
 * is told (sleeper_go), then waits in a read of its pipe: one sleep, not
 * a stream of records, between bursts.
 */
struct sleeper {
	int cpu;
	int fds[2];		/* counts of sleeps; 0 ends the thread */
	pid_t tid;
	volatile bool stop;	/* ends a burst early */
	unsigned int sleeps;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *w = arg;
	struct timespec ts = { 0, 100000 };
	unsigned int n, i;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	while (read(w->fds[0], &n, sizeof(n)) == sizeof(n) && n)
		for (i = 0; i < n && !w->stop; i++) {
			nanosleep(&ts, NULL);
			__atomic_add_fetch(&w->sleeps, 1, __ATOMIC_SEQ_CST);
		}
	return NULL;
}

/* n more sleeps (UINT_MAX: until sleeper_end). */
static void sleeper_go(struct sleeper *w, unsigned int n)
{
	cr_assert_eq(write(w->fds[1], &n, sizeof(n)), (ssize_t)sizeof(n));
}

/* A burst of n sleeps, waited for. */
static void sleeper_burst(struct sleeper *w, unsigned int n)
{
	unsigned int want = __atomic_load_n(&w->sleeps, __ATOMIC_SEQ_CST) + n;

	sleeper_go(w, n);
	while (__atomic_load_n(&w->sleeps, __ATOMIC_SEQ_CST) < want)
		sched_yield();
}

static void sleeper_end(struct sleeper *w, pthread_t th)
{
	w->stop = true;
	sleeper_go(w, 0);
	pthread_join(th, NULL);
	close(w->fds[0]);
	close(w->fds[1]);
}

struct ordered {
	struct ivm_sched_events *ev;
	pid_t tids[2];
	unsigned int sleeps[2], wakings[2];
	uint64_t last_ts, backwards;
};

static int on_ordered(void *ctx, const void *data, size_t size, int cpu,
		      uint64_t ts)
{
	struct ordered *o = ctx;
	struct ivm_sched_event e;
	struct ivm_error *err = ivm_sched_events_decode(o->ev, data, size, &e);
	int i;

	(void)cpu;
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (ts < o->last_ts)
		o->backwards++;
	o->last_ts = ts;
	for (i = 0; i < 2; i++) {
		if (e.kind == IVM_SCHED_SWITCH && e.prev_tid == o->tids[i] &&
		    ivm_sched_state_sleeping(e.prev_state))
			o->sleeps[i]++;
		if (e.kind != IVM_SCHED_SWITCH && e.tid == o->tids[i])
			o->wakings[i]++;
	}
	return 0;
}

/*
 * Start n (1 or 2) sleepers and a session of events on their threads
 * (o->tids; -1 for a second when there is one); skips the test without
 * tracefs.  The sleepers wait for sleeper_go.
 */
static struct ivm_trace_session *traced_sleepers(struct sleeper *w,
						 pthread_t *th, int n,
						 const char *const *events,
						 size_t nr_events,
						 struct ordered *o)
{
	struct ivm_trace_session *s = NULL;
	struct ivm_error *err;
	int i;

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		cr_skip_test("one host CPU");
	o->tids[1] = -1;
	for (i = 0; i < n; i++) {
		cr_assert_eq(pipe(w[i].fds), 0);
		cr_assert_eq(pthread_create(&th[i], NULL, sleeper_main, &w[i]),
			     0);
	}
	for (i = 0; i < n; i++) {
		while (!__atomic_load_n(&w[i].tid, __ATOMIC_SEQ_CST))
			sched_yield();
		o->tids[i] = w[i].tid;
	}
	err = ivm_sched_events_load(NULL, &o->ev);
	if (!err)
		err = ivm_trace_session_create(events, nr_events, o->tids,
					       (size_t)n, 0, &s);
	if (err && err->code == IVM_ERROR_OS) {
		for (i = 0; i < n; i++)
			sleeper_end(&w[i], th[i]);
		cr_skip_test("no tracefs here: %s", err->message);
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	return s;
}

/*
 * Held, records of two threads on two host CPUs come in stamp order
 * across reads, and none is lost: the last read, hold off, hands over
 * the rest.  Reads every 50 us, while both threads switch every 100 us,
 * so records land on a CPU already drained in nearly every read.
 */
Test(sched_events, held_reads_come_in_stamp_order_across_reads,
     .timeout = 30)
{
	const char *events[] = { "sched:sched_switch", "sched:sched_waking" };
	struct sleeper w[2] = { { .cpu = 0 }, { .cpu = 1 } };
	struct ordered o = { 0 };
	struct ivm_trace_session *s;
	struct timespec pause = { 0, 50000 };
	pthread_t th[2];
	int i, reads;

	s = traced_sleepers(w, th, 2, events, 2, &o);
	ivm_trace_session_hold(s, true);
	sleeper_go(&w[0], UINT_MAX);
	sleeper_go(&w[1], UINT_MAX);
	for (reads = 0; reads < 4000; reads++) {
		cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
		nanosleep(&pause, NULL);
	}
	sleeper_end(&w[0], th[0]);
	sleeper_end(&w[1], th[1]);
	ivm_trace_session_hold(s, false);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	cr_assert_eq(o.backwards, 0, "%" PRIu64 " records older than one "
		     "handed over before them", o.backwards);
	/*
	 * This host's kernel leaves a few switches unrecorded, held or not
	 * (seen without hold: up to 6 of 2,839, in 3 runs of 50): held
	 * records lost would be most of them, read after read.
	 */
	for (i = 0; i < 2; i++)
		cr_assert_geq(o.sleeps[i] + w[i].sleeps / 100, w[i].sleeps,
			      "thread %d: %u sleeps, %u recorded", i,
			      w[i].sleeps, o.sleeps[i]);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(o.ev);
}

/*
 * One read after a burst of many pages, the writer quiet, hands over
 * every record of it, full pages and the last one, and a second read
 * nothing (a read that stopped at a page shorter than full, taking it for
 * the writer's, lost most of them).
 */
Test(sched_events, one_read_takes_a_burst_of_pages, .timeout = 30)
{
	const char *events[] = { "sched:sched_switch", "sched:sched_waking" };
	struct sleeper w = { .cpu = 0 };
	struct ordered o = { 0 };
	struct ivm_trace_session *s;
	unsigned int first;
	pthread_t th;

	s = traced_sleepers(&w, &th, 1, events, 2, &o);
	/*
	 * A read with the writer on its page (so that the next read begins
	 * with the rest of it, short), then some 3,000 sleeps: two records
	 * each, over a hundred pages.
	 */
	sleeper_go(&w, UINT_MAX);
	while (__atomic_load_n(&w.sleeps, __ATOMIC_SEQ_CST) < 5)
		sched_yield();
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	while (__atomic_load_n(&w.sleeps, __ATOMIC_SEQ_CST) < 3000)
		sched_yield();
	sleeper_end(&w, th);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	first = o.sleeps[0];
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	cr_assert_geq(first + w.sleeps / 100, w.sleeps,
		      "%u sleeps, %u in the first two reads", w.sleeps, first);
	cr_assert_eq(o.sleeps[0], first, "%u more in a third read",
		     o.sleeps[0] - first);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(o.ev);
}

/*
 * The buffers a burst grew are let go once reads need far less (a soak's
 * heap kept megabytes of them), and discarding copies nothing.
 */
Test(sched_events, buffers_grown_by_a_burst_are_let_go, .timeout = 30)
{
	const char *events[] = { "sched:sched_switch", "sched:sched_waking" };
	struct timespec pause = { 1, 100000000 };
	struct sleeper w = { .cpu = 0 };
	struct ordered o = { 0 };
	struct ivm_trace_session *s;
	size_t grown, n;
	pthread_t th;

	s = traced_sleepers(&w, &th, 1, events, 2, &o);
	sleeper_burst(&w, 3000);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_geq(o.sleeps[0], 3000);
	grown = ivm_trace_session_memory(s);
	cr_assert_geq(grown, 256 * 1024, "%zu bytes after 6,000 records",
		      grown);
	/* A second of small reads, then the next read lets them go. */
	nanosleep(&pause, NULL);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_eq(ivm_trace_session_memory(s), grown);
	nanosleep(&pause, NULL);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_leq(ivm_trace_session_memory(s), 128 * 1024,
		      "%zu bytes kept of %zu", ivm_trace_session_memory(s),
		      grown);
	/* Discarding a burst keeps none of it, and hands none over. */
	sleeper_burst(&w, 3000);
	n = ivm_trace_session_discard(s);
	cr_assert_geq(n, 6000, "%zu records discarded", n);
	cr_assert_leq(ivm_trace_session_memory(s), 128 * 1024);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_lt(o.sleeps[0], 3000 + 100, "%u sleeps read", o.sleeps[0]);
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	sleeper_end(&w, th);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(o.ev);
}

/*
 * Quiet events (ivm_trace_session_add_quiet) never wake a waiter, and a
 * read hands them over in stamp order with the session's own.  A thread
 * sleeping 100 us at a time: first with its switches filtered out, so
 * only its wakings (quiet) are recorded, and a wait must time out; then
 * with its switches, read together with the wakings.
 */
Test(sched_events, quiet_events_wake_nobody_and_come_in_order,
     .timeout = 30)
{
	const char *polled[] = { "sched:sched_switch" };
	const char *quiet[] = { "sched:sched_waking" };
	struct sleeper w = { .cpu = 1 };
	struct ordered o = { 0 };
	struct ivm_trace_session *s;
	struct timespec ms = { 0, 1000000 };
	bool ready = true;
	pthread_t th;
	char filter[64];
	int i;

	s = traced_sleepers(&w, &th, 1, polled, 1, &o);
	if (!ivm_sched_events_has_waking(o.ev))
		quiet[0] = "sched:sched_wakeup";
	cr_assert_null(ivm_trace_session_add_quiet(s, quiet, 1, &w.tid, 1, 0));
	cr_assert_not_null(ivm_trace_session_add_quiet(s, quiet, 1, &w.tid,
						       1, 0));
	/*
	 * Every switch filtered out (the idle task never sleeps): only the
	 * quiet wakings are recorded.
	 */
	cr_assert_null(ivm_trace_session_filter(
		s, polled[0], "prev_pid == 0 && prev_state & 3"));
	snprintf(filter, sizeof(filter), "pid == %d", (int)w.tid);
	cr_assert_null(ivm_trace_session_filter(s, quiet[0], filter));
	/* What its spinning start recorded before the filters. */
	ivm_trace_session_discard(s);
	sleeper_go(&w, UINT_MAX);
	cr_assert_null(ivm_trace_session_wait(s, 50000000, &ready));
	cr_assert(!ready, "a quiet event woke the waiter");
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_gt(o.wakings[0], 10, "%u wakings read", o.wakings[0]);
	cr_assert_eq(o.sleeps[0], 0);
	/*
	 * Its sleeps too: both kinds over many reads, held so that their
	 * order is exact (not held, a record can land in one instance's
	 * buffer after it was drained and before the other's was).
	 */
	snprintf(filter, sizeof(filter), "prev_pid == %d && prev_state & 3",
		 (int)w.tid);
	cr_assert_null(ivm_trace_session_filter(s, polled[0], filter));
	ivm_trace_session_hold(s, true);
	o.sleeps[0] = o.wakings[0] = 0;
	for (i = 0; i < 200; i++) {
		cr_assert_null(ivm_trace_session_wait(s, 10000000, &ready));
		cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
		nanosleep(&ms, NULL);
	}
	sleeper_end(&w, th);
	ivm_trace_session_hold(s, false);
	cr_assert_null(ivm_trace_session_read(s, on_ordered, &o));
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	cr_assert_gt(o.sleeps[0], 100, "%u switches", o.sleeps[0]);
	/*
	 * A waking for every sleep, but the last (a timer that fires before
	 * the thread is switched out wakes it without a sleep between).
	 */
	cr_assert_leq(o.sleeps[0], o.wakings[0] + 1,
		      "%u switches, %u wakings", o.sleeps[0], o.wakings[0]);
	cr_assert_eq(o.backwards, 0, "%" PRIu64 " records older than one "
		     "handed over before them", o.backwards);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(o.ev);
}

Test(sched_events, switch_filter_text)
{
	char *f = ivm_sched_switch_filter((pid_t[]){ 41, 42 }, 2);

	cr_assert_str_eq(f, "prev_state & 131 && (prev_pid == 41 || prev_pid == 42)");
	free(f);
	f = ivm_sched_switch_filter((pid_t[]){ 7 }, 1);
	cr_assert_str_eq(f, "prev_state & 131 && (prev_pid == 7)");
	free(f);
	cr_assert_null(ivm_sched_switch_filter(NULL, 0));
	f = ivm_sched_wake_filter((pid_t[]){ 41, 42 }, 2);
	cr_assert_str_eq(f, "(pid == 41 || pid == 42)");
	free(f);
	cr_assert_null(ivm_sched_wake_filter(NULL, 0));
}

struct filtered {
	struct ivm_sched_events *ev;
	int32_t tid;
	unsigned int sleeps, wakes, others;
};

static int on_filtered(void *ctx, const void *data, size_t size, int cpu,
		       uint64_t ts)
{
	struct filtered *f = ctx;
	struct ivm_sched_event e;
	struct ivm_error *err = ivm_sched_events_decode(f->ev, data, size, &e);

	(void)cpu;
	(void)ts;
	if (err) {
		ivm_error_destroy(err);
		f->others++;
		return 0;
	}
	if (e.kind == IVM_SCHED_SWITCH && e.prev_tid == f->tid &&
	    ivm_sched_state_sleeping(e.prev_state))
		f->sleeps++;
	else if (e.kind != IVM_SCHED_SWITCH && e.tid == f->tid)
		f->wakes++;
	else
		f->others++;
	return 0;
}

static int on_discarded(void *ctx, const void *data, size_t size, int cpu,
			uint64_t ts)
{
	(void)ctx;
	(void)data;
	(void)size;
	(void)cpu;
	(void)ts;
	return 0;
}

/* A thread of ours that sleeps on a pipe until the test writes it. */
static void *neighbour(void *arg)
{
	int fd = *(int *)arg;
	char c;

	while (read(fd, &c, 1) == 1 && c)
		;
	return NULL;
}

/*
 * Live: with the filters the profiler sets, the session holds this
 * thread's sleeps and wakeups and nothing else, although another thread
 * sharing its CPU sleeps and hands the CPU back to it hundreds of times
 * (each such switch has this thread as next) and this thread wakes it as
 * often (a wakeup done by this thread): the pid list alone lets both
 * through, and every one would wake the profiler's loop.
 */
Test(sched_events, filters_keep_only_the_threads_sleeps_and_wakeups)
{
	const char *events[] = { "sched:sched_switch", "sched:sched_waking" };
	struct ivm_trace_session *s;
	struct filtered f = { 0 };
	struct ivm_error *err;
	pthread_t other;
	cpu_set_t set;
	char *filter, c = 1;
	int i, pipefd[2], cpu = sched_getcpu();
	pid_t me = (pid_t)syscall(SYS_gettid);

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	/* Both threads on one CPU: each sleep of one lets the other run. */
	CPU_ZERO(&set);
	CPU_SET(cpu < 0 ? 0 : cpu, &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
	cr_assert_eq(pipe(pipefd), 0);
	err = ivm_sched_events_load(NULL, &f.ev);
	if (!err && !ivm_sched_events_has_waking(f.ev))
		events[1] = "sched:sched_wakeup";
	if (!err)
		err = ivm_trace_session_create(events, 2, &me, 1, 0, &s);
	if (err && err->code == IVM_ERROR_OS) {
		cr_skip_test("no tracefs here: %s", err->message);
		return;
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	filter = ivm_sched_switch_filter(&me, 1);
	err = ivm_trace_session_filter(s, events[0], filter);
	free(filter);
	cr_assert_null(err, "%s", err ? err->message : "");
	filter = ivm_sched_wake_filter(&me, 1);
	err = ivm_trace_session_filter(s, events[1], filter);
	free(filter);
	cr_assert_null(err, "%s", err ? err->message : "");
	/*
	 * What was traced before the filters were in place (a loaded host
	 * preempts this thread there) is not what this test is about.
	 */
	cr_assert_null(ivm_trace_session_read(s, on_discarded, NULL));
	f.tid = me;
	cr_assert_eq(pthread_create(&other, NULL, neighbour, &pipefd[0]), 0);
	for (i = 0; i < 200; i++) {
		struct timespec ts = { 0, 300000 };

		cr_assert_eq(write(pipefd[1], &c, 1), 1);
		nanosleep(&ts, NULL);
	}
	c = 0;
	cr_assert_eq(write(pipefd[1], &c, 1), 1);
	pthread_join(other, NULL);
	close(pipefd[0]);
	close(pipefd[1]);
	cr_assert_null(ivm_trace_session_read(s, on_filtered, &f));
	cr_assert_geq(f.sleeps, 100, "sleeps %u", f.sleeps);
	cr_assert_geq(f.wakes, 100, "wakes %u", f.wakes);
	cr_assert_eq(f.others, 0, "records that are not this thread's sleeps or wakeups: %u",
		     f.others);
	ivm_trace_session_destroy(s);
	ivm_sched_events_destroy(f.ev);
}
