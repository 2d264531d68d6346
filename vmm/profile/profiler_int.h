/* SPDX-License-Identifier: MIT */
/*
 * The profiler's insides, shared by its files (never included outside
 * vmm/profile/profiler*.c):
 *   profiler.c          the run: setup, the loop's step, captures, windows
 *   profiler_events.c   the host's events of the vCPU threads (the sched
 *                       and kvm idle sources) and what the host did to
 *                       them; QEMU's I/O calls for the guest's disks
 *   profiler_periods.c  idle periods: their records, their samples, replay
 *   profiler_stats.c    the running totals of STATS and END records
 */
#ifndef IVM_PROFILER_INT_H
#define IVM_PROFILER_INT_H

#include "profile/cpu_budget.h"
#include "profile/disk_service.h"
#include "profile/disk_syscalls.h"
#include "profile/host_sched.h"
#include "profile/idle_gate.h"
#include "profile/idle_periods.h"
#include "profile/kvm_events.h"
#include "profile/profiler.h"
#include "profile/sample_hold.h"
#include "profile/sched_events.h"
#include "profile/stage_clock.h"
#include "profile/trace_session.h"
#include "profile/vcpu_watch.h"

#define NR_FOLLOW 6	/* looks after a wakeup: follow_ns below */

struct vcpu_poll {
	int stat_fd;		/* /proc/PID/task/TID/stat of its thread */
	bool halted;
	uint64_t idle_task;
	/* Pin mode: the last current seen and whether it is a thread of the
	 * helper (a holder), so each task is looked up once per switch. */
	uint64_t last_current;
	bool last_is_helper;
	bool was_idle;		/* idle at the previous observation */
	uint64_t follow_at[NR_FOLLOW];	/* sched: looks due after a wakeup */
	/* The idle gate's last record: sleeps it let pass before it. */
	uint64_t passed;
	uint64_t passed_ts;
	struct ivm_irq_counts passed_irqs;
	/*
	 * The to-idle task a capture here last read, as it named it then,
	 * and when: the record of the period it opened takes that name
	 * instead of reading the task again (to_idle_id).
	 */
	uint64_t named_task;
	uint64_t named_ns;
	struct ivm_idle_task_id named;
};

/*
 * Sched source: the loop looks at the guest when a vCPU thread's event
 * arrives, and at least every SLOW_POLL_NS (on-CPU ticks, flushes).  It
 * does not poll fast after a wakeup to catch the from-idle task: on two
 * shared host cores that polling took the CPU the woken vCPU needed (the
 * guest ran at a third of its speed); a task it misses is named after the
 * fact from the scheduler's stamps instead (last_ran.h, replay.h).
 */
#define SLOW_POLL_NS 10000000ull
/*
 * ... but it looks again a few times after a wakeup, when the guest has likely
 * dispatched the task it woke for (TCG takes a few hundred microseconds),
 * so that task is seen running, not named after the fact.
 */
/*
 * A look that caught a switch under way decides nothing (profiler.c); the
 * next comes this soon after it, once: a switch takes microseconds under
 * KVM and a few hundred under TCG, unless its vCPU thread was preempted.
 */
#define MID_SWITCH_RETRY_NS 50000ull
static const uint64_t follow_ns[NR_FOLLOW] = {
	100000ull, 250000ull, 500000ull, 1000000ull, 2000000ull, 4000000ull,
};

/*
 * Room for every running total fill_stats() writes: the profiler's own
 * (switch sampling's included), three per --label, the stages, the
 * budget's, the stamps', the disk's and the host's side.
 */
#define MAX_STATS (124 + 3 * IVM_LABELS_MAX + 2 * IVM_STAGE_NR + 2 + 2 + 15 + \
		   IVM_DISK_MAX_STATS + IVM_HOST_MAX_STATS)

struct profiler {
	struct ivm_guest *guest;
	const struct ivm_profiler_config *cfg;
	struct ivm_profile_writer *writer;
	struct ivm_dispatch *dispatch;
	struct ivm_capture_engine *engine;
	struct ivm_capture cap;
	struct vcpu_poll *vcpus;
	struct ivm_profiler_result *res;
	uint64_t start_ns;
	uint32_t nvcsw_off, nivcsw_off;
	bool gone;
	/*
	 * The guest is not running (paused by someone, or stopped by QEMU
	 * after an internal error of KVM): its vCPUs are on no CPU and
	 * nothing changes, so no look is taken.  Checked once a second.
	 */
	bool guest_paused;
	bool warned_degraded;
	struct ivm_kvm_events *kvm_events;	/* idle source kvm, or sched on KVM */
	struct ivm_sched_events *sched_events;	/* idle source sched */
	/*
	 * Idle source sched: the host's side of the vCPU threads, from a
	 * session of its own whose records never wake the loop: every switch
	 * and wakeup of the threads.  Read when a period is written or
	 * the window's spans are (host_sides_read), else every
	 * HOST_SIDES_EVERY_NS.
	 */
	struct ivm_host_sched *host;
	struct ivm_trace_session *host_trace;
	uint64_t host_trace_lost;		/* its records lost, so far */
	/* When the host's sides were read, and the idle signal last. */
	uint64_t host_sides_read_ns, events_read_ns;
	uint64_t host_sides_reads;		/* for the stats */
	struct ivm_stage_clock stages;		/* where the steps' time goes */
	/*
	 * Idle source sched: the host's service of the guest's disk, from
	 * QEMU's I/O syscalls (disk_service.h), a third session like the
	 * host's side, read with it.  Or NULL.
	 */
	struct ivm_disk_syscalls *disk_syscalls;
	struct ivm_disk_service *disk;
	struct ivm_trace_session *disk_trace;
	uint64_t disk_trace_records, disk_trace_lost;
	/* The timeline's spans written (HOST_SPANS), left out, their bytes. */
	uint64_t spans_written, spans_dropped, span_bytes;
	/* Per vCPU: its open period's to-idle sample (sample_hold.h). */
	struct ivm_sample_hold *held;
	struct ivm_trace_session *trace;
	struct ivm_idle_gate *gate;	/* or NULL: every sleep wakes the loop */
	/*
	 * The gate's sleeps read this step, handed to idle_periods in stamp
	 * order among the session's records (profiler_events.c).
	 */
	struct gate_sleep { uint32_t vcpu; uint64_t ts; } gate_pend[64];
	size_t nr_gate_pend;
	uint64_t trace_lost;			/* already passed on */
	struct ivm_irq_stat *irq_stat;		/* or NULL: no irq counts */
	struct ivm_idle_periods *periods;
	enum ivm_idle_source source;		/* the one running */
	uint32_t period_every[IVM_SAMPLE_NR_KINDS];	/* --idle-every */
	bool look_due;			/* a vCPU thread slept */
	bool mid_switch_retry;		/* the last look caught a switch */
	bool helper_held;		/* pin mode: the last capture held a vCPU */
	uint64_t next_look_ns;
	/* The last first_since() answer, good for one poll. */
	bool first_cache_ok;
	int first_cache_cpu;
	uint64_t first_cache_since, first_cache_poll, first_cache_task;
	uint64_t first_cache_arrival;
	struct ivm_vcpu_watch *watch;
	struct ivm_vcpu_watch_view *views;
	/* settle_views(): a second read, and the last look's. */
	struct ivm_vcpu_watch_view *views2, *last_views;
	struct ivm_ksym_hits *ksym_hits;	/* no vmlinux: names to keep */
	/* Who really went to idle, when polling cannot tell; or NULL. */
	struct ivm_last_ran *last_ran;
	/* Continuous windows: when the current one ends, its first stats. */
	uint64_t window_end_ns;
	struct ivm_stat window_base[MAX_STATS];
	size_t nr_window_base;
	/* --cpu-budget: which slices of time are watched (cpu_budget.h). */
	struct ivm_cpu_budget budget;
	uint64_t budget_gaps;		/* unwatched slices ended */
	struct ivm_proc_table *procs;	/* processes said in the file */
	struct ivm_switch_sampler *switches;	/* --switch-every, or NULL */
};

/*
 * The value of expr (a call returning a struct ivm_error *), its time
 * charged to stage s (stage_clock.h), then back to the stage before.
 */
#define IN_STAGE(p, s, expr) ({						\
	enum ivm_stage was_ = ivm_stage_enter(&(p)->stages, (s));	\
	struct ivm_error *err_ = (expr);				\
	ivm_stage_enter(&(p)->stages, was_);				\
	err_;								\
})

/* profiler.c */
void end_with(struct profiler *p, const char *reason);
/* Last in run_setup: the switch sampler, when asked for. */
struct ivm_error *switch_setup(struct profiler *p);

/* profiler_capture.c */
struct ivm_error *handle_request(struct profiler *p, struct ivm_guest_vcpu *v,
				 uint64_t now, struct ivm_capture_req *req);
struct ivm_error *write_kept(struct profiler *p, const struct ivm_capture *cap,
			     const struct ivm_capture_req *req);
struct ivm_error *capture(struct profiler *p,
			  const struct ivm_capture_req *req);
bool is_helper_task(struct profiler *p, struct vcpu_poll *vp,
		    uint64_t task);
int32_t helper_tgid(const struct profiler *p);
struct ivm_error *first_since(struct profiler *p,
			      const struct ivm_guest_vcpu *v, uint64_t since,
			      uint64_t *task, uint64_t *arrival);
struct ivm_error *last_ran_task(struct profiler *p,
				const struct ivm_guest_vcpu *v, uint64_t now,
				uint64_t *ret);
void task_id(struct profiler *p, uint64_t addr, struct ivm_idle_task_id *ret);
void to_idle_id(struct profiler *p, const struct ivm_idle_period *ip,
		struct ivm_idle_task_id *ret);
struct ivm_error *write_held(struct profiler *p, uint32_t vcpu, bool known,
			     uint64_t idle_ns);
struct ivm_error *write_all_held(struct profiler *p);

/* profiler_budget.c: a slice ended; start or stop watching (cpu_budget.h). */
struct ivm_error *budget_tick(struct profiler *p, uint64_t now);

/* profiler_events.c */
struct ivm_error *poll_halted(struct profiler *p);
void gate_read(struct profiler *p, bool drop);
/*
 * The host's and the disk's sides read up to now; unless force, only if
 * they were not since the idle signal's last read.  Before anything asks
 * them about a period that read may have ended.
 */
struct ivm_error *host_sides_read(struct profiler *p, bool force);
struct ivm_error *thread_halted(struct vcpu_poll *vp, bool *ret);
struct ivm_error *setup_sched_source(struct profiler *p);

/* profiler_periods.c */
struct ivm_error *write_period(struct profiler *p,
			       const struct ivm_idle_period *ip);
struct ivm_error *observe_periods(struct profiler *p, uint32_t vcpu,
				  const struct ivm_vcpu_obs *obs,
				  const struct ivm_vcpu_watch_view *view,
				  bool after_own_run);
struct ivm_error *look_after_capture(struct profiler *p, uint32_t vcpu);

/* profiler_setup.c: everything the run holds, made and let go. */
struct ivm_error *run_setup(struct profiler *p);
void run_teardown(struct profiler *p);
/* The file's metadata: at the start of the run and of each window. */
struct ivm_error *write_meta(struct profiler *p);

/* profiler_stats.c */
void fill_stats(const struct profiler *p, struct ivm_stat *st, size_t *nr);
struct ivm_error *write_spans(struct profiler *p);

#endif /* IVM_PROFILER_INT_H */
