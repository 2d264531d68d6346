// SPDX-License-Identifier: MIT
/*
 * The guest's tasks in one list (kernel_layout.h, ivm_kernel_task_list):
 * processes, their threads and the idle tasks, read through the layout's
 * public calls.
 */
#include <stdlib.h>
#include <string.h>

#include "base/hexnum.h"
#include "kernel/kernel_layout.h"

struct task_walk {
	const struct ivm_kernel_layout *l;
	struct ivm_guest_task_list *list;
	size_t max;
	size_t cap;		/* room in list->tasks */
	uint64_t *seen;		/* open addressing set of task addresses */
	size_t seen_mask;	/* its size - 1: a power of two, over 2 * cap */
};

/*
 * Room for the walk starts small and doubles, so that a guest with a
 * hundred tasks does not cost a walk the cap's megabytes (65,536 tasks
 * are 11 MiB, zeroed at every walk, kept resident by malloc).
 */
#define WALK_FIRST_CAP 256

static bool seen_insert(struct task_walk *w, uint64_t task);

/* Double the room for tasks (and the set); false without memory. */
static bool walk_grow(struct task_walk *w)
{
	size_t cap = w->cap * 2, old_size = w->seen_mask + 1, size, i;
	struct ivm_guest_task *tasks;
	uint64_t *old = w->seen;

	if (cap > w->max)
		cap = w->max;
	tasks = realloc(w->list->tasks, cap * sizeof(*tasks));
	if (!tasks)
		return false;
	/* As calloc gave them: a field the kernel lacks reads 0. */
	memset(tasks + w->cap, 0, (cap - w->cap) * sizeof(*tasks));
	w->list->tasks = tasks;
	w->cap = cap;
	if (old_size >= 2 * cap)
		return true;		/* the set still has room */
	for (size = old_size; size < 2 * cap; size <<= 1)
		;
	w->seen = calloc(size, sizeof(*w->seen));
	if (!w->seen) {
		w->seen = old;
		return false;
	}
	w->seen_mask = size - 1;
	for (i = 0; i < old_size; i++)
		if (old[i])
			seen_insert(w, old[i]);
	free(old);
	return true;
}

/* Insert task; false if it was already there. */
static bool seen_insert(struct task_walk *w, uint64_t task)
{
	size_t i = ivm_hash_addr(task) & w->seen_mask;

	/* The set has twice the room of the tasks it holds, so this ends. */
	while (w->seen[i]) {
		if (w->seen[i] == task)
			return false;
		i = (i + 1) & w->seen_mask;
	}
	w->seen[i] = task;
	return true;
}

static bool seen_contains(const struct task_walk *w, uint64_t task)
{
	size_t i = ivm_hash_addr(task) & w->seen_mask;

	while (w->seen[i]) {
		if (w->seen[i] == task)
			return true;
		i = (i + 1) & w->seen_mask;
	}
	return false;
}

static void walk_stop(struct task_walk *w, struct ivm_error *err)
{
	w->list->truncated = true;
	if (!w->list->error)
		w->list->error = err;
	else
		ivm_error_destroy(err);
}

/*
 * Add task to the list.  Returns false when the walk must stop (cap, cycle
 * or fault; recorded in the list).
 */
static bool walk_add(struct task_walk *w, uint64_t task)
{
	struct ivm_guest_task_list *list = w->list;
	struct ivm_error *err;

	if (list->nr >= w->max) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "more than %zu tasks: list cut",
					      w->max));
		return false;
	}
	if (list->nr == w->cap && !walk_grow(w)) {
		walk_stop(w, &ivm_enomem);
		return false;
	}
	if (!seen_insert(w, task)) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "task list loops back to task 0x%llx",
					      (unsigned long long)task));
		return false;
	}
	err = ivm_kernel_read_task(w->l, task, &list->tasks[list->nr]);
	if (err) {
		walk_stop(w, err);
		return false;
	}
	list->nr++;
	return true;
}

static bool walk_next(struct task_walk *w, uint64_t node, uint64_t *ret)
{
	uint64_t next_off = ivm_kernel_layout_offsets(w->l)->list_head_next;
	struct ivm_error *err;

	err = ivm_kernel_read_ptr(w->l, node + next_off, "list_head.next", ret);
	if (err) {
		walk_stop(w, err);
		return false;
	}
	return true;
}

/* The threads of the process whose leader is list->tasks[idx]. */
static bool walk_threads(struct task_walk *w, size_t idx)
{
	const struct ivm_kernel_offsets *o = ivm_kernel_layout_offsets(w->l);
	uint64_t leader = w->list->tasks[idx].addr;
	uint64_t head, node, link_off;
	unsigned int leader_passes = 0;

	if (o->signal_thread_head != IVM_KOFF_NONE) {
		uint64_t signal = w->list->tasks[idx].signal;

		/* Exiting tasks may have no signal struct any more. */
		if (!signal)
			return true;
		if (!ivm_kernel_is_kernel_address(w->l, signal)) {
			walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
						      "task 0x%llx: signal 0x%llx is not a kernel address",
						      (unsigned long long)leader,
						      (unsigned long long)signal));
			return false;
		}
		head = signal + o->signal_thread_head;
		link_off = o->task_thread_node;
	} else {
		head = leader + o->task_thread_group;
		link_off = o->task_thread_group;
	}
	if (!walk_next(w, head, &node))
		return false;
	/*
	 * Bounded: every step adds a task (at most w->max, each once) or
	 * passes the leader, which a sane ring does at most once.
	 */
	while (node != head) {
		uint64_t task = node - link_off;

		if (task == leader) {
			if (leader_passes++) {
				walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
							      "thread list of task 0x%llx loops",
							      (unsigned long long)leader));
				return false;
			}
		} else if (!walk_add(w, task)) {
			return false;
		}
		if (!walk_next(w, node, &node))
			return false;
	}
	return true;
}

struct ivm_error *ivm_kernel_task_list(const struct ivm_kernel_layout *layout,
				       size_t max_tasks,
				       struct ivm_guest_task_list **ret)
{
	const struct ivm_kernel_layout *l = layout;
	const struct ivm_kernel_offsets *o = ivm_kernel_layout_offsets(l);
	uint64_t init_task = ivm_kernel_layout_init_task(l);
	struct task_walk w = { .l = l };
	struct ivm_guest_task_list *list;
	uint64_t head, node;
	size_t set_size = 1;
	unsigned int cpu;

	if (max_tasks == 0)
		max_tasks = IVM_KERNEL_DEFAULT_MAX_TASKS;
	if (max_tasks > IVM_KERNEL_MAX_TASKS)
		max_tasks = IVM_KERNEL_MAX_TASKS;
	w.max = max_tasks;
	w.cap = max_tasks < WALK_FIRST_CAP ? max_tasks : WALK_FIRST_CAP;
	while (set_size < 2 * w.cap)
		set_size <<= 1;
	list = calloc(1, sizeof(*list));
	w.seen = calloc(set_size, sizeof(*w.seen));
	if (list)
		list->tasks = calloc(w.cap, sizeof(*list->tasks));
	if (!list || !w.seen || !list->tasks) {
		ivm_guest_task_list_destroy(list);
		free(w.seen);
		return &ivm_enomem;
	}
	w.seen_mask = set_size - 1;
	w.list = list;

	/* init_task (pid 0) heads the process list and is no member of it. */
	if (!walk_add(&w, init_task))
		goto idle;
	head = init_task + o->task_tasks;
	if (!walk_next(&w, head, &node))
		goto idle;
	while (node != head) {
		size_t leader_idx = list->nr;

		if (!walk_add(&w, node - o->task_tasks))
			break;
		if (!walk_threads(&w, leader_idx))
			break;
		if (!walk_next(&w, list->tasks[leader_idx].addr +
					   o->task_tasks, &node))
			break;
	}
idle:
	/* Idle tasks of the other CPUs are on no list. */
	for (cpu = 0; cpu < ivm_kernel_layout_nr_cpus(l); cpu++) {
		uint64_t idle = ivm_kernel_layout_idle_task(l, cpu);

		if (idle && !seen_contains(&w, idle) && !walk_add(&w, idle))
			break;
	}
	free(w.seen);
	*ret = list;
	return NULL;
}

void ivm_guest_task_list_destroy(struct ivm_guest_task_list *list)
{
	if (!list)
		return;
	ivm_error_destroy(list->error);
	free(list->tasks);
	free(list);
}
