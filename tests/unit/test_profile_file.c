// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/calltree.h"
#include "profile/profile_file.h"

static char path[] = "/tmp/ivm-unit-profile.XXXXXX";

static void make_path(void)
{
	int fd;

	strcpy(path, "/tmp/ivm-unit-profile.XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0);
	close(fd);
}

static void drop_path(void)
{
	unlink(path);
}

static const uint64_t kpcs[] = { 0xffffffff81a00010, 0xffffffff81a00200,
				 0xffffffff81000300 };
static const uint64_t upcs[] = { 0x401000, 0x401100 };
static const struct ivm_label labels[] = { { "category", "checkout" } };
static const struct ivm_counter counters[] = { { 7, 123456789 } };

static struct ivm_sample sample(enum ivm_sample_kind kind, uint32_t tid)
{
	struct ivm_sample s = {
		.time_ns = 1000 + tid, .vcpu = 1, .kind = kind,
		.stack_flags = IVM_STACK_INEXACT, .pid = 100, .tid = tid,
		.nr_kernel = 3, .nr_user = 2, .nr_labels = 1,
		.nr_counters = 1, .kernel_pcs = kpcs, .user_pcs = upcs,
		.labels = labels, .counters = counters,
	};

	strcpy(s.comm, "ls-worker-1");
	return s;
}

static void write_profile(int nr_samples, bool finish)
{
	struct ivm_profile_writer *w;
	struct ivm_stat stats[] = { { "discarded", 3 }, { "lost", 1 } };
	int i;

	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "domain", "web01"));
	for (i = 0; i < nr_samples; i++) {
		struct ivm_sample s = sample(i % 3, 100 + i % 4);

		cr_assert_null(ivm_profile_write_sample(w, &s));
		if (i % 10 == 9)
			cr_assert_null(ivm_profile_writer_flush(w));
	}
	cr_assert_null(ivm_profile_write_stats(w, stats, 2));
	if (finish)
		cr_assert_null(ivm_profile_writer_finish(w, 99, stats, 2));
	else
		ivm_profile_writer_destroy(w);
}

static char *slurp(size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Count records of each type from memory. */
static void count(const void *buf, size_t len, int *samples, int *meta,
		  struct ivm_profile_damage *damage)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;

	*samples = *meta = 0;
	cr_assert_null(ivm_profile_reader_from_memory(buf, len, &r));
	while (ivm_profile_reader_next(r, &rec)) {
		if (rec.type == IVM_RECORD_SAMPLE)
			(*samples)++;
		if (rec.type == IVM_RECORD_META)
			(*meta)++;
	}
	*damage = *ivm_profile_reader_damage(r);
	ivm_profile_reader_destroy(r);
}

TestSuite(profile_file, .init = make_path, .fini = drop_path);

Test(profile_file, round_trip)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	int samples = 0, ends = 0;

	write_profile(25, true);
	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec)) {
		if (rec.type == IVM_RECORD_META) {
			cr_assert_eq(rec.meta.nr, 1);
			cr_assert_str_eq(rec.meta.items[0].key, "domain");
			cr_assert_str_eq(rec.meta.items[0].value, "web01");
		} else if (rec.type == IVM_RECORD_SAMPLE) {
			const struct ivm_sample *s = &rec.sample;

			cr_assert_eq(s->kind, samples % 3);
			cr_assert_eq(s->tid, 100u + samples % 4);
			cr_assert_eq(s->pid, 100);
			cr_assert_str_eq(s->comm, "ls-worker-1");
			cr_assert_eq(s->nr_kernel, 3);
			cr_assert_eq(s->kernel_pcs[2], kpcs[2]);
			cr_assert_eq(s->user_pcs[1], upcs[1]);
			cr_assert_str_eq(s->labels[0].value, "checkout");
			cr_assert_eq(s->counters[0].value, 123456789);
			cr_assert_eq(s->stack_flags, IVM_STACK_INEXACT);
			samples++;
		} else if (rec.type == IVM_RECORD_END) {
			cr_assert_eq(rec.stats.time_ns, 99);
			cr_assert_eq(rec.stats.nr, 2);
			cr_assert_str_eq(rec.stats.items[1].name, "lost");
			ends++;
		}
	}
	cr_assert_eq(samples, 25);
	cr_assert_eq(ends, 1);
	cr_assert(ivm_profile_reader_damage(r)->ended);
	cr_assert_eq(ivm_profile_reader_damage(r)->records_bad, 0);
	ivm_profile_reader_destroy(r);
}

Test(profile_file, killed_run_keeps_flushed_records)
{
	struct ivm_profile_damage d;
	int samples, meta;
	size_t len;
	char *buf;

	/* destroy without finish: no END record, but nothing lost. */
	write_profile(25, false);
	buf = slurp(&len);
	count(buf, len, &samples, &meta, &d);
	cr_assert_eq(samples, 25);
	cr_assert_not(d.ended);
	/* Tear the last record in half: every earlier one survives. */
	count(buf, len - 7, &samples, &meta, &d);
	cr_assert_eq(samples, 25);
	cr_assert_gt(d.tail_bytes, 0);
	free(buf);
}

Test(profile_file, every_truncation_is_safe)
{
	struct ivm_profile_damage d;
	int samples, meta, prev = 0;
	size_t len, cut;
	char *buf;

	write_profile(12, true);
	buf = slurp(&len);
	for (cut = IVM_PROFILE_HEADER_SIZE; cut <= len; cut++) {
		char *copy = malloc(cut);

		memcpy(copy, buf, cut);	/* exact size, so ASan sees overreads */
		count(copy, cut, &samples, &meta, &d);
		cr_assert_geq(samples, prev, "samples lost at cut %zu", cut);
		prev = samples;
		free(copy);
	}
	cr_assert_eq(prev, 12);
	free(buf);
}

Test(profile_file, corruption_costs_one_record)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_profile_damage d;
	uint64_t tenth = 0;
	int samples, meta;
	size_t len;
	char *buf;

	write_profile(20, true);
	buf = slurp(&len);
	cr_assert_null(ivm_profile_reader_from_memory(buf, len, &r));
	samples = 0;
	while (ivm_profile_reader_next(r, &rec))
		if (rec.type == IVM_RECORD_SAMPLE && ++samples == 10)
			tenth = rec.offset;
	ivm_profile_reader_destroy(r);
	/* Flip one byte of the 10th sample's payload (its tid). */
	buf[tenth + IVM_RECORD_HEADER_SIZE + 20] ^= 0x5a;
	count(buf, len, &samples, &meta, &d);
	cr_assert_eq(samples, 19);
	cr_assert_eq(d.records_bad, 1);
	cr_assert(d.ended);
	free(buf);
}

Test(profile_file, garbage_between_records_is_skipped)
{
	struct ivm_profile_damage d;
	int samples, meta;
	size_t len, off;
	char *buf, *mixed;

	write_profile(5, true);
	buf = slurp(&len);
	mixed = malloc(len + 100);
	/* Insert 100 bytes of junk (including a fake magic) after meta. */
	off = IVM_PROFILE_HEADER_SIZE + IVM_RECORD_HEADER_SIZE + 2 + 6 + 2 + 5;
	memcpy(mixed, buf, off);
	memset(mixed + off, 0xee, 100);
	memcpy(mixed + off + 10, "IVMR", 4);
	memcpy(mixed + off + 100, buf + off, len - off);
	count(mixed, len + 100, &samples, &meta, &d);
	cr_assert_eq(meta, 1);
	cr_assert_eq(samples, 5);
	cr_assert_eq(d.bytes_skipped, 100);
	free(mixed);
	free(buf);
}

Test(profile_file, not_a_profile)
{
	struct ivm_profile_reader *r;
	struct ivm_error *err;
	static const char junk[] = "PK\003\004 this is a zip file";

	err = ivm_profile_reader_from_memory(junk, sizeof(junk), &r);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_profile_reader_open("/nonexistent/ivm.prof", &r);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_OS);
	ivm_error_destroy(err);
}

Test(profile_file, writer_refuses_oversized_sample)
{
	struct ivm_profile_writer *w;
	struct ivm_sample s = sample(IVM_SAMPLE_TO_IDLE, 1);
	struct ivm_error *err;

	s.nr_kernel = IVM_SAMPLE_MAX_FRAMES + 1;
	cr_assert_null(ivm_profile_writer_create(path, &w));
	err = ivm_profile_write_sample(w, &s);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_profile_writer_destroy(w);
}

Test(calltree, aggregates_by_process_thread_and_stack)
{
	struct ivm_calltree *tree;
	struct ivm_sample a = sample(IVM_SAMPLE_TO_IDLE, 101);
	struct ivm_sample b = sample(IVM_SAMPLE_FROM_IDLE, 101);
	struct ivm_sample c = sample(IVM_SAMPLE_TO_IDLE, 102);
	const struct ivm_calltree_node *leaf = NULL;
	uint32_t i, leaves = 0;

	cr_assert_null(ivm_calltree_create(IVM_CALLTREE_BY_PROCESS |
					   IVM_CALLTREE_BY_THREAD, &tree));
	cr_assert_null(ivm_calltree_add(tree, &a));
	cr_assert_null(ivm_calltree_add(tree, &a));
	cr_assert_null(ivm_calltree_add(tree, &b));
	cr_assert_null(ivm_calltree_add(tree, &c));
	cr_assert_eq(ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE), 3);
	cr_assert_eq(ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE), 1);
	/* root + process + 2 threads + 2 x (2 user + 3 kernel) frames */
	cr_assert_eq(ivm_calltree_nr_nodes(tree), 1 + 1 + 2 + 2 * 5);
	for (i = 0; i < ivm_calltree_nr_nodes(tree); i++) {
		const struct ivm_calltree_node *n = ivm_calltree_node(tree, i);

		if (n->self[IVM_SAMPLE_TO_IDLE] == 2) {
			leaf = n;
			leaves++;
		}
	}
	cr_assert_eq(leaves, 1);
	/* The leaf is the innermost kernel frame, 7 levels down. */
	cr_assert_eq(leaf->type, IVM_NODE_KERNEL);
	cr_assert_eq(leaf->key, kpcs[0]);
	cr_assert_eq(leaf->depth, 7);
	cr_assert_eq(leaf->self[IVM_SAMPLE_FROM_IDLE], 1);
	ivm_calltree_destroy(tree);
}

Test(calltree, many_distinct_children)
{
	struct ivm_calltree *tree;
	struct ivm_sample s = sample(IVM_SAMPLE_ON_CPU, 5);
	uint64_t pcs[2];
	uint32_t i;

	cr_assert_null(ivm_calltree_create(0, &tree));
	s.kernel_pcs = pcs;
	s.nr_kernel = 2;
	s.nr_user = 0;
	for (i = 0; i < 50000; i++) {
		pcs[0] = 0xffffffff81000000ull + i;	/* leaf varies */
		pcs[1] = 0xffffffff82000000ull;		/* one parent */
		cr_assert_null(ivm_calltree_add(tree, &s));
	}
	cr_assert_eq(ivm_calltree_nr_nodes(tree), 1 + 1 + 50000);
	cr_assert_eq(ivm_calltree_node(tree, 1)->total[IVM_SAMPLE_ON_CPU],
		     50000);
	ivm_calltree_destroy(tree);
}

static struct ivm_idle_record idle_record(uint32_t vcpu)
{
	struct ivm_idle_record r = {
		.vcpu = vcpu, .flags = IVM_IDLE_FROM_IDLE_KNOWN |
				       IVM_IDLE_START_FROM_EVENT,
		.start_ns = 5000, .end_ns = 9000, .halts = 2,
		.wake_mask = 1u << IVM_IRQ_TIMER, .exit_reason = 12,
		.to_idle = { 100, 101, "ls-worker-1" },
		.from_idle = { 1, 1, "init" },
	};

	r.before.time_ns = 5010;
	r.before.cpu_switches = 77;
	r.before.idle_switches = 33;
	r.before.irqs.known = (1u << IVM_IRQ_NR_KINDS) - 1;
	r.before.irqs.count[IVM_IRQ_TIMER] = 1000;
	r.wake_before = r.before;
	r.after = r.before;
	r.after.time_ns = 9010;
	r.after.irqs.count[IVM_IRQ_TIMER] = 1001;
	r.after.cpu_switches = 78;
	r.after.idle_switches = 34;
	return r;
}

/* Idle periods round-trip, beside samples, and damage costs only theirs. */
Test(profile_file, idle_period_records)
{
	struct ivm_profile_writer *w;
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_idle_record in = idle_record(1);
	struct ivm_sample s = sample(IVM_SAMPLE_TO_IDLE, 101);
	int periods = 0, samples = 0;

	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_sample(w, &s));
	cr_assert_null(ivm_profile_write_idle_period(w, &in));
	cr_assert_null(ivm_profile_write_sample(w, &s));
	cr_assert_null(ivm_profile_writer_finish(w, 99, NULL, 0));
	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec)) {
		if (rec.type == IVM_RECORD_SAMPLE)
			samples++;
		if (rec.type != IVM_RECORD_IDLE_PERIOD)
			continue;
		periods++;
		cr_assert_eq(rec.idle.vcpu, 1);
		cr_assert_eq(rec.idle.flags, in.flags);
		cr_assert_eq(rec.idle.start_ns, 5000);
		cr_assert_eq(rec.idle.end_ns, 9000);
		cr_assert_eq(rec.idle.halts, 2);
		cr_assert_eq(rec.idle.exit_reason, 12);
		cr_assert_eq(rec.idle.wake_mask, 1u << IVM_IRQ_TIMER);
		cr_assert_str_eq(rec.idle.to_idle.comm, "ls-worker-1");
		cr_assert_eq(rec.idle.to_idle.tid, 101);
		cr_assert_str_eq(rec.idle.from_idle.comm, "init");
		cr_assert_eq(rec.idle.after.irqs.count[IVM_IRQ_TIMER], 1001);
		cr_assert_eq(rec.idle.after.irqs.known, in.after.irqs.known);
		cr_assert_eq(rec.idle.wake_before.cpu_switches, 77);
		cr_assert_eq(rec.idle.after.idle_switches, 34);
	}
	cr_assert_eq(periods, 1);
	cr_assert_eq(samples, 2);
	cr_assert_eq(ivm_profile_reader_damage(r)->records_bad, 0);
	ivm_profile_reader_destroy(r);
}

/*
 * A version-1 file from before idle periods (recorded bytes: a META and an
 * END record as the old writer framed them) still reads; and a reader
 * meeting a record type it does not know skips it whole.
 */
Test(profile_file, files_without_idle_periods_still_read)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_profile_writer *w;
	int n = 0;

	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "guest", "old"));
	cr_assert_null(ivm_profile_writer_finish(w, 7, NULL, 0));
	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec))
		n++;
	cr_assert_eq(n, 2);
	cr_assert(ivm_profile_reader_damage(r)->ended);
	cr_assert_eq(ivm_profile_reader_damage(r)->records_unknown, 0);
	ivm_profile_reader_destroy(r);
}

/* A damaged idle-period payload (bad snapshot count) is one bad record. */
Test(profile_file, bad_idle_period_payload)
{
	struct ivm_profile_writer *w;
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_idle_record in = idle_record(0);

	in.end_ns = 1;	/* before its start: refused by the reader */
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_idle_period(w, &in));
	cr_assert_null(ivm_profile_writer_finish(w, 99, NULL, 0));
	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec))
		cr_assert_neq(rec.type, IVM_RECORD_IDLE_PERIOD);
	cr_assert_eq(ivm_profile_reader_damage(r)->records_bad, 1);
	ivm_profile_reader_destroy(r);
}
