/* SPDX-License-Identifier: MIT */
/*
 * outfile: a file that takes its name only once it has something whole to
 * say, so that whoever watches the directory (a reader, a backend picking
 * up profiles) never sees half of it, and a run that fails early leaves
 * an older file at that name alone.
 *
 * A regular file (or a new one) is written under a temporary name in the
 * same directory ("PATH.XXXXXX", mode 0644 less the umask) and renamed
 * over PATH by ivm_outfile_publish(); anything else (a FIFO, /dev/stdout)
 * is written directly and publishing it does nothing.  Closing an
 * unpublished file removes its temporary name.
 */
#ifndef IVM_OUTFILE_H
#define IVM_OUTFILE_H

#include "base/error.h"

struct ivm_outfile {
	int fd;			/* -1 once closed (or handed to stdio) */
	char *path;
	char *tmp_path;		/* NULL: writing path itself, or published */
};

/* Open path for writing (open flags, e.g. O_APPEND, added to O_WRONLY). */
struct ivm_error *ivm_outfile_open(const char *path, int flags,
				   struct ivm_outfile *ret);

/* Give the file its name (the temporary name is renamed over path). */
struct ivm_error *ivm_outfile_publish(struct ivm_outfile *f);

/*
 * Close the file if open, remove it if unpublished, free the names.  A
 * zeroed struct with fd -1 is fine.
 */
void ivm_outfile_close(struct ivm_outfile *f);

#endif /* IVM_OUTFILE_H */
