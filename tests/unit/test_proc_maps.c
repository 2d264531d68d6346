// SPDX-License-Identifier: MIT
/* /proc/PID/maps of this test process itself. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/proc_maps.h"

struct holder {
	uint64_t addr;
	struct ivm_proc_map map;
	int seen, calls;
};

static bool find_holder(const struct ivm_proc_map *m, void *arg)
{
	struct holder *h = arg;

	h->calls++;
	cr_assert_lt(m->lo, m->hi);
	if (h->addr < m->lo || h->addr >= m->hi)
		return true;
	h->map = *m;
	h->seen++;
	return false;
}

Test(proc_maps, names_our_code_and_a_shared_memfd)
{
	struct holder h = { .addr = (uintptr_t)find_holder };
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int fd = memfd_create("ivm unit maps", MFD_CLOEXEC);
	uint8_t *p;

	cr_assert(n > 0);
	exe[n] = '\0';
	cr_assert_null(ivm_proc_maps_each(getpid(), find_holder, &h));
	cr_assert_eq(h.seen, 1, "stops at the first mapping that holds it");
	cr_expect_str_eq(h.map.perms, "r-xp");
	cr_expect_str_eq(h.map.name, exe);
	cr_expect_neq(h.map.inode, 0);

	/* A name with blanks in it, whole; a shared mapping's 's'. */
	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, 8192), 0);
	p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert_neq(p, MAP_FAILED);
	memset(&h, 0, sizeof(h));
	h.addr = (uintptr_t)p + 4096;
	cr_assert_null(ivm_proc_maps_each(getpid(), find_holder, &h));
	cr_assert_eq(h.seen, 1);
	cr_expect_eq(h.map.lo, (uintptr_t)p);
	cr_expect_str_eq(h.map.perms, "rw-s");
	cr_expect_str_eq(h.map.name, "/memfd:ivm unit maps (deleted)");
	munmap(p, 8192);
}

Test(proc_maps, a_process_that_is_gone)
{
	struct holder h = { 0 };
	struct ivm_error *err = ivm_proc_maps_each(INT_MAX, find_holder, &h);

	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_OS);
	cr_expect_eq(err->errnum, ENOENT);
	cr_expect_eq(h.calls, 0);
	ivm_error_destroy(err);
}
