// SPDX-License-Identifier: MIT
/*
 * last_ran's candidates: walked from the task list, and read, all of them
 * or the hot ones (last_ran.h).
 */
#include <stdlib.h>

#include "kernel/last_ran_int.h"

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

/*
 * Each CPU's count of switch-ins, physical addresses once (the per-CPU
 * areas never move).  Without all of them (no CONFIG_SCHEDSTATS, no
 * pcount of the tasks) every read is of all candidates, as before.
 */
static void rq_pc_locate(struct ivm_last_ran *lr)
{
	unsigned int cpu, nr = ivm_kernel_layout_nr_cpus(lr->layout);
	struct ivm_error *err = NULL;
	uint64_t va;

	if (lr->off_pcount == IVM_KOFF_NONE || !nr || nr > MAX_MARK_CPUS)
		return;
	lr->rq_pc_pa = calloc(nr, sizeof(*lr->rq_pc_pa));
	lr->rq_pc_buf = calloc(nr, 8);
	if (!lr->rq_pc_pa || !lr->rq_pc_buf)
		return;
	for (cpu = 0; cpu < nr && !err; cpu++) {
		err = ivm_kernel_cpu_rq_pcount_va(lr->layout, cpu, &va);
		if (!err)
			err = ivm_kernel_translate_range(lr->layout, va, 8,
							 &lr->rq_pc_pa[cpu]);
	}
	lr->has_rq_pc = !err;
	lr->nr_rq = nr;
	ivm_error_destroy(err);
}

/*
 * Each CPU's run-queue clock, for forks seen one CPU at a time; without
 * them or se.nr_migrations, forks refuse every CPU's lookups, as before.
 */
static void rq_clock_locate(struct ivm_last_ran *lr)
{
	unsigned int cpu, nr = lr->nr_rq;
	struct ivm_error *err = NULL;
	uint64_t va;

	if (!lr->has_rq_pc || !lr->has_forks || lr->off_mig == IVM_KOFF_NONE)
		return;
	lr->rq_clock_pa = calloc(nr, sizeof(*lr->rq_clock_pa));
	lr->rq_end_buf = calloc(nr, 8);
	lr->rq_clock_buf = calloc(nr, 8);
	lr->rq_base = calloc(nr, sizeof(*lr->rq_base));
	lr->clock_prev = calloc(nr, sizeof(*lr->clock_prev));
	lr->clean_from = calloc(nr, sizeof(*lr->clean_from));
	if (!lr->rq_clock_pa || !lr->rq_end_buf || !lr->rq_clock_buf ||
	    !lr->rq_base || !lr->clock_prev || !lr->clean_from)
		return;
	for (cpu = 0; cpu < nr && !err; cpu++) {
		lr->clean_from[cpu] = UNKNOWN;
		err = ivm_kernel_cpu_rq_clock_va(lr->layout, cpu, &va);
		if (!err)
			err = ivm_kernel_translate_range(lr->layout, va, 8,
							 &lr->rq_clock_pa[cpu]);
	}
	lr->has_local = !err;
	ivm_error_destroy(err);
}

void last_ran_locate_counts(struct ivm_last_ran *lr)
{
	forks_locate(lr);
	rq_pc_locate(lr);
	rq_clock_locate(lr);
}

void last_ran_free_counts(struct ivm_last_ran *lr)
{
	free(lr->rq_pc_pa);
	free(lr->rq_pc_buf);
	free(lr->rq_clock_pa);
	free(lr->rq_end_buf);
	free(lr->rq_clock_buf);
	free(lr->rq_base);
	free(lr->clock_prev);
	free(lr->clean_from);
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
	/*
	 * A span of each, and in the split layout a sched_info piece; the
	 * count of forks and the CPUs' counts of switch-ins (twice) and
	 * clocks.  piece_cand is indexed as pieces (a full read's tasks come
	 * after the counts).
	 */
	pieces = reallocarray(lr->pieces, 2 * nr + 1 + 3 * lr->nr_rq,
			      sizeof(*pieces));
	if (pieces)
		lr->pieces = pieces;
	piece_cand = reallocarray(lr->piece_cand, 2 * nr + 1 + 3 * lr->nr_rq,
				  sizeof(*piece_cand));
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

/* When a candidate last ran, kept across walks by its task's address. */
struct ran {
	uint64_t task, at;
};

static int ran_cmp(const void *a, const void *b)
{
	const struct ran *x = a, *y = b;

	return x->task < y->task ? -1 : x->task > y->task;
}

/* The candidates' ran_at by task, sorted; NULL (all taken as hot): no memory. */
static struct ran *ran_save(const struct ivm_last_ran *lr)
{
	struct ran *r = malloc((lr->nr ? lr->nr : 1) * sizeof(*r));
	size_t i;

	if (!r)
		return NULL;
	for (i = 0; i < lr->nr; i++)
		r[i] = (struct ran){ lr->cand[i].task, lr->cand[i].ran_at };
	qsort(r, lr->nr, sizeof(*r), ran_cmp);
	return r;
}

/* Task's ran_at from the walk before; now_ns (hot) for a task new to us. */
static uint64_t ran_of(const struct ran *r, size_t nr, uint64_t task,
		       uint64_t now_ns)
{
	const struct ran key = { task, 0 }, *hit;

	hit = r ? bsearch(&key, r, nr, sizeof(*r), ran_cmp) : NULL;
	return hit ? hit->at : now_ns;
}

/*
 * The task list, the candidates of the walk before as its hint: the
 * tasks that stayed cost one batch, not two reads each (kernel_layout.h).
 */
static struct ivm_error *walk(struct ivm_last_ran *lr,
			      struct ivm_guest_task_list **ret)
{
	uint64_t *hint = lr->nr ? malloc(lr->nr * sizeof(*hint)) : NULL;
	uint64_t calls = ivm_gmem_backend_calls(lr->gmem);
	struct ivm_error *err;
	size_t i;

	for (i = 0; hint && i < lr->nr; i++)
		hint[i] = lr->cand[i].task;
	err = ivm_kernel_task_list_hinted(lr->layout, 0, hint,
					  hint ? lr->nr : 0, ret);
	free(hint);
	lr->stats.walk_reads += ivm_gmem_backend_calls(lr->gmem) - calls;
	if (!err)
		lr->stats.walk_tasks += (*ret)->nr;
	return err;
}

/* The guest's threads, less the idle tasks, with their physical spans. */
struct ivm_error *last_ran_refresh(struct ivm_last_ran *lr, uint64_t now_ns)
{
	struct ivm_guest_task_list *list;
	struct ivm_error *err;
	size_t i, n = 0, nr_old = lr->nr;
	struct ran *old;

	lr->fresh = false;
	lr->base_ok = false;
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
	err = walk(lr, &list);
	if (err)
		return err;
	old = ran_save(lr);
	err = grow(lr, list->nr);
	if (err) {
		free(old);
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
		c->pc_ok = false;
		c->ran_at = ran_of(old, nr_old, task, now_ns);
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
	free(old);
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

/* Candidate i's pcount as read (its sched_info words read), or false. */
static bool pcount_of(const struct ivm_last_ran *lr, size_t i, uint64_t *ret)
{
	const uint8_t *w = si_words(lr, i);

	if (!w || lr->off_pcount == IVM_KOFF_NONE)
		return false;
	*ret = ivm_le64(w + lr->off_pcount);
	return true;
}

/* The CPUs' counts of switch-ins as pieces from n; the next free piece. */
static size_t queue_rq(struct ivm_last_ran *lr, size_t n)
{
	unsigned int cpu;

	for (cpu = 0; cpu < lr->nr_rq; cpu++)
		lr->pieces[n++] = (struct ivm_gmem_piece){
			.gpa = lr->rq_pc_pa[cpu], .buf = lr->rq_pc_buf + cpu * 8,
			.len = 8 };
	return n;
}

static uint64_t rq_sum(const struct ivm_last_ran *lr)
{
	uint64_t sum = 0;
	unsigned int cpu;

	for (cpu = 0; cpu < lr->nr_rq; cpu++)
		sum += ivm_le64(lr->rq_pc_buf + cpu * 8);
	return sum;
}

/*
 * Candidate i's pcount read now: it ran since its last read if the count
 * moved, or runs now; either keeps it hot (last_ran.h).
 */
static void seen(struct ivm_last_ran *lr, size_t i, uint64_t pc,
		 uint64_t now_ns)
{
	struct candidate *c = &lr->cand[i];

	if ((c->pc_ok && pc != c->seen_pc) || running(lr, i))
		c->ran_at = now_ns;
	c->seen_pc = pc;
}

static uint32_t cpu_of(const struct ivm_last_ran *lr, size_t i)
{
	return ivm_le32(lr->buf + i * lr->span + lr->off_cpu);
}

static uint64_t mig_of(const struct ivm_last_ran *lr, size_t i)
{
	return ivm_le64(lr->buf + i * lr->span + lr->off_mig);
}

/*
 * After a full read that bracketed the tasks with the CPUs' counts: which
 * CPUs had a switch-in no candidate accounts for since the full read
 * before (had_base), and so clean_from (last_ran.h).  Before the new base
 * is taken: the candidates' base_* are still of the full read before.
 */
static void local_update(struct ivm_last_ran *lr, bool had_base, bool stale)
{
	unsigned int cpu;
	uint64_t pc, *known = NULL;
	size_t i;

	if (had_base && stale)
		known = calloc(lr->nr_rq, sizeof(*known));
	for (i = 0; known && i < lr->nr; i++) {
		const struct candidate *c = &lr->cand[i];

		/* Changed CPU (or read torn): its switch-ins are no CPU's. */
		if (!c->pc_ok || !pcount_of(lr, i, &pc) || pc < c->base_pc ||
		    cpu_of(lr, i) != c->base_cpu || c->base_cpu >= lr->nr_rq ||
		    mig_of(lr, i) != c->base_mig)
			continue;
		known[c->base_cpu] += pc - c->base_pc;
	}
	for (cpu = 0; cpu < lr->nr_rq; cpu++) {
		uint64_t end = ivm_le64(lr->rq_end_buf + cpu * 8);
		uint64_t clock = ivm_le64(lr->rq_clock_buf + cpu * 8);

		if (!stale) {
			lr->clean_from[cpu] = 0;
		} else if (!known || end < lr->rq_base[cpu] ||
			   end - lr->rq_base[cpu] != known[cpu]) {
			/* Any switch-in up to clock may have been unknown. */
			lr->clean_from[cpu] = clock;
		} else if (lr->clean_from[cpu] == UNKNOWN) {
			/* All since the full read before: after its clock. */
			lr->clean_from[cpu] = lr->clock_prev[cpu];
		}
		lr->clock_prev[cpu] = clock;
	}
	free(known);
}

/* After a full read that began with the CPUs' counts: the new base. */
static void take_base(struct ivm_last_ran *lr, uint64_t now_ns)
{
	size_t i;
	uint64_t pc;

	for (i = 0; i < lr->nr; i++) {
		struct candidate *c = &lr->cand[i];

		if (!pcount_of(lr, i, &pc)) {
			c->pc_ok = false;
			continue;
		}
		seen(lr, i, pc, now_ns);
		c->base_pc = pc;
		c->base_cpu = cpu_of(lr, i);
		c->base_mig = lr->off_mig != IVM_KOFF_NONE ? mig_of(lr, i) : 0;
		c->pc_ok = true;
	}
	lr->base_sum = rq_sum(lr);
	for (i = 0; lr->has_local && i < lr->nr_rq; i++)
		lr->rq_base[i] = ivm_le64(lr->rq_pc_buf + i * 8);
	lr->seen_sum = 0;
	lr->base_ok = true;
}

/* A full read that failed: nothing is known of any CPU until the next two. */
static void local_forget(struct ivm_last_ran *lr)
{
	unsigned int cpu;

	for (cpu = 0; lr->has_local && cpu < lr->nr_rq; cpu++)
		lr->clean_from[cpu] = UNKNOWN;
}

bool last_ran_clean_after(const struct ivm_last_ran *lr, unsigned int cpu,
			  uint64_t after)
{
	if (!lr->has_forks || !lr->forks_walk_ok || !lr->forks_ok ||
	    lr->forks_now == lr->forks_walk)
		return true;
	return lr->has_local && cpu < lr->nr_rq &&
	       lr->clean_from[cpu] != UNKNOWN && lr->clean_from[cpu] <= after;
}

/*
 * Read every candidate's span and sched_info piece (if apart): one batch
 * (one system call), or one by one if that fails.  The CPUs' counts of
 * switch-ins come first: the base of the hot reads after it.
 */
static struct ivm_error *read_full(struct ivm_last_ran *lr, uint64_t now_ns)
{
	bool had_base = lr->base_ok;
	struct ivm_error *err;
	size_t i, n, first, end;
	unsigned int cpu;

	first = lr->has_rq_pc ? queue_rq(lr, 0) : 0;
	n = queue_all(lr, false, first);
	if (lr->si_split)
		n = queue_all(lr, true, n);
	lr->forks_ok = false;
	lr->base_ok = false;
	if (n == first)
		return NULL;
	/*
	 * The count of forks last, past the candidates' pieces; then the
	 * CPUs' counts again and their clocks (last_ran.h), in that order.
	 */
	end = n;
	if (lr->has_forks)
		lr->pieces[end++] = (struct ivm_gmem_piece){
			.gpa = lr->forks_pa, .buf = lr->forks_buf, .len = 8 };
	for (cpu = 0; lr->has_local && cpu < lr->nr_rq; cpu++)
		lr->pieces[end++] = (struct ivm_gmem_piece){
			.gpa = lr->rq_pc_pa[cpu],
			.buf = lr->rq_end_buf + cpu * 8, .len = 8 };
	for (cpu = 0; lr->has_local && cpu < lr->nr_rq; cpu++)
		lr->pieces[end++] = (struct ivm_gmem_piece){
			.gpa = lr->rq_clock_pa[cpu],
			.buf = lr->rq_clock_buf + cpu * 8, .len = 8 };
	lr->stats.full_reads++;
	err = ivm_gmem_read_phys_many(lr->gmem, lr->pieces, end);
	if (!err) {
		for (i = first; i < n; i++)
			*piece_ok(lr, i) = true;
		lr->forks_ok = lr->has_forks;
		lr->forks_now = ivm_le64(lr->forks_buf);
		if (lr->has_local)
			local_update(lr, had_base, lr->forks_walk_ok &&
				     lr->forks_now != lr->forks_walk);
		if (lr->has_rq_pc)
			take_base(lr, now_ns);
		return NULL;
	}
	local_forget(lr);
	if (err->code == IVM_ERROR_GONE)
		return err;
	ivm_error_destroy(err);
	/* A task freed and its page gone since the walk: tell it apart. */
	for (i = first; i < n; i++) {
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

/* Whether candidate i is read by a hot read (last_ran.h). */
static bool hot(const struct ivm_last_ran *lr, size_t i, uint64_t now_ns)
{
	const struct candidate *c = &lr->cand[i];

	return c->pc_ok && c->mapped && (!lr->si_split || c->si_mapped) &&
	       (now_ns - c->ran_at < IVM_LAST_RAN_HOT_NS || running(lr, i));
}

/*
 * Read the hot candidates, the count of forks, then the CPUs' counts of
 * switch-ins; true when they account for every switch-in since the full
 * read (last_ran.h), so all candidates' words as held stand.  False: a
 * full read must follow (the hot ones' buffers may hold the new words,
 * their flags and counts not).  *errp: the guest is gone.
 */
static bool read_hot(struct ivm_last_ran *lr, uint64_t now_ns,
		     struct ivm_error **errp)
{
	struct ivm_error *err;
	uint64_t pc, sum;
	size_t i, n = 0;

	for (i = 0; i < lr->nr; i++) {
		struct candidate *c = &lr->cand[i];

		c->in_hot = hot(lr, i, now_ns);
		if (!c->in_hot)
			continue;
		lr->pieces[n++] = (struct ivm_gmem_piece){
			.gpa = c->pa, .buf = lr->buf + i * lr->span,
			.len = lr->span };
		if (lr->si_split)
			lr->pieces[n++] = (struct ivm_gmem_piece){
				.gpa = c->si_pa,
				.buf = lr->si_buf + i * lr->si_span,
				.len = lr->si_span };
	}
	if (lr->has_forks)
		lr->pieces[n++] = (struct ivm_gmem_piece){
			.gpa = lr->forks_pa, .buf = lr->forks_buf, .len = 8 };
	n = queue_rq(lr, n);
	err = ivm_gmem_read_phys_many(lr->gmem, lr->pieces, n);
	if (err && err->code == IVM_ERROR_GONE) {
		*errp = err;
		return true;
	}
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	sum = lr->seen_sum;
	for (i = 0; i < lr->nr; i++) {
		if (!lr->cand[i].in_hot)
			continue;
		pc = ivm_le64((lr->si_split ? lr->si_buf + i * lr->si_span :
					      lr->buf + i * lr->span) +
			      lr->off_pcount);
		/* Counts only grow: one that went back is another task's. */
		if (pc < lr->cand[i].seen_pc)
			goto miss;
		sum += pc - lr->cand[i].seen_pc;
	}
	if (rq_sum(lr) - lr->base_sum != sum)
		goto miss;
	for (i = 0; i < lr->nr; i++) {
		if (!lr->cand[i].in_hot)
			continue;
		lr->cand[i].ok = lr->cand[i].si_ok = true;
		pc = ivm_le64((lr->si_split ? lr->si_buf + i * lr->si_span :
					      lr->buf + i * lr->span) +
			      lr->off_pcount);
		seen(lr, i, pc, now_ns);
	}
	lr->seen_sum = sum;
	lr->forks_ok = lr->has_forks;
	lr->forks_now = ivm_le64(lr->forks_buf);
	lr->stats.hot_reads++;
	return true;
miss:
	lr->stats.hot_misses++;
	return false;
}

struct ivm_error *last_ran_read_all(struct ivm_last_ran *lr, uint64_t now_ns)
{
	struct ivm_error *err = NULL;

	if (lr->held && lr->fresh)
		return NULL;
	lr->fresh = lr->held;
	if (lr->base_ok && read_hot(lr, now_ns, &err))
		return err;
	return read_full(lr, now_ns);
}
