// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"

/* The process umask (read and put back at once). */
static mode_t current_umask(void)
{
	mode_t m = umask(022);

	umask(m);
	return m;
}

struct ivm_error *ivm_outfile_open(const char *path, int flags,
				   struct ivm_outfile *ret)
{
	struct ivm_error *err;
	struct stat st;

	memset(ret, 0, sizeof(*ret));
	ret->fd = -1;
	ret->path = strdup(path);
	if (!ret->path)
		return &ivm_enomem;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		ret->fd = open(path, O_WRONLY | O_CLOEXEC | flags);
		if (ret->fd >= 0)
			return NULL;
		err = ivm_error_os(errno, "cannot open %s", path);
		ivm_outfile_close(ret);
		return err;
	}
	if (asprintf(&ret->tmp_path, "%s.XXXXXX", path) < 0) {
		ret->tmp_path = NULL;
		ivm_outfile_close(ret);
		return &ivm_enomem;
	}
	ret->fd = mkostemp(ret->tmp_path, O_CLOEXEC | flags);
	if (ret->fd < 0) {
		err = ivm_error_os(errno, "cannot create %s", path);
		free(ret->tmp_path);
		ret->tmp_path = NULL;
		ivm_outfile_close(ret);
		return err;
	}
	/* mkostemp makes it 0600; the file is as readable as any other. */
	(void)!fchmod(ret->fd, 0644 & ~current_umask());	/* not worth failing */
	return NULL;
}

struct ivm_error *ivm_outfile_publish(struct ivm_outfile *f)
{
	if (!f->tmp_path)
		return NULL;
	if (rename(f->tmp_path, f->path) < 0)
		return ivm_error_os(errno, "renaming %s to %s", f->tmp_path,
				    f->path);
	free(f->tmp_path);
	f->tmp_path = NULL;
	return NULL;
}

void ivm_outfile_close(struct ivm_outfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (f->tmp_path)
		unlink(f->tmp_path);
	free(f->tmp_path);
	f->tmp_path = NULL;
	free(f->path);
	f->path = NULL;
}
