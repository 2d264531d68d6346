// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdlib.h>

#include "profile/disk_service.h"
#include "profile/profile_file.h"

/* A call in flight, or (in the history) one that ended. */
struct span {
	uint64_t start, end;
	int32_t tid;
	enum ivm_disk_kind kind;
	bool used;
	bool charged;		/* overlapped a device period already */
};

/*
 * One of QEMU's threads (not a vCPU's), as its switches and wakeups
 * show it: on a CPU, off it, or woken on the I/O path and waiting for one
 * (since).  Unknown until its first switch, and after lost records.
 */
enum qthread_state { Q_UNKNOWN, Q_RUNNING, Q_OFF, Q_WOKEN };

struct qthread {
	int32_t tid;
	enum qthread_state state;
	uint64_t since;
};

struct ivm_disk_service {
	struct span flight[IVM_DISK_MAX_THREADS];
	struct span *history;		/* ring of IVM_DISK_HISTORY */
	size_t next;
	/*
	 * The threads that made calls, and QEMU's threads followed: rings,
	 * the oldest replaced once full (workers come and go for hours).
	 */
	int32_t seen[IVM_DISK_MAX_THREADS];
	struct qthread qthreads[IVM_DISK_MAX_THREADS];
	size_t nr_qthreads;		/* ever added */
	struct ivm_disk_totals t;
	/* Calls not yet taken for the file, and their merge. */
	struct ivm_span *calls;		/* IVM_DISK_SPAN_CALLS */
	size_t nr_calls;
	uint32_t calls_dropped;
	uint64_t calls_dropped_ns;
	uint64_t taken_end;		/* the last span taken ends here */
};

static const uint64_t bounds[IVM_DISK_BUCKETS] = {
	100000ull, 1000000ull, 10000000ull, 100000000ull, UINT64_MAX,
};

struct ivm_error *ivm_disk_service_create(struct ivm_disk_service **ret)
{
	struct ivm_disk_service *ds = calloc(1, sizeof(*ds));

	if (!ds)
		return &ivm_enomem;
	ds->history = calloc(IVM_DISK_HISTORY, sizeof(*ds->history));
	ds->calls = calloc(IVM_DISK_SPAN_CALLS, sizeof(*ds->calls));
	if (!ds->history || !ds->calls) {
		free(ds->history);
		free(ds->calls);
		free(ds);
		return &ivm_enomem;
	}
	*ret = ds;
	return NULL;
}

void ivm_disk_service_destroy(struct ivm_disk_service *ds)
{
	if (!ds)
		return;
	free(ds->history);
	free(ds->calls);
	free(ds);
}

static struct span *in_flight(struct ivm_disk_service *ds, int32_t tid)
{
	size_t i;

	for (i = 0; i < IVM_DISK_MAX_THREADS; i++)
		if (ds->flight[i].used && ds->flight[i].tid == tid)
			return &ds->flight[i];
	return NULL;
}

/* Whether tid made an I/O call (among the last threads seen). */
static bool made_calls(const struct ivm_disk_service *ds, int32_t tid)
{
	size_t i;

	for (i = 0; i < ds->t.threads && i < IVM_DISK_MAX_THREADS; i++)
		if (ds->seen[i] == tid)
			return true;
	return false;
}

static struct qthread *qthread_of(struct ivm_disk_service *ds, int32_t tid)
{
	size_t i;

	for (i = 0; i < ds->nr_qthreads && i < IVM_DISK_MAX_THREADS; i++)
		if (ds->qthreads[i].tid == tid)
			return &ds->qthreads[i];
	return NULL;
}

void ivm_disk_service_qemu_thread(struct ivm_disk_service *ds, int32_t tid)
{
	if (!qthread_of(ds, tid))
		ds->qthreads[ds->nr_qthreads++ % IVM_DISK_MAX_THREADS] =
			(struct qthread){ tid, Q_UNKNOWN, 0 };
}

/* tid made a call: it is one of QEMU's, on a CPU now. */
static void count_thread(struct ivm_disk_service *ds, int32_t tid)
{
	struct qthread *q;

	if (!made_calls(ds, tid))
		ds->seen[ds->t.threads++ % IVM_DISK_MAX_THREADS] = tid;
	ivm_disk_service_qemu_thread(ds, tid);
	q = qthread_of(ds, tid);
	if (q)
		q->state = Q_RUNNING;
}

void ivm_disk_service_wake(struct ivm_disk_service *ds, int32_t tid,
			   int32_t waker, uint64_t ts)
{
	struct qthread *q = qthread_of(ds, tid);

	/*
	 * Not a host kernel thread that a worker's fdatasync woke (journal,
	 * writeback): that is the storage's time.  Only a thread seen off
	 * its CPU: one that wakes itself before it sleeps is still running,
	 * and one woken twice has waited since the first.
	 */
	if (!q || q->state != Q_OFF)
		return;
	if (!made_calls(ds, tid) && !made_calls(ds, waker)) {
		q->state = Q_UNKNOWN;	/* runnable, not for the I/O path */
		return;
	}
	q->state = Q_WOKEN;
	q->since = ts;
}

void ivm_disk_service_switch(struct ivm_disk_service *ds, int32_t prev_tid,
			     int32_t next_tid, uint64_t ts)
{
	struct qthread *q = qthread_of(ds, prev_tid);

	if (q)
		q->state = Q_OFF;
	q = qthread_of(ds, next_tid);
	if (!q)
		return;
	if (q->state == Q_WOKEN && ts >= q->since) {
		ds->t.handoffs++;
		ds->t.handoff_ns += ts - q->since;
	}
	q->state = Q_RUNNING;
}

void ivm_disk_service_enter(struct ivm_disk_service *ds, int32_t tid,
			    enum ivm_disk_kind kind, uint64_t ts)
{
	struct span *sp = in_flight(ds, tid);
	size_t i;

	if ((unsigned int)kind >= IVM_DISK_NR_KINDS)
		return;
	count_thread(ds, tid);
	if (kind == IVM_DISK_ASYNC) {
		ds->t.calls[kind]++;
		return;
	}
	/* An enter while one is in flight: that one's exit was lost. */
	if (sp)
		ds->t.unmatched++;
	for (i = 0; !sp && i < IVM_DISK_MAX_THREADS; i++)
		if (!ds->flight[i].used)
			sp = &ds->flight[i];
	if (!sp) {
		ds->t.unmatched++;
		return;
	}
	*sp = (struct span){ .start = ts, .tid = tid, .kind = kind,
			     .used = true };
}

void ivm_disk_service_exit(struct ivm_disk_service *ds, int32_t tid,
			   enum ivm_disk_kind kind, int64_t ret, uint64_t ts)
{
	struct span *sp;
	uint64_t ns;
	size_t b;

	if (kind == IVM_DISK_ASYNC || (unsigned int)kind >= IVM_DISK_NR_KINDS)
		return;
	sp = in_flight(ds, tid);
	if (!sp || sp->kind != kind || ts < sp->start) {
		ds->t.unmatched++;
		if (sp)
			sp->used = false;
		return;
	}
	sp->used = false;
	ns = ts - sp->start;
	ds->t.calls[kind]++;
	ds->t.ns[kind] += ns;
	if (ret < 0)
		ds->t.errors++;
	for (b = 0; ns >= bounds[b]; b++)
		;
	ds->t.buckets[b]++;
	sp->end = ts;
	ds->history[ds->next++ % IVM_DISK_HISTORY] = *sp;
	if (ds->nr_calls < IVM_DISK_SPAN_CALLS && ns <= UINT32_MAX) {
		ds->calls[ds->nr_calls++] = (struct ivm_span){
			.start_ns = sp->start, .dur_ns = (uint32_t)ns,
			.kind = IVM_SPAN_DISK, .flags = (uint8_t)(1u << kind),
		};
	} else {
		ds->calls_dropped++;
		ds->calls_dropped_ns += ns;
	}
}

static int span_by_start(const void *a, const void *b)
{
	const struct ivm_span *x = a, *y = b;

	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* A merged span, into the output if long enough (else counted). */
static void put_merged(struct ivm_disk_service *ds, size_t *nr,
		       uint64_t start, uint64_t end, uint8_t flags)
{
	if (start < ds->taken_end)
		start = ds->taken_end;
	if (end <= start)
		return;
	if (end - start < IVM_DISK_SPAN_MIN_NS || end - start > UINT32_MAX) {
		ds->calls_dropped++;
		ds->calls_dropped_ns += end - start;
		return;
	}
	/* Merged in place: the output never passes the calls it came from. */
	ds->calls[(*nr)++] = (struct ivm_span){
		.start_ns = start, .dur_ns = (uint32_t)(end - start),
		.kind = IVM_SPAN_DISK, .flags = flags,
	};
	ds->taken_end = end;
}

void ivm_disk_service_take_spans(struct ivm_disk_service *ds,
				 struct ivm_spans_record *ret)
{
	uint64_t start = 0, end = 0;
	uint8_t flags = 0;
	size_t i, nr = 0;

	qsort(ds->calls, ds->nr_calls, sizeof(*ds->calls), span_by_start);
	for (i = 0; i < ds->nr_calls; i++) {
		const struct ivm_span c = ds->calls[i];

		if (i && c.start_ns <= end) {
			if (c.start_ns + c.dur_ns > end)
				end = c.start_ns + c.dur_ns;
			flags |= c.flags;
			continue;
		}
		if (i)
			put_merged(ds, &nr, start, end, flags);
		start = c.start_ns;
		end = c.start_ns + c.dur_ns;
		flags = c.flags;
	}
	if (ds->nr_calls)
		put_merged(ds, &nr, start, end, flags);
	*ret = (struct ivm_spans_record){
		.lane = IVM_SPAN_LANE_DISK, .min_ns = IVM_DISK_SPAN_MIN_NS,
		.dropped = ds->calls_dropped,
		.dropped_ns = ds->calls_dropped_ns, .nr = nr,
		.spans = ds->calls,
	};
	ds->nr_calls = 0;
	ds->calls_dropped = 0;
	ds->calls_dropped_ns = 0;
}

void ivm_disk_service_lost(struct ivm_disk_service *ds)
{
	size_t i;

	for (i = 0; i < IVM_DISK_MAX_THREADS; i++) {
		if (ds->flight[i].used)
			ds->t.unmatched++;
		ds->flight[i].used = false;
	}
	for (i = 0; i < ds->nr_qthreads && i < IVM_DISK_MAX_THREADS; i++)
		ds->qthreads[i].state = Q_UNKNOWN;
}

/* [start, end) of the calls that overlapped a period, for their union. */
struct piece {
	uint64_t start, end;
};

static int by_start(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

#define MAX_PIECES 512

static void charge(struct ivm_disk_service *ds, struct span *sp,
		   uint64_t sp_end, uint64_t start_ns, uint64_t end_ns,
		   struct piece *pieces, size_t *nr)
{
	uint64_t a = sp->start > start_ns ? sp->start : start_ns;
	uint64_t b = sp_end < end_ns ? sp_end : end_ns;

	if (a >= b)
		return;
	if (!sp->charged)
		ds->t.device_calls++;
	sp->charged = true;
	ds->t.device_ns[sp->kind] += b - a;
	if (*nr < MAX_PIECES)
		pieces[(*nr)++] = (struct piece){ a, b };
}

void ivm_disk_service_device_period(struct ivm_disk_service *ds,
				    uint64_t start_ns, uint64_t end_ns)
{
	struct piece pieces[MAX_PIECES];
	size_t i, n, nr = 0;
	uint64_t busy = 0, cur_start = 0, cur_end = 0;

	if (end_ns <= start_ns)
		return;
	ds->t.device_periods++;
	/*
	 * Newest first: calls end in the records' time order, so the first
	 * that ended before the period began ends the search.
	 */
	n = ds->next < IVM_DISK_HISTORY ? ds->next : IVM_DISK_HISTORY;
	for (i = 0; i < n; i++) {
		struct span *sp =
			&ds->history[(ds->next - 1 - i) % IVM_DISK_HISTORY];

		if (sp->end <= start_ns)
			break;
		charge(ds, sp, sp->end, start_ns, end_ns, pieces, &nr);
	}
	/* Still in flight: at least until the period's end. */
	for (i = 0; i < IVM_DISK_MAX_THREADS; i++)
		if (ds->flight[i].used)
			charge(ds, &ds->flight[i], end_ns, start_ns, end_ns,
			       pieces, &nr);
	if (!nr)
		return;
	ds->t.device_periods_served++;
	qsort(pieces, nr, sizeof(pieces[0]), by_start);
	for (i = 0; i < nr; i++) {
		if (i && pieces[i].start <= cur_end) {
			if (pieces[i].end > cur_end)
				cur_end = pieces[i].end;
			continue;
		}
		busy += cur_end - cur_start;
		cur_start = pieces[i].start;
		cur_end = pieces[i].end;
	}
	busy += cur_end - cur_start;
	ds->t.device_busy_ns += busy;
}

const struct ivm_disk_totals *
ivm_disk_service_totals(const struct ivm_disk_service *ds)
{
	return &ds->t;
}

size_t ivm_disk_service_fill_stats(const struct ivm_disk_service *ds,
				   struct ivm_stat *st, size_t max)
{
	static const char *const calls[IVM_DISK_NR_KINDS] = {
		"disk_calls_read", "disk_calls_write", "disk_calls_flush",
		"disk_calls_other", "disk_calls_async",
	};
	static const char *const ns[IVM_DISK_ASYNC] = {
		"disk_ns_read", "disk_ns_write", "disk_ns_flush",
		"disk_ns_other",
	};
	static const char *const device_ns[IVM_DISK_ASYNC] = {
		"disk_device_ns_read", "disk_device_ns_write",
		"disk_device_ns_flush", "disk_device_ns_other",
	};
	static const char *const buckets[IVM_DISK_BUCKETS] = {
		"disk_service_lt_100us", "disk_service_lt_1ms",
		"disk_service_lt_10ms", "disk_service_lt_100ms",
		"disk_service_ge_100ms",
	};
	const struct ivm_disk_totals *t = &ds->t;
	size_t n = 0, i;

#define PUT(name, v) do { if (n < max) st[n++] = (struct ivm_stat){ name, v }; } while (0)
	for (i = 0; i < IVM_DISK_NR_KINDS; i++)
		PUT(calls[i], t->calls[i]);
	/* Async calls are not timed. */
	for (i = 0; i < IVM_DISK_ASYNC; i++)
		PUT(ns[i], t->ns[i]);
	PUT("disk_errors", t->errors);
	PUT("disk_unmatched", t->unmatched);
	PUT("disk_threads", t->threads);
	PUT("disk_handoffs", t->handoffs);
	PUT("disk_handoff_ns", t->handoff_ns);
	for (i = 0; i < IVM_DISK_BUCKETS; i++)
		PUT(buckets[i], t->buckets[i]);
	PUT("disk_device_periods", t->device_periods);
	PUT("disk_device_periods_served", t->device_periods_served);
	PUT("disk_device_busy_ns", t->device_busy_ns);
	PUT("disk_device_calls", t->device_calls);
	for (i = 0; i < IVM_DISK_ASYNC; i++)
		PUT(device_ns[i], t->device_ns[i]);
#undef PUT
	return n;
}
