/* SPDX-License-Identifier: MIT */
/*
 * switch_sampler: context-switch sampling from the host (profile
 * --switch-every N).  For every guest thread, its scheduler's own counts
 * of voluntary and involuntary switches, its run-queue wait and its CPU
 * time are read from guest memory (vmm/kernel/task_sched.h); whenever its
 * count of switches crosses a multiple of N between two reads, its stack
 * is captured (consistent or discarded, vmm/profile/capture.h) as a sample
 * of kind IVM_SAMPLE_SWITCH carrying the counters' deltas since its
 * previous switch sample.  Every thread's totals over the run go to the
 * profile file as THREAD records: for the threads whose totals moved, at
 * each flush, and for all at the end.  Off-CPU profiling of the whole
 * guest, with no agent or tracer inside it.
 *
 * Cost, bounded per look whatever the number of threads:
 *  - a look every interval_ns reads the counters of at most `batch`
 *    threads, in turn (switch_table.h), in one batched guest read of a few
 *    pieces per thread: each thread is read every
 *    ceil(threads / batch) looks;
 *  - the task lists are walked `walk_budget` threads per look
 *    (vmm/kernel/thread_walk.h), a new sweep at most every sweep_ns: new
 *    threads are met within a sweep, and a thread a complete sweep did not
 *    meet is gone;
 *  - at most `captures` stacks per look; a sample due beyond that waits
 *    for the next look (counted as deferred).
 * Setup (create) and the end (end_window) read every thread once, in
 * batches, so the totals span the whole run (or window); a thread first
 * met after the first complete sweep was born during the run and counts
 * from zero.
 *
 * Where a thread is captured: a crossing is seen at the look after it.  A
 * thread on a CPU then has no saved stack: its sample waits for a look
 * that finds it off the CPU.  A runnable (preempted) thread is captured
 * where it was preempted.  The capture is the optimistic one, whatever
 * --capture says for idle samples: the target is off the CPU by
 * construction, and the read is validated by its switch counts and on_cpu.
 * So a sample shows the switch that crossed, or a later one of the same
 * thread when the look came after it: where blocks of one kind last
 * longer than another's, the look finds the thread in them more often,
 * and they weigh a little more than their count (lockstorm's three paths
 * share one duration distribution: t_64 finds its split within 2.5
 * points).
 *
 * What is lost, said in the stats: switches of a thread after its last
 * read when it exits; threads past the table's cap; threads born and gone
 * between two sweeps.
 */
#ifndef IVM_SWITCH_SAMPLER_H
#define IVM_SWITCH_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel/guest.h"
#include "profile/capture.h"
#include "profile/profile_file.h"

#define IVM_SWITCH_BATCH_DEFAULT	256
#define IVM_SWITCH_INTERVAL_DEFAULT_NS	5000000ull
#define IVM_SWITCH_WALK_BUDGET_DEFAULT	32
#define IVM_SWITCH_SWEEP_DEFAULT_NS	1000000000ull
#define IVM_SWITCH_CAPTURES_DEFAULT	8

struct ivm_switch_sampler_config {
	uint32_t every;			/* N > 0 */
	uint32_t batch;			/* 0: default */
	uint64_t interval_ns;		/* 0: default */
	uint32_t walk_budget;		/* 0: default */
	uint64_t sweep_ns;		/* 0: default */
	uint32_t captures;		/* per look; 0: default */
	size_t max_threads;		/* 0: IVM_KERNEL_DEFAULT_MAX_TASKS */
	int filter_pid;			/* guest tgid, or -1 */
	const char *filter_comm;	/* fnmatch pattern, or NULL */
	int32_t skip_tgid;		/* idlevm's own helper; 0: none */
	/*
	 * A kept switch sample, for the caller to write: cap->sample, its
	 * kind, time, vcpu and counters set (valid during the call).
	 */
	struct ivm_error *(*emit)(void *ctx, const struct ivm_capture *cap);
	void *emit_ctx;
};

struct ivm_switch_sampler_stats {
	uint64_t looks;
	uint64_t look_ns, look_max_ns;	/* host time spent in looks */
	uint64_t reads;			/* threads read */
	uint64_t read_batches;		/* batched guest reads */
	uint64_t read_failed;		/* threads that could not be read */
	uint64_t slow_reads;		/* threads read piece by piece */
	uint64_t crossings, coalesced;
	uint64_t captured;		/* kept */
	uint64_t discarded;		/* ran during the read */
	uint64_t capture_failed;
	uint64_t deferred;		/* waited past the per-look cap */
	uint64_t waited_on_cpu;		/* due, but on a CPU at the look */
	uint64_t watched, threads_met, unwatched, gone;
	uint64_t sweeps, sweeps_truncated, walk_restarts, walk_reads;
	uint64_t records;		/* THREAD records written */
};

struct ivm_switch_sampler;

/*
 * For guest (borrowed, with engine and writer: they must outlive the
 * sampler).  Walks the task lists and reads every thread once (the
 * totals' start).  IVM_ERROR_NOT_FOUND when the kernel lacks what it needs
 * (se.sum_exec_runtime); IVM_ERROR_GONE when the guest is.
 */
struct ivm_error *ivm_switch_sampler_create(
	struct ivm_guest *guest, struct ivm_capture_engine *engine,
	struct ivm_profile_writer *writer,
	const struct ivm_switch_sampler_config *cfg,
	struct ivm_switch_sampler **ret);
void ivm_switch_sampler_destroy(struct ivm_switch_sampler *s);

/* When the next look is due (monotonic ns). */
uint64_t ivm_switch_sampler_due(const struct ivm_switch_sampler *s);

/*
 * A look, if due at now_ns: walk on, read a batch, capture what is due.
 * Errors: the guest gone, the file unwritable, no memory.
 */
struct ivm_error *ivm_switch_sampler_look(struct ivm_switch_sampler *s,
					  uint64_t now_ns);

/* THREAD records of the threads whose totals moved (at each flush). */
struct ivm_error *ivm_switch_sampler_flush(struct ivm_switch_sampler *s);

/*
 * The end of the run, or of a window of it (profile --window): read every
 * thread once more (not an error if the guest is gone: the totals then
 * end at the last reads) and write its final record into the current
 * file.  No look after it but in a window begun after it.
 */
struct ivm_error *ivm_switch_sampler_end_window(struct ivm_switch_sampler *s);

/*
 * The next window writes into writer (borrowed, like the first): every
 * thread's totals, samples and born flag start again from the reads of the
 * window that ended, so each window's file holds its own window's totals.
 */
void ivm_switch_sampler_begin_window(struct ivm_switch_sampler *s,
				     struct ivm_profile_writer *writer);

/* The stats so far. */
void ivm_switch_sampler_stats(const struct ivm_switch_sampler *s,
			      struct ivm_switch_sampler_stats *ret);

#endif /* IVM_SWITCH_SAMPLER_H */
