/* SPDX-License-Identifier: MIT */
/*
 * The profiler: idle signal -> dispatch monitor -> capture -> profile
 * file, for one guest, as an object a loop steps (ivm_profiler_step), so
 * that one thread can run several guests with one wait over all of them.
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
 * Stop conditions: the duration, a stop request (Ctrl-C), or the guest
 * going away (shutdown, QEMU exit, libvirt destroy), each guest's own.
 * Whatever ends the run, every capture made so far is in the file and the
 * file gets its END record.
 */
#ifndef IVM_PROFILER_H
#define IVM_PROFILER_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "profile/capture.h"
#include "profile/uobjects.h"
#include "profile/capture_pin.h"
#include "profile/dispatch.h"
#include "profile/idle_gate.h"
#include "profile/idle_periods.h"
#include "kernel/guest.h"
#include "profile/profile_file.h"
#include "profile/stage_clock.h"
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
	/*
	 * Sched source: time QEMU's I/O calls too (disk_service.h).  Off by
	 * default: a host tracing any syscall event takes every syscall of
	 * every task through the tracepoints (about 140 ns more each,
	 * measured here), whatever the pid list.
	 */
	bool disk;
	/*
	 * Sched source under TCG: the idle gate decides in the host kernel
	 * which vCPU-thread sleeps wake the loop (idle_gate.h).  On by
	 * default; false: every sleep does.
	 */
	bool no_idle_gate;
	/*
	 * The most of a host core the run may take, in percent (0: no
	 * limit): above it the guest is watched only part of the time
	 * (cpu_budget.h) and the file says which part (STATS watched_ms).
	 */
	double cpu_budget;
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
	/*
	 * The helper session (borrowed): required by IVM_CAPTURE_MODE_PIN;
	 * in the other modes, when set, used only to have the helper read
	 * CFI the guest does not hold into its page cache (readahead).
	 */
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
	uint64_t paused_s;	/* seconds the guest was found not running */
	uint64_t poll_errors;
	uint64_t capture_errors;
	double elapsed_s;
	struct ivm_dispatch_stats dispatch;
	struct ivm_pin_stats pin;	/* with a helper session (config pin) */
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
	uint64_t mid_switch_looks;	/* vCPUs seen between rq->curr and current */
	/*
	 * Running targets read again because their live registers led the
	 * unwind nowhere (profiler_capture.c, LIVE_TRIES): the extra reads,
	 * the stacks whole after them, and those still cut at the last.
	 */
	uint64_t live_rereads;
	uint64_t live_rereads_mended;
	uint64_t live_rereads_failed;
	struct ivm_idle_stats idle;	/* idle periods and host events */
	uint64_t periods_written;	/* IDLE_PERIOD records */
	uint64_t periods_no_start;	/* ... rebuilt without a start */
	/* Of kept, stacks read after the task ran again (IVM_STACK_LATER). */
	uint64_t kept_later[IVM_SAMPLE_NR_KINDS];
	/* Samples written with their time value (sample.h IVM_COUNTER_*_NS). */
	uint64_t valued[IVM_SAMPLE_NR_KINDS];
	bool tracefs_mounted;		/* sched source: we mounted tracefs */
	uint64_t trace_records;		/* sched source: host records read */
	/* The loop's time by stage (stage_clock.h), at the end. */
	uint64_t stage_ns[IVM_STAGE_NR];
	uint64_t stage_reads[IVM_STAGE_NR];	/* guest memory reads */
	/* ... and of the host's side (host_sched.h) */
	uint64_t host_trace_records;
	enum ivm_idle_source idle_source;	/* the one that ran */
	bool realtime;			/* ran at SCHED_FIFO priority */
	/* User objects met, and their CFI rows (profile/uobjects.h). */
	struct ivm_uobjects_stats objects;
	/* The mappings of the processes captures met (capture.h). */
	struct ivm_capture_maps_stats maps;
	size_t procs;		/* processes said in the last window */
	struct ivm_switch_sampler_stats switches;	/* switch_every */
	uint64_t cpu_ns;		/* host CPU time its profiling took */
	/* The idle gate's counts, when it ran (idle_gate.h). */
	bool gated;
	struct ivm_idle_gate_stats gate;
	/* --cpu-budget: time watched (all of it without one), slices. */
	uint64_t watched_ns;
	uint64_t slices, watched_slices;
	char end_reason[128];		/* "duration", IVM_END_GONE, ... */
	/* Per --label, in order: counts and why the last "?" was. */
	struct ivm_label_stats labels[IVM_LABELS_MAX];
	const char *label_why[IVM_LABELS_MAX];	/* static, or NULL */
};

const char *ivm_idle_source_name(enum ivm_idle_source source);

const char *ivm_capture_mode_name(enum ivm_capture_mode mode);

/*
 * One guest's run as an object, for a loop that runs several (one thread,
 * one wait over all of them):
 *
 *	ivm_profiler_start(guest, cfg, writer, &result, &pr);
 *	while (ivm_profiler_step(pr, stop, &err))
 *		wait on ivm_profiler_pollfds(pr) until ivm_profiler_wake_at(pr)
 *	ivm_profiler_finish(pr);
 *
 * Guest, config and result are borrowed and must outlive pr; the writer
 * (and those next_window gives) belong to pr from start on, also when
 * start fails.  result->cpu_ns counts the calling thread's CPU time in
 * start, the steps and finish: what this guest costs the host.
 */
struct ivm_profiler;

struct ivm_error *ivm_profiler_start(struct ivm_guest *guest,
				     const struct ivm_profiler_config *config,
				     struct ivm_profile_writer *writer,
				     struct ivm_profiler_result *result,
				     struct ivm_profiler **ret);

/*
 * Do what is due now: read events or poll, capture, flush once a second,
 * rotate a window.  Returns false once the run is over (stop asked, the
 * duration reached, the guest gone: result->end_reason says which; or an
 * error in *err, which the caller owns).
 */
bool ivm_profiler_step(struct ivm_profiler *pr, bool stop,
		       struct ivm_error **err);

/*
 * Each step is charged the loop thread's CPU since the end of the last
 * step of any run (the wait and wakeup that led to it included).  A loop
 * that spends CPU on no run's behalf (looking for new domains, opening a
 * guest) calls this after it, so that no run is charged for it.
 */
void ivm_profiler_cpu_sync(void);

/*
 * End the run at its next step, for reason (copied): the guest's boot
 * ended (it rebooted, panicked, went away), so that no sample of the
 * next boot goes into this file.  The file's metadata says why
 * ("end_reason"), as it does when the run sees the guest go itself.
 */
void ivm_profiler_end(struct ivm_profiler *pr, const char *reason);

/*
 * During the current step of pr, ns of the thread's CPU time went to other
 * runs (stepped while pr waited for its helper): not pr's cost.
 */
void ivm_profiler_lend_cpu(struct ivm_profiler *pr, uint64_t ns);

/* When the next step is due (CLOCK_MONOTONIC ns) at the latest. */
uint64_t ivm_profiler_wake_at(const struct ivm_profiler *pr);

/*
 * The end_reason of a run whose QEMU went away, whichever read or call
 * found it first: a run that follows its guest waits for libvirt's word
 * on why (a save, a migration) when its run ended so.
 */
#define IVM_END_GONE "the guest went away"

/*
 * Most descriptors one guest's run waits on: its trace session's one
 * (an epoll instance over the host CPUs' buffers: trace_session.h).
 */
#define IVM_PROFILER_MAX_POLLFDS 1

/*
 * Descriptors whose readiness (POLLIN) makes a step due sooner: the sched
 * source's trace buffers; none for polling sources.  Copied into fds.
 */
size_t ivm_profiler_pollfds(const struct ivm_profiler *pr,
			    struct pollfd *fds, size_t max);

/*
 * What a wait found on the run's descriptors: fds[0..n) are those
 * ivm_profiler_pollfds() gave, in its order, after a poll() that returned
 * 0 or more (ivm_profiler_wait() returning true).  Given just before the
 * step, it spares that step the reads of the trace buffers poll found
 * empty (ivm_trace_session_polled); the step forgets it.
 */
void ivm_profiler_polled(struct ivm_profiler *pr, const struct pollfd *fds,
			 size_t n);

/* Whether the run wants real-time priority (the sched source, --realtime). */
bool ivm_profiler_wants_realtime(const struct ivm_profiler *pr);
/* Record that the run had it (result->realtime). */
void ivm_profiler_set_realtime(struct ivm_profiler *pr, bool on);

/*
 * End the run: final stats, END record, everything freed (pr too).
 * Returns the error of writing the file's end, if any.
 */
struct ivm_error *ivm_profiler_finish(struct ivm_profiler *pr);

/*
 * Sleep until until_ns, or until one of fds is readable (or a signal).
 * True when fds' revents are what a poll() found (for
 * ivm_profiler_polled): it ran and did not fail.
 */
bool ivm_profiler_wait(struct pollfd *fds, size_t nr, uint64_t until_ns);

/*
 * Real-time priority (SCHED_FIFO 1) for the calling thread, or back to
 * normal; says on stderr when it cannot.  Returns whether it is on.
 */
bool ivm_realtime(bool on);

#endif /* IVM_PROFILER_H */
