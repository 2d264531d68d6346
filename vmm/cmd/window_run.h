/* SPDX-License-Identifier: MIT */
/*
 * window_run: the windows of one guest in a continuous run (`idlevm
 * profile --window SEC --output-dir DIR`): each window's profile file in
 * the directory (profile/window_dir.h), its pprof made next to it once
 * the window is finished, and the directory kept within its caps.
 *
 * The pprof of a window is made by a child `idlevm report -f pprof`
 * (this very binary), in a process group of its own and at normal
 * priority: symbolizing does not hold up the profiler, a Ctrl-C to the
 * terminal does not stop it half-way, and a report that fails costs only
 * that pprof, never the window's profile.  The pprof takes its name only
 * once whole (outfile.h).  One child at a time: one still running when
 * the next window ends is waited for first, so pprofs never pile up and
 * the caps never remove a window whose pprof is being made.
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

/* The profiler's next_window hook: finished, then open (ctx is w). */
struct ivm_error *ivm_window_run_next(void *ctx,
				      struct ivm_profile_writer **ret);

/*
 * Wait for the pprof child if running, apply the caps once more, free
 * everything but the counts.  Fine on a zeroed struct.
 */
void ivm_window_run_deinit(struct ivm_window_run *w);

#endif /* IVM_WINDOW_RUN_H */
