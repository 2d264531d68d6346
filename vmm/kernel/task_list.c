// SPDX-License-Identifier: MIT
/*
 * The guest's tasks in one list (kernel_layout.h, ivm_kernel_task_list):
 * processes, their threads and the idle tasks, read through the layout's
 * public calls.
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/hexnum.h"
#include "kernel/kernel_layout.h"
#include "kernel/kernel_layout_int.h"

/*
 * What the hinted walk read in its batches: each hinted task's span, by
 * task address, and for a process's leader on a kernel with
 * signal->thread_head the next of that head, by the address of that word.
 * Both tables are open addressing, 0 empty, at least twice their rows.
 */
struct prefetch {
	size_t nr;		/* tasks read */
	uint64_t *task;
	uint32_t *row;		/* ... its span at bytes + row * span */
	size_t mask;
	uint8_t *bytes;
	uint64_t *word_va;	/* heads' next words, by address */
	uint64_t *word;
	size_t word_mask;
};

struct task_walk {
	const struct ivm_kernel_layout *l;
	struct ivm_guest_task_list *list;
	size_t max;
	size_t cap;		/* room in list->tasks */
	uint64_t *seen;		/* open addressing set of task addresses */
	size_t seen_mask;	/* its size - 1: a power of two, over 2 * cap */
	uint32_t lo, span;	/* the task span (ivm_kernel_task_span) */
	/* The span of the task added last, for the links in it. */
	uint64_t cur_task;
	const uint8_t *cur;
	uint8_t *buf;		/* room for a span read live */
	struct prefetch pf;
};

/*
 * Room for the walk starts small and doubles, so that a guest with a
 * hundred tasks does not cost a walk the cap's megabytes (65,536 tasks
 * are 11 MiB, zeroed at every walk, kept resident by malloc).
 */
#define WALK_FIRST_CAP 256

static bool seen_insert(struct task_walk *w, uint64_t task);

/*
 * The slot of key in keys, an open-addressing table of mask + 1 slots (0
 * empty, never full): the one holding key, else the empty one where it
 * goes.  The walk's three tables (tasks met, tasks batched, heads
 * batched) all probe so.
 */
static size_t slot_of(const uint64_t *keys, size_t mask, uint64_t key)
{
	size_t i = ivm_hash_addr(key) & mask;

	while (keys[i] && keys[i] != key)
		i = (i + 1) & mask;
	return i;
}

/* Slots for rows keys: a power of two, at least twice rows. */
static size_t table_size(size_t rows)
{
	size_t size = 1;

	while (size < 2 * rows)
		size <<= 1;
	return size;
}

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
	size = table_size(cap);
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
	/* The set has twice the room of the tasks it holds, so this ends. */
	size_t i = slot_of(w->seen, w->seen_mask, task);

	if (w->seen[i])
		return false;
	w->seen[i] = task;
	return true;
}

static bool seen_contains(const struct task_walk *w, uint64_t task)
{
	return task && w->seen[slot_of(w->seen, w->seen_mask, task)] == task;
}

static const uint8_t *prefetched(const struct task_walk *w, uint64_t task)
{
	const struct prefetch *pf = &w->pf;
	size_t i;

	if (!pf->nr || !task)
		return NULL;
	i = slot_of(pf->task, pf->mask, task);
	return pf->task[i] ? pf->bytes + (size_t)pf->row[i] * w->span : NULL;
}

/*
 * w->cur: task's span, from the batch when it holds it, else read now
 * into w->buf.
 */
static struct ivm_error *read_span(struct task_walk *w, uint64_t task)
{
	struct ivm_error *err;

	w->cur_task = 0;
	/* Only kernel addresses whose span does not wrap are batched. */
	w->cur = prefetched(w, task);
	if (w->cur) {
		w->list->prefetched++;
	} else {
		err = ivm_kernel_read_task_span(w->l, task, w->buf);
		if (err)
			return err;
		w->cur = w->buf;
	}
	w->cur_task = task;
	return NULL;
}

/*
 * The 8-byte word at va, of task (0: of no task), if the walk holds it
 * already: in the span of that task as added last or batched (its tasks
 * and thread links), or a thread list's head read in the batch.
 */
static bool word_known(const struct task_walk *w, uint64_t task, uint64_t va,
		       uint64_t *ret)
{
	const struct prefetch *pf = &w->pf;
	const uint8_t *span = NULL;
	size_t i;

	if (task && task == w->cur_task)
		span = w->cur;
	else if (task)
		span = prefetched(w, task);
	if (span && va >= task + w->lo && va - (task + w->lo) <= w->span - 8) {
		*ret = ivm_le64(span + (va - (task + w->lo)));
		return true;
	}
	if (!pf->word_va || !va)
		return false;
	i = slot_of(pf->word_va, pf->word_mask, va);
	if (!pf->word_va[i])
		return false;
	*ret = pf->word[i];
	return true;
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
	err = read_span(w, task);
	if (err) {
		walk_stop(w, err);
		return false;
	}
	ivm_kernel_task_decode(w->l, task, w->cur, &list->tasks[list->nr]);
	list->nr++;
	return true;
}

/* The next of the list node at node, a member of task (0: of no task). */
static bool walk_next(struct task_walk *w, uint64_t task, uint64_t node,
		      uint64_t *ret)
{
	uint64_t next_off = ivm_kernel_layout_offsets(w->l)->list_head_next;
	struct ivm_error *err;

	if (word_known(w, task, node + next_off, ret)) {
		if (ivm_kernel_is_kernel_address(w->l, *ret))
			return true;
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "list_head.next at 0x%llx is 0x%llx, not a kernel address",
					      (unsigned long long)(node + next_off),
					      (unsigned long long)*ret));
		return false;
	}
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
	uint64_t head, node, link_off, head_of;
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
		head_of = 0;
		link_off = o->task_thread_node;
	} else {
		head = leader + o->task_thread_group;
		head_of = leader;
		link_off = o->task_thread_group;
	}
	if (!walk_next(w, head_of, head, &node))
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
		if (!walk_next(w, task, node, &node))
			return false;
	}
	return true;
}

static void prefetch_free(struct prefetch *pf)
{
	free(pf->task);
	free(pf->row);
	free(pf->bytes);
	free(pf->word_va);
	free(pf->word);
	memset(pf, 0, sizeof(*pf));
}

/*
 * The second batch: the next of each prefetched leader's thread-list
 * head (signal->thread_head), so that a process whose threads are as the
 * hint saw them costs no read of its own.  Nothing when the kernel links
 * threads in the task (thread_group: in the span already) or on any
 * failure: the walk reads those heads live.
 */
static void prefetch_heads(struct task_walk *w, struct ivm_gmem_piece *pieces)
{
	const struct ivm_kernel_offsets *o = ivm_kernel_layout_offsets(w->l);
	struct prefetch *pf = &w->pf;
	struct ivm_error *err;
	uint64_t *va, *words;
	size_t i, n = 0, size;

	if (o->signal_thread_head == IVM_KOFF_NONE)
		return;
	va = calloc(pf->nr, sizeof(*va));
	words = calloc(pf->nr, sizeof(*words));
	if (!va || !words)
		goto out;
	for (i = 0; i < pf->nr; i++) {
		struct ivm_guest_task t;
		uint64_t pa, contiguous, at;

		ivm_kernel_task_decode(w->l, 0, pf->bytes + i * w->span, &t);
		if (t.pid != t.tgid || !ivm_kernel_is_kernel_address(w->l,
								   t.signal))
			continue;
		at = t.signal + o->signal_thread_head + o->list_head_next;
		if (at < t.signal)
			continue;
		err = ivm_kernel_translate(w->l, at, &pa, &contiguous);
		if (err || contiguous < 8) {
			ivm_error_destroy(err);
			continue;
		}
		va[n] = at;
		pieces[n] = (struct ivm_gmem_piece){ pa, &words[n], 8 };
		n++;
	}
	if (!n)
		goto out;
	err = ivm_gmem_read_phys_many(w->l->gmem, pieces, n);
	if (err) {
		/* The walk meets it live, if it reaches that head. */
		ivm_error_destroy(err);
		goto out;
	}
	size = table_size(n);
	pf->word_va = calloc(size, sizeof(*pf->word_va));
	pf->word = calloc(size, sizeof(*pf->word));
	if (!pf->word_va || !pf->word) {
		free(pf->word_va);
		free(pf->word);
		pf->word_va = pf->word = NULL;
		goto out;
	}
	pf->word_mask = size - 1;
	for (i = 0; i < n; i++) {
		size_t j = slot_of(pf->word_va, pf->word_mask, va[i]);

		pf->word_va[j] = va[i];
		pf->word[j] = ivm_le64((const uint8_t *)&words[i]);
	}
out:
	free(va);
	free(words);
}

/*
 * The first batch: the spans of the hinted tasks (at most max of them,
 * each once, those in consecutive guest physical pages: slab objects in
 * the direct map), then the heads.  Nothing on any failure.
 */
static void prefetch_load(struct task_walk *w, const uint64_t *hint,
			  size_t nr_hint)
{
	struct prefetch *pf = &w->pf;
	struct ivm_gmem_piece *pieces = NULL;
	struct ivm_error *err;
	size_t i, n = 0, size;

	if (nr_hint > w->max)
		nr_hint = w->max;
	if (!nr_hint || w->span < 8)
		return;
	size = table_size(nr_hint);
	pf->task = calloc(size, sizeof(*pf->task));
	pf->row = calloc(size, sizeof(*pf->row));
	pf->bytes = malloc(nr_hint * w->span);
	pieces = calloc(nr_hint, sizeof(*pieces));
	if (!pf->task || !pf->row || !pf->bytes || !pieces)
		goto fail;
	pf->mask = size - 1;
	for (i = 0; i < nr_hint; i++) {
		uint64_t task = hint[i], pa;
		size_t j;

		if (!ivm_kernel_is_kernel_address(w->l, task) ||
		    task + w->lo + w->span < task)
			continue;
		j = slot_of(pf->task, pf->mask, task);
		if (pf->task[j])
			continue;	/* hinted twice */
		err = ivm_kernel_translate_range(w->l, task + w->lo, w->span,
						 &pa);
		if (err) {
			ivm_error_destroy(err);
			continue;
		}
		pf->task[j] = task;
		pf->row[j] = (uint32_t)n;
		pieces[n] = (struct ivm_gmem_piece){
			pa, pf->bytes + n * w->span, w->span
		};
		n++;
	}
	err = n ? ivm_gmem_read_phys_many(w->l->gmem, pieces, n) : NULL;
	if (err || !n) {
		ivm_error_destroy(err);
		goto fail;
	}
	pf->nr = n;
	prefetch_heads(w, pieces);
	free(pieces);
	return;
fail:
	free(pieces);
	prefetch_free(pf);
}

struct ivm_error *ivm_kernel_task_list(const struct ivm_kernel_layout *layout,
				       size_t max_tasks,
				       struct ivm_guest_task_list **ret)
{
	return ivm_kernel_task_list_hinted(layout, max_tasks, NULL, 0, ret);
}

struct ivm_error *ivm_kernel_task_list_hinted(
	const struct ivm_kernel_layout *layout, size_t max_tasks,
	const uint64_t *hint, size_t nr_hint,
	struct ivm_guest_task_list **ret)
{
	const struct ivm_kernel_layout *l = layout;
	const struct ivm_kernel_offsets *o = ivm_kernel_layout_offsets(l);
	uint64_t init_task = ivm_kernel_layout_init_task(l);
	struct task_walk w = { .l = l };
	struct ivm_guest_task_list *list;
	uint64_t head, node;
	size_t set_size;
	unsigned int cpu;
	uint32_t hi;

	if (max_tasks == 0)
		max_tasks = IVM_KERNEL_DEFAULT_MAX_TASKS;
	if (max_tasks > IVM_KERNEL_MAX_TASKS)
		max_tasks = IVM_KERNEL_MAX_TASKS;
	w.max = max_tasks;
	w.cap = max_tasks < WALK_FIRST_CAP ? max_tasks : WALK_FIRST_CAP;
	set_size = table_size(w.cap);
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
	ivm_kernel_task_span(l, &w.lo, &hi);
	w.span = hi - w.lo;
	w.buf = malloc(w.span);
	if (!w.buf) {
		ivm_guest_task_list_destroy(list);
		free(w.seen);
		return &ivm_enomem;
	}
	prefetch_load(&w, hint, nr_hint);

	/* init_task (pid 0) heads the process list and is no member of it. */
	if (!walk_add(&w, init_task))
		goto idle;
	head = init_task + o->task_tasks;
	if (!walk_next(&w, init_task, head, &node))
		goto idle;
	while (node != head) {
		size_t leader_idx = list->nr;

		if (!walk_add(&w, node - o->task_tasks))
			break;
		if (!walk_threads(&w, leader_idx))
			break;
		if (!walk_next(&w, list->tasks[leader_idx].addr,
			       list->tasks[leader_idx].addr + o->task_tasks,
			       &node))
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
	free(w.buf);
	prefetch_free(&w.pf);
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
