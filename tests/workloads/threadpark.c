// SPDX-License-Identifier: MIT
/*
 * threadpark — many threads that mostly sleep, for measuring what watching
 * every guest thread costs (the switch sampler's poll against the number
 * of threads: tests/bench/switch_poll.sh).
 *
 *   threadpark [--threads N] [--hz H] [--seconds S] [--stack-kb K]
 *
 * Starts N threads (default 100, comm "tp-<i>") with K KiB stacks (default
 * 64) that each wake H times a second (default 1; 0: sleep until the end),
 * staggered so the wakeups spread evenly, do a few microseconds of work and
 * sleep again (clock_nanosleep to an absolute deadline).  Prints
 *   threadpark: config pid=<pid> threads=<n> hz=<h> seconds=<s>
 *   threadpark: ready threads=<n>
 * once every thread runs, and at the end (after S seconds, 0: until SIGTERM
 * or SIGINT)
 *   threadpark: exit wakeups=<total>
 * Exits 1 when a thread cannot be created (the guest's threads-max, its
 * memory), saying how many were.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000ull
#define MAX_THREADS 100000

static unsigned long nr_threads = 100, stack_kb = 64;
static double hz = 1, seconds;
static volatile int stopping;
static uint64_t *wakeups;
static pthread_barrier_t started;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / NSEC_PER_SEC),
			       .tv_nsec = (long)(t % NSEC_PER_SEC) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void *parked(void *arg)
{
	unsigned long i = (unsigned long)arg;
	uint64_t period = hz > 0 ? (uint64_t)(NSEC_PER_SEC / hz) : 0;
	uint64_t next;
	char comm[16];
	volatile uint64_t x = i;

	snprintf(comm, sizeof(comm), "tp-%lu", i % MAX_THREADS);
	prctl(PR_SET_NAME, comm, 0, 0, 0);
	pthread_barrier_wait(&started);
	if (!period) {
		while (!stopping)
			pause();
		return NULL;
	}
	/* Thread i wakes at i/N of each period: evenly spread. */
	next = now_ns() + period * i / nr_threads;
	while (!stopping) {
		sleep_until(next);
		for (int k = 0; k < 1000; k++)
			x = x * 6364136223846793005ull + 1;
		wakeups[i]++;
		next += period;
	}
	return NULL;
}

static int parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char *end;

		if (i + 1 >= argc)
			return -1;
		if (!strcmp(argv[i], "--threads"))
			nr_threads = strtoul(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--hz"))
			hz = strtod(argv[++i], &end);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = strtod(argv[++i], &end);
		else if (!strcmp(argv[i], "--stack-kb"))
			stack_kb = strtoul(argv[++i], &end, 10);
		else
			return -1;
		if (*end)
			return -1;
	}
	if (!nr_threads || nr_threads > MAX_THREADS || hz < 0 || hz > 1000 ||
	    seconds < 0 || stack_kb < 16 || stack_kb > 65536)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	pthread_attr_t attr;
	pthread_t *threads;
	sigset_t sigs;
	uint64_t total = 0;
	unsigned long i, made = 0;
	int err = 0, sig;

	if (parse(argc, argv)) {
		fprintf(stderr,
			"usage: threadpark [--threads N] [--hz H] [--seconds S] [--stack-kb K]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	printf("threadpark: config pid=%d threads=%lu hz=%g seconds=%g\n",
	       getpid(), nr_threads, hz, seconds);
	threads = calloc(nr_threads, sizeof(*threads));
	wakeups = calloc(nr_threads, sizeof(*wakeups));
	if (!threads || !wakeups)
		return 1;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, stack_kb * 1024);
	pthread_barrier_init(&started, NULL, (unsigned int)nr_threads + 1);
	for (i = 0; i < nr_threads; i++) {
		err = pthread_create(&threads[i], &attr, parked, (void *)i);
		if (err)
			break;
		made++;
	}
	if (err) {
		fprintf(stderr, "threadpark: made %lu of %lu threads: %s\n", made,
			nr_threads, strerror(err));
		return 1;	/* the threads wait at the barrier: exit ends them */
	}
	pthread_barrier_wait(&started);
	printf("threadpark: ready threads=%lu\n", made);
	if (seconds > 0)
		alarm((unsigned int)(seconds + 0.999));
	do {
		sig = sigwaitinfo(&sigs, NULL);
	} while (sig < 0 && errno == EINTR);
	stopping = 1;
	/* Sleepers wake at their next period; pause()rs need a signal. */
	for (i = 0; i < made; i++)
		total += wakeups[i];
	printf("threadpark: exit wakeups=%llu\n", (unsigned long long)total);
	return 0;
}
