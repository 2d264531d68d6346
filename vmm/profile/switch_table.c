// SPDX-License-Identifier: MIT
/* The switch sampler's threads and their counters; see switch_table.h. */
#include <stdlib.h>
#include <string.h>

#include "base/hexnum.h"
#include "kernel/kernel_layout.h"
#include "profile/switch_table.h"

struct ivm_switch_table {
	uint32_t every;
	size_t max;
	struct ivm_switch_thread *threads;
	size_t nr, cap;
	size_t watched;
	/* task address -> index + 1 of the thread there (0: empty slot). */
	size_t *slots;
	size_t slots_mask;
	size_t cursor;			/* next batch starts here */
	struct ivm_switch_table_stats stats;
};

struct ivm_error *ivm_switch_table_create(uint32_t every, size_t max_threads,
					  struct ivm_switch_table **ret)
{
	struct ivm_switch_table *t;
	size_t slots = 64;

	if (!every)
		return ivm_error_create(IVM_ERROR_INVALID,
					"switch sampling needs N > 0");
	if (!max_threads || max_threads > IVM_KERNEL_MAX_TASKS)
		max_threads = IVM_KERNEL_DEFAULT_MAX_TASKS;
	/*
	 * Entries (watched, and gone ones until compacted) are at most twice
	 * max_threads, the slots twice that: probing always ends.
	 */
	while (slots < 4 * max_threads)
		slots <<= 1;
	t = calloc(1, sizeof(*t));
	if (t)
		t->slots = calloc(slots, sizeof(*t->slots));
	if (!t || !t->slots) {
		free(t);
		return &ivm_enomem;
	}
	t->every = every;
	t->max = max_threads;
	t->slots_mask = slots - 1;
	*ret = t;
	return NULL;
}

void ivm_switch_table_destroy(struct ivm_switch_table *t)
{
	if (!t)
		return;
	free(t->threads);
	free(t->slots);
	free(t);
}

size_t ivm_switch_table_nr(const struct ivm_switch_table *t)
{
	return t->nr;
}

struct ivm_switch_thread *ivm_switch_table_get(struct ivm_switch_table *t,
					       size_t idx)
{
	return idx < t->nr ? &t->threads[idx] : NULL;
}

size_t ivm_switch_table_watched(const struct ivm_switch_table *t)
{
	return t->watched;
}

const struct ivm_switch_table_stats *
ivm_switch_table_stats(const struct ivm_switch_table *t)
{
	return &t->stats;
}

/* The slot of task: where it is, or the empty one where it would go. */
static size_t *slot_of(struct ivm_switch_table *t, uint64_t task)
{
	size_t i = ivm_hash_addr(task) & t->slots_mask;

	while (t->slots[i] && t->threads[t->slots[i] - 1].task != task)
		i = (i + 1) & t->slots_mask;
	return &t->slots[i];
}

static void make_gone(struct ivm_switch_table *t, struct ivm_switch_thread *th)
{
	if (th->flags & IVM_THREAD_GONE)
		return;
	th->flags |= IVM_THREAD_GONE;
	th->due = false;
	th->dirty = true;
	t->watched--;
	t->stats.gone++;
}

struct ivm_error *ivm_switch_table_meet(struct ivm_switch_table *t,
					const struct ivm_walked_thread *w,
					uint64_t sweep, bool born, long *ret,
					bool *added)
{
	size_t *slot = slot_of(t, w->task);
	struct ivm_switch_thread *th;

	*added = false;
	*ret = -1;
	if (*slot) {
		th = &t->threads[*slot - 1];
		if (!(th->flags & IVM_THREAD_GONE) && th->pid == w->pid &&
		    th->tgid == w->tgid && th->start_time == w->start_time) {
			memcpy(th->comm, w->comm, sizeof(th->comm));
			th->comm[sizeof(th->comm) - 1] = '\0';
			th->met_sweep = sweep;
			*ret = (long)(*slot - 1);
			return NULL;
		}
		/* The address now holds another thread. */
		if (!(th->flags & IVM_THREAD_GONE))
			t->stats.reused++;
		make_gone(t, th);
	}
	if (t->watched >= t->max || t->nr >= 2 * t->max) {
		t->stats.unwatched++;
		return NULL;
	}
	if (t->nr == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct ivm_switch_thread *n;

		n = reallocarray(t->threads, cap, sizeof(*n));
		if (!n)
			return &ivm_enomem;
		t->threads = n;
		t->cap = cap;
		/* threads moved, not slots: slot still points at the right one. */
	}
	th = &t->threads[t->nr];
	memset(th, 0, sizeof(*th));
	th->task = w->task;
	th->pid = w->pid;
	th->tgid = w->tgid;
	memcpy(th->comm, w->comm, sizeof(th->comm));
	th->comm[sizeof(th->comm) - 1] = '\0';
	th->start_time = w->start_time;
	th->flags = born ? IVM_THREAD_BORN : 0;
	th->met_sweep = sweep;
	*slot = ++t->nr;
	t->watched++;
	t->stats.threads_met++;
	*ret = (long)(t->nr - 1);
	*added = true;
	return NULL;
}

void ivm_switch_table_sweep_done(struct ivm_switch_table *t, uint64_t sweep)
{
	size_t i;

	for (i = 0; i < t->nr; i++)
		if (t->threads[i].met_sweep < sweep)
			make_gone(t, &t->threads[i]);
}

size_t ivm_switch_table_next_batch(struct ivm_switch_table *t, size_t *idx,
				   size_t max)
{
	size_t n = 0, steps;

	if (!t->nr)
		return 0;
	for (steps = 0; steps < t->nr && n < max; steps++) {
		if (t->cursor >= t->nr)
			t->cursor = 0;
		if (!(t->threads[t->cursor].flags & IVM_THREAD_GONE))
			idx[n++] = t->cursor;
		t->cursor++;
	}
	return n;
}

/* v, unless it is below was (a count cannot go back): then was. */
static uint64_t forward(struct ivm_switch_table *t, uint64_t was, uint64_t v,
			bool *back)
{
	if (v >= was)
		return v;
	*back = true;
	return was;
}

bool ivm_switch_table_update(struct ivm_switch_table *t, size_t idx,
			     const struct ivm_task_sched *s, uint64_t now_ns)
{
	struct ivm_switch_thread *th = &t->threads[idx];
	struct ivm_switch_counts c = {
		.nvcsw = s->nvcsw, .nivcsw = s->nivcsw,
		.run_delay = s->run_delay_known ? s->run_delay : 0,
		.cpu = s->sum_exec_runtime,
	};
	uint64_t before, after;
	bool back = false;

	if (th->flags & IVM_THREAD_GONE)
		return false;
	if (s->pid != th->pid || s->tgid != th->tgid ||
	    (s->start_time_known && s->start_time != th->start_time)) {
		t->stats.reused++;
		make_gone(t, th);
		return false;
	}
	th->on_cpu = s->on_cpu_known && s->on_cpu;
	th->last_ns = now_ns;
	if (!th->read) {
		th->read = true;
		th->run_delay_known = s->run_delay_known;
		th->first_ns = now_ns;
		if (!(th->flags & IVM_THREAD_BORN))
			th->base = c;
		th->at_sample = th->base;
		th->last = c;
		th->dirty = true;
		return true;
	}
	c.nvcsw = forward(t, th->last.nvcsw, c.nvcsw, &back);
	c.nivcsw = forward(t, th->last.nivcsw, c.nivcsw, &back);
	c.run_delay = forward(t, th->last.run_delay, c.run_delay, &back);
	c.cpu = forward(t, th->last.cpu, c.cpu, &back);
	t->stats.backwards += back;
	before = th->last.nvcsw + th->last.nivcsw;
	after = c.nvcsw + c.nivcsw;
	if (after / t->every > before / t->every) {
		t->stats.crossings++;
		t->stats.coalesced += th->due;
		th->due = true;
	}
	if (memcmp(&c, &th->last, sizeof(c)))
		th->dirty = true;
	th->last = c;
	return true;
}

void ivm_switch_table_lost(struct ivm_switch_table *t, size_t idx)
{
	make_gone(t, &t->threads[idx]);
}

/* The counters of c (run delay when known) into out; their number. */
static size_t put_counts(const struct ivm_switch_thread *th,
			 const struct ivm_switch_counts *c,
			 struct ivm_counter *out)
{
	size_t n = 0;

	out[n++] = (struct ivm_counter){ IVM_COUNTER_NVCSW, c->nvcsw };
	out[n++] = (struct ivm_counter){ IVM_COUNTER_NIVCSW, c->nivcsw };
	if (th->run_delay_known)
		out[n++] = (struct ivm_counter){ IVM_COUNTER_RUN_DELAY_NS,
						 c->run_delay };
	out[n++] = (struct ivm_counter){ IVM_COUNTER_CPU_NS, c->cpu };
	return n;
}

/* a - b, field by field (a never below b: counts only go forward). */
static struct ivm_switch_counts minus(const struct ivm_switch_counts *a,
				      const struct ivm_switch_counts *b)
{
	return (struct ivm_switch_counts){
		.nvcsw = a->nvcsw - b->nvcsw, .nivcsw = a->nivcsw - b->nivcsw,
		.run_delay = a->run_delay - b->run_delay,
		.cpu = a->cpu - b->cpu,
	};
}

size_t ivm_switch_table_sampled(struct ivm_switch_table *t, size_t idx,
				struct ivm_counter *out)
{
	struct ivm_switch_thread *th = &t->threads[idx];
	struct ivm_switch_counts d = minus(&th->last, &th->at_sample);

	th->at_sample = th->last;
	th->samples++;
	th->due = false;
	th->dirty = true;
	return put_counts(th, &d, out);
}

void ivm_switch_table_record(struct ivm_switch_table *t, size_t idx,
			     bool final, struct ivm_counter *out,
			     struct ivm_thread_record *ret)
{
	struct ivm_switch_thread *th = &t->threads[idx];
	struct ivm_switch_counts total = minus(&th->last, &th->base);

	memset(ret, 0, sizeof(*ret));
	ret->pid = th->tgid > 0 ? (uint32_t)th->tgid : 0;
	ret->tid = th->pid > 0 ? (uint32_t)th->pid : 0;
	memcpy(ret->comm, th->comm, sizeof(ret->comm));
	ret->start_time = th->start_time;
	ret->first_ns = th->first_ns;
	ret->last_ns = th->last_ns;
	ret->flags = th->flags | (final ? IVM_THREAD_FINAL : 0);
	ret->samples = th->samples;
	ret->nr_counters = (uint16_t)put_counts(th, &total, out);
	ret->counters = out;
	th->dirty = false;
	if (th->flags & IVM_THREAD_GONE)
		th->recorded_gone = true;
}

void ivm_switch_table_rebase(struct ivm_switch_table *t)
{
	size_t i;

	for (i = 0; i < t->nr; i++) {
		struct ivm_switch_thread *th = &t->threads[i];

		th->base = th->last;
		th->first_ns = th->last_ns;
		th->samples = 0;
		th->flags &= ~(uint32_t)IVM_THREAD_BORN;
		th->dirty = th->read;
	}
}

void ivm_switch_table_compact(struct ivm_switch_table *t)
{
	size_t i, n = 0;

	for (i = 0; i < t->nr; i++) {
		const struct ivm_switch_thread *th = &t->threads[i];

		if ((th->flags & IVM_THREAD_GONE) && th->recorded_gone)
			continue;
		t->threads[n++] = *th;
	}
	if (n == t->nr)
		return;
	t->nr = n;
	t->cursor = 0;
	memset(t->slots, 0, (t->slots_mask + 1) * sizeof(*t->slots));
	for (i = 0; i < n; i++) {
		size_t *slot;

		if (t->threads[i].flags & IVM_THREAD_GONE)
			continue;
		slot = slot_of(t, t->threads[i].task);
		*slot = i + 1;
	}
}
