// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernel/irq_stat.h"
#include "kernel/last_ran.h"
#include "profile/profiler_int.h"
#include "profile/replay.h"

/*
 * Our clock minus vcpu's run-queue clock, to place the guest's scheduler
 * stamps in our time (both count nanoseconds), from a look at time_ns that
 * read rq_clock.  The run-queue clock holds its CPU's last update (up to a
 * tick ago on a busy CPU, the idle entry on an idle one), so the look's
 * own difference is too large, by as much.  A look that opened a period
 * stamped by the host sleep knows better: that sleep came just after the
 * idle entry whose clock the CPU still shows, and before the look, so its
 * difference is the smaller one (both are too large, never too small,
 * unless the guest's clock jumped).
 */
static struct ivm_error *period_capture(struct profiler *p, uint32_t vcpu,
					enum ivm_sample_kind kind,
					uint64_t task, uint64_t time_ns,
					bool later, uint64_t value_ns);

static uint64_t host_minus_guest(const struct profiler *p, uint32_t vcpu,
				 uint64_t time_ns, uint64_t rq_clock)
{
	uint64_t start;

	if (ivm_idle_periods_opened(p->periods, vcpu) &&
	    ivm_idle_periods_open_start(p->periods, vcpu, &start) &&
	    start <= time_ns)
		return start - rq_clock;
	return time_ns - rq_clock;
}

/*
 * The host's delay in running the vCPU after the wakeup that ended the
 * period r, as a from-idle sample's value; UINT64_MAX when not known.
 */
static uint64_t wake_delay(const struct profiler *p,
			   const struct ivm_idle_record *r)
{
	uint64_t d;

	if (p->host && (r->flags & IVM_IDLE_END_FROM_EVENT) &&
	    ivm_host_sched_wake_delay(p->host, (int)r->vcpu, r->end_ns, &d))
		return d;
	return UINT64_MAX;
}

/*
 * A period that ended: name its from-idle task (the one seen, or the first
 * switched in since the idle look), write its record, and with the sched
 * source sample that task.
 */
struct ivm_error *write_period(struct profiler *p,
				      const struct ivm_idle_period *ip)
{
	struct ivm_idle_record r = {
		.vcpu = ip->vcpu, .flags = ip->flags, .start_ns = ip->start_ns,
		.end_ns = ip->end_ns, .halts = ip->halts,
		.wake_mask = ip->wake_mask, .exit_reason = ip->exit_reason,
		.before = ip->before, .wake_before = ip->wake_before,
		.after = ip->after,
	};
	struct ivm_error *err;
	uint64_t from = ip->from_idle_task, arrival = 0, end;

	/* What the host did in it: its records up to the read that ended it. */
	err = IN_STAGE(p, IVM_STAGE_EVENTS, host_sides_read(p, false));
	if (err)
		return err;
	if (!from && ip->before.rq_clock) {
		err = first_since(p, &p->guest->vcpus[ip->vcpu],
				  ip->before.rq_clock, &from, &arrival);
		if (err)
			return err;
		if (from)
			r.flags |= IVM_IDLE_FROM_IDLE_RESOLVED;
	}
	/*
	 * No wakeup of its own to end it (the look came after more switches
	 * out of idle, or the event was lost): the first arrival since is
	 * when the CPU left idle.  Only ever earlier than the look.
	 */
	if (!(r.flags & IVM_IDLE_END_FROM_EVENT) && arrival &&
	    ip->after.rq_clock && arrival <= ip->after.rq_clock) {
		end = arrival + host_minus_guest(p, ip->vcpu,
						 ip->after.time_ns,
						 ip->after.rq_clock);
		if (end < r.end_ns && end >= r.start_ns &&
		    end <= ip->after.time_ns) {
			r.end_ns = end;
			r.flags |= IVM_IDLE_END_FROM_STAMP;
		}
	}
	to_idle_id(p, ip, &r.to_idle);
	task_id(p, from, &r.from_idle);
	err = IN_STAGE(p, IVM_STAGE_WRITE,
		       ivm_profile_write_idle_period(p->writer, &r));
	/*
	 * A period seen to open has its to-idle sample held (a rebuilt one
	 * gets its own after this; the held one is of the period now open).
	 */
	/* The host's waits and sleeps in it were the guest's idle. */
	if (p->host && !(r.flags & IVM_IDLE_START_UNKNOWN))
		ivm_host_sched_idle_period(p->host, r.vcpu, r.start_ns,
					   r.end_ns);
	/* A device woke it: what the host's storage did meanwhile. */
	if (p->disk && !(r.flags & IVM_IDLE_START_UNKNOWN) &&
	    (r.wake_mask & (1u << IVM_IRQ_DEVICE)))
		ivm_disk_service_device_period(p->disk, r.start_ns, r.end_ns);
	if (!err && !(ip->flags & IVM_IDLE_REPLAYED))
		err = write_held(p, ip->vcpu,
				 !(r.flags & IVM_IDLE_START_UNKNOWN),
				 r.end_ns - r.start_ns);
	if (err)
		return err;
	p->res->periods_written++;
	if (r.flags & IVM_IDLE_FROM_IDLE_RESOLVED)
		p->res->from_idle_resolved++;
	else if (!from)
		p->res->from_idle_unresolved++;
	if (from && !(ip->flags & IVM_IDLE_REPLAYED))
		err = period_capture(p, ip->vcpu, IVM_SAMPLE_FROM_IDLE, from,
				     ip->end_ns, false, wake_delay(p, &r));
	return err;
}

/*
 * A look opened an idle period: its to-idle task is the one that ran last
 * on the CPU, read while the CPU is idle (last_ran.h), sampled at once.
 */
static struct ivm_error *to_idle_of_opened(struct profiler *p, uint32_t vcpu,
					   uint64_t now)
{
	const struct ivm_guest_vcpu *v = &p->guest->vcpus[vcpu];
	struct ivm_error *err;
	uint64_t task;

	if (!p->last_ran || v->cpu < 0)
		return NULL;
	err = last_ran_task(p, v, now, &task);
	if (err || !task)
		return err;
	ivm_idle_periods_set_to_idle(p->periods, vcpu, task);
	return period_capture(p, vcpu, IVM_SAMPLE_TO_IDLE, task, now, false,
			      UINT64_MAX);
}

/* Bounds on one replay: a look rarely follows more than a few periods. */
#define MAX_REPLAY_RUNS 256
#define MAX_REPLAY_GAPS 32

/*
 * Sched source: the idle-period machine decides the to-idle and from-idle
 * samples, one of each per period (the dispatch monitor keeps the on-CPU
 * ticks).  Every --idle-every'th of each kind is taken.
 */
static bool periods_sample(const struct profiler *p)
{
	return p->source == IVM_IDLE_SOURCE_SCHED && p->cfg->idle_every;
}

/* value_ns: the sample's time value (dispatch.h), UINT64_MAX for none. */
static struct ivm_error *period_capture(struct profiler *p, uint32_t vcpu,
					enum ivm_sample_kind kind,
					uint64_t task, uint64_t time_ns,
					bool later, uint64_t value_ns)
{
	struct ivm_capture_req req = { .vcpu = vcpu, .kind = kind,
				       .task = task, .time_ns = time_ns,
				       .later = later,
				       .valued = value_ns != UINT64_MAX,
				       .value_ns = value_ns };
	struct ivm_error *err;

	if (!periods_sample(p) || !task ||
	    ++p->period_every[kind] < p->cfg->idle_every)
		return NULL;
	p->period_every[kind] = 0;
	err = capture(p, &req);
	/*
	 * A from-idle task often runs during its first read and is
	 * discarded; read a moment later it has usually blocked, and its
	 * saved frame is consistent.  One retry, so short runners are not
	 * the ones the profile loses.
	 */
	if (!err && p->cap.outcome != IVM_CAPTURE_KEPT &&
	    p->cap.outcome != IVM_CAPTURE_FAILED) {
		p->res->retries++;
		err = capture(p, &req);
	}
	if (!err)
		err = look_after_capture(p, vcpu);
	return err;
}

/* One rebuilt idle period: its record, and its two tasks' stacks. */
static struct ivm_error *replayed_period(struct profiler *p, uint32_t vcpu,
					 const struct ivm_replay_gap *gap,
					 uint64_t host_minus_guest)
{
	struct ivm_idle_period ip = {
		.vcpu = vcpu,
		.flags = IVM_IDLE_REPLAYED | IVM_IDLE_TO_IDLE_KNOWN |
			 IVM_IDLE_FROM_IDLE_KNOWN |
			 (gap->start_known ? 0 : IVM_IDLE_START_UNKNOWN),
		.start_ns = gap->start + host_minus_guest,
		.end_ns = gap->end + host_minus_guest,
		.to_idle_task = gap->to_idle,
		.from_idle_task = gap->from_idle,
	};
	struct ivm_error *err = write_period(p, &ip);

	/*
	 * Without a start, the period is one the to-idle task's later run
	 * hid: its stack now is where it blocked next.  Kept and marked, so
	 * the thread counts and the stack says what it is.
	 */
	if (!gap->start_known)
		p->res->periods_no_start++;
	if (!err)
		err = period_capture(p, vcpu, IVM_SAMPLE_TO_IDLE, gap->to_idle,
				     ip.start_ns, !gap->start_known,
				     gap->start_known ? ip.end_ns - ip.start_ns :
							UINT64_MAX);
	if (!err)
		err = period_capture(p, vcpu, IVM_SAMPLE_FROM_IDLE,
				     gap->from_idle, ip.end_ns, false, UINT64_MAX);
	return err;
}

/*
 * The last look found idle periods that came and went unseen: rebuild
 * them from the scheduler's stamps (replay.h), as many as were counted.
 */
static struct ivm_error *replay_unseen(struct profiler *p, uint32_t vcpu,
				       const struct ivm_vcpu_obs *obs)
{
	static struct ivm_last_ran_run runs[MAX_REPLAY_RUNS];
	struct ivm_replay_gap gaps[MAX_REPLAY_GAPS];
	const struct ivm_guest_vcpu *v = &p->guest->vcpus[vcpu];
	struct ivm_replay_window w = { 0 };
	struct ivm_idle_obs before;
	uint64_t unseen, offset, epoch = IVM_LAST_RAN_UNKNOWN;
	struct ivm_error *err;
	size_t nr, n, i;

	unseen = ivm_idle_periods_unseen_last(p->periods, vcpu, &before);
	if (!unseen || !before.rq_clock_ok || !before.rq_clock ||
	    !p->last_ran || !obs->rq_clock_known || v->cpu < 0)
		return NULL;
	w.since = before.rq_clock;
	w.before = before.current_is_idle ? 0 : before.current;
	w.counts_ok = before.cpu_switches_ok && obs->cpu_switches_known &&
		      before.idle_switches_ok && obs->idle_switches_known &&
		      obs->cpu_switches >= before.cpu_switches &&
		      obs->idle_switches >= before.idle_switches;
	w.switches = obs->cpu_switches - before.cpu_switches;
	w.from_idle = obs->idle_switches - before.idle_switches;
	w.idle_now = obs->current_is_idle;
	/* Idle then: the mark of that stretch of idle counts arrivals. */
	if (before.current_is_idle && before.idle_switches_ok)
		epoch = before.idle_switches;
	err = IN_STAGE(p, IVM_STAGE_STAMPS,
		       ivm_last_ran_window(p->last_ran, (unsigned int)v->cpu,
					   helper_tgid(p), w.since, epoch,
					   obs->time_ns, runs, MAX_REPLAY_RUNS,
					   &nr));
	if (err && err->code == IVM_ERROR_GONE)
		return err;
	if (err) {
		ivm_error_destroy(err);
		return NULL;
	}
	n = ivm_replay_gaps(runs, nr, &w, gaps, MAX_REPLAY_GAPS);
	/* Never more than the guest's own count says happened. */
	if (n > unseen)
		n = unseen;
	ivm_idle_periods_recovered(p->periods, n);
	offset = host_minus_guest(p, vcpu, obs->time_ns, obs->rq_clock);
	for (i = 0; i < n && !err; i++)
		err = replayed_period(p, vcpu, &gaps[i], offset);
	return err;
}

/* Feed one look to the idle-period machine; write what it finished. */
struct ivm_error *observe_periods(struct profiler *p, uint32_t vcpu,
					 const struct ivm_vcpu_obs *obs,
					 const struct ivm_vcpu_watch_view *view,
					 bool after_own_run)
{
	struct ivm_idle_obs io = {
		.time_ns = obs->time_ns,
		.current_ok = obs->current_known,
		.current = obs->current,
		.current_is_idle = obs->current_is_idle,
		.idle_switches_ok = obs->idle_switches_known,
		.idle_switches = obs->idle_switches,
		.cpu_switches_ok = obs->cpu_switches_known,
		.cpu_switches = obs->cpu_switches,
		.rq_clock_ok = obs->rq_clock_known,
		.rq_clock = obs->rq_clock,
		.irqs = view->irqs,
	};
	struct ivm_idle_period done;
	struct ivm_error *err = NULL;
	bool ended = after_own_run ?
		ivm_idle_periods_rebase(p->periods, vcpu, &io, &done) :
		ivm_idle_periods_observe(p->periods, vcpu, &io, &done);

	if (ended)
		err = write_period(p, &done);
	if (!err && !after_own_run && periods_sample(p) &&
	    ivm_idle_periods_opened(p->periods, vcpu))
		err = to_idle_of_opened(p, vcpu, obs->time_ns);
	if (!err && !after_own_run)
		err = replay_unseen(p, vcpu, obs);
	return err;
}

/*
 * Pin mode ran the helper's holder on the vCPU: the idle task's switches
 * since the last look are ours.  Look again, so the idle period goes on.
 * Only then: after a capture that asked nothing of the helper (the rescue
 * policy's unpinned read held) the switches since are the guest's own,
 * and taking them as ours hid real idle periods (t_80 on lockstorm: 81
 * came and went unseen against 26 in the optimistic runs beside it), and
 * the extra read delayed the other vCPU's capture.
 */
struct ivm_error *look_after_capture(struct profiler *p, uint32_t vcpu)
{
	struct vcpu_poll *vp = &p->vcpus[vcpu];
	const struct ivm_vcpu_watch_view *view = &p->views[vcpu];
	struct ivm_vcpu_obs obs = { .time_ns = ivm_mono_ns() };
	struct ivm_error *err;

	if (p->cfg->capture_mode != IVM_CAPTURE_MODE_PIN || !p->cfg->pin ||
	    !p->helper_held)
		return NULL;
	p->helper_held = false;
	err = IN_STAGE(p, IVM_STAGE_LOOKS,
		       ivm_vcpu_watch_read(p->watch, obs.time_ns, p->views,
					   NULL));
	if (err)
		return err;
	/* A new look: the stamps held for the one before are older. */
	if (p->last_ran)
		ivm_last_ran_hold(p->last_ran);
	if (!view->current_ok)
		return NULL;
	obs.current_known = true;
	obs.current = view->current;
	obs.current_is_idle = view->current == vp->idle_task ||
			      is_helper_task(p, vp, view->current);
	obs.idle_switches_known = view->idle_switches_ok;
	obs.idle_switches = view->idle_switches;
	obs.cpu_switches_known = view->cpu_switches_ok;
	obs.cpu_switches = view->cpu_switches;
	obs.rq_clock_known = view->rq_clock_ok;
	obs.rq_clock = view->rq_clock;
	return observe_periods(p, vcpu, &obs, view, true);
}
