// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <sys/resource.h>

#include "base/fd_limit.h"

/* A soft limit below the hard one goes up to it; at it, it stays. */
Test(fd_limit, soft_limit_goes_up_to_the_hard_one)
{
	struct rlimit rl;
	uint64_t hard;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max <= 64)
		cr_skip_test("hard limit %llu: no room to test",
			     (unsigned long long)rl.rlim_max);
	hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX :
					       (uint64_t)rl.rlim_max;
	/* Criterion runs each test in a process of its own. */
	rl.rlim_cur = 64;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	cr_assert_eq(ivm_fd_limit_raise(), hard);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	cr_assert_eq(rl.rlim_cur, rl.rlim_max);
	cr_assert_eq(ivm_fd_limit_raise(), hard);
}
