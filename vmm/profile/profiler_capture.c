// SPDX-License-Identifier: MIT
/*
 * A profile run's samples (profiler_int.h): whose stack a transition asks
 * for (the to-idle or from-idle task named from the scheduler's stamps
 * when the look could not be sure), its capture, and its way into the
 * file (filters, the to-idle sample held for its period's length).
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>

#include "kernel/last_ran.h"
#include "profile/idle_periods.h"
#include "profile/ksym_hits.h"
#include "profile/profiler.h"
#include "profile/profiler_int.h"

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
struct ivm_error *write_kept(struct profiler *p,
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

/*
 * Reads of a running target whose live registers led the unwind nowhere
 * (ivm_capture_live_cut) before its stack is kept as it is.  Only from
 * QEMU's memory (tcg_env.h): registers asked of QEMU over QMP are
 * synchronized with the vCPU, and cost a round trip each.
 */
#define LIVE_TRIES	3

/*
 * The registers of req's target when it is still current on its vCPU
 * (*regs then points into cpu_regs), else *regs is NULL: a to-idle
 * target, or one that left the vCPU since it was seen there.
 */
static struct ivm_error *live_regs(struct profiler *p,
				   const struct ivm_capture_req *req,
				   struct ivm_qemu_cpu_regs *cpu_regs,
				   const struct ivm_x86_regs **regs, int *cpl)
{
	struct ivm_guest *g = p->guest;
	struct ivm_guest_vcpu *v = &g->vcpus[req->vcpu];
	struct ivm_error *err;
	uint64_t cur;

	*regs = NULL;
	*cpl = -1;
	if (req->kind == IVM_SAMPLE_TO_IDLE || !g->qmp)
		return NULL;
	/*
	 * The target was current when observed; take the vCPU's registers,
	 * then make sure it still is, or the registers belong to someone
	 * else.
	 */
	if (p->cfg->tcg_env)
		err = ivm_tcg_env_read(p->cfg->tcg_env, v->index, cpu_regs);
	else
		err = ivm_qemu_registers(g->qmp, v->index, cpu_regs);
	if (!err)
		err = ivm_kernel_current_task(g->layout, (unsigned int)v->cpu,
					      NULL, &cur);
	if (!err && cur == req->task && !cpu_regs->halted) {
		*regs = &cpu_regs->regs;
		*cpl = cpu_regs->cpl;
	}
	return err;
}

/* A task as a period record names it. */
static void id_of(const struct ivm_guest_task *t, struct ivm_idle_task_id *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->pid = t->tgid > 0 ? (uint32_t)t->tgid : 0;
	ret->tid = t->pid > 0 ? (uint32_t)t->pid : 0;
	memcpy(ret->comm, t->comm, strnlen(t->comm, sizeof(ret->comm) - 1));
}

static struct ivm_error *capture_in(struct profiler *p,
				     const struct ivm_capture_req *req)
{
	struct ivm_guest *g = p->guest;
	struct ivm_guest_vcpu *v = &g->vcpus[req->vcpu];
	struct ivm_qemu_cpu_regs cpu_regs;
	const struct ivm_x86_regs *regs;
	bool stopped = false;
	struct ivm_error *err = NULL, *cerr;
	int cpl, tries;

	if (p->cfg->capture_mode == IVM_CAPTURE_MODE_STOP && g->qmp) {
		err = ivm_qmp_stop(g->qmp);
		if (err)
			return err;
		stopped = true;
	}
	for (tries = 1;; tries++) {
		err = live_regs(p, req, &cpu_regs, &regs, &cpl);
		if (err)
			goto out;
		/*
		 * Pin mode pins every target that is not current on a vCPU:
		 * the to-idle one (asleep, or just woken) on the vCPU that
		 * went idle, and a from-idle or on-CPU one switched out
		 * before we got to it on the vCPU it was seen on (holding
		 * that vCPU preempts whoever runs there now, which is what
		 * the method's sampler thread does).
		 */
		if (p->cfg->capture_mode == IVM_CAPTURE_MODE_PIN &&
		    p->cfg->pin && !regs) {
			uint64_t holds =
				ivm_pin_capture_stats(p->cfg->pin)->holds;

			err = ivm_pin_capture_task(p->cfg->pin, p->engine,
						   req->task, v->cpu, &p->cap);
			p->helper_held |=
				ivm_pin_capture_stats(p->cfg->pin)->holds !=
				holds;
			pin_news(p);
		} else {
			err = ivm_capture_task(p->engine, req->task, regs, cpl,
					       v->cpu, &p->cap);
		}
		if (err)
			goto out;
		if (!regs || stopped || !p->cfg->tcg_env ||
		    !ivm_capture_live_cut(&p->cap))
			break;
		if (tries == LIVE_TRIES) {
			p->res->live_rereads_failed++;
			break;
		}
		p->res->live_rereads++;
	}
	if (tries > 1 && p->cap.outcome == IVM_CAPTURE_KEPT &&
	    !ivm_capture_live_cut(&p->cap))
		p->res->live_rereads_mended++;
	/* Stopped vCPUs do not move: the live stack is exact then. */
	if (stopped && regs)
		p->cap.sample.stack_flags &= ~(uint32_t)IVM_STACK_INEXACT;
	p->res->outcomes[p->cap.outcome]++;
	if (req->kind == IVM_SAMPLE_TO_IDLE &&
	    p->cap.outcome != IVM_CAPTURE_FAILED) {
		struct vcpu_poll *vp = &p->vcpus[req->vcpu];

		vp->named_task = req->task;
		vp->named_ns = req->time_ns;
		id_of(&p->cap.task, &vp->named);
	}
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

/* The lookups last_ran refused rather than name a task that may be wrong. */
static uint64_t refusals(const struct profiler *p)
{
	const struct ivm_last_ran_stats *s = ivm_last_ran_stats(p->last_ran);

	return s->stale_refused + s->tied_refused + s->running_refused;
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
	refused = refusals(p);
	err = last_ran_task(p, v, now, &task);
	/* Tasks forked since the walk, or tied: the guess may be as wrong. */
	if (!err && refusals(p) != refused)
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
void task_id(struct profiler *p, uint64_t addr, struct ivm_idle_task_id *ret)
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
	id_of(&t, ret);
}

/*
 * Period ip's to-idle task as its record names it.  The capture at the
 * period's start read it, most often: named then, by what ran then, with
 * no read now (half the reads of writing a period), and a task gone since
 * keeps its name.  Not for the from-idle task: its address may be a task
 * forked in the period into the to-idle one's freed task_struct.
 */
void to_idle_id(struct profiler *p, const struct ivm_idle_period *ip,
		struct ivm_idle_task_id *ret)
{
	const struct vcpu_poll *vp = &p->vcpus[ip->vcpu];

	if (ip->to_idle_task && vp->named_task == ip->to_idle_task &&
	    vp->named_ns >= ip->start_ns && vp->named_ns <= ip->end_ns) {
		*ret = vp->named;
		return;
	}
	task_id(p, ip->to_idle_task, ret);
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
struct ivm_error *handle_request(struct profiler *p,
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

