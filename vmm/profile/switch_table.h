/* SPDX-License-Identifier: MIT */
/*
 * switch_table: the guest threads the switch sampler watches, and what it
 * knows of each: its scheduler counters at the first and the last read,
 * whether its count of context switches crossed a multiple of N since (a
 * switch sample is due), the counters at its last switch sample, and
 * whether it is still there.  It decides, the sampler acts: no guest access
 * here, so unit tests drive it with synthetic threads and counters.
 *
 * Threads come from the walker (vmm/kernel/thread_walk.h): each is met at
 * least once per sweep; one not met by a complete sweep is gone.  Counters
 * come from reads of a batch of threads (vmm/kernel/task_sched.h): the
 * batches take the watched threads in turn, so each read costs at most the
 * batch size whatever the number of threads, and every thread is read once
 * per ceil(threads / batch) reads.
 *
 * Identity: a thread is its task_struct address, its pid and (when the
 * kernel has it) its start_time.  A read that shows another pid or start
 * time at the address means the thread exited and its task_struct was
 * reused: the thread is gone, and the new one is met by a later sweep.
 *
 * Totals: the counters at the last read minus those at the first, or minus
 * zero for a thread born after the run began (its whole life is in the
 * run).  Counts that go back (a hostile guest) are taken as no change.
 *
 * Indexes name threads until ivm_switch_table_compact(), which drops the
 * gone threads whose last record was written.
 */
#ifndef IVM_SWITCH_TABLE_H
#define IVM_SWITCH_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "kernel/task_sched.h"
#include "kernel/thread_walk.h"
#include "profile/profile_file.h"

/* The counters a thread has, as totals or deltas. */
struct ivm_switch_counts {
	uint64_t nvcsw, nivcsw;
	uint64_t run_delay;	/* ns */
	uint64_t cpu;		/* ns */
};

struct ivm_switch_thread {
	uint64_t task;
	int32_t pid, tgid;
	char comm[16];
	uint64_t start_time;
	uint32_t flags;			/* IVM_THREAD_BORN, IVM_THREAD_GONE */
	/* The caller's: where to read it (guest physical, when read_phys). */
	uint64_t read_base;
	bool read_phys;
	bool read;			/* read at least once */
	bool run_delay_known;
	struct ivm_switch_counts base, last, at_sample;
	uint64_t first_ns, last_ns;
	uint64_t met_sweep;		/* the last sweep that met it */
	bool due;			/* a switch sample is due */
	bool on_cpu;			/* at the last read */
	uint32_t samples;		/* switch samples taken of it */
	bool dirty;			/* totals moved since its last record */
	bool recorded_gone;		/* its GONE record is written */
};

struct ivm_switch_table_stats {
	uint64_t threads_met;		/* distinct threads ever watched */
	uint64_t unwatched;		/* met when the table was full */
	uint64_t crossings;		/* multiples of N crossed */
	uint64_t coalesced;		/* ... while a sample was still due */
	uint64_t gone;			/* threads that left */
	uint64_t reused;		/* ... seen as another thread's task */
	uint64_t backwards;		/* reads whose counts went back */
};

struct ivm_switch_table;

/*
 * Sample every `every` switches (> 0); watch at most max_threads threads
 * (0: IVM_KERNEL_DEFAULT_MAX_TASKS).
 */
struct ivm_error *ivm_switch_table_create(uint32_t every, size_t max_threads,
					  struct ivm_switch_table **ret);
void ivm_switch_table_destroy(struct ivm_switch_table *t);

/* Number of threads (watched and gone), and one by index. */
size_t ivm_switch_table_nr(const struct ivm_switch_table *t);
struct ivm_switch_thread *ivm_switch_table_get(struct ivm_switch_table *t,
					       size_t idx);

/*
 * A sweep (numbered by the caller, increasing) met thread w.  A thread
 * already watched at that address gets its comm refreshed; another thread
 * at a known address makes the old one gone.  born: the thread began after
 * the run did (its totals count from zero).  *ret is its index, or -1 when
 * the table is full; *added says whether it is new.
 */
struct ivm_error *ivm_switch_table_meet(struct ivm_switch_table *t,
					const struct ivm_walked_thread *w,
					uint64_t sweep, bool born, long *ret,
					bool *added);

/* A complete sweep numbered sweep ended: who it did not meet is gone. */
void ivm_switch_table_sweep_done(struct ivm_switch_table *t, uint64_t sweep);

/*
 * The next threads to read, in turn: at most max watched threads' indexes
 * into idx, their number returned.  All watched threads when max is at
 * least their number.
 */
size_t ivm_switch_table_next_batch(struct ivm_switch_table *t, size_t *idx,
				   size_t max);

/*
 * A read of thread idx at now_ns.  Returns false when it showed another
 * thread (the thread is gone); otherwise updates its last counters and
 * marks a switch sample due when its switches crossed a multiple of N
 * since the last read.
 */
bool ivm_switch_table_update(struct ivm_switch_table *t, size_t idx,
			     const struct ivm_task_sched *s, uint64_t now_ns);

/* The thread could not be read: it is gone. */
void ivm_switch_table_lost(struct ivm_switch_table *t, size_t idx);

/*
 * A switch sample of thread idx was kept: its counters' deltas since its
 * previous one (or its first read) into out (IVM_COUNTER_* ids, at most
 * IVM_COUNTER_NR_IDS - 1), their number returned; no longer due.
 */
size_t ivm_switch_table_sampled(struct ivm_switch_table *t, size_t idx,
				struct ivm_counter *out);

/*
 * Thread idx's totals as a THREAD record (counters into out, which must
 * hold IVM_COUNTER_NR_IDS - 1).  final adds IVM_THREAD_FINAL.  Marks it
 * clean (and, gone, recorded as such).
 */
void ivm_switch_table_record(struct ivm_switch_table *t, size_t idx,
			     bool final, struct ivm_counter *out,
			     struct ivm_thread_record *ret);

/*
 * A new window of the run: every thread's totals, samples and born flag
 * count again from its last read.
 */
void ivm_switch_table_rebase(struct ivm_switch_table *t);

/* Drop gone threads whose GONE record was written; indexes change. */
void ivm_switch_table_compact(struct ivm_switch_table *t);

/* Threads watched now (not gone). */
size_t ivm_switch_table_watched(const struct ivm_switch_table *t);

const struct ivm_switch_table_stats *
ivm_switch_table_stats(const struct ivm_switch_table *t);

#endif /* IVM_SWITCH_TABLE_H */
