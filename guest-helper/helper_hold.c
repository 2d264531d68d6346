// SPDX-License-Identifier: MIT
/*
 * HOLD and RELEASE: occupy one CPU with a real-time thread that spins, so a
 * thread pinned there cannot run while the host reads its stack.
 *
 * Bounded three ways: the holder checks its own deadline while it spins (it
 * needs nobody to stop it), the loop reaps it at its deadline, and the
 * kernel's RT throttling (sched_rt_runtime_us) leaves the CPU 5% of each
 * second even if all else failed.
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
	bool active;		/* created and not joined yet */
	pthread_t thread;
	uint32_t cpu;
	uint64_t deadline_ns;
	/* Shared with the holder thread. */
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
	if (!holds)
		return;
	helper_holds_release_all(holds);
	free(holds);
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;
	uint64_t now;

	/* The attribute bound us to the CPU; check rather than trust. */
	if (sched_getcpu() != (int)h->cpu) {
		h->wrong_cpu = true;
		h->ended_ns = helper_now_ns();
		atomic_store(&h->state, HOLDER_DONE);
		return NULL;
	}
	h->started_ns = helper_now_ns();
	atomic_store(&h->state, HOLDER_SPINNING);
	do {
		__builtin_ia32_pause();
		now = helper_now_ns();
	} while (!atomic_load_explicit(&h->stop, memory_order_relaxed) &&
		 now < h->deadline_ns);
	h->expired = now >= h->deadline_ns;
	h->ended_ns = now;
	atomic_store(&h->state, HOLDER_DONE);
	return NULL;
}

static void holder_join(struct holder *h)
{
	atomic_store(&h->stop, true);
	pthread_join(h->thread, NULL);
	h->active = false;
}

int helper_hold(struct helper_holds *holds, uint32_t cpu, uint32_t lease_ms,
		uint32_t *granted)
{
	struct sched_param param = { .sched_priority = HELPER_HOLD_PRIO };
	struct holder *h;
	pthread_attr_t attr;
	cpu_set_t one;
	int r;

	if (cpu >= holds->ncpus)
		return -EINVAL;
	h = &holds->holder[cpu];
	if (h->active) {
		if (atomic_load(&h->state) != HOLDER_DONE)
			return -EBUSY;
		holder_join(h);	/* ran out, not reaped yet */
	}
	lease_ms = helper_lease_ms(lease_ms);
	h->cpu = cpu;
	h->deadline_ns = helper_now_ns() + (uint64_t)lease_ms * 1000000u;
	h->expired = false;
	h->wrong_cpu = false;
	h->started_ns = h->ended_ns = 0;
	atomic_store(&h->state, HOLDER_STARTING);
	atomic_store(&h->stop, false);

	/* Move off the CPU first, so the holder has it at once. */
	h->active = true;
	loop_avoid_held(holds);
	h->active = false;

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
		loop_avoid_held(holds);
		return -r;
	}
	h->active = true;

	/* Answer only once the CPU is really ours; bounded by the lease,
	 * which the holder enforces on itself. */
	while (atomic_load(&h->state) == HOLDER_STARTING) {
		struct timespec ts = { 0, 20000 };

		if (helper_now_ns() >= h->deadline_ns)
			break;
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&h->state) != HOLDER_SPINNING) {
		bool wrong = h->wrong_cpu;

		holder_join(h);
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
	holder_join(h);
	loop_avoid_held(holds);
	*held_ns = h->ended_ns - h->started_ns;
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
				   now < h->deadline_ns))
			continue;
		holder_join(h);
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
		holder_join(&holds->holder[cpu]);
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
		    holds->holder[cpu].deadline_ns < next)
			next = holds->holder[cpu].deadline_ns;
	return next;
}
