// SPDX-License-Identifier: MIT
/*
 * Switch samples and THREAD records through the profile file, and the
 * threads report made of them: round trip, the last record of a thread
 * winning, sorting by each column, files of older writers (no such
 * records) and hostile records.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/profile_file.h"
#include "report/calltree.h"
#include "report/threads.h"

static char path[] = "/tmp/ivm-unit-switch.XXXXXX";

static void make_path(void)
{
	int fd;

	strcpy(path, "/tmp/ivm-unit-switch.XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0);
	close(fd);
}

static void drop_path(void)
{
	unlink(path);
}

TestSuite(switch_report, .init = make_path, .fini = drop_path);

static void write_thread(struct ivm_profile_writer *w, uint32_t tid,
			 const char *comm, uint64_t vol, uint64_t invol,
			 uint64_t delay, uint64_t cpu, uint32_t samples,
			 uint32_t flags)
{
	struct ivm_counter c[] = {
		{ IVM_COUNTER_NVCSW, vol }, { IVM_COUNTER_NIVCSW, invol },
		{ IVM_COUNTER_RUN_DELAY_NS, delay }, { IVM_COUNTER_CPU_NS, cpu },
	};
	struct ivm_thread_record r = {
		.pid = 50, .tid = tid, .start_time = tid * 1000ull,
		.first_ns = 10, .last_ns = 20, .flags = flags,
		.samples = samples, .nr_counters = 4, .counters = c,
	};

	strncpy(r.comm, comm, sizeof(r.comm) - 1);
	cr_assert_null(ivm_profile_write_thread(w, &r));
}

static void write_file(void)
{
	static const uint64_t kpcs[] = { 0xffffffff81a00010ull };
	struct ivm_counter sc[] = { { IVM_COUNTER_NVCSW, 9 },
				    { IVM_COUNTER_NIVCSW, 1 } };
	struct ivm_sample s = {
		.time_ns = 15, .vcpu = UINT32_MAX, .kind = IVM_SAMPLE_SWITCH,
		.pid = 50, .tid = 51, .nr_kernel = 1, .kernel_pcs = kpcs,
		.nr_counters = 2, .counters = sc,
	};
	struct ivm_profile_writer *w;

	strcpy(s.comm, "worker-a");
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "switch_every", "10"));
	write_thread(w, 51, "worker-a", 5, 1, 1000000, 2000000, 0, 0);
	cr_assert_null(ivm_profile_write_sample(w, &s));
	write_thread(w, 52, "worker-b", 300, 2, 9000000, 1000000, 3, 0);
	write_thread(w, 53, "sleepy", 1, 90, 500000, 9000000, 1,
		     IVM_THREAD_BORN | IVM_THREAD_GONE);
	/* The last record of 51: the one the report shows. */
	write_thread(w, 51, "worker-a", 100, 10, 4000000, 5000000, 7,
		     IVM_THREAD_FINAL);
	cr_assert_null(ivm_profile_writer_finish(w, 30, NULL, 0));
}

/* The threads report of the file at path, sorted by sort. */
static char *threads_report(enum ivm_threads_sort sort, size_t *nr)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_threads *t;
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	cr_assert_null(ivm_profile_reader_open(path, &r));
	cr_assert_null(ivm_threads_create(&t));
	while (ivm_profile_reader_next(r, &rec))
		if (rec.type == IVM_RECORD_THREAD)
			cr_assert_null(ivm_threads_add(t, &rec.thread));
	*nr = ivm_threads_nr(t);
	out = open_memstream(&text, &len);
	cr_assert(out);
	ivm_threads_print(t, sort, 0, out);
	fclose(out);
	ivm_threads_destroy(t);
	ivm_profile_reader_destroy(r);
	return text;
}

/* The tids of a report's lines, in order, as "51 52 53". */
static void tids(const char *text, char *buf, size_t size)
{
	const char *line = strchr(text, '\n');
	size_t n = 0;

	buf[0] = '\0';
	while (line && line[1]) {
		unsigned int tid;

		if (sscanf(line + 1, "%u", &tid) == 1)
			n += (size_t)snprintf(buf + n, size - n, "%s%u",
					      n ? " " : "", tid);
		line = strchr(line + 1, '\n');
	}
}

Test(switch_report, records_round_trip)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	int threads = 0, samples = 0;

	write_file();
	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec)) {
		if (rec.type == IVM_RECORD_SAMPLE ||
		    rec.type == IVM_RECORD_SAMPLE2) {
			cr_expect_eq(rec.sample.kind, IVM_SAMPLE_SWITCH);
			cr_expect_eq(rec.sample.nr_counters, 2);
			cr_expect_eq(rec.sample.counters[0].id,
				     IVM_COUNTER_NVCSW);
			cr_expect_eq(rec.sample.counters[0].value, 9);
			samples++;
		}
		if (rec.type != IVM_RECORD_THREAD)
			continue;
		if (threads++ == 2) {
			cr_expect_eq(rec.thread.tid, 53);
			cr_expect_eq(rec.thread.pid, 50);
			cr_expect_str_eq(rec.thread.comm, "sleepy");
			cr_expect_eq(rec.thread.start_time, 53000);
			cr_expect_eq(rec.thread.first_ns, 10);
			cr_expect_eq(rec.thread.last_ns, 20);
			cr_expect_eq(rec.thread.flags,
				     IVM_THREAD_BORN | IVM_THREAD_GONE);
			cr_expect_eq(rec.thread.samples, 1);
			cr_expect_eq(rec.thread.nr_counters, 4);
			cr_expect_eq(rec.thread.counters[1].id,
				     IVM_COUNTER_NIVCSW);
			cr_expect_eq(rec.thread.counters[1].value, 90);
		}
	}
	cr_expect_eq(threads, 4);
	cr_expect_eq(samples, 1);
	cr_expect_eq(ivm_profile_reader_damage(r)->records_bad, 0);
	cr_expect_eq(ivm_profile_reader_damage(r)->records_unknown, 0);
	cr_expect(ivm_profile_reader_damage(r)->ended);
	ivm_profile_reader_destroy(r);
	cr_expect_str_eq(ivm_sample_kind_name(IVM_SAMPLE_SWITCH), "switch");
	cr_expect_str_eq(ivm_counter_name(IVM_COUNTER_RUN_DELAY_NS),
			 "run_delay_ns");
	cr_expect_null(ivm_counter_name(77));
}

Test(switch_report, last_record_wins_and_every_sort)
{
	static const struct {
		const char *column;
		const char *order;
	} sorts[] = {
		{ "switches", "52 51 53" }, { "tid", "51 52 53" },
		{ "pid", "51 52 53" }, { "comm", "53 51 52" },
		{ "voluntary", "52 51 53" }, { "involuntary", "53 51 52" },
		{ "run_delay", "52 51 53" }, { "cpu", "53 51 52" },
		{ "samples", "51 52 53" },
	};
	enum ivm_threads_sort sort;
	char order[64], *text;
	size_t i, nr;

	write_file();
	for (i = 0; i < sizeof(sorts) / sizeof(sorts[0]); i++) {
		cr_assert(ivm_threads_sort_parse(sorts[i].column, &sort));
		text = threads_report(sort, &nr);
		cr_expect_eq(nr, 3);
		tids(text, order, sizeof(order));
		cr_expect_str_eq(order, sorts[i].order, "--sort %s:\n%s",
				 sorts[i].column, text);
		free(text);
	}
	cr_expect(!ivm_threads_sort_parse("nosuch", &sort));

	text = threads_report(IVM_THREADS_BY_TID, &nr);
	/* 51's totals are its last record's, in ms. */
	cr_expect(strstr(text, "worker-a") &&
		  strstr(text, "        100          10          4.000          5.000        7  -"),
		  "%s", text);
	cr_expect(strstr(text, "born,gone"), "%s", text);
	cr_expect(strstr(text, "all        -"), "%s", text);
	free(text);
}

Test(switch_report, older_files_have_no_thread_records)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_calltree *tree;

	/* A profile written before THREAD records and switch samples. */
	cr_assert_null(ivm_profile_reader_open(
		"tests/fuzz/corpus/fuzz_profile_reader/complete.prof", &r));
	cr_assert_null(ivm_calltree_create(IVM_CALLTREE_BY_PROCESS, &tree));
	while (ivm_profile_reader_next(r, &rec)) {
		cr_expect_neq(rec.type, IVM_RECORD_THREAD);
		if (rec.type == IVM_RECORD_SAMPLE ||
		    rec.type == IVM_RECORD_SAMPLE2)
			cr_expect_null(ivm_calltree_add(tree, &rec.sample));
	}
	cr_expect_eq(ivm_profile_reader_damage(r)->records_bad, 0);
	cr_expect(ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE) > 0);
	cr_expect_eq(ivm_calltree_total(tree, IVM_SAMPLE_SWITCH), 0);
	ivm_calltree_destroy(tree);
	ivm_profile_reader_destroy(r);
}

Test(switch_report, hostile_thread_records)
{
	struct ivm_counter c[IVM_SAMPLE_MAX_COUNTERS + 1];
	struct ivm_thread_record t = { .tid = 1, .first_ns = 5, .last_ns = 9,
				       .counters = c };
	struct ivm_profile_writer *w;
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_threads *th;
	struct ivm_error *err;
	size_t i, good = 0;

	for (i = 0; i <= IVM_SAMPLE_MAX_COUNTERS; i++)
		c[i] = (struct ivm_counter){ 1000 + (uint32_t)i, i };
	cr_assert_null(ivm_profile_writer_create(path, &w));
	t.nr_counters = IVM_SAMPLE_MAX_COUNTERS + 1;
	err = ivm_profile_write_thread(w, &t);
	cr_expect_not_null(err, "a record over the counter cap is refused");
	ivm_error_destroy(err);
	/* Unknown counter ids: kept in the file, skipped by the report. */
	t.nr_counters = 3;
	cr_assert_null(ivm_profile_write_thread(w, &t));
	/* Time going back: the reader drops it. */
	t.first_ns = 10;
	t.last_ns = 9;
	cr_assert_null(ivm_profile_write_thread(w, &t));
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));

	cr_assert_null(ivm_profile_reader_open(path, &r));
	cr_assert_null(ivm_threads_create(&th));
	while (ivm_profile_reader_next(r, &rec)) {
		if (rec.type != IVM_RECORD_THREAD)
			continue;
		good++;
		cr_assert_null(ivm_threads_add(th, &rec.thread));
	}
	cr_expect_eq(good, 1);
	cr_expect_eq(ivm_profile_reader_damage(r)->records_bad, 1);
	cr_expect_eq(ivm_threads_nr(th), 1);
	ivm_threads_destroy(th);
	ivm_profile_reader_destroy(r);
}
