/* SPDX-License-Identifier: MIT */
/*
 * disk_service: how long the host took to serve the guest's disk
 * requests, from QEMU's I/O syscalls (disk_syscalls.h): each thread's
 * enter -> exit of one call is one span of service, of a kind (read,
 * write, flush, other).  A thread has at most one call in flight, so the
 * spans of the thread pool's workers and of an iothread are told apart
 * by thread alone.
 *
 * The spans are summed (calls, time, a histogram of their lengths), and
 * the last IVM_DISK_HISTORY are kept so that a guest idle period that a
 * device interrupt ended can be charged with the service that overlapped
 * it: "the guest waited 4.1 ms for its disk; the host's storage took
 * 3.9 ms of it".  Which device woke the vCPU is not known to the host
 * (the guest's interrupt counts say "a device"), so a network interrupt
 * during disk service is charged too: the report says so.
 *
 * And QEMU's I/O path between the calls: a worker woken for a request, or
 * the thread (main loop, iothread) woken by a worker that finished one,
 * waits for a host CPU before it goes on; on a busy host that is time the
 * guest waits too.  Those waits are summed as hand-offs.
 *
 * Lost records (a full ring buffer) end every call in flight uncounted,
 * never stretched over records that were not seen; an exit whose enter
 * was not seen (lost, or before the run) is counted apart.
 */
#ifndef IVM_DISK_SERVICE_H
#define IVM_DISK_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "profile/disk_syscalls.h"

/* Service times: under 100 us, 1 ms, 10 ms, 100 ms, and longer. */
#define IVM_DISK_BUCKETS	5
/* Calls in flight at once, and threads remembered (the newest). */
#define IVM_DISK_MAX_THREADS	256
/* Spans kept for the idle periods. */
#define IVM_DISK_HISTORY	4096

struct ivm_disk_totals {
	/* Per kind: calls that ended and their time (async: submissions). */
	uint64_t calls[IVM_DISK_NR_KINDS];
	uint64_t ns[IVM_DISK_NR_KINDS];
	uint64_t errors;		/* calls that returned an error */
	uint64_t unmatched;		/* an exit without its enter, or lost */
	uint64_t buckets[IVM_DISK_BUCKETS];
	/* Threads that made a call (a thread forgotten may count twice). */
	uint64_t threads;
	/* Hand-offs of the I/O path, and their waits for a host CPU. */
	uint64_t handoffs, handoff_ns;
	/*
	 * Idle periods that a device interrupt ended, those that any host
	 * service overlapped, the time in them when at least one call was
	 * in flight, and the calls' time in them by kind (calls in parallel
	 * each count: the kinds can sum past busy_ns).
	 */
	uint64_t device_periods, device_periods_served;
	uint64_t device_busy_ns;
	uint64_t device_ns[IVM_DISK_NR_KINDS];
	uint64_t device_calls;		/* calls that overlapped any */
};

struct ivm_disk_service;

struct ivm_error *ivm_disk_service_create(struct ivm_disk_service **ret);
void ivm_disk_service_destroy(struct ivm_disk_service *ds);

/*
 * Thread tid entered / left a call of kind at ts (records in time order).
 * An async call counts as a submission at its enter and is not timed.
 */
void ivm_disk_service_enter(struct ivm_disk_service *ds, int32_t tid,
			    enum ivm_disk_kind kind, uint64_t ts);
void ivm_disk_service_exit(struct ivm_disk_service *ds, int32_t tid,
			   enum ivm_disk_kind kind, int64_t ret, uint64_t ts);

/*
 * tid is one of QEMU's threads that is not a vCPU's (host_sched.h follows
 * those): its waits can be hand-offs.  Threads that make an I/O call are
 * QEMU's too (the workers it starts).
 */
void ivm_disk_service_qemu_thread(struct ivm_disk_service *ds, int32_t tid);

/*
 * A thread was woken by waker at ts; prev_tid was switched out and
 * next_tid in at ts.  A wakeup of one of QEMU's threads that was off its
 * CPU is a hand-off when it or its waker made an I/O call before; its
 * wait ends at the switch-in.
 */
void ivm_disk_service_wake(struct ivm_disk_service *ds, int32_t tid,
			   int32_t waker, uint64_t ts);
void ivm_disk_service_switch(struct ivm_disk_service *ds, int32_t prev_tid,
			     int32_t next_tid, uint64_t ts);

/* Records were lost: every call in flight and hand-off ends uncounted. */
void ivm_disk_service_lost(struct ivm_disk_service *ds);

/*
 * A guest idle period [start_ns, end_ns] (the records' clock) that a
 * device interrupt ended: the host service that overlapped it (calls
 * ended among the last IVM_DISK_HISTORY, and calls still in flight) is
 * charged to the device_* totals.
 */
void ivm_disk_service_device_period(struct ivm_disk_service *ds,
				    uint64_t start_ns, uint64_t end_ns);

/*
 * The host's service in time, for the timeline (a HOST_SPANS record of
 * lane IVM_SPAN_LANE_DISK a flush): the calls that ended since the last
 * take (up to IVM_DISK_SPAN_CALLS; the others are counted, and their
 * time), merged into spans when at least one was in flight, each span's
 * flags the kinds among them; spans shorter than IVM_DISK_SPAN_MIN_NS are
 * counted, not kept.  A span never overlaps the ones taken before (a
 * call that began before them is cut to what came after).
 */
#define IVM_DISK_SPAN_MIN_NS	10000u
#define IVM_DISK_SPAN_CALLS	4096

/* The spans since the last take into *ret (valid until the next call). */
struct ivm_spans_record;
void ivm_disk_service_take_spans(struct ivm_disk_service *ds,
				 struct ivm_spans_record *ret);

/* Running totals since create. */
const struct ivm_disk_totals *
ivm_disk_service_totals(const struct ivm_disk_service *ds);

/* Room ivm_disk_service_fill_stats() needs. */
#define IVM_DISK_MAX_STATS	(9 + IVM_DISK_NR_KINDS + 2 * IVM_DISK_ASYNC + \
				 IVM_DISK_BUCKETS)

/*
 * The running totals as profile stats (struct ivm_stat, names static),
 * at most max; returns how many.  Always the same names in the same
 * order ("disk_calls_read", ..., "disk_ns_read", ..., "disk_handoff_ns",
 * ..., "disk_service_lt_100us",
 * ..., "disk_device_periods", "disk_device_busy_ns",
 * "disk_device_ns_read", ...), so a window's totals diff by position.
 */
struct ivm_stat;
size_t ivm_disk_service_fill_stats(const struct ivm_disk_service *ds,
				   struct ivm_stat *st, size_t max);

#endif /* IVM_DISK_SERVICE_H */
