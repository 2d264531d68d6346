/* SPDX-License-Identifier: MIT */
/*
 * thread_walk: the guest's threads, a few at a time.
 *
 * Why: ivm_kernel_task_list() reads every thread in one go.  On a guest
 * with ten thousand threads that is tens of thousands of guest reads, tens
 * of milliseconds a poll of the profiler cannot spend at once.  This walker
 * goes the same way (init_task.tasks for the processes, each process's
 * thread list) but stops after a budget of threads and goes on from there
 * at the next call, so one sweep over every thread is spread over many
 * polls, each costing at most a budget's worth of reads.
 *
 * Going on from a position kept between two calls, on a guest that runs
 * meanwhile: the thread the walker stood on may have exited, and its
 * task_struct been freed or even reused for a new task.  So the walker
 * reads the position again before following a pointer out of it, and goes
 * on only when it is the same thread (pid and tgid) still linked (an
 * unlinked list node has its prev poisoned by list_del_rcu, which is no
 * kernel address).  Otherwise it falls back to the process's leader and
 * walks that process's threads again from its head (threads met again are
 * reported again: callers de-duplicate by address); when the leader is gone
 * too, the sweep walks again from init_task.  A sweep that restarts too
 * often, meets more than max_tasks threads (a loop, a hostile list) or
 * cannot read init_task ends truncated: the caller must not conclude from
 * it that an unreported thread is gone.
 *
 * Cost: one read per thread (the span of task_struct holding everything
 * read here, links included), plus at most two per call and one per
 * process whose threads were walked.  Every pointer followed is checked to
 * be an 8-byte aligned kernel address first; nothing else read from the
 * guest is trusted either (comm is NUL-terminated here).
 */
#ifndef IVM_THREAD_WALK_H
#define IVM_THREAD_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/btf.h"

/* Upper bound of the span read per thread; a larger layout is refused. */
#define IVM_THREAD_WALK_MAX_SPAN 4096
/* Restarts from init_task one sweep may take before it ends truncated. */
#define IVM_THREAD_WALK_MAX_RESTARTS 8

/* Where the walker finds what it reads, in bytes from each struct. */
struct ivm_thread_walk_offsets {
	uint32_t tasks;			/* task_struct.tasks (list_head) */
	uint32_t pid, tgid;
	uint32_t comm, comm_size;
	uint32_t mm;
	uint32_t signal;
	/* thread_node + signal_struct.thread_head, or IVM_KOFF_NONE and
	 * the thread_group ring of older kernels. */
	uint32_t thread_node;
	uint32_t signal_thread_head;
	uint32_t thread_group;
	uint32_t start_time;		/* optional: IVM_KOFF_NONE */
	uint32_t list_next, list_prev;	/* in struct list_head */
};

/*
 * From the kernel's offsets and its BTF (for list_head.prev and
 * task_struct.start_time, which ivm_kernel_offsets does not carry).
 */
struct ivm_error *ivm_thread_walk_offsets_init(
	const struct ivm_btf *btf, const struct ivm_kernel_offsets *koff,
	struct ivm_thread_walk_offsets *ret);

/* One thread as the walker met it. */
struct ivm_walked_thread {
	uint64_t task;		/* task_struct address */
	int32_t pid, tgid;
	char comm[16];		/* NUL-terminated */
	uint64_t start_time;	/* ns since boot; 0 when unknown */
	bool kthread;		/* no mm */
};

enum ivm_thread_sweep {
	IVM_SWEEP_GOING,	/* the sweep goes on at the next call */
	IVM_SWEEP_COMPLETE,	/* it ended at init_task: every thread met */
	IVM_SWEEP_TRUNCATED,	/* it ended early (see the header) */
};

struct ivm_thread_walk_config {
	struct ivm_thread_walk_offsets off;
	uint64_t init_task;	/* run-time address of init_task */
	bool la57;		/* kernel addresses of 5-level paging */
	size_t max_tasks;	/* per sweep; 0: IVM_KERNEL_DEFAULT_MAX_TASKS */
};

struct ivm_thread_walk_stats {
	uint64_t sweeps_complete;
	uint64_t sweeps_truncated;
	uint64_t restarts;	/* walks again from init_task */
	uint64_t fallbacks;	/* walks again from a process's leader */
	uint64_t reads;		/* guest reads made */
};

struct ivm_thread_walk;

/*
 * A walker reading through reader (borrowed; it must outlive the walker).
 * IVM_ERROR_INVALID when the offsets span more than
 * IVM_THREAD_WALK_MAX_SPAN bytes.
 */
struct ivm_error *ivm_thread_walk_create(const struct ivm_thread_walk_config *cfg,
					 const struct ivm_kmem_reader *reader,
					 struct ivm_thread_walk **ret);
void ivm_thread_walk_destroy(struct ivm_thread_walk *w);

/*
 * Meet at most max more threads of the current sweep (a new one starts
 * after the last ended), in out[0..*nr), and say in *ret whether the sweep
 * ended.  Idle tasks (pid 0) are not reported.  Never fails: a guest that
 * cannot be read ends the sweep truncated.
 */
void ivm_thread_walk_step(struct ivm_thread_walk *w,
			  struct ivm_walked_thread *out, size_t max,
			  size_t *nr, enum ivm_thread_sweep *ret);

const struct ivm_thread_walk_stats *
ivm_thread_walk_stats(const struct ivm_thread_walk *w);

#endif /* IVM_THREAD_WALK_H */
