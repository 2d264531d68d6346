// SPDX-License-Identifier: MIT
/*
 * HOLD, RELEASE and HOLD_PIN: occupy one CPU with a real-time thread that
 * spins, so a thread pinned there cannot run while the host reads its stack.
 *
 * Bounded three ways: the holder checks its own deadline while it spins (it
 * needs nobody to stop it), the loop reaps it at its deadline, and the
 * kernel's RT throttling (sched_rt_runtime_us) leaves the CPU 5% of each
 * second even if all else failed.
 *
 * Each CPU's holder thread is created at its first hold and then kept,
 * asleep on a condition variable between holds: the sampler's hold is on
 * the critical path of every pin capture (the target may wake and run
 * until the CPU is held), and waking a SCHED_FIFO thread already bound to
 * the CPU is much quicker than creating one (a clone, a stack, and the
 * scheduler's placement), several milliseconds under TCG.
 *
 * HOLD_PIN is the cheap form, and what a guest that is being watched pays
 * for: the holder does everything from its CPU, so nothing else in the
 * guest wakes for it.  The loop hands it the request and goes back to
 * sleep; the holder pins the target once it runs (the target, pinned to a
 * CPU the holder occupies, cannot run), answers the host itself, spins for
 * a lease sized to the host's read (sub-millisecond to a few), restores the
 * target's affinity and sleeps.  No RELEASE round trip, no timer, no loop
 * thread polling for the holder: the old HOLD had the loop nanosleep in
 * 20 us steps until the holder ran, two context switches per step.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

enum holder_state {
	HOLDER_STARTING,
	HOLDER_SPINNING,
	HOLDER_DONE,
};

struct holder {
	struct helper_holds *holds;	/* the set it belongs to */
	/* Owned by the loop thread. */
	bool active;		/* a hold is on, not reaped yet */
	bool created;		/* the thread exists */
	bool self_ending;	/* a HOLD_PIN: ends on its own, no timer */
	pthread_t thread;
	uint32_t cpu;
	/* Shared with the holder thread. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	uint64_t go;		/* holds asked for, under lock */
	bool quit;		/* under lock */
	/* Until the holder runs: how long the loop waits for it; then the
	 * end of the lease, which runs from the moment the CPU is held. */
	atomic_uint_fast64_t deadline_ns;
	uint64_t lease_ns;
	atomic_int state;
	atomic_bool stop;
	uint64_t started_ns;	/* written before SPINNING is published */
	uint64_t ended_ns;	/* written before DONE is published */
	bool expired;		/* likewise */
	bool wrong_cpu;
	/* HOLD_PIN: the request, written by the loop before go++. */
	bool pin_mode;
	struct helper_hold_pin req;
	atomic_int tid;		/* the holder thread's, once it ran */
	/* Counters, written by the holder thread only. */
	struct {
		atomic_uint_fast64_t holds, hold_ns, pins, pin_ns, lease_ends,
			late;
	} count;
};

struct helper_holds {
	unsigned int ncpus;
	/* Affinity of the loop thread (the one calling us) at create. */
	cpu_set_t loop_mask;
	bool loop_mask_known;
	helper_hold_reply_fn reply;
	void *reply_ctx;
	struct holder holder[];
};

/*
 * Keep the loop thread off held CPUs: a holder preempts whatever ran on its
 * CPU, and if that was the loop, RELEASE would wait for the scheduler to
 * migrate it (100 ms seen on a busy host).  When every allowed CPU is held
 * (a one-vCPU guest) the loop keeps its mask and waits for the lease.
 * Only for HOLD/RELEASE: a HOLD_PIN needs nothing more from the loop.
 */
static void loop_avoid_held(struct helper_holds *holds)
{
	cpu_set_t mask = holds->loop_mask;
	unsigned int cpu;

	if (!holds->loop_mask_known)
		return;
	for (cpu = 0; cpu < holds->ncpus; cpu++)
		if (holds->holder[cpu].active &&
		    !holds->holder[cpu].self_ending)
			CPU_CLR(cpu, &mask);
	if (!CPU_COUNT(&mask))
		mask = holds->loop_mask;
	sched_setaffinity(0, sizeof(mask), &mask);
}

int helper_holds_create(unsigned int ncpus, helper_hold_reply_fn reply,
			void *ctx, struct helper_holds **ret)
{
	struct helper_holds *holds;

	if (!ncpus || ncpus > CPU_SETSIZE)
		ncpus = CPU_SETSIZE;
	holds = calloc(1, sizeof(*holds) + ncpus * sizeof(holds->holder[0]));
	if (!holds)
		return -ENOMEM;
	holds->ncpus = ncpus;
	holds->reply = reply;
	holds->reply_ctx = ctx;
	holds->loop_mask_known = !sched_getaffinity(0, sizeof(holds->loop_mask),
						    &holds->loop_mask);
	*ret = holds;
	return 0;
}

void helper_holds_destroy(struct helper_holds *holds)
{
	unsigned int cpu;

	if (!holds)
		return;
	helper_holds_release_all(holds);
	for (cpu = 0; cpu < holds->ncpus; cpu++) {
		struct holder *h = &holds->holder[cpu];

		if (!h->created)
			continue;
		pthread_mutex_lock(&h->lock);
		h->quit = true;
		pthread_cond_signal(&h->wake);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->thread, NULL);
		pthread_cond_destroy(&h->wake);
		pthread_mutex_destroy(&h->lock);
	}
	free(holds);
}

void helper_holds_counters(const struct helper_holds *holds,
			   struct helper_hold_counters *ret)
{
	unsigned int cpu;

	memset(ret, 0, sizeof(*ret));
	for (cpu = 0; cpu < holds->ncpus; cpu++) {
		const struct holder *h = &holds->holder[cpu];

		ret->holds += atomic_load(&h->count.holds);
		ret->hold_ns += atomic_load(&h->count.hold_ns);
		ret->pins += atomic_load(&h->count.pins);
		ret->pin_ns += atomic_load(&h->count.pin_ns);
		ret->lease_ends += atomic_load(&h->count.lease_ends);
		ret->late += atomic_load(&h->count.late);
	}
}

static void holder_done(struct holder *h, uint64_t now, bool expired)
{
	h->expired = expired;
	h->ended_ns = now;
	atomic_store(&h->state, HOLDER_DONE);
}

/* Spin on the CPU until stopped or deadline; returns the time it ended. */
static uint64_t spin_until(struct holder *h, uint64_t deadline)
{
	uint64_t now;

	do {
		__builtin_ia32_pause();
		now = helper_now_ns();
	} while (!atomic_load_explicit(&h->stop, memory_order_relaxed) &&
		 now < deadline);
	return now;
}

/* One HOLD, on the holder's own CPU: spin until stopped or the lease ends. */
static void holder_run(struct holder *h)
{
	uint64_t now, deadline;

	h->started_ns = helper_now_ns();
	deadline = h->started_ns + h->lease_ns;
	atomic_store(&h->deadline_ns, deadline);
	atomic_store(&h->state, HOLDER_SPINNING);
	atomic_fetch_add(&h->count.holds, 1);
	now = spin_until(h, deadline);
	atomic_fetch_add(&h->count.hold_ns, now - h->started_ns);
	holder_done(h, now, now >= deadline);
}

/*
 * One HOLD_PIN, on the holder's own CPU: pin, answer, spin for the lease,
 * restore.  The order matters: the pin only once the CPU is ours (the
 * target, pinned to a CPU nobody holds, would run there at once); the
 * restore before the CPU is let go (so the target may run elsewhere as
 * soon as it may run at all).
 */
static void holder_run_pin(struct helper_holds *holds, struct holder *h)
{
	struct helper_hold_pin_result res = { .holder_tid =
						      (uint32_t)atomic_load(&h->tid) };
	const struct helper_hold_pin *req = &h->req;
	struct helper_pin pin;
	uint64_t now = helper_now_ns(), pinned_at = 0, deadline;
	cpu_set_t one;

	if (now - req->asked_ns > HELPER_HOLD_START_MAX_NS) {
		/* The moment the host asked about is long gone: pinning
		 * now would only delay the target for nothing. */
		atomic_fetch_add(&h->count.late, 1);
		res.errnum = ETIMEDOUT;
		holds->reply(holds->reply_ctx, req, &res);
		holder_done(h, now, false);
		return;
	}
	h->started_ns = now;
	atomic_fetch_add(&h->count.holds, 1);
	if (req->tid > 0) {
		CPU_ZERO(&one);
		CPU_SET(h->cpu, &one);
		if (sched_setaffinity(req->tid, sizeof(one), &one) < 0) {
			res.pin_errnum = errno;
		} else {
			res.pinned = true;
			pinned_at = helper_now_ns();
			atomic_fetch_add(&h->count.pins, 1);
		}
	}
	/* The lease runs from here, and the reply says so. */
	deadline = helper_now_ns() + h->lease_ns;
	atomic_store(&h->deadline_ns, deadline);
	res.lease_ns = h->lease_ns;
	atomic_store(&h->state, HOLDER_SPINNING);
	holds->reply(holds->reply_ctx, req, &res);
	now = spin_until(h, deadline);
	if (res.pinned) {
		memset(&pin, 0, sizeof(pin));
		pin.tid = req->tid;
		pin.starttime = req->starttime;
		pin.orig = req->orig;
		helper_pin_restore(&pin);	/* unless the tid was reused */
		atomic_fetch_add(&h->count.pin_ns, helper_now_ns() - pinned_at);
	}
	if (now >= deadline)
		atomic_fetch_add(&h->count.lease_ends, 1);
	atomic_fetch_add(&h->count.hold_ns, now - h->started_ns);
	holder_done(h, now, now >= deadline);
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;
	struct helper_holds *holds = h->holds;
	uint64_t seen = 0;

	atomic_store(&h->tid, (int)syscall(SYS_gettid));
	for (;;) {
		pthread_mutex_lock(&h->lock);
		while (!h->quit && h->go == seen)
			pthread_cond_wait(&h->wake, &h->lock);
		if (h->quit) {
			pthread_mutex_unlock(&h->lock);
			return NULL;
		}
		seen = h->go;
		pthread_mutex_unlock(&h->lock);
		/* The attribute bound us to the CPU; check rather than trust. */
		if (sched_getcpu() != (int)h->cpu) {
			struct helper_hold_pin_result res = { .errnum = EINVAL };

			h->wrong_cpu = true;
			if (h->pin_mode && !atomic_load(&h->stop))
				holds->reply(holds->reply_ctx, &h->req, &res);
			holder_done(h, helper_now_ns(), false);
		} else if (atomic_load(&h->stop)) {
			/* Given up on before we got the CPU. */
			holder_done(h, helper_now_ns(), false);
		} else if (h->pin_mode) {
			holder_run_pin(holds, h);
		} else {
			holder_run(h);
		}
	}
}

/* The CPU's holder thread, bound to it and SCHED_FIFO, asleep until asked. */
static int holder_create(struct helper_holds *holds, struct holder *h,
			 uint32_t cpu)
{
	struct sched_param param = { .sched_priority = HELPER_HOLD_PRIO };
	pthread_attr_t attr;
	cpu_set_t one;
	int r;

	h->holds = holds;
	h->cpu = cpu;
	h->go = 0;
	h->quit = false;
	if (pthread_mutex_init(&h->lock, NULL))
		return -ENOMEM;
	if (pthread_cond_init(&h->wake, NULL)) {
		pthread_mutex_destroy(&h->lock);
		return -ENOMEM;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	pthread_attr_init(&attr);
	r = pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	if (!r)
		r = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	if (!r)
		r = pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	if (!r)
		r = pthread_attr_setschedparam(&attr, &param);
	if (!r)
		r = pthread_attr_setstacksize(&attr, 64 * 1024);
	if (!r)
		r = pthread_create(&h->thread, &attr, holder_main, h);
	pthread_attr_destroy(&attr);
	if (r) {
		pthread_cond_destroy(&h->wake);
		pthread_mutex_destroy(&h->lock);
		return -r;
	}
	h->created = true;
	return 0;
}

/*
 * End the hold: tell the holder to stop and wait until it says it did.  A
 * holder spinning sees stop at once; one that never got its CPU (it still
 * says STARTING) sees stop when it does and ends without spinning.  The wait
 * is bounded, so a holder that cannot run cannot hang the loop.
 */
static void holder_stop(struct holder *h)
{
	uint64_t give_up = helper_now_ns() + 50 * 1000000ull;

	atomic_store(&h->stop, true);
	while (atomic_load(&h->state) == HOLDER_SPINNING &&
	       helper_now_ns() < give_up) {
		struct timespec ts = { 0, 20000 };

		nanosleep(&ts, NULL);
	}
	if (atomic_load(&h->state) != HOLDER_DONE) {
		h->ended_ns = helper_now_ns();
		h->expired = false;
	}
	h->active = false;
}

/* Make the holder of cpu ready for a new hold: created, the last one
 * reaped.  -EBUSY while it is still in a hold. */
static int holder_claim(struct helper_holds *holds, uint32_t cpu,
			struct holder **ret)
{
	struct holder *h;
	int r;

	if (cpu >= holds->ncpus)
		return -EINVAL;
	h = &holds->holder[cpu];
	if (h->active) {
		if (atomic_load(&h->state) != HOLDER_DONE)
			return -EBUSY;
		holder_stop(h);	/* ended, not reaped yet */
	}
	if (!h->created) {
		r = holder_create(holds, h, cpu);
		if (r < 0)
			return r;
	}
	h->expired = false;
	h->wrong_cpu = false;
	h->started_ns = h->ended_ns = 0;
	atomic_store(&h->state, HOLDER_STARTING);
	atomic_store(&h->stop, false);
	*ret = h;
	return 0;
}

/*
 * Wake the holder.  The signal after the unlock: a holder woken on the CPU
 * we run on preempts us at once (real-time), and would only find the lock
 * still ours and sleep again.
 */
static void holder_go(struct holder *h)
{
	pthread_mutex_lock(&h->lock);
	h->go++;
	pthread_mutex_unlock(&h->lock);
	pthread_cond_signal(&h->wake);
}

int helper_hold(struct helper_holds *holds, uint32_t cpu, uint32_t lease_ms,
		uint32_t *granted)
{
	struct holder *h;
	int r;

	r = holder_claim(holds, cpu, &h);
	if (r < 0)
		return r;
	lease_ms = helper_lease_ms(lease_ms);
	h->pin_mode = false;
	h->self_ending = false;
	h->lease_ns = (uint64_t)lease_ms * 1000000u;
	atomic_store(&h->deadline_ns, helper_now_ns() + h->lease_ns);

	/* Move off the CPU first, so the holder has it at once. */
	h->active = true;
	loop_avoid_held(holds);
	holder_go(h);

	/* Answer only once the CPU is really ours; bounded by the lease,
	 * which the holder enforces on itself. */
	while (atomic_load(&h->state) == HOLDER_STARTING) {
		struct timespec ts = { 0, 20000 };

		if (helper_now_ns() >= atomic_load(&h->deadline_ns))
			break;
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&h->state) != HOLDER_SPINNING) {
		bool wrong = h->wrong_cpu;

		holder_stop(h);
		loop_avoid_held(holds);
		return wrong ? -EINVAL : -ETIMEDOUT;
	}
	*granted = lease_ms;
	return 0;
}

int helper_hold_pin(struct helper_holds *holds,
		    const struct helper_hold_pin *req)
{
	struct holder *h;
	int r;

	if (!holds->reply)
		return -EOPNOTSUPP;
	r = holder_claim(holds, req->cpu, &h);
	if (r < 0)
		return r;
	h->pin_mode = true;
	h->self_ending = true;
	h->req = *req;
	h->lease_ns = req->lease_ns;
	/* Until the holder runs, what bounds its start; then its lease. */
	atomic_store(&h->deadline_ns,
		     req->asked_ns + HELPER_HOLD_START_MAX_NS + req->lease_ns);
	h->active = true;
	holder_go(h);
	return 0;
}

unsigned int helper_holds_ncpus(const struct helper_holds *holds)
{
	return holds->ncpus;
}

void helper_holds_idle(const struct helper_holds *holds, cpu_set_t *ret)
{
	unsigned int cpu;

	CPU_ZERO(ret);
	for (cpu = 0; cpu < holds->ncpus && cpu < CPU_SETSIZE; cpu++)
		if (!holds->holder[cpu].active ||
		    atomic_load(&holds->holder[cpu].state) == HOLDER_DONE)
			CPU_SET(cpu, ret);
}

int helper_release(struct helper_holds *holds, uint32_t cpu,
		   uint64_t *held_ns, bool *expired)
{
	struct holder *h;

	if (cpu >= holds->ncpus || !holds->holder[cpu].active ||
	    holds->holder[cpu].self_ending)
		return -ENOENT;
	h = &holds->holder[cpu];
	holder_stop(h);
	loop_avoid_held(holds);
	*held_ns = h->ended_ns > h->started_ns && h->started_ns ?
		   h->ended_ns - h->started_ns : 0;
	*expired = h->expired;
	return 0;
}

unsigned int helper_holds_expire(struct helper_holds *holds)
{
	uint64_t now = helper_now_ns();
	unsigned int cpu, n = 0;

	for (cpu = 0; cpu < holds->ncpus; cpu++) {
		struct holder *h = &holds->holder[cpu];

		/* A HOLD_PIN ends by itself, and is reaped at the next hold
		 * of its CPU: nothing to do here, and no timer for it. */
		if (!h->active || h->self_ending ||
		    (atomic_load(&h->state) != HOLDER_DONE &&
		     now < atomic_load(&h->deadline_ns)))
			continue;
		holder_stop(h);
		n++;
	}
	if (n)
		loop_avoid_held(holds);
	return n;
}

unsigned int helper_holds_release_all(struct helper_holds *holds)
{
	unsigned int cpu, n = 0;

	for (cpu = 0; cpu < holds->ncpus; cpu++) {
		struct holder *h = &holds->holder[cpu];

		if (!h->active)
			continue;
		/* A HOLD_PIN that ended by itself is no hold ended here. */
		n += atomic_load(&h->state) != HOLDER_DONE;
		holder_stop(h);
	}
	loop_avoid_held(holds);
	return n;
}

uint64_t helper_holds_next_deadline(const struct helper_holds *holds)
{
	uint64_t next = UINT64_MAX;
	unsigned int cpu;

	for (cpu = 0; cpu < holds->ncpus; cpu++)
		if (holds->holder[cpu].active &&
		    !holds->holder[cpu].self_ending &&
		    atomic_load(&holds->holder[cpu].deadline_ns) < next)
			next = atomic_load(&holds->holder[cpu].deadline_ns);
	return next;
}
