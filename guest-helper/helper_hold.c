// SPDX-License-Identifier: MIT
/*
 * HOLD and RELEASE: occupy one CPU with a real-time thread that spins, so a
 * thread pinned there cannot run while the host reads its stack.
 *
 * Bounded three ways: the holder checks its own deadline while it spins (it
 * needs nobody to stop it), the loop reaps it at its deadline, and the
 * kernel's RT throttling (sched_rt_runtime_us) leaves the CPU 5% of each
 * second even if all else failed.
 *
 * Each CPU's holder thread is created at its first HOLD and then kept,
 * asleep on a condition variable between holds: the sampler's HOLD is on
 * the critical path of every pin capture (the target may wake and run
 * until the CPU is held), and waking a SCHED_FIFO thread already bound to
 * the CPU is much quicker than creating one (a clone, a stack, and the
 * scheduler's placement), several milliseconds under TCG.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

enum holder_state {
	HOLDER_STARTING,
	HOLDER_SPINNING,
	HOLDER_DONE,
};

struct holder {
	/* Owned by the loop thread. */
	bool active;		/* a hold is on, not reaped yet */
	bool created;		/* the thread exists */
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
};

struct helper_holds {
	unsigned int ncpus;
	/* Affinity of the loop thread (the one calling us) at create. */
	cpu_set_t loop_mask;
	bool loop_mask_known;
	struct holder holder[];
};

/*
 * Keep the loop thread off held CPUs: a holder preempts whatever ran on its
 * CPU, and if that was the loop, RELEASE would wait for the scheduler to
 * migrate it (100 ms seen on a busy host).  When every allowed CPU is held
 * (a one-vCPU guest) the loop keeps its mask and waits for the lease.
 */
static void loop_avoid_held(struct helper_holds *holds)
{
	cpu_set_t mask = holds->loop_mask;
	unsigned int cpu;

	if (!holds->loop_mask_known)
		return;
	for (cpu = 0; cpu < holds->ncpus; cpu++)
		if (holds->holder[cpu].active)
			CPU_CLR(cpu, &mask);
	if (!CPU_COUNT(&mask))
		mask = holds->loop_mask;
	sched_setaffinity(0, sizeof(mask), &mask);
}

int helper_holds_create(unsigned int ncpus, struct helper_holds **ret)
{
	struct helper_holds *holds;

	if (!ncpus || ncpus > CPU_SETSIZE)
		ncpus = CPU_SETSIZE;
	holds = calloc(1, sizeof(*holds) + ncpus * sizeof(holds->holder[0]));
	if (!holds)
		return -ENOMEM;
	holds->ncpus = ncpus;
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

/* One hold, on the holder's own CPU: spin until stopped or the lease ends. */
static void holder_run(struct holder *h)
{
	uint64_t now, deadline;

	/* The attribute bound us to the CPU; check rather than trust. */
	if (sched_getcpu() != (int)h->cpu) {
		h->wrong_cpu = true;
		h->ended_ns = helper_now_ns();
		atomic_store(&h->state, HOLDER_DONE);
		return;
	}
	if (atomic_load(&h->stop)) {
		/* Given up on before we got the CPU. */
		h->ended_ns = helper_now_ns();
		atomic_store(&h->state, HOLDER_DONE);
		return;
	}
	h->started_ns = helper_now_ns();
	deadline = h->started_ns + h->lease_ns;
	atomic_store(&h->deadline_ns, deadline);
	atomic_store(&h->state, HOLDER_SPINNING);
	do {
		__builtin_ia32_pause();
		now = helper_now_ns();
	} while (!atomic_load_explicit(&h->stop, memory_order_relaxed) &&
		 now < deadline);
	h->expired = now >= deadline;
	h->ended_ns = now;
	atomic_store(&h->state, HOLDER_DONE);
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;
	uint64_t seen = 0;

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
		holder_run(h);
	}
}

/* The CPU's holder thread, bound to it and SCHED_FIFO, asleep until asked. */
static int holder_create(struct holder *h, uint32_t cpu)
{
	struct sched_param param = { .sched_priority = HELPER_HOLD_PRIO };
	pthread_attr_t attr;
	cpu_set_t one;
	int r;

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

int helper_hold(struct helper_holds *holds, uint32_t cpu, uint32_t lease_ms,
		uint32_t *granted)
{
	struct holder *h;
	int r;

	if (cpu >= holds->ncpus)
		return -EINVAL;
	h = &holds->holder[cpu];
	if (h->active) {
		if (atomic_load(&h->state) != HOLDER_DONE)
			return -EBUSY;
		holder_stop(h);	/* ran out, not reaped yet */
	}
	if (!h->created) {
		r = holder_create(h, cpu);
		if (r < 0)
			return r;
	}
	lease_ms = helper_lease_ms(lease_ms);
	h->lease_ns = (uint64_t)lease_ms * 1000000u;
	atomic_store(&h->deadline_ns, helper_now_ns() + h->lease_ns);
	h->expired = false;
	h->wrong_cpu = false;
	h->started_ns = h->ended_ns = 0;
	atomic_store(&h->state, HOLDER_STARTING);
	atomic_store(&h->stop, false);

	/* Move off the CPU first, so the holder has it at once. */
	h->active = true;
	loop_avoid_held(holds);

	pthread_mutex_lock(&h->lock);
	h->go++;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	h->active = true;

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

int helper_release(struct helper_holds *holds, uint32_t cpu,
		   uint64_t *held_ns, bool *expired)
{
	struct holder *h;

	if (cpu >= holds->ncpus || !holds->holder[cpu].active)
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

		if (!h->active || (atomic_load(&h->state) != HOLDER_DONE &&
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
		if (!holds->holder[cpu].active)
			continue;
		holder_stop(&holds->holder[cpu]);
		n++;
	}
	if (n)
		loop_avoid_held(holds);
	return n;
}

uint64_t helper_holds_next_deadline(const struct helper_holds *holds)
{
	uint64_t next = UINT64_MAX;
	unsigned int cpu;

	for (cpu = 0; cpu < holds->ncpus; cpu++)
		if (holds->holder[cpu].active &&
		    atomic_load(&holds->holder[cpu].deadline_ns) < next)
			next = atomic_load(&holds->holder[cpu].deadline_ns);
	return next;
}
