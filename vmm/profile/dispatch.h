/* SPDX-License-Identifier: MIT */
/*
 * The dispatch monitor: the idle-transition sampling method, per vCPU.
 *
 * The idle signal (QMP HLT state, vCPU thread state, tracepoints...) feeds
 * one observation per vCPU at a time: is the vCPU idle, and which guest task
 * is current on it.  From the sequence of observations the monitor decides
 * what to capture:
 *
 *  - to-idle:   when a vCPU goes from running a task to idle, the last
 *               non-idle task seen on it (every Nth transition, N >= 1);
 *  - from-idle: after a sampled to-idle transition, a deferred flag is set
 *               on the vCPU; the first non-idle task seen on it after the
 *               idle period is the from-idle target;
 *  - on-cpu:    every tick (per vCPU), the task running on a busy vCPU.
 *
 * At most one capture is in flight per vCPU: a request made while one is
 * outstanding is dropped and counted (lost_busy), never queued, so a slow
 * capture cannot build a backlog of stale targets.
 *
 * Polling can miss short transitions.  When the caller also reports the
 * context-switch count of the vCPU's idle task (it grows by one each time
 * the idle task is switched out, i.e. once per idle period that ended), the
 * monitor counts idle periods that came and went between two observations
 * (missed_idle) instead of hiding them.
 *
 * Polling also hides who went to idle: a task that ran for less than a
 * poll period between two idle periods, or after the task last seen, is
 * never seen at all.  When the caller reports the CPU's count of context
 * switches too, a to-idle request whose target is not certain (more than
 * one switch since that task was seen, or idle periods that ended unseen)
 * is marked `resolve`: the caller must find the task that really ran last
 * on the CPU from guest memory (last_ran.h), the request's task being only
 * the best guess (0 when there is none, as after unseen runs).  Such unseen transitions are
 * sampled too (unseen_to_idle), so short-running threads are not
 * under-counted.
 *
 * A from-idle target that left before it was seen is not lost when the
 * caller reports the CPU's run-queue clock: the request is then queued
 * with `resolve` and the clock of the first look at the idle period, and
 * the caller names the task from guest memory (last_ran.h).
 *
 * This module does no I/O and keeps no clock of its own: time comes in the
 * observations, so it is fully testable.
 */
#ifndef IVM_DISPATCH_H
#define IVM_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "profile/sample.h"

/* One look at one vCPU. */
struct ivm_vcpu_obs {
	uint64_t time_ns;
	bool halted;		/* HLT state from the idle signal */
	bool current_known;	/* current/current_is_idle are valid */
	uint64_t current;	/* guest address of the current task_struct */
	bool current_is_idle;	/* current is this CPU's idle task */
	bool idle_switches_known;
	uint64_t idle_switches;	/* nvcsw + nivcsw of this CPU's idle task */
	bool cpu_switches_known;
	uint64_t cpu_switches;	/* context switches on this CPU (rq) */
	bool rq_clock_known;
	uint64_t rq_clock;	/* this CPU's run-queue clock */
};

struct ivm_capture_req {
	uint32_t vcpu;
	enum ivm_sample_kind kind;
	uint64_t task;		/* guest address of the target task_struct */
	uint64_t time_ns;	/* of the observation that triggered it */
	/*
	 * to-idle: task is a guess (or 0); find who ran last.  from-idle:
	 * task is 0; find the first task switched in on the CPU since its
	 * run-queue clock read `since` (the first look at the idle period).
	 */
	bool resolve;
	uint64_t since;
	/* The task ran since the transition: mark the stack IVM_STACK_LATER. */
	bool later;
	/*
	 * The sample's time value, known at capture (IVM_COUNTER_IDLE_NS of
	 * a to-idle, IVM_COUNTER_HOST_WAKE_NS of a from-idle): a rebuilt
	 * period's length, a wakeup's host delay.
	 */
	bool valued;
	uint64_t value_ns;
};

struct ivm_dispatch_config {
	uint32_t idle_every;	/* sample every Nth to-idle transition; 0 = off */
	uint64_t tick_ns;	/* on-cpu sampling period per vCPU; 0 = off */
};

struct ivm_dispatch_stats {
	uint64_t observations;
	uint64_t idle_transitions;	/* running -> idle seen */
	uint64_t wake_transitions;	/* idle -> running seen */
	uint64_t missed_idle;		/* idle periods between observations */
	uint64_t unseen_to_idle;	/* idle -> idle with runs in between */
	uint64_t inconsistent;		/* halted, yet a non-idle current */
	uint64_t requests[IVM_SAMPLE_NR_KINDS];
	uint64_t lost_busy;		/* dropped: a capture was in flight */
	uint64_t lost_no_target;	/* to-idle with no task seen before */
	uint64_t lost_missed;		/* from-idle target ran unseen */
	uint64_t from_idle_resolve;	/* ... named from guest memory instead */
};

struct ivm_dispatch;

struct ivm_error *ivm_dispatch_create(uint32_t nr_vcpus,
				      const struct ivm_dispatch_config *config,
				      struct ivm_dispatch **ret);
void ivm_dispatch_destroy(struct ivm_dispatch *d);

/*
 * Feed one observation of vcpu (< nr_vcpus).  Writes at most one capture
 * request to *req and returns true if it did; the vCPU then has a capture in
 * flight until ivm_dispatch_capture_done() is called for it.
 */
bool ivm_dispatch_observe(struct ivm_dispatch *d, uint32_t vcpu,
			  const struct ivm_vcpu_obs *obs,
			  struct ivm_capture_req *req);

/*
 * A queued from-idle request of vcpu (see resolve), once its slot is free:
 * call after ivm_dispatch_capture_done().  Same contract as observe.
 */
bool ivm_dispatch_take_pending(struct ivm_dispatch *d, uint32_t vcpu,
			       struct ivm_capture_req *req);

/* The capture for vcpu finished (kept, discarded or failed alike). */
void ivm_dispatch_capture_done(struct ivm_dispatch *d, uint32_t vcpu);

/*
 * Forget every vCPU's state, as at create (the stats stay): the guest ran
 * unwatched since the last observation (a --cpu-budget gap), and nothing
 * seen before it says anything of the next.  No capture may be in flight.
 */
void ivm_dispatch_forget(struct ivm_dispatch *d);

bool ivm_dispatch_in_flight(const struct ivm_dispatch *d, uint32_t vcpu);

/*
 * Whether vcpu still waits for the first task after a sampled idle period
 * (a look soon may see it running).  False once it was requested, queued
 * to be named from guest memory, or lost: more looks cannot change it.
 */
bool ivm_dispatch_awaits_from_idle(const struct ivm_dispatch *d,
				   uint32_t vcpu);

const struct ivm_dispatch_stats *
ivm_dispatch_stats(const struct ivm_dispatch *d);

#endif /* IVM_DISPATCH_H */
