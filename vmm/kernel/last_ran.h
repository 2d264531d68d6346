/* SPDX-License-Identifier: MIT */
/*
 * last_ran: which guest task ran last on a CPU that is now idle.
 *
 * Why: the dispatch monitor sees `current` only when it polls (about once a
 * millisecond).  A task that wakes, runs for less than that and blocks again
 * (a timer loop, a dispatcher handing work over) is often gone before the
 * poll: the poll then sees the CPU idle, and the last task it saw there is
 * not the one that went to idle.  Left alone, to-idle samples under-count
 * exactly the short-running threads the method is meant to catch.
 *
 * How: the scheduler stamps sched_entity.exec_start with the run queue's
 * clock each time it accounts a running task, last when the task is taken
 * off the CPU (dequeue for a task that blocks, put_prev for one that is
 * preempted; CFS and RT alike).  Among the tasks whose `cpu` is the idle
 * CPU, the one with the greatest exec_start is the one that ran there last.
 * The run-queue clock is per CPU, so only tasks of that CPU are compared.
 *
 * The candidates are the guest's threads from a task-list walk redone at
 * most every IVM_LAST_RAN_REFRESH_NS; one lookup is one batched physical
 * read of one piece of each candidate, from thread_info.cpu to
 * sched_info.last_arrival when that fits in 4 KiB (task_structs are in the
 * direct map; else two pieces), or of the candidates that ran lately only
 * (see IVM_LAST_RAN_HOT_NS).  A thread created since the last walk is
 * not a candidate yet.
 *
 * Limits, by design: a task that went to idle on CPU X and has since been
 * woken onto another CPU has task->cpu of that CPU, so it is no longer a
 * candidate for X, and an earlier task may be named.  Every value read is
 * guest-controlled; the answer is only a task_struct address from the list,
 * and the capture that follows validates its target as always.
 */
#ifndef IVM_LAST_RAN_H
#define IVM_LAST_RAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/gmem.h"
#include "kernel/kernel_layout.h"

#define IVM_LAST_RAN_REFRESH_NS 1000000000ull
/*
 * Forks: a task created and gone between two walks is never a candidate,
 * and the task that ran before it on its CPU would be named in its place
 * (seen on web01 with a program forking 200 children a second: the
 * servers' to-idle counts above the guest's own).  The kernel's count of
 * forks (total_forks) is read with every batch; when it moved since the
 * walk, the candidates are walked again (at most every
 * IVM_LAST_RAN_STALE_NS) and, if it moved again, a lookup that no exact
 * stamp answers fails rather than name an older task.  Under a fork storm
 * fewer transitions are named, never wrong ones.
 *
 * Such a refusal is of one CPU only, when its counts can tell (a fork
 * storm on web01 refused every CPU's lookups: 5,029 in 15 s).  Each full
 * read takes each CPU's count of switch-ins (rq_sched_info.pcount) before
 * the tasks and again after them, then its run-queue clock.  From one
 * full read to the next, the switch-ins of the tasks that stayed on the
 * CPU (same cpu and se.nr_migrations at both, their pcount's rise) are
 * known to be the CPU's own; when they make up the CPU's whole rise, no
 * task the walk missed was switched in there.  Else every switch-in up to
 * the CPU's clock read after the counts may have been one, and the CPU's
 * clean_from moves there: a lookup that needs no switch-in after it
 * (first task or runs since a clock not before it; a latest task stamped
 * after it) is answered, the others refused as before.  Counts read at
 * different times only make the rise look bigger (the CPU's counts
 * bracket the tasks'), and a task that changed CPU counts for no CPU: each
 * error refuses, none names.
 */
#define IVM_LAST_RAN_STALE_NS 50000000ull
/*
 * Hot reads: a task's words change only when it is switched in, while it
 * runs, and when it is woken onto another CPU (cpu, and exec_start reset
 * by CFS), so reading the tasks that do not run again and again is most
 * of a lookup's cost for nothing (a piece a task: a page pinned each).
 * With the run queues' counts of switch-ins (rq_sched_info.pcount,
 * CONFIG_SCHEDSTATS), a lookup reads only the tasks switched in or running
 * within IVM_LAST_RAN_HOT_NS, and the CPUs' counts after them.  Those
 * counts, less their sum read before the last full read, are every
 * switch-in since; the candidates' own counts, as last read, less theirs
 * at that read, are those we saw.  Equal, every switch-in since was a
 * candidate's and came before its last read: what every candidate showed
 * then still stands but for a task woken onto another CPU and not yet run
 * (the earlier CPU and exec_start kept: what a lookup asks of a task that
 * ran, not of one still waiting).  Unequal (a task out of the hot set
 * ran, one forked or exited), the same lookup reads all candidates, as
 * without the counts.  So a hot read answers as a full read would, but
 * for a task woken and not yet run.
 */
#define IVM_LAST_RAN_HOT_NS 1000000000ull

struct ivm_last_ran;

/*
 * For the guest of layout and gmem (borrowed; they must outlive it).
 * IVM_ERROR_NOT_FOUND when the kernel's task_struct has no se.exec_start
 * (or its BTF does not say where).
 */
struct ivm_error *ivm_last_ran_create(const struct ivm_kernel_layout *layout,
				      struct ivm_gmem *gmem,
				      struct ivm_last_ran **ret);
void ivm_last_ran_destroy(struct ivm_last_ran *lr);

/*
 * Hold what the lookups read until the release: each lookup reads the
 * candidates' words from the guest (one batch, a system call and a page
 * pinned per candidate on the process backend), and the profiler makes up
 * to three lookups per look at the guest, of both vCPUs, whose answers
 * belong to the moment of that look anyway.  Held, the first lookup reads
 * every word of all candidates, and the later ones (and marks) use them.
 * Not nested; a refresh of the candidates drops what was held.
 */
void ivm_last_ran_hold(struct ivm_last_ran *lr);
void ivm_last_ran_release(struct ivm_last_ran *lr);

/* A count or an epoch not known. */
#define IVM_LAST_RAN_UNKNOWN UINT64_MAX

/*
 * Mark guest CPU cpu, seen idle at this look with run-queue clock clock:
 * keep each thread's switch-in count (sched_info.pcount) as the hold read
 * it, for ivm_last_ran_first_since() of that idle period and for
 * ivm_last_ran_window() from a look of the same stretch of idle.  epoch is
 * the caller's name for that stretch (the profiler: the idle task's switch
 * count, which moves when the CPU leaves idle; IVM_LAST_RAN_UNKNOWN: none).
 * Only from what the current hold has read already (a look that read the
 * stamps anyway, such as the one that opened the period): never a read of
 * its own, so a look that needs no stamps costs nothing more.
 * Nothing when there is nothing held, no pcount, or no memory; a refresh
 * of the candidates voids the marks.
 */
void ivm_last_ran_mark(struct ivm_last_ran *lr, unsigned int cpu,
		       uint64_t clock, uint64_t epoch);

/*
 * The task that ran last on guest CPU cpu, which must be idle now, in *ret,
 * leaving out the threads of process skip_tgid (idlevm's own helper; 0:
 * none).  now_ns (monotonic) paces the refresh of the candidates.
 * IVM_ERROR_NOT_FOUND when no candidate is on that CPU, or when one runs
 * there (the CPU left idle since: running_refused); IVM_ERROR_GONE when
 * the guest is.
 */
struct ivm_error *ivm_last_ran_find(struct ivm_last_ran *lr, unsigned int cpu,
				    int32_t skip_tgid, uint64_t now_ns,
				    uint64_t *ret);

/*
 * The same, exact when it can be: clock is cpu's run-queue clock read now,
 * while the CPU idles.  A task that blocks stamps se.exec_start with the
 * clock of the switch, and an idle CPU's clock stands still until
 * something schedules there; so a task whose exec_start equals clock went
 * to idle on cpu at that switch, even if it was woken onto another CPU
 * since (its cpu field moved: ivm_last_ran_find alone would name an
 * earlier task).  The clock moves on while the CPU idles (a tick, a
 * wakeup queued elsewhere), but idle_stamp, cpu's rq->idle_stamp read now
 * (0: unknown), keeps the clock of the switch: a task stamped with either
 * is the one.  Without such a task, as ivm_last_ran_find.  When several
 * of cpu's tasks have the stamp (a clock that stood still over their
 * runs) and their arrivals do not tell the last, IVM_ERROR_NOT_FOUND
 * (counted as tied_refused): any of them, or the latest, is a guess; so
 * when one of them is running (the clock given is of a switch in).
 */
struct ivm_error *ivm_last_ran_find_at(struct ivm_last_ran *lr,
				       unsigned int cpu, int32_t skip_tgid,
				       uint64_t clock, uint64_t idle_stamp,
				       uint64_t now_ns, uint64_t *ret);

/*
 * The first task switched in on guest CPU cpu after its run-queue clock
 * read since (rq->clock, read while the CPU was idle: see
 * ivm_kernel_cpu_rq_clock_va): among the CPU's tasks, the one whose
 * sched_info.last_arrival is the smallest above since.  This names the
 * from-idle task of an idle period after the fact.
 *
 * A task switched in again since has a later arrival: the first task, cut
 * short by a wakeup it caused (a block-I/O kworker it woke, the other end
 * of a pipe) and switched back in, shows its second arrival, and the
 * smallest arrival is the task that cut in.  On web01 that was over a
 * quarter of php-fpm's from-idle periods when looked at late.  The CPU's
 * mark (ivm_last_ran_mark) tells them apart: when the task of the
 * smallest arrival was switched in once since the mark and exactly one
 * other task of the window more than once, that one ran before it, and is
 * the answer.  A mark older than since, or taken after the first arrival,
 * is not used.  Still wrong when the task switched in twice ran its first
 * time on another CPU (migrated here since), and blind to two such tasks.
 *
 * *arrival (when not NULL) is the smallest arrival above since: when the
 * CPU left idle, exactly unless the task that did was switched in again
 * since (then later).
 *
 * IVM_ERROR_NOT_FOUND when the kernel has no sched_info
 * (CONFIG_SCHED_INFO) or no task arrived; IVM_ERROR_GONE when the guest is
 * gone.
 */
struct ivm_error *ivm_last_ran_first_since(struct ivm_last_ran *lr,
					   unsigned int cpu, int32_t skip_tgid,
					   uint64_t since, uint64_t now_ns,
					   uint64_t *ret, uint64_t *arrival);

/* One task's last run on a CPU, as the scheduler stamped it. */
struct ivm_last_ran_run {
	uint64_t task;		/* task_struct address */
	int32_t tgid;
	uint64_t arrival;	/* sched_info.last_arrival: switched in */
	uint64_t end;		/* se.exec_start: last accounted (switched out) */
	bool on_cpu;		/* running now: end is not final */
	/*
	 * Times switched in since the window began, from the CPU's mark;
	 * IVM_LAST_RAN_UNKNOWN without one (see ivm_last_ran_window).
	 */
	uint64_t arrivals;
};

/*
 * Every task of guest CPU cpu that ran there after its run-queue clock read
 * since (arrived, or was still accounted, after it), unsorted, at most max
 * into runs, their number in *nr (threads of skip_tgid left out).  Each
 * task shows only its last run.  Errors as ivm_last_ran_first_since().
 *
 * When the CPU was idle at since and its mark was taken in that same
 * stretch of idle (the mark's epoch is epoch, its clock not after since),
 * each run also says how often its task was switched in since: an idle
 * CPU switches nothing in, so the switch-ins counted from the mark are
 * those of the window.  That tells a task that ran twice, whose first run
 * its stamps hide.  Else, or with epoch IVM_LAST_RAN_UNKNOWN, arrivals is
 * IVM_LAST_RAN_UNKNOWN.
 */
struct ivm_error *ivm_last_ran_window(struct ivm_last_ran *lr, unsigned int cpu,
				      int32_t skip_tgid, uint64_t since,
				      uint64_t epoch, uint64_t now_ns,
				      struct ivm_last_ran_run *runs,
				      size_t max, size_t *nr);

/* What the lookups did, about forks too (see IVM_LAST_RAN_STALE_NS). */
struct ivm_last_ran_stats {
	uint64_t exact;		/* to-idle lookups answered by a stamp */
	uint64_t latest;	/* ... by the CPU's latest task instead */
	uint64_t walks;		/* task-list walks, all */
	uint64_t stale_walks;	/* ... of them because tasks forked */
	uint64_t walk_tasks;	/* tasks the walks met */
	uint64_t walk_reads;	/* reads they took (ivm_gmem_backend_calls) */
	uint64_t stale_refused;	/* to-idle lookups refused: forks since the walk */
	uint64_t stale_refused_first;	/* ... first task since, refused */
	uint64_t stale_refused_window;	/* ... runs of a window, refused */
	uint64_t stale_local;	/* lookups answered by the CPU's counts */
	uint64_t tied_refused;	/* to-idle: tasks tied on the switch's stamp */
	uint64_t running_refused; /* ... no stamp, and the CPU runs again */
	uint64_t full_reads;	/* batches of every candidate */
	uint64_t hot_reads;	/* batches of the hot ones that stood */
	uint64_t hot_misses;	/* ... that did not: a full read followed */
};

const struct ivm_last_ran_stats *ivm_last_ran_stats(const struct ivm_last_ran *lr);

#endif /* IVM_LAST_RAN_H */
