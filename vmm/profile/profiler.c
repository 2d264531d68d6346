// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernel/irq_stat.h"
#include "kernel/kimage.h"
#include "kernel/last_ran.h"
#include "profile/idle_periods.h"
#include "profile/kvm_events.h"
#include "profile/sched_events.h"
#include "profile/ksym_hits.h"
#include "profile/profiler.h"
#include "profile/profiler_int.h"
#include "profile/replay.h"
#include "profile/vcpu_watch.h"
#include "profile/trace_session.h"

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

/* A guest read failed: the end of the guest, or a counted blip. */
static void read_failed(struct profiler *p, struct ivm_error *err)
{
	if (err->code == IVM_ERROR_GONE) {
		p->gone = true;
		end_with(p, "the guest went away");
	}
	ivm_error_destroy(err);
}

static bool passes_filters(const struct profiler *p,
			   const struct ivm_sample *s)
{
	if (p->cfg->filter_pid >= 0 && s->pid != (uint32_t)p->cfg->filter_pid)
		return false;
	if (p->cfg->filter_comm && fnmatch(p->cfg->filter_comm, s->comm, 0))
		return false;
	return true;
}

/*
 * A sample into the file, with its time value when it has one.  A to-idle
 * sample without one whose vCPU's idle period is open waits for the
 * period's end (sample_hold.h); one it replaces is written as it is.
 */
static struct ivm_error *write_sample(struct profiler *p,
				      const struct ivm_sample *s,
				      const struct ivm_capture_req *req)
{
	struct ivm_counter counters[IVM_SAMPLE_MAX_COUNTERS];
	struct ivm_sample_hold *h = &p->held[s->vcpu];
	struct ivm_sample valued;
	struct ivm_error *err;

	if (req && req->valued) {
		ivm_sample_with_counter(s, s->kind == IVM_SAMPLE_TO_IDLE ?
					IVM_COUNTER_IDLE_NS :
					IVM_COUNTER_HOST_WAKE_NS,
					req->value_ns, counters, &valued);
		p->res->valued[s->kind]++;
		return ivm_profile_write_sample(p->writer, &valued);
	}
	if (!req || s->kind != IVM_SAMPLE_TO_IDLE ||
	    !ivm_idle_periods_opened(p->periods, s->vcpu))
		return ivm_profile_write_sample(p->writer, s);
	if (h->held) {
		err = ivm_profile_write_sample(p->writer, &h->sample);
		if (err)
			return err;
	}
	return ivm_sample_hold(h, s);
}

/*
 * The to-idle sample held for vcpu's period, which ended: written with
 * how long the period lasted (idle_ns, or none: !known).
 */
struct ivm_error *write_held(struct profiler *p, uint32_t vcpu, bool known,
			     uint64_t idle_ns)
{
	struct ivm_counter counters[IVM_SAMPLE_MAX_COUNTERS];
	struct ivm_sample_hold *h = &p->held[vcpu];
	struct ivm_sample valued;
	struct ivm_error *err;

	if (!h->held)
		return NULL;
	if (known) {
		ivm_sample_with_counter(&h->sample, IVM_COUNTER_IDLE_NS,
					idle_ns, counters, &valued);
		p->res->valued[IVM_SAMPLE_TO_IDLE]++;
	} else {
		valued = h->sample;
	}
	err = ivm_profile_write_sample(p->writer, &valued);
	ivm_sample_release(h);
	return err;
}

/* Every held sample, without a value: the file ends before their periods. */
struct ivm_error *write_all_held(struct profiler *p)
{
	struct ivm_error *err = NULL;
	size_t i;

	for (i = 0; i < p->guest->nr_vcpus && !err; i++)
		err = write_held(p, (uint32_t)i, false, 0);
	return err;
}

/*
 * A kept capture into the file: its process said first (when it has one),
 * then the sample; counted, and its kernel symbols noted.  req is NULL
 * for a sample of no idle period (a switch sample).
 */
static struct ivm_error *write_kept(struct profiler *p,
				    const struct ivm_capture *cap,
				    const struct ivm_capture_req *req)
{
	struct ivm_error *err = NULL;

	if (cap->task.mm)
		err = ivm_proc_table_announce(p->procs, p->writer,
					      cap->sample.pid, &cap->process);
	if (!err)
		err = write_sample(p, &cap->sample, req);
	if (!err)
		p->res->kept[cap->sample.kind]++;
	if (!err && (cap->sample.stack_flags & IVM_STACK_LATER))
		p->res->kept_later[cap->sample.kind]++;
	if (!err && p->ksym_hits)
		err = ivm_ksym_hits_add(p->ksym_hits, cap->sample.kernel_pcs,
					cap->sample.nr_kernel);
	return err;
}

/*
 * Say when pin capture stops (the helper failed: optimistic meanwhile)
 * and when the helper answers again, once each time.
 */
static void pin_news(struct profiler *p)
{
	const struct ivm_pin_stats *ps = ivm_pin_capture_stats(p->cfg->pin);
	const char *why = ivm_pin_capture_degraded(p->cfg->pin);

	if (!p->warned_degraded && why) {
		p->warned_degraded = true;
		fprintf(stderr, "%sidlevm: warning: %s\n",
			p->cfg->status_line ? "\r\033[K" : "", why);
	} else if (p->warned_degraded && !why) {
		p->warned_degraded = false;
		fprintf(stderr, "%sidlevm: pin capture back: the helper (guest pid %u) answers again (%" PRIu64 " times back, %.1f s without it in all)\n",
			p->cfg->status_line ? "\r\033[K" : "",
			ivm_pin_capture_helper_pid(p->cfg->pin), ps->reconnects,
			(double)ps->down_ns / 1e9);
	}
}

static struct ivm_error *capture_in(struct profiler *p,
				     const struct ivm_capture_req *req)
{
	struct ivm_guest *g = p->guest;
	struct ivm_guest_vcpu *v = &g->vcpus[req->vcpu];
	struct ivm_qemu_cpu_regs cpu_regs;
	const struct ivm_x86_regs *regs = NULL;
	bool stopped = false;
	struct ivm_error *err = NULL, *cerr;
	int cpl = -1;

	if (p->cfg->capture_mode == IVM_CAPTURE_MODE_STOP && g->qmp) {
		err = ivm_qmp_stop(g->qmp);
		if (err)
			return err;
		stopped = true;
	}
	if (req->kind != IVM_SAMPLE_TO_IDLE && g->qmp) {
		uint64_t cur;

		/*
		 * The target was current when observed; take the vCPU's
		 * registers, then make sure it still is, or the registers
		 * belong to someone else.
		 */
		if (p->cfg->tcg_env)
			err = ivm_tcg_env_read(p->cfg->tcg_env, v->index,
					       &cpu_regs);
		else
			err = ivm_qemu_registers(g->qmp, v->index, &cpu_regs);
		if (!err)
			err = ivm_kernel_current_task(g->layout,
						      (unsigned int)v->cpu,
						      NULL, &cur);
		if (err)
			goto out;
		if (cur == req->task && !cpu_regs.halted) {
			regs = &cpu_regs.regs;
			cpl = cpu_regs.cpl;
		}
	}
	/*
	 * Pin mode pins every target that is not current on a vCPU: the
	 * to-idle one (asleep, or just woken) on the vCPU that went idle,
	 * and a from-idle or on-CPU one switched out before we got to it on
	 * the vCPU it was seen on (holding that vCPU preempts whoever runs
	 * there now, which is what the method's sampler thread does).
	 */
	if (p->cfg->capture_mode == IVM_CAPTURE_MODE_PIN && p->cfg->pin &&
	    !regs) {
		uint64_t holds = ivm_pin_capture_stats(p->cfg->pin)->holds;

		err = ivm_pin_capture_task(p->cfg->pin, p->engine, req->task,
					   v->cpu, &p->cap);
		p->helper_held |= ivm_pin_capture_stats(p->cfg->pin)->holds !=
				  holds;
		pin_news(p);
	} else {
		err = ivm_capture_task(p->engine, req->task, regs, cpl,
				       v->cpu, &p->cap);
	}
	if (err)
		goto out;
	/* Stopped vCPUs do not move: the live stack is exact then. */
	if (stopped && regs)
		p->cap.sample.stack_flags &= ~(uint32_t)IVM_STACK_INEXACT;
	p->res->outcomes[p->cap.outcome]++;
	if (!regs)
		p->res->blocked_outcomes[p->cap.outcome]++;
	if (p->cap.outcome != IVM_CAPTURE_KEPT)
		goto out;
	p->cap.sample.kind = req->kind;
	p->cap.sample.vcpu = req->vcpu;
	p->cap.sample.time_ns = req->time_ns;
	if (req->later)
		p->cap.sample.stack_flags |= IVM_STACK_LATER;
	if (!passes_filters(p, &p->cap.sample)) {
		p->res->filtered++;
		goto out;
	}
	err = IN_STAGE(p, IVM_STAGE_WRITE, write_kept(p, &p->cap, req));
out:
	if (stopped) {
		cerr = ivm_qmp_cont(g->qmp);
		/* Never leave the guest paused: that error wins. */
		if (cerr) {
			ivm_error_destroy(err);
			err = ivm_error_wrap(cerr, "resuming the guest");
		}
	}
	/*
	 * CFI this capture needed and guest memory lacked: the helper reads
	 * it into the page cache now, between captures, for the next ones.
	 */
	if (p->cfg->pin)	/* any capture mode: pin.h, readahead */
		ivm_pin_capture_readahead(p->cfg->pin, p->engine);
	return err;
}

/* Pin mode: whether task (current on the vCPU of vp) is a helper thread. */
bool is_helper_task(struct profiler *p, struct vcpu_poll *vp,
			   uint64_t task)
{
	struct ivm_guest_task t;
	struct ivm_error *err;

	/*
	 * Nothing to tell apart before the helper first held a vCPU (the
	 * rescue policy may never need to): no task read on every switch.
	 */
	if (p->cfg->capture_mode != IVM_CAPTURE_MODE_PIN || !p->cfg->pin ||
	    !ivm_pin_capture_stats(p->cfg->pin)->holds)
		return false;
	if (task == vp->last_current)
		return vp->last_is_helper;
	err = ivm_kernel_read_task(p->guest->layout, task, &t);
	if (err) {
		ivm_error_destroy(err);
		return false;	/* not cached: try again next poll */
	}
	vp->last_current = task;
	vp->last_is_helper = t.tgid > 0 &&
		(uint32_t)t.tgid == ivm_pin_capture_helper_pid(p->cfg->pin);
	return vp->last_is_helper;
}


/* The helper's process, whose threads are idlevm's own work; or 0. */
int32_t helper_tgid(const struct profiler *p)
{
	if (p->cfg->capture_mode == IVM_CAPTURE_MODE_PIN && p->cfg->pin)
		return (int32_t)ivm_pin_capture_helper_pid(p->cfg->pin);
	return 0;
}

struct ivm_error *capture(struct profiler *p,
			  const struct ivm_capture_req *req)
{
	return IN_STAGE(p, IVM_STAGE_CAPTURE, capture_in(p, req));
}

/*
 * Who ran last on v's CPU, now idle (last_ran.h), counted; *ret 0 when
 * nobody is found.  Only a guest that is gone is an error.
 */
struct ivm_error *last_ran_task(struct profiler *p,
				       const struct ivm_guest_vcpu *v,
				       uint64_t now, uint64_t *ret)
{
	const struct ivm_vcpu_watch_view *view =
		&p->views[v - p->guest->vcpus];
	struct ivm_error *err;

	*ret = 0;
	err = IN_STAGE(p, IVM_STAGE_STAMPS,
		       ivm_last_ran_find_at(p->last_ran, (unsigned int)v->cpu,
					    helper_tgid(p),
					    view->rq_clock_ok ?
					    view->rq_clock : 0,
					    view->idle_stamp_ok ?
					    view->idle_stamp : 0, now, ret));
	if (err && err->code == IVM_ERROR_GONE)
		return err;
	if (err) {
		ivm_error_destroy(err);
		p->res->to_idle_unresolved++;
		return NULL;
	}
	p->res->to_idle_resolved++;
	return NULL;
}

/*
 * A to-idle target the poll could not be sure of: ask guest memory who ran
 * last on the CPU.  Without an answer the dispatch monitor's guess stands,
 * if it has one; req->task 0 means nothing to capture.
 */
static struct ivm_error *resolve_to_idle(struct profiler *p,
					 const struct ivm_guest_vcpu *v,
					 uint64_t now,
					 struct ivm_capture_req *req)
{
	struct ivm_error *err;
	uint64_t task, refused;

	if (!p->last_ran)
		return NULL;
	refused = ivm_last_ran_stats(p->last_ran)->stale_refused;
	err = last_ran_task(p, v, now, &task);
	/* Tasks forked since the walk: the guess may be as wrong. */
	if (!err && ivm_last_ran_stats(p->last_ran)->stale_refused != refused)
		req->task = 0;
	if (err || !task)
		return err;
	if (task != req->task)
		p->res->to_idle_retargeted++;
	req->task = task;
	return NULL;
}


/*
 * The first task switched in on v's CPU since its run-queue clock read
 * since, or 0, and in *arrival (0 if none) when the CPU left idle at the
 * latest (last_ran.h).  The dispatch monitor and the idle period that
 * ended ask for the same one in the same poll: the last answer is kept for
 * that.
 */
struct ivm_error *first_since(struct profiler *p,
				     const struct ivm_guest_vcpu *v,
				     uint64_t since, uint64_t *ret,
				     uint64_t *arrival)
{
	struct ivm_error *err;

	*ret = *arrival = 0;
	if (!p->last_ran || v->cpu < 0)
		return NULL;
	if (p->first_cache_ok && p->first_cache_cpu == v->cpu &&
	    p->first_cache_since == since &&
	    p->first_cache_poll == p->res->polls) {
		*ret = p->first_cache_task;
		*arrival = p->first_cache_arrival;
		return NULL;
	}
	err = IN_STAGE(p, IVM_STAGE_STAMPS,
		       ivm_last_ran_first_since(p->last_ran,
						(unsigned int)v->cpu,
						helper_tgid(p), since,
						ivm_mono_ns(), ret, arrival));
	if (err && err->code == IVM_ERROR_GONE)
		return err;
	ivm_error_destroy(err);
	p->first_cache_ok = true;
	p->first_cache_cpu = v->cpu;
	p->first_cache_since = since;
	p->first_cache_poll = p->res->polls;
	p->first_cache_task = *ret;
	p->first_cache_arrival = *arrival;
	return NULL;
}

/* The guest task at addr as a period record names it; zeros if unknown. */
void task_id(struct profiler *p, uint64_t addr,
		    struct ivm_idle_task_id *ret)
{
	struct ivm_guest_task t;
	struct ivm_error *err;

	memset(ret, 0, sizeof(*ret));
	if (!addr)
		return;
	err = ivm_kernel_read_task(p->guest->layout, addr, &t);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	ret->pid = t.tgid > 0 ? (uint32_t)t.tgid : 0;
	ret->tid = t.pid > 0 ? (uint32_t)t.pid : 0;
	memcpy(ret->comm, t.comm, strnlen(t.comm, sizeof(ret->comm) - 1));
}


/*
 * A from-idle target that left before it was seen: the first task switched
 * in on the CPU since the idle look.  req->task 0: nothing found.
 */
static struct ivm_error *resolve_from_idle(struct profiler *p,
					   const struct ivm_guest_vcpu *v,
					   uint64_t now,
					   struct ivm_capture_req *req)
{
	struct ivm_error *err;
	uint64_t arrival;

	(void)now;
	err = first_since(p, v, req->since, &req->task, &arrival);
	if (err)
		return err;
	if (req->task)
		p->res->from_idle_resolved++;
	else
		p->res->from_idle_unresolved++;
	return NULL;
}

/* Resolve, capture and account one request of the dispatch monitor. */
static struct ivm_error *handle_request(struct profiler *p,
					struct ivm_guest_vcpu *v, uint64_t now,
					struct ivm_capture_req *req)
{
	struct ivm_error *err = NULL;

	if (req->resolve)
		err = req->kind == IVM_SAMPLE_FROM_IDLE ?
			resolve_from_idle(p, v, now, req) :
			resolve_to_idle(p, v, now, req);
	if (!err && req->task && req->kind == IVM_SAMPLE_TO_IDLE)
		ivm_idle_periods_set_to_idle(p->periods, req->vcpu, req->task);
	if (!err && req->task)
		err = capture(p, req);
	if (!err && req->task)
		err = look_after_capture(p, req->vcpu);
	ivm_dispatch_capture_done(p->dispatch, req->vcpu);
	return err;
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
	       a->cpu_switches == b->cpu_switches;
}

/*
 * One batched read is not a snapshot: its words are copied one after the
 * other while the guest runs, so a switch in the middle can show the new
 * task with the old counts, and a from-idle task would be "seen" that was
 * not the first.  When a look may decide something (a vCPU's task or its
 * idle count moved since the last look), read again: a vCPU whose two
 * reads differ keeps the second read without its CPU switch count, so
 * nothing is taken as exact from it.
 */
static struct ivm_error *settle_views(struct profiler *p, uint64_t now)
{
	struct ivm_guest *g = p->guest;
	struct ivm_error *err;
	bool moved = false;
	size_t i;

	if (p->source != IVM_IDLE_SOURCE_SCHED)
		return NULL;
	for (i = 0; i < g->nr_vcpus; i++)
		moved |= !same_view(&p->views[i], &p->last_views[i]);
	if (moved) {
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
			    err->code == IVM_ERROR_NOMEM) {
				/* The file or the guest: can't go on. */
				p->gone = true;
				end_with(p, ivm_error_string(err));
			}
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
		    p->views[i].rq_clock_ok &&
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
static struct ivm_error *switch_setup(struct profiler *p)
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
		p->gone = true;
		end_with(p, ivm_error_string(err));
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
 * The guest's modules, one "module" metadata item each, so a report made
 * elsewhere can symbolize addresses in module code.  Not fatal: a guest
 * whose module list cannot be read is profiled all the same, and the
 * file says why its module frames will stay raw.
 */
static struct ivm_error *write_modules(struct profiler *p)
{
	const struct ivm_kmodules *mods;
	struct ivm_error *err;
	size_t i;

	err = ivm_guest_modules(p->guest, &mods);
	if (err) {
		struct ivm_error *werr = ivm_profile_write_meta(
			p->writer, "modules_error", ivm_error_string(err));

		ivm_error_destroy(err);
		return werr;
	}
	for (i = 0; i < mods->nr && !err; i++) {
		char *line = ivm_kmodule_format(&mods->mods[i]);
		char **secs = NULL;
		size_t nr = 0, k;

		if (line)
			secs = ivm_kmodule_format_sections(&mods->mods[i], &nr);
		if (!line || !secs) {
			free(line);
			err = &ivm_enomem;
			break;
		}
		err = ivm_profile_write_meta(p->writer, "module", line);
		for (k = 0; k < nr; k++) {
			if (!err)
				err = ivm_profile_write_meta(p->writer,
							     "module_sections",
							     secs[k]);
			free(secs[k]);
		}
		free(secs);
		free(line);
	}
	if (!err && mods->truncated)
		err = ivm_profile_write_meta(p->writer, "modules_error",
					     ivm_error_string(mods->error));
	return err;
}

static struct ivm_error *write_meta(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	const struct ivm_profiler_config *c = p->cfg;
	char buf[64];
	struct ivm_error *err;
	time_t now = time(NULL);
	struct ivm_kimage kimage;
	struct timespec wall;
	struct tm tm;
	size_t i;

#define META(k, v)							\
	do {								\
		err = ivm_profile_write_meta(p->writer, k, v);		\
		if (err)						\
			return err;					\
	} while (0)
	META("guest", g->name);
	META("kernel", g->release);
	META("vmlinux", g->vmlinux);
	snprintf(buf, sizeof(buf), "0x%" PRIx64,
		 ivm_kernel_layout_slide(g->layout));
	META("kaslr_offset", buf);
	snprintf(buf, sizeof(buf), "%zu", g->nr_vcpus);
	META("vcpus", buf);
	META("idle_source", ivm_idle_source_name(p->source));
	META("capture", ivm_capture_mode_name(c->capture_mode));
	/* Where running vCPUs' registers came from (on-CPU, from-idle). */
	META("registers", c->tcg_env ? "qemu memory" : "monitor");
	snprintf(buf, sizeof(buf), "%g", c->frequency_hz);
	META("frequency_hz", buf);
	snprintf(buf, sizeof(buf), "%u", c->idle_every);
	META("idle_every", buf);
	snprintf(buf, sizeof(buf), "%g", c->poll_interval_ms);
	META("poll_interval_ms", buf);
	if (c->switch_every) {
		snprintf(buf, sizeof(buf), "%u", c->switch_every);
		META("switch_every", buf);
	}
	if (c->cpu_budget > 0) {
		snprintf(buf, sizeof(buf), "%g", c->cpu_budget);
		META("cpu_budget", buf);
	}
	gmtime_r(&now, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	META("start", buf);
	/*
	 * The same moment on the wall clock and on the samples' clock, to
	 * nanoseconds: a report places the samples in time and says how long
	 * the file covers (pprof's time_nanos, duration_nanos).
	 */
	clock_gettime(CLOCK_REALTIME, &wall);
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)wall.tv_sec *
		 UINT64_C(1000000000) + (uint64_t)wall.tv_nsec);
	META("start_ns", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, ivm_mono_ns());
	META("start_mono_ns", buf);
	/* The vmlinux a symbol server needs, even when the host has none. */
	ivm_kimage_read(g->layout, &kimage);
	if (kimage.build_id[0])
		META("kernel_build_id", kimage.build_id);
	if (kimage.text_start) {
		snprintf(buf, sizeof(buf), "0x%" PRIx64 " 0x%" PRIx64,
			 kimage.text_start, kimage.text_end);
		META("kernel_text", buf);
	}
	/* A report of the file defaults to the same symbols. */
	if (c->symdir)
		META("symdir", c->symdir);
	/* What each label is, in order: the report's dimensions. */
	for (i = 0; i < c->nr_labels; i++) {
		char spec[IVM_LABEL_KEY_MAX + IVM_UELF_MAX_NAME + 16];

		META(IVM_META_LABEL, ivm_label_spec_format(&c->labels[i], spec,
							   sizeof(spec)));
	}
	for (i = 0; i < c->nr_binaries; i++) {
		char *path = realpath(c->binaries[i], NULL);

		err = ivm_profile_write_meta(p->writer, "binary",
					     path ? path : c->binaries[i]);
		free(path);
		if (err)
			return err;
	}
#undef META
	return write_modules(p);
}

static struct ivm_error *setup_watch(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	struct ivm_vcpu_watch_target *targets;
	struct ivm_error *err;
	size_t i, watched = 0;

	p->views = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*p->views));
	p->views2 = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*p->views));
	p->last_views = calloc(g->nr_vcpus ? g->nr_vcpus : 1,
			       sizeof(*p->views));
	if (!p->views2 || !p->last_views)
		return &ivm_enomem;
	targets = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*targets));
	if (!p->views || !targets) {
		free(targets);
		return &ivm_enomem;
	}
	/*
	 * The CPUs' switch counts tell the dispatch monitor when the task it
	 * saw last is not sure to be the one that went to idle; they are
	 * only worth reading when last_ran can then find the right one, and
	 * last_ran is only kept when some are read: a to-idle request is
	 * only marked `resolve` on a CPU whose count is watched.
	 */
	err = ivm_last_ran_create(g->layout, g->gmem, &p->last_ran);
	if (err) {
		ivm_error_destroy(err);
		p->last_ran = NULL;
	}
	for (i = 0; i < g->nr_vcpus; i++) {
		targets[i].cpu = g->vcpus[i].cpu;
		targets[i].idle_task = p->vcpus[i].idle_task;
		if (!p->last_ran || g->vcpus[i].cpu < 0)
			continue;
		err = ivm_kernel_cpu_switches_va(g->layout,
						 (unsigned int)g->vcpus[i].cpu,
						 &targets[i].switches_va);
		watched += !err;
		ivm_error_destroy(err);	/* 0 stays: not watched */
		/* Names the from-idle task after the fact (last_ran.h). */
		err = ivm_kernel_cpu_rq_clock_va(g->layout,
						 (unsigned int)g->vcpus[i].cpu,
						 &targets[i].rq_clock_va);
		ivm_error_destroy(err);
		/* ... and the to-idle task exactly (last_ran.h). */
		err = ivm_kernel_cpu_rq_idle_stamp_va(g->layout,
						(unsigned int)g->vcpus[i].cpu,
						&targets[i].rq_idle_stamp_va);
		ivm_error_destroy(err);
	}
	if (!watched) {
		ivm_last_ran_destroy(p->last_ran);
		p->last_ran = NULL;
	}
	/* Interrupt counts make idle periods say what woke the vCPU. */
	err = g->btf ? ivm_irq_stat_create(g->btf, g->layout, &p->irq_stat) :
		       NULL;
	ivm_error_destroy(err);
	err = ivm_vcpu_watch_create(g->layout, g->gmem, targets, g->nr_vcpus,
				    p->nvcsw_off, p->nivcsw_off, p->irq_stat,
				    &p->watch);
	free(targets);
	return err;
}

static struct ivm_error *setup(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	const struct ivm_kernel_offsets *off;
	struct ivm_dispatch_config dc = {
		.idle_every = p->cfg->idle_every,
		.tick_ns = p->cfg->frequency_hz > 0 ?
			   (uint64_t)(1e9 / p->cfg->frequency_hz) : 0,
	};
	struct ivm_error *err;
	size_t i;

	if (!g->qmp)
		return ivm_error_create(IVM_ERROR_INVALID,
					"profiling needs a live guest, not a core");
	off = ivm_kernel_layout_offsets(g->layout);
	p->nvcsw_off = off->task_nvcsw;
	p->nivcsw_off = off->task_nivcsw;
	err = ivm_capture_engine_create(g, &p->engine);
	if (!err)
		err = ivm_proc_table_create(&p->procs);
	if (err)
		return err;
	for (i = 0; i < p->cfg->nr_binaries; i++) {
		err = ivm_capture_engine_add_binary(p->engine,
						    p->cfg->binaries[i]);
		if (err)
			return err;
	}
	if (p->cfg->symdir) {
		err = ivm_capture_engine_set_symdir(p->engine, p->cfg->symdir);
		if (err)
			return err;
	}
	err = ivm_capture_engine_set_labels(p->engine, p->cfg->labels,
					    p->cfg->nr_labels);
	if (err)
		return err;
	p->vcpus = calloc(g->nr_vcpus, sizeof(*p->vcpus));
	p->held = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*p->held));
	if (!p->vcpus || !p->held)
		return &ivm_enomem;
	err = ivm_idle_periods_create((uint32_t)g->nr_vcpus, &p->periods);
	if (err)
		return err;
	if (p->source == IVM_IDLE_SOURCE_SCHED) {
		err = setup_sched_source(p);
		if (err && !p->cfg->source_fallback)
			return err;
		if (err) {
			/* Auto: polling works wherever /proc does. */
			fprintf(stderr,
				"idlevm: warning: the sched idle source cannot start (%s): idle source thread (polling) instead\n",
				ivm_error_string(err));
			ivm_error_destroy(err);
			ivm_trace_session_destroy(p->trace);
			ivm_trace_session_destroy(p->host_trace);
			ivm_trace_session_destroy(p->disk_trace);
			p->trace = p->host_trace = p->disk_trace = NULL;
			p->source = IVM_IDLE_SOURCE_THREAD;
		} else if (p->res->tracefs_mounted) {
			fprintf(stderr,
				"idlevm: mounted tracefs on /sys/kernel/tracing for the sched idle source\n");
		}
	}
	p->res->idle_source = p->source;
	/*
	 * The sched source samples idle periods itself, one to-idle and one
	 * from-idle each; the dispatch monitor keeps the on-CPU ticks.
	 */
	if (p->source == IVM_IDLE_SOURCE_SCHED)
		dc.idle_every = 0;
	err = ivm_dispatch_create((uint32_t)g->nr_vcpus, &dc, &p->dispatch);
	if (err)
		return err;
	if (p->source == IVM_IDLE_SOURCE_KVM) {
		static const char *const events[] = {
			"kvm:kvm_exit", "kvm:kvm_vcpu_wakeup", "kvm:kvm_entry",
		};
		pid_t tids[256];
		size_t n = 0;

		if (!g->kvm)
			return ivm_error_create(IVM_ERROR_INVALID,
						"the kvm idle source needs a guest on hardware KVM, and %s runs under TCG: use --idle-source thread",
						g->name);
		for (i = 0; i < g->nr_vcpus && n < 256; i++)
			tids[n++] = g->vcpus[i].tid;
		err = ivm_tracefs_ensure(&p->res->tracefs_mounted);
		if (!err)
			err = ivm_kvm_events_load(NULL, &p->kvm_events);
		if (!err)
			err = ivm_trace_session_create(events, 3, tids, n, 0,
						       &p->trace);
		if (err)
			return err;
	}
	for (i = 0; i < g->nr_vcpus; i++) {
		struct vcpu_poll *vp = &p->vcpus[i];
		char path[64];

		vp->stat_fd = -1;
		if (g->vcpus[i].cpu >= 0)
			vp->idle_task = ivm_kernel_layout_idle_task(
				g->layout, (unsigned int)g->vcpus[i].cpu);
		if (p->source != IVM_IDLE_SOURCE_THREAD)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat",
			 (int)g->qemu_pid, (int)g->vcpus[i].tid);
		vp->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (vp->stat_fd < 0)
			return ivm_error_os(errno, "opening %s", path);
	}
	err = setup_watch(p);
	if (!err && !g->vmlinux)
		err = ivm_ksym_hits_create(g->ksyms,
					   ivm_kernel_layout_slide(g->layout),
					   &p->ksym_hits);
	if (!err)
		err = write_meta(p);
	if (!err)
		err = switch_setup(p);
	/* Setup is over: the file takes its name now (see profile_file.h). */
	if (!err)
		err = ivm_profile_writer_flush(p->writer);
	return err;
}

static void teardown(struct profiler *p)
{
	size_t i;

	if (p->vcpus)
		for (i = 0; i < p->guest->nr_vcpus; i++)
			if (p->vcpus[i].stat_fd >= 0)
				close(p->vcpus[i].stat_fd);
	free(p->vcpus);
	if (p->held)
		for (i = 0; i < p->guest->nr_vcpus; i++)
			ivm_sample_release(&p->held[i]);
	free(p->held);
	free(p->views);
	free(p->views2);
	free(p->last_views);
	ivm_switch_sampler_destroy(p->switches);
	ivm_vcpu_watch_destroy(p->watch);
	ivm_last_ran_destroy(p->last_ran);
	ivm_ksym_hits_destroy(p->ksym_hits);
	ivm_trace_session_destroy(p->trace);
	ivm_trace_session_destroy(p->host_trace);
	ivm_trace_session_destroy(p->disk_trace);
	ivm_kvm_events_destroy(p->kvm_events);
	ivm_sched_events_destroy(p->sched_events);
	ivm_host_sched_destroy(p->host);
	ivm_disk_syscalls_destroy(p->disk_syscalls);
	ivm_disk_service_destroy(p->disk);
	ivm_idle_periods_destroy(p->periods);
	ivm_irq_stat_destroy(p->irq_stat);
	ivm_capture_engine_destroy(p->engine);
	ivm_proc_table_destroy(p->procs);
	ivm_dispatch_destroy(p->dispatch);
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
	err = setup(&pr->p);
	if (err) {
		teardown(&pr->p);
		ivm_profile_writer_destroy(pr->p.writer);
		free(pr);
		return err;
	}
	pr->p.start_ns = pr->next = pr->last_flush = ivm_mono_ns();
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
	n = ivm_trace_session_pollfds(pr->p.trace, &mine);
	for (i = 0; i < n && i < max; i++)
		fds[i] = mine[i];
	return i;
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
	ivm_uobjects_stats(ivm_capture_engine_objects(p->engine),
			   &result->objects);
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
	 * kernel's run_delay is read (fill_stats).
	 */
	if (p->host && p->trace && !p->gone)
		ivm_error_destroy(poll_halted(p));
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
	teardown(p);
	free(pr);
	return ferr;
}

void ivm_profiler_wait(struct pollfd *fds, size_t nr, uint64_t until_ns)
{
	uint64_t now = ivm_mono_ns();
	struct timespec ts;

	if (until_ns <= now)
		return;
	if (nr) {
		ts.tv_sec = (time_t)((until_ns - now) / 1000000000ull);
		ts.tv_nsec = (long)((until_ns - now) % 1000000000ull);
		/* EINTR (Ctrl-C) just ends the wait early. */
		ppoll(fds, (nfds_t)nr, &ts, NULL);
		return;
	}
	ts.tv_sec = (time_t)(until_ns / 1000000000ull);
	ts.tv_nsec = (long)(until_ns % 1000000000ull);
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}
