// SPDX-License-Identifier: MIT
/*
 * spin — CPU-bound guest workload for measuring idlevm's overhead.
 *
 * Each thread repeats one fixed, deterministic operation: a multiply-xorshift
 * round over a 64-byte buffer that stays in L1.  The operation never blocks
 * and touches no shared memory, so its rate depends only on how much CPU the
 * guest gets: comparing ops_per_sec with and without the profiler attached
 * gives the profiler's cost to the guest.
 *
 *   spin: config pid=<pid> threads=<n> seconds=<s> interval=<s>  once
 *   spin: start tid=<tid> comm=<name>                         once per thread
 *   spin: t=<s> ops_per_sec=<n>                               every interval
 *   spin: total ops=<n> seconds=<s> ops_per_sec=<n>           at the end
 *
 * t and seconds are measured since the workers started (CLOCK_MONOTONIC);
 * ops_per_sec in an interval line is over that interval, from counters the
 * threads publish every OPS_PER_PUBLISH operations (so an interval figure
 * can be off by at most that many operations per thread); the total line
 * is exact: it is printed after every thread stopped.  The end comes after
 * --seconds, on SIGTERM or on SIGINT.  Lines are flushed as written.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/*
 * A function that must stay a real frame of its own in every stack: never
 * inlined, cloned (.isra/.constprop) or folded with another (GCC's noipa);
 * clang has no noipa, but does not clone these external functions at -O2,
 * and can be told to make no tail calls from them.
 */
#if defined(__clang__)
#define STACK_FRAME __attribute__((noinline, disable_tail_calls))
#else
#define STACK_FRAME __attribute__((noipa))
#endif

#define MAX_THREADS 64
#define OP_WORDS 8		/* 64 bytes */
#define OPS_PER_PUBLISH 1024
#define NSEC_PER_SEC 1000000000ull

struct spinner {
	unsigned int index;
	uint64_t ops;		/* published by the thread, read by main */
	uint64_t result;	/* the final hash: keeps the work observable */
	pthread_t thread;
} __attribute__((aligned(64)));	/* no false sharing between counters */

static struct spinner *spinners;
static unsigned int nr_threads = 1;
static double run_seconds;		/* 0: forever */
static double interval = 1;		/* 0: no interval lines */
static int stopping;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* One operation: a fixed amount of work whatever the data. */
STACK_FRAME uint64_t spin_op(uint64_t *buf, uint64_t h)
{
	for (unsigned int i = 0; i < OP_WORDS; i++) {
		h ^= buf[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
		buf[i] = h;
	}
	return h;
}

STACK_FRAME void *spin_main(void *arg)
{
	struct spinner *s = arg;
	uint64_t buf[OP_WORDS], h = 0x9e3779b97f4a7c15ull * (s->index + 1);
	uint64_t ops = 0;
	char comm[16];

	/* i < MAX_THREADS: the modulo tells the compiler the name fits. */
	snprintf(comm, sizeof(comm), "spin-%u", s->index % MAX_THREADS);
	prctl(PR_SET_NAME, comm, 0, 0, 0);
	printf("spin: start tid=%d comm=%s\n", gettid(), comm);
	for (unsigned int i = 0; i < OP_WORDS; i++)
		buf[i] = h + i;

	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		for (unsigned int i = 0; i < OPS_PER_PUBLISH; i++)
			h = spin_op(buf, h);
		ops += OPS_PER_PUBLISH;
		__atomic_store_n(&s->ops, ops, __ATOMIC_RELAXED);
	}
	s->result = h;
	return NULL;
}

static uint64_t total_ops(void)
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < nr_threads; i++)
		sum += __atomic_load_n(&spinners[i].ops, __ATOMIC_RELAXED);
	return sum;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spin [--threads N] [--seconds S] [--interval S]\n"
		"  --threads N    spinning threads (1..%d, default 1)\n"
		"  --seconds S    run time, 0 = until SIGTERM/SIGINT (default 0)\n"
		"  --interval S   seconds between rate lines, 0 = off (default 1)\n",
		MAX_THREADS);
}

static bool parse_seconds(const char *s, double *ret)
{
	char *end;
	double v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= 0) || v > 1e9)
		return false;
	*ret = v;
	return true;
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		bool ok;

		if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!val) {
			fprintf(stderr, "spin: %s needs a value\n", opt);
			usage(stderr);
			exit(2);
		}
		i++;
		if (!strcmp(opt, "--threads")) {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(val, &end, 10);
			ok = *val >= '0' && *val <= '9' && !errno && !*end &&
			     v >= 1 && v <= MAX_THREADS;
			nr_threads = (unsigned int)v;
		} else if (!strcmp(opt, "--seconds")) {
			ok = parse_seconds(val, &run_seconds);
		} else if (!strcmp(opt, "--interval")) {
			ok = parse_seconds(val, &interval);
		} else {
			fprintf(stderr, "spin: unknown option %s\n", opt);
			usage(stderr);
			exit(2);
		}
		if (!ok) {
			fprintf(stderr, "spin: bad value for %s: %s\n", opt,
				val);
			usage(stderr);
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	uint64_t start, end = 0, next = 0, step, last_t, last_ops = 0, ops;
	sigset_t sigs;
	double secs;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv);
	prctl(PR_SET_NAME, "spin", 0, 0, 0);

	/* SIGTERM/SIGINT are taken by the main thread with sigtimedwait, so
	 * the spinners never run a handler and the final line always prints. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	spinners = aligned_alloc(64, sizeof(*spinners) * nr_threads);
	if (!spinners) {
		perror("spin: aligned_alloc");
		return 1;
	}
	memset(spinners, 0, sizeof(*spinners) * nr_threads);
	printf("spin: config pid=%d threads=%u seconds=%g interval=%g\n",
	       getpid(), nr_threads, run_seconds, interval);

	start = last_t = now_ns();
	for (unsigned int i = 0; i < nr_threads; i++) {
		int err;

		spinners[i].index = i;
		err = pthread_create(&spinners[i].thread, NULL, spin_main,
				     &spinners[i]);
		if (err) {
			fprintf(stderr, "spin: pthread_create: %s\n",
				strerror(err));
			return 1;
		}
	}
	if (run_seconds > 0)
		end = start + (uint64_t)(run_seconds * NSEC_PER_SEC);
	/* At least 1 ms: a zero step would never move past `now`. */
	step = (uint64_t)(interval * NSEC_PER_SEC);
	if (step < 1000000)
		step = 1000000;
	if (interval > 0)
		next = start + step;

	for (;;) {
		uint64_t now = now_ns(), wake = end;
		struct timespec ts;
		int sig;

		if (next && now >= next) {
			ops = total_ops();
			printf("spin: t=%.3f ops_per_sec=%.0f\n",
			       (double)(now - start) / NSEC_PER_SEC,
			       (double)(ops - last_ops) * NSEC_PER_SEC /
			       (double)(now - last_t));
			last_ops = ops;
			last_t = now;
			/* Skip missed slots rather than burst after a stall. */
			while (next <= now)
				next += step;
		}
		if (end && now >= end)
			break;
		if (next && (!wake || next < wake))
			wake = next;
		if (wake) {
			ts.tv_sec = (time_t)((wake - now) / NSEC_PER_SEC);
			ts.tv_nsec = (long)((wake - now) % NSEC_PER_SEC);
			sig = sigtimedwait(&sigs, NULL, &ts);
		} else {
			sig = sigwaitinfo(&sigs, NULL);
		}
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}

	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < nr_threads; i++)
		pthread_join(spinners[i].thread, NULL);
	secs = (double)(now_ns() - start) / NSEC_PER_SEC;
	ops = total_ops();
	printf("spin: total ops=%llu seconds=%.3f ops_per_sec=%.0f\n",
	       (unsigned long long)ops, secs,
	       secs > 0 ? (double)ops / secs : 0);
	return 0;
}
