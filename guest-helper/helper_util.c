// SPDX-License-Identifier: MIT
/*
 * Small pieces the helper's modules share: logging, the clock, leases, and
 * reading a thread's /proc stat line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

void helper_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	/* One write per line, so lines from the holder threads and the loop
	 * do not interleave on the console. */
	memcpy(line, "idlevm-helper: ", 15);
	va_start(ap, fmt);
	n = vsnprintf(line + 15, sizeof(line) - 16, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += 15;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

uint64_t helper_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint32_t helper_lease_ms(uint32_t asked)
{
	if (!asked)
		return IVM_PROTO_LEASE_DEFAULT_MS;
	if (asked > IVM_PROTO_LEASE_MAX_MS)
		return IVM_PROTO_LEASE_MAX_MS;
	return asked;
}

int helper_task_stat(pid_t tid, uint64_t *starttime, uint32_t *last_cpu)
{
	char path[64], buf[1024], *p, *end;
	unsigned long long v;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ESRCH;
	buf[n] = '\0';
	/* comm (field 2) may hold spaces and parentheses: fields resume
	 * after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p++;
	*starttime = 0;
	if (last_cpu)
		*last_cpu = UINT32_MAX;
	for (field = 3; field <= 39 && *p; field++) {
		while (*p == ' ')
			p++;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (end == p && field != 3)
			return -EIO;
		if (field == 3)
			end = strchr(p, ' ') ? strchr(p, ' ') : p + strlen(p);
		if (field == 22) {
			if (errno)
				return -EIO;
			*starttime = v;
			if (!last_cpu)
				return 0;
		}
		if (field == 39 && v < UINT32_MAX)
			*last_cpu = (uint32_t)v;
		p = end;
	}
	return field > 22 ? 0 : -EIO;
}

int helper_task_holdable(pid_t tid, int *policy, int *prio)
{
	struct sched_param param;
	int p;

	p = sched_getscheduler(tid);
	if (p < 0)
		return -errno;
	*policy = p & ~SCHED_RESET_ON_FORK;
	*prio = 0;
	if (*policy == SCHED_DEADLINE)
		return -EPERM;
	if (*policy != SCHED_FIFO && *policy != SCHED_RR)
		return 0;
	if (sched_getparam(tid, &param) < 0)
		return -errno;
	*prio = param.sched_priority;
	/* Equal priority waits: the holder is SCHED_FIFO and got there first. */
	return *prio > HELPER_HOLD_PRIO ? -EPERM : 0;
}
