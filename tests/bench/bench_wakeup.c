// SPDX-License-Identifier: MIT
/*
 * What the host charges idlevm's loop before it reads anything of a guest:
 * a thread woken out of ppoll, and one remote read of another process's
 * memory (a guest's private RAM is read so, QEMU's TCG registers too).
 *
 *   build/bench/bench_wakeup [--count N]
 *
 * Prints the waiter's own CPU time per wakeup (CLOCK_THREAD_CPUTIME_ID,
 * what the profile's closing lines count), median of five rounds of N:
 *  - pipe, waker on another host CPU: the wakeup of an idle CPU;
 *  - pipe, waker on the same host CPU: a context switch alone;
 *  - trace: idlevm's own path, a private tracefs instance recording a
 *    thread's sched_switch on another CPU (the thread sleeping 1 ms at a
 *    time), the waiter in ivm_trace_session_wait() and _read();
 * then the CPU time of one process_vm_readv() of 8 bytes of a child, and
 * of a look at N trace buffers that does not wait: ppoll() over N
 * descriptors against epoll_wait() on an instance holding the same N
 * (N: this host's CPUs, 64, 1,024: a 64-CPU host's buffers for one guest
 * and for 16; the buffers are this host's, opened again and again).
 * Each idle transition idlevm profiles costs at least one wakeup, and a
 * sample some ten remote reads when the guest's RAM is private: on a
 * host where these are dear, so is every sample (tests/bench/README.md).
 * The trace round needs root and tracefs; it is left out without them.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tracefs/tracefs.h>

#include "base/clock.h"
#include "profile/trace_session.h"

#define ROUNDS 5

static void pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

struct waker {
	int cpu, fd;
	pid_t tid;
	volatile bool stop;
};

/* Every millisecond: a byte into the pipe, or (fd < 0) just a sleep. */
static void *waker_main(void *arg)
{
	struct waker *w = arg;
	struct timespec ms = { 0, 1000000 };

	pin_to(w->cpu);
	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	while (!w->stop) {
		nanosleep(&ms, NULL);
		if (w->fd >= 0 && write(w->fd, "x", 1) < 0)
			break;
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof(*v), cmp_double);
	return v[ROUNDS / 2];
}

/* us of the waiter's CPU per wakeup by a pipe written from waker_cpu. */
static double pipe_round(int waker_cpu, int count)
{
	struct waker w = { .cpu = waker_cpu };
	struct timespec to = { 0, 10000000 };
	int fds[2], n = 0;
	pthread_t th;
	uint64_t cpu0;
	char buf[64];

	if (pipe(fds) < 0)
		return -1;
	w.fd = fds[1];
	pin_to(0);
	pthread_create(&th, NULL, waker_main, &w);
	cpu0 = ivm_thread_cpu_ns();
	while (n < count) {
		struct pollfd p = { fds[0], POLLIN, 0 };

		if (ppoll(&p, 1, &to, NULL) > 0 &&
		    read(fds[0], buf, sizeof(buf)) > 0)
			n++;
	}
	cpu0 = ivm_thread_cpu_ns() - cpu0;
	w.stop = true;
	pthread_join(th, NULL);
	close(fds[0]);
	close(fds[1]);
	return (double)cpu0 / 1e3 / n;
}

static int count_record(void *ctx, const void *data, size_t size, int cpu,
			uint64_t ts)
{
	(void)data, (void)size, (void)cpu, (void)ts;
	++*(int *)ctx;
	return 0;
}

/*
 * us of the waiter's CPU per wakeup by a trace session, *per_wake the
 * records each brought; -1 without tracefs.
 */
static double trace_round(int count, double *per_wake)
{
	const char *events[] = { "sched:sched_switch" };
	struct waker w = { .cpu = 1, .fd = -1 };
	struct ivm_trace_session *s = NULL;
	struct ivm_error *err;
	int wakes = 0, records = 0;
	pthread_t th;
	uint64_t cpu0;

	pin_to(0);
	pthread_create(&th, NULL, waker_main, &w);
	while (!__atomic_load_n(&w.tid, __ATOMIC_SEQ_CST))
		sched_yield();
	err = ivm_trace_session_create(events, 1, &w.tid, 1, 0, &s);
	if (err) {
		fprintf(stderr, "bench_wakeup: no trace round: %s\n",
			err->message);
		ivm_error_destroy(err);
		w.stop = true;
		pthread_join(th, NULL);
		return -1;
	}
	cpu0 = ivm_thread_cpu_ns();
	while (wakes < count && !err) {
		bool ready;

		err = ivm_trace_session_wait(s, 10000000, &ready);
		if (!err && ready) {
			wakes++;
			err = ivm_trace_session_read(s, count_record, &records);
		}
	}
	cpu0 = ivm_thread_cpu_ns() - cpu0;
	w.stop = true;
	pthread_join(th, NULL);
	ivm_trace_session_destroy(s);
	if (err) {
		fprintf(stderr, "bench_wakeup: %s\n", err->message);
		ivm_error_destroy(err);
		return -1;
	}
	*per_wake = (double)records / wakes;
	return (double)cpu0 / 1e3 / wakes;
}

/* us of CPU per process_vm_readv() of 8 bytes of a child process. */
static double remote_read_round(int count)
{
	static uint64_t word = 42;
	struct iovec local, remote = { &word, sizeof(word) };
	uint64_t got, cpu0;
	pid_t child = fork();
	int i;

	if (child < 0)
		return -1;
	if (child == 0) {
		pause();
		_exit(0);
	}
	local = (struct iovec){ &got, sizeof(got) };
	cpu0 = ivm_thread_cpu_ns();
	for (i = 0; i < count; i++)
		if (process_vm_readv(child, &local, 1, &remote, 1, 0) !=
		    sizeof(got))
			break;
	cpu0 = ivm_thread_cpu_ns() - cpu0;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return i == count ? (double)cpu0 / 1e3 / count : -1;
}

/*
 * us of CPU per look without waiting at n trace buffers: by ppoll() over
 * their n descriptors (*by_epoll: by epoll_wait() on an instance holding
 * them).  -1 without tracefs.
 */
static double poll_round(struct tracefs_instance *inst, int n, int count,
			 double *by_epoll)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	struct pollfd *fds = calloc((size_t)n, sizeof(*fds));
	struct epoll_event evs[64];
	struct timespec zero = { 0, 0 };
	double ret = -1;
	uint64_t cpu0;
	int ep = epoll_create1(EPOLL_CLOEXEC), i, opened = 0;

	for (i = 0; fds && ep >= 0 && i < n; i++, opened++) {
		struct epoll_event ev = { .events = EPOLLIN };
		char name[64], *path;

		snprintf(name, sizeof(name), "per_cpu/cpu%ld/trace_pipe_raw",
			 i % cpus);
		path = tracefs_instance_get_file(inst, name);
		fds[i].fd = path ? open(path, O_RDONLY | O_NONBLOCK) : -1;
		tracefs_put_tracing_file(path);
		fds[i].events = POLLIN;
		if (fds[i].fd < 0)
			break;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i].fd, &ev)) {
			close(fds[i].fd);
			break;
		}
	}
	if (opened == n) {
		cpu0 = ivm_thread_cpu_ns();
		for (i = 0; i < count; i++)
			ppoll(fds, (nfds_t)n, &zero, NULL);
		ret = (double)(ivm_thread_cpu_ns() - cpu0) / 1e3 / count;
		cpu0 = ivm_thread_cpu_ns();
		for (i = 0; i < count; i++)
			epoll_wait(ep, evs, 64, 0);
		*by_epoll = (double)(ivm_thread_cpu_ns() - cpu0) / 1e3 / count;
	}
	for (i = 0; fds && i < opened; i++)
		close(fds[i].fd);
	if (ep >= 0)
		close(ep);
	free(fds);
	return ret;
}

static void print_polls(int count)
{
	int sizes[] = { (int)sysconf(_SC_NPROCESSORS_CONF), 64, 1024 };
	struct tracefs_instance *inst;
	char name[64];
	size_t k;

	snprintf(name, sizeof(name), "idlevm-bench-%d", (int)getpid());
	inst = tracefs_instance_create(name);
	if (!inst) {
		fprintf(stderr, "bench_wakeup: no poll round: no tracefs\n");
		return;
	}
	printf("a look at N trace buffers, not waiting (CPU a call):\n");
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		double by_epoll = 0,
		       by_poll = poll_round(inst, sizes[k], count, &by_epoll);

		if (by_poll >= 0)
			printf("  %4d: ppoll %7.2f us, epoll_wait %5.2f us\n",
			       sizes[k], by_poll, by_epoll);
	}
	tracefs_instance_destroy(inst);
	tracefs_instance_free(inst);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	double far[ROUNDS], near[ROUNDS], trace[ROUNDS], recs[ROUNDS];
	double reads[ROUNDS];
	int count = 2000, c, r;
	bool traced = true;

	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		if (c == 'n' && atoi(optarg) > 0) {
			count = atoi(optarg);
			continue;
		}
		fprintf(stderr, "usage: bench_wakeup [--count N]\n");
		return c == 'h' ? 0 : 2;
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "bench_wakeup: needs two host CPUs\n");
		return 2;
	}
	for (r = 0; r < ROUNDS; r++) {
		far[r] = pipe_round(1, count);
		near[r] = pipe_round(0, count);
		if (traced)
			trace[r] = trace_round(count, &recs[r]);
		traced = traced && trace[r] >= 0;
		reads[r] = remote_read_round(count * 10);
	}
	printf("waiter's CPU per wakeup, median of %d rounds of %d:\n", ROUNDS,
	       count);
	printf("  pipe, waker on another CPU   %7.1f us\n", median(far));
	printf("  pipe, waker on the same CPU  %7.1f us\n", median(near));
	if (traced)
		printf("  trace session (idlevm's)     %7.1f us "
		       "(%.2f records a wakeup)\n", median(trace), median(recs));
	printf("process_vm_readv of 8 bytes   %7.1f us of CPU a call\n",
	       median(reads));
	if (traced)
		print_polls(count * 5);
	return 0;
}
