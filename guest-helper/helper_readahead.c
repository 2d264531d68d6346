// SPDX-License-Identifier: MIT
/*
 * READAHEAD: read a range of a file a process maps, so that its pages are
 * in the guest's page cache for the host to find.  The host reads a file's
 * bytes from guest memory alone (the process's page tables, else the page
 * cache); a pre-forked worker never touches its executable's CFI, and
 * nothing else may have, so those pages are nowhere in memory until some
 * process reads them.  This is that process: it reads them once and keeps
 * nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper.h"

/* Read in pieces of this size: the buffer is static, not on the stack. */
#define PIECE (64 * 1024)

int helper_readahead(pid_t pid, const char *path, size_t path_len,
		     uint64_t inode, uint64_t offset, uint64_t length,
		     uint64_t *ret)
{
	static uint8_t piece[PIECE];
	char where[64 + IVM_PROTO_MAX_PATH];
	struct stat st;
	uint64_t done = 0;
	int fd, n;

	/* The file as the process sees it: its root, its mounts. */
	n = snprintf(where, sizeof(where), "/proc/%d/root%.*s", (int)pid,
		     (int)path_len, path);
	if (n < 0 || (size_t)n >= sizeof(where))
		return -ENAMETOOLONG;
	fd = open(where, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	/* Another file now has that name: not the one the host saw. */
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_ino != inode) {
		close(fd);
		return -ESTALE;
	}
	while (done < length && offset + done < (uint64_t)st.st_size) {
		uint64_t want = length - done;
		ssize_t got;

		if (want > PIECE)
			want = PIECE;
		got = pread(fd, piece, (size_t)want, (off_t)(offset + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			n = -errno;
			close(fd);
			return n;
		}
		if (got == 0)
			break;
		done += (uint64_t)got;
	}
	close(fd);
	*ret = done;
	return 0;
}
