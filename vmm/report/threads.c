// SPDX-License-Identifier: MIT
/* The threads report; see threads.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/hexnum.h"
#include "report/threads.h"

/* Distinct threads kept from one file; more are counted and left out. */
#define MAX_THREADS (1u << 20)

struct thread_line {
	uint32_t pid, tid;
	char comm[IVM_COMM_LEN];
	uint64_t start_time;
	uint32_t flags;
	uint64_t voluntary, involuntary, run_delay_ns, cpu_ns;
	bool run_delay_known;
	uint64_t samples;
};

struct ivm_threads {
	struct thread_line *lines;
	size_t nr, cap;
	size_t *slots;			/* index + 1, 0: empty */
	size_t slots_mask;
	uint64_t dropped;
};

static const char *const sort_names[] = {
	[IVM_THREADS_BY_SWITCHES] = "switches",
	[IVM_THREADS_BY_TID] = "tid",
	[IVM_THREADS_BY_PID] = "pid",
	[IVM_THREADS_BY_COMM] = "comm",
	[IVM_THREADS_BY_VOLUNTARY] = "voluntary",
	[IVM_THREADS_BY_INVOLUNTARY] = "involuntary",
	[IVM_THREADS_BY_RUN_DELAY] = "run_delay",
	[IVM_THREADS_BY_CPU] = "cpu",
	[IVM_THREADS_BY_SAMPLES] = "samples",
};

bool ivm_threads_sort_parse(const char *name, enum ivm_threads_sort *ret)
{
	size_t i;

	for (i = 0; i < sizeof(sort_names) / sizeof(sort_names[0]); i++) {
		if (!strcmp(name, sort_names[i])) {
			*ret = (enum ivm_threads_sort)i;
			return true;
		}
	}
	return false;
}

struct ivm_error *ivm_threads_create(struct ivm_threads **ret)
{
	struct ivm_threads *t = calloc(1, sizeof(*t));

	if (!t)
		return &ivm_enomem;
	*ret = t;
	return NULL;
}

void ivm_threads_destroy(struct ivm_threads *t)
{
	if (!t)
		return;
	free(t->lines);
	free(t->slots);
	free(t);
}

size_t ivm_threads_nr(const struct ivm_threads *t)
{
	return t->nr;
}

static size_t key_hash(uint32_t tid, uint64_t start_time)
{
	return ivm_hash_addr(((uint64_t)tid << 32) ^ start_time ^
			     (start_time >> 29));
}

/* The slot of (tid, start_time): where it is, or the empty one for it. */
static size_t *slot_of(const struct ivm_threads *t, uint32_t tid,
		       uint64_t start_time)
{
	size_t i = key_hash(tid, start_time) & t->slots_mask;

	while (t->slots[i]) {
		const struct thread_line *l = &t->lines[t->slots[i] - 1];

		if (l->tid == tid && l->start_time == start_time)
			break;
		i = (i + 1) & t->slots_mask;
	}
	return &t->slots[i];
}

/* Room for one more line, the slots kept at most half full. */
static struct ivm_error *grow(struct ivm_threads *t)
{
	size_t nslots, i;
	size_t *slots;

	if (t->nr == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct thread_line *n = reallocarray(t->lines, cap, sizeof(*n));

		if (!n)
			return &ivm_enomem;
		t->lines = n;
		t->cap = cap;
	}
	if (t->slots && 2 * (t->nr + 1) <= t->slots_mask + 1)
		return NULL;
	nslots = t->slots ? 2 * (t->slots_mask + 1) : 512;
	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return &ivm_enomem;
	free(t->slots);
	t->slots = slots;
	t->slots_mask = nslots - 1;
	for (i = 0; i < t->nr; i++)
		*slot_of(t, t->lines[i].tid, t->lines[i].start_time) = i + 1;
	return NULL;
}

struct ivm_error *ivm_threads_add(struct ivm_threads *t,
				  const struct ivm_thread_record *r)
{
	struct thread_line *l;
	struct ivm_error *err;
	size_t *slot;
	unsigned int i;

	if (!t->slots || !*slot_of(t, r->tid, r->start_time)) {
		if (t->nr >= MAX_THREADS) {
			t->dropped++;
			return NULL;
		}
		err = grow(t);
		if (err)
			return err;
	}
	slot = slot_of(t, r->tid, r->start_time);
	if (!*slot) {
		*slot = ++t->nr;
		memset(&t->lines[t->nr - 1], 0, sizeof(t->lines[0]));
	}
	/* The last record of a thread wins: it holds the totals so far. */
	l = &t->lines[*slot - 1];
	memset(l, 0, sizeof(*l));
	l->pid = r->pid;
	l->tid = r->tid;
	l->start_time = r->start_time;
	l->flags = r->flags;
	l->samples = r->samples;
	memcpy(l->comm, r->comm, sizeof(l->comm));
	l->comm[sizeof(l->comm) - 1] = '\0';
	for (i = 0; i < r->nr_counters; i++) {
		uint64_t v = r->counters[i].value;

		switch (r->counters[i].id) {
		case IVM_COUNTER_NVCSW:
			l->voluntary = v;
			break;
		case IVM_COUNTER_NIVCSW:
			l->involuntary = v;
			break;
		case IVM_COUNTER_RUN_DELAY_NS:
			l->run_delay_ns = v;
			l->run_delay_known = true;
			break;
		case IVM_COUNTER_CPU_NS:
			l->cpu_ns = v;
			break;
		default:
			break;	/* a newer writer's counter */
		}
	}
	return NULL;
}

/* Sort state: qsort has no context argument. */
static enum ivm_threads_sort g_sort;

static int cmp_desc(uint64_t a, uint64_t b)
{
	return (a < b) - (a > b);
}

static int line_cmp(const void *pa, const void *pb)
{
	const struct thread_line *a = pa, *b = pb;
	int c = 0;

	switch (g_sort) {
	case IVM_THREADS_BY_SWITCHES:
		c = cmp_desc(a->voluntary + a->involuntary,
			     b->voluntary + b->involuntary);
		break;
	case IVM_THREADS_BY_TID:
		break;
	case IVM_THREADS_BY_PID:
		c = (a->pid > b->pid) - (a->pid < b->pid);
		break;
	case IVM_THREADS_BY_COMM:
		c = strcmp(a->comm, b->comm);
		break;
	case IVM_THREADS_BY_VOLUNTARY:
		c = cmp_desc(a->voluntary, b->voluntary);
		break;
	case IVM_THREADS_BY_INVOLUNTARY:
		c = cmp_desc(a->involuntary, b->involuntary);
		break;
	case IVM_THREADS_BY_RUN_DELAY:
		c = cmp_desc(a->run_delay_ns, b->run_delay_ns);
		break;
	case IVM_THREADS_BY_CPU:
		c = cmp_desc(a->cpu_ns, b->cpu_ns);
		break;
	case IVM_THREADS_BY_SAMPLES:
		c = cmp_desc(a->samples, b->samples);
		break;
	}
	if (!c)
		c = (a->tid > b->tid) - (a->tid < b->tid);
	if (!c)
		c = (a->start_time > b->start_time) -
		    (a->start_time < b->start_time);
	return c;
}

/* A guest comm as one printable word. */
static void clean_comm(const char *in, char *out)
{
	size_t i;

	for (i = 0; in[i] && i < IVM_COMM_LEN - 1; i++)
		out[i] = (unsigned char)in[i] > ' ' &&
			 (unsigned char)in[i] < 0x7f ? in[i] : '_';
	out[i] = '\0';
	if (!i)
		snprintf(out, IVM_COMM_LEN, "?");
}

static const char *state_of(uint32_t flags)
{
	if ((flags & IVM_THREAD_BORN) && (flags & IVM_THREAD_GONE))
		return "born,gone";
	if (flags & IVM_THREAD_BORN)
		return "born";
	if (flags & IVM_THREAD_GONE)
		return "gone";
	return "-";
}

void ivm_threads_print(const struct ivm_threads *t, enum ivm_threads_sort sort,
		       size_t max, FILE *out)
{
	struct thread_line *lines, total = { 0 };
	char comm[IVM_COMM_LEN], delay[32];
	size_t i;

	fprintf(out, "%8s %8s %-16s %11s %11s %14s %14s %8s  %s\n", "TID",
		"PID", "COMM", "VOLUNTARY", "INVOLUNTARY", "RUN_DELAY_MS",
		"CPU_MS", "SAMPLES", "STATE");
	lines = malloc((t->nr ? t->nr : 1) * sizeof(*lines));
	if (!lines) {
		fprintf(out, "(out of memory)\n");
		return;
	}
	if (t->nr)
		memcpy(lines, t->lines, t->nr * sizeof(*lines));
	g_sort = sort;
	qsort(lines, t->nr, sizeof(*lines), line_cmp);
	for (i = 0; i < t->nr; i++) {
		const struct thread_line *l = &lines[i];

		total.voluntary += l->voluntary;
		total.involuntary += l->involuntary;
		total.run_delay_ns += l->run_delay_ns;
		total.cpu_ns += l->cpu_ns;
		total.samples += l->samples;
		if (max && i >= max)
			continue;
		clean_comm(l->comm, comm);
		if (l->run_delay_known)
			snprintf(delay, sizeof(delay), "%.3f",
				 (double)l->run_delay_ns / 1e6);
		else
			snprintf(delay, sizeof(delay), "-");
		fprintf(out, "%8" PRIu32 " %8" PRIu32 " %-16s %11" PRIu64
			" %11" PRIu64 " %14s %14.3f %8" PRIu64 "  %s\n",
			l->tid, l->pid, comm, l->voluntary, l->involuntary,
			delay, (double)l->cpu_ns / 1e6, l->samples,
			state_of(l->flags));
	}
	if (max && t->nr > max)
		fprintf(out, "%8s %zu more threads\n", "...", t->nr - max);
	fprintf(out, "%8s %8s %-16s %11" PRIu64 " %11" PRIu64 " %14.3f %14.3f %8"
		PRIu64 "  %zu threads\n", "all", "-", "-", total.voluntary,
		total.involuntary, (double)total.run_delay_ns / 1e6,
		(double)total.cpu_ns / 1e6, total.samples, t->nr);
	if (t->dropped)
		fprintf(out, "(%" PRIu64 " more threads left out: over %u)\n",
			t->dropped, MAX_THREADS);
	free(lines);
}
