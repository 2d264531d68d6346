/* SPDX-License-Identifier: MIT */
/*
 * A workload the test runs natively, as a guest would run it, and reads
 * from outside as idlevm reads a guest: its memory through
 * process_vm_readv (a struct ivm_kmem_reader), its threads stopped with
 * ptrace.  One per test file: workload and workload_out are the file's.
 * live_workload_start() runs it with its standard output on workload_out;
 * live_workload_stop() kills and reaps it (also the threads a test
 * traced), for TestSuite .fini.
 */
#ifndef IVM_TEST_LIVE_WORKLOAD_H
#define IVM_TEST_LIVE_WORKLOAD_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmem/vmem.h"

static pid_t workload = -1;
static int workload_out = -1;

static inline struct ivm_error *live_workload_read(void *ctx, uint64_t va,
						   void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)va, len };

	(void)ctx;
	if (process_vm_readv(workload, &local, 1, &remote, 1, 0) !=
	    (ssize_t)len)
		return ivm_error_fault(va, "process_vm_readv at %#llx",
				       (unsigned long long)va);
	return NULL;
}

/*
 * Run argv[0] with argv, its standard output on a pipe whose read end
 * becomes workload_out; it dies with the test process (PR_SET_PDEATHSIG).
 * 0, or -1 with errno when the pipe or the fork failed.
 */
static inline int live_workload_start(char *const argv[])
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	workload = fork();
	if (workload < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (workload == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	workload_out = fds[0];
	return 0;
}

static inline void live_workload_stop(void)
{
	if (workload > 0) {
		kill(workload, SIGKILL);
		/*
		 * A thread we traced is reaped by us (__WALL) before its
		 * thread group leader can be: wait for any child until the
		 * workload itself is gone.
		 */
		for (;;) {
			pid_t r = waitpid(-1, NULL, __WALL);

			if (r == workload || (r < 0 && errno != EINTR))
				break;
		}
	}
	if (workload_out >= 0)
		close(workload_out);
	workload = -1;
	workload_out = -1;
}

#endif /* IVM_TEST_LIVE_WORKLOAD_H */
