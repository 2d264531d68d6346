// SPDX-License-Identifier: MIT
/* A file that takes its name only once complete (base/outfile.h). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"

static char dir[] = "/tmp/ivm-test-outfile-XXXXXX";

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

static size_t entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	cr_assert(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

TestSuite(outfile, .init = setup, .fini = teardown);

Test(outfile, named_only_once_published)
{
	struct ivm_outfile f;
	char path[128], buf[16] = "";
	struct stat st;
	FILE *in;

	snprintf(path, sizeof(path), "%s/a.pb.gz", dir);
	cr_assert_null(ivm_outfile_open(path, O_TRUNC, &f));
	cr_assert_eq(write(f.fd, "whole", 5), 5);
	cr_assert_neq(access(path, F_OK), 0, "named before it is whole");
	cr_assert_eq(entries(), 1);
	cr_assert_null(ivm_outfile_publish(&f));
	ivm_outfile_close(&f);
	in = fopen(path, "r");
	cr_assert(in);
	cr_assert_eq(fread(buf, 1, sizeof(buf) - 1, in), 5);
	fclose(in);
	cr_assert_str_eq(buf, "whole");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0004, 0004, "readable by others");
	cr_assert_eq(entries(), 1);
}

Test(outfile, unpublished_leaves_the_old_file_and_no_debris)
{
	struct ivm_outfile f;
	char path[128];
	FILE *old;

	snprintf(path, sizeof(path), "%s/b.prof", dir);
	old = fopen(path, "w");
	cr_assert(old);
	fputs("old", old);
	fclose(old);
	cr_assert_null(ivm_outfile_open(path, 0, &f));
	cr_assert_eq(write(f.fd, "half", 4), 4);
	ivm_outfile_close(&f);
	cr_assert_eq(entries(), 1);
	old = fopen(path, "r");
	cr_assert(old);
	cr_assert_eq(fgetc(old), 'o');
	fclose(old);
}

Test(outfile, not_a_regular_file_is_written_directly)
{
	struct ivm_outfile f;
	struct ivm_error *err;

	cr_assert_null(ivm_outfile_open("/dev/null", O_TRUNC, &f));
	cr_assert_null(f.tmp_path);
	cr_assert_eq(write(f.fd, "x", 1), 1);
	cr_assert_null(ivm_outfile_publish(&f));
	ivm_outfile_close(&f);
	err = ivm_outfile_open("/nonexistent-dir/x", 0, &f);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}
