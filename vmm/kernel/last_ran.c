// SPDX-License-Identifier: MIT
/* Who ran last on an idle CPU; see last_ran.h for why and how. */
#include <stdlib.h>
#include <string.h>

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
	uint32_t off_cpu, off_on_cpu, off_exec_start;
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
	struct ivm_last_ran_stats stats;
};

void ivm_last_ran_destroy(struct ivm_last_ran *lr)
{
	size_t i;

	if (!lr)
		return;
	free(lr->cand);
	free(lr->buf);
	free(lr->si_buf);
	for (i = 0; i < lr->nr_marks; i++)
		free(lr->marks[i].pcount);
	free(lr->marks);
	free(lr->pieces);
	free(lr->piece_cand);
	free(lr);
}

/*
 * total_forks, a word in the kernel's data: its physical address, once.
 * Without it (no symbol, a kernel that renamed it) candidates are never
 * taken as stale, as before.
 */
static void forks_locate(struct ivm_last_ran *lr)
{
	struct ivm_error *err;
	uint64_t va;

	err = ivm_kernel_symbol(lr->layout, "total_forks", &va);
	if (!err)
		err = ivm_kernel_translate_range(lr->layout, va, 8,
						 &lr->forks_pa);
	lr->has_forks = !err;
	ivm_error_destroy(err);
}

/* Whether the batch's count of forks is not the walk's: see last_ran.h. */
static bool stale(const struct ivm_last_ran *lr)
{
	return lr->has_forks && lr->forks_walk_ok && lr->forks_ok &&
	       lr->forks_now != lr->forks_walk;
}

struct ivm_error *ivm_last_ran_create(const struct ivm_kernel_layout *layout,
				      struct ivm_gmem *gmem,
				      struct ivm_last_ran **ret)
{
	const struct ivm_kernel_offsets *o = ivm_kernel_layout_offsets(layout);
	const struct ivm_kernel_field f[] = {
		{ o->task_cpu, 4 }, { o->task_on_cpu, 4 },
		{ o->task_se_exec_start, 8 },
		{ o->task_sched_info_last_arrival, 8 },
		{ o->task_sched_info_pcount, 8 },
	};
	const size_t nr_base = 3, nr_all = sizeof(f) / sizeof(f[0]);
	uint32_t lo, hi, si_lo, si_hi;
	struct ivm_last_ran *lr;
	bool si;

	if (o->task_se_exec_start == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"task_struct.se.exec_start not found");
	ivm_kernel_fields_span(f, nr_base, &lo, &hi);
	if (hi - lo > MAX_SPAN)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task_struct: cpu and se.exec_start %u bytes apart",
					hi - lo);
	lr = calloc(1, sizeof(*lr));
	if (!lr)
		return &ivm_enomem;
	lr->layout = layout;
	lr->gmem = gmem;
	lr->off_arrival = lr->off_pcount = IVM_KOFF_NONE;
	si = o->task_sched_info_last_arrival != IVM_KOFF_NONE &&
	     ivm_kernel_fields_span(f + nr_base, nr_all - nr_base, &si_lo,
				    &si_hi) &&
	     si_hi - si_lo <= MAX_SPAN;
	if (si) {
		uint32_t all_lo, all_hi;

		ivm_kernel_fields_span(f, nr_all, &all_lo, &all_hi);
		if (all_hi - all_lo <= MAX_SPAN) {
			lo = all_lo;
			hi = all_hi;
		} else {
			lr->si_split = true;
			lr->si_lo = si_lo;
			lr->si_span = si_hi - si_lo;
		}
	}
	forks_locate(lr);
	lr->lo = lo;
	lr->span = hi - lo;
	lr->off_cpu = o->task_cpu - lo;
	lr->off_on_cpu = o->task_on_cpu == IVM_KOFF_NONE ? IVM_KOFF_NONE :
			 o->task_on_cpu - lo;
	lr->off_exec_start = o->task_se_exec_start - lo;
	if (si) {
		uint32_t base = lr->si_split ? lr->si_lo : lo;

		lr->off_arrival = o->task_sched_info_last_arrival - base;
		if (o->task_sched_info_pcount != IVM_KOFF_NONE)
			lr->off_pcount = o->task_sched_info_pcount - base;
	}
	*ret = lr;
	return NULL;
}

static struct ivm_error *grow(struct ivm_last_ran *lr, size_t nr)
{
	struct candidate *cand;
	struct ivm_gmem_piece *pieces;
	size_t *piece_cand;
	uint8_t *buf, *si_buf = lr->si_buf;

	if (nr <= lr->cap)
		return NULL;
	cand = reallocarray(lr->cand, nr, sizeof(*cand));
	if (cand)
		lr->cand = cand;
	/* A span of each, and in the split layout a sched_info piece. */
	pieces = reallocarray(lr->pieces, 2 * nr + 1, sizeof(*pieces));
	if (pieces)
		lr->pieces = pieces;
	piece_cand = reallocarray(lr->piece_cand, 2 * nr, sizeof(*piece_cand));
	if (piece_cand)
		lr->piece_cand = piece_cand;
	buf = reallocarray(lr->buf, nr, lr->span);
	if (buf)
		lr->buf = buf;
	if (lr->si_split) {
		si_buf = reallocarray(lr->si_buf, nr, lr->si_span);
		if (si_buf)
			lr->si_buf = si_buf;
	}
	if (!cand || !pieces || !piece_cand || !buf ||
	    (lr->si_split && !si_buf))
		return &ivm_enomem;
	lr->cap = nr;
	return NULL;
}

/* The guest's threads, less the idle tasks, with their physical spans. */
static struct ivm_error *refresh(struct ivm_last_ran *lr, uint64_t now_ns)
{
	struct ivm_guest_task_list *list;
	struct ivm_error *err;
	size_t i, n = 0;

	lr->fresh = false;
	/* Before the walk: a fork during it counts as one after it. */
	lr->forks_walk_ok = false;
	if (lr->has_forks) {
		err = ivm_gmem_read_phys(lr->gmem, lr->forks_pa,
					 lr->forks_buf, 8);
		if (err && err->code == IVM_ERROR_GONE)
			return err;
		lr->forks_walk_ok = !err;
		lr->forks_walk = ivm_le64(lr->forks_buf);
		ivm_error_destroy(err);
	}
	lr->stats.walks++;
	err = ivm_kernel_task_list(lr->layout, 0, &list);
	if (err)
		return err;
	err = grow(lr, list->nr);
	if (err) {
		ivm_guest_task_list_destroy(list);
		return err;
	}
	for (i = 0; i < list->nr; i++) {
		struct candidate *c = &lr->cand[n];
		uint64_t task = list->tasks[i].addr;

		if (list->tasks[i].is_idle || task + lr->lo < task)
			continue;
		c->task = task;
		c->tgid = list->tasks[i].tgid;
		err = ivm_kernel_translate_range(lr->layout, task + lr->lo,
						 lr->span, &c->pa);
		c->mapped = !err;
		ivm_error_destroy(err);
		c->si_mapped = false;
		if (lr->si_split && task + lr->si_lo > task) {
			err = ivm_kernel_translate_range(lr->layout,
							 task + lr->si_lo,
							 lr->si_span,
							 &c->si_pa);
			c->si_mapped = !err;
			ivm_error_destroy(err);
		}
		n++;
	}
	/* A truncated walk still gives candidates; the next one may not be. */
	ivm_guest_task_list_destroy(list);
	lr->nr = n;
	lr->refreshed = true;
	lr->refreshed_at = now_ns;
	lr->gen++;
	return NULL;
}

/* Queue the candidates' spans (or sched_info pieces) for one batch. */
static size_t queue_all(struct ivm_last_ran *lr, bool si, size_t n)
{
	size_t i;

	for (i = 0; i < lr->nr; i++) {
		struct candidate *c = &lr->cand[i];

		if (si)
			c->si_ok = false;
		else
			c->ok = false;
		if (!(si ? c->si_mapped : c->mapped))
			continue;
		lr->pieces[n] = si ?
			(struct ivm_gmem_piece){
				.gpa = c->si_pa,
				.buf = lr->si_buf + i * lr->si_span,
				.len = lr->si_span } :
			(struct ivm_gmem_piece){ .gpa = c->pa,
						 .buf = lr->buf + i * lr->span,
						 .len = lr->span };
		/* Spans below nr, sched_info pieces from nr up. */
		lr->piece_cand[n++] = si ? lr->nr + i : i;
	}
	return n;
}

static bool *piece_ok(struct ivm_last_ran *lr, size_t piece)
{
	size_t k = lr->piece_cand[piece];

	return k < lr->nr ? &lr->cand[k].ok : &lr->cand[k - lr->nr].si_ok;
}

/*
 * Read every candidate's span and sched_info piece (if apart): one batch
 * (one system call), or one by one if that fails.  While held, what the
 * hold read already stands.
 */
static struct ivm_error *read_all(struct ivm_last_ran *lr)
{
	struct ivm_error *err;
	size_t i, n;

	if (lr->held && lr->fresh)
		return NULL;
	n = queue_all(lr, false, 0);
	if (lr->si_split)
		n = queue_all(lr, true, n);
	lr->fresh = lr->held;
	lr->forks_ok = false;
	if (!n)
		return NULL;
	/* The count of forks last, past the candidates' pieces. */
	if (lr->has_forks)
		lr->pieces[n] = (struct ivm_gmem_piece){
			.gpa = lr->forks_pa, .buf = lr->forks_buf, .len = 8 };
	err = ivm_gmem_read_phys_many(lr->gmem, lr->pieces,
				      n + lr->has_forks);
	if (!err) {
		for (i = 0; i < n; i++)
			*piece_ok(lr, i) = true;
		lr->forks_ok = lr->has_forks;
		lr->forks_now = ivm_le64(lr->forks_buf);
		return NULL;
	}
	if (err->code == IVM_ERROR_GONE)
		return err;
	ivm_error_destroy(err);
	/* A task freed and its page gone since the walk: tell it apart. */
	for (i = 0; i < n; i++) {
		err = ivm_gmem_read_phys(lr->gmem, lr->pieces[i].gpa,
					 lr->pieces[i].buf, lr->pieces[i].len);
		if (err && err->code == IVM_ERROR_GONE)
			return err;
		*piece_ok(lr, i) = !err;
		ivm_error_destroy(err);
	}
	lr->refreshed = false;	/* walk again next time */
	return NULL;
}

/* Candidate i's sched_info words as read (off_arrival, off_pcount), or NULL. */
static const uint8_t *si_words(const struct ivm_last_ran *lr, size_t i)
{
	if (lr->off_arrival == IVM_KOFF_NONE)
		return NULL;
	if (lr->si_split)
		return lr->cand[i].si_ok ? lr->si_buf + i * lr->si_span : NULL;
	return lr->cand[i].ok ? lr->buf + i * lr->span : NULL;
}

/* Whether candidate i, as read, is a task of cpu not of process skip_tgid. */
static bool of_cpu(const struct ivm_last_ran *lr, size_t i, unsigned int cpu,
		   int32_t skip_tgid)
{
	return lr->cand[i].ok &&
	       ivm_le32(lr->buf + i * lr->span + lr->off_cpu) == cpu &&
	       !(skip_tgid && lr->cand[i].tgid == skip_tgid);
}

/* Its sched_info words if so and they were read, else NULL. */
static const uint8_t *arrival_words(const struct ivm_last_ran *lr, size_t i,
				    unsigned int cpu, int32_t skip_tgid)
{
	return of_cpu(lr, i, cpu, skip_tgid) ? si_words(lr, i) : NULL;
}

static struct ivm_error *refresh_if_due(struct ivm_last_ran *lr,
					uint64_t now_ns)
{
	if (lr->refreshed && now_ns - lr->refreshed_at <
			     IVM_LAST_RAN_REFRESH_NS)
		return NULL;
	return refresh(lr, now_ns);
}

/*
 * The candidates as read are stale (forks since their walk): walk again,
 * if the last walk is IVM_LAST_RAN_STALE_NS old, and read them again.
 */
static struct ivm_error *rewalk_stale(struct ivm_last_ran *lr,
				      uint64_t now_ns)
{
	struct ivm_error *err;

	if (!stale(lr) || now_ns - lr->refreshed_at < IVM_LAST_RAN_STALE_NS)
		return NULL;
	lr->stats.stale_walks++;
	err = refresh(lr, now_ns);
	if (!err)
		err = read_all(lr);
	return err;
}

/* Every lookup's start: the candidates walked if due, and read. */
static struct ivm_error *read_candidates(struct ivm_last_ran *lr,
					 uint64_t now_ns)
{
	struct ivm_error *err = refresh_if_due(lr, now_ns);

	return err ? err : read_all(lr);
}

/*
 * The candidate stamped with clock or idle_stamp (0: none given) when it
 * stopped: the task that went to idle at that switch; 0 if none.
 */
static uint64_t stamped(const struct ivm_last_ran *lr, unsigned int cpu,
			int32_t skip_tgid, uint64_t clock, uint64_t idle_stamp)
{
	uint64_t best = 0;
	size_t i;

	for (i = 0; (clock || idle_stamp) && i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		uint64_t end = ivm_le64(b + lr->off_exec_start);

		if (!lr->cand[i].ok ||
		    (skip_tgid && lr->cand[i].tgid == skip_tgid) ||
		    !end || (end != clock && end != idle_stamp))
			continue;
		/* Two tasks on one stamp: only the one of this CPU is sure. */
		if (!best || ivm_le32(b + lr->off_cpu) == cpu)
			best = lr->cand[i].task;
	}
	return best;
}

/* No answer from stale candidates: an older task would be named wrongly. */
static struct ivm_error *refuse_stale(struct ivm_last_ran *lr,
				      unsigned int cpu)
{
	lr->stats.stale_refused++;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"CPU %u: %llu tasks forked since the task list was walked; one of them may be the answer",
				cpu, (unsigned long long)(lr->forks_now -
							  lr->forks_walk));
}

static struct ivm_error *find(struct ivm_last_ran *lr, unsigned int cpu,
			      int32_t skip_tgid, bool at, uint64_t clock,
			      uint64_t idle_stamp, uint64_t now_ns,
			      uint64_t *ret)
{
	uint64_t best = 0, best_start = 0;
	struct ivm_error *err;
	size_t i;

	err = read_candidates(lr, now_ns);
	if (err)
		return err;
	if (at)
		best = stamped(lr, cpu, skip_tgid, clock, idle_stamp);
	/* Not among candidates that miss forked tasks: walk them again. */
	if (!best && stale(lr)) {
		err = rewalk_stale(lr, now_ns);
		if (err)
			return err;
		if (at)
			best = stamped(lr, cpu, skip_tgid, clock, idle_stamp);
	}
	if (best) {
		lr->stats.exact++;
		*ret = best;
		return NULL;
	}
	/*
	 * No task stamped by the switch to idle (the CPU's clock moved on
	 * since, or the task is not a candidate): the latest of the CPU's
	 * tasks, unless a task forked since the walk may be later.
	 */
	if (stale(lr))
		return refuse_stale(lr, cpu);
	for (i = 0; i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		uint64_t start;

		if (!of_cpu(lr, i, cpu, skip_tgid))
			continue;
		/* Running elsewhere or still switching out: not it. */
		if (lr->off_on_cpu != IVM_KOFF_NONE &&
		    ivm_le32(b + lr->off_on_cpu))
			continue;
		start = ivm_le64(b + lr->off_exec_start);
		if (!best || start > best_start) {
			best = lr->cand[i].task;
			best_start = start;
		}
	}
	if (!best)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no task found that last ran on CPU %u",
					cpu);
	lr->stats.latest++;
	*ret = best;
	return NULL;
}

void ivm_last_ran_hold(struct ivm_last_ran *lr)
{
	lr->held = true;
	lr->fresh = false;
}

void ivm_last_ran_release(struct ivm_last_ran *lr)
{
	lr->held = false;
}

void ivm_last_ran_mark(struct ivm_last_ran *lr, unsigned int cpu,
		       uint64_t clock, uint64_t epoch)
{
	struct cpu_mark *m;
	size_t i;

	if (cpu >= MAX_MARK_CPUS || !clock ||
	    lr->off_pcount == IVM_KOFF_NONE || !lr->held || !lr->fresh)
		return;
	if (cpu >= lr->nr_marks) {
		m = reallocarray(lr->marks, cpu + 1, sizeof(*m));
		if (!m)
			return;
		memset(m + lr->nr_marks, 0,
		       (cpu + 1 - lr->nr_marks) * sizeof(*m));
		lr->marks = m;
		lr->nr_marks = cpu + 1;
	}
	m = &lr->marks[cpu];
	m->at = 0;
	if (m->cap < lr->nr) {
		uint64_t *pc = reallocarray(m->pcount, lr->nr, sizeof(*pc));

		if (!pc)
			return;
		m->pcount = pc;
		m->cap = lr->nr;
	}
	for (i = 0; i < lr->nr; i++) {
		const uint8_t *w = si_words(lr, i);

		m->pcount[i] = w ? ivm_le64(w + lr->off_pcount) : UNKNOWN;
	}
	m->at = clock;
	m->epoch = epoch;
	m->gen = lr->gen;
}

struct ivm_error *ivm_last_ran_find(struct ivm_last_ran *lr, unsigned int cpu,
				    int32_t skip_tgid, uint64_t now_ns,
				    uint64_t *ret)
{
	return find(lr, cpu, skip_tgid, false, 0, 0, now_ns, ret);
}

struct ivm_error *ivm_last_ran_find_at(struct ivm_last_ran *lr,
				       unsigned int cpu, int32_t skip_tgid,
				       uint64_t clock, uint64_t idle_stamp,
				       uint64_t now_ns, uint64_t *ret)
{
	return find(lr, cpu, skip_tgid, true, clock, idle_stamp, now_ns, ret);
}

/*
 * How many times candidate i was switched in since cpu's mark, from its
 * words w; UNKNOWN when the mark cannot say.
 */
static uint64_t arrivals_since_mark(const struct ivm_last_ran *lr,
				    const struct cpu_mark *m, size_t i,
				    const uint8_t *w)
{
	uint64_t now;

	if (!m || m->pcount[i] == UNKNOWN)
		return UNKNOWN;
	now = ivm_le64(w + lr->off_pcount);
	/* Counts only grow: one that went back is not this thread's. */
	return now >= m->pcount[i] ? now - m->pcount[i] : UNKNOWN;
}

/* cpu's mark, if one was taken for the candidates walked now; else NULL. */
static const struct cpu_mark *mark_of(const struct ivm_last_ran *lr,
				      unsigned int cpu)
{
	if (cpu >= lr->nr_marks || !lr->marks[cpu].at ||
	    lr->marks[cpu].gen != lr->gen)
		return NULL;
	return &lr->marks[cpu];
}

/*
 * Which of the first arrival's rivals ran first: see last_ran.h.  first is
 * the candidate with the smallest arrival above since; the mark of cpu,
 * when it was taken after since and before that arrival, says how often
 * each candidate was switched in since.
 */
static size_t first_by_mark(const struct ivm_last_ran *lr, unsigned int cpu,
			    int32_t skip_tgid, uint64_t since, size_t first,
			    uint64_t first_arrival)
{
	const struct cpu_mark *m = mark_of(lr, cpu);
	size_t i, twice = SIZE_MAX;

	/* A mark of an earlier period, or one taken after the CPU woke. */
	if (!m || m->at < since || first_arrival <= m->at ||
	    arrivals_since_mark(lr, m, first, si_words(lr, first)) != 1)
		return first;
	for (i = 0; i < lr->nr; i++) {
		const uint8_t *w = arrival_words(lr, i, cpu, skip_tgid);
		uint64_t n;

		if (i == first || !w || ivm_le64(w + lr->off_arrival) <= since)
			continue;
		n = arrivals_since_mark(lr, m, i, w);
		/* Switched in since since but not since the mark: a race. */
		if (n == 0 || n == UNKNOWN)
			return first;
		if (n >= 2) {
			if (twice != SIZE_MAX)
				return first;	/* either could be */
			twice = i;
		}
	}
	return twice != SIZE_MAX ? twice : first;
}

struct ivm_error *ivm_last_ran_first_since(struct ivm_last_ran *lr,
					   unsigned int cpu, int32_t skip_tgid,
					   uint64_t since, uint64_t now_ns,
					   uint64_t *ret, uint64_t *arrival)
{
	uint64_t best_arrival = 0;
	size_t i, best = SIZE_MAX;
	struct ivm_error *err;

	if (lr->off_arrival == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel has no sched_info.last_arrival");
	err = read_candidates(lr, now_ns);
	if (!err)
		err = rewalk_stale(lr, now_ns);
	if (err)
		return err;
	/* A child forked and gone since the walk may have arrived first. */
	if (stale(lr))
		return refuse_stale(lr, cpu);
	for (i = 0; i < lr->nr; i++) {
		const uint8_t *w = arrival_words(lr, i, cpu, skip_tgid);
		uint64_t at;

		if (!w)
			continue;
		at = ivm_le64(w + lr->off_arrival);
		if (at <= since)
			continue;
		if (best == SIZE_MAX || at < best_arrival) {
			best = i;
			best_arrival = at;
		}
	}
	if (best == SIZE_MAX)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no task switched in on CPU %u since %llu",
					cpu, (unsigned long long)since);
	best = first_by_mark(lr, cpu, skip_tgid, since, best, best_arrival);
	*ret = lr->cand[best].task;
	if (arrival)
		*arrival = best_arrival;
	return NULL;
}

struct ivm_error *ivm_last_ran_window(struct ivm_last_ran *lr, unsigned int cpu,
				      int32_t skip_tgid, uint64_t since,
				      uint64_t epoch, uint64_t now_ns,
				      struct ivm_last_ran_run *runs,
				      size_t max, size_t *nr)
{
	const struct cpu_mark *m = NULL;
	struct ivm_error *err;
	size_t i, n = 0;

	*nr = 0;
	if (lr->off_arrival == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel has no sched_info.last_arrival");
	err = read_candidates(lr, now_ns);
	if (!err)
		err = rewalk_stale(lr, now_ns);
	if (err)
		return err;
	if (stale(lr))
		return refuse_stale(lr, cpu);
	/* Read after the refresh: a refresh voids the marks. */
	m = epoch != UNKNOWN ? mark_of(lr, cpu) : NULL;
	if (m && (m->epoch != epoch || m->at > since))
		m = NULL;
	for (i = 0; i < lr->nr && n < max; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		const uint8_t *w = arrival_words(lr, i, cpu, skip_tgid);
		struct ivm_last_ran_run *r = &runs[n];

		if (!w)
			continue;
		r->arrival = ivm_le64(w + lr->off_arrival);
		r->end = ivm_le64(b + lr->off_exec_start);
		if (r->arrival <= since && r->end <= since)
			continue;
		r->task = lr->cand[i].task;
		r->tgid = lr->cand[i].tgid;
		r->on_cpu = lr->off_on_cpu != IVM_KOFF_NONE &&
			    ivm_le32(b + lr->off_on_cpu);
		r->arrivals = arrivals_since_mark(lr, m, i, w);
		n++;
	}
	*nr = n;
	return NULL;
}

const struct ivm_last_ran_stats *ivm_last_ran_stats(const struct ivm_last_ran *lr)
{
	return &lr->stats;
}
