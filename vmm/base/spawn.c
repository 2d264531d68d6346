// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/caps.h"
#include "base/spawn.h"

extern char **environ;

/* What the child failed at, written to the parent before it exits. */
struct child_failure {
	int err;
	char step[80];
};

static void child_fail(int report, int err, const char *step)
{
	struct child_failure f = { .err = err };
	size_t n = strlen(step);

	if (n >= sizeof(f.step))
		n = sizeof(f.step) - 1;
	memcpy(f.step, step, n);
	(void)!write(report, &f, sizeof(f));
	_exit(127);
}

static int onto_null(int fd, int flags)
{
	int n = open("/dev/null", flags | O_CLOEXEC);

	if (n < 0)
		return -1;
	if (n != fd && dup2(n, fd) < 0)
		return -1;
	if (n != fd)
		close(n);
	return 0;
}

/*
 * Between fork and execve: system calls only.  Every signal is blocked on
 * entry (the parent's doing); handlers go back to the default before the
 * mask the program is to run with is set.
 */
static void child(const char *path, char *const argv[],
		  const struct ivm_spawn *o, const sigset_t *mask, int report)
{
	struct sched_param sp = { .sched_priority = 0 };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	const char *step;
	sigset_t none;
	int sig, err;

	for (sig = 1; sig < NSIG; sig++) {
		struct sigaction old;

		if (sig != SIGKILL && sig != SIGSTOP &&
		    !sigaction(sig, NULL, &old) && old.sa_handler != SIG_IGN)
			sigaction(sig, &dfl, NULL);
	}
	if (o->new_session && setsid() < 0)
		child_fail(report, errno, "setsid");
	if (o->new_group && setpgid(0, 0) < 0)
		child_fail(report, errno, "setpgid");
	if (o->normal_priority && sched_setscheduler(0, SCHED_OTHER, &sp) < 0)
		child_fail(report, errno, "sched_setscheduler");
	if (o->null_stdio && (onto_null(0, O_RDONLY) || onto_null(1, O_WRONLY)))
		child_fail(report, errno, "opening /dev/null");
	if (o->pass_fd >= 0) {
		/* Out of the way of the descriptor the child is given. */
		if (report <= o->pass_as) {
			report = fcntl(report, F_DUPFD_CLOEXEC, o->pass_as + 1);
			if (report < 0)
				_exit(127);
		}
		if (o->pass_fd != o->pass_as && dup2(o->pass_fd, o->pass_as) < 0)
			child_fail(report, errno, "dup2");
		/* dup2 clears close-on-exec; the same number keeps its flag. */
		if (o->pass_fd == o->pass_as &&
		    fcntl(o->pass_as, F_SETFD, 0) < 0)
			child_fail(report, errno, "fcntl");
		if (close_range(o->pass_as + 1, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
			child_fail(report, errno, "close_range");
	}
	err = ivm_caps_limit_raw(o->caps, &step);
	if (err)
		child_fail(report, err, step);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, o->empty_sigmask ? &none : mask, NULL);
	execve(path, argv, environ);
	child_fail(report, errno, "execve");
}

struct ivm_error *ivm_spawn(const char *path, char *const argv[],
			    const struct ivm_spawn *opts, pid_t *ret)
{
	struct child_failure f;
	sigset_t all, mask;
	int report[2];
	ssize_t n;
	pid_t pid;

	if (pipe2(report, O_CLOEXEC) < 0)
		return ivm_error_os(errno, "starting %s: pipe", path);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &mask);
	pid = fork();
	if (pid == 0) {
		close(report[0]);
		child(path, argv, opts, &mask, report[1]);
	}
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	close(report[1]);
	if (pid < 0) {
		int err = errno;

		close(report[0]);
		return ivm_error_os(err, "starting %s: fork", path);
	}
	/* End of file: the execve closed the child's end; it runs. */
	do
		n = read(report[0], &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n == (ssize_t)sizeof(f)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		f.step[sizeof(f.step) - 1] = '\0';
		return ivm_error_os(f.err, "starting %s: %s", path, f.step);
	}
	*ret = pid;
	return NULL;
}
