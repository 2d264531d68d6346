// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "profile/dispatch.h"

enum vcpu_state { STATE_UNKNOWN, STATE_RUNNING, STATE_IDLE };

struct vcpu_monitor {
	enum vcpu_state state;
	uint64_t last_task;	/* last non-idle task seen; 0 = none yet */
	bool deferred;		/* take the first task after this idle period */
	bool in_flight;
	uint32_t transitions;	/* for idle_every */
	uint64_t next_tick_ns;
	bool idle_switches_seen;
	uint64_t idle_switches;
	/* CPU switch count when last_task was last seen running. */
	bool running_switches_seen;
	uint64_t running_switches;
	/* CPU switch count at the last observation that saw it idle. */
	bool idle_switches_cpu_seen;
	uint64_t idle_cpu_switches;
	/* Run-queue clock at the first look at the sampled idle period. */
	bool idle_clock_seen;
	uint64_t idle_clock;
	/* A from-idle request to resolve, waiting for the vCPU's slot. */
	bool pending;
	struct ivm_capture_req pending_req;
};

struct ivm_dispatch {
	struct ivm_dispatch_config config;
	uint32_t nr_vcpus;
	struct ivm_dispatch_stats stats;
	struct vcpu_monitor vcpus[];
};

struct ivm_error *ivm_dispatch_create(uint32_t nr_vcpus,
				      const struct ivm_dispatch_config *config,
				      struct ivm_dispatch **ret)
{
	struct ivm_dispatch *d;

	if (!nr_vcpus || nr_vcpus > 4096)
		return ivm_error_create(IVM_ERROR_INVALID,
					"unsupported number of vCPUs: %u",
					nr_vcpus);
	d = calloc(1, sizeof(*d) + nr_vcpus * sizeof(d->vcpus[0]));
	if (!d)
		return &ivm_enomem;
	d->config = *config;
	d->nr_vcpus = nr_vcpus;
	*ret = d;
	return NULL;
}

void ivm_dispatch_destroy(struct ivm_dispatch *d)
{
	free(d);
}

void ivm_dispatch_forget(struct ivm_dispatch *d)
{
	memset(d->vcpus, 0, d->nr_vcpus * sizeof(d->vcpus[0]));
}

/*
 * The from-idle task of the sampled period left before it was seen: when
 * the guest's clocks allow, ask the caller to name it from guest memory
 * (the first task switched in since the idle look), else count it lost.
 * Queued: the same observation may also make a to-idle request.
 */
static void from_idle_after_the_fact(struct ivm_dispatch *d,
				     struct vcpu_monitor *m, uint32_t vcpu,
				     uint64_t time_ns)
{
	m->deferred = false;
	if (!m->idle_clock_seen) {
		d->stats.lost_missed++;
		return;
	}
	if (m->pending)
		d->stats.lost_busy++;	/* an older one never got its turn */
	m->pending = true;
	m->pending_req = (struct ivm_capture_req){
		.vcpu = vcpu, .kind = IVM_SAMPLE_FROM_IDLE, .task = 0,
		.time_ns = time_ns, .resolve = true, .since = m->idle_clock,
	};
}

bool ivm_dispatch_take_pending(struct ivm_dispatch *d, uint32_t vcpu,
			       struct ivm_capture_req *req)
{
	struct vcpu_monitor *m;

	if (vcpu >= d->nr_vcpus || !d->vcpus[vcpu].pending ||
	    d->vcpus[vcpu].in_flight)
		return false;
	m = &d->vcpus[vcpu];
	m->pending = false;
	m->in_flight = true;
	*req = m->pending_req;
	d->stats.requests[req->kind]++;
	d->stats.from_idle_resolve++;
	return true;
}

static bool request(struct ivm_dispatch *d, struct vcpu_monitor *m,
		    uint32_t vcpu, enum ivm_sample_kind kind, uint64_t task,
		    uint64_t time_ns, struct ivm_capture_req *req)
{
	if (m->in_flight) {
		d->stats.lost_busy++;
		return false;
	}
	m->in_flight = true;
	req->resolve = false;
	req->since = 0;
	req->vcpu = vcpu;
	req->kind = kind;
	req->task = task;
	req->time_ns = time_ns;
	d->stats.requests[kind]++;
	return true;
}

bool ivm_dispatch_observe(struct ivm_dispatch *d, uint32_t vcpu,
			  const struct ivm_vcpu_obs *obs,
			  struct ivm_capture_req *req)
{
	struct vcpu_monitor *m;
	enum vcpu_state now, prev;
	bool made = false, unseen_runs = false, certain;

	if (vcpu >= d->nr_vcpus)
		return false;
	m = &d->vcpus[vcpu];
	d->stats.observations++;

	/*
	 * The guest's own view wins over HLT: a vCPU running its idle task is
	 * idle even between two HLTs, and a halted vCPU whose current is a
	 * real task is mid-transition (or a paravirtual halt in a lock wait);
	 * that one is counted and skipped rather than guessed.
	 */
	if (obs->current_known) {
		if (obs->halted && !obs->current_is_idle) {
			d->stats.inconsistent++;
			return false;
		}
		now = obs->current_is_idle ? STATE_IDLE : STATE_RUNNING;
	} else {
		now = obs->halted ? STATE_IDLE : STATE_RUNNING;
	}

	if (obs->idle_switches_known) {
		if (m->idle_switches_seen &&
		    obs->idle_switches > m->idle_switches) {
			uint64_t ended = obs->idle_switches - m->idle_switches;
			/*
			 * If we last saw the vCPU idle, the first period that
			 * ended is the one we saw; the others came and went
			 * unseen.
			 */
			uint64_t seen = m->state == STATE_IDLE;

			if (ended > seen)
				d->stats.missed_idle += ended - seen;
			/* Idle, then idle again: tasks ran unseen between. */
			unseen_runs = m->state == STATE_IDLE &&
				      now == STATE_IDLE;
			/*
			 * The first task after the sampled idle period ran
			 * and left unseen: what we see now is not it.
			 */
			if (m->deferred &&
			    (ended > 1 || (ended == 1 && now == STATE_IDLE)))
				from_idle_after_the_fact(d, m, vcpu,
							 obs->time_ns);
		}
		m->idle_switches_seen = true;
		m->idle_switches = obs->idle_switches;
	}

	if (now == STATE_IDLE) {
		/*
		 * The task last seen went to idle itself only if exactly one
		 * switch happened on the CPU since it was seen running.
		 */
		certain = m->state == STATE_RUNNING && m->last_task &&
			  obs->cpu_switches_known && m->running_switches_seen &&
			  obs->cpu_switches - m->running_switches == 1;
		if (m->state == STATE_RUNNING)
			d->stats.idle_transitions++;
		/* Without switch counts, unseen runs cannot be resolved. */
		if (unseen_runs && obs->cpu_switches_known)
			d->stats.unseen_to_idle++;
		else
			unseen_runs = false;
		if ((m->state == STATE_RUNNING || unseen_runs) &&
		    d->config.idle_every &&
		    ++m->transitions >= d->config.idle_every) {
			m->transitions = 0;
			if (!m->last_task && !obs->cpu_switches_known) {
				d->stats.lost_no_target++;
			} else {
				/*
				 * After unseen runs, the task last seen is no
				 * guess at all: without an answer, no sample.
				 */
				made = request(d, m, vcpu, IVM_SAMPLE_TO_IDLE,
					       m->state == STATE_RUNNING ?
					       m->last_task : 0,
					       obs->time_ns, req);
				if (made)
					req->resolve = !certain &&
						       obs->cpu_switches_known;
				/*
				 * The from-idle half belongs to this sampled
				 * transition, even when the to-idle half was
				 * lost to a busy capture.
				 */
			}
			m->deferred = true;
			m->idle_clock_seen = obs->rq_clock_known;
			m->idle_clock = obs->rq_clock;
		}
		m->running_switches_seen = false;
		m->idle_switches_cpu_seen = obs->cpu_switches_known;
		m->idle_cpu_switches = obs->cpu_switches;
		m->state = STATE_IDLE;
		return made;
	}

	/* Running. */
	prev = m->state;
	if (m->state == STATE_IDLE)
		d->stats.wake_transitions++;
	m->state = STATE_RUNNING;
	if (obs->current_known && obs->current) {
		m->last_task = obs->current;
		m->running_switches_seen = obs->cpu_switches_known;
		m->running_switches = obs->cpu_switches;
	}
	if (m->deferred) {
		m->deferred = false;
		/*
		 * The first task after the idle period is the one current now
		 * only if a single switch happened since the CPU was seen
		 * idle; otherwise it already left, and what runs is another.
		 */
		if (prev == STATE_IDLE && m->idle_switches_cpu_seen &&
		    obs->cpu_switches_known &&
		    obs->cpu_switches - m->idle_cpu_switches != 1) {
			m->deferred = true;
			from_idle_after_the_fact(d, m, vcpu, obs->time_ns);
			return false;
		}
		if (obs->current_known && obs->current)
			return request(d, m, vcpu, IVM_SAMPLE_FROM_IDLE,
				       obs->current, obs->time_ns, req);
		d->stats.lost_no_target++;
		return false;
	}
	if (d->config.tick_ns && obs->current_known && obs->current &&
	    obs->time_ns >= m->next_tick_ns) {
		/*
		 * Catch up without a burst: after a long gap the next tick is
		 * one period from now, not from the missed one.
		 */
		m->next_tick_ns += d->config.tick_ns;
		if (m->next_tick_ns <= obs->time_ns)
			m->next_tick_ns = obs->time_ns + d->config.tick_ns;
		return request(d, m, vcpu, IVM_SAMPLE_ON_CPU, obs->current,
			       obs->time_ns, req);
	}
	return false;
}

void ivm_dispatch_capture_done(struct ivm_dispatch *d, uint32_t vcpu)
{
	if (vcpu < d->nr_vcpus)
		d->vcpus[vcpu].in_flight = false;
}

bool ivm_dispatch_in_flight(const struct ivm_dispatch *d, uint32_t vcpu)
{
	return vcpu < d->nr_vcpus && d->vcpus[vcpu].in_flight;
}

bool ivm_dispatch_awaits_from_idle(const struct ivm_dispatch *d,
				   uint32_t vcpu)
{
	return vcpu < d->nr_vcpus && d->vcpus[vcpu].deferred;
}

const struct ivm_dispatch_stats *
ivm_dispatch_stats(const struct ivm_dispatch *d)
{
	return &d->stats;
}
