// SPDX-License-Identifier: MIT
/*
 * mapfiles — a guest process whose memory mappings exercise every case a
 * reader of the kernel's VMAs must get right, for comparing `idlevm maps`
 * with the guest's own /proc/PID/maps (tests/e2e/t_43_maps.sh).
 *
 *   mapfiles [-n EXTRA] DIR SHMDIR
 *
 * Under DIR (a directory on the root file system) and SHMDIR (one on
 * another mount, e.g. /dev/shm) it creates files filled with a known
 * pattern and maps:
 *   - DIR/sub/dir/data.bin, pages 1-3 of 5, private read-only (an offset);
 *   - SHMDIR/ivm-shared.bin, shared read-write (a path across two mounts);
 *   - DIR/gone.bin, then unlinks it ("(deleted)");
 *   - DIR/new<newline>line, whose name /proc escapes as "new\012line";
 *   - data.bin's first page again, private writable and written to (a
 *     mapping with private copies);
 *   - a memfd named ivm-memfd, shared ("/memfd:ivm-memfd (deleted)");
 *   - anonymous memory named ivm-anon, where the kernel has anon names;
 *   - EXTRA more single pages of data.bin, every other one writable so
 *     that none merges with its neighbour (default 0; 100 gives a
 *     process of ~120 mappings for benchmarks).
 * It then forks a child that only waits: a fork child, whose page tables
 * lack every page of the executable it did not touch since the fork.
 *
 *   mapfiles: ready pid=<pid> child=<pid>
 *
 * is printed (and flushed) when all is in place; both processes then wait
 * until killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

static void die(const char *what)
{
	fprintf(stderr, "mapfiles: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A file of pages bytes, byte i of page p being (p * 7 + i) & 0xff. */
static int make_file(const char *path, int pages)
{
	unsigned char buf[PAGE];
	int fd, p, i;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	for (p = 0; p < pages; p++) {
		for (i = 0; i < PAGE; i++)
			buf[i] = (unsigned char)(p * 7 + i);
		if (write(fd, buf, PAGE) != PAGE)
			die(path);
	}
	return fd;
}

static void *map(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static void mkdirs(const char *dir)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/sub", dir);
	if (mkdir(path, 0755) && errno != EEXIST)
		die(path);
	snprintf(path, sizeof(path), "%s/sub/dir", dir);
	if (mkdir(path, 0755) && errno != EEXIST)
		die(path);
}

int main(int argc, char **argv)
{
	char path[512];
	const char *dir, *shmdir;
	volatile char *cow, *anon;
	int fd, extra = 0, c, i;
	pid_t child;

	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c != 'n')
			return 2;
		extra = atoi(optarg);
	}
	if (argc - optind != 2 || extra < 0 || extra > 10000) {
		fprintf(stderr, "usage: mapfiles [-n EXTRA] DIR SHMDIR\n");
		return 2;
	}
	dir = argv[optind];
	shmdir = argv[optind + 1];
	mkdirs(dir);

	snprintf(path, sizeof(path), "%s/sub/dir/data.bin", dir);
	fd = make_file(path, 5);
	map(fd, 3 * PAGE, PROT_READ, MAP_PRIVATE, PAGE);
	cow = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
	cow[0] = 1;
	for (i = 0; i < extra; i++)
		map(fd, PAGE, PROT_READ | (i % 2 ? PROT_WRITE : 0),
		    MAP_PRIVATE, (off_t)(i % 5) * PAGE);
	close(fd);

	snprintf(path, sizeof(path), "%s/ivm-shared.bin", shmdir);
	fd = make_file(path, 2);
	map(fd, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	close(fd);

	snprintf(path, sizeof(path), "%s/gone.bin", dir);
	fd = make_file(path, 1);
	map(fd, PAGE, PROT_READ, MAP_PRIVATE, 0);
	close(fd);
	if (unlink(path))
		die(path);

	snprintf(path, sizeof(path), "%s/new\nline", dir);
	fd = make_file(path, 1);
	map(fd, PAGE, PROT_READ, MAP_SHARED, 0);
	close(fd);

	fd = (int)syscall(SYS_memfd_create, "ivm-memfd", 0);
	if (fd < 0)
		die("memfd_create");
	if (ftruncate(fd, PAGE))
		die("ftruncate");
	map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	close(fd);

	anon = map(-1, 2 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, 0);
	anon[0] = 1;
	/* Not every kernel names anonymous memory: that is no failure. */
	prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)anon,
	      2 * PAGE, (unsigned long)"ivm-anon");

	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		for (;;)
			pause();
	}
	printf("mapfiles: ready pid=%d child=%d\n", (int)getpid(),
	       (int)child);
	fflush(stdout);
	for (;;)
		pause();
}
