/* SPDX-License-Identifier: MIT */
/*
 * window_dir: the directory a continuous run writes one profile per window
 * into (`idlevm profile --window SEC --output-dir DIR`), for a collector
 * to pick up.
 *
 * Window files are named by guest and window start (UTC, to the second):
 *   DIR/NAME-YYYYmmddTHHMMSSZ.prof    the profile file (profile_file.h)
 *   DIR/NAME-YYYYmmddTHHMMSSZ.pb.gz   its pprof, when made
 * so that names sort in time order.  NAME is the guest's name with any
 * byte but [A-Za-z0-9._-] as '_'.  A start already taken (a restart in
 * the same second) gets "-1", "-2"... after the time.  Both files take
 * their names only once whole (outfile.h), so a collector never reads
 * half of one.
 *
 * Retention: after each window, the oldest windows of NAME (both their
 * files) are removed until at most keep_windows remain and their files
 * take at most keep_bytes; the newest window is never removed, whatever
 * its size.  Other files in DIR (other guests', temporary names) are
 * never touched.
 */
#ifndef IVM_WINDOW_DIR_H
#define IVM_WINDOW_DIR_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/error.h"

#define IVM_WINDOW_NAME_MAX	64	/* bytes of NAME kept */
#define IVM_WINDOW_STEM_MAX	(IVM_WINDOW_NAME_MAX + 32)

struct ivm_window_dir_config {
	const char *dir;		/* created (one level) if missing */
	const char *name;		/* the guest's */
	uint64_t keep_windows;		/* 0: no cap */
	uint64_t keep_bytes;		/* 0: no cap */
};

struct ivm_window_dir;

/* IVM_ERROR_OS when dir cannot be created or is not a directory. */
struct ivm_error *ivm_window_dir_create(const struct ivm_window_dir_config *cfg,
					struct ivm_window_dir **ret);
void ivm_window_dir_destroy(struct ivm_window_dir *d);

/*
 * The path of a new window starting at start (wall clock): "DIR/STEM.prof"
 * with a STEM no window of this directory has yet.  Owned by d, valid
 * until the next call.
 */
struct ivm_error *ivm_window_dir_next(struct ivm_window_dir *d, time_t start,
				      const char **ret);

/* "DIR/STEM.pb.gz" for the window whose profile is prof_path; caller frees. */
char *ivm_window_dir_pprof_path(const char *prof_path);

/*
 * Apply the caps to the windows of this name in the directory, oldest
 * first, the newest kept whatever its size; call it between windows (the
 * one being written would count as the newest).  Returns how many windows
 * were removed.
 */
size_t ivm_window_dir_prune(struct ivm_window_dir *d);

#endif /* IVM_WINDOW_DIR_H */
