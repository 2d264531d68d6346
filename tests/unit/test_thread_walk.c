// SPDX-License-Identifier: MIT
/*
 * thread_walk over synthetic guest memory: processes and their threads
 * linked as the kernel links them (init_task.tasks, signal->thread_head
 * with thread_node, or the older thread_group ring), walked a few threads
 * per call while the lists change under the walk the way a running guest
 * changes them (a thread exits, its task_struct is reused, a process
 * exits), and broken the ways a hostile guest breaks them.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/thread_walk.h"

#define BASE 0xffff888000000000ull
#define MEM_SIZE 0x20000u
#define TASK(i) (BASE + 0x1000u + (uint64_t)(i) * 0x100u)
#define SIGNAL(i) (BASE + 0x10000u + (uint64_t)(i) * 0x40u)
#define POISON2 0xdead000000000122ull

/* Offsets unlike any real kernel's. */
#define O_TASKS 0x10
#define O_PID 0x20
#define O_TGID 0x24
#define O_COMM 0x30
#define O_MM 0x40
#define O_SIGNAL 0x48
#define O_THREAD_NODE 0x50
#define O_THREAD_GROUP 0x60
#define O_START 0x70
#define O_THREAD_HEAD 0x10	/* in the signal struct */

struct mem {
	uint8_t *bytes;
	struct ivm_kmem_reader reader;
	uint64_t reads;
};

static struct ivm_error *mem_read(void *ctx, uint64_t va, void *buf, size_t len)
{
	struct mem *m = ctx;

	m->reads++;
	if (va < BASE || len > MEM_SIZE || va - BASE > MEM_SIZE - len)
		return ivm_error_fault(va, "not mapped");
	memcpy(buf, m->bytes + (va - BASE), len);
	return NULL;
}

static struct mem g_mem;

static void w64(uint64_t va, uint64_t v)
{
	cr_assert(va >= BASE && va + 8 <= BASE + MEM_SIZE);
	memcpy(g_mem.bytes + (va - BASE), &v, 8);
}

static void w32(uint64_t va, uint32_t v)
{
	cr_assert(va >= BASE && va + 4 <= BASE + MEM_SIZE);
	memcpy(g_mem.bytes + (va - BASE), &v, 4);
}

static void set_task(int i, int pid, int tgid, const char *comm, int signal)
{
	w32(TASK(i) + O_PID, (uint32_t)pid);
	w32(TASK(i) + O_TGID, (uint32_t)tgid);
	strncpy((char *)g_mem.bytes + (TASK(i) + O_COMM - BASE), comm, 16);
	w64(TASK(i) + O_MM, pid ? BASE + 0x18000 : 0);
	w64(TASK(i) + O_SIGNAL, SIGNAL(signal));
	w64(TASK(i) + O_START, 1000000ull * (uint64_t)pid);
}

/* head -> nodes[0] -> ... -> head, prev pointers too. */
static void link_ring(uint64_t head, const uint64_t *nodes, size_t n)
{
	uint64_t prev = head;
	size_t i;

	for (i = 0; i < n; i++) {
		w64(prev, nodes[i]);
		w64(nodes[i] + 8, prev);
		prev = nodes[i];
	}
	w64(prev, head);
	w64(head + 8, prev);
}

/* list_del_rcu: neighbours skip node; its prev is poisoned. */
static void unlink_node(uint64_t node)
{
	uint64_t next, prev;

	memcpy(&next, g_mem.bytes + (node - BASE), 8);
	memcpy(&prev, g_mem.bytes + (node + 8 - BASE), 8);
	w64(prev, next);
	w64(next + 8, prev);
	w64(node + 8, POISON2);
}

/*
 * init_task (0), init (1), a process 50 with threads 51 and 52, a process
 * 60 with thread 61.  Task index = slot in memory.
 */
enum { T0, T1, T50, T51, T52, T60, T61 };

static void build(bool thread_group)
{
	g_mem.bytes = calloc(1, MEM_SIZE);
	cr_assert(g_mem.bytes);
	g_mem.reader.read = mem_read;
	g_mem.reader.ctx = &g_mem;
	g_mem.reads = 0;
	set_task(T0, 0, 0, "swapper/0", 0);
	set_task(T1, 1, 1, "init", 1);
	set_task(T50, 50, 50, "server", 2);
	set_task(T51, 51, 50, "server-w1", 2);
	set_task(T52, 52, 50, "server-w2", 2);
	set_task(T60, 60, 60, "daemon", 3);
	set_task(T61, 61, 60, "daemon-t", 3);
	{
		const uint64_t procs[] = { TASK(T1) + O_TASKS,
					   TASK(T50) + O_TASKS,
					   TASK(T60) + O_TASKS };

		link_ring(TASK(T0) + O_TASKS, procs, 3);
	}
	if (thread_group) {
		const uint64_t g2[] = { TASK(T51) + O_THREAD_GROUP,
					TASK(T52) + O_THREAD_GROUP };
		const uint64_t g3[] = { TASK(T61) + O_THREAD_GROUP };

		link_ring(TASK(T0) + O_THREAD_GROUP, NULL, 0);
		link_ring(TASK(T1) + O_THREAD_GROUP, NULL, 0);
		link_ring(TASK(T50) + O_THREAD_GROUP, g2, 2);
		link_ring(TASK(T60) + O_THREAD_GROUP, g3, 1);
	} else {
		const uint64_t t0[] = { TASK(T0) + O_THREAD_NODE };
		const uint64_t t1[] = { TASK(T1) + O_THREAD_NODE };
		const uint64_t t2[] = { TASK(T50) + O_THREAD_NODE,
					TASK(T51) + O_THREAD_NODE,
					TASK(T52) + O_THREAD_NODE };
		const uint64_t t3[] = { TASK(T60) + O_THREAD_NODE,
					TASK(T61) + O_THREAD_NODE };

		link_ring(SIGNAL(0) + O_THREAD_HEAD, t0, 1);
		link_ring(SIGNAL(1) + O_THREAD_HEAD, t1, 1);
		link_ring(SIGNAL(2) + O_THREAD_HEAD, t2, 3);
		link_ring(SIGNAL(3) + O_THREAD_HEAD, t3, 2);
	}
}

static void fini(void)
{
	free(g_mem.bytes);
	g_mem.bytes = NULL;
}

static struct ivm_thread_walk_config config(bool thread_group,
					   size_t max_tasks)
{
	return (struct ivm_thread_walk_config){
		.off = {
			.tasks = O_TASKS, .pid = O_PID, .tgid = O_TGID,
			.comm = O_COMM, .comm_size = 16, .mm = O_MM,
			.signal = O_SIGNAL,
			.thread_node = thread_group ? IVM_KOFF_NONE :
						      O_THREAD_NODE,
			.signal_thread_head = thread_group ? IVM_KOFF_NONE :
							     O_THREAD_HEAD,
			.thread_group = O_THREAD_GROUP, .start_time = O_START,
			.list_next = 0, .list_prev = 8,
		},
		.init_task = TASK(T0), .max_tasks = max_tasks,
	};
}

static struct ivm_thread_walk *walker(bool thread_group, size_t max_tasks)
{
	struct ivm_thread_walk_config cfg = config(thread_group, max_tasks);
	struct ivm_thread_walk *w;
	struct ivm_error *err = ivm_thread_walk_create(&cfg, &g_mem.reader, &w);

	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return w;
}

/* Seen counts by pid (< 128) over calls of budget until a sweep ends. */
static enum ivm_thread_sweep sweep(struct ivm_thread_walk *w, size_t budget,
				   int *seen, size_t max_calls)
{
	struct ivm_walked_thread out[16];
	enum ivm_thread_sweep how = IVM_SWEEP_GOING;
	size_t nr, i, calls = 0;

	cr_assert(budget <= 16);
	while (how == IVM_SWEEP_GOING) {
		cr_assert(calls++ < max_calls, "the sweep did not end");
		ivm_thread_walk_step(w, out, budget, &nr, &how);
		cr_assert(nr <= budget);
		for (i = 0; i < nr; i++) {
			cr_assert(out[i].pid > 0 && out[i].pid < 128);
			cr_assert(strnlen(out[i].comm, 16) < 16);
			seen[out[i].pid]++;
		}
	}
	return how;
}

static void expect_all_once(const int *seen)
{
	int p;

	for (p = 0; p < 128; p++) {
		bool live = p == 1 || p == 50 || p == 51 || p == 52 ||
			    p == 60 || p == 61;

		cr_expect_eq(seen[p], live ? 1 : 0, "pid %d seen %d times", p,
			     seen[p]);
	}
}

Test(thread_walk, every_thread_once_a_few_at_a_time, .fini = fini)
{
	struct ivm_thread_walk *w;
	size_t budget;

	build(false);
	for (budget = 1; budget <= 8; budget++) {
		int seen[128] = { 0 };

		w = walker(false, 0);
		cr_assert_eq(sweep(w, budget, seen, 64), IVM_SWEEP_COMPLETE);
		expect_all_once(seen);
		/* The next sweep starts over. */
		memset(seen, 0, sizeof(seen));
		cr_assert_eq(sweep(w, budget, seen, 64), IVM_SWEEP_COMPLETE);
		expect_all_once(seen);
		cr_expect_eq(ivm_thread_walk_stats(w)->sweeps_complete, 2);
		cr_expect_eq(ivm_thread_walk_stats(w)->restarts, 0);
		ivm_thread_walk_destroy(w);
	}
}

Test(thread_walk, what_a_thread_says, .fini = fini)
{
	struct ivm_walked_thread out[16];
	enum ivm_thread_sweep how;
	struct ivm_thread_walk *w;
	size_t nr, i;

	build(false);
	w = walker(false, 0);
	ivm_thread_walk_step(w, out, 16, &nr, &how);
	cr_assert_eq(how, IVM_SWEEP_COMPLETE);
	cr_assert_eq(nr, 6);
	for (i = 0; i < nr; i++) {
		if (out[i].pid != 51)
			continue;
		cr_expect_eq(out[i].task, TASK(T51));
		cr_expect_eq(out[i].tgid, 50);
		cr_expect_str_eq(out[i].comm, "server-w1");
		cr_expect_eq(out[i].start_time, 51000000ull);
		cr_expect(!out[i].kthread);
	}
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, leader_not_first_in_its_list, .fini = fini)
{
	const uint64_t t2[] = { TASK(T51) + O_THREAD_NODE,
				TASK(T50) + O_THREAD_NODE,
				TASK(T52) + O_THREAD_NODE };
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(false);
	/* After an exec by a thread, say: the leader is not first. */
	link_ring(SIGNAL(2) + O_THREAD_HEAD, t2, 3);
	w = walker(false, 0);
	cr_assert_eq(sweep(w, 2, seen, 64), IVM_SWEEP_COMPLETE);
	expect_all_once(seen);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, thread_group_ring_of_older_kernels, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(true);
	w = walker(true, 0);
	cr_assert_eq(sweep(w, 3, seen, 64), IVM_SWEEP_COMPLETE);
	expect_all_once(seen);
	ivm_thread_walk_destroy(w);
}

/* Steps of budget 1 until pid was reported; false if the sweep ended. */
static bool walk_to(struct ivm_thread_walk *w, int pid, int *seen)
{
	struct ivm_walked_thread out[1];
	enum ivm_thread_sweep how;
	size_t nr;

	do {
		ivm_thread_walk_step(w, out, 1, &nr, &how);
		if (nr)
			seen[out[0].pid]++;
	} while (how == IVM_SWEEP_GOING && !(nr && out[0].pid == pid));
	return how == IVM_SWEEP_GOING;
}

Test(thread_walk, thread_exits_between_calls, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(false);
	w = walker(false, 0);
	cr_assert(walk_to(w, 51, seen));
	/* 51 exits: unlinked, its prev poisoned (list_del_rcu). */
	unlink_node(TASK(T51) + O_THREAD_NODE);
	cr_assert_eq(sweep(w, 1, seen, 64), IVM_SWEEP_COMPLETE);
	/* From the leader again: 52 is met, once or more. */
	cr_expect(seen[52] >= 1 && seen[60] == 1 && seen[61] == 1);
	cr_expect(ivm_thread_walk_stats(w)->fallbacks >= 1);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, task_reused_between_calls, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(false);
	w = walker(false, 0);
	cr_assert(walk_to(w, 51, seen));
	/* 51's task_struct now belongs to another thread, still linked. */
	w32(TASK(T51) + O_PID, 99);
	cr_assert_eq(sweep(w, 1, seen, 64), IVM_SWEEP_COMPLETE);
	cr_expect(seen[52] >= 1 && seen[60] == 1 && seen[61] == 1);
	cr_expect(ivm_thread_walk_stats(w)->fallbacks >= 1);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, process_exits_between_calls, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 }, again[128] = { 0 };

	build(false);
	w = walker(false, 0);
	cr_assert(walk_to(w, 52, seen));
	/* The whole process goes: off the process list. */
	unlink_node(TASK(T50) + O_TASKS);
	unlink_node(TASK(T51) + O_THREAD_NODE);
	unlink_node(TASK(T52) + O_THREAD_NODE);
	unlink_node(TASK(T50) + O_THREAD_NODE);
	cr_assert_eq(sweep(w, 1, seen, 64), IVM_SWEEP_COMPLETE);
	/* Walked again from init_task: the other processes are there. */
	cr_expect(seen[1] >= 1 && seen[60] == 1 && seen[61] == 1);
	cr_expect_eq(ivm_thread_walk_stats(w)->restarts, 1);
	/* The next sweep no longer meets it. */
	cr_assert_eq(sweep(w, 4, again, 64), IVM_SWEEP_COMPLETE);
	cr_expect(!again[50] && !again[51] && !again[52]);
	cr_expect(again[1] == 1 && again[60] == 1 && again[61] == 1);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, a_loop_ends_at_max_tasks, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(false);
	/* 60's successor is init again: the list never returns to its head. */
	w64(TASK(T60) + O_TASKS, TASK(T1) + O_TASKS);
	w = walker(false, 20);
	cr_assert_eq(sweep(w, 4, seen, 64), IVM_SWEEP_TRUNCATED);
	cr_expect_eq(ivm_thread_walk_stats(w)->sweeps_truncated, 1);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, thread_loop_ends_at_max_tasks, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(false);
	/* 52 points back to 51: the leader is never met again. */
	w64(TASK(T52) + O_THREAD_NODE, TASK(T51) + O_THREAD_NODE);
	w = walker(false, 30);
	cr_assert_eq(sweep(w, 5, seen, 64), IVM_SWEEP_TRUNCATED);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, unreadable_init_task, .fini = fini)
{
	struct ivm_thread_walk_config cfg = config(false, 0);
	struct ivm_walked_thread out[4];
	enum ivm_thread_sweep how;
	struct ivm_thread_walk *w;
	size_t nr;

	build(false);
	cfg.init_task = BASE + 2 * MEM_SIZE;
	cr_assert_null(ivm_thread_walk_create(&cfg, &g_mem.reader, &w));
	ivm_thread_walk_step(w, out, 4, &nr, &how);
	cr_expect_eq(how, IVM_SWEEP_TRUNCATED);
	cr_expect_eq(nr, 0);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, bad_pointers_restart_then_truncate, .fini = fini)
{
	struct ivm_thread_walk *w;
	int seen[128] = { 0 };

	build(false);
	/* init's successor is no kernel address. */
	w64(TASK(T1) + O_TASKS, 0x41414141);
	w = walker(false, 0);
	cr_assert_eq(sweep(w, 4, seen, 64), IVM_SWEEP_TRUNCATED);
	cr_expect_eq(ivm_thread_walk_stats(w)->restarts,
		     IVM_THREAD_WALK_MAX_RESTARTS + 1);
	ivm_thread_walk_destroy(w);
}

Test(thread_walk, layout_too_wide_is_refused, .fini = fini)
{
	struct ivm_thread_walk_config cfg = config(false, 0);
	struct ivm_thread_walk *w = NULL;
	struct ivm_error *err;

	build(false);
	cfg.off.pid = 0x3000;
	err = ivm_thread_walk_create(&cfg, &g_mem.reader, &w);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
}
