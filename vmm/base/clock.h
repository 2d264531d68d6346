/* SPDX-License-Identifier: MIT */
/*
 * The host's monotonic clock in nanoseconds, for timeouts and sample
 * times; and the calling thread's CPU time, for what a run costs.
 */
#ifndef IVM_CLOCK_H
#define IVM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t ivm_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (a system call: not for every event). */
static inline uint64_t ivm_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* IVM_CLOCK_H */
