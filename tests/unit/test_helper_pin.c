// SPDX-License-Identifier: MIT
/*
 * The guest helper's lease, journal, hold and maps logic, run on the host
 * against the test's own threads: nothing here needs a VM.
 *
 * The helper's modules are not part of libivm.a (they are guest code), so
 * they are compiled into this test directly.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helper_util.c"
#include "helper_pin.c"
#include "helper_hold.c"
#include "helper_maps.c"
#include "helper_readahead.c"
#include "tmp_files.h"

#define MS 1000000ull

/* A thread that sleeps until told to go, so it has a tid to pin. */
struct victim {
	pthread_t thread;
	pid_t tid;
	int pipe[2];
};

static void *victim_main(void *arg)
{
	struct victim *v = arg;
	char c;

	__atomic_store_n(&v->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	(void)!read(v->pipe[0], &c, 1);
	return NULL;
}

static void victim_start(struct victim *v)
{
	cr_assert_eq(pipe(v->pipe), 0);
	v->tid = 0;
	cr_assert_eq(pthread_create(&v->thread, NULL, victim_main, v), 0);
	while (!__atomic_load_n(&v->tid, __ATOMIC_SEQ_CST))
		usleep(100);
}

static void victim_stop(struct victim *v)
{
	(void)!write(v->pipe[1], "x", 1);
	pthread_join(v->thread, NULL);
	close(v->pipe[0]);
	close(v->pipe[1]);
}

static char journal[64];
static struct victim victim;
static cpu_set_t orig;
static int cpu;		/* a CPU we may run on */

static void setup(void)
{
	snprintf(journal, sizeof(journal), "/tmp/ivm-test-journal.%d",
		 (int)getpid());
	unlink(journal);
	victim_start(&victim);
	cr_assert_eq(sched_getaffinity(victim.tid, sizeof(orig), &orig), 0);
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &orig); cpu++)
		;
}

static void teardown(void)
{
	char tmp[80];

	victim_stop(&victim);
	unlink(journal);
	snprintf(tmp, sizeof(tmp), "%s.tmp", journal);
	unlink(tmp);
}

static bool affinity_is(pid_t tid, const cpu_set_t *want)
{
	cpu_set_t now;

	cr_assert_eq(sched_getaffinity(tid, sizeof(now), &now), 0);
	return CPU_EQUAL(&now, want);
}

static bool affinity_is_only(pid_t tid, int c)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(c, &one);
	return affinity_is(tid, &one);
}

/* Journal lines after the magic. */
static int journal_lines(void)
{
	char line[8192];
	int n = -1;
	FILE *f = fopen(journal, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

TestSuite(helper_pin, .init = setup, .fini = teardown);

Test(helper_pin, pin_then_unpin_restores_and_journals)
{
	struct helper_pins pins;
	uint32_t granted, prev;
	uint64_t held;

	helper_pins_init(&pins, journal);
	cr_assert_eq(helper_pin(&pins, victim.tid, cpu, 0, 1000 * MS,
				&granted, &prev), 0);
	cr_assert_eq(granted, IVM_PROTO_LEASE_DEFAULT_MS);
	cr_assert(affinity_is_only(victim.tid, cpu));
	cr_assert_eq(journal_lines(), 1);
	cr_assert_eq(helper_unpin(&pins, victim.tid, 1010 * MS, &held), 0);
	cr_assert_eq(held, 10 * MS);
	cr_assert(affinity_is(victim.tid, &orig));
	cr_assert_eq(journal_lines(), 0);
	cr_assert_eq(helper_unpin(&pins, victim.tid, 1010 * MS, &held),
		     -ENOENT);
	helper_pins_deinit(&pins);
}

Test(helper_pin, lease_expiry_restores_by_itself)
{
	struct helper_pins pins;
	uint32_t granted, prev;

	helper_pins_init(&pins, journal);
	cr_assert_eq(helper_pin(&pins, victim.tid, cpu, 20, 0, &granted,
				&prev), 0);
	cr_assert_eq(granted, 20);
	cr_assert_eq(helper_pins_next_deadline(&pins), 20 * MS);
	cr_assert_eq(helper_pins_expire(&pins, 20 * MS - 1), 0);
	cr_assert(affinity_is_only(victim.tid, cpu));
	cr_assert_eq(helper_pins_expire(&pins, 20 * MS), 1);
	cr_assert(affinity_is(victim.tid, &orig));
	cr_assert_eq(helper_pins_next_deadline(&pins), UINT64_MAX);
	cr_assert_eq(journal_lines(), 0);
	helper_pins_deinit(&pins);
}

Test(helper_pin, lease_is_clamped)
{
	struct helper_pins pins;
	uint32_t granted, prev;

	helper_pins_init(&pins, NULL);
	cr_assert_eq(helper_pin(&pins, victim.tid, cpu, 999999, 0, &granted,
				&prev), 0);
	cr_assert_eq(granted, IVM_PROTO_LEASE_MAX_MS);
	cr_assert_eq(helper_pins_release_all(&pins), 1);
	cr_assert(affinity_is(victim.tid, &orig));
}

Test(helper_pin, repin_keeps_the_original_mask)
{
	struct helper_pins pins;
	uint32_t granted, prev;
	int other = cpu;

	for (int c = cpu + 1; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &orig)) {
			other = c;
			break;
		}
	helper_pins_init(&pins, journal);
	cr_assert_eq(helper_pin(&pins, victim.tid, cpu, 50, 0, &granted,
				&prev), 0);
	cr_assert_eq(helper_pin(&pins, victim.tid, other, 50, 10 * MS,
				&granted, &prev), 0);
	cr_assert(affinity_is_only(victim.tid, other));
	cr_assert_eq(pins.count, 1);
	/* The lease was renewed from the second pin. */
	cr_assert_eq(helper_pins_expire(&pins, 55 * MS), 0);
	cr_assert_eq(helper_pins_expire(&pins, 60 * MS), 1);
	cr_assert(affinity_is(victim.tid, &orig));
	helper_pins_deinit(&pins);
}

Test(helper_pin, bad_requests_change_nothing)
{
	struct helper_pins pins;
	uint32_t granted, prev;

	helper_pins_init(&pins, journal);
	cr_assert_eq(helper_pin(&pins, 0, cpu, 50, 0, &granted, &prev),
		     -EINVAL);
	cr_assert_eq(helper_pin(&pins, victim.tid, CPU_SETSIZE, 50, 0,
				&granted, &prev), -EINVAL);
	/* A pid that cannot exist (above pid_max's hard limit). */
	cr_assert_eq(helper_pin(&pins, 0x7ffffff0, cpu, 50, 0, &granted,
				&prev), -ESRCH);
	cr_assert_eq(pins.count, 0);
	cr_assert(affinity_is(victim.tid, &orig));
	helper_pins_deinit(&pins);
}

Test(helper_pin, journal_unwritable_refuses_to_pin)
{
	struct helper_pins pins;
	uint32_t granted, prev;

	helper_pins_init(&pins, "/nonexistent-dir/journal");
	cr_assert_lt(helper_pin(&pins, victim.tid, cpu, 50, 0, &granted,
				&prev), 0);
	cr_assert(affinity_is(victim.tid, &orig));
	cr_assert_eq(pins.count, 0);
	helper_pins_deinit(&pins);
}

Test(helper_pin, replay_restores_what_a_dead_helper_left)
{
	struct helper_pins pins;
	uint32_t granted, prev;
	unsigned int gone, bad;

	/* A helper pins, then "dies": its table is simply lost. */
	helper_pins_init(&pins, journal);
	cr_assert_eq(helper_pin(&pins, victim.tid, cpu, 50, 0, &granted,
				&prev), 0);
	helper_pins_deinit(&pins);
	cr_assert(affinity_is_only(victim.tid, cpu));

	cr_assert_eq(helper_journal_replay(journal, &gone, &bad), 1);
	cr_assert_eq(gone, 0);
	cr_assert_eq(bad, 0);
	cr_assert(affinity_is(victim.tid, &orig));
	cr_assert_eq(journal_lines(), 0);
	/* A second replay has nothing left to do. */
	cr_assert_eq(helper_journal_replay(journal, &gone, &bad), 0);
}

Test(helper_pin, replay_skips_reused_tids_dead_threads_and_junk)
{
	uint64_t starttime;
	unsigned int gone, bad;
	FILE *f;

	/* An empty mask is refused by the kernel: nothing changes. */
	cr_assert_lt(sched_setaffinity(victim.tid, sizeof(cpu_set_t),
				       &(cpu_set_t){ 0 }), 0);
	cr_assert_eq(helper_task_stat(victim.tid, &starttime, NULL), 0);
	f = fopen(journal, "w");
	cr_assert_not_null(f);
	fprintf(f, "idlevm-helper journal 1\n");
	/* The victim's tid with another start time: a reused tid, which
	 * must not be touched. */
	fprintf(f, "%d %llu 0\n", (int)victim.tid,
		(unsigned long long)starttime + 1);
	fprintf(f, "%d 1 0\n", 0x7ffffff0);	/* gone */
	fprintf(f, "garbage line\n");
	fprintf(f, "%d %llu 5-2\n", (int)victim.tid,
		(unsigned long long)starttime);	/* bad range */
	fprintf(f, "%d %llu 99999\n", (int)victim.tid,
		(unsigned long long)starttime);	/* cpu out of range */
	fclose(f);
	/* Pin the victim by hand: replay must leave it so. */
	{
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		cr_assert_eq(sched_setaffinity(victim.tid, sizeof(one), &one),
			     0);
	}
	cr_assert_eq(helper_journal_replay(journal, &gone, &bad), 0);
	cr_assert_eq(gone, 2);
	cr_assert_eq(bad, 3);
	cr_assert(affinity_is_only(victim.tid, cpu));
	cr_assert_eq(sched_setaffinity(victim.tid, sizeof(orig), &orig), 0);
}

Test(helper_pin, replay_of_a_foreign_file_changes_nothing)
{
	unsigned int gone, bad;
	FILE *f = fopen(journal, "w");

	cr_assert_not_null(f);
	fprintf(f, "not a journal\n%d 1 0\n", (int)victim.tid);
	fclose(f);
	cr_assert_eq(helper_journal_replay(journal, &gone, &bad), 0);
	cr_assert_eq(bad, 1);
	cr_assert(affinity_is(victim.tid, &orig));
	cr_assert_eq(helper_journal_replay("/nonexistent-journal", &gone,
					   &bad), 0);
}

Test(helper_pin, cpu_list_format_round_trips)
{
	cpu_set_t set, back;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CPU_SET(1, &set);
	CPU_SET(2, &set);
	CPU_SET(5, &set);
	CPU_SET(1023, &set);
	write_cpu_list(f, &set);
	fclose(f);
	cr_assert_str_eq(buf, "0-2,5,1023");
	cr_assert(parse_cpu_list(buf, &back));
	cr_assert(CPU_EQUAL(&set, &back));
	cr_assert_not(parse_cpu_list("", &back));
	cr_assert_not(parse_cpu_list("1,", &back));
	cr_assert_not(parse_cpu_list("-1", &back));
	cr_assert_not(parse_cpu_list("1024", &back));
	free(buf);
}

Test(helper_pin, task_stat_reads_start_time_past_odd_comm)
{
	uint64_t st1, st2;
	uint32_t last_cpu;

	/* A comm with spaces and parentheses must not shift the fields. */
	pthread_setname_np(victim.thread, "a) b (c");
	cr_assert_eq(helper_task_stat(victim.tid, &st1, &last_cpu), 0);
	cr_assert_eq(helper_task_stat(getpid(), &st2, NULL), 0);
	cr_assert_geq(st1, st2);
	cr_assert_lt(last_cpu, CPU_SETSIZE);
}

/*
 * Holders spin at SCHED_FIFO on a CPU: two tests doing that at once (the
 * runner runs tests in parallel processes) take each other's CPU and
 * their timings go.  One at a time, across processes; the lock goes with
 * the test's process.  What is locked is the test binary itself, which
 * every process of the run shares and which is there anyway: a lock file
 * of our own would be left behind.
 */
static void holders_exclusive(void)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(flock(fd, LOCK_EX), 0);
}

/*
 * A short lease also bounds how long the holder may take to get its CPU:
 * on a host that keeps us off it longer (a busy machine, a vCPU of ours
 * descheduled by the hypervisor: seen here in 1 run of 5 of the unit
 * tests beside a soak's guests and builds), HOLD answers -ETIMEDOUT,
 * which is the right answer.  What the caller
 * checks is what a hold does once granted, so it asks again then; any
 * other answer fails.
 */
static void hold_granted(struct helper_holds *holds, int at, uint32_t lease_ms)
{
	uint32_t granted;
	int r, tries = 0;

	do
		r = helper_hold(holds, at, lease_ms, &granted);
	while (r == -ETIMEDOUT && ++tries < 50);
	cr_assert_eq(r, 0, "HOLD of %u ms: %s after %d tries", lease_ms,
		     strerror(-r), tries + 1);
	cr_assert_eq(granted, lease_ms);
}

Test(helper_hold, hold_release_and_expiry)
{
	struct helper_holds *holds;
	uint32_t granted;
	uint64_t held;
	bool expired;
	cpu_set_t mine;
	int c, r;

	holders_exclusive();
	cr_assert_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (c = 0; c < CPU_SETSIZE && !CPU_ISSET(c, &mine); c++)
		;
	cr_assert_eq(helper_holds_create(CPU_SETSIZE, NULL, NULL, &holds), 0);
	/*
	 * No step may depend on how fast a loaded machine runs us: a lease
	 * ends by itself (that is what the next steps check), so the holds
	 * that are not about expiry get the longest lease, and a hold's
	 * outcome is checked against what it reports, not a clock.
	 */
	r = helper_hold(holds, c, IVM_PROTO_LEASE_MAX_MS, &granted);
	if (r == -EPERM) {
		helper_holds_destroy(holds);
		cr_skip_test("no permission for SCHED_FIFO here");
	}
	cr_assert_eq(r, 0);
	cr_assert_eq(granted, IVM_PROTO_LEASE_MAX_MS);
	cr_assert_eq(helper_hold(holds, c, 20, &granted), -EBUSY);
	cr_assert_eq(helper_release(holds, c, &held, &expired), 0);
	if (expired)	/* we were kept off a CPU for the whole lease */
		cr_assert_geq(held, IVM_PROTO_LEASE_MAX_MS * MS);
	else
		cr_assert_lt(held, IVM_PROTO_LEASE_MAX_MS * MS);
	cr_assert_eq(helper_release(holds, c, &held, &expired), -ENOENT);

	/*
	 * Left alone, a holder stops at its lease: a sleep longer than the
	 * lease is past it, however late we wake.  (A lease long enough for
	 * the holder to get its CPU on a busy host: HOLD answers only then.)
	 */
	hold_granted(holds, c, 50);
	usleep(60000);
	cr_assert_eq(helper_holds_expire(holds), 1);
	cr_assert_eq(helper_holds_next_deadline(holds), UINT64_MAX);

	/* And it says so on RELEASE, if RELEASE came late. */
	hold_granted(holds, c, 50);
	usleep(60000);
	cr_assert_eq(helper_release(holds, c, &held, &expired), 0);
	cr_assert(expired);
	cr_assert_geq(held, 50 * MS);

	cr_assert_eq(helper_hold(holds, CPU_SETSIZE, 10, &granted), -EINVAL);
	helper_holds_destroy(holds);
}

static int self_exe_entries_with_id;

Test(helper_maps, own_maps_with_build_ids)
{
	static uint8_t buf[IVM_PROTO_MAX_FRAME];
	struct idlevm_map_entry e;
	struct idlevm_maps_rep rep;
	struct idlevm_writer w;
	uint8_t id[IVM_PROTO_MAX_BUILD_ID];
	char exe[4096];
	ssize_t n;
	int fd, id_len, r, entries = 0;

	fd = open("/proc/self/exe", O_RDONLY);
	cr_assert_geq(fd, 0);
	id_len = helper_read_build_id(fd, id, sizeof(id));
	close(fd);
	cr_assert_eq(id_len, 20, "the test binary has a GNU build-id");
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';

	idlevm_frame_begin(&w, buf, sizeof(buf), IVM_MSG_MAPS,
			   IVM_PROTO_F_REPLY, 1);
	cr_assert_eq(helper_maps_encode(&w, getpid(), 0), 0);
	cr_assert_gt(idlevm_frame_finish(&w), 0);
	cr_assert(idlevm_decode_maps_rep(buf + IVM_PROTO_HEADER_SIZE,
					 w.len - IVM_PROTO_HEADER_SIZE, &rep));
	while ((r = idlevm_maps_rep_next(&rep, &e)) > 0) {
		entries++;
		if (e.path.len == (size_t)n && !memcmp(e.path.ptr, exe, n)) {
			cr_assert_eq(e.build_id_len, 20);
			cr_assert_eq(memcmp(e.build_id, id, 20), 0);
			self_exe_entries_with_id++;
		}
	}
	cr_assert_eq(r, 0);
	cr_assert_gt(entries, 5);
	cr_assert_gt(self_exe_entries_with_id, 0);

	/* Paging: from entry 2 on gives the rest. */
	idlevm_frame_begin(&w, buf, sizeof(buf), IVM_MSG_MAPS,
			   IVM_PROTO_F_REPLY, 1);
	cr_assert_eq(helper_maps_encode(&w, getpid(), 2), 0);
	cr_assert_gt(idlevm_frame_finish(&w), 0);
	cr_assert(idlevm_decode_maps_rep(buf + IVM_PROTO_HEADER_SIZE,
					 w.len - IVM_PROTO_HEADER_SIZE, &rep));
	cr_assert_eq(rep.first, 2);
	/* Our own maps may grow between the two reads, never shrink by 2. */
	cr_assert_geq(rep.count + 2, (uint32_t)entries - 1);

	idlevm_frame_begin(&w, buf, sizeof(buf), IVM_MSG_MAPS,
			   IVM_PROTO_F_REPLY, 1);
	cr_assert_eq(helper_maps_encode(&w, 0x7ffffff0, 0), -ESRCH);
}

Test(helper_maps, build_id_of_non_elf_is_none)
{
	uint8_t id[IVM_PROTO_MAX_BUILD_ID];
	int fd = open("/proc/self/maps", O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(helper_read_build_id(fd, id, sizeof(id)), 0);
	close(fd);
}

/* ---- HOLD_PIN: the holder pins, answers, spins and restores ---------- */

/* What the reply hook saw, from the holder thread. */
static struct {
	int calls;
	struct helper_hold_pin_result res;
	bool pinned_during;	/* the target's mask was {cpu} in the hook */
	bool on_cpu;		/* the hook ran on the held CPU */
} seen;

static void hook(void *ctx, const struct helper_hold_pin *req,
		 const struct helper_hold_pin_result *res)
{
	cpu_set_t now, one;

	(void)ctx;
	seen.res = *res;
	seen.on_cpu = sched_getcpu() == (int)req->cpu;
	if (req->tid > 0 && !sched_getaffinity(req->tid, sizeof(now), &now)) {
		CPU_ZERO(&one);
		CPU_SET(req->cpu, &one);
		seen.pinned_during = CPU_EQUAL(&now, &one);
	}
	__atomic_add_fetch(&seen.calls, 1, __ATOMIC_SEQ_CST);
}

/*
 * No step below may depend on how fast a loaded machine runs us: waits are
 * bounded by a count of sleeps far beyond any load (a failure, not a
 * timing), and what a hold did is judged by what the holder reports
 * (its reply, its counters), not by a clock.
 */
#define WAIT_STEPS	30000	/* of at least 1 ms each */

/* Wait (bounded) until cpu's holder is out of its hold. */
static bool wait_idle(struct helper_holds *holds, int c)
{
	cpu_set_t idle;
	int i;

	for (i = 0; i < WAIT_STEPS; i++) {
		helper_holds_idle(holds, &idle);
		if (CPU_ISSET(c, &idle))
			return true;
		usleep(1000);
	}
	return false;
}

/* Wait (bounded) until the hook has answered more than `calls` times. */
static bool wait_reply(int calls)
{
	int i;

	for (i = 0; i < WAIT_STEPS; i++) {
		if (__atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST) > calls)
			return true;
		usleep(1000);
	}
	return false;
}

static struct helper_holds *hold_pin_setup(void)
{
	struct helper_holds *holds = NULL;

	holders_exclusive();
	memset(&seen, 0, sizeof(seen));
	cr_assert_eq(helper_holds_create(CPU_SETSIZE, hook, NULL, &holds), 0);
	return holds;
}

/* helper_hold_pin, skipped where SCHED_FIFO is not allowed. */
static void hold_pin_or_skip(struct helper_holds *holds,
			     const struct helper_hold_pin *req)
{
	int r = helper_hold_pin(holds, req);

	if (r == -EPERM) {
		helper_holds_destroy(holds);
		cr_skip_test("no permission for SCHED_FIFO here");
	}
	cr_assert_eq(r, 0);
}

/*
 * A HOLD_PIN whose holder got its CPU in time, and its reply.  A holder
 * that got it more than HELPER_HOLD_START_MAX_NS after the request (a
 * host this loaded can do that) must do nothing: that is checked, and the
 * request made again, as the host would at the next idle transition.
 */
static void hold_pin_in_time(struct helper_holds *holds,
			     struct helper_hold_pin *req)
{
	struct helper_hold_counters c;
	int tries;

	for (tries = 0; tries < 50; tries++) {
		int calls = __atomic_load_n(&seen.calls, __ATOMIC_SEQ_CST);

		req->asked_ns = helper_now_ns();
		hold_pin_or_skip(holds, req);
		cr_assert(wait_reply(calls), "the holder never answered");
		if (seen.res.errnum != ETIMEDOUT)
			return;
		cr_assert_not(seen.res.pinned);
		cr_assert(wait_idle(holds, req->cpu));
		if (req->tid > 0)
			cr_assert(affinity_is(req->tid, &orig));
		helper_holds_counters(holds, &c);
		cr_assert_eq(c.late, (uint64_t)tries + 1);
	}
	cr_assert_fail("50 holders in a row got their CPU too late");
}

static struct helper_hold_pin hold_pin_req(pid_t tid, uint64_t lease_ns)
{
	struct helper_hold_pin req;

	memset(&req, 0, sizeof(req));
	req.cpu = cpu;
	req.tid = tid;
	req.orig = orig;
	req.lease_ns = lease_ns;
	req.asked_ns = helper_now_ns();
	if (tid > 0)
		cr_assert_eq(helper_task_stat(tid, &req.starttime, NULL), 0);
	return req;
}

/*
 * A lease long enough that our next step normally comes inside it (what
 * happens when it does not is checked too), and under the kernel's RT
 * throttling (950 ms of each second): a holder that runs is never taken
 * off its CPU before its lease ends.
 */
#define LONG_LEASE_NS	(500 * MS)

Test(helper_hold_pin, pins_answers_and_restores_on_its_own,
     .init = setup, .fini = teardown)
{
	struct helper_holds *holds = hold_pin_setup();
	struct helper_hold_pin req = hold_pin_req(victim.tid, 2 * MS);
	struct helper_hold_counters c;

	hold_pin_in_time(holds, &req);
	cr_assert(wait_idle(holds, cpu), "the holder never ended its lease");
	cr_assert_eq(seen.res.errnum, 0);
	cr_assert(seen.res.pinned);
	cr_assert(seen.pinned_during);
	cr_assert(seen.on_cpu);
	cr_assert_gt(seen.res.holder_tid, 0);
	cr_assert_eq(seen.res.lease_ns, 2 * MS);
	/* Restored with nobody asking. */
	cr_assert(affinity_is(victim.tid, &orig));
	helper_holds_counters(holds, &c);
	cr_assert_eq(c.holds, 1);
	cr_assert_eq(c.pins, 1);
	cr_assert_eq(c.lease_ends, 1);
	cr_assert_geq(c.hold_ns, 2 * MS);
	cr_assert_geq(c.pin_ns, 2 * MS);
	/* No timer needed for it. */
	cr_assert_eq(helper_holds_next_deadline(holds), UINT64_MAX);
	helper_holds_destroy(holds);
}

Test(helper_hold_pin, busy_while_held_then_free_again, .init = setup,
     .fini = teardown)
{
	struct helper_holds *holds = hold_pin_setup();
	struct helper_hold_pin req = hold_pin_req(0, LONG_LEASE_NS);
	struct helper_hold_counters c;
	int r;

	hold_pin_in_time(holds, &req);
	cr_assert_not(seen.res.pinned);
	r = helper_hold_pin(holds, &req);
	helper_holds_counters(holds, &c);
	if (c.lease_ends) {
		/* We were kept off a CPU for the whole lease: the CPU was
		 * free again, and may have taken this second hold. */
		cr_assert(r == -EBUSY || r == 0);
	} else {
		cr_assert_eq(r, -EBUSY);
	}
	/* Not a RELEASE's to end. */
	cr_assert_eq(helper_release(holds, cpu, &(uint64_t){ 0 },
				    &(bool){ false }), -ENOENT);
	helper_holds_release_all(holds);
	cr_assert(wait_idle(holds, cpu));
	req.lease_ns = MS;
	hold_pin_in_time(holds, &req);
	cr_assert(wait_idle(holds, cpu));
	cr_assert_eq(seen.res.errnum, 0);
	req.cpu = CPU_SETSIZE;
	cr_assert_eq(helper_hold_pin(holds, &req), -EINVAL);
	helper_holds_destroy(holds);
}

Test(helper_hold_pin, release_all_cuts_the_lease_and_restores, .init = setup,
     .fini = teardown)
{
	struct helper_holds *holds = hold_pin_setup();
	struct helper_hold_pin req = hold_pin_req(victim.tid, LONG_LEASE_NS);
	struct helper_hold_counters c;
	unsigned int cut;

	hold_pin_in_time(holds, &req);
	cr_assert(seen.res.pinned);
	cr_assert(seen.pinned_during);
	cut = helper_holds_release_all(holds);
	/* Restored either way: by the cut, or (kept off a CPU for the
	 * whole lease) by the holder at its lease. */
	cr_assert(affinity_is(victim.tid, &orig));
	helper_holds_counters(holds, &c);
	cr_assert_eq(c.holds, 1);
	if (cut)
		cr_assert_eq(cut, 1);
	else
		cr_assert_eq(c.lease_ends, 1);
	helper_holds_destroy(holds);
}

Test(helper_hold_pin, a_late_holder_does_nothing, .init = setup,
     .fini = teardown)
{
	struct helper_holds *holds = hold_pin_setup();
	struct helper_hold_pin req = hold_pin_req(victim.tid, MS);
	struct helper_hold_counters c;

	req.asked_ns -= HELPER_HOLD_START_MAX_NS + MS;
	hold_pin_or_skip(holds, &req);
	cr_assert(wait_idle(holds, cpu));
	cr_assert_eq(seen.calls, 1);
	cr_assert_eq(seen.res.errnum, ETIMEDOUT);
	cr_assert_not(seen.res.pinned);
	cr_assert(affinity_is(victim.tid, &orig));
	helper_holds_counters(holds, &c);
	cr_assert_eq(c.late, 1);
	cr_assert_eq(c.pins, 0);
	helper_holds_destroy(holds);
}

Test(helper_pin, holder_pins_are_journaled_until_their_holder_is_done)
{
	struct helper_pins pins;
	uint64_t st;
	uint32_t prev, granted;
	cpu_set_t saved, none, this;

	CPU_ZERO(&none);
	CPU_ZERO(&this);
	CPU_SET(cpu, &this);
	helper_pins_init(&pins, journal);
	cr_assert_eq(helper_pins_journal_held(&pins, victim.tid, cpu,
					      1000 * MS, &none, &st, &saved,
					      &prev), 0);
	cr_assert(CPU_EQUAL(&saved, &orig));
	cr_assert_eq(journal_lines(), 1);
	/* The journal only records: the holder makes the pin. */
	cr_assert(affinity_is(victim.tid, &orig));
	/* Pinned already: by a holder, so neither another holder nor PIN. */
	cr_assert_eq(helper_pins_journal_held(&pins, victim.tid, cpu,
					      1000 * MS, &none, &st, &saved,
					      &prev), -EBUSY);
	cr_assert_eq(helper_pin(&pins, victim.tid, cpu, 0, 1000 * MS,
				&granted, &prev), -EBUSY);
	cr_assert_eq(helper_unpin(&pins, victim.tid, 1000 * MS, &st), -ENOENT);
	/* No lease here, and the loop's expiry leaves it alone. */
	cr_assert_eq(helper_pins_next_deadline(&pins), UINT64_MAX);
	cr_assert_eq(helper_pins_expire(&pins, UINT64_MAX - 1), 0);
	cr_assert_eq(journal_lines(), 1);
	/* Its holder done: dropped, without touching the thread. */
	helper_pins_forget_held(&pins, &this);
	cr_assert_eq(journal_lines(), 0);
	cr_assert_eq(pins.count, 0);

	/* release_all (host gone) restores what a holder may have left. */
	cr_assert_eq(helper_pins_journal_held(&pins, victim.tid, cpu,
					      1000 * MS, &none, &st, &saved,
					      &prev), 0);
	cr_assert_eq(sched_setaffinity(victim.tid, sizeof(this), &this), 0);
	cr_assert_eq(helper_pins_release_all(&pins), 1);
	cr_assert(affinity_is(victim.tid, &orig));
	cr_assert_eq(journal_lines(), 0);
	helper_pins_deinit(&pins);
}

Test(helper_pin, real_time_targets_above_the_holder_are_not_holdable)
{
	struct sched_param p = { .sched_priority = HELPER_HOLD_PRIO + 1 };
	struct victim rt = { 0 };
	int policy, prio;

	cr_assert_eq(helper_task_holdable(victim.tid, &policy, &prio), 0);
	cr_assert_eq(policy, SCHED_OTHER);
	cr_assert_eq(pipe(rt.pipe), 0);
	cr_assert_eq(pthread_create(&rt.thread, NULL, victim_main, &rt), 0);
	while (!__atomic_load_n(&rt.tid, __ATOMIC_SEQ_CST))
		usleep(100);
	if (sched_setscheduler(rt.tid, SCHED_FIFO, &p) < 0) {
		victim_stop(&rt);
		cr_skip_test("no permission for SCHED_FIFO here");
	}
	cr_assert_eq(helper_task_holdable(rt.tid, &policy, &prio), -EPERM);
	cr_assert_eq(policy, SCHED_FIFO);
	cr_assert_eq(prio, HELPER_HOLD_PRIO + 1);
	p.sched_priority = HELPER_HOLD_PRIO;
	cr_assert_eq(sched_setscheduler(rt.tid, SCHED_FIFO, &p), 0);
	cr_assert_eq(helper_task_holdable(rt.tid, &policy, &prio), 0);
	victim_stop(&rt);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char readahead_dir[] = "/tmp/ivm-readahead-XXXXXX";

static void remove_readahead_dir(void)
{
	IVM_TMP_REMOVE_TREE(readahead_dir);
}

/* READAHEAD: a file of this process, checked by inode, read in pieces. */
Test(helper_readahead, reads_the_range_of_the_right_file,
     .fini = remove_readahead_dir)
{
	char *dir = readahead_dir, path[64], other[64];
	static uint8_t data[200 * 1024];
	struct stat st;
	uint64_t got = 0;
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lib.so", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	memset(data, 0x5a, sizeof(data));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	cr_assert_eq(fstat(fd, &st), 0);
	close(fd);
	fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	close(fd);

	/* More than one piece, as this process sees the file. */
	cr_assert_eq(helper_readahead(getpid(), path, strlen(path), st.st_ino,
				      4096, 150 * 1024, &got), 0);
	cr_assert_eq(got, 150 * 1024);
	/* Up to the end of the file, and nothing past it. */
	cr_assert_eq(helper_readahead(getpid(), path, strlen(path), st.st_ino,
				      100 * 1024, 1 << 20, &got), 0);
	cr_assert_eq(got, 100 * 1024);
	cr_assert_eq(helper_readahead(getpid(), path, strlen(path), st.st_ino,
				      1 << 20, 4096, &got), 0);
	cr_assert_eq(got, 0);
	/* path_len bounds the name: "lib.so" cut to "lib" is no file. */
	cr_assert_eq(helper_readahead(getpid(), path, strlen(path) - 3,
				      st.st_ino, 0, 4096, &got), -ENOENT);
	/* Another file, a directory, another process's missing root. */
	cr_assert_eq(helper_readahead(getpid(), other, strlen(other),
				      st.st_ino, 0, 4096, &got), -ESTALE);
	cr_assert_eq(helper_readahead(getpid(), dir, strlen(dir), st.st_ino,
				      0, 4096, &got), -ESTALE);
	cr_assert_lt(helper_readahead(0x7ffffff0, path, strlen(path),
				      st.st_ino, 0, 4096, &got), 0);
}
