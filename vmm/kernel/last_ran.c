// SPDX-License-Identifier: MIT
/* Who ran last on an idle CPU; see last_ran.h for why and how. */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/last_ran.h"

/* More than any task_struct span we read; bounds a hostile layout. */
#define MAX_SPAN 4096

struct candidate {
	uint64_t task;
	int32_t tgid;		/* as of the walk */
	uint64_t pa;
	bool mapped;		/* pa is valid, span contiguous */
	bool ok;		/* read in this lookup */
	uint64_t arrival_pa;	/* sched_info.last_arrival, when mapped */
	bool arrival_mapped;
	bool arrival_ok;
};

struct ivm_last_ran {
	const struct ivm_kernel_layout *layout;
	struct ivm_gmem *gmem;
	uint32_t lo, span;		/* of task_struct read per task */
	uint32_t off_cpu, off_on_cpu, off_exec_start;
	uint32_t off_arrival;		/* from the task; IVM_KOFF_NONE: absent */
	uint8_t *arrivals;		/* nr * 8 */
	struct candidate *cand;
	size_t nr, cap;
	uint8_t *buf;			/* nr * span */
	struct ivm_gmem_piece *pieces;
	size_t *piece_cand;
	bool refreshed;
	uint64_t refreshed_at;
	/* Held (ivm_last_ran_hold): which words the hold has read. */
	bool held, span_fresh, arrival_fresh;
};

void ivm_last_ran_destroy(struct ivm_last_ran *lr)
{
	if (!lr)
		return;
	free(lr->cand);
	free(lr->buf);
	free(lr->arrivals);
	free(lr->pieces);
	free(lr->piece_cand);
	free(lr);
}

struct ivm_error *ivm_last_ran_create(const struct ivm_kernel_layout *layout,
				      struct ivm_gmem *gmem,
				      struct ivm_last_ran **ret)
{
	const struct ivm_kernel_offsets *o = ivm_kernel_layout_offsets(layout);
	const struct ivm_kernel_field f[] = {
		{ o->task_cpu, 4 }, { o->task_on_cpu, 4 },
		{ o->task_se_exec_start, 8 },
	};
	uint32_t lo, hi;
	struct ivm_last_ran *lr;

	if (o->task_se_exec_start == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"task_struct.se.exec_start not found");
	ivm_kernel_fields_span(f, sizeof(f) / sizeof(f[0]), &lo, &hi);
	if (hi - lo > MAX_SPAN)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task_struct: cpu and se.exec_start %u bytes apart",
					hi - lo);
	lr = calloc(1, sizeof(*lr));
	if (!lr)
		return &ivm_enomem;
	lr->layout = layout;
	lr->gmem = gmem;
	lr->lo = lo;
	lr->span = hi - lo;
	lr->off_cpu = o->task_cpu - lo;
	lr->off_on_cpu = o->task_on_cpu == IVM_KOFF_NONE ? IVM_KOFF_NONE :
			 o->task_on_cpu - lo;
	lr->off_exec_start = o->task_se_exec_start - lo;
	lr->off_arrival = o->task_sched_info_last_arrival;
	*ret = lr;
	return NULL;
}

static struct ivm_error *grow(struct ivm_last_ran *lr, size_t nr)
{
	struct candidate *cand;
	struct ivm_gmem_piece *pieces;
	size_t *piece_cand;
	uint8_t *buf, *arrivals;

	if (nr <= lr->cap)
		return NULL;
	cand = reallocarray(lr->cand, nr, sizeof(*cand));
	if (cand)
		lr->cand = cand;
	/* A span and a last_arrival word of each. */
	pieces = reallocarray(lr->pieces, 2 * nr, sizeof(*pieces));
	if (pieces)
		lr->pieces = pieces;
	piece_cand = reallocarray(lr->piece_cand, 2 * nr, sizeof(*piece_cand));
	if (piece_cand)
		lr->piece_cand = piece_cand;
	buf = reallocarray(lr->buf, nr, lr->span);
	if (buf)
		lr->buf = buf;
	arrivals = reallocarray(lr->arrivals, nr, 8);
	if (arrivals)
		lr->arrivals = arrivals;
	if (!cand || !pieces || !piece_cand || !buf || !arrivals)
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

	lr->span_fresh = lr->arrival_fresh = false;
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
		uint64_t task = list->tasks[i].addr, contiguous = 0;

		if (list->tasks[i].is_idle || task + lr->lo < task)
			continue;
		c->task = task;
		c->tgid = list->tasks[i].tgid;
		c->mapped = false;
		err = ivm_kernel_translate(lr->layout, task + lr->lo, &c->pa,
					   &contiguous);
		if (err)
			ivm_error_destroy(err);
		else
			c->mapped = contiguous >= lr->span;
		c->arrival_mapped = false;
		if (lr->off_arrival != IVM_KOFF_NONE &&
		    task + lr->off_arrival > task) {
			err = ivm_kernel_translate(lr->layout,
						   task + lr->off_arrival,
						   &c->arrival_pa, &contiguous);
			if (err)
				ivm_error_destroy(err);
			else
				c->arrival_mapped = contiguous >= 8;
		}
		n++;
	}
	/* A truncated walk still gives candidates; the next one may not be. */
	ivm_guest_task_list_destroy(list);
	lr->nr = n;
	lr->refreshed = true;
	lr->refreshed_at = now_ns;
	return NULL;
}

static bool *ok_flag(struct candidate *c, bool arrival)
{
	return arrival ? &c->arrival_ok : &c->ok;
}

/* Queue the candidates' spans (or last_arrival words) for one batch. */
static size_t queue_all(struct ivm_last_ran *lr, bool arrival, size_t n)
{
	size_t i;

	for (i = 0; i < lr->nr; i++) {
		struct candidate *c = &lr->cand[i];

		*ok_flag(c, arrival) = false;
		if (!(arrival ? c->arrival_mapped : c->mapped))
			continue;
		lr->pieces[n] = arrival ?
			(struct ivm_gmem_piece){ .gpa = c->arrival_pa,
						 .buf = lr->arrivals + i * 8,
						 .len = 8 } :
			(struct ivm_gmem_piece){ .gpa = c->pa,
						 .buf = lr->buf + i * lr->span,
						 .len = lr->span };
		/* Spans below nr, last_arrival words from nr up. */
		lr->piece_cand[n++] = arrival ? lr->nr + i : i;
	}
	return n;
}

static bool *piece_ok(struct ivm_last_ran *lr, size_t piece)
{
	size_t k = lr->piece_cand[piece];

	return k < lr->nr ? &lr->cand[k].ok : &lr->cand[k - lr->nr].arrival_ok;
}

/*
 * Read every candidate's span and, with arrival, its last_arrival word:
 * one batch (one system call), or one by one if that fails.  While held,
 * what the hold read already stands.
 */
static struct ivm_error *read_all(struct ivm_last_ran *lr, bool arrival)
{
	bool span = !(lr->held && lr->span_fresh);
	struct ivm_error *err;
	size_t i, n = 0;

	arrival = arrival && !(lr->held && lr->arrival_fresh);
	if (span)
		n = queue_all(lr, false, n);
	if (arrival)
		n = queue_all(lr, true, n);
	lr->span_fresh |= lr->held && span;
	lr->arrival_fresh |= lr->held && arrival;
	if (!n)
		return NULL;
	err = ivm_gmem_read_phys_many(lr->gmem, lr->pieces, n);
	if (!err) {
		for (i = 0; i < n; i++)
			*piece_ok(lr, i) = true;
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

static struct ivm_error *refresh_if_due(struct ivm_last_ran *lr,
					uint64_t now_ns)
{
	if (lr->refreshed && now_ns - lr->refreshed_at <
			     IVM_LAST_RAN_REFRESH_NS)
		return NULL;
	return refresh(lr, now_ns);
}

static struct ivm_error *find(struct ivm_last_ran *lr, unsigned int cpu,
			      int32_t skip_tgid, bool at, uint64_t clock,
			      uint64_t now_ns, uint64_t *ret)
{
	uint64_t best = 0, best_start = 0;
	struct ivm_error *err;
	size_t i;

	err = refresh_if_due(lr, now_ns);
	if (!err)
		err = read_all(lr, false);
	if (err)
		return err;
	for (i = 0; at && clock && i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;

		if (!lr->cand[i].ok ||
		    (skip_tgid && lr->cand[i].tgid == skip_tgid) ||
		    ivm_le64(b + lr->off_exec_start) != clock)
			continue;
		/* Two tasks on one stamp: only the one of this CPU is sure. */
		if (!best || ivm_le32(b + lr->off_cpu) == cpu)
			best = lr->cand[i].task;
	}
	if (best) {
		*ret = best;
		return NULL;
	}
	for (i = 0; i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		uint64_t start;

		if (!lr->cand[i].ok || ivm_le32(b + lr->off_cpu) != cpu ||
		    (skip_tgid && lr->cand[i].tgid == skip_tgid))
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
	*ret = best;
	return NULL;
}

void ivm_last_ran_hold(struct ivm_last_ran *lr)
{
	lr->held = true;
	lr->span_fresh = lr->arrival_fresh = false;
}

void ivm_last_ran_release(struct ivm_last_ran *lr)
{
	lr->held = false;
}

struct ivm_error *ivm_last_ran_find(struct ivm_last_ran *lr, unsigned int cpu,
				    int32_t skip_tgid, uint64_t now_ns,
				    uint64_t *ret)
{
	return find(lr, cpu, skip_tgid, false, 0, now_ns, ret);
}

struct ivm_error *ivm_last_ran_find_at(struct ivm_last_ran *lr,
				       unsigned int cpu, int32_t skip_tgid,
				       uint64_t clock, uint64_t now_ns,
				       uint64_t *ret)
{
	return find(lr, cpu, skip_tgid, true, clock, now_ns, ret);
}

struct ivm_error *ivm_last_ran_first_since(struct ivm_last_ran *lr,
					   unsigned int cpu, int32_t skip_tgid,
					   uint64_t since, uint64_t now_ns,
					   uint64_t *ret)
{
	uint64_t best = 0, best_arrival = 0;
	struct ivm_error *err;
	size_t i;

	if (lr->off_arrival == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel has no sched_info.last_arrival");
	err = refresh_if_due(lr, now_ns);
	if (!err)
		err = read_all(lr, true);
	if (err)
		return err;
	for (i = 0; i < lr->nr; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		uint64_t arrival;

		if (!lr->cand[i].ok || !lr->cand[i].arrival_ok ||
		    ivm_le32(b + lr->off_cpu) != cpu ||
		    (skip_tgid && lr->cand[i].tgid == skip_tgid))
			continue;
		arrival = ivm_le64(lr->arrivals + i * 8);
		if (arrival <= since)
			continue;
		if (!best || arrival < best_arrival) {
			best = lr->cand[i].task;
			best_arrival = arrival;
		}
	}
	if (!best)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no task switched in on CPU %u since %llu",
					cpu, (unsigned long long)since);
	*ret = best;
	return NULL;
}

struct ivm_error *ivm_last_ran_window(struct ivm_last_ran *lr, unsigned int cpu,
				      int32_t skip_tgid, uint64_t since,
				      uint64_t now_ns,
				      struct ivm_last_ran_run *runs,
				      size_t max, size_t *nr)
{
	struct ivm_error *err;
	size_t i, n = 0;

	*nr = 0;
	if (lr->off_arrival == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel has no sched_info.last_arrival");
	err = refresh_if_due(lr, now_ns);
	if (!err)
		err = read_all(lr, true);
	if (err)
		return err;
	for (i = 0; i < lr->nr && n < max; i++) {
		const uint8_t *b = lr->buf + i * lr->span;
		struct ivm_last_ran_run *r = &runs[n];

		if (!lr->cand[i].ok || !lr->cand[i].arrival_ok ||
		    ivm_le32(b + lr->off_cpu) != cpu ||
		    (skip_tgid && lr->cand[i].tgid == skip_tgid))
			continue;
		r->arrival = ivm_le64(lr->arrivals + i * 8);
		r->end = ivm_le64(b + lr->off_exec_start);
		if (r->arrival <= since && r->end <= since)
			continue;
		r->task = lr->cand[i].task;
		r->tgid = lr->cand[i].tgid;
		r->on_cpu = lr->off_on_cpu != IVM_KOFF_NONE &&
			    ivm_le32(b + lr->off_on_cpu);
		n++;
	}
	*nr = n;
	return NULL;
}
