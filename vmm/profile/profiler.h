/* SPDX-License-Identifier: MIT */
/*
 * The profiler loop: idle signal -> dispatch monitor -> capture -> profile
 * file, for one guest.
 *
 * Idle signal sources (each poll gives every vCPU's halted state; the guest
 * kernel's `current` of each vCPU, read from guest memory, cross-checks it):
 *  - "thread": the scheduling state of each QEMU vCPU thread in
 *    /proc/PID/task/TID/stat.  Under TCG a halted vCPU's thread sleeps; under
 *    KVM a vCPU in HLT sleeps in the host kernel too (halt polling aside).
 *    About 10 us per vCPU: the default.
 *  - "qmp": HLT= of QEMU's `info registers -a` (about 2 ms per poll through
 *    libvirt); exact but slow.
 *  - "sched": the host scheduler's sched_switch (a vCPU thread goes to
 *    sleep) and sched_waking/sched_wakeup (it is woken) of the vCPU
 *    threads, through a private tracefs instance: event-driven under TCG
 *    and KVM alike, each event confirmed by the guest's own state
 *    (vmm/profile/idle_periods.h); on KVM, kvm_exit adds the HLT exit
 *    reason.  The loop sleeps until an event or the next on-CPU tick, and
 *    after a wakeup in an idle period looks every FAST_POLL_NS until the
 *    from-idle task shows.  The default where tracefs is usable.
 *  - "kvm": the host kernel's kvm:kvm_exit (HLT exit reason),
 *    kvm_vcpu_wakeup and kvm_entry tracepoints of the vCPU threads, through
 *    a private tracefs instance (vmm/profile/trace_session.h, vmm/profile/kvm_events.h):
 *    exact and cheap, but only where the guest runs on hardware KVM.
 *
 * Stop conditions: the duration, a stop request (Ctrl-C: SIGINT/SIGTERM set
 * *stop), or the guest going away (shutdown, QEMU exit, libvirt destroy).
 * Whatever ends the run, every capture made so far is in the file and the
 * file gets its END record.
 */
#ifndef IVM_PROFILER_H
#define IVM_PROFILER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "profile/capture.h"
#include "profile/uobjects.h"
#include "profile/capture_pin.h"
#include "profile/dispatch.h"
#include "profile/idle_periods.h"
#include "kernel/guest.h"
#include "profile/profile_file.h"
#include "profile/switch_sampler.h"
#include "access/tcg_env.h"

enum ivm_idle_source {
	IVM_IDLE_SOURCE_THREAD,
	IVM_IDLE_SOURCE_QMP,
	IVM_IDLE_SOURCE_KVM,	/* kvm:kvm_exit (HLT) / kvm_vcpu_wakeup */
	IVM_IDLE_SOURCE_SCHED,	/* sched_switch / sched_waking of the vCPU threads */
};

enum ivm_capture_mode {
	IVM_CAPTURE_MODE_OPTIMISTIC,	/* read, validate by switch counts */
	IVM_CAPTURE_MODE_STOP,		/* QMP stop / cont around the read */
	/*
	 * The method: the helper holds the idle vCPU and pins the to-idle
	 * target to it around the read (capture_pin.h); a from-idle or
	 * on-CPU target no longer current is pinned the same way on the
	 * vCPU it was seen on.  A target still current on a vCPU is read
	 * from its registers as in optimistic mode (kept marked inexact):
	 * holding its vCPU to switch it out would take a helper round trip
	 * (milliseconds under TCG) per tick, and the stack read then would
	 * be the one of the preemption, not the one that was sampled.
	 */
	IVM_CAPTURE_MODE_PIN,
};

struct ivm_profiler_config {
	double duration_s;		/* <= 0: until stopped */
	double frequency_hz;		/* on-cpu tick per vCPU; 0 = off */
	uint32_t idle_every;		/* sample every Nth idle transition */
	double poll_interval_ms;	/* idle signal polling period */
	enum ivm_idle_source idle_source;
	/* sched source that cannot start: poll the threads instead. */
	bool source_fallback;
	/*
	 * Sched source: wait for events at SCHED_FIFO priority 1 once set
	 * up (back to normal before returning).  On a loaded host a normal
	 * thread is woken milliseconds late, after short idle periods ended.
	 */
	bool realtime;
	enum ivm_capture_mode capture_mode;
	int filter_pid;			/* guest tgid, or -1 */
	const char *filter_comm;	/* fnmatch pattern on comm, or NULL */
	bool status_line;		/* one-line status on stderr */
	const char *const *binaries;	/* host copies of guest executables */
	size_t nr_binaries;
	const char *symdir;		/* executables by build-id, or NULL */
	/* --label: values read from the guest at each capture. */
	const struct ivm_label_spec *labels;
	size_t nr_labels;
	/* IVM_CAPTURE_MODE_PIN: the helper session (borrowed; required). */
	struct ivm_pin_capture *pin;
	/*
	 * Where running vCPUs' registers come from: QEMU's TCG state
	 * (borrowed), or NULL for the monitor's `info registers`.
	 */
	const struct ivm_tcg_env *tcg_env;
	/*
	 * Continuous windows: with window_s > 0, every window_s seconds the
	 * file is finished (END record, with the stats of that window
	 * alone) and next_window(window_ctx, &writer) gives the next one,
	 * which gets the run's metadata again, so every window is a whole
	 * profile.  An error from next_window ends the run; the windows
	 * before it are whole already.
	 */
	double window_s;
	struct ivm_error *(*next_window)(void *ctx,
					 struct ivm_profile_writer **ret);
	void *window_ctx;
	/*
	 * Context-switch sampling (switch_sampler.h): every thread's switch
	 * counts, run delay and CPU time, and a stack every switch_every
	 * switches of a thread; 0 off.  Its batch, look interval (ms) and
	 * walk budget: 0 for the defaults.
	 */
	uint32_t switch_every;
	uint32_t switch_batch;
	double switch_interval_ms;
	uint32_t switch_walk_budget;
};

struct ivm_profiler_result {
	uint64_t kept[IVM_SAMPLE_NR_KINDS];
	uint64_t outcomes[IVM_CAPTURE_NR_OUTCOMES];
	/*
	 * The same, for targets read from their saved frame (no live
	 * registers): the only ones pinning can keep consistent.
	 */
	uint64_t blocked_outcomes[IVM_CAPTURE_NR_OUTCOMES];
	uint64_t filtered;
	uint64_t polls;
	uint64_t poll_errors;
	uint64_t capture_errors;
	double elapsed_s;
	struct ivm_dispatch_stats dispatch;
	struct ivm_pin_stats pin;	/* IVM_CAPTURE_MODE_PIN */
	/* ... and the helper's own count of what it did (nr 0: unknown). */
	struct ivm_helper_stats helper;
	uint64_t helper_busy;		/* polls that saw a helper holder */
	/* to-idle targets found from guest memory (last_ran.h) */
	uint64_t to_idle_resolved;
	uint64_t to_idle_retargeted;	/* ... not the task the poll saw */
	uint64_t to_idle_unresolved;	/* none found: the guess, or nothing */
	/* from-idle targets gone before seen, named from guest memory */
	uint64_t from_idle_resolved;
	uint64_t from_idle_unresolved;
	uint64_t retries;		/* discarded idle captures read again */
	uint64_t torn_reads;		/* looks a switch cut through */
	struct ivm_idle_stats idle;	/* idle periods and host events */
	uint64_t periods_written;	/* IDLE_PERIOD records */
	bool tracefs_mounted;		/* sched source: we mounted tracefs */
	uint64_t trace_records;		/* sched source: host records read */
	enum ivm_idle_source idle_source;	/* the one that ran */
	bool realtime;			/* ran at SCHED_FIFO priority */
	/* User objects met, and their CFI rows (profile/uobjects.h). */
	struct ivm_uobjects_stats objects;
	struct ivm_switch_sampler_stats switches;	/* switch_every */
	char end_reason[128];		/* "duration", "interrupted", ... */
	/* Per --label, in order: counts and why the last "?" was. */
	struct ivm_label_stats labels[IVM_LABELS_MAX];
	const char *label_why[IVM_LABELS_MAX];	/* static, or NULL */
};

const char *ivm_idle_source_name(enum ivm_idle_source source);

const char *ivm_capture_mode_name(enum ivm_capture_mode mode);

/*
 * Profile guest into writer until a stop condition.  *stop is polled (set
 * it from a signal handler).  The writer is flushed at least once a second
 * and finished (END record) before returning, even on error; the caller
 * keeps ownership and must not use it afterwards (nor the writers
 * next_window gave).  Returns an error only
 * when profiling could not start or the file could not be written; the
 * guest going away is a normal end (result->end_reason says so).
 */
struct ivm_error *ivm_profile_guest(struct ivm_guest *guest,
				    const struct ivm_profiler_config *config,
				    struct ivm_profile_writer *writer,
				    volatile sig_atomic_t *stop,
				    struct ivm_profiler_result *result);

#endif /* IVM_PROFILER_H */
