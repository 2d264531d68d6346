// SPDX-License-Identifier: MIT
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernel/last_ran.h"
#include "profile/ksym_hits.h"
#include "profile/profiler.h"
#include "profile/profiler_int.h"
#include "profile/vcpu_watch.h"

const char *ivm_idle_source_name(enum ivm_idle_source source)
{
	switch (source) {
	case IVM_IDLE_SOURCE_QMP:
		return "qmp";
	case IVM_IDLE_SOURCE_KVM:
		return "kvm";
	case IVM_IDLE_SOURCE_SCHED:
		return "sched";
	default:
		return "thread";
	}
}

const char *ivm_capture_mode_name(enum ivm_capture_mode mode)
{
	switch (mode) {
	case IVM_CAPTURE_MODE_STOP:
		return "stop";
	case IVM_CAPTURE_MODE_PIN:
		return "pin";
	default:
		return "optimistic";
	}
}

void end_with(struct profiler *p, const char *reason)
{
	if (!p->res->end_reason[0])
		snprintf(p->res->end_reason, sizeof(p->res->end_reason), "%s",
			 reason);
}

/*
 * The run ends on err.  QEMU gone is said one way whichever read or call
 * found it (a memory read, the monitor, libvirt): the run that follows the
 * guest then waits for libvirt's word on why (a save, a migration), and a
 * window's end_reason does not depend on which look met it first.
 */
static void end_with_error(struct profiler *p, const struct ivm_error *err)
{
	p->gone = true;
	end_with(p, err->code == IVM_ERROR_GONE ? IVM_END_GONE :
		 ivm_error_string(err));
}

/* A guest read failed: the end of the guest, or a counted blip. */
static void read_failed(struct profiler *p, struct ivm_error *err)
{
	if (err->code == IVM_ERROR_GONE)
		end_with_error(p, err);
	ivm_error_destroy(err);
}

/* Sched source: the longest a vCPU goes unlooked at (on-CPU ticks). */
static uint64_t look_interval(const struct profiler *p)
{
	uint64_t t = SLOW_POLL_NS;

	if (p->cfg->frequency_hz > 0 &&
	    (uint64_t)(1e9 / p->cfg->frequency_hz) < t)
		t = (uint64_t)(1e9 / p->cfg->frequency_hz);
	return t;
}

/*
 * Sched source: when the next look is due without an event: the on-CPU
 * tick, or a follow-up look after a wakeup.  Those passed are dropped, and
 * all of a vCPU's once its from-idle task is decided (seen, left to be
 * named from guest memory, or lost): each look is a real-time wakeup taken
 * from the guest's CPU time, and the follow-ups are there for that task
 * only.  Measured on web01 (tests/bench/web01_latency.sh, host CPUs
 * halt-polling): with six per wakeup and a look at the wakeup itself the
 * service's p50 was 1.48 times its detached value and idlevm took 19% of
 * a host core; with these cuts 1.06 and 12%.
 */
static uint64_t next_look(struct profiler *p, uint64_t now)
{
	uint64_t next = now + look_interval(p);
	size_t i, k;

	for (i = 0; i < p->guest->nr_vcpus; i++) {
		bool wanted = ivm_dispatch_awaits_from_idle(p->dispatch,
							    (uint32_t)i);

		for (k = 0; k < NR_FOLLOW; k++) {
			uint64_t *f = &p->vcpus[i].follow_at[k];

			if (*f && (*f <= now || !wanted))
				*f = 0;
			else if (*f && *f < next)
				next = *f;
		}
	}
	return next;
}

/* Whether two reads of a vCPU saw the same task and the same switches. */
static bool same_view(const struct ivm_vcpu_watch_view *a,
		      const struct ivm_vcpu_watch_view *b)
{
	return a->current_ok == b->current_ok && a->current == b->current &&
	       a->idle_switches == b->idle_switches &&
	       a->cpu_switches == b->cpu_switches &&
	       a->mid_switch == b->mid_switch;
}

/*
 * One batched read is not a snapshot: its words are copied one after the
 * other while the guest runs, so a switch in the middle can show the new
 * task with the old counts, and a from-idle task would be "seen" that was
 * not the first.  When a look may decide something (a vCPU's task or its
 * idle count moved since the last look), read again the words that tell
 * a switch (half the pieces of a look): the same everywhere, the first
 * read stands.  Else read all again: a vCPU whose first and last reads
 * differ keeps the last without its CPU switch count, so nothing is taken
 * as exact from it.
 */
static struct ivm_error *settle_views(struct profiler *p, uint64_t now)
{
	struct ivm_guest *g = p->guest;
	struct ivm_error *err;
	bool moved = false, torn = false;
	size_t i;

	if (p->source != IVM_IDLE_SOURCE_SCHED)
		return NULL;
	for (i = 0; i < g->nr_vcpus; i++)
		moved |= !same_view(&p->views[i], &p->last_views[i]);
	if (moved) {
		err = IN_STAGE(p, IVM_STAGE_LOOKS,
			       ivm_vcpu_watch_read_switches(p->watch, now,
							    p->views2));
		if (err)
			return err;
		for (i = 0; i < g->nr_vcpus; i++)
			torn |= !same_view(&p->views[i], &p->views2[i]);
	}
	if (torn) {
		memcpy(p->views2, p->views, g->nr_vcpus * sizeof(*p->views));
		err = IN_STAGE(p, IVM_STAGE_LOOKS,
			       ivm_vcpu_watch_read(p->watch, now, p->views,
						   NULL));
		if (err)
			return err;
		for (i = 0; i < g->nr_vcpus; i++)
			if (!same_view(&p->views[i], &p->views2[i])) {
				p->views[i].cpu_switches_ok = false;
				p->res->torn_reads++;
			}
	}
	memcpy(p->last_views, p->views, g->nr_vcpus * sizeof(*p->views));
	return NULL;
}

static void poll_once(struct profiler *p, uint64_t now)
{
	struct ivm_guest *g = p->guest;
	struct ivm_error *err;
	size_t i;

	uint64_t failed = 0;
	bool mid_switch = false;

	err = IN_STAGE(p, IVM_STAGE_EVENTS, poll_halted(p));
	if (!err && p->guest_paused)
		return;
	/* Events read just now may be newer than the caller's clock. */
	now = ivm_mono_ns();
	/*
	 * Sched source: look when a vCPU thread slept, or when a look is due
	 * (a follow-up after a wakeup, an on-CPU tick), not for every event.
	 */
	if (!err && p->source == IVM_IDLE_SOURCE_SCHED && !p->look_due &&
	    now < p->next_look_ns)
		return;
	p->look_due = false;
	p->next_look_ns = next_look(p, now);
	p->res->polls++;
	if (!err)
		err = IN_STAGE(p, IVM_STAGE_LOOKS,
			       ivm_vcpu_watch_read(p->watch, now, p->views,
						   &failed));
	if (!err)
		err = settle_views(p, now);
	if (err) {
		p->res->poll_errors++;
		read_failed(p, err);
		return;
	}
	p->res->poll_errors += failed;
	/* The scheduler's stamps, read once for what this look decides. */
	if (p->last_ran)
		ivm_last_ran_hold(p->last_ran);
	for (i = 0; i < g->nr_vcpus && !p->gone; i++) {
		struct ivm_guest_vcpu *v = &g->vcpus[i];
		struct vcpu_poll *vp = &p->vcpus[i];
		const struct ivm_vcpu_watch_view *view = &p->views[i];
		struct ivm_vcpu_obs obs = { .time_ns = now,
					    .halted = vp->halted };
		struct ivm_capture_req req;

		if (v->cpu < 0)
			continue;
		/*
		 * A switch under way (vcpu_watch.h): its current is the task
		 * leaving and its counts the arriving one's; seen idle so,
		 * the stamps named the task arriving (web01 under TCG, where
		 * a switch takes a few hundred microseconds).  This look
		 * decides nothing for the vCPU; the next, soon, does.
		 */
		if (view->mid_switch) {
			p->res->mid_switch_looks++;
			mid_switch = true;
			continue;
		}
		if (p->source == IVM_IDLE_SOURCE_THREAD &&
		    (!view->current_ok ||
		     (view->current == vp->idle_task) != vp->was_idle)) {
			err = thread_halted(vp, &vp->halted);
			if (err) {
				p->res->poll_errors++;
				read_failed(p, err);
				continue;
			}
			obs.halted = vp->halted;
		}
		if (view->current_ok) {
			obs.current = view->current;
			obs.current_known = true;
			obs.current_is_idle = obs.current == vp->idle_task;
			if (!obs.current_is_idle && is_helper_task(p, vp,
								   obs.current)) {
				/*
				 * A helper thread runs there because we asked:
				 * a holder on a vCPU we made it hold, or its
				 * loop serving our request.  To the method
				 * that vCPU is still idle, and neither is the
				 * from-idle thread or on-CPU work of the guest.
				 */
				obs.current_is_idle = true;
				obs.halted = true;
				p->res->helper_busy++;
			}
		}
		vp->was_idle = obs.current_known && obs.current_is_idle;
		obs.idle_switches = view->idle_switches;
		obs.idle_switches_known = view->idle_switches_ok;
		obs.cpu_switches = view->cpu_switches;
		obs.cpu_switches_known = view->cpu_switches_ok;
		obs.rq_clock = view->rq_clock;
		obs.rq_clock_known = view->rq_clock_ok;
		if (vp->passed) {
			ivm_idle_periods_passed(p->periods, (uint32_t)i,
						vp->passed, vp->passed_ts,
						&vp->passed_irqs);
			vp->passed = 0;
		}
		err = observe_periods(p, (uint32_t)i, &obs, view, false);
		if (!err && ivm_dispatch_observe(p->dispatch, (uint32_t)i,
						 &obs, &req))
			err = handle_request(p, v, now, &req);
		if (!err && ivm_dispatch_take_pending(p->dispatch, (uint32_t)i,
						      &req))
			err = handle_request(p, v, now, &req);
		if (err) {
			p->res->capture_errors++;
			if (err->code == IVM_ERROR_GONE ||
			    err->code == IVM_ERROR_OS ||
			    err->code == IVM_ERROR_NOMEM)
				/* The file or the guest: can't go on. */
				end_with_error(p, err);
			ivm_error_destroy(err);
		}
	}
	/*
	 * Each vCPU seen idle: its threads' switch-in counts as this look
	 * read them, if it did (the look that opens a period does), so the
	 * period's from-idle task can be told from one that cut in on it.
	 */
	for (i = 0; p->last_ran && i < g->nr_vcpus; i++)
		if (g->vcpus[i].cpu >= 0 && p->views[i].current_ok &&
		    !p->views[i].mid_switch && p->views[i].rq_clock_ok &&
		    p->views[i].current == p->vcpus[i].idle_task)
			ivm_last_ran_mark(p->last_ran,
					  (unsigned int)g->vcpus[i].cpu,
					  p->views[i].rq_clock,
					  p->views[i].idle_switches_ok ?
					  p->views[i].idle_switches :
					  IVM_LAST_RAN_UNKNOWN);
	if (p->last_ran)
		ivm_last_ran_release(p->last_ran);
	/* What this look decided may end a vCPU's follow-ups. */
	if (p->source == IVM_IDLE_SOURCE_SCHED)
		p->next_look_ns = next_look(p, now);
	/* Once after a switch under way: a vCPU stopped in one stays so. */
	if (mid_switch && !p->mid_switch_retry &&
	    p->next_look_ns > now + MID_SWITCH_RETRY_NS)
		p->next_look_ns = now + MID_SWITCH_RETRY_NS;
	p->mid_switch_retry = mid_switch;
}

/*
 * No vmlinux: the kernel symbols samples hit so far and not yet written,
 * as "ksym" metadata ("ADDR SIZE TYPE NAME", link-time addresses like a
 * System.map), so the file names its kernel frames on its own.
 */
static struct ivm_error *emit_meta(void *ctx, const char *key,
				   const char *value)
{
	return ivm_profile_write_meta(ctx, key, value);
}

static struct ivm_error *write_new_ksyms(struct profiler *p)
{
	const struct ivm_ksym *const *syms;
	struct ivm_error *err = NULL;
	size_t nr, i;

	if (!p->writer)
		return NULL;
	/* The user objects met since, and the names their frames got. */
	err = ivm_uobjects_take_meta(ivm_capture_engine_objects(p->engine),
				     emit_meta, p->writer);
	if (err || !p->ksym_hits)
		return err;
	syms = ivm_ksym_hits_take_new(p->ksym_hits, &nr);
	for (i = 0; i < nr && !err; i++) {
		char line[IVM_KSYM_META_MAX];

		ivm_ksym_meta_value(syms[i], line);
		err = ivm_profile_write_meta(p->writer, "ksym", line);
	}
	return err;
}

/* ---- context-switch sampling (switch_sampler.h) ----------------------- */

/* A switch sample the sampler kept: into the file, like a capture's. */
static struct ivm_error *switch_emit(void *ctx, const struct ivm_capture *cap)
{
	return write_kept(ctx, cap, NULL);
}

/* Last in setup: the sampler's first read starts every thread's totals. */
struct ivm_error *switch_setup(struct profiler *p)
{
	const struct ivm_profiler_config *c = p->cfg;
	struct ivm_switch_sampler_config sc = {
		.every = c->switch_every, .batch = c->switch_batch,
		.interval_ns = (uint64_t)(c->switch_interval_ms * 1e6),
		.walk_budget = c->switch_walk_budget,
		.filter_pid = c->filter_pid, .filter_comm = c->filter_comm,
		.skip_tgid = helper_tgid(p),
		.emit = switch_emit, .emit_ctx = p,
	};
	struct ivm_error *err;

	if (!c->switch_every)
		return NULL;
	err = ivm_switch_sampler_create(p->guest, p->engine, p->writer, &sc,
					&p->switches);
	return err ? ivm_error_wrap(err, "switch sampling") : NULL;
}

/* A look of the switch sampler when due; an error ends the run. */
static void switch_look(struct profiler *p, uint64_t now)
{
	struct ivm_error *err;

	if (!p->switches)
		return;
	err = ivm_switch_sampler_look(p->switches, now);
	if (err) {
		end_with_error(p, err);
		ivm_error_destroy(err);
	}
}

/* The earlier of next and the sampler's next look. */
static uint64_t switch_due(const struct profiler *p, uint64_t next)
{
	uint64_t due;

	if (!p->switches)
		return next;
	due = ivm_switch_sampler_due(p->switches);
	return due < next ? due : next;
}

static void status_line(const struct profiler *p, uint64_t now, bool final)
{
	const struct ivm_profiler_result *r = p->res;
	const struct ivm_dispatch_stats *d = ivm_dispatch_stats(p->dispatch);

	fprintf(stderr,
		"\r\033[Kidlevm: %.1f s  to_idle %" PRIu64 "  from_idle %" PRIu64
		"  on_cpu %" PRIu64 "  discarded %" PRIu64 "  lost %" PRIu64 "%s",
		(double)(now - p->start_ns) / 1e9, r->kept[IVM_SAMPLE_TO_IDLE],
		r->kept[IVM_SAMPLE_FROM_IDLE], r->kept[IVM_SAMPLE_ON_CPU],
		r->outcomes[IVM_CAPTURE_DISCARDED_RAN] +
			r->outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE],
		d->lost_busy + d->lost_missed, final ? "\n" : "");
}

/*
 * Real-time priority for the event loop, or back to normal.  Its work per
 * event is bounded (a batched read, a capture), and the kernel's RT
 * throttling bounds a runaway; without the privilege it warns and goes on.
 */
bool ivm_realtime(bool on)
{
	struct sched_param sp = { .sched_priority = on ? 1 : 0 };

	if (sched_setscheduler(0, on ? SCHED_FIFO : SCHED_OTHER, &sp) < 0) {
		if (on)
			fprintf(stderr,
				"idlevm: warning: no real-time priority (%s%s): events may be seen late on a loaded host\n",
				strerror(errno), errno == EPERM ?
				"; it needs CAP_SYS_NICE" : "");
		return false;
	}
	return on;
}

/*
 * Continuous windows: finish the window's file (its ksyms, its stats, END)
 * and go on in the next one, which gets the metadata again.  The file is
 * whole before the next is asked for, so a failure there loses nothing
 * written; p->writer is NULL until the next one is there.
 */
static struct ivm_error *next_window(struct profiler *p, uint64_t now)
{
	struct ivm_stat stats[MAX_STATS];
	struct ivm_error *err;
	size_t nr;

	/* Each thread's totals of this window, into its file. */
	err = p->switches ? ivm_switch_sampler_end_window(p->switches) : NULL;
	if (!err)
		err = write_all_held(p);
	if (!err)
		err = write_spans(p);
	if (err)
		return err;
	fill_stats(p, stats, &nr);
	ivm_error_destroy(write_new_ksyms(p));	/* the samples matter more */
	err = ivm_profile_writer_finish(p->writer, now, stats, nr);
	p->writer = NULL;
	if (err)
		return err;
	/* The next window's stats count from here. */
	p->nr_window_base = 0;
	fill_stats(p, p->window_base, &nr);
	p->nr_window_base = nr;
	/*
	 * The new file says again what it needs: kernel names, user
	 * objects, processes.
	 */
	if (p->ksym_hits)
		ivm_ksym_hits_forget(p->ksym_hits);
	ivm_uobjects_forget(ivm_capture_engine_objects(p->engine));
	ivm_proc_table_destroy(p->procs);
	p->procs = NULL;
	err = ivm_proc_table_create(&p->procs);
	if (err)
		return err;
	err = p->cfg->next_window(p->cfg->window_ctx, &p->writer);
	if (!err)
		err = write_meta(p);
	if (!err && p->switches)
		ivm_switch_sampler_begin_window(p->switches, p->writer);
	if (!err)
		err = ivm_profile_writer_flush(p->writer);
	return err;
}

/* One guest's run: its profiler and the loop's timekeeping. */
struct ivm_profiler {
	struct profiler p;
	uint64_t interval;	/* polling sources: their period */
	uint64_t next;		/* polling sources: the next poll */
	uint64_t last_flush, end_ns;
	uint64_t cpu_ns;	/* this thread's CPU time in start/steps */
	uint64_t cpu_lent;	/* of it, spent on other runs meanwhile */
	bool end_asked;		/* ivm_profiler_end() */
};

/*
 * The loop thread's CPU clock at the end of the last step of any run.  A
 * step is charged everything since (one clock read, a system call, per
 * step rather than two): its own work and the loop's wait and wakeup that
 * led to it, which perf puts at a sixth of what idlevm spends and which
 * is as much this run's cost, and its budget's (cpu_budget.h).  0: none
 * yet, or the loop did something that is no run's (ivm_profiler_cpu_sync).
 */
static _Thread_local uint64_t loop_cpu;

void ivm_profiler_cpu_sync(void)
{
	loop_cpu = ivm_thread_cpu_ns();
}

/*
 * Whether the guest runs, from its lifecycle state, confirmed by the
 * monitor when that says paused (a RESUME event, our own in stop capture
 * mode, may not have been read yet) or nothing yet.  Each second found paused counts.
 */
static void check_paused(struct profiler *p, enum ivm_qmp_lifecycle state)
{
	enum ivm_qmp_lifecycle now = IVM_QMP_UNKNOWN;
	struct ivm_error *err;

	p->guest_paused = false;
	/* Unknown: no event since we connected, as for a guest that
	 * stopped before; the monitor knows. */
	if (state != IVM_QMP_PAUSED && state != IVM_QMP_UNKNOWN)
		return;
	err = ivm_qmp_query_status(p->guest->qmp, &now);
	ivm_error_destroy(err);
	p->guest_paused = !err && now == IVM_QMP_PAUSED;
	p->res->paused_s += p->guest_paused;
}

struct ivm_error *ivm_profiler_start(struct ivm_guest *guest,
				     const struct ivm_profiler_config *config,
				     struct ivm_profile_writer *writer,
				     struct ivm_profiler_result *result,
				     struct ivm_profiler **ret)
{
	uint64_t cpu0 = ivm_thread_cpu_ns();
	struct ivm_profiler *pr;
	struct ivm_error *err;

	memset(result, 0, sizeof(*result));
	pr = calloc(1, sizeof(*pr));
	if (!pr) {
		ivm_profile_writer_destroy(writer);
		return &ivm_enomem;
	}
	pr->p = (struct profiler){ .guest = guest, .cfg = config,
				   .writer = writer, .res = result,
				   .source = config->idle_source };
	pr->interval = (uint64_t)(config->poll_interval_ms * 1e6);
	if (pr->interval < 100000)
		pr->interval = 100000;	/* 10 kHz at most */
	err = run_setup(&pr->p);
	if (err) {
		run_teardown(&pr->p);
		ivm_profile_writer_destroy(pr->p.writer);
		free(pr);
		return err;
	}
	pr->p.start_ns = pr->next = pr->last_flush = ivm_mono_ns();
	if (guest->gmem)
		pr->p.stages.reads_counter =
			ivm_gmem_backend_calls_word(guest->gmem);
	ivm_cpu_budget_init(&pr->p.budget, config->cpu_budget, pr->p.start_ns);
	check_paused(&pr->p, ivm_qmp_lifecycle(guest->qmp));
	if (config->duration_s > 0)
		pr->end_ns = pr->p.start_ns + (uint64_t)(config->duration_s * 1e9);
	if (config->window_s > 0 && config->next_window)
		pr->p.window_end_ns = pr->p.start_ns +
				      (uint64_t)(config->window_s * 1e9);
	loop_cpu = ivm_thread_cpu_ns();
	pr->cpu_ns = loop_cpu - cpu0;
	result->cpu_ns = pr->cpu_ns;
	/* Opening the run counts against its budget too. */
	ivm_cpu_budget_charge(&pr->p.budget, pr->cpu_ns);
	*ret = pr;
	return NULL;
}

void ivm_profiler_end(struct ivm_profiler *pr, const char *reason)
{
	end_with(&pr->p, reason);
	pr->end_asked = true;
}

void ivm_profiler_lend_cpu(struct ivm_profiler *pr, uint64_t ns)
{
	pr->cpu_lent += ns;
}

bool ivm_profiler_wants_realtime(const struct ivm_profiler *pr)
{
	return pr->p.cfg->realtime && pr->p.source == IVM_IDLE_SOURCE_SCHED;
}

void ivm_profiler_set_realtime(struct ivm_profiler *pr, bool on)
{
	pr->p.res->realtime = on;
}

/* The once-a-second duties: the guest's state, the stats, the flush. */
static struct ivm_error *flush_due(struct ivm_profiler *pr, uint64_t now)
{
	struct profiler *p = &pr->p;
	struct ivm_stat stats[MAX_STATS];
	struct ivm_error *err;
	size_t nr_stats;
	enum ivm_qmp_lifecycle state = ivm_qmp_lifecycle(p->guest->qmp);

	if (state == IVM_QMP_SHUTDOWN || state == IVM_QMP_GONE) {
		p->gone = true;
		end_with(p, "the guest shut down");
	}
	check_paused(p, state);
	ivm_capture_engine_age_maps(p->engine, now);
	err = write_spans(p);
	fill_stats(p, stats, &nr_stats);
	if (!err)
		err = write_new_ksyms(p);
	if (!err && p->switches)
		err = ivm_switch_sampler_flush(p->switches);
	if (!err)
		err = ivm_profile_write_stats(p->writer, stats, nr_stats);
	if (!err)
		err = ivm_profile_writer_flush(p->writer);
	if (!err && p->cfg->status_line)
		status_line(p, now, false);
	pr->last_flush = now;
	return err;
}

bool ivm_profiler_step(struct ivm_profiler *pr, bool stop,
		       struct ivm_error **err)
{
	struct profiler *p = &pr->p;
	const struct ivm_profiler_config *config = p->cfg;
	uint64_t cpu0 = loop_cpu, now = ivm_mono_ns(), step_cpu;
	uint64_t window_ns = (uint64_t)(config->window_s * 1e9);
	bool running = false;

	*err = NULL;
	ivm_stage_enter(&p->stages, IVM_STAGE_OTHER);
	if (p->gone || pr->end_asked)
		goto out;
	if (stop) {
		end_with(p, "interrupted");
		goto out;
	}
	if (pr->end_ns && now >= pr->end_ns) {
		end_with(p, "duration reached");
		goto out;
	}
	if (p->window_end_ns && now >= p->window_end_ns) {
		*err = next_window(p, now);
		if (*err)
			goto out;
		p->window_end_ns += window_ns;
		if (p->window_end_ns <= now)	/* late: no empty windows */
			p->window_end_ns = now + window_ns;
	}
	*err = budget_tick(p, now);
	if (*err)
		goto out;
	/* Polling sources poll on their period; sched reads its events. */
	if (p->budget.watching &&
	    (p->source == IVM_IDLE_SOURCE_SCHED || now >= pr->next)) {
		poll_once(p, now);
		if (p->source != IVM_IDLE_SOURCE_SCHED) {
			pr->next += pr->interval;
			if (pr->next <= now)
				pr->next = now + pr->interval;	/* overrun: no burst */
		}
	}
	ivm_stage_enter(&p->stages, IVM_STAGE_CAPTURE);
	if (p->budget.watching)
		switch_look(p, ivm_mono_ns());
	ivm_stage_enter(&p->stages, IVM_STAGE_OTHER);
	now = ivm_mono_ns();
	if (now - pr->last_flush >= 1000000000ull) {
		*err = IN_STAGE(p, IVM_STAGE_WRITE, flush_due(pr, now));
		if (*err)
			goto out;
	}
	running = !p->gone;
out:
	if (p->trace)
		ivm_trace_session_polled(p->trace, NULL, 0);
	ivm_stage_stop(&p->stages);
	loop_cpu = ivm_thread_cpu_ns();
	step_cpu = cpu0 && loop_cpu > cpu0 ? loop_cpu - cpu0 : 0;
	step_cpu -= pr->cpu_lent < step_cpu ? pr->cpu_lent : step_cpu;
	pr->cpu_lent = 0;
	pr->cpu_ns += step_cpu;
	ivm_cpu_budget_charge(&p->budget, step_cpu);
	p->res->cpu_ns = pr->cpu_ns;
	return running;
}

uint64_t ivm_profiler_wake_at(const struct ivm_profiler *pr)
{
	const struct profiler *p = &pr->p;
	uint64_t t = pr->last_flush + 1000000000ull;

	if (p->cfg->cpu_budget > 0 && ivm_cpu_budget_slice_end(&p->budget) < t)
		t = ivm_cpu_budget_slice_end(&p->budget);
	if (!p->budget.watching) {
		/* Nothing to look at until the slice ends. */
	} else if (p->source == IVM_IDLE_SOURCE_SCHED && p->trace) {
		if (p->next_look_ns < t)
			t = p->next_look_ns;
	} else if (pr->next < t) {
		t = pr->next;
	}
	if (p->budget.watching)
		t = switch_due(p, t);
	if (pr->end_ns && pr->end_ns < t)
		t = pr->end_ns;
	if (p->window_end_ns && p->window_end_ns < t)
		t = p->window_end_ns;
	return t;
}

size_t ivm_profiler_pollfds(const struct ivm_profiler *pr,
			    struct pollfd *fds, size_t max)
{
	const struct pollfd *mine;
	size_t n, i;

	if (!pr->p.trace || pr->p.source != IVM_IDLE_SOURCE_SCHED ||
	    !pr->p.budget.watching)
		return 0;
	/* The gate's ring alone wakes the loop; the session is read anyway. */
	if (pr->p.gate && max) {
		fds[0] = (struct pollfd){ .fd = ivm_idle_gate_fd(pr->p.gate),
					  .events = POLLIN };
		return 1;
	}
	n = ivm_trace_session_pollfds(pr->p.trace, &mine);
	for (i = 0; i < n && i < max; i++)
		fds[i] = mine[i];
	return i;
}

void ivm_profiler_polled(struct ivm_profiler *pr, const struct pollfd *fds,
			 size_t n)
{
	/* Checked there: fds must be the session's, all of them. */
	if (pr->p.trace && pr->p.source == IVM_IDLE_SOURCE_SCHED)
		ivm_trace_session_polled(pr->p.trace, pr->p.gate ? NULL : fds,
					 n);
}

struct ivm_error *ivm_profiler_finish(struct ivm_profiler *pr)
{
	struct profiler *p = &pr->p;
	const struct ivm_profiler_config *config = p->cfg;
	struct ivm_profiler_result *result = p->res;
	uint64_t cpu0 = ivm_thread_cpu_ns();
	struct ivm_stat stats[MAX_STATS];
	struct ivm_error *ferr, *swerr = NULL;
	size_t nr_stats;

	result->elapsed_s = (double)(ivm_mono_ns() - p->start_ns) / 1e9;
	result->watched_ns = ivm_cpu_budget_watched_ns(&p->budget,
						       ivm_mono_ns());
	result->slices = p->budget.slices;
	result->watched_slices = p->budget.watched_slices;
	result->dispatch = *ivm_dispatch_stats(p->dispatch);
	result->idle = *ivm_idle_periods_stats(p->periods);
	result->gated = p->gate != NULL;
	if (p->gate)
		ivm_idle_gate_stats(p->gate, &result->gate);
	ivm_uobjects_stats(ivm_capture_engine_objects(p->engine),
			   &result->objects);
	ivm_capture_engine_maps_stats(p->engine, &result->maps);
	result->procs = p->procs ? ivm_proc_table_count(p->procs) : 0;
	if (config->capture_mode == IVM_CAPTURE_MODE_PIN && config->pin) {
		/* What watching cost the guest, in the helper's own words
		 * (the whole run's, so in the last window's file). */
		swerr = ivm_pin_capture_record_footprint(config->pin, p->writer,
							 &result->helper);
	}
	if (config->pin)	/* pins, or only readaheads */
		result->pin = *ivm_pin_capture_stats(config->pin);
	if (config->status_line)
		status_line(p, ivm_mono_ns(), true);
	/* The switch totals end here: every thread read once more. */
	if (p->switches && p->writer) {
		ferr = ivm_switch_sampler_end_window(p->switches);
		if (ferr && !swerr)
			swerr = ferr;
		else
			ivm_error_destroy(ferr);
	}
	/*
	 * The host's records up to now, so its waits end where the
	 * kernel's run_delay is read (fill_stats): held no more, they are
	 * read whole by write_spans below, after the idle signal's here.
	 */
	if (p->host && p->trace && !p->gone) {
		ivm_trace_session_hold(p->host_trace, false);
		if (p->disk_trace)
			ivm_trace_session_hold(p->disk_trace, false);
		ivm_error_destroy(poll_halted(p));
	}
	/* Periods still open: their to-idle samples go without a time. */
	if (p->writer && p->held) {
		ferr = write_all_held(p);
		if (ferr && !swerr)
			swerr = ferr;
		else
			ivm_error_destroy(ferr);
	}
	/* The last waits, for the timeline (the file's STATS count them). */
	ferr = write_spans(p);
	if (ferr && !swerr)
		swerr = ferr;
	else
		ivm_error_destroy(ferr);
	loop_cpu = ivm_thread_cpu_ns();
	pr->cpu_ns += loop_cpu - cpu0;
	result->cpu_ns = pr->cpu_ns;
	memcpy(result->stage_ns, p->stages.ns, sizeof(result->stage_ns));
	memcpy(result->stage_reads, p->stages.reads,
	       sizeof(result->stage_reads));
	fill_stats(p, stats, &nr_stats);
	if (p->engine && ivm_capture_engine_labels(p->engine)) {
		struct ivm_labels *l = ivm_capture_engine_labels(p->engine);
		size_t i;

		for (i = 0; i < ivm_labels_count(l); i++) {
			result->labels[i] = *ivm_labels_stats(l, i);
			result->label_why[i] = ivm_labels_last_why(l, i);
		}
	}
	ferr = write_new_ksyms(p);
	if (ferr) {
		ivm_error_destroy(ferr);	/* the samples matter more */
		ferr = NULL;
	}
	/* The guest's end, not the user's: the file says which. */
	if (p->writer && (p->gone || pr->end_asked))
		ivm_error_destroy(ivm_profile_write_meta(p->writer, "end_reason",
							 result->end_reason));
	if (p->writer)
		ferr = ivm_profile_writer_finish(p->writer, ivm_mono_ns(),
						 stats, nr_stats);
	/* The file is finished first: its samples matter more. */
	if (swerr && !ferr)
		ferr = swerr;
	else
		ivm_error_destroy(swerr);
	run_teardown(p);
	free(pr);
	return ferr;
}

bool ivm_profiler_wait(struct pollfd *fds, size_t nr, uint64_t until_ns)
{
	uint64_t now = ivm_mono_ns();
	struct timespec ts;

	if (until_ns <= now)
		return false;
	if (nr) {
		ts.tv_sec = (time_t)((until_ns - now) / 1000000000ull);
		ts.tv_nsec = (long)((until_ns - now) % 1000000000ull);
		/* EINTR (Ctrl-C) just ends the wait early. */
		return ppoll(fds, (nfds_t)nr, &ts, NULL) >= 0;
	}
	ts.tv_sec = (time_t)(until_ns / 1000000000ull);
	ts.tv_nsec = (long)(until_ns % 1000000000ull);
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	return false;
}
