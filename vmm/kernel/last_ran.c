// SPDX-License-Identifier: MIT
/* Who ran last on an idle CPU; see last_ran.h for why and how. */
#include <stdlib.h>
#include <string.h>

#include "kernel/last_ran_int.h"

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
	last_ran_free_counts(lr);
	free(lr);
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
	struct ivm_kernel_field f[] = {
		{ o->task_cpu, 4 }, { o->task_on_cpu, 4 },
		{ o->task_se_exec_start, 8 }, { o->task_se_nr_migrations, 8 },
		{ o->task_sched_info_last_arrival, 8 },
		{ o->task_sched_info_pcount, 8 },
	};
	const size_t nr_base = 4, nr_all = sizeof(f) / sizeof(f[0]);
	uint32_t lo, hi, si_lo, si_hi;
	struct ivm_last_ran *lr;
	bool si;

	if (o->task_se_exec_start == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"task_struct.se.exec_start not found");
	ivm_kernel_fields_span(f, nr_base, &lo, &hi);
	/* se.nr_migrations only where it comes with the rest (last_ran.h). */
	if (hi - lo > MAX_SPAN) {
		f[3].off = IVM_KOFF_NONE;
		ivm_kernel_fields_span(f, nr_base, &lo, &hi);
	}
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
	lr->lo = lo;
	lr->span = hi - lo;
	lr->off_cpu = o->task_cpu - lo;
	lr->off_on_cpu = o->task_on_cpu == IVM_KOFF_NONE ? IVM_KOFF_NONE :
			 o->task_on_cpu - lo;
	lr->off_exec_start = o->task_se_exec_start - lo;
	lr->off_mig = f[3].off == IVM_KOFF_NONE ? IVM_KOFF_NONE :
		      f[3].off - lo;
	if (si) {
		uint32_t base = lr->si_split ? lr->si_lo : lo;

		lr->off_arrival = o->task_sched_info_last_arrival - base;
		if (o->task_sched_info_pcount != IVM_KOFF_NONE)
			lr->off_pcount = o->task_sched_info_pcount - base;
	}
	last_ran_locate_counts(lr);
	*ret = lr;
	return NULL;
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
	return last_ran_refresh(lr, now_ns);
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
	err = last_ran_refresh(lr, now_ns);
	if (!err)
		err = last_ran_read_all(lr, now_ns);
	return err;
}

/* Every lookup's start: the candidates walked if due, and read. */
static struct ivm_error *read_candidates(struct ivm_last_ran *lr,
					 uint64_t now_ns)
{
	struct ivm_error *err = refresh_if_due(lr, now_ns);

	return err ? err : last_ran_read_all(lr, now_ns);
}

/*
 * The candidate stamped with clock or idle_stamp (0: none given) when it
 * stopped: the task that went to idle at that switch; 0 if none, and
 * *tied when the stamps cannot tell which of several it is.
 *
 * A run-queue clock can stand still over several switches (an unstable
 * sched_clock is held to the tick's: seen on web01 under TCG, nginx,
 * php-fpm and wrk switched in and out within one value), and then every
 * task that stopped in that while has the stamp.  The one running when
 * the clock stopped arrived before it; those switched in since arrived at
 * it.  So of the CPU's tasks on the stamp, the last is the only one that
 * arrived at it, or the only one at all; with two or more arrived at it
 * (or no arrival to tell), either may have run last.
 *
 * One of them running (on_cpu) tells the clock given is of a switch in:
 * a wakeup that skips the next clock update stamps the task it brings
 * with the clock a look read while the CPU still idled (web01: nginx
 * named for php-fpm's switch to idle).  Tied too: the stamp is not the
 * switch to idle's.
 */
static uint64_t stamped(const struct ivm_last_ran *lr, unsigned int cpu,
			int32_t skip_tgid, uint64_t clock, uint64_t idle_stamp,
			bool *tied)
{
	uint64_t other = 0, first = 0, arrived = 0;
	size_t i, nr_here = 0, nr_arrived = 0;

	*tied = false;
	for (i = 0; (clock || idle_stamp) && i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		const uint8_t *w = si_words(lr, i);
		uint64_t end = ivm_le64(b + lr->off_exec_start);

		if (!lr->cand[i].ok ||
		    (skip_tgid && lr->cand[i].tgid == skip_tgid) ||
		    !end || (end != clock && end != idle_stamp))
			continue;
		/* Two tasks on one stamp: only one of this CPU is sure. */
		if (ivm_le32(b + lr->off_cpu) != cpu) {
			if (!other)
				other = lr->cand[i].task;
			continue;
		}
		if (!nr_here++)
			first = lr->cand[i].task;
		if (running(lr, i))
			nr_arrived = 2;
		else if (w && ivm_le64(w + lr->off_arrival) >= end) {
			nr_arrived++;
			arrived = lr->cand[i].task;
		}
	}
	if (nr_here == 1 && nr_arrived < 2)
		return first;
	if (nr_here && nr_arrived == 1)
		return arrived;
	if (nr_here) {
		*tied = true;
		return 0;
	}
	return other;
}

/* Several tasks stopped at the switch's stamp: naming one is a guess. */
static struct ivm_error *refuse_tied(struct ivm_last_ran *lr,
				     unsigned int cpu, uint64_t clock)
{
	lr->stats.tied_refused++;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"CPU %u: tasks switched in and out at clock %llu; which went to idle is not known",
				cpu, (unsigned long long)clock);
}

/* The CPU runs a task again: its latest stopped task is a guess. */
static struct ivm_error *refuse_running(struct ivm_last_ran *lr,
					unsigned int cpu)
{
	lr->stats.running_refused++;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"CPU %u runs a task again: which went to idle is not known",
				cpu);
}

/*
 * Stale candidates answer for cpu only if no task they miss was switched
 * in there after the clock after (last_ran.h); the lookup's counts.
 */
static bool answers(struct ivm_last_ran *lr, unsigned int cpu,
		    uint64_t after)
{
	if (!stale(lr))
		return true;
	if (!last_ran_clean_after(lr, cpu, after))
		return false;
	lr->stats.stale_local++;
	return true;
}

/* No answer from stale candidates: an older task would be named wrongly. */
static struct ivm_error *refuse_stale(struct ivm_last_ran *lr,
				      unsigned int cpu, uint64_t *count)
{
	(*count)++;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"CPU %u: %llu tasks forked since the task list was walked; one of them may be the answer",
				cpu, (unsigned long long)(lr->forks_now -
							  lr->forks_walk));
}

/*
 * The candidates read for a lookup of what ran on cpu after since: walked
 * again if a task they miss may have been switched in there since, and
 * refused (counted in *refused) if one still may.
 */
static struct ivm_error *read_since(struct ivm_last_ran *lr, unsigned int cpu,
				    uint64_t since, uint64_t now_ns,
				    uint64_t *refused)
{
	struct ivm_error *err = read_candidates(lr, now_ns);

	if (err || answers(lr, cpu, since))
		return err;
	err = rewalk_stale(lr, now_ns);
	if (err || answers(lr, cpu, since))
		return err;
	return refuse_stale(lr, cpu, refused);
}

/*
 * The latest of cpu's tasks, in *start its stamp; 0 if none, or if one of
 * them runs (*runs).
 */
static uint64_t latest(const struct ivm_last_ran *lr, unsigned int cpu,
		       int32_t skip_tgid, uint64_t *start_ret, bool *runs)
{
	uint64_t best = 0, best_start = 0;
	size_t i;

	for (i = 0; i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		uint64_t start;

		if (!of_cpu(lr, i, cpu, skip_tgid))
			continue;
		/*
		 * Running there: the CPU left idle since the look, and the
		 * task that went to idle may be this one, run again (its
		 * stamp moved on: web01, kworker named for php-fpm), or one
		 * it left behind.  Still switching out: it is, but unsure.
		 */
		if (running(lr, i)) {
			*runs = true;
			return 0;
		}
		start = ivm_le64(b + lr->off_exec_start);
		if (!best || start > best_start) {
			best = lr->cand[i].task;
			best_start = start;
		}
	}
	*start_ret = best_start;
	return best;
}

static struct ivm_error *find(struct ivm_last_ran *lr, unsigned int cpu,
			      int32_t skip_tgid, bool at, uint64_t clock,
			      uint64_t idle_stamp, uint64_t now_ns,
			      uint64_t *ret)
{
	uint64_t best = 0, best_start = 0;
	struct ivm_error *err;
	int pass;

	err = read_candidates(lr, now_ns);
	/*
	 * The task stamped by the switch to idle is the one, forks or not.
	 * Else the latest of the CPU's tasks, unless a task forked since the
	 * walk was switched in there after it (the CPU's counts tell):
	 * then walk again, at most every IVM_LAST_RAN_STALE_NS, and ask once
	 * more.
	 */
	for (pass = 0; !err && pass < 2; pass++) {
		bool tied = false, runs = false;

		best = at ? stamped(lr, cpu, skip_tgid, clock, idle_stamp,
				    &tied) : 0;
		/* Nor the CPU's latest task: it is one of them. */
		if (tied)
			return refuse_tied(lr, cpu, clock ? clock : idle_stamp);
		if (best) {
			lr->stats.exact++;
			*ret = best;
			return NULL;
		}
		best = latest(lr, cpu, skip_tgid, &best_start, &runs);
		if (runs)
			return refuse_running(lr, cpu);
		/* Stamped after the CPU's last unknown switch-in: it stands. */
		if (!stale(lr) || (best && best_start &&
				   answers(lr, cpu, best_start - 1)))
			break;
		if (pass == 0)
			err = rewalk_stale(lr, now_ns);
		else
			return refuse_stale(lr, cpu, &lr->stats.stale_refused);
	}
	if (err)
		return err;
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
	err = read_since(lr, cpu, since, now_ns,
			 &lr->stats.stale_refused_first);
	if (err)
		return err;
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
	err = read_since(lr, cpu, since, now_ns,
			 &lr->stats.stale_refused_window);
	if (err)
		return err;
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
