// SPDX-License-Identifier: MIT
/*
 * disk_service: the host's service spans of QEMU's I/O calls, on made-up
 * sequences; disk_syscalls: decoding raw_syscalls records against the
 * event formats of the development host (tests/unit/data/disk/), and live:
 * a thread started after the session (as QEMU's pool workers are) writes
 * and syncs a file, and its calls come out as spans no longer than the
 * thread measured them.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "profile/disk_service.h"
#include "profile/disk_syscalls.h"
#include "profile/profile_file.h"
#include "profile/trace_session.h"
#include "trace_records.h"

#define DATA "tests/unit/data/disk/"

static struct ivm_disk_service *make(void)
{
	struct ivm_disk_service *ds;

	cr_assert_null(ivm_disk_service_create(&ds));
	return ds;
}

Test(disk_service, spans_per_thread_and_kind)
{
	struct ivm_disk_service *ds = make();
	const struct ivm_disk_totals *t;

	/* Two workers in parallel: a write and a flush; then a read. */
	ivm_disk_service_enter(ds, 101, IVM_DISK_WRITE, 1000);
	ivm_disk_service_enter(ds, 102, IVM_DISK_FLUSH, 1500);
	ivm_disk_service_exit(ds, 101, IVM_DISK_WRITE, 4096, 1050);
	ivm_disk_service_exit(ds, 102, IVM_DISK_FLUSH, 0, 3501500);
	ivm_disk_service_enter(ds, 101, IVM_DISK_READ, 4000000);
	ivm_disk_service_exit(ds, 101, IVM_DISK_READ, -5, 4200000);
	/* An async submission counts, untimed; its exit is nothing. */
	ivm_disk_service_enter(ds, 100, IVM_DISK_ASYNC, 5000000);
	ivm_disk_service_exit(ds, 100, IVM_DISK_ASYNC, 1, 5000100);
	t = ivm_disk_service_totals(ds);
	cr_assert_eq(t->calls[IVM_DISK_WRITE], 1);
	cr_assert_eq(t->ns[IVM_DISK_WRITE], 50);
	cr_assert_eq(t->calls[IVM_DISK_FLUSH], 1);
	cr_assert_eq(t->ns[IVM_DISK_FLUSH], 3500000);
	cr_assert_eq(t->calls[IVM_DISK_READ], 1);
	cr_assert_eq(t->ns[IVM_DISK_READ], 200000);
	cr_assert_eq(t->calls[IVM_DISK_ASYNC], 1);
	cr_assert_eq(t->errors, 1);
	cr_assert_eq(t->unmatched, 0);
	cr_assert_eq(t->threads, 3);
	/* 50 ns; 3.5 ms; 200 us. */
	cr_assert_eq(t->buckets[0], 1);
	cr_assert_eq(t->buckets[1], 1);
	cr_assert_eq(t->buckets[2], 1);
	ivm_disk_service_destroy(ds);
}

Test(disk_service, unmatched_and_lost)
{
	struct ivm_disk_service *ds = make();
	const struct ivm_disk_totals *t = ivm_disk_service_totals(ds);

	/* An exit whose enter came before the run. */
	ivm_disk_service_exit(ds, 7, IVM_DISK_WRITE, 0, 100);
	cr_assert_eq(t->unmatched, 1);
	/* An exit of another kind than the call in flight. */
	ivm_disk_service_enter(ds, 7, IVM_DISK_WRITE, 200);
	ivm_disk_service_exit(ds, 7, IVM_DISK_FLUSH, 0, 300);
	cr_assert_eq(t->unmatched, 2);
	cr_assert_eq(t->calls[IVM_DISK_FLUSH], 0);
	/* An enter while one is in flight: the first one's exit was lost. */
	ivm_disk_service_enter(ds, 7, IVM_DISK_WRITE, 400);
	ivm_disk_service_enter(ds, 7, IVM_DISK_READ, 500);
	cr_assert_eq(t->unmatched, 3);
	ivm_disk_service_exit(ds, 7, IVM_DISK_READ, 0, 600);
	cr_assert_eq(t->ns[IVM_DISK_READ], 100);
	/* Lost records end every call in flight uncounted. */
	ivm_disk_service_enter(ds, 8, IVM_DISK_FLUSH, 700);
	ivm_disk_service_lost(ds);
	cr_assert_eq(t->unmatched, 4);
	ivm_disk_service_exit(ds, 8, IVM_DISK_FLUSH, 0, 900000);
	cr_assert_eq(t->unmatched, 5);
	cr_assert_eq(t->ns[IVM_DISK_FLUSH], 0);
	ivm_disk_service_destroy(ds);
}

Test(disk_service, device_periods_charged_with_overlap)
{
	struct ivm_disk_service *ds = make();
	const struct ivm_disk_totals *t = ivm_disk_service_totals(ds);

	/* Before the period: not charged. */
	ivm_disk_service_enter(ds, 1, IVM_DISK_WRITE, 100);
	ivm_disk_service_exit(ds, 1, IVM_DISK_WRITE, 0, 900);
	/* Across its start, and two in parallel inside it. */
	ivm_disk_service_enter(ds, 1, IVM_DISK_WRITE, 800);
	ivm_disk_service_exit(ds, 1, IVM_DISK_WRITE, 0, 1500);
	ivm_disk_service_enter(ds, 2, IVM_DISK_FLUSH, 2000);
	ivm_disk_service_enter(ds, 3, IVM_DISK_FLUSH, 2500);
	ivm_disk_service_exit(ds, 2, IVM_DISK_FLUSH, 0, 4000);
	ivm_disk_service_exit(ds, 3, IVM_DISK_FLUSH, 0, 4500);
	/* Still in flight at the period's end. */
	ivm_disk_service_enter(ds, 4, IVM_DISK_READ, 5500);
	ivm_disk_service_device_period(ds, 1000, 6000);
	cr_assert_eq(t->device_periods, 1);
	cr_assert_eq(t->device_periods_served, 1);
	cr_assert_eq(t->device_ns[IVM_DISK_WRITE], 500);
	cr_assert_eq(t->device_ns[IVM_DISK_FLUSH], 2000 + 2000);
	cr_assert_eq(t->device_ns[IVM_DISK_READ], 500);
	/* Busy: 1000-1500, 2000-4500, 5500-6000. */
	cr_assert_eq(t->device_busy_ns, 500 + 2500 + 500);
	cr_assert_eq(t->device_calls, 4);
	/* The read, still in flight, and the flush overlap the next too. */
	ivm_disk_service_device_period(ds, 3000, 5800);
	cr_assert_eq(t->device_calls, 4);
	cr_assert_eq(t->device_periods, 2);
	cr_assert_eq(t->device_busy_ns, 3500 + 1500 + 300);
	/* The read's exit keeps it charged; a period with nothing in it. */
	ivm_disk_service_exit(ds, 4, IVM_DISK_READ, 0, 6100);
	ivm_disk_service_device_period(ds, 6050, 6200);
	cr_assert_eq(t->device_calls, 4);
	ivm_disk_service_device_period(ds, 7000, 8000);
	cr_assert_eq(t->device_periods, 4);
	cr_assert_eq(t->device_periods_served, 3);
	cr_assert_eq(t->device_busy_ns, 3500 + 1500 + 300 + 50);
	ivm_disk_service_destroy(ds);
}

Test(disk_service, handoffs_of_the_io_path)
{
	struct ivm_disk_service *ds = make();
	const struct ivm_disk_totals *t = ivm_disk_service_totals(ds);

	ivm_disk_service_qemu_thread(ds, 10);	/* the main loop */
	ivm_disk_service_qemu_thread(ds, 11);	/* another of QEMU's */
	/* Before any call: nobody is on the I/O path yet. */
	ivm_disk_service_switch(ds, 20, 1, 50);
	ivm_disk_service_wake(ds, 20, 10, 100);
	ivm_disk_service_switch(ds, 1, 20, 200);
	cr_assert_eq(t->handoffs, 0);
	/* Worker 20 serves a request, and sleeps. */
	ivm_disk_service_enter(ds, 20, IVM_DISK_WRITE, 300);
	ivm_disk_service_exit(ds, 20, IVM_DISK_WRITE, 0, 400);
	ivm_disk_service_switch(ds, 20, 1, 450);
	/* Woken for the next by the main loop, twice: from the first. */
	ivm_disk_service_switch(ds, 10, 1, 500);
	ivm_disk_service_wake(ds, 20, 10, 1000);
	ivm_disk_service_wake(ds, 20, 11, 1100);
	ivm_disk_service_switch(ds, 1, 20, 1500);
	cr_assert_eq(t->handoffs, 1);
	cr_assert_eq(t->handoff_ns, 500);
	/* The main loop (asleep since 500) woken by the worker's finish. */
	ivm_disk_service_wake(ds, 10, 20, 2000);
	ivm_disk_service_switch(ds, 20, 10, 2300);
	cr_assert_eq(t->handoffs, 2);
	cr_assert_eq(t->handoff_ns, 800);
	/* A host thread woken by the worker (journal): the storage's time. */
	ivm_disk_service_wake(ds, 99, 20, 2400);
	ivm_disk_service_switch(ds, 1, 99, 2900);
	cr_assert_eq(t->handoffs, 2);
	/* The main loop woken while still running (it woke itself). */
	ivm_disk_service_wake(ds, 10, 20, 3000);
	ivm_disk_service_switch(ds, 10, 1, 3100);
	ivm_disk_service_switch(ds, 1, 10, 9000);
	cr_assert_eq(t->handoffs, 2);
	/* Woken by someone else: not the I/O path. */
	ivm_disk_service_switch(ds, 10, 1, 9100);
	ivm_disk_service_wake(ds, 10, 12, 9200);
	ivm_disk_service_switch(ds, 1, 10, 9900);
	cr_assert_eq(t->handoffs, 2);
	/* Lost records end a wait. */
	ivm_disk_service_switch(ds, 10, 1, 10000);
	ivm_disk_service_wake(ds, 10, 20, 10100);
	ivm_disk_service_lost(ds);
	ivm_disk_service_switch(ds, 1, 10, 19000);
	cr_assert_eq(t->handoffs, 2);
	cr_assert_eq(t->handoff_ns, 800);
	ivm_disk_service_destroy(ds);
}

Test(disk_service, workers_come_and_go_for_hours)
{
	struct ivm_disk_service *ds = make();
	const struct ivm_disk_totals *t = ivm_disk_service_totals(ds);
	int32_t w;

	/* Far more workers than remembered: the newest still hand off. */
	for (w = 1000; w < 1000 + 3 * IVM_DISK_MAX_THREADS; w++) {
		uint64_t at = (uint64_t)w * 1000;

		ivm_disk_service_enter(ds, w, IVM_DISK_FLUSH, at);
		ivm_disk_service_exit(ds, w, IVM_DISK_FLUSH, 0, at + 100);
		ivm_disk_service_switch(ds, w, 1, at + 200);
		ivm_disk_service_wake(ds, w, 1, at + 300);
		ivm_disk_service_switch(ds, 1, w, at + 350);
	}
	cr_assert_eq(t->threads, 3 * IVM_DISK_MAX_THREADS);
	cr_assert_eq(t->calls[IVM_DISK_FLUSH], 3 * IVM_DISK_MAX_THREADS);
	cr_assert_eq(t->handoffs, 3 * IVM_DISK_MAX_THREADS);
	cr_assert_eq(t->handoff_ns, 50ull * 3 * IVM_DISK_MAX_THREADS);
	ivm_disk_service_destroy(ds);
}

Test(disk_service, stats_keep_their_places)
{
	struct ivm_disk_service *ds = make();
	struct ivm_stat a[IVM_DISK_MAX_STATS], b[IVM_DISK_MAX_STATS];
	size_t na, nb, i;

	na = ivm_disk_service_fill_stats(ds, a, IVM_DISK_MAX_STATS);
	ivm_disk_service_enter(ds, 1, IVM_DISK_FLUSH, 10);
	ivm_disk_service_exit(ds, 1, IVM_DISK_FLUSH, 0, 2000010);
	nb = ivm_disk_service_fill_stats(ds, b, IVM_DISK_MAX_STATS);
	cr_assert_eq(na, IVM_DISK_MAX_STATS);
	cr_assert_eq(na, nb);
	for (i = 0; i < na; i++)
		cr_assert_str_eq(a[i].name, b[i].name);
	for (i = 0; i < nb; i++) {
		if (!strcmp(b[i].name, "disk_ns_flush"))
			cr_assert_eq(b[i].value, 2000000);
		if (!strcmp(b[i].name, "disk_service_lt_10ms"))
			cr_assert_eq(b[i].value, 1);
	}
	cr_assert_eq(ivm_disk_service_fill_stats(ds, b, 3), 3);
	ivm_disk_service_destroy(ds);
}

static struct ivm_disk_syscalls *load(void)
{
	char *enter = read_format(DATA, "sys_enter");
	char *exit = read_format(DATA, "sys_exit");
	struct ivm_disk_syscalls *dsc;
	struct ivm_error *err = ivm_disk_syscalls_parse(enter, exit, &dsc);

	cr_assert_null(err, "%s", err ? err->message : "");
	free(enter);
	free(exit);
	return dsc;
}

static void put_le(uint8_t *p, uint64_t v, int size)
{
	int i;

	for (i = 0; i < size; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

Test(disk_syscalls, decodes_and_bounds_records)
{
	struct ivm_disk_syscalls *dsc = load();
	struct ivm_disk_syscall sc;
	enum ivm_disk_kind kind;
	struct ivm_error *err;
	uint8_t rec[64] = { 0 };

	/* sys_exit (ID 442 here): pid 4242, fdatasync, ret -5. */
	put_le(rec, 442, 2);
	put_le(rec + 4, 4242, 4);
	put_le(rec + 8, 75, 8);
	put_le(rec + 16, (uint64_t)-5, 8);
	cr_assert_null(ivm_disk_syscalls_decode(dsc, rec, 24, &sc));
	cr_assert(sc.exit);
	cr_assert_eq(sc.tid, 4242);
	cr_assert_eq(sc.nr, 75);
	cr_assert_eq(sc.ret, -5);
	cr_assert(ivm_disk_syscall_kind(sc.nr, &kind));
	cr_assert_eq(kind, IVM_DISK_FLUSH);
	/* Cut short: an error, never a read past the end. */
	err = ivm_disk_syscalls_decode(dsc, rec, 23, &sc);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_disk_syscalls_decode(dsc, rec, 1, &sc);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	/* sys_enter (443): pwritev. */
	put_le(rec, 443, 2);
	put_le(rec + 8, 296, 8);
	cr_assert_null(ivm_disk_syscalls_decode(dsc, rec, 64, &sc));
	cr_assert(!sc.exit);
	cr_assert(ivm_disk_syscall_kind(sc.nr, &kind));
	cr_assert_eq(kind, IVM_DISK_WRITE);
	/* Another event. */
	put_le(rec, 7, 2);
	err = ivm_disk_syscalls_decode(dsc, rec, 64, &sc);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_assert(!ivm_disk_syscall_kind(0, &kind));	/* read(2) */
	ivm_disk_syscalls_destroy(dsc);
}

/* ---- live: a worker thread born after the session ----------------------- */

struct worker {
	char path[64];
	int32_t tid;
	uint64_t own_ns;	/* its calls, timed around them */
	int calls;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char buf[4096];
	struct iovec iov[2] = { { buf, 2048 }, { buf + 2048, 2048 } };
	int fd, k;

	w->tid = (int32_t)syscall(SYS_gettid);
	memset(buf, 'x', sizeof(buf));
	fd = open(w->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	for (k = 0; k < 20; k++) {
		uint64_t t0 = ivm_mono_ns();

		if (pwritev(fd, iov, 2, (off_t)k * 4096) != 4096)
			break;
		if (fdatasync(fd))
			break;
		w->own_ns += ivm_mono_ns() - t0;
		w->calls += 2;
	}
	close(fd);
	return NULL;
}

struct live {
	struct ivm_disk_syscalls *dsc;
	struct ivm_disk_service *ds;
	int32_t tid;
};

static int on_record(void *ctx, const void *data, size_t size, int cpu,
		     uint64_t ts)
{
	struct live *l = ctx;
	struct ivm_disk_syscall sc;
	enum ivm_disk_kind kind;
	struct ivm_error *err;

	(void)cpu;
	err = ivm_disk_syscalls_decode(l->dsc, data, size, &sc);
	cr_assert_null(err, "%s", err ? err->message : "");
	/* Ours, before the filters were on (writing them is a syscall). */
	if (sc.tid != l->tid)
		return 0;
	cr_assert(ivm_disk_syscall_kind(sc.nr, &kind),
		  "the filter let syscall %" PRId64 " through", sc.nr);
	if (sc.exit)
		ivm_disk_service_exit(l->ds, sc.tid, kind, sc.ret, ts);
	else
		ivm_disk_service_enter(l->ds, sc.tid, kind, ts);
	return 0;
}

Test(disk_syscalls, live_worker_born_after_the_session)
{
	static const char *const events[] = {
		"raw_syscalls:sys_enter", "raw_syscalls:sys_exit",
	};
	struct ivm_trace_session *s = NULL;
	struct worker w = { .path = "/tmp/ivm-disk-XXXXXX" };
	const struct ivm_disk_totals *t;
	struct live l = { 0 };
	struct ivm_error *err;
	pthread_t th;
	int fd;

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	fd = mkstemp(w.path);
	cr_assert_geq(fd, 0);
	close(fd);
	err = ivm_disk_syscalls_load(NULL, &l.dsc);
	if (!err)
		err = ivm_trace_session_create(events, 2,
					       &(pid_t){ (pid_t)syscall(SYS_gettid) },
					       1, IVM_TRACE_FOLLOW_FORKS, &s);
	if (err && err->code == IVM_ERROR_OS) {
		unlink(w.path);
		cr_skip_test("no tracefs here: %s", err->message);
		return;
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	cr_assert_null(ivm_trace_session_filter(s, events[0],
						ivm_disk_syscall_filter()));
	cr_assert_null(ivm_trace_session_filter(s, events[1],
						ivm_disk_syscall_filter()));
	cr_assert_null(ivm_disk_service_create(&l.ds));
	cr_assert_eq(pthread_create(&th, NULL, worker_main, &w), 0);
	pthread_join(th, NULL);
	unlink(w.path);
	l.tid = w.tid;
	cr_assert_eq(w.calls, 40);
	cr_assert_null(ivm_trace_session_read(s, on_record, &l));
	cr_assert_eq(ivm_trace_session_lost(s), 0);
	t = ivm_disk_service_totals(l.ds);
	cr_log_info("worker: %d calls in %" PRIu64 " ns; traced: %" PRIu64
		    " writes %" PRIu64 " ns, %" PRIu64 " flushes %" PRIu64 " ns",
		    w.calls, w.own_ns, t->calls[IVM_DISK_WRITE],
		    t->ns[IVM_DISK_WRITE], t->calls[IVM_DISK_FLUSH],
		    t->ns[IVM_DISK_FLUSH]);
	cr_assert_eq(t->calls[IVM_DISK_WRITE], 20);
	cr_assert_eq(t->calls[IVM_DISK_FLUSH], 20);
	cr_assert_eq(t->unmatched, 0);
	/* Inside the thread's own timing of the same calls... */
	cr_assert_leq(t->ns[IVM_DISK_WRITE] + t->ns[IVM_DISK_FLUSH], w.own_ns);
	/* ...and most of it: only the clock reads and returns are outside. */
	cr_assert_geq(t->ns[IVM_DISK_WRITE] + t->ns[IVM_DISK_FLUSH],
		      w.own_ns / 2);
	ivm_trace_session_destroy(s);
	ivm_disk_service_destroy(l.ds);
	ivm_disk_syscalls_destroy(l.dsc);
}
