// SPDX-License-Identifier: MIT
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/caps.h"
#include "base/spawn.h"
#include "cmd/commands.h"
#include "cmd/window_run.h"

struct ivm_error *ivm_window_run_init(struct ivm_window_run *w,
				      const struct ivm_window_dir_config *cfg,
				      bool pprof)
{
	memset(w, 0, sizeof(*w));
	w->pprof = pprof;
	return ivm_window_dir_create(cfg, &w->dir);
}

struct ivm_error *ivm_window_run_open(struct ivm_window_run *w,
				      struct ivm_profile_writer **ret)
{
	struct ivm_error *err;
	const char *path;

	free(w->path);
	w->path = NULL;
	err = ivm_window_dir_next(w->dir, time(NULL), &path);
	if (err)
		return err;
	w->path = strdup(path);
	if (!w->path)
		return &ivm_enomem;
	return ivm_profile_writer_create(w->path, ret);
}

/* The pprof children running now, of every guest of the process. */
static unsigned int children;

/* How many may run: one per two host CPUs, one at least. */
static unsigned int children_max(void)
{
	static unsigned int max;

	if (!max) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		max = n >= 4 ? (unsigned int)(n / 2) : 1;
	}
	return max;
}

/*
 * Whether the pprof child, if any, is over (block: wait for it), and if
 * so, say how it went.
 */
static bool reap(struct ivm_window_run *w, bool block)
{
	int status;
	pid_t r;

	if (!w->report)
		return true;
	do
		r = waitpid(w->report, &status, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return false;		/* still running */
	children--;
	if (r > 0 && WIFEXITED(status) && !WEXITSTATUS(status)) {
		w->pprofs++;
	} else {
		w->pprof_failures++;
		fprintf(stderr, "idlevm: no pprof %s (%s %d); its window's profile stays\n",
			w->report_path,
			r > 0 && WIFSIGNALED(status) ? "signal" : "exit",
			r < 0 ? -1 : WIFSIGNALED(status) ? WTERMSIG(status) :
			WEXITSTATUS(status));
	}
	free(w->report_path);
	w->report_path = NULL;
	w->report = 0;
	return true;
}

/*
 * `idlevm report -f pprof -o PB PROF`, by this very binary holding no
 * capability from its first instruction (spawn.h), in a process
 * group of its own (a Ctrl-C to the terminal is for the profiler, which
 * then waits for it) and at normal priority (the profiler may wait for
 * events at real-time priority; symbolizing must not).
 */
static void start_report(struct ivm_window_run *w)
{
	const struct ivm_spawn opts = {
		.caps = 0, .new_group = true, .normal_priority = true,
		.pass_fd = -1,
	};
	struct ivm_error *err;
	char *prof = w->pending, *pb = ivm_window_dir_pprof_path(prof);
	char *argv[] = { "idlevm", "__window-pprof", "-q", "-f", "pprof",
			 "-o", pb, prof, NULL };
	pid_t pid;

	w->pending = NULL;
	if (!pb || access(prof, F_OK)) {
		/* No memory, or the caps removed the window meanwhile. */
		w->pprof_failures++;
		free(pb);
		free(prof);
		return;
	}
	err = ivm_spawn("/proc/self/exe", argv, &opts, &pid);
	if (err) {
		fprintf(stderr, "idlevm: no pprof for %s: %s\n", prof,
			err->message);
		ivm_error_destroy(err);
		w->pprof_failures++;
		free(pb);
		free(prof);
		return;
	}
	free(prof);
	children++;
	w->report = pid;
	w->report_path = pb;
}

void ivm_window_run_poll(struct ivm_window_run *w)
{
	bool had = w->report;

	if (!reap(w, false))
		return;
	/* The caps wait while a window's pprof is being made from it. */
	if (had && w->dir)
		w->pruned += ivm_window_dir_prune(w->dir);
	if (w->pending && children < children_max())
		start_report(w);
}

void ivm_window_run_finished(struct ivm_window_run *w)
{
	/* A window whose file could not even be created has nothing. */
	if (!w->path || access(w->path, F_OK)) {
		free(w->path);
		w->path = NULL;
		return;
	}
	w->windows++;
	if (w->pprof) {
		if (w->pending) {
			/* The one before never got its turn: too slow. */
			fprintf(stderr, "idlevm: no pprof for %s: the pprofs of earlier windows took longer than a window\n",
				w->pending);
			w->pprof_failures++;
			free(w->pending);
		}
		w->pending = w->path;
		w->path = NULL;
		ivm_window_run_poll(w);
	}
	if (!w->report)
		w->pruned += ivm_window_dir_prune(w->dir);
	/*
	 * What a window freed goes back to the host: malloc keeps freed
	 * pages of its heaps otherwise, and over hours of windows an agent's
	 * RSS would creep up with a flat heap.  A walk of the free lists,
	 * once a window.
	 */
	malloc_trim(0);
	free(w->path);
	w->path = NULL;
}

struct ivm_error *ivm_window_run_next(void *ctx,
				      struct ivm_profile_writer **ret)
{
	struct ivm_window_run *w = ctx;

	ivm_window_run_finished(w);
	return ivm_window_run_open(w, ret);
}

void ivm_window_run_deinit(struct ivm_window_run *w)
{
	/* The last window's pprof too, whatever the others are doing. */
	reap(w, true);
	if (w->pending) {
		start_report(w);
		reap(w, true);
	}
	if (w->dir)
		w->pruned += ivm_window_dir_prune(w->dir);
	ivm_window_dir_destroy(w->dir);
	w->dir = NULL;
	free(w->path);
	w->path = NULL;
}

int ivm_window_pprof_main(int argc, char **argv)
{
	/* A child that keeps root's capabilities for want of dropping them
	 * is not started at all: its window's profile stays. */
	struct ivm_error *err = ivm_caps_limit(0);

	if (err) {
		fprintf(stderr, "idlevm: pprof child: %s\n", err->message);
		ivm_error_destroy(err);
		return 1;
	}
	return ivm_cmd_report(argc, argv);
}
