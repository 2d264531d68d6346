// SPDX-License-Identifier: MIT
/* Idle periods from host events and guest looks; see idle_periods.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/idle_periods.h"

struct vcpu_periods {
	bool asleep;		/* the thread's last host event was a sleep */
	bool sleep_pending;	/* a sleep no look has judged yet */
	uint64_t sleep_ts;
	bool woken;		/* woken since its last sleep */
	uint64_t wake_ts;
	/* Interrupt counts at the first look after that wakeup. */
	bool wake_looked;
	struct ivm_irq_counts wake_irqs;
	bool exit_known;
	uint32_t exit_reason;
	bool in_halt;		/* asleep since a HLT exit (KVM) */
	bool seen;		/* last holds a look */
	struct ivm_idle_obs last;
	uint64_t unseen_last;	/* found by the last look */
	struct ivm_idle_obs before_last;	/* the look before it */
	bool open;		/* cur is an idle period under way */
	bool opened;		/* ... since the last look */
	struct ivm_idle_period cur;
};

struct ivm_idle_periods {
	uint32_t nr_vcpus;
	struct ivm_idle_stats stats;
	struct vcpu_periods vcpus[];
};

struct ivm_error *ivm_idle_periods_create(uint32_t nr_vcpus,
					  struct ivm_idle_periods **ret)
{
	struct ivm_idle_periods *ip;

	if (!nr_vcpus || nr_vcpus > 4096)
		return ivm_error_create(IVM_ERROR_INVALID,
					"unsupported number of vCPUs: %u",
					nr_vcpus);
	ip = calloc(1, sizeof(*ip) + nr_vcpus * sizeof(ip->vcpus[0]));
	if (!ip)
		return &ivm_enomem;
	ip->nr_vcpus = nr_vcpus;
	*ret = ip;
	return NULL;
}

void ivm_idle_periods_destroy(struct ivm_idle_periods *ip)
{
	free(ip);
}

void ivm_idle_periods_host_sleep(struct ivm_idle_periods *ip, uint32_t vcpu,
				 uint64_t ts)
{
	struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus)
		return;
	v = &ip->vcpus[vcpu];
	/* The thread of a halt already opened by its HLT exit, now asleep
	 * because halt polling gave up: the same halt. */
	if (v->asleep && v->in_halt)
		return;
	ip->stats.host_sleeps++;
	v->asleep = true;
	v->sleep_pending = true;
	v->sleep_ts = ts;
	v->woken = false;
	v->wake_looked = false;
}

void ivm_idle_periods_host_sleep_quiet(struct ivm_idle_periods *ip,
				       uint32_t vcpu)
{
	struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus)
		return;
	v = &ip->vcpus[vcpu];
	v->asleep = true;
	v->woken = false;
	v->wake_looked = false;
}

void ivm_idle_periods_host_wake(struct ivm_idle_periods *ip, uint32_t vcpu,
				uint64_t ts)
{
	struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus)
		return;
	v = &ip->vcpus[vcpu];
	/* sched_waking and sched_wakeup of one wakeup: the first counts. */
	if (!v->asleep)
		return;
	ip->stats.host_wakes++;
	v->asleep = false;
	v->in_halt = false;
	v->woken = true;
	v->wake_ts = ts;
}

void ivm_idle_periods_host_halt_exit(struct ivm_idle_periods *ip,
				     uint32_t vcpu, uint32_t exit_reason,
				     uint64_t ts)
{
	struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus)
		return;
	v = &ip->vcpus[vcpu];
	ip->stats.kvm_halt_exits++;
	v->exit_known = true;
	v->exit_reason = exit_reason;
	/*
	 * The halt starts here, not when the thread sleeps: KVM first polls
	 * for a wakeup (halt_poll_ns), and a halt that ends while it polls
	 * never reaches the scheduler at all.
	 */
	if (!v->asleep) {
		ivm_idle_periods_host_sleep(ip, vcpu, ts);
		v->in_halt = true;
	}
}

void ivm_idle_periods_host_halt_end(struct ivm_idle_periods *ip,
				    uint32_t vcpu, bool waited, uint64_t ts)
{
	if (vcpu >= ip->nr_vcpus)
		return;
	if (waited)
		ip->stats.kvm_halts_slept++;
	else
		ip->stats.kvm_halts_polled++;
	/* After the thread's sched wakeup, if it slept: that one counted. */
	ivm_idle_periods_host_wake(ip, vcpu, ts);
}

void ivm_idle_periods_host_lost(struct ivm_idle_periods *ip, uint64_t n)
{
	ip->stats.lost_events += n;
}

void ivm_idle_periods_forget(struct ivm_idle_periods *ip)
{
	memset(ip->vcpus, 0, ip->nr_vcpus * sizeof(ip->vcpus[0]));
}

void ivm_idle_looks_text(const struct ivm_idle_stats *is, char *buf,
			 size_t size)
{
	uint64_t all = is->halt_looked_100us + is->halt_looked_1ms +
		       is->halt_looked_late;

	snprintf(buf, size,
		 "looks after an idle halt: %" PRIu64 " within 100 us, %" PRIu64
		 " within 1 ms, %" PRIu64 " later (%.1f%%)",
		 is->halt_looked_100us, is->halt_looked_1ms,
		 is->halt_looked_late,
		 all ? 100.0 * (double)is->halt_looked_late / (double)all : 0.0);
}

uint32_t ivm_irq_counts_moved(const struct ivm_irq_counts *a,
			      const struct ivm_irq_counts *b)
{
	uint32_t moved = 0;
	int k;

	for (k = 0; k < IVM_IRQ_NR_KINDS; k++)
		if ((a->known & b->known & (1u << k)) &&
		    b->count[k] > a->count[k])
			moved |= 1u << k;
	return moved;
}

static void snap(const struct ivm_idle_obs *obs, struct ivm_idle_snapshot *s)
{
	s->time_ns = obs->time_ns;
	s->cpu_switches = obs->cpu_switches_ok ? obs->cpu_switches : 0;
	s->idle_switches = obs->idle_switches_ok ? obs->idle_switches : 0;
	s->rq_clock = obs->rq_clock_ok ? obs->rq_clock : 0;
	s->irqs = obs->irqs;
}

/* Idle-task switch-outs between the last look and this one. */
static uint64_t periods_ended(const struct vcpu_periods *v,
			      const struct ivm_idle_obs *obs)
{
	if (!v->seen || !v->last.idle_switches_ok || !obs->idle_switches_ok ||
	    obs->idle_switches < v->last.idle_switches)
		return 0;
	return obs->idle_switches - v->last.idle_switches;
}

/*
 * The task current now was the first dispatched after idle only if the
 * last look saw the CPU idle and exactly one switch happened since.
 */
static bool first_after_idle(const struct vcpu_periods *v,
			     const struct ivm_idle_obs *obs, uint64_t ended)
{
	return ended == 1 && !obs->current_is_idle && obs->current &&
	       v->last.current_ok && v->last.current_is_idle &&
	       v->last.cpu_switches_ok && obs->cpu_switches_ok &&
	       obs->cpu_switches - v->last.cpu_switches == 1;
}

static void end_period(struct ivm_idle_periods *ip, struct vcpu_periods *v,
		       const struct ivm_idle_obs *obs, uint64_t ended,
		       struct ivm_idle_period *ret)
{
	*ret = v->cur;
	snap(obs, &ret->after);
	if (first_after_idle(v, obs, ended)) {
		ret->from_idle_task = obs->current;
		ret->flags |= IVM_IDLE_FROM_IDLE_KNOWN;
	} else {
		ip->stats.from_idle_late++;
	}
	/*
	 * The wakeup that preceded the switch away from idle; after more
	 * than one switch out of idle the last wakeup ended a later period
	 * (the caller may know the end from the guest's stamps).
	 */
	if (ended == 1 && v->wake_ts && v->wake_ts >= ret->start_ns &&
	    v->wake_ts <= obs->time_ns) {
		ret->end_ns = v->wake_ts;
		ret->flags |= IVM_IDLE_END_FROM_EVENT;
	} else {
		ret->end_ns = obs->time_ns;
	}
	if (ret->end_ns < ret->start_ns)
		ret->end_ns = ret->start_ns;
	/* Else the end of the period, which may hold more than one. */
	ret->wake_mask = v->wake_looked ?
		ivm_irq_counts_moved(&ret->wake_before.irqs, &v->wake_irqs) : 0;
	if (!ret->wake_mask)
		ret->wake_mask = ivm_irq_counts_moved(&ret->wake_before.irqs,
						      &ret->after.irqs);
	if (v->exit_known) {
		ret->exit_reason = v->exit_reason;
		ret->flags |= IVM_IDLE_EXIT_REASON;
	}
	ip->stats.periods_ended++;
	if (ended > 1)
		ip->stats.unseen_periods += ended - 1;
	v->open = false;
}

static void start_period(struct ivm_idle_periods *ip, struct vcpu_periods *v,
			 uint32_t vcpu, const struct ivm_idle_obs *obs,
			 bool halt_now)
{
	memset(&v->cur, 0, sizeof(v->cur));
	v->cur.vcpu = vcpu;
	/*
	 * Stamped by the host sleep that led here, if it came after the
	 * last look (and after the wakeup that ended any earlier period).
	 */
	if (halt_now && v->sleep_ts <= obs->time_ns &&
	    (!v->seen || v->sleep_ts >= v->last.time_ns) &&
	    (!v->woken || v->sleep_ts >= v->wake_ts || v->asleep)) {
		v->cur.start_ns = v->sleep_ts;
		v->cur.flags |= IVM_IDLE_START_FROM_EVENT;
	} else {
		v->cur.start_ns = obs->time_ns;
	}
	v->cur.halts = halt_now;
	snap(obs, &v->cur.before);
	v->cur.wake_before = v->cur.before;
	v->exit_known = v->exit_known && halt_now;
	v->open = true;
	v->opened = true;
	ip->stats.periods_seen++;
}

bool ivm_idle_periods_observe(struct ivm_idle_periods *ip, uint32_t vcpu,
			      const struct ivm_idle_obs *obs,
			      struct ivm_idle_period *ret)
{
	struct vcpu_periods *v;
	bool halt_now = false, done = false;
	uint64_t ended;

	if (vcpu >= ip->nr_vcpus || !obs->current_ok)
		return false;
	v = &ip->vcpus[vcpu];
	ended = periods_ended(v, obs);
	if (v->sleep_pending) {
		/*
		 * Read while the thread still sleeps, the current task is
		 * the truth; once it woke, an idle count that moved says
		 * the CPU was idle in between too.
		 */
		v->sleep_pending = false;
		if (v->asleep ? obs->current_is_idle :
				(obs->current_is_idle || ended)) {
			uint64_t delay = obs->time_ns > v->sleep_ts ?
					 obs->time_ns - v->sleep_ts : 0;

			ip->stats.host_sleeps_idle++;
			if (delay < IVM_IDLE_LOOK_SOON_NS)
				ip->stats.halt_looked_100us++;
			else if (delay < IVM_IDLE_LOOK_LATE_NS)
				ip->stats.halt_looked_1ms++;
			else
				ip->stats.halt_looked_late++;
			halt_now = true;
		} else {
			ip->stats.host_sleeps_busy++;
		}
	}
	v->opened = false;
	/*
	 * The first look after the wakeup whose counts moved holds the
	 * interrupt that woke the vCPU, and seldom another one.
	 */
	if (v->open && v->woken && !v->asleep && !v->wake_looked &&
	    ivm_irq_counts_moved(&v->cur.wake_before.irqs, &obs->irqs)) {
		v->wake_looked = true;
		v->wake_irqs = obs->irqs;
	}
	v->unseen_last = 0;
	if (v->seen && (ended > 1 || (ended && !v->open))) {
		v->unseen_last = v->open ? ended - 1 : ended;
		v->before_last = v->last;
	}
	if (v->open && !ended) {
		if (!obs->current_is_idle) {
			ip->stats.inconsistent++;
		} else if (halt_now) {
			if (++v->cur.halts > 1)
				ip->stats.wakes_no_switch++;
			/* Only a look at a sleeping thread is before the wake. */
			if (v->asleep)
				snap(obs, &v->cur.wake_before);
		}
	} else if (v->open) {
		end_period(ip, v, obs, ended, ret);
		done = true;
	} else {
		ip->stats.unseen_periods += ended;
	}
	if (!v->open && obs->current_is_idle)
		start_period(ip, v, vcpu, obs, halt_now);
	v->last = *obs;
	v->seen = true;
	return done;
}

void ivm_idle_periods_passed(struct ivm_idle_periods *ip, uint32_t vcpu,
			     uint64_t n, uint64_t time_ns,
			     const struct ivm_irq_counts *irqs)
{
	struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus || !n || !ip->vcpus[vcpu].open)
		return;
	v = &ip->vcpus[vcpu];
	if (time_ns < v->cur.wake_before.time_ns)
		return;
	/* The period's first halt was looked at: these came after. */
	ip->stats.wakes_no_switch += v->cur.halts ? n : n - 1;
	v->cur.halts += (uint32_t)n;
	ip->stats.halts_passed += n;
	v->cur.wake_before.time_ns = time_ns;
	if (irqs->known)
		v->cur.wake_before.irqs = *irqs;
}

bool ivm_idle_periods_rebase(struct ivm_idle_periods *ip, uint32_t vcpu,
			     const struct ivm_idle_obs *obs,
			     struct ivm_idle_period *ret)
{
	struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus || !obs->current_ok)
		return false;
	v = &ip->vcpus[vcpu];
	if (!v->open || !obs->current_is_idle)
		return ivm_idle_periods_observe(ip, vcpu, obs, ret);
	ip->stats.own_switches += periods_ended(v, obs);
	v->last = *obs;
	return false;
}

bool ivm_idle_periods_opened(const struct ivm_idle_periods *ip,
			     uint32_t vcpu)
{
	return vcpu < ip->nr_vcpus && ip->vcpus[vcpu].opened;
}

bool ivm_idle_periods_open_start(const struct ivm_idle_periods *ip,
				 uint32_t vcpu, uint64_t *start_ns)
{
	const struct vcpu_periods *v;

	if (vcpu >= ip->nr_vcpus)
		return false;
	v = &ip->vcpus[vcpu];
	if (!v->open || !(v->cur.flags & IVM_IDLE_START_FROM_EVENT))
		return false;
	*start_ns = v->cur.start_ns;
	return true;
}

void ivm_idle_periods_set_to_idle(struct ivm_idle_periods *ip, uint32_t vcpu,
				  uint64_t task)
{
	if (vcpu >= ip->nr_vcpus || !ip->vcpus[vcpu].open || !task)
		return;
	ip->vcpus[vcpu].cur.to_idle_task = task;
	ip->vcpus[vcpu].cur.flags |= IVM_IDLE_TO_IDLE_KNOWN;
}

uint64_t ivm_idle_periods_unseen_last(const struct ivm_idle_periods *ip,
				      uint32_t vcpu,
				      struct ivm_idle_obs *before)
{
	if (vcpu >= ip->nr_vcpus || !ip->vcpus[vcpu].unseen_last)
		return 0;
	*before = ip->vcpus[vcpu].before_last;
	return ip->vcpus[vcpu].unseen_last;
}

void ivm_idle_periods_recovered(struct ivm_idle_periods *ip, uint64_t n)
{
	ip->stats.recovered_periods += n;
}

const struct ivm_idle_stats *
ivm_idle_periods_stats(const struct ivm_idle_periods *ip)
{
	return &ip->stats;
}
