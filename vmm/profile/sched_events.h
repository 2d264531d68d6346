/* SPDX-License-Identifier: MIT */
/*
 * sched_events: decoding the host scheduler's tracepoints of the QEMU vCPU
 * threads, the idle signal of TCG and KVM alike.
 *
 * A halted vCPU's host thread blocks (TCG: on its halt condition; KVM: in
 * kvm_vcpu_block after halt polling) and is woken when the vCPU has work:
 *  - sched:sched_switch with the vCPU thread as prev in a sleeping state is
 *    a candidate idle entry; as prev still runnable, the host preempted
 *    it (next_comm took its CPU); as next, the thread runs again;
 *  - sched:sched_waking / sched_wakeup of it is a candidate idle exit.
 * Candidates only: the thread also sleeps for QEMU's big lock and for I/O,
 * so the guest's own state confirms each one (vmm/profile/idle_periods.h).
 *
 * Field offsets come from the event format files of the running kernel
 * (tracefs events/sched/NAME/format), parsed by libtraceevent; every field
 * read is checked to lie inside the record.
 */
#ifndef IVM_SCHED_EVENTS_H
#define IVM_SCHED_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

struct ivm_sched_events;

enum ivm_sched_event_kind {
	IVM_SCHED_SWITCH,
	IVM_SCHED_WAKING,
	IVM_SCHED_WAKEUP,
};

struct ivm_sched_event {
	enum ivm_sched_event_kind kind;
	int32_t prev_tid;	/* switch: the thread switched out */
	uint64_t prev_state;	/* switch: its state (0: preempted) */
	int32_t next_tid;	/* switch: the thread switched in */
	int32_t tid;		/* waking, wakeup: the thread woken */
	/*
	 * waking: the thread that woke it (common_pid: sched_waking fires
	 * in the waker); wakeup: whoever ran where that one fired.
	 */
	int32_t waker;
	/* switch: both threads' names, NUL-terminated (host data) */
	char prev_comm[16], next_comm[16];
};

/*
 * Parse the format texts (NUL-terminated) of sched_switch, sched_waking
 * and sched_wakeup.  waking or wakeup may be NULL (older kernels lack
 * sched_waking), not both.  IVM_ERROR_INVALID naming the event whose format
 * lacks a field idlevm reads.
 */
struct ivm_error *ivm_sched_events_parse(const char *switch_format,
					 const char *waking_format,
					 const char *wakeup_format,
					 struct ivm_sched_events **ret);

/* The same from a tracefs mount (NULL: /sys/kernel/tracing). */
struct ivm_error *ivm_sched_events_load(const char *tracefs,
					struct ivm_sched_events **ret);

void ivm_sched_events_destroy(struct ivm_sched_events *ev);

/*
 * Whether the kernel has sched_waking.  One wakeup fires sched_waking and
 * then sched_wakeup: the first is enough, and each event traced costs the
 * waker a record and may wake the reader.
 */
/* Whether sched_wakeup was parsed (the enqueue of a woken task). */
bool ivm_sched_events_has_wakeup(const struct ivm_sched_events *ev);

bool ivm_sched_events_has_waking(const struct ivm_sched_events *ev);

/*
 * Decode one raw record (starting at common_type).  IVM_ERROR_NOT_FOUND
 * for a record of another event; IVM_ERROR_PROTOCOL for one too short for
 * its fields.
 */
struct ivm_error *ivm_sched_events_decode(const struct ivm_sched_events *ev,
					  const void *data, size_t size,
					  struct ivm_sched_event *ret);

/*
 * Kernel filters that keep only what the idle signal needs of the threads
 * tids[0..n), each record traced being a wakeup of the reader:
 *  - sched_switch: their sleeps, "prev_state & 131 && (prev_pid == T1 ||
 *    ...)".  The instance's pid list (set_event_pid) alone lets a switch
 *    through when either side is one of the threads: their preemptions
 *    and switch-ins too, which the host's side wants (host_sched.h) but
 *    which must not wake the loop: its own wakeup preempts a vCPU thread
 *    (the scheduler favours a thread just woken), whose switch out and
 *    back in would wake it again (measured: 64,000 records a second on
 *    TCG);
 *  - sched_waking / sched_wakeup: their wakeups, "pid == T1 || ...".  The
 *    pid list alone also lets through every wakeup that one of the
 *    threads does (a vCPU thread waking QEMU's I/O thread, or any task).
 * A record the filter refuses is never written to the ring buffer.
 * Return a malloc'd string (the caller frees it), or NULL when out of
 * memory or n is 0.
 */
char *ivm_sched_switch_filter(const pid_t *tids, size_t n);
char *ivm_sched_wake_filter(const pid_t *tids, size_t n);

/*
 * Whether a sched_switch prev_state is a sleep (interruptible,
 * uninterruptible or idle wait), not a preemption nor a stop.
 */
bool ivm_sched_state_sleeping(uint64_t prev_state);

#endif /* IVM_SCHED_EVENTS_H */
