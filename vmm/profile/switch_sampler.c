// SPDX-License-Identifier: MIT
/* Context-switch sampling from the host; see switch_sampler.h. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernel/task_sched.h"
#include "kernel/thread_walk.h"
#include "profile/switch_sampler.h"
#include "profile/switch_table.h"

/* Threads the setup's walk meets per step (it runs to the sweep's end). */
#define SETUP_WALK_STEP 1024

struct ivm_switch_sampler {
	struct ivm_guest *guest;
	struct ivm_capture_engine *engine;
	struct ivm_profile_writer *writer;
	struct ivm_switch_sampler_config cfg;
	struct ivm_task_sched_layout layout;
	struct ivm_kmem_reader reader;
	struct ivm_thread_walk *walk;
	struct ivm_switch_table *table;
	uint64_t sweep;			/* number of the current/last sweep */
	bool sweeping;
	uint64_t sweep_started_ns;
	/* A complete sweep ended: a thread met after it began in the run. */
	bool first_complete;
	bool has_on_cpu;
	struct ivm_walked_thread *walked;	/* walk_budget or setup step */
	size_t *batch;				/* cfg.batch indexes */
	uint8_t *bufs;				/* cfg.batch * layout.bytes */
	struct ivm_gmem_piece *pieces;		/* cfg.batch * nr_pieces */
	struct ivm_capture *cap;
	uint64_t next_due;
	struct ivm_switch_sampler_stats stats;
};

static bool wanted(const struct ivm_switch_sampler *s,
		   const struct ivm_walked_thread *w)
{
	if (s->cfg.skip_tgid && w->tgid == s->cfg.skip_tgid)
		return false;
	if (s->cfg.filter_pid >= 0 && w->tgid != s->cfg.filter_pid)
		return false;
	if (s->cfg.filter_comm && fnmatch(s->cfg.filter_comm, w->comm, 0))
		return false;
	return true;
}

/*
 * Where a new thread's pieces are in guest physical memory.  A task_struct
 * comes from the slab allocator, in the direct map, so the whole span read
 * is contiguous and one address gives every piece; checked page by page
 * (two or three translations, arithmetic in the direct map).  Anything
 * else is read piece by piece through the page tables.
 */
static void locate(struct ivm_switch_sampler *s, struct ivm_switch_thread *th)
{
	uint64_t first = s->layout.pieces[0].off;
	struct ivm_error *err;

	th->read_phys = false;
	if (th->task + first < th->task || s->layout.end < first)
		return;
	err = ivm_kernel_translate_range(s->guest->layout, th->task + first,
					 s->layout.end - first,
					 &th->read_base);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	th->read_phys = true;
}

/* Threads the walk met: watch the new ones. */
static struct ivm_error *meet(struct ivm_switch_sampler *s, size_t nr)
{
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < nr; i++) {
		long idx;
		bool added;

		if (!wanted(s, &s->walked[i]))
			continue;
		err = ivm_switch_table_meet(s->table, &s->walked[i], s->sweep,
					    s->first_complete, &idx, &added);
		if (err)
			return err;
		if (added)
			locate(s, ivm_switch_table_get(s->table, (size_t)idx));
	}
	return NULL;
}

/* A sweep ended: what it says of who is gone. */
static void sweep_ended(struct ivm_switch_sampler *s, enum ivm_thread_sweep how)
{
	s->sweeping = false;
	if (how != IVM_SWEEP_COMPLETE)
		return;
	ivm_switch_table_sweep_done(s->table, s->sweep);
	s->first_complete = true;
}

/* One step of the walk, in a look. */
static struct ivm_error *walk_on(struct ivm_switch_sampler *s, uint64_t now)
{
	enum ivm_thread_sweep how;
	struct ivm_error *err;
	size_t nr;

	if (!s->sweeping) {
		if (now - s->sweep_started_ns < s->cfg.sweep_ns)
			return NULL;
		s->sweeping = true;
		s->sweep++;
		s->sweep_started_ns = now;
	}
	ivm_thread_walk_step(s->walk, s->walked, s->cfg.walk_budget, &nr, &how);
	/* The threads of the sweep's last step first, then its verdict. */
	err = meet(s, nr);
	if (!err && how != IVM_SWEEP_GOING)
		sweep_ended(s, how);
	return err;
}

/* Read one thread's pieces on its own (after a failed batch, or slow). */
static struct ivm_error *read_alone(struct ivm_switch_sampler *s,
				    const struct ivm_switch_thread *th,
				    uint8_t *buf)
{
	const struct ivm_task_sched_layout *l = &s->layout;
	struct ivm_error *err = NULL;
	size_t k;

	for (k = 0; k < l->nr_pieces && !err; k++) {
		uint64_t off = l->pieces[k].off;

		if (th->read_phys)
			err = ivm_gmem_read_phys(s->guest->gmem,
						 th->read_base +
						 (off - l->pieces[0].off),
						 buf, l->pieces[k].len);
		else
			err = ivm_kernel_read(s->guest->layout, th->task + off,
					      buf, l->pieces[k].len);
		buf += l->pieces[k].len;
	}
	return err;
}

/*
 * Read the threads batch[0..n) in one batched guest read (those in the
 * direct map; the others piece by piece) and feed the table.  A thread
 * that cannot be read is gone.
 */
static struct ivm_error *read_threads(struct ivm_switch_sampler *s, size_t n,
				      uint64_t now)
{
	const struct ivm_task_sched_layout *l = &s->layout;
	struct ivm_error *err = NULL;
	size_t i, k, np = 0;
	bool batch_failed = false;

	for (i = 0; i < n; i++) {
		struct ivm_switch_thread *th =
			ivm_switch_table_get(s->table, s->batch[i]);
		uint8_t *buf = s->bufs + i * l->bytes;

		if (!th->read_phys)
			continue;
		for (k = 0; k < l->nr_pieces; k++) {
			s->pieces[np++] = (struct ivm_gmem_piece){
				.gpa = th->read_base +
				       (l->pieces[k].off - l->pieces[0].off),
				.buf = buf, .len = l->pieces[k].len };
			buf += l->pieces[k].len;
		}
	}
	if (np) {
		s->stats.read_batches++;
		err = ivm_gmem_read_phys_many(s->guest->gmem, s->pieces, np);
		if (err && err->code == IVM_ERROR_GONE)
			return err;
		if (err) {
			ivm_error_destroy(err);
			err = NULL;
			batch_failed = true;
		}
	}
	for (i = 0; i < n; i++) {
		size_t idx = s->batch[i];
		struct ivm_switch_thread *th = ivm_switch_table_get(s->table,
								    idx);
		uint8_t *buf = s->bufs + i * l->bytes;
		struct ivm_task_sched ts;

		if (!th->read_phys || batch_failed) {
			s->stats.slow_reads += !th->read_phys;
			err = read_alone(s, th, buf);
			if (err && err->code == IVM_ERROR_GONE)
				return err;
			if (err) {
				ivm_error_destroy(err);
				err = NULL;
				s->stats.read_failed++;
				ivm_switch_table_lost(s->table, idx);
				continue;
			}
		}
		s->stats.reads++;
		ivm_task_sched_decode(l, buf, &ts);
		ivm_switch_table_update(s->table, idx, &ts, now);
	}
	return NULL;
}

/* The vCPU that runs as guest CPU cpu, or UINT32_MAX. */
static uint32_t vcpu_of(const struct ivm_switch_sampler *s, uint32_t cpu)
{
	size_t i;

	for (i = 0; i < s->guest->nr_vcpus; i++)
		if (s->guest->vcpus[i].cpu >= 0 &&
		    (uint32_t)s->guest->vcpus[i].cpu == cpu)
			return (uint32_t)i;
	return UINT32_MAX;
}

/* A switch sample of thread idx: capture, and emit it when kept. */
static struct ivm_error *capture(struct ivm_switch_sampler *s, size_t idx,
				 uint64_t now)
{
	struct ivm_switch_thread *th = ivm_switch_table_get(s->table, idx);
	struct ivm_counter counters[IVM_COUNTER_NR_IDS];
	struct ivm_sample *sample = &s->cap->sample;
	struct ivm_error *err;

	err = ivm_capture_task_flags(s->engine, th->task, NULL, -1, -1,
				     s->has_on_cpu ? IVM_CAPTURE_F_RUNNABLE : 0,
				     s->cap);
	if (err)
		return err;
	if (s->cap->outcome == IVM_CAPTURE_FAILED) {
		s->stats.capture_failed++;
		return NULL;
	}
	/* Another thread at the address: the next read says it is gone. */
	if (s->cap->outcome != IVM_CAPTURE_KEPT ||
	    s->cap->task.pid != th->pid) {
		s->stats.discarded++;
		return NULL;
	}
	sample->kind = IVM_SAMPLE_SWITCH;
	sample->time_ns = now;
	sample->vcpu = vcpu_of(s, s->cap->task.cpu);
	sample->nr_counters = (uint16_t)ivm_switch_table_sampled(s->table, idx,
								 counters);
	sample->counters = counters;
	s->stats.captured++;
	err = s->cfg.emit ? s->cfg.emit(s->cfg.emit_ctx, s->cap) : NULL;
	sample->counters = NULL;
	sample->nr_counters = 0;
	return err;
}

/* Capture the threads of the batch whose sample is due, up to the cap. */
static struct ivm_error *capture_due(struct ivm_switch_sampler *s, size_t n,
				     uint64_t now)
{
	struct ivm_error *err;
	uint32_t taken = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct ivm_switch_thread *th =
			ivm_switch_table_get(s->table, s->batch[i]);

		if (!th->due || (th->flags & IVM_THREAD_GONE))
			continue;
		if (th->on_cpu) {
			s->stats.waited_on_cpu++;
			continue;
		}
		if (taken == s->cfg.captures) {
			s->stats.deferred++;
			continue;
		}
		taken++;
		err = capture(s, s->batch[i], now);
		if (err)
			return err;
	}
	return NULL;
}

/* Read every watched thread once, in batches (setup and finish). */
static struct ivm_error *read_all(struct ivm_switch_sampler *s)
{
	size_t rounds = (ivm_switch_table_watched(s->table) + s->cfg.batch - 1) /
			s->cfg.batch;
	struct ivm_error *err = NULL;

	while (rounds-- && !err) {
		size_t n = ivm_switch_table_next_batch(s->table, s->batch,
						       s->cfg.batch);

		err = read_threads(s, n, ivm_mono_ns());
	}
	return err;
}

void ivm_switch_sampler_destroy(struct ivm_switch_sampler *s)
{
	if (!s)
		return;
	ivm_thread_walk_destroy(s->walk);
	ivm_switch_table_destroy(s->table);
	free(s->walked);
	free(s->batch);
	free(s->bufs);
	free(s->pieces);
	free(s->cap);
	free(s);
}

static struct ivm_error *setup_walk(struct ivm_switch_sampler *s)
{
	const struct ivm_kernel_layout *l = s->guest->layout;
	struct ivm_thread_walk_config wc = {
		.init_task = ivm_kernel_layout_init_task(l),
		.la57 = ivm_kernel_layout_la57(l),
		.max_tasks = s->cfg.max_threads,
	};
	struct ivm_error *err;

	err = ivm_thread_walk_offsets_init(s->guest->btf,
					   ivm_kernel_layout_offsets(l),
					   &wc.off);
	if (err)
		return err;
	ivm_kernel_layout_reader(l, &s->reader);
	return ivm_thread_walk_create(&wc, &s->reader, &s->walk);
}

/* The first sweep, whole, and the first read of every thread. */
static struct ivm_error *first_sweep(struct ivm_switch_sampler *s)
{
	enum ivm_thread_sweep how = IVM_SWEEP_GOING;
	struct ivm_error *err = NULL;
	size_t nr;

	s->sweep = 1;
	s->sweep_started_ns = ivm_mono_ns();
	while (how == IVM_SWEEP_GOING && !err) {
		ivm_thread_walk_step(s->walk, s->walked, SETUP_WALK_STEP, &nr,
				     &how);
		err = meet(s, nr);
	}
	if (err)
		return err;
	sweep_ended(s, how);
	return read_all(s);
}

struct ivm_error *ivm_switch_sampler_create(
	struct ivm_guest *guest, struct ivm_capture_engine *engine,
	struct ivm_profile_writer *writer,
	const struct ivm_switch_sampler_config *cfg,
	struct ivm_switch_sampler **ret)
{
	const struct ivm_kernel_offsets *koff =
		ivm_kernel_layout_offsets(guest->layout);
	struct ivm_switch_sampler *s;
	struct ivm_error *err;
	size_t walked;

	if (!guest->btf)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"switch sampling needs the guest kernel's BTF");
	s = calloc(1, sizeof(*s));
	if (!s)
		return &ivm_enomem;
	s->guest = guest;
	s->engine = engine;
	s->writer = writer;
	s->cfg = *cfg;
	if (!s->cfg.batch)
		s->cfg.batch = IVM_SWITCH_BATCH_DEFAULT;
	if (!s->cfg.interval_ns)
		s->cfg.interval_ns = IVM_SWITCH_INTERVAL_DEFAULT_NS;
	if (!s->cfg.walk_budget)
		s->cfg.walk_budget = IVM_SWITCH_WALK_BUDGET_DEFAULT;
	if (!s->cfg.sweep_ns)
		s->cfg.sweep_ns = IVM_SWITCH_SWEEP_DEFAULT_NS;
	if (!s->cfg.captures)
		s->cfg.captures = IVM_SWITCH_CAPTURES_DEFAULT;
	/* Runnable targets are safe to read only where on_cpu tells. */
	s->has_on_cpu = koff->task_on_cpu != IVM_KOFF_NONE;
	err = ivm_task_sched_layout_init(guest->btf, koff, &s->layout);
	if (!err)
		err = setup_walk(s);
	if (!err)
		err = ivm_switch_table_create(cfg->every, cfg->max_threads,
					      &s->table);
	if (err) {
		ivm_switch_sampler_destroy(s);
		return err;
	}
	walked = s->cfg.walk_budget > SETUP_WALK_STEP ? s->cfg.walk_budget :
						       SETUP_WALK_STEP;
	s->walked = calloc(walked, sizeof(*s->walked));
	s->batch = calloc(s->cfg.batch, sizeof(*s->batch));
	s->bufs = calloc(s->cfg.batch, s->layout.bytes);
	s->pieces = calloc((size_t)s->cfg.batch * s->layout.nr_pieces,
			   sizeof(*s->pieces));
	s->cap = calloc(1, sizeof(*s->cap));
	if (!s->walked || !s->batch || !s->bufs || !s->pieces || !s->cap) {
		ivm_switch_sampler_destroy(s);
		return &ivm_enomem;
	}
	err = first_sweep(s);
	if (err) {
		ivm_switch_sampler_destroy(s);
		return err;
	}
	s->next_due = ivm_mono_ns() + s->cfg.interval_ns;
	*ret = s;
	return NULL;
}

uint64_t ivm_switch_sampler_due(const struct ivm_switch_sampler *s)
{
	return s->next_due;
}

struct ivm_error *ivm_switch_sampler_look(struct ivm_switch_sampler *s,
					  uint64_t now_ns)
{
	struct ivm_error *err;
	uint64_t t0, dt;
	size_t n;

	if (now_ns < s->next_due)
		return NULL;
	t0 = ivm_mono_ns();
	s->stats.looks++;
	err = walk_on(s, now_ns);
	if (!err) {
		n = ivm_switch_table_next_batch(s->table, s->batch,
						s->cfg.batch);
		err = read_threads(s, n, now_ns);
		if (!err)
			err = capture_due(s, n, now_ns);
	}
	dt = ivm_mono_ns() - t0;
	s->stats.look_ns += dt;
	if (dt > s->stats.look_max_ns)
		s->stats.look_max_ns = dt;
	/* No bursts after a stall: the next look is an interval away. */
	s->next_due = now_ns + s->cfg.interval_ns;
	return err;
}

/* Records of the threads that need one; final: all, marked so. */
static struct ivm_error *write_records(struct ivm_switch_sampler *s,
				       bool final)
{
	struct ivm_counter counters[IVM_COUNTER_NR_IDS];
	struct ivm_thread_record rec;
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < ivm_switch_table_nr(s->table); i++) {
		struct ivm_switch_thread *th = ivm_switch_table_get(s->table,
								    i);

		if (!th->read) {
			/* Met, never read: nothing to say of it. */
			if (th->flags & IVM_THREAD_GONE)
				th->recorded_gone = true;
			continue;
		}
		if (!final && !th->dirty)
			continue;
		ivm_switch_table_record(s->table, i, final, counters, &rec);
		err = ivm_profile_write_thread(s->writer, &rec);
		if (err)
			return err;
		s->stats.records++;
	}
	ivm_switch_table_compact(s->table);
	return NULL;
}

struct ivm_error *ivm_switch_sampler_flush(struct ivm_switch_sampler *s)
{
	return write_records(s, false);
}

struct ivm_error *ivm_switch_sampler_end_window(struct ivm_switch_sampler *s)
{
	struct ivm_error *err;

	/* A guest gone by now leaves the totals at each thread's last read. */
	err = read_all(s);
	if (err && err->code != IVM_ERROR_GONE)
		return err;
	ivm_error_destroy(err);
	return write_records(s, true);
}

void ivm_switch_sampler_begin_window(struct ivm_switch_sampler *s,
				     struct ivm_profile_writer *writer)
{
	s->writer = writer;
	ivm_switch_table_rebase(s->table);
}

void ivm_switch_sampler_stats(const struct ivm_switch_sampler *s,
			      struct ivm_switch_sampler_stats *ret)
{
	const struct ivm_switch_table_stats *ts =
		ivm_switch_table_stats(s->table);
	const struct ivm_thread_walk_stats *ws = ivm_thread_walk_stats(s->walk);

	*ret = s->stats;
	ret->crossings = ts->crossings;
	ret->coalesced = ts->coalesced;
	ret->watched = ivm_switch_table_watched(s->table);
	ret->threads_met = ts->threads_met;
	ret->unwatched = ts->unwatched;
	ret->gone = ts->gone;
	ret->sweeps = ws->sweeps_complete;
	ret->sweeps_truncated = ws->sweeps_truncated;
	ret->walk_restarts = ws->restarts;
	ret->walk_reads = ws->reads;
}
