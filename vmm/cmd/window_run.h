/* SPDX-License-Identifier: MIT */
/*
 * window_run: the windows of one guest in a continuous run (`idlevm
 * profile --window SEC --output-dir DIR`): each window's profile file in
 * the directory (profile/window_dir.h), its pprof made next to it once
 * the window is finished, and the directory kept within its caps.
 *
 * The pprof of a window is made by a child `idlevm __window-pprof -f
 * pprof` (this very binary's report, with no capability left: it only
 * reads the window's profile and writes a file), in a process group of
 * its own and at normal priority: symbolizing does not hold up the
 * profiler, a Ctrl-C to the
 * terminal does not stop it half-way, and a report that fails costs only
 * that pprof, never the window's profile.  The pprof takes its name only
 * once whole (outfile.h).
 *
 * A child takes tens of MiB (the kernel's debuginfo) and its CPU at once,
 * and the windows of guests profiled together end together: at most one
 * per two host CPUs (one at least) runs at a time for the whole process, the
 * others' windows wait for their turn (ivm_window_run_poll, from the
 * loop), and a guest has at most one child and one window waiting: a
 * window still waiting when the next ends gets no pprof (said, counted).
 * The last window's pprof is made at the end, waited for.
 */
#ifndef IVM_WINDOW_RUN_H
#define IVM_WINDOW_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"
#include "profile/profile_file.h"
#include "profile/window_dir.h"

struct ivm_window_run {
	struct ivm_window_dir *dir;
	bool pprof;			/* make each window's pprof */
	char *path;			/* the window being written, or NULL */
	pid_t report;			/* the pprof child, or 0 */
	char *report_path;		/* the pprof it makes */
	char *pending;			/* a window waiting for its pprof */
	unsigned int windows;		/* finished */
	unsigned int pprofs, pprof_failures;
	size_t pruned;			/* windows removed by the caps */
};

/* Set up the directory (cfg as window_dir.h; pprof: make them). */
struct ivm_error *ivm_window_run_init(struct ivm_window_run *w,
				      const struct ivm_window_dir_config *cfg,
				      bool pprof);

/* The writer of a new window starting now (its path in w->path). */
struct ivm_error *ivm_window_run_open(struct ivm_window_run *w,
				      struct ivm_profile_writer **ret);

/*
 * The window at w->path was finished (its file is whole): start its
 * pprof, apply the caps.  Never fails: a pprof that cannot be made is
 * said on stderr and counted.
 */
void ivm_window_run_finished(struct ivm_window_run *w);

/*
 * Reap w's pprof child if it is over, and start the pprof of its waiting
 * window if a child may run.  Cheap (nothing, or one waitpid): call it
 * from the loop.
 */
void ivm_window_run_poll(struct ivm_window_run *w);

/* The profiler's next_window hook: finished, then open (ctx is w). */
struct ivm_error *ivm_window_run_next(void *ctx,
				      struct ivm_profile_writer **ret);

/*
 * Wait for the pprof child if running, make the waiting window's pprof
 * (and wait), apply the caps once more, free everything but the counts.
 * Fine on a zeroed struct.
 */
void ivm_window_run_deinit(struct ivm_window_run *w);

/*
 * The pprof child's main (idlevm __window-pprof REPORT-OPTIONS PROFILE):
 * gives up every capability (base/caps.h), then runs idlevm report.
 */
int ivm_window_pprof_main(int argc, char **argv);

#endif /* IVM_WINDOW_RUN_H */
