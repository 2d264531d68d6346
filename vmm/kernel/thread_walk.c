// SPDX-License-Identifier: MIT
/* The guest's threads a few at a time; see thread_walk.h for why and how. */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/kernel_layout.h"
#include "kernel/thread_walk.h"

enum walk_state {
	W_NEW_SWEEP,	/* read init_task, a sweep begins */
	W_RESTART,	/* read init_task, the sweep goes on from there */
	W_NEXT_PROCESS,	/* the leader's threads are done: the next process */
	W_THREADS,	/* the next thread of the leader's process */
};

/* A thread the walker stands on: which one it was, to tell it again. */
struct position {
	uint64_t task;
	int32_t pid, tgid;
};

struct ivm_thread_walk {
	struct ivm_thread_walk_config cfg;
	struct ivm_kmem_reader reader;
	uint32_t lo, span;		/* of task_struct read per thread */
	uint32_t link;			/* thread_node or thread_group */
	uint8_t *buf;			/* span of `at` when fresh */
	uint64_t at;			/* the task buf holds, or 0 */
	enum walk_state state;
	struct position leader, thread;
	uint64_t thread_head;		/* list head of the leader's threads */
	uint64_t first_node;		/* its first node, read from the head */
	bool from_head;			/* the next thread is first_node's */
	unsigned int leader_passes;
	size_t met;			/* threads met this sweep */
	unsigned int restarts;		/* this sweep */
	struct ivm_thread_walk_stats stats;
};

struct ivm_error *ivm_thread_walk_offsets_init(
	const struct ivm_btf *btf, const struct ivm_kernel_offsets *koff,
	struct ivm_thread_walk_offsets *ret)
{
	const struct ivm_btf_field_spec spec[] = {
		{ "list_head", "prev", 8,
		  offsetof(struct ivm_thread_walk_offsets, list_prev), false },
		{ "task_struct", "start_time", 8,
		  offsetof(struct ivm_thread_walk_offsets, start_time), true },
	};

	*ret = (struct ivm_thread_walk_offsets){
		.tasks = koff->task_tasks, .pid = koff->task_pid,
		.tgid = koff->task_tgid, .comm = koff->task_comm,
		.comm_size = koff->task_comm_size, .mm = koff->task_mm,
		.signal = koff->task_signal,
		.thread_node = koff->task_thread_node,
		.signal_thread_head = koff->signal_thread_head,
		.thread_group = koff->task_thread_group,
		.list_next = koff->list_head_next,
	};
	return ivm_btf_offsets_find(btf, spec, sizeof(spec) / sizeof(spec[0]),
				    ret);
}

struct ivm_error *ivm_thread_walk_create(const struct ivm_thread_walk_config *cfg,
					 const struct ivm_kmem_reader *reader,
					 struct ivm_thread_walk **ret)
{
	const struct ivm_thread_walk_offsets *o = &cfg->off;
	uint32_t link = o->thread_node != IVM_KOFF_NONE ? o->thread_node :
			o->thread_group;
	struct ivm_kernel_field f[] = {
		{ o->tasks, 16 }, { o->pid, 4 }, { o->tgid, 4 },
		{ o->comm, o->comm_size }, { o->mm, 8 }, { o->signal, 8 },
		{ link, 16 }, { o->start_time, 8 },
	};
	struct ivm_thread_walk *w;
	uint32_t lo, hi;

	/* Every offset below IVM_KOFF_NONE - 16, the list members in 16. */
	if (link == IVM_KOFF_NONE || o->list_next > 8 || o->list_prev > 8 ||
	    o->comm_size == 0 || o->comm_size > 64 ||
	    !ivm_kernel_fields_span(f, sizeof(f) / sizeof(f[0]), &lo, &hi) ||
	    hi - lo > IVM_THREAD_WALK_MAX_SPAN ||
	    (o->thread_node != IVM_KOFF_NONE &&
	     o->signal_thread_head > IVM_KOFF_NONE - 16))
		return ivm_error_create(IVM_ERROR_INVALID,
					"task_struct: the thread lists cannot be walked with these offsets");
	w = calloc(1, sizeof(*w));
	if (w)
		w->buf = malloc(hi - lo);
	if (!w || !w->buf) {
		free(w);
		return &ivm_enomem;
	}
	w->cfg = *cfg;
	if (!w->cfg.max_tasks)
		w->cfg.max_tasks = IVM_KERNEL_DEFAULT_MAX_TASKS;
	w->reader = *reader;
	w->lo = lo;
	w->span = hi - lo;
	w->link = link;
	w->state = W_NEW_SWEEP;
	*ret = w;
	return NULL;
}

void ivm_thread_walk_destroy(struct ivm_thread_walk *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}

const struct ivm_thread_walk_stats *
ivm_thread_walk_stats(const struct ivm_thread_walk *w)
{
	return &w->stats;
}

/* A pointer worth following: an 8-byte aligned kernel address. */
static bool kptr(const struct ivm_thread_walk *w, uint64_t va)
{
	uint64_t lowest = w->cfg.la57 ? 0xff00000000000000ull :
					0xffff800000000000ull;

	return va >= lowest && !(va & 7);
}

static uint64_t field64(const struct ivm_thread_walk *w, uint32_t off)
{
	return ivm_le64(w->buf + (off - w->lo));
}

static int32_t field32(const struct ivm_thread_walk *w, uint32_t off)
{
	return (int32_t)ivm_le32(w->buf + (off - w->lo));
}

/* Read task's span into buf; false when it cannot be read. */
static bool load(struct ivm_thread_walk *w, uint64_t task)
{
	struct ivm_error *err;

	w->at = 0;
	if (!kptr(w, task) || task + w->lo < task ||
	    task + w->lo + w->span < task)
		return false;
	w->stats.reads++;
	err = w->reader.read(w->reader.ctx, task + w->lo, w->buf, w->span);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	w->at = task;
	return true;
}

static struct position position_of(const struct ivm_thread_walk *w)
{
	return (struct position){ w->at, field32(w, w->cfg.off.pid),
				  field32(w, w->cfg.off.tgid) };
}

/*
 * Whether pos is still the thread it was, linked in the list whose node
 * sits at link in it: the same pid and tgid, and both pointers of that
 * node kernel addresses (list_del_rcu poisons prev).  Loads it.
 */
static bool still_there(struct ivm_thread_walk *w, const struct position *pos,
			uint32_t link)
{
	const struct ivm_thread_walk_offsets *o = &w->cfg.off;

	if (w->at == pos->task)
		return true;	/* read in this call */
	if (!load(w, pos->task))
		return false;
	return field32(w, o->pid) == pos->pid &&
	       field32(w, o->tgid) == pos->tgid &&
	       kptr(w, field64(w, link + o->list_next)) &&
	       kptr(w, field64(w, link + o->list_prev));
}

static void report(struct ivm_thread_walk *w, struct ivm_walked_thread *t)
{
	const struct ivm_thread_walk_offsets *o = &w->cfg.off;
	size_t n = o->comm_size < sizeof(t->comm) ? o->comm_size :
			sizeof(t->comm) - 1;

	memset(t, 0, sizeof(*t));
	t->task = w->at;
	t->pid = field32(w, o->pid);
	t->tgid = field32(w, o->tgid);
	memcpy(t->comm, w->buf + (o->comm - w->lo), n);
	t->comm[n < sizeof(t->comm) ? n : sizeof(t->comm) - 1] = '\0';
	if (o->start_time != IVM_KOFF_NONE)
		t->start_time = field64(w, o->start_time);
	t->kthread = !field64(w, o->mm);
}

/* The sweep ends here. */
static enum ivm_thread_sweep end_sweep(struct ivm_thread_walk *w, bool complete)
{
	if (complete)
		w->stats.sweeps_complete++;
	else
		w->stats.sweeps_truncated++;
	w->state = W_NEW_SWEEP;
	w->at = 0;
	return complete ? IVM_SWEEP_COMPLETE : IVM_SWEEP_TRUNCATED;
}

/* Lost the way: walk again from init_task, if the sweep may. */
static bool restart(struct ivm_thread_walk *w)
{
	w->stats.restarts++;
	if (++w->restarts > IVM_THREAD_WALK_MAX_RESTARTS)
		return false;
	w->state = W_RESTART;
	return true;
}

/*
 * The leader's threads: where its thread list starts and ends.  With
 * thread_node, at signal->thread_head (none while the process exits:
 * signal is gone), where the leader is normally first: then the walk goes
 * on from the leader, else from the head's first node (one more read).
 * With thread_group, a ring through the leader.  Needs the leader loaded.
 */
static void enter_threads(struct ivm_thread_walk *w)
{
	const struct ivm_thread_walk_offsets *o = &w->cfg.off;
	struct ivm_error *err;
	uint8_t first[8];

	w->thread = w->leader;
	w->leader_passes = 1;	/* reported already */
	w->from_head = false;
	w->state = W_THREADS;
	if (o->thread_node == IVM_KOFF_NONE) {
		w->thread_head = w->leader.task + o->thread_group;
		return;
	}
	w->thread_head = field64(w, o->signal);
	if (!kptr(w, w->thread_head) ||
	    w->thread_head + o->signal_thread_head + 16 < w->thread_head) {
		w->state = W_NEXT_PROCESS;
		return;
	}
	w->thread_head += o->signal_thread_head;
	if (field64(w, o->thread_node + o->list_prev) == w->thread_head)
		return;
	w->stats.reads++;
	err = w->reader.read(w->reader.ctx, w->thread_head + o->list_next,
			     first, sizeof(first));
	if (err) {
		ivm_error_destroy(err);
		w->state = W_NEXT_PROCESS;
		return;
	}
	w->first_node = ivm_le64(first);
	w->from_head = true;
	w->leader_passes = 0;
}

void ivm_thread_walk_step(struct ivm_thread_walk *w,
			  struct ivm_walked_thread *out, size_t max,
			  size_t *nr, enum ivm_thread_sweep *ret)
{
	const struct ivm_thread_walk_offsets *o = &w->cfg.off;
	/* Each pass of the loop reads at most once: bound the passes too. */
	size_t passes = 2 * max + 8;
	uint64_t next;

	*nr = 0;
	*ret = IVM_SWEEP_GOING;
	w->at = 0;	/* nothing read in this call yet */
	while (*nr < max && passes--) {
		switch (w->state) {
		case W_NEW_SWEEP:
			w->met = 0;
			w->restarts = 0;
			/* fall through */
		case W_RESTART:
			if (!load(w, w->cfg.init_task)) {
				*ret = end_sweep(w, false);
				return;
			}
			w->leader = position_of(w);
			w->state = W_NEXT_PROCESS;
			break;
		case W_NEXT_PROCESS:
			if (!still_there(w, &w->leader, o->tasks)) {
				if (!restart(w)) {
					*ret = end_sweep(w, false);
					return;
				}
				break;
			}
			next = field64(w, o->tasks + o->list_next);
			if (next == w->cfg.init_task + o->tasks) {
				*ret = end_sweep(w, true);
				return;
			}
			if (next < o->tasks || !load(w, next - o->tasks)) {
				if (!restart(w)) {
					*ret = end_sweep(w, false);
					return;
				}
				break;
			}
			w->leader = position_of(w);
			if (w->met++ >= w->cfg.max_tasks) {
				*ret = end_sweep(w, false);
				return;
			}
			if (w->leader.pid)
				report(w, &out[(*nr)++]);
			enter_threads(w);
			break;
		case W_THREADS:
			if (w->from_head) {
				w->from_head = false;
				next = w->first_node;
			} else if (!still_there(w, &w->thread, w->link)) {
				w->stats.fallbacks++;
				/* Its process's threads again, from the head. */
				if (w->thread.task == w->leader.task ||
				    !still_there(w, &w->leader, o->tasks)) {
					if (!restart(w)) {
						*ret = end_sweep(w, false);
						return;
					}
					break;
				}
				enter_threads(w);
				break;
			} else {
				next = field64(w, w->link + o->list_next);
			}
			if (next == w->thread_head || next < w->link) {
				w->state = W_NEXT_PROCESS;
				break;
			}
			if (next - w->link == w->leader.task) {
				/* Met the leader (reported already) in its list. */
				if (w->leader_passes++) {
					w->state = W_NEXT_PROCESS;
					break;
				}
				w->thread = w->leader;
				break;
			}
			if (!load(w, next - w->link)) {
				/* Its thread moved on: from the leader again. */
				w->stats.fallbacks++;
				if (!still_there(w, &w->leader, o->tasks)) {
					if (!restart(w)) {
						*ret = end_sweep(w, false);
						return;
					}
					break;
				}
				enter_threads(w);
				break;
			}
			w->thread = position_of(w);
			if (w->met++ >= w->cfg.max_tasks) {
				*ret = end_sweep(w, false);
				return;
			}
			if (w->thread.pid)
				report(w, &out[(*nr)++]);
			break;
		}
	}
}
