// SPDX-License-Identifier: MIT
/*
 * The call tree's top level (--group-by thread, process, comm, title,
 * label:KEY) and its dimension labels (--label values), through every
 * writer: text, folded, SVG and pprof (decoded by protoc, labels resolved
 * through its string table).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/calltree.h"
#include "report/report.h"
#include "report/report_pprof.h"
#include "report/report_svg.h"
#include "pprof_decode.h"
#include "tmp_files.h"

static const uint64_t kpcs[] = { 0xffffffff81000010ull };
static const uint64_t upcs[] = { 0x1000 };

/*
 * Two php-fpm workers and their master (one name, two titles), a thread
 * of another program, and samples with and without a "class" label.
 */
static struct ivm_calltree *make_tree(enum ivm_group_by by, const char *label,
				      bool dims)
{
	static const char *const dim_keys[] = { "class" };
	static const struct ivm_label browse[] = { { "class", "browse" } };
	static const struct ivm_label cart[] = { { "class", "cart" },
						 { "other", "x" } };
	struct {
		uint32_t pid, tid;
		const char *comm, *pcomm, *title;
		const struct ivm_label *labels;
		uint16_t nr_labels;
		int n;
	} rows[] = {
		{ 101, 101, "php-fpm8.2", "php-fpm8.2", "php-fpm: pool www",
		  browse, 1, 3 },
		{ 102, 102, "php-fpm8.2", "php-fpm8.2", "php-fpm: pool www",
		  cart, 2, 2 },
		{ 100, 100, "php-fpm8.2", "php-fpm8.2",
		  "php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)",
		  NULL, 0, 1 },
		{ 200, 203, "ls-worker-0", "lockstorm", NULL, browse, 1, 4 },
	};
	struct ivm_calltree *tree;
	size_t i;
	int j;

	cr_assert_null(ivm_calltree_create(IVM_CALLTREE_BY_PROCESS |
					   IVM_CALLTREE_BY_THREAD, &tree));
	if (by != IVM_GROUP_BY_THREAD)
		cr_assert_null(ivm_calltree_group_by(tree, by, label));
	if (dims)
		cr_assert_null(ivm_calltree_set_dimensions(tree, dim_keys, 1));
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ivm_sample s = {
			.kind = IVM_SAMPLE_TO_IDLE, .pid = rows[i].pid,
			.tid = rows[i].tid, .nr_kernel = 1, .nr_user = 1,
			.kernel_pcs = kpcs, .user_pcs = upcs,
			.labels = rows[i].labels,
			.nr_labels = rows[i].nr_labels,
		};
		struct ivm_calltree_context ctx = {
			.process_comm = rows[i].pcomm, .title = rows[i].title,
		};

		snprintf(s.comm, sizeof(s.comm), "%s", rows[i].comm);
		for (j = 0; j < rows[i].n; j++)
			cr_assert_null(ivm_calltree_add_ctx(tree, &s, &ctx));
	}
	return tree;
}

static char *write_report(struct ivm_calltree *tree, int format)
{
	struct ivm_report_options opts = { .kind = IVM_SAMPLE_TO_IDLE,
					   .top = 10 };
	char *buf = NULL;
	size_t len = 0;

	opts.out = open_memstream(&buf, &len);
	cr_assert(opts.out);
	if (format == IVM_REPORT_TEXT)
		ivm_report_text(tree, &opts);
	else if (format == IVM_REPORT_FOLDED)
		ivm_report_folded(tree, &opts);
	else
		cr_assert_null(ivm_report_svg(tree, &opts));
	fclose(opts.out);
	return buf;
}

Test(grouping, parse)
{
	enum ivm_group_by by;
	const char *label;
	struct ivm_error *err;

	cr_assert_null(ivm_group_by_parse("comm", &by, &label));
	cr_assert_eq(by, IVM_GROUP_BY_COMM);
	cr_assert_null(label);
	cr_assert_null(ivm_group_by_parse("label:class", &by, &label));
	cr_assert_eq(by, IVM_GROUP_BY_LABEL);
	cr_assert_str_eq(label, "class");
	err = ivm_group_by_parse("label:", &by, &label);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_group_by_parse("tenant", &by, &label);
	cr_assert_not_null(err);
	cr_assert(strstr(ivm_error_string(err), "label:KEY"));
	ivm_error_destroy(err);
}

Test(grouping, comm_merges_processes_of_one_name)
{
	struct ivm_calltree *tree = make_tree(IVM_GROUP_BY_COMM, NULL, false);
	char *out = write_report(tree, IVM_REPORT_FOLDED);

	cr_assert(strstr(out, "php-fpm8.2;0x1000;0xffffffff81000010_[k] 6\n"),
		  "the three php-fpm processes are one tree:\n%s", out);
	/* A thread's process name, not its own. */
	cr_assert(strstr(out, "lockstorm;0x1000;0xffffffff81000010_[k] 4\n"),
		  "%s", out);
	cr_assert(!strstr(out, "ls-worker"), "%s", out);
	free(out);
	out = write_report(tree, IVM_REPORT_TEXT);
	cr_assert(strstr(out, "== to-idle samples by comm ==\n\n"
			      " 60.00%         6  php-fpm8.2\n"
			      " 40.00%         4  lockstorm\n"), "%s", out);
	cr_assert(strstr(out, "          php-fpm8.2  (comm)\n"), "%s", out);
	free(out);
	ivm_calltree_destroy(tree);
}

Test(grouping, title_tells_workers_from_master)
{
	struct ivm_calltree *tree = make_tree(IVM_GROUP_BY_TITLE, NULL, false);
	char *out = write_report(tree, IVM_REPORT_FOLDED);

	cr_assert(strstr(out, "php-fpm:_pool_www;0x1000;"
			      "0xffffffff81000010_[k] 5\n"), "%s", out);
	cr_assert(strstr(out, "php-fpm:_master_process_(/etc/php/8.2/fpm/"
			      "php-fpm.conf);0x1000;0xffffffff81000010_[k] 1\n"),
		  "%s", out);
	/* No title: the process's name in brackets, as ps shows it. */
	cr_assert(strstr(out, "[lockstorm];0x1000;0xffffffff81000010_[k] 4\n"),
		  "%s", out);
	free(out);
	ivm_calltree_destroy(tree);
}

Test(grouping, label_value_or_dash)
{
	struct ivm_calltree *tree = make_tree(IVM_GROUP_BY_LABEL, "class",
					      false);
	char *out = write_report(tree, IVM_REPORT_TEXT);

	cr_assert(strstr(out, "== to-idle samples by class ==\n\n"
			      " 70.00%         7  browse\n"
			      " 20.00%         2  cart\n"
			      " 10.00%         1  -\n"), "%s", out);
	free(out);
	ivm_calltree_destroy(tree);
}

Test(grouping, thread_grouping_with_dimension_labels)
{
	struct ivm_calltree *tree = make_tree(IVM_GROUP_BY_THREAD, NULL, true);
	char *out = write_report(tree, IVM_REPORT_FOLDED);

	/* The process is named by its name, not its thread's. */
	cr_assert(strstr(out, "lockstorm_[200];ls-worker-0/203;class=browse;"
			      "0x1000;0xffffffff81000010_[k] 4\n"), "%s", out);
	cr_assert(strstr(out, "php-fpm8.2_[102];php-fpm8.2/102;class=cart;"
			      "0x1000;0xffffffff81000010_[k] 2\n"), "%s", out);
	cr_assert(strstr(out, "php-fpm8.2_[100];php-fpm8.2/100;class=-;"),
		  "a dimension a sample lacks is '-':\n%s", out);
	cr_assert(!strstr(out, "other="), "only dimensions: %s", out);
	free(out);
	out = write_report(tree, IVM_REPORT_TEXT);
	cr_assert(strstr(out, "          class=browse  (label)\n"
			      "          ls-worker-0/203  (thread)\n"), "%s", out);
	cr_assert(!strstr(out, "samples by"), "no group table: %s", out);
	free(out);
	out = write_report(tree, IVM_REPORT_SVG);
	cr_assert(strstr(out, "class=browse"), "svg has the label frame");
	free(out);
	ivm_calltree_destroy(tree);
}

Test(grouping, group_by_only_before_samples)
{
	struct ivm_calltree *tree = make_tree(IVM_GROUP_BY_THREAD, NULL, false);
	struct ivm_error *err = ivm_calltree_group_by(tree, IVM_GROUP_BY_COMM,
						      NULL);

	cr_assert_not_null(err);
	ivm_error_destroy(err);
	ivm_calltree_destroy(tree);
}

/* ---- pprof: the labels a viewer filters by ------------------------------- */

/*
 * The test's fini removes it too: a failed assertion ends the test before
 * pprof_of's unlink.
 */
static char pprof_path[] = "/tmp/ivm-test-group-pprof-XXXXXX";

static void unlink_pprof(void)
{
	if (IVM_TMP_MADE(pprof_path))
		unlink(pprof_path);
}

static char *pprof_of(struct ivm_calltree *tree)
{
	char *path = pprof_path;
	struct ivm_report_options opts = { .kind = -1 };
	char *out;
	int fd;

	strcpy(path, "/tmp/ivm-test-group-pprof-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	opts.out = fdopen(fd, "w");
	cr_assert_null(ivm_report_pprof(tree, &opts));
	fclose(opts.out);
	out = pprof_samples(path);
	unlink(path);
	return out;
}

Test(grouping, pprof_samples_carry_group_title_and_labels,
     .fini = unlink_pprof)
{
	struct ivm_calltree *tree;
	char *out;

	if (access("/usr/bin/protoc", X_OK))
		cr_skip_test("protoc (protobuf-compiler) not installed");
	tree = make_tree(IVM_GROUP_BY_COMM, NULL, true);
	out = pprof_of(tree);
	cr_assert(strstr(out, "3 kind=to_idle class=browse comm=php-fpm8.2\n"),
		  "%s", out);
	cr_assert(strstr(out, "1 kind=to_idle class=- comm=php-fpm8.2\n"),
		  "%s", out);
	cr_assert(strstr(out, "4 kind=to_idle class=browse comm=lockstorm\n"),
		  "%s", out);
	free(out);
	ivm_calltree_destroy(tree);

	tree = make_tree(IVM_GROUP_BY_THREAD, NULL, true);
	out = pprof_of(tree);
	cr_assert(strstr(out, "2 kind=to_idle class=cart title=php-fpm: pool www "
			      "thread=php-fpm8.2/102 process=php-fpm8.2 [102]\n"),
		  "%s", out);
	free(out);
	ivm_calltree_destroy(tree);

	/* Grouped by a dimension: the label once. */
	tree = make_tree(IVM_GROUP_BY_LABEL, "class", true);
	out = pprof_of(tree);
	cr_assert(strstr(out, "7 kind=to_idle class=browse\n"), "%s", out);
	free(out);
	ivm_calltree_destroy(tree);
}
