// SPDX-License-Identifier: MIT
/* Window files of a continuous run: names, and the oldest removed first. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/window_dir.h"

static char dir[] = "/tmp/ivm-test-windows-XXXXXX";

static void setup(void)
{
	cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(window_dir, .init = setup, .fini = teardown);

static void put(const char *name, size_t bytes)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f);
	while (bytes--)
		fputc('x', f);
	fclose(f);
}

static bool has(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !access(path, F_OK);
}

/* 2026-11-25T16:00:00Z */
#define T0 ((time_t)1795622400)

Test(window_dir, names_sort_in_time_and_never_collide)
{
	struct ivm_window_dir_config cfg = { .dir = dir, .name = "web 01/x" };
	struct ivm_window_dir *d;
	const char *path;
	char want[256], *pb;

	cr_assert_null(ivm_window_dir_create(&cfg, &d));
	cr_assert_null(ivm_window_dir_next(d, T0, &path));
	snprintf(want, sizeof(want), "%s/web_01_x-20261125T160000Z.prof", dir);
	cr_assert_str_eq(path, want);
	pb = ivm_window_dir_pprof_path(path);
	snprintf(want, sizeof(want), "%s/web_01_x-20261125T160000Z.pb.gz", dir);
	cr_assert_str_eq(pb, want);
	free(pb);
	/* Taken (a restart within the second): -1, then -2. */
	put("web_01_x-20261125T160000Z.prof", 1);
	cr_assert_null(ivm_window_dir_next(d, T0, &path));
	cr_assert(strstr(path, "/web_01_x-20261125T160000Z-1.prof"), "%s", path);
	put("web_01_x-20261125T160000Z-1.pb.gz", 1);
	cr_assert_null(ivm_window_dir_next(d, T0, &path));
	cr_assert(strstr(path, "/web_01_x-20261125T160000Z-2.prof"), "%s", path);
	cr_assert_null(ivm_window_dir_next(d, T0 + 60, &path));
	cr_assert(strstr(path, "/web_01_x-20261125T160100Z.prof"), "%s", path);
	ivm_window_dir_destroy(d);
}

Test(window_dir, oldest_windows_go_first_others_stay)
{
	struct ivm_window_dir_config cfg = { .dir = dir, .name = "web01",
					     .keep_windows = 2 };
	struct ivm_window_dir *d;

	put("web01-20261125T160000Z.prof", 10);
	put("web01-20261125T160000Z.pb.gz", 10);
	put("web01-20261125T160100Z.prof", 10);	/* its pprof failed */
	put("web01-20261125T160200Z.prof", 10);
	put("web01-20261125T160200Z.pb.gz", 10);
	put("web01-20261125T160200Z-1.prof", 10);
	/* Not windows of web01: never touched. */
	put("web02-20261125T150000Z.prof", 10);
	put("web01-20261125T150000Z.prof.Ab12Cd", 10);
	put("web01-notes.txt", 10);
	put("web01-20261125T1500Z.prof", 10);
	cr_assert_null(ivm_window_dir_create(&cfg, &d));
	cr_assert_eq(ivm_window_dir_prune(d), 2);
	cr_assert(!has("web01-20261125T160000Z.prof"));
	cr_assert(!has("web01-20261125T160000Z.pb.gz"));
	cr_assert(!has("web01-20261125T160100Z.prof"));
	cr_assert(has("web01-20261125T160200Z.prof"));
	cr_assert(has("web01-20261125T160200Z.pb.gz"));
	cr_assert(has("web01-20261125T160200Z-1.prof"));
	cr_assert(has("web02-20261125T150000Z.prof"));
	cr_assert(has("web01-20261125T150000Z.prof.Ab12Cd"));
	cr_assert(has("web01-notes.txt"));
	cr_assert(has("web01-20261125T1500Z.prof"));
	cr_assert_eq(ivm_window_dir_prune(d), 0);
	ivm_window_dir_destroy(d);
}

Test(window_dir, bytes_cap_keeps_the_newest_whatever_its_size)
{
	struct ivm_window_dir_config cfg = { .dir = dir, .name = "g",
					     .keep_bytes = 100 };
	struct ivm_window_dir *d;

	put("g-20261125T160000Z.prof", 40);
	put("g-20261125T160100Z.prof", 40);
	put("g-20261125T160100Z.pb.gz", 10);
	put("g-20261125T160200Z.prof", 30);
	cr_assert_null(ivm_window_dir_create(&cfg, &d));
	cr_assert_eq(ivm_window_dir_prune(d), 1);	/* 120 -> 80 bytes */
	cr_assert(!has("g-20261125T160000Z.prof"));
	cr_assert(has("g-20261125T160100Z.pb.gz"));
	put("g-20261125T160300Z.prof", 500);
	cr_assert_eq(ivm_window_dir_prune(d), 2);
	cr_assert(has("g-20261125T160300Z.prof"));
	ivm_window_dir_destroy(d);
}

Test(window_dir, not_a_directory)
{
	struct ivm_window_dir_config cfg = { .name = "g" };
	struct ivm_window_dir *d;
	struct ivm_error *err;
	char path[256];

	snprintf(path, sizeof(path), "%s/file", dir);
	put("file", 1);
	cfg.dir = path;
	err = ivm_window_dir_create(&cfg, &d);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	snprintf(path, sizeof(path), "%s/new", dir);
	cr_assert_null(ivm_window_dir_create(&cfg, &d));
	ivm_window_dir_destroy(d);
}
