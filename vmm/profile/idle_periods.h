/* SPDX-License-Identifier: MIT */
/*
 * idle_periods: every idle period of every vCPU, from the host's events on
 * the vCPU threads and the guest's own state.
 *
 * The host says when to look, the guest says what happened.  A vCPU
 * thread's sleep (sched_switch, prev sleeping) is a candidate idle entry,
 * its wakeup a candidate exit (vmm/profile/sched_events.h).  Candidates only:
 * the thread also sleeps for QEMU's big lock and for I/O.  Each look at the
 * guest (an observation: the CPU's current task, the switch count of its
 * idle task, its run queue's switch count, its interrupt counts) confirms
 * or refutes them:
 *  - a sleep is an idle halt when the CPU's current task is its idle task
 *    (read while the thread still sleeps, or, when it already woke, the
 *    idle task's switch count moved since: the CPU was idle in between);
 *    otherwise a non-idle sleep, counted and ignored;
 *  - an idle period starts at the first look that finds the idle task
 *    current, stamped with the host sleep that preceded it when there is
 *    one;
 *  - it ends at the first look where the idle task's switch count moved
 *    (the guest switched away from idle: a from-idle switch), stamped with
 *    the host wakeup that preceded it.  The task current then is the
 *    from-idle task when exactly one switch happened on the CPU since the
 *    last look at it idle; otherwise the first task already left, and the
 *    period's from-idle task is unknown (counted: from_idle_late);
 *  - a wakeup after which the thread sleeps again with the idle task's
 *    count unchanged woke the vCPU without ending its idle period (an
 *    interrupt with nothing to run): counted, the period goes on;
 *  - when the count moved by more than one between two looks, the periods
 *    in between came and went unseen: counted (unseen_periods), never
 *    invented.
 * Lost host events (a full trace buffer) therefore cost timeliness and
 * stamps, not periods: the counts come from the guest.
 *
 * Counters are snapshot at the period's first look (before), at the last
 * look at the vCPU halted (wake_before) and at its end (after); the
 * interrupt counts that moved between wake_before and after name what woke
 * the vCPU (wake_mask, bit per enum ivm_irq_kind).  On hardware KVM the
 * exit reason of the vCPU's last HLT exit comes with it.
 *
 * No I/O, no clock: time comes with the events and observations, so the
 * machine is tested on synthetic sequences.
 */
#ifndef IVM_IDLE_PERIODS_H
#define IVM_IDLE_PERIODS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "kernel/irq_stat.h"

/* One look at the guest's view of one vCPU. */
struct ivm_idle_obs {
	uint64_t time_ns;
	bool current_ok;
	uint64_t current;
	bool current_is_idle;
	bool idle_switches_ok;
	uint64_t idle_switches;
	bool cpu_switches_ok;
	uint64_t cpu_switches;
	bool rq_clock_ok;
	uint64_t rq_clock;		/* the CPU's run-queue clock */
	struct ivm_irq_counts irqs;
};

struct ivm_idle_snapshot {
	uint64_t time_ns;
	uint64_t cpu_switches;		/* 0 when unknown */
	uint64_t idle_switches;
	uint64_t rq_clock;		/* guest ns; 0 when unknown */
	struct ivm_irq_counts irqs;
};

enum {
	IVM_IDLE_START_FROM_EVENT = 1 << 0,	/* start_ns is a host sleep */
	IVM_IDLE_END_FROM_EVENT = 1 << 1,	/* end_ns is a host wakeup */
	IVM_IDLE_FROM_IDLE_KNOWN = 1 << 2,	/* from_idle_task is certain */
	IVM_IDLE_EXIT_REASON = 1 << 3,		/* exit_reason is set (KVM) */
	IVM_IDLE_TO_IDLE_KNOWN = 1 << 4,	/* to_idle_task was set */
	/* from_idle_task named after the fact (first arrival, last_ran.h) */
	IVM_IDLE_FROM_IDLE_RESOLVED = 1 << 5,
	/* rebuilt from the scheduler's stamps (replay.h): no counters */
	IVM_IDLE_REPLAYED = 1 << 6,
	/* rebuilt, its start not known: start_ns is end_ns (replay.h) */
	IVM_IDLE_START_UNKNOWN = 1 << 7,
	/* end_ns from the guest's stamps: the first switch-in after it */
	IVM_IDLE_END_FROM_STAMP = 1 << 8,
};

struct ivm_idle_period {
	uint32_t vcpu;
	uint32_t flags;			/* IVM_IDLE_* */
	uint64_t start_ns, end_ns;	/* CLOCK_MONOTONIC */
	uint32_t halts;			/* idle host sleeps in the period */
	uint32_t wake_mask;		/* bit per enum ivm_irq_kind */
	uint32_t exit_reason;		/* KVM: of the last HLT exit */
	uint64_t to_idle_task;		/* guest task_struct, 0: unknown */
	uint64_t from_idle_task;	/* guest task_struct, 0: unknown */
	struct ivm_idle_snapshot before, wake_before, after;
};

struct ivm_idle_stats {
	uint64_t host_sleeps;		/* vCPU-thread sleeps (and KVM HLT
					 * exits) seen */
	uint64_t host_sleeps_idle;	/* ... confirmed idle halts */
	uint64_t host_sleeps_busy;	/* ... with a guest task current */
	uint64_t host_wakes;		/* wakeups of a sleeping thread */
	uint64_t wakes_no_switch;	/* woke, halted again, still idle */
	uint64_t halts_passed;		/* ... of them, let pass unlooked at
					 * by the idle gate (idle_gate.h) */
	uint64_t periods_seen;		/* idle periods whose start we saw */
	uint64_t periods_ended;		/* ... and whose end: records */
	uint64_t unseen_periods;	/* came and went between two looks */
	uint64_t from_idle_late;	/* ended, first task already gone */
	uint64_t inconsistent;		/* a task current, idle count still */
	uint64_t lost_events;		/* host events the buffers dropped */
	uint64_t own_switches;		/* idle switch-outs idlevm caused */
	uint64_t recovered_periods;	/* unseen ones rebuilt after the fact */
	/*
	 * KVM only: HLT exits (counted in host_sleeps when they start a
	 * halt), and halts that ended after the thread slept or while KVM
	 * polled (kvm_vcpu_wakeup).  A KVM that emulates HLT (this project's
	 * PVM host running a guest without PVM support) traces no exit.
	 */
	uint64_t kvm_halt_exits;
	uint64_t kvm_halts_slept;
	uint64_t kvm_halts_polled;
	/*
	 * How long after an idle halt (host_sleeps_idle) the look that
	 * judged it came: within 100 us, within 1 ms, later.  A look that
	 * comes late misses the idle periods shorter than its delay; on a
	 * host whose CPUs are all busy, a loop at normal priority waits for
	 * one (web01 on 2 host CPUs: 2.5% came 1 ms or more late, and they
	 * were most of the periods that came and went unseen).
	 */
	uint64_t halt_looked_100us;
	uint64_t halt_looked_1ms;
	uint64_t halt_looked_late;
};

/* The halt_looked_* bounds (ns). */
#define IVM_IDLE_LOOK_SOON_NS 100000ull
#define IVM_IDLE_LOOK_LATE_NS 1000000ull
/* Percent of idle halts looked at late from which that loss is worth a hint. */
#define IVM_IDLE_LOOK_LATE_HINT_PCT 1

/*
 * The halt_looked_* counts of is as the line the run's summary and the
 * report both print (no newline): "looks after an idle halt: N within
 * 100 us, M within 1 ms, K later (P%)".  Into buf, truncated to size.
 */
void ivm_idle_looks_text(const struct ivm_idle_stats *is, char *buf,
			 size_t size);

struct ivm_idle_periods;

struct ivm_error *ivm_idle_periods_create(uint32_t nr_vcpus,
					  struct ivm_idle_periods **ret);
void ivm_idle_periods_destroy(struct ivm_idle_periods *ip);

/* Host events of vcpu's thread, in time order (vcpu < nr_vcpus). */
void ivm_idle_periods_host_sleep(struct ivm_idle_periods *ip, uint32_t vcpu,
				 uint64_t ts);
void ivm_idle_periods_host_wake(struct ivm_idle_periods *ip, uint32_t vcpu,
				uint64_t ts);
/*
 * KVM: the thread's vCPU exited to the host for HLT with reason at ts.
 * That starts a halt as a sleep does (the thread sleeps only once halt
 * polling gives up; its sleep is then the same halt, not another).
 */
void ivm_idle_periods_host_halt_exit(struct ivm_idle_periods *ip,
				     uint32_t vcpu, uint32_t exit_reason,
				     uint64_t ts);
/*
 * KVM: kvm_vcpu_wakeup, the end of a halt at ts, after the thread slept
 * (waited) or while KVM still polled.  Ends the halt as a wake does,
 * unless the thread's own wakeup already did.
 */
void ivm_idle_periods_host_halt_end(struct ivm_idle_periods *ip,
				    uint32_t vcpu, bool waited, uint64_t ts);
void ivm_idle_periods_host_lost(struct ivm_idle_periods *ip, uint64_t n);

/*
 * Forget every vCPU's state, as at create (the stats stay), after a gap
 * in which nothing was watched (--cpu-budget): a period open then is
 * dropped unrecorded, and the next look only begins again.
 */
void ivm_idle_periods_forget(struct ivm_idle_periods *ip);

/*
 * One look at vcpu.  Returns true when it ended an idle period, which is
 * then in *ret (its to_idle_task as set below).
 */
bool ivm_idle_periods_observe(struct ivm_idle_periods *ip, uint32_t vcpu,
			      const struct ivm_idle_obs *obs,
			      struct ivm_idle_period *ret);

/*
 * With the idle gate (idle_gate.h) a sleep of vcpu's thread that did not
 * wake the loop: asleep for the wakeup that follows, but no halt for a
 * look to judge (the gate saw no switch; ivm_idle_periods_passed() counts
 * it).  The sleeps that woke the loop come through host_sleep, stamped by
 * the gate.
 */
void ivm_idle_periods_host_sleep_quiet(struct ivm_idle_periods *ip,
				       uint32_t vcpu);

/*
 * The idle gate let n sleeps of vcpu's thread pass without a look, the
 * last at time_ns with the interrupt counts irqs: none switched the CPU,
 * so each was a halt of the open period that a look would have counted,
 * and the last one's counts are what a look at it would have taken as
 * the counts before the wakeup (what woke the vCPU is told from them).
 * Call before the look that the gate's record asks for.  Nothing without
 * an open period, or for counts older than the period's own.
 */
void ivm_idle_periods_passed(struct ivm_idle_periods *ip, uint32_t vcpu,
			     uint64_t n, uint64_t time_ns,
			     const struct ivm_irq_counts *irqs);

/*
 * A look taken right after idlevm itself ran something on vcpu (the pin
 * helper's holder): switches since the last look are ours, not the
 * guest's.  If the CPU is idle again the period goes on, rebased on obs;
 * otherwise this is an ordinary look.  Returns as observe.
 */
bool ivm_idle_periods_rebase(struct ivm_idle_periods *ip, uint32_t vcpu,
			     const struct ivm_idle_obs *obs,
			     struct ivm_idle_period *ret);

/*
 * What vcpu's last look found unseen: idle periods that came and went
 * since the look before it, whose observation is *before (what the caller
 * needs to rebuild them: its run-queue clock, current task and counts).
 * The caller may rebuild them (vmm/profile/replay.h) and report how many
 * it did with ivm_idle_periods_recovered().  0 when none, or when there
 * was no look before.
 */
uint64_t ivm_idle_periods_unseen_last(const struct ivm_idle_periods *ip,
				      uint32_t vcpu,
				      struct ivm_idle_obs *before);
void ivm_idle_periods_recovered(struct ivm_idle_periods *ip, uint64_t n);

/* Whether vcpu's last look opened an idle period (its start was seen). */
bool ivm_idle_periods_opened(const struct ivm_idle_periods *ip,
			     uint32_t vcpu);

/*
 * Whether vcpu's idle period under way was stamped by the host sleep that
 * led to it (IVM_IDLE_START_FROM_EVENT); its start in *start_ns if so.
 */
bool ivm_idle_periods_open_start(const struct ivm_idle_periods *ip,
				 uint32_t vcpu, uint64_t *start_ns);

/* The task that went to idle in vcpu's open period (a guest address). */
void ivm_idle_periods_set_to_idle(struct ivm_idle_periods *ip, uint32_t vcpu,
				  uint64_t task);

const struct ivm_idle_stats *
ivm_idle_periods_stats(const struct ivm_idle_periods *ip);

/* The bits of enum ivm_irq_kind whose counts grew from a to b. */
uint32_t ivm_irq_counts_moved(const struct ivm_irq_counts *a,
			      const struct ivm_irq_counts *b);

#endif /* IVM_IDLE_PERIODS_H */
