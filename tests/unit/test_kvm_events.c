// SPDX-License-Identifier: MIT
/*
 * KVM tracepoint decoding against the real event formats of a Linux 6.18
 * host (tests/unit/data/kvm/, copied from its tracefs), and the trace
 * session plumbing against real sched_switch events of this process.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profile/kvm_events.h"
#include "profile/trace_session.h"
#include "trace_records.h"

#define DATA "tests/unit/data/kvm/"

static struct ivm_kvm_events *load(void)
{
	char *x = read_format(DATA, "kvm_exit");
	char *e = read_format(DATA, "kvm_entry");
	char *w = read_format(DATA, "kvm_vcpu_wakeup");
	struct ivm_kvm_events *ev;

	cr_assert_null(ivm_kvm_events_parse(x, e, w, &ev));
	free(x);
	free(e);
	free(w);
	return ev;
}

static void put(uint8_t *rec, int off, uint64_t v, int size)
{
	int i;

	for (i = 0; i < size; i++)
		rec[off + i] = (uint8_t)(v >> (8 * i));
}

/*
 * A kvm_exit record as the 6.18 kernel lays it out (offsets from the
 * recorded format: type 0, pid 4, exit_reason 8, guest_rip 16, isa 24,
 * vcpu_id 56; 72 bytes).  ID 103 in that kernel.
 */
static void exit_record(uint8_t rec[72], uint32_t reason, uint32_t isa)
{
	memset(rec, 0, 72);
	put(rec, 0, 103, 2);
	put(rec, 4, 4242, 4);
	put(rec, 8, reason, 4);
	put(rec, 16, 0xffffffff81a0b0c0ull, 8);
	put(rec, 24, isa, 4);
	put(rec, 56, 1, 4);
}

Test(kvm_events, vmx_and_svm_halts)
{
	struct ivm_kvm_events *ev = load();
	struct ivm_kvm_event e;
	uint8_t rec[72];

	exit_record(rec, 12, 1);		/* VMX EXIT_REASON_HLT */
	cr_assert_null(ivm_kvm_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert_eq(e.kind, IVM_KVM_EXIT);
	cr_assert_eq(e.tid, 4242);
	cr_assert_eq(e.vcpu_id, 1);
	cr_assert_eq(e.guest_rip, 0xffffffff81a0b0c0ull);
	cr_assert(e.halt);
	exit_record(rec, 0x78, 2);		/* SVM_EXIT_HLT */
	cr_assert_null(ivm_kvm_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert(e.halt);
	exit_record(rec, 30, 1);		/* VMX I/O instruction */
	cr_assert_null(ivm_kvm_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert_not(e.halt);
	exit_record(rec, 0x8000000c, 1);	/* failed VM entry, not a halt */
	cr_assert_null(ivm_kvm_events_decode(ev, rec, sizeof(rec), &e));
	cr_assert_not(e.halt);
	ivm_kvm_events_destroy(ev);
}

Test(kvm_events, wakeup_and_entry)
{
	struct ivm_kvm_events *ev = load();
	struct ivm_kvm_event e;
	uint8_t rec[40] = { 0 };

	put(rec, 0, 41, 2);			/* kvm_vcpu_wakeup */
	put(rec, 4, 77, 4);
	put(rec, 8, 123456, 8);
	rec[16] = 1;				/* waited */
	cr_assert_null(ivm_kvm_events_decode(ev, rec, 24, &e));
	cr_assert_eq(e.kind, IVM_KVM_VCPU_WAKEUP);
	cr_assert_eq(e.tid, 77);
	cr_assert(e.waited);
	cr_assert_eq(e.halt_ns, 123456);
	memset(rec, 0, sizeof(rec));
	put(rec, 0, 115, 2);			/* kvm_entry */
	put(rec, 8, 3, 4);
	put(rec, 16, 0x401000, 8);
	cr_assert_null(ivm_kvm_events_decode(ev, rec, 40, &e));
	cr_assert_eq(e.kind, IVM_KVM_ENTRY);
	cr_assert_eq(e.vcpu_id, 3);
	cr_assert_eq(e.guest_rip, 0x401000);
	ivm_kvm_events_destroy(ev);
}

Test(kvm_events, short_or_foreign_records)
{
	struct ivm_kvm_events *ev = load();
	struct ivm_kvm_event e;
	struct ivm_error *err;
	uint8_t rec[72];

	exit_record(rec, 12, 1);
	err = ivm_kvm_events_decode(ev, rec, 40, &e);	/* cut at vcpu_id */
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_kvm_events_decode(ev, rec, 1, &e);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	put(rec, 0, 999, 2);				/* another event */
	err = ivm_kvm_events_decode(ev, rec, sizeof(rec), &e);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_kvm_events_destroy(ev);
}

Test(kvm_events, format_without_needed_field)
{
	char *x = read_format(DATA, "kvm_exit");
	char *w = read_format(DATA, "kvm_vcpu_wakeup");
	/* sched_switch's format where kvm_entry's should be. */
	char *bad = read_format(DATA, "../sched/sched_switch");
	struct ivm_kvm_events *ev;
	struct ivm_error *err;

	err = ivm_kvm_events_parse(x, bad, w, &ev);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID, "%s", err->message);
	ivm_error_destroy(err);
	free(x);
	free(w);
	free(bad);
}

struct count_ctx {
	struct tep_handle *tep;
	int tid, mine;
};

static int count_mine(void *arg, const void *data, size_t size, int cpu,
		      uint64_t ts)
{
	struct count_ctx *c = arg;
	const uint8_t *p = data;

	(void)cpu;
	(void)ts;
	if (size >= 8 && (int)((uint32_t)p[4] | (uint32_t)p[5] << 8 |
			       (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24) ==
			 c->tid)
		c->mine++;
	return 0;
}

Test(trace_session, records_this_threads_sched_switches)
{
	const char *events[] = { "sched:sched_switch" };
	struct ivm_trace_session *s;
	struct count_ctx c = { 0 };
	struct ivm_error *err;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	int i;

	if (geteuid() != 0)
		cr_skip_test("tracefs needs root");
	err = ivm_trace_session_create(events, 1, &tid, 1, 0, &s);
	if (err && err->code == IVM_ERROR_OS) {
		cr_skip_test("no tracefs here: %s", err->message);
		ivm_error_destroy(err);
		return;
	}
	cr_assert_null(err, "%s", err ? err->message : "");
	c.tid = tid;
	/* Each sleep switches this thread out: a sched_switch of ours. */
	for (i = 0; i < 5; i++) {
		struct timespec ts = { 0, 2000000 };

		nanosleep(&ts, NULL);
	}
	cr_assert_null(ivm_trace_session_read(s, count_mine, &c));
	ivm_trace_session_destroy(s);
	cr_assert_geq(c.mine, 5, "saw %d switches of thread %d", c.mine, tid);
}

/*
 * Real records of a KVM guest on this host (tests/unit/data/kvm/README):
 * SeaBIOS idling between timer ticks on vCPU 0.  Each kvm_vcpu_wakeup
 * carries how long its halt lasted, so every halt started after the one
 * before it ended: ts - ns never goes back past the previous wakeup.
 */
Test(kvm_events, decodes_recorded_wakeups_of_a_kvm_guest)
{
	static struct recorded recs[64];
	struct ivm_kvm_events *ev = load();
	size_t n = read_records("tests/unit/data/kvm/kvm.records", recs, 64);
	uint64_t prev = 0;
	size_t i;

	cr_assert_geq(n, 10);
	for (i = 0; i < n; i++) {
		struct ivm_kvm_event e;
		struct ivm_error *err;

		err = ivm_kvm_events_decode(ev, recs[i].data, recs[i].size, &e);
		cr_assert_null(err, "record %zu: %s", i, ivm_error_string(err));
		cr_assert_eq(e.kind, IVM_KVM_VCPU_WAKEUP, "record %zu", i);
		cr_expect_eq(e.tid, 7556);
		cr_expect(e.waited, "record %zu: a halt that long sleeps", i);
		/* The PIT's 18.2 Hz tick ends each halt: about 55 ms. */
		cr_expect(e.halt_ns > 20000000 && e.halt_ns < 60000000,
			  "record %zu: %llu ns", i, (unsigned long long)e.halt_ns);
		cr_expect_geq(recs[i].ts - e.halt_ns, prev, "record %zu", i);
		prev = recs[i].ts;
		/* Cut short, the record is refused, never read past. */
		err = ivm_kvm_events_decode(ev, recs[i].data, 16, &e);
		cr_expect_eq(err ? err->code : 0, IVM_ERROR_PROTOCOL);
		ivm_error_destroy(err);
	}
	ivm_kvm_events_destroy(ev);
}
