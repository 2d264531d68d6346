// SPDX-License-Identifier: MIT
/*
 * The switch sampler's decisions on synthetic task tables: which threads
 * are read in each batch, when a switch sample is due (a multiple of N
 * crossed between two reads), the counters a sample and a thread's record
 * carry, threads that are born, exit or whose task_struct is reused; and
 * the pieces of task_struct a read takes, from a hand-built BTF laid out
 * like Linux 6.1's.
 */
#include <criterion/criterion.h>
#include <bpf/btf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/task_sched.h"
#include "profile/switch_table.h"

static struct ivm_walked_thread thread(uint64_t task, int pid, int tgid,
				       const char *comm)
{
	struct ivm_walked_thread w = { .task = task, .pid = pid, .tgid = tgid,
				       .start_time = 1000u * (unsigned)pid };

	strncpy(w.comm, comm, sizeof(w.comm) - 1);
	return w;
}

static struct ivm_task_sched sched(int pid, int tgid, uint64_t nvcsw,
				   uint64_t nivcsw, uint64_t delay,
				   uint64_t cpu)
{
	return (struct ivm_task_sched){
		.pid = pid, .tgid = tgid, .nvcsw = nvcsw, .nivcsw = nivcsw,
		.run_delay_known = true, .run_delay = delay,
		.sum_exec_runtime = cpu, .start_time_known = true,
		.start_time = 1000u * (unsigned)pid, .on_cpu_known = true,
	};
}

static struct ivm_switch_table *table(uint32_t every, size_t max)
{
	struct ivm_switch_table *t;

	cr_assert_null(ivm_switch_table_create(every, max, &t));
	return t;
}

static long meet(struct ivm_switch_table *t, uint64_t task, int pid, int tgid,
		 const char *comm, uint64_t sweep, bool born)
{
	struct ivm_walked_thread w = thread(task, pid, tgid, comm);
	long idx;
	bool added;

	cr_assert_null(ivm_switch_table_meet(t, &w, sweep, born, &idx, &added));
	return idx;
}

static uint64_t counter(const struct ivm_counter *c, size_t n, uint32_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i].id == id)
			return c[i].value;
	cr_assert_fail("no counter %u", id);
	return 0;
}

Test(switch_table, due_when_a_multiple_of_n_is_crossed)
{
	struct ivm_switch_table *t = table(10, 0);
	struct ivm_task_sched s;
	long i = meet(t, 0xa000, 51, 50, "worker", 1, false);

	s = sched(51, 50, 7, 0, 0, 0);
	cr_assert(ivm_switch_table_update(t, (size_t)i, &s, 100));
	cr_expect(!ivm_switch_table_get(t, (size_t)i)->due,
		  "a first read crosses nothing");
	s = sched(51, 50, 8, 1, 0, 0);		/* 9: not yet */
	ivm_switch_table_update(t, (size_t)i, &s, 200);
	cr_expect(!ivm_switch_table_get(t, (size_t)i)->due);
	s = sched(51, 50, 8, 2, 0, 0);		/* 10: crossed */
	ivm_switch_table_update(t, (size_t)i, &s, 300);
	cr_expect(ivm_switch_table_get(t, (size_t)i)->due);
	/* Crossing again before the sample is taken: one sample, coalesced. */
	s = sched(51, 50, 15, 6, 0, 0);		/* 21 */
	ivm_switch_table_update(t, (size_t)i, &s, 400);
	cr_expect_eq(ivm_switch_table_stats(t)->crossings, 2);
	cr_expect_eq(ivm_switch_table_stats(t)->coalesced, 1);
	/* Several multiples between two reads are one crossing. */
	s = sched(51, 50, 60, 6, 0, 0);		/* 66 */
	ivm_switch_table_update(t, (size_t)i, &s, 500);
	cr_expect_eq(ivm_switch_table_stats(t)->crossings, 3);
	ivm_switch_table_destroy(t);
}

Test(switch_table, sample_counters_are_deltas_since_the_last_sample)
{
	struct ivm_switch_table *t = table(4, 0);
	struct ivm_counter c[IVM_COUNTER_NR_IDS];
	struct ivm_task_sched s;
	size_t n;
	long i = meet(t, 0xa000, 51, 50, "worker", 1, false);

	s = sched(51, 50, 100, 10, 5000, 900000);
	ivm_switch_table_update(t, (size_t)i, &s, 1);
	s = sched(51, 50, 103, 11, 6000, 950000);
	ivm_switch_table_update(t, (size_t)i, &s, 2);
	cr_assert(ivm_switch_table_get(t, (size_t)i)->due);
	n = ivm_switch_table_sampled(t, (size_t)i, c);
	cr_assert_eq(n, 4);
	cr_expect_eq(counter(c, n, IVM_COUNTER_NVCSW), 3);
	cr_expect_eq(counter(c, n, IVM_COUNTER_NIVCSW), 1);
	cr_expect_eq(counter(c, n, IVM_COUNTER_RUN_DELAY_NS), 1000);
	cr_expect_eq(counter(c, n, IVM_COUNTER_CPU_NS), 50000);
	cr_expect(!ivm_switch_table_get(t, (size_t)i)->due);
	s = sched(51, 50, 110, 11, 6500, 990000);
	ivm_switch_table_update(t, (size_t)i, &s, 3);
	n = ivm_switch_table_sampled(t, (size_t)i, c);
	cr_expect_eq(counter(c, n, IVM_COUNTER_NVCSW), 7);
	cr_expect_eq(counter(c, n, IVM_COUNTER_NIVCSW), 0);
	cr_expect_eq(counter(c, n, IVM_COUNTER_RUN_DELAY_NS), 500);
	cr_expect_eq(ivm_switch_table_get(t, (size_t)i)->samples, 2);
	ivm_switch_table_destroy(t);
}

Test(switch_table, record_totals_from_the_first_read_or_from_birth)
{
	struct ivm_switch_table *t = table(1, 0);
	struct ivm_counter c[IVM_COUNTER_NR_IDS];
	struct ivm_thread_record r;
	struct ivm_task_sched s;
	long old = meet(t, 0xa000, 51, 50, "old", 1, false);
	long young = meet(t, 0xb000, 77, 50, "young", 2, true);

	s = sched(51, 50, 100, 10, 5000, 900000);
	ivm_switch_table_update(t, (size_t)old, &s, 10);
	s = sched(51, 50, 150, 12, 7000, 1900000);
	ivm_switch_table_update(t, (size_t)old, &s, 20);
	s = sched(77, 50, 30, 3, 300, 3000);
	ivm_switch_table_update(t, (size_t)young, &s, 15);

	ivm_switch_table_record(t, (size_t)old, false, c, &r);
	cr_expect_eq(r.tid, 51);
	cr_expect_eq(r.pid, 50);
	cr_expect_str_eq(r.comm, "old");
	cr_expect_eq(r.first_ns, 10);
	cr_expect_eq(r.last_ns, 20);
	cr_expect_eq(r.flags, 0);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_NVCSW), 50);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_NIVCSW), 2);
	cr_expect_eq(counter(r.counters, r.nr_counters,
			     IVM_COUNTER_RUN_DELAY_NS), 2000);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_CPU_NS),
		     1000000);
	cr_expect(!ivm_switch_table_get(t, (size_t)old)->dirty);

	/* Born in the run: all of its life counts. */
	ivm_switch_table_record(t, (size_t)young, true, c, &r);
	cr_expect_eq(r.flags, IVM_THREAD_BORN | IVM_THREAD_FINAL);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_NVCSW), 30);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_CPU_NS),
		     3000);
	ivm_switch_table_destroy(t);
}

Test(switch_table, no_run_delay_without_sched_info)
{
	struct ivm_switch_table *t = table(1, 0);
	struct ivm_counter c[IVM_COUNTER_NR_IDS];
	struct ivm_thread_record r;
	struct ivm_task_sched s = sched(51, 50, 1, 1, 0, 10);
	long i = meet(t, 0xa000, 51, 50, "w", 1, false);
	size_t k;

	s.run_delay_known = false;
	ivm_switch_table_update(t, (size_t)i, &s, 1);
	ivm_switch_table_record(t, (size_t)i, false, c, &r);
	cr_expect_eq(r.nr_counters, 3);
	for (k = 0; k < r.nr_counters; k++)
		cr_expect_neq(r.counters[k].id, IVM_COUNTER_RUN_DELAY_NS);
	ivm_switch_table_destroy(t);
}

Test(switch_table, batches_take_threads_in_turn)
{
	struct ivm_switch_table *t = table(1, 0);
	size_t idx[4], n, i, k;
	int reads[10] = { 0 };

	for (i = 0; i < 10; i++)
		meet(t, 0x1000 * (i + 1), (int)i + 100, 100, "t", 1, false);
	/* 10 threads, batches of 4: after 5 batches every thread twice. */
	for (k = 0; k < 5; k++) {
		n = ivm_switch_table_next_batch(t, idx, 4);
		cr_assert_eq(n, 4);
		for (i = 0; i < n; i++)
			reads[idx[i]]++;
	}
	for (i = 0; i < 10; i++)
		cr_expect_eq(reads[i], 2, "thread %zu read %d times", i,
			     reads[i]);
	/* A batch larger than the table takes each thread once. */
	n = ivm_switch_table_next_batch(t, idx, 4);
	cr_assert_eq(n, 4);
	{
		size_t big[32];

		n = ivm_switch_table_next_batch(t, big, 32);
		cr_expect_eq(n, 10);
	}
	ivm_switch_table_destroy(t);
}

Test(switch_table, gone_threads_leave_the_batches_and_are_dropped)
{
	struct ivm_switch_table *t = table(1, 0);
	struct ivm_counter c[IVM_COUNTER_NR_IDS];
	struct ivm_thread_record r;
	struct ivm_task_sched s;
	size_t idx[8], n, i;
	long a = meet(t, 0xa000, 51, 50, "a", 1, false);
	long b = meet(t, 0xb000, 52, 50, "b", 1, false);

	meet(t, 0xc000, 53, 50, "c", 1, false);
	s = sched(51, 50, 1, 0, 0, 0);
	ivm_switch_table_update(t, (size_t)a, &s, 1);
	s = sched(52, 50, 1, 0, 0, 0);
	ivm_switch_table_update(t, (size_t)b, &s, 1);
	/* The second sweep meets a and c, not b: b is gone. */
	meet(t, 0xa000, 51, 50, "a", 2, false);
	meet(t, 0xc000, 53, 50, "c", 2, false);
	ivm_switch_table_sweep_done(t, 2);
	cr_expect_eq(ivm_switch_table_watched(t), 2);
	cr_expect(ivm_switch_table_get(t, (size_t)b)->flags & IVM_THREAD_GONE);
	n = ivm_switch_table_next_batch(t, idx, 8);
	cr_expect_eq(n, 2);
	for (i = 0; i < n; i++)
		cr_expect_neq(idx[i], (size_t)b);
	/* Its last record says so; after that it is dropped. */
	ivm_switch_table_compact(t);
	cr_expect_eq(ivm_switch_table_nr(t), 3, "kept until recorded");
	ivm_switch_table_record(t, (size_t)b, false, c, &r);
	cr_expect(r.flags & IVM_THREAD_GONE);
	ivm_switch_table_compact(t);
	cr_expect_eq(ivm_switch_table_nr(t), 2);
	/* The others are still found by address. */
	{
		struct ivm_walked_thread w = thread(0xc000, 53, 50, "c");
		long k;
		bool added;

		cr_assert_null(ivm_switch_table_meet(t, &w, 3, false, &k,
						     &added));
		cr_expect(!added);
		cr_expect_eq(ivm_switch_table_get(t, (size_t)k)->pid, 53);
	}
	ivm_switch_table_destroy(t);
}

Test(switch_table, reused_task_struct_is_another_thread)
{
	struct ivm_switch_table *t = table(1, 0);
	struct ivm_task_sched s;
	long a = meet(t, 0xa000, 51, 50, "a", 1, false), n;
	bool added;
	struct ivm_walked_thread w;

	s = sched(51, 50, 5, 0, 0, 0);
	cr_assert(ivm_switch_table_update(t, (size_t)a, &s, 1));
	/* A read shows another pid at the address: the thread is gone. */
	s = sched(90, 90, 1, 0, 0, 0);
	cr_expect(!ivm_switch_table_update(t, (size_t)a, &s, 2));
	cr_expect(ivm_switch_table_get(t, (size_t)a)->flags & IVM_THREAD_GONE);
	cr_expect_eq(ivm_switch_table_stats(t)->reused, 1);
	/* The walk then meets the new one there: a new, born thread. */
	w = thread(0xa000, 90, 90, "new");
	cr_assert_null(ivm_switch_table_meet(t, &w, 2, true, &n, &added));
	cr_expect(added);
	cr_expect_neq(n, a);
	cr_expect_eq(ivm_switch_table_get(t, (size_t)n)->flags,
		     IVM_THREAD_BORN);
	/* Same pid, other start time: another thread too. */
	s = sched(90, 90, 1, 0, 0, 0);
	s.start_time = 1;
	cr_expect(!ivm_switch_table_update(t, (size_t)n, &s, 3));
	ivm_switch_table_destroy(t);
}

Test(switch_table, counts_going_back_move_nothing)
{
	struct ivm_switch_table *t = table(10, 0);
	struct ivm_counter c[IVM_COUNTER_NR_IDS];
	struct ivm_thread_record r;
	struct ivm_task_sched s;
	long i = meet(t, 0xa000, 51, 50, "w", 1, false);

	s = sched(51, 50, 100, 100, 100, 100);
	ivm_switch_table_update(t, (size_t)i, &s, 1);
	s = sched(51, 50, 0, 5, 0, 0);		/* hostile */
	ivm_switch_table_update(t, (size_t)i, &s, 2);
	s = sched(51, 50, UINT64_MAX, 100, 100, 100);
	ivm_switch_table_update(t, (size_t)i, &s, 3);
	ivm_switch_table_record(t, (size_t)i, false, c, &r);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_NIVCSW), 0);
	cr_expect_eq(counter(r.counters, r.nr_counters, IVM_COUNTER_NVCSW),
		     UINT64_MAX - 100);
	cr_expect(ivm_switch_table_stats(t)->backwards >= 1);
	ivm_switch_table_destroy(t);
}

Test(switch_table, full_table_counts_the_rest)
{
	struct ivm_switch_table *t = table(1, 3);
	long idx;
	bool added;
	int i;

	for (i = 0; i < 5; i++) {
		struct ivm_walked_thread w = thread(0x1000u * (unsigned)(i + 1),
						    i + 1, 1, "t");

		cr_assert_null(ivm_switch_table_meet(t, &w, 1, false, &idx,
						     &added));
		cr_expect_eq(idx < 0, i >= 3);
	}
	cr_expect_eq(ivm_switch_table_stats(t)->unwatched, 2);
	ivm_switch_table_destroy(t);
}

/* ---- task_sched: the pieces a read takes ------------------------------ */

/* task_struct with the members task_sched looks up, at 6.1's offsets. */
static struct ivm_btf *sched_btf(bool sched_info, uint32_t start_time)
{
	struct btf *b = btf__new_empty();
	int t_ulong, t_se, t_si;
	struct ivm_btf *btf;
	const void *raw;
	uint32_t size;

	t_ulong = btf__add_int(b, "long unsigned int", 8, 0);
	t_se = btf__add_struct(b, "sched_entity", 0x80);
	btf__add_field(b, "exec_start", t_ulong, 0x40 * 8, 0);
	btf__add_field(b, "sum_exec_runtime", t_ulong, 0x48 * 8, 0);
	t_si = btf__add_struct(b, "sched_info", 32);
	btf__add_field(b, "pcount", t_ulong, 0, 0);
	btf__add_field(b, "run_delay", t_ulong, 64, 0);
	btf__add_struct(b, "task_struct", 0x2600);
	btf__add_field(b, "se", t_se, 0x80 * 8, 0);
	if (sched_info)
		btf__add_field(b, "sched_info", t_si, 0x870 * 8, 0);
	btf__add_field(b, "start_time", t_ulong, start_time * 8, 0);
	raw = btf__raw_data(b, &size);
	cr_assert_null(ivm_btf_load_blob(raw, size, &btf));
	btf__free(b);
	return btf;
}

static struct ivm_kernel_offsets sched_koff(void)
{
	struct ivm_kernel_offsets o;

	memset(&o, 0xff, sizeof(o));	/* IVM_KOFF_NONE everywhere */
	o.task_state = 0x18;
	o.task_state_size = 4;
	o.task_on_cpu = 0x34;
	o.task_pid = 0x970;
	o.task_tgid = 0x974;
	o.task_nvcsw = 0xac8;
	o.task_nivcsw = 0xad0;
	return o;
}

/* Put v (n bytes) at task_struct offset off into the pieces' buffer. */
static void put(const struct ivm_task_sched_layout *l, uint8_t *buf,
		uint32_t off, uint64_t v, unsigned int n)
{
	uint32_t pos = 0;
	size_t i;

	for (i = 0; i < l->nr_pieces; i++) {
		if (off >= l->pieces[i].off &&
		    off + n <= l->pieces[i].off + l->pieces[i].len) {
			memcpy(buf + pos + (off - l->pieces[i].off), &v, n);
			return;
		}
		pos += l->pieces[i].len;
	}
	cr_assert_fail("offset 0x%x in no piece", off);
}

Test(task_sched, few_pieces_and_every_field_decoded)
{
	struct ivm_kernel_offsets o = sched_koff();
	struct ivm_btf *btf = sched_btf(true, 0xad8);
	struct ivm_task_sched_layout l;
	struct ivm_task_sched s;
	uint8_t buf[IVM_TASK_SCHED_MAX_BYTES] = { 0 };

	cr_assert_null(ivm_task_sched_layout_init(btf, &o, &l));
	/* __state to start_time, 2.7 KiB: cheaper as one piece than three. */
	cr_expect_eq(l.nr_pieces, 1);
	cr_expect_eq(l.pieces[0].off, 0x18);
	cr_expect_eq(l.pieces[0].len, 0xae0 - 0x18);
	cr_expect_eq(l.bytes, 0xae0 - 0x18);
	cr_expect_eq(l.end, 0xae0);
	put(&l, buf, 0x18, 1, 4);
	put(&l, buf, 0x34, 1, 4);
	put(&l, buf, 0xc8, 123456789, 8);
	put(&l, buf, 0x878, 555, 8);
	put(&l, buf, 0x970, 51, 4);
	put(&l, buf, 0x974, 50, 4);
	put(&l, buf, 0xac8, 42, 8);
	put(&l, buf, 0xad0, 7, 8);
	put(&l, buf, 0xad8, 99, 8);
	ivm_task_sched_decode(&l, buf, &s);
	cr_expect_eq(s.pid, 51);
	cr_expect_eq(s.tgid, 50);
	cr_expect_eq(s.state, 1);
	cr_expect(s.on_cpu_known && s.on_cpu);
	cr_expect_eq(s.nvcsw, 42);
	cr_expect_eq(s.nivcsw, 7);
	cr_expect(s.run_delay_known);
	cr_expect_eq(s.run_delay, 555);
	cr_expect_eq(s.sum_exec_runtime, 123456789);
	cr_expect(s.start_time_known);
	cr_expect_eq(s.start_time, 99);
	ivm_btf_destroy(btf);
}

Test(task_sched, without_sched_info_and_on_cpu)
{
	struct ivm_kernel_offsets o = sched_koff();
	struct ivm_btf *btf = sched_btf(false, 0xad8);
	struct ivm_task_sched_layout l;
	struct ivm_task_sched s;
	uint8_t buf[IVM_TASK_SCHED_MAX_BYTES] = { 0 };

	o.task_on_cpu = IVM_KOFF_NONE;
	cr_assert_null(ivm_task_sched_layout_init(btf, &o, &l));
	cr_expect_eq(l.on_cpu, IVM_KOFF_NONE);
	cr_expect_eq(l.run_delay, IVM_KOFF_NONE);
	ivm_task_sched_decode(&l, buf, &s);
	cr_expect(!s.run_delay_known && !s.on_cpu_known);
	ivm_btf_destroy(btf);
}

Test(task_sched, far_fields_are_pieces_of_their_own)
{
	struct ivm_kernel_offsets o = sched_koff();
	struct ivm_btf *btf = sched_btf(true, 0x2000);
	struct ivm_task_sched_layout l;
	struct ivm_task_sched s;
	uint8_t buf[IVM_TASK_SCHED_MAX_BYTES] = { 0 };

	cr_assert_null(ivm_task_sched_layout_init(btf, &o, &l));
	cr_assert_eq(l.nr_pieces, 2);
	cr_expect_eq(l.pieces[0].off, 0x18);
	cr_expect_eq(l.pieces[0].len, 0xad8 - 0x18);
	cr_expect_eq(l.pieces[1].off, 0x2000);
	cr_expect_eq(l.pieces[1].len, 8);
	cr_expect_eq(l.bytes, 0xad8 - 0x18 + 8);
	cr_expect_eq(l.end, 0x2008);
	put(&l, buf, 0x2000, 4242, 8);
	put(&l, buf, 0xad0, 3, 8);
	ivm_task_sched_decode(&l, buf, &s);
	cr_expect_eq(s.start_time, 4242);
	cr_expect_eq(s.nivcsw, 3);
	ivm_btf_destroy(btf);
}

/*
 * The guest kernel of the demo image: what the walker and the sampler
 * read of its task_struct, as fuzz_thread_walk lays it out by hand
 * (gdb on the same vmlinux: p &((struct task_struct *)0)->start_time...).
 */
#define GUEST_VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"

Test(task_sched, guest_vmlinux_6_1, .timeout = 60)
{
	struct ivm_thread_walk_offsets wo;
	struct ivm_task_sched_layout l;
	struct ivm_kernel_offsets o;
	struct ivm_btf *btf;
	struct ivm_error *err;

	if (access(GUEST_VMLINUX, R_OK))
		cr_skip_test("%s absent: run make image", GUEST_VMLINUX);
	err = ivm_btf_load_file(GUEST_VMLINUX, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_assert_null(ivm_kernel_offsets_from_btf(btf, &o));
	cr_assert_null(ivm_task_sched_layout_init(btf, &o, &l));
	cr_expect_eq(l.nr_pieces, 1);
	cr_expect_eq(l.pieces[0].off, 0x18);
	cr_expect_eq(l.pieces[0].len, 0xae0 - 0x18);
	cr_expect_eq(l.state, 0);
	cr_expect_eq(l.on_cpu, 0x34 - 0x18);
	cr_expect_eq(l.sum_exec_runtime, 0xc8 - 0x18);
	cr_expect_eq(l.run_delay, 0x878 - 0x18);
	cr_expect_eq(l.pid, 0x970 - 0x18);
	cr_expect_eq(l.tgid, 0x974 - 0x18);
	cr_expect_eq(l.nvcsw, 0xac8 - 0x18);
	cr_expect_eq(l.nivcsw, 0xad0 - 0x18);
	cr_expect_eq(l.start_time, 0xad8 - 0x18);
	cr_assert_null(ivm_thread_walk_offsets_init(btf, &o, &wo));
	cr_expect_eq(wo.tasks, 0x890);
	cr_expect_eq(wo.thread_node, 0xa30);
	cr_expect_eq(wo.thread_group, 0xa20);
	cr_expect_eq(wo.signal, 0xc00);
	cr_expect_eq(wo.signal_thread_head, 0x10);
	cr_expect_eq(wo.start_time, 0xad8);
	cr_expect_eq(wo.list_prev, 8);
	cr_expect_eq(wo.mm, 0x8e0);
	ivm_btf_destroy(btf);
}
