/* SPDX-License-Identifier: MIT */
/*
 * host_sched: what the host's scheduler did to each vCPU thread, from its
 * sched_switch and sched_wakeup records (sched_events.h; sched_wakeup is
 * the enqueue, where the kernel's run_delay starts; sched_waking where a
 * kernel has no sched_wakeup): how long it waited on a host run queue while it had
 * work (steal: after a wakeup, the host's wake delay; after a preemption,
 * the time another host task took), which host tasks ran instead, and how
 * long it slept on the host (a guest halt, or QEMU's lock and I/O: the
 * idle periods tell the first from the rest).
 *
 * A thread's state follows its switches:
 *
 *   switch out, sleeping      -> ASLEEP    (since the switch)
 *   switch out, still runnable-> WAITING   (preempted; next_comm ran)
 *   wakeup of an ASLEEP one   -> WAITING   (woken; prev_comm of the
 *                                           switch-in is who it waited on)
 *   switch in                 -> RUNNING   (a WAITING one's wait ends)
 *
 * A wakeup that races with the sleep's switch-out is stamped before it;
 * a thread switched in again with no wakeup after its sleep was woken by
 * the one before, and waited from its switch-out.
 *
 * A wait or a sleep counts when it ends.  Lost records (a full ring
 * buffer) make every thread's state unknown until its next record, so a
 * wait is never stretched over records that were not seen; a wakeup of a
 * thread in an unknown state starts a wait that its switch-in ends (had
 * it been running, its next record is a switch-out, which starts afresh).  This is the host's own accounting of the same waits
 * (/proc/PID/task/TID/schedstat run_delay counts from the enqueue, a
 * wakeup's record fires just before it), so the two agree to the records
 * lost.
 */
#ifndef IVM_HOST_SCHED_H
#define IVM_HOST_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/*
 * Host tasks named as having run instead, the first met (a slot never
 * moves: window stats diff by position); the rest are one "".
 */
#define IVM_HOST_INSTEAD_MAX	32
/* Wake delays: under 10 us, 100 us, 1 ms, 10 ms, 100 ms, and longer. */
#define IVM_HOST_DELAY_BUCKETS	6

struct ivm_host_vcpu {
	uint64_t steal_ns;	/* waited on a host run queue, all causes */
	uint64_t wake_delay_ns;	/* of it: from a wakeup until it ran */
	uint64_t wakeups;	/* waits that began with a wakeup */
	uint64_t preemptions;	/* waits that began with a preemption */
	uint64_t sleep_ns;	/* asleep on the host (halted or blocked) */
	uint64_t sleeps;
	/*
	 * Of steal_ns and sleep_ns, what fell inside the guest's idle
	 * periods (ivm_host_sched_idle_period): a halted vCPU's thread is
	 * kicked awake, waits, runs and sleeps again without the guest
	 * leaving idle; that is not time the guest had work.
	 */
	uint64_t steal_idle_ns;
	uint64_t sleep_idle_ns;
};

struct ivm_host_instead {
	char comm[16];		/* host task name; "" is the rest */
	uint64_t ns;		/* vCPU wait it ran during */
	uint64_t waits;
};

struct ivm_host_sched;

struct ivm_error *ivm_host_sched_create(size_t nr_vcpus,
					struct ivm_host_sched **ret);
void ivm_host_sched_destroy(struct ivm_host_sched *hs);

/*
 * A switch at ts: prev_vcpu / next_vcpu are the vCPUs whose threads were
 * switched out / in (-1: another task); the comms are the record's.
 */
void ivm_host_sched_switch(struct ivm_host_sched *hs, int prev_vcpu,
			   uint64_t prev_state, const char *prev_comm,
			   int next_vcpu, const char *next_comm, uint64_t ts);

/* A wakeup of vcpu's thread at ts. */
void ivm_host_sched_wake(struct ivm_host_sched *hs, int vcpu, uint64_t ts);

/*
 * Read vcpu's thread's own account from now on (/proc/TID/schedstat: its
 * run_delay, the kernel's sum of the same waits), as a stat beside the
 * one the records give ("vcpuN.host_run_delay_ns"), so a run shows
 * whether its records missed any.  IVM_ERROR_OS when it cannot be read.
 */
struct ivm_error *ivm_host_sched_watch(struct ivm_host_sched *hs,
				       size_t vcpu, int tid);

/*
 * The guest's vCPU was idle over [start_ns, end_ns] (an idle period, in
 * the records' clock): what its thread waited and slept in it counts in
 * steal_idle_ns and sleep_idle_ns, whether their records were read
 * before the period or after it.  Periods of one vCPU must not overlap;
 * only the last IVM_HOST_HISTORY waits and sleeps and the last few
 * periods are remembered.
 */
#define IVM_HOST_HISTORY	1024
void ivm_host_sched_idle_period(struct ivm_host_sched *hs, size_t vcpu,
				uint64_t start_ns, uint64_t end_ns);

/* Records were lost: every thread's state is unknown until it switches. */
void ivm_host_sched_lost(struct ivm_host_sched *hs);

/*
 * The wake delay of vcpu's wakeup at wake_ts, once its thread ran after
 * it; false when that wakeup is not the thread's last one or it has not
 * run since.
 */
bool ivm_host_sched_wake_delay(const struct ivm_host_sched *hs, int vcpu,
			       uint64_t wake_ts, uint64_t *delay_ns);

/*
 * The waits themselves, for the timeline (a HOST_SPANS record per vCPU
 * and flush): each wait of at least IVM_HOST_SPAN_MIN_NS (and under
 * 4.29 s, a span's 32 bits: longer is a stopped guest), up to
 * IVM_HOST_SPANS_MAX between two takes; the others are counted (and
 * their time), so a vCPU's spans and dropped time sum to its steal_ns.
 * 10 us keeps the waits a loaded host makes and leaves out the host's
 * ordinary scheduling latency, which is most of the waits and little of
 * their time; 2,048 a second bounds a vCPU's cost to 24 KiB/s.
 */
#define IVM_HOST_SPAN_MIN_NS	10000u
#define IVM_HOST_SPANS_MAX	2048

/*
 * vcpu's spans since the last take into *ret (lane vcpu, by start, none
 * overlapping another or one taken before: the host's CPUs' records do
 * not come in time order, and what an overlap cuts counts as dropped;
 * pointing into hs until its next event), and start afresh.
 */
struct ivm_spans_record;
void ivm_host_sched_take_spans(struct ivm_host_sched *hs, size_t vcpu,
			       struct ivm_spans_record *ret);

/* Running totals (since create) of one vCPU; vcpu < nr_vcpus. */
const struct ivm_host_vcpu *ivm_host_sched_vcpu(const struct ivm_host_sched *hs,
						size_t vcpu);

/* Wake delays by bucket (IVM_HOST_DELAY_BUCKETS), all vCPUs. */
const uint64_t *ivm_host_sched_delays(const struct ivm_host_sched *hs);

/* The upper bound of bucket i in ns; UINT64_MAX for the last. */
uint64_t ivm_host_sched_delay_bound(size_t i);

/*
 * The host tasks that ran while vCPU threads waited, in the order first
 * met (a slot never moves, so running totals diff by position); the last
 * of *nr, comm "", holds the rest once IVM_HOST_INSTEAD_MAX are named.
 */
const struct ivm_host_instead *
ivm_host_sched_instead(const struct ivm_host_sched *hs, size_t *nr);

/* vCPUs with stats of their own (the others count in the sums). */
#define IVM_HOST_STAT_VCPUS	32
/* Room ivm_host_sched_fill_stats() may need. */
#define IVM_HOST_MAX_STATS	(10 + 5 * IVM_HOST_STAT_VCPUS + \
				 IVM_HOST_DELAY_BUCKETS + \
				 2 * (IVM_HOST_INSTEAD_MAX + 1))

/*
 * The running totals as profile stats (struct ivm_stat, names owned by
 * hs), at most max; returns how many.  Reads the watched threads' run
 * delays.  Sums first, then per vCPU
 * ("vcpuN.host_steal_ns"..., and "vcpuN.host_run_delay_ns" of a watched
 * thread), the wake-delay buckets
 * ("host_wake_delay_lt_10us"... "host_wake_delay_ge_100ms"), and last the
 * host tasks ("host_instead_ns:COMM", "host_instead_waits:COMM"; "" for
 * the rest): a stat never moves once written, so a window's totals are
 * differences by position.
 */
struct ivm_stat;
size_t ivm_host_sched_fill_stats(struct ivm_host_sched *hs,
				 struct ivm_stat *st, size_t max);

#endif /* IVM_HOST_SCHED_H */
