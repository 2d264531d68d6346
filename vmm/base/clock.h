/* SPDX-License-Identifier: MIT */
/* The host's monotonic clock in nanoseconds, for timeouts and sample times. */
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

#endif /* IVM_CLOCK_H */
