/* SPDX-License-Identifier: MIT */
/*
 * last_ran's state, shared by its lookups (last_ran.c) and its reads of
 * the candidates (last_ran_read.c: walks, full and hot reads).  Not for
 * use outside those two files.
 */
#ifndef IVM_LAST_RAN_INT_H
#define IVM_LAST_RAN_INT_H

#include "base/bytes.h"
#include "kernel/last_ran.h"

/*
 * More than any task_struct span we read; bounds a hostile layout.  Also
 * how far the sched_info words may be from the rest to come in the same
 * piece: what a piece costs is mostly its pages pinned and its first cold
 * cache line, not its length.  On web01 (Linux 6.1, 2.2 KiB from
 * thread_info.cpu to sched_info.last_arrival) reading all threads' stamps
 * took 23% of idlevm's CPU as one piece per task and 27% as two small ones
 * (perf, same guest and load).
 */
#define MAX_SPAN 4096
/* More CPUs than a mark is kept for: bounds what a guest can make us hold. */
#define MAX_MARK_CPUS 1024

struct candidate {
	uint64_t task;
	int32_t tgid;		/* as of the walk */
	uint64_t pa;
	bool mapped;		/* pa is valid, span contiguous */
	bool ok;		/* read in this lookup */
	/* Split layout only: the sched_info words' own piece. */
	uint64_t si_pa;
	bool si_mapped;
	bool si_ok;
	/* Hot reads (last_ran.h): pcount as last read, and at the full read. */
	bool pc_ok;
	bool in_hot;		/* read by the hot read under way */
	uint64_t seen_pc, base_pc;
	/* At the full read base_pc is of: its cpu and se.nr_migrations. */
	uint32_t base_cpu;
	uint64_t base_mig;
	uint64_t ran_at;	/* now_ns when last seen switched in, or running */
};

/*
 * A CPU's mark: each candidate's switch-in count (sched_info.pcount) as
 * read at a look that saw the CPU idle, in candidate order, good for the
 * candidates of walk gen only.  UNKNOWN where the word was not read.
 */
#define UNKNOWN IVM_LAST_RAN_UNKNOWN
struct cpu_mark {
	uint64_t at;		/* the CPU's run-queue clock; 0: none */
	uint64_t epoch;		/* the caller's, of that stretch of idle */
	uint64_t gen;
	uint64_t *pcount;
	size_t cap;
};

struct ivm_last_ran {
	const struct ivm_kernel_layout *layout;
	struct ivm_gmem *gmem;
	uint32_t lo, span;		/* of task_struct read per task */
	uint32_t off_cpu, off_on_cpu, off_exec_start, off_mig;
	/*
	 * The sched_info words (last_arrival, pcount): in the span when they
	 * fit there with the rest (one piece per task), else in a piece of
	 * their own, [si_lo, si_lo + si_span) of the task (si_split).  Their
	 * offsets are from the start of whichever piece holds them;
	 * off_arrival IVM_KOFF_NONE: the kernel has no sched_info.
	 */
	bool si_split;
	uint32_t si_lo, si_span;
	uint32_t off_arrival, off_pcount;
	uint8_t *si_buf;		/* split: nr * si_span */
	struct candidate *cand;
	size_t nr, cap;
	uint8_t *buf;			/* nr * span */
	struct ivm_gmem_piece *pieces;
	size_t *piece_cand;
	bool refreshed;
	uint64_t refreshed_at;
	uint64_t gen;			/* walks so far, named by marks */
	/* Held (ivm_last_ran_hold): whether the hold has read them. */
	bool held, fresh;
	struct cpu_mark *marks;
	size_t nr_marks;
	/*
	 * The kernel's count of forks (total_forks), read before each walk
	 * and with every batch: when it moved, a task the walk never saw
	 * may be the one asked for (a child forked and gone within a walk
	 * interval ran there, and an older candidate would be named).
	 */
	bool has_forks;
	uint64_t forks_pa;
	bool forks_walk_ok, forks_ok;
	uint64_t forks_walk, forks_now;
	uint8_t forks_buf[8];
	/*
	 * Hot reads (last_ran.h): each CPU's rq_sched_info.pcount; their sum
	 * before the last full read of these candidates (base_ok), and the
	 * candidates' switch-ins seen since (seen_pc - base_pc, summed).
	 */
	bool has_rq_pc;
	unsigned int nr_rq;
	uint64_t *rq_pc_pa;
	uint8_t *rq_pc_buf;
	bool base_ok;
	uint64_t base_sum, seen_sum;
	/*
	 * Forks seen one CPU at a time (last_ran.h): each CPU's count after
	 * the tasks (rq_end) and its clock after that, as read by the last
	 * full read; its count before the tasks at the full read before
	 * (rq_base: base_ok) and the clock then (clock_prev); and the clock
	 * after which every switch-in there was a candidate's (clean_from:
	 * 0 all since the walk, UNKNOWN none known).  has_local: the clocks
	 * and se.nr_migrations are there to read.
	 */
	bool has_local;
	uint64_t *rq_clock_pa;
	uint8_t *rq_end_buf, *rq_clock_buf;
	uint64_t *rq_base, *clock_prev, *clean_from;
	struct ivm_last_ran_stats stats;
};

/* Candidate i's sched_info words as read (off_arrival, off_pcount), or NULL. */
static inline const uint8_t *si_words(const struct ivm_last_ran *lr, size_t i)
{
	if (lr->off_arrival == IVM_KOFF_NONE)
		return NULL;
	if (lr->si_split)
		return lr->cand[i].si_ok ? lr->si_buf + i * lr->si_span : NULL;
	return lr->cand[i].ok ? lr->buf + i * lr->span : NULL;
}

/* Whether candidate i, as read, is on a CPU (running, or switching out). */
static inline bool running(const struct ivm_last_ran *lr, size_t i)
{
	return lr->off_on_cpu != IVM_KOFF_NONE && lr->cand[i].ok &&
	       ivm_le32(lr->buf + i * lr->span + lr->off_on_cpu);
}

/* The count of forks and the CPUs' counts of switch-ins, located once. */
void last_ran_locate_counts(struct ivm_last_ran *lr);
void last_ran_free_counts(struct ivm_last_ran *lr);
/*
 * Whether no task the walk missed was switched in on cpu after its clock
 * read after: forks since the walk or not (last_ran.h).
 */
bool last_ran_clean_after(const struct ivm_last_ran *lr, unsigned int cpu,
			  uint64_t after);
/* Walk the guest's threads again: the candidates (last_ran_read.c). */
struct ivm_error *last_ran_refresh(struct ivm_last_ran *lr, uint64_t now_ns);
/*
 * Every candidate's words, read now: the hot ones alone when that stands,
 * else all (last_ran.h).  While held, what the hold read already stands.
 */
struct ivm_error *last_ran_read_all(struct ivm_last_ran *lr, uint64_t now_ns);

#endif /* IVM_LAST_RAN_INT_H */
