// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernel/last_ran.h"
#include "profile/profiler_int.h"
#include "profile/replay.h"

/* Halted per the vCPU thread's state letter (after "comm) "). */
struct ivm_error *thread_halted(struct vcpu_poll *vp, bool *ret)
{
	char buf[512];
	ssize_t n = pread(vp->stat_fd, buf, sizeof(buf) - 1, 0);
	char *paren;

	if (n <= 0)
		return ivm_error_create(IVM_ERROR_GONE,
					"the vCPU thread is gone");
	buf[n] = '\0';
	paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ' || !paren[2])
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"unexpected /proc stat line");
	/* R running; S/D sleeping in the host: the vCPU is halted. */
	*ret = paren[2] == 'S' || paren[2] == 'D';
	return NULL;
}

/* One kvm tracepoint record: update the halted state of its vCPU. */
static int on_kvm_record(void *ctx, const void *data, size_t size, int cpu,
			 uint64_t ts)
{
	struct profiler *p = ctx;
	struct ivm_kvm_event ev;
	struct ivm_error *err;
	size_t i;

	(void)cpu;
	(void)ts;
	err = ivm_kvm_events_decode(p->kvm_events, data, size, &ev);
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	for (i = 0; i < p->guest->nr_vcpus; i++) {
		if (p->guest->vcpus[i].tid != ev.tid)
			continue;
		if (ev.kind == IVM_KVM_EXIT)
			p->vcpus[i].halted = ev.halt;
		else
			p->vcpus[i].halted = false;	/* woken or entering */
		break;
	}
	return 0;
}

static int vcpu_of_tid(const struct profiler *p, int32_t tid)
{
	size_t i;

	for (i = 0; i < p->guest->nr_vcpus; i++)
		if (p->guest->vcpus[i].tid == tid)
			return (int)i;
	return -1;
}

/* A halted vCPU's thread was woken (or KVM ended its halt) at ts. */
static void vcpu_woke(struct profiler *p, int v, uint64_t ts)
{
	size_t k;

	/*
	 * No look now: the vCPU has not run yet, so the guest still shows
	 * it idle, and a look at real-time priority would only delay the
	 * thread that was just woken.  The follow-up looks see what it
	 * dispatched, when there is a from-idle task to see.
	 */
	if (p->vcpus[v].halted &&
	    ivm_dispatch_awaits_from_idle(p->dispatch, (uint32_t)v)) {
		for (k = 0; k < NR_FOLLOW; k++)
			p->vcpus[v].follow_at[k] = ts + follow_ns[k];
		if (p->vcpus[v].follow_at[0] < p->next_look_ns)
			p->next_look_ns = p->vcpus[v].follow_at[0];
	}
	p->vcpus[v].halted = false;
}

/*
 * KVM, next to the scheduler's events: a HLT exit starts a halt (look now,
 * as at a sleep: the thread may poll instead of sleeping, or never sleep),
 * kvm_vcpu_wakeup ends one.
 */
static void on_kvm_halt_record(struct profiler *p,
			       const struct ivm_kvm_event *kev, uint64_t ts)
{
	int v = vcpu_of_tid(p, kev->tid);

	if (v < 0)
		return;
	if (kev->kind == IVM_KVM_EXIT && kev->halt) {
		p->vcpus[v].halted = true;
		p->look_due = true;
		ivm_idle_periods_host_halt_exit(p->periods, (uint32_t)v,
						kev->exit_reason, ts);
	} else if (kev->kind == IVM_KVM_VCPU_WAKEUP) {
		vcpu_woke(p, v, ts);
		ivm_idle_periods_host_halt_end(p->periods, (uint32_t)v,
					       kev->waited, ts);
	}
}

/* The gate's sleeps stamped before ts (all: UINT64_MAX), in order. */
static void gate_sleeps_before(struct profiler *p, uint64_t ts)
{
	size_t i = 0, k;

	while (i < p->nr_gate_pend && p->gate_pend[i].ts <= ts) {
		ivm_idle_periods_host_sleep(p->periods, p->gate_pend[i].vcpu,
					    p->gate_pend[i].ts);
		i++;
	}
	for (k = 0; i < p->nr_gate_pend; )
		p->gate_pend[k++] = p->gate_pend[i++];
	p->nr_gate_pend = k;
}

/*
 * One record of the sched source: a vCPU thread slept, woke, or (KVM)
 * exited for HLT or ended a halt.  Only candidates: idle_periods confirms them against
 * the guest at the next look.
 */
static int on_sched_record(void *ctx, const void *data, size_t size, int cpu,
			   uint64_t ts)
{
	struct profiler *p = ctx;
	struct ivm_sched_event ev;
	struct ivm_error *err;
	int v;

	(void)cpu;
	p->res->trace_records++;
	gate_sleeps_before(p, ts);
	err = ivm_sched_events_decode(p->sched_events, data, size, &ev);
	if (err && err->code == IVM_ERROR_NOT_FOUND && p->kvm_events) {
		struct ivm_kvm_event kev;

		ivm_error_destroy(err);
		err = ivm_kvm_events_decode(p->kvm_events, data, size, &kev);
		if (!err)
			on_kvm_halt_record(p, &kev, ts);
	}
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (ev.kind == IVM_SCHED_SWITCH) {
		int next = vcpu_of_tid(p, ev.next_tid);

		v = vcpu_of_tid(p, ev.prev_tid);
		if (v >= 0 && ivm_sched_state_sleeping(ev.prev_state)) {
			p->vcpus[v].halted = true;
			/* With the gate, its records are the halts to judge. */
			if (p->gate) {
				ivm_idle_periods_host_sleep_quiet(p->periods,
								  (uint32_t)v);
			} else {
				p->look_due = true;
				ivm_idle_periods_host_sleep(p->periods,
							    (uint32_t)v, ts);
			}
		}
		if (next >= 0)
			p->vcpus[next].halted = false;
		return 0;
	}
	v = vcpu_of_tid(p, ev.tid);
	if (v >= 0) {
		vcpu_woke(p, v, ts);
		ivm_idle_periods_host_wake(p->periods, (uint32_t)v, ts);
	}
	return 0;
}

/* One record of the host's side: a vCPU thread's switch or wakeup. */
static int on_host_record(void *ctx, const void *data, size_t size, int cpu,
			  uint64_t ts)
{
	struct profiler *p = ctx;
	struct ivm_sched_event ev;
	struct ivm_error *err;

	(void)cpu;
	p->res->host_trace_records++;
	err = ivm_sched_events_decode(p->sched_events, data, size, &ev);
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (ev.kind == IVM_SCHED_SWITCH)
		ivm_host_sched_switch(p->host, vcpu_of_tid(p, ev.prev_tid),
				      ev.prev_state, ev.prev_comm,
				      vcpu_of_tid(p, ev.next_tid), ev.next_comm,
				      ts);
	else
		ivm_host_sched_wake(p->host, vcpu_of_tid(p, ev.tid), ts);
	return 0;
}

/* Records s lost since *seen was taken (its running count); *seen moves on. */
static uint64_t lost_since(const struct ivm_trace_session *s, uint64_t *seen)
{
	uint64_t lost = ivm_trace_session_lost(s), n = lost - *seen;

	*seen = lost;
	return n;
}

/* The host's side up to now; its losses end every wait under way. */
static struct ivm_error *read_host_side(struct profiler *p)
{
	struct ivm_error *err;

	if (!p->host_trace)
		return NULL;
	err = ivm_trace_session_read(p->host_trace, on_host_record, p);
	if (lost_since(p->host_trace, &p->host_trace_lost))
		ivm_host_sched_lost(p->host);
	return err;
}

/* QEMU's own threads' wakeups and switch-ins: its I/O path's hand-offs. */
static void on_disk_sched_record(struct profiler *p, const void *data,
				 size_t size, uint64_t ts)
{
	struct ivm_sched_event ev;
	struct ivm_error *err;

	err = ivm_sched_events_decode(p->sched_events, data, size, &ev);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	/* The vCPU threads are not among its threads (host_sched.h's). */
	if (ev.kind == IVM_SCHED_SWITCH)
		ivm_disk_service_switch(p->disk, ev.prev_tid, ev.next_tid, ts);
	else
		ivm_disk_service_wake(p->disk, ev.tid, ev.waker, ts);
}

/*
 * One record of the disk's side: a QEMU thread entered or left an I/O
 * call, or one of its threads was woken or switched in.
 */
static int on_disk_record(void *ctx, const void *data, size_t size, int cpu,
			  uint64_t ts)
{
	struct profiler *p = ctx;
	struct ivm_disk_syscall sc;
	enum ivm_disk_kind kind;
	struct ivm_error *err;

	(void)cpu;
	p->disk_trace_records++;
	err = ivm_disk_syscalls_decode(p->disk_syscalls, data, size, &sc);
	if (err && err->code == IVM_ERROR_NOT_FOUND) {
		ivm_error_destroy(err);
		on_disk_sched_record(p, data, size, ts);
		return 0;
	}
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	if (!ivm_disk_syscall_kind(sc.nr, &kind))
		return 0;
	if (sc.exit)
		ivm_disk_service_exit(p->disk, sc.tid, kind, sc.ret, ts);
	else
		ivm_disk_service_enter(p->disk, sc.tid, kind, ts);
	return 0;
}

/* The disk's side up to now; its losses end every call in flight. */
static struct ivm_error *read_disk_side(struct profiler *p)
{
	struct ivm_error *err;

	if (!p->disk_trace)
		return NULL;
	err = ivm_trace_session_read(p->disk_trace, on_disk_record, p);
	if (lost_since(p->disk_trace, &p->disk_trace_lost))
		ivm_disk_service_lost(p->disk);
	return err;
}

/*
 * The host's and disk's sides are read at least this often between
 * periods, so that what they hold stays small; 2 MiB per CPU buffer
 * would last seconds.
 */
#define HOST_SIDES_EVERY_NS 50000000ull

/*
 * Reading them at every step was two thirds of the loop's read() calls
 * (two per host CPU and session, the second to hear EAGAIN), and what
 * they hold is asked only when a period is written: most steps write
 * none (a vCPU thread kicked and still halted, a wakeup's follow-up).
 */
struct ivm_error *host_sides_read(struct profiler *p, bool force)
{
	struct ivm_error *err;

	if (!p->host_trace && !p->disk_trace)
		return NULL;
	if (!force && p->host_sides_read_ns >= p->events_read_ns)
		return NULL;
	p->host_sides_read_ns = ivm_mono_ns();
	p->host_sides_reads++;
	err = read_host_side(p);
	if (!err)
		err = read_disk_side(p);
	return err;
}

/*
 * A sleep the idle gate let through: look now, and first tell the
 * vCPU's period about the sleeps it let pass before (idle_gate.h).
 */
static void on_gate_record(void *ctx, const struct ivm_gate_record *r)
{
	struct profiler *p = ctx;
	struct vcpu_poll *vp;

	if (r->vcpu >= p->guest->nr_vcpus)
		return;
	vp = &p->vcpus[r->vcpu];
	vp->halted = true;
	p->look_due = true;
	/* Its stamp among the session's records read next (a full list
	 * hands the oldest over now). */
	if (p->nr_gate_pend == sizeof(p->gate_pend) / sizeof(p->gate_pend[0]))
		gate_sleeps_before(p, p->gate_pend[0].ts);
	p->gate_pend[p->nr_gate_pend++] = (struct gate_sleep){ r->vcpu, r->ts };
	if (!r->passed)
		return;
	vp->passed += r->passed;
	vp->passed_ts = r->passed_ts;
	ivm_idle_gate_passed_irqs(p->gate, r, &vp->passed_irqs);
}

/* The gate's records waiting, dropped (fn NULL) after a gap. */
void gate_read(struct profiler *p, bool drop)
{
	size_t i;

	if (!p->gate)
		return;
	ivm_idle_gate_read(p->gate, drop ? NULL : on_gate_record, p);
	if (drop)
		p->nr_gate_pend = 0;
	for (i = 0; drop && i < p->guest->nr_vcpus; i++)
		p->vcpus[i].passed = 0;
}

struct ivm_error *poll_halted(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	struct ivm_error *err;
	size_t i;

	if (p->source == IVM_IDLE_SOURCE_KVM)
		/* State carries over between polls: only changes arrive. */
		return ivm_trace_session_read(p->trace, on_kvm_record, p);
	if (p->source == IVM_IDLE_SOURCE_SCHED) {
		uint64_t now = ivm_mono_ns();

		if (now - p->host_sides_read_ns >= HOST_SIDES_EVERY_NS) {
			err = host_sides_read(p, true);
			if (err)
				return err;
		}
		p->events_read_ns = now;
		gate_read(p, false);
		err = ivm_trace_session_read(p->trace, on_sched_record, p);
		gate_sleeps_before(p, UINT64_MAX);
		ivm_idle_periods_host_lost(p->periods,
					   lost_since(p->trace, &p->trace_lost));
		return err;
	}

	if (p->source == IVM_IDLE_SOURCE_QMP) {
		err = ivm_guest_refresh_vcpus(g);
		if (err)
			return err;
		for (i = 0; i < g->nr_vcpus; i++)
			p->vcpus[i].halted = g->vcpus[i].halted;
		return NULL;
	}
	/*
	 * Thread source: read lazily per vCPU in poll_once.  Each /proc stat
	 * read costs about 10 us, five times the guest read that tells the
	 * same (the vCPU's current task is its idle task), so it is only
	 * read where it adds something: at a transition, and when the guest
	 * read failed.
	 */
	return NULL;
}

/*
 * The host's side: a second session with every switch of the vCPU
 * threads (the pid list alone) and their wakeups, read when a period is
 * written (host_sides_read) and never polled, so its records wake
 * nobody.  Not needed to profile: a
 * host that cannot give it profiles without it.
 *
 * Its wakeups are sched_wakeup where there is one: the enqueue, where the
 * kernel's run_delay starts.  sched_waking (the idle signal's) fires when
 * the waker asks; a woken thread of an idle host CPU is enqueued only when
 * that CPU takes the waker's IPI.  On this project's host (itself a guest,
 * its idle CPUs not polling) that was about 9 us a wakeup, and t_59's
 * steal ran 6-14% above run_delay.
 */
static void setup_host_side(struct profiler *p, const char **idle_events,
			    const pid_t *tids, size_t n)
{
	const char *events[2] = { idle_events[0], idle_events[1] };
	struct ivm_guest *g = p->guest;
	struct ivm_error *err;
	char *filter;
	size_t i;

	if (ivm_sched_events_has_wakeup(p->sched_events))
		events[1] = "sched:sched_wakeup";
	err = ivm_host_sched_create(g->nr_vcpus, &p->host);
	if (!err)
		err = ivm_trace_session_create(events, 2, tids, n, 0,
					       &p->host_trace);
	filter = err ? NULL : ivm_sched_wake_filter(tids, n);
	if (filter) {
		ivm_error_destroy(ivm_trace_session_filter(p->host_trace,
							   events[1], filter));
		free(filter);
	}
	if (err) {
		ivm_error_destroy(err);
		ivm_host_sched_destroy(p->host);
		p->host = NULL;
		return;
	}
	/* A wakeup read after its switch-in would lose that wait. */
	ivm_trace_session_hold(p->host_trace, true);
	/* The kernel's own sum beside ours. */
	for (i = 0; i < g->nr_vcpus; i++)
		ivm_error_destroy(ivm_host_sched_watch(p->host, i,
						       g->vcpus[i].tid));
}

/* The threads of process pid (at most max), from /proc/PID/task. */
static size_t process_threads(pid_t pid, pid_t *tids, size_t max)
{
	char path[64];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while (n < max && (e = readdir(d))) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);

		if (!*end && tid > 0 && tid <= INT32_MAX)
			tids[n++] = (pid_t)tid;
	}
	closedir(d);
	return n;
}

/*
 * The disk's side: QEMU's I/O syscalls (disk_syscalls.h) and its threads'
 * switches and wakeups (the I/O path's hand-offs), on its threads but the
 * vCPUs' and the threads they start (the thread pool's workers come and
 * go), in a session of its own that wakes nobody, like the host's side.
 * Not needed to profile either: a host that refuses it profiles without
 * it, and the report says the disk was not followed.  waking is the
 * wakeup event the sched source uses.
 */
static void setup_disk_side(struct profiler *p, const char *waking)
{
	const char *const events[] = {
		"raw_syscalls:sys_enter", "raw_syscalls:sys_exit",
		"sched:sched_switch", waking,
	};
	struct ivm_error *err;
	pid_t tids[256];
	size_t n, i, k;

	if (p->guest->qemu_pid <= 0 || !p->cfg->disk)
		return;
	/*
	 * Not the vCPU threads: the host's side has their switches, they
	 * make no I/O call with aio=threads (a worker they wake is in the
	 * list), and they switch most.
	 */
	n = process_threads(p->guest->qemu_pid, tids, 256);
	for (i = k = 0; i < n; i++)
		if (vcpu_of_tid(p, tids[i]) < 0)
			tids[k++] = tids[i];
	n = k;
	if (!n)
		return;
	err = ivm_disk_syscalls_load(NULL, &p->disk_syscalls);
	if (!err)
		err = ivm_disk_service_create(&p->disk);
	if (!err)
		err = ivm_trace_session_create(events, 4, tids, n,
					       IVM_TRACE_FOLLOW_FORKS,
					       &p->disk_trace);
	/* Only the I/O calls are written to the ring buffer. */
	if (!err)
		err = ivm_trace_session_filter(p->disk_trace, events[0],
					       ivm_disk_syscall_filter());
	if (!err)
		err = ivm_trace_session_filter(p->disk_trace, events[1],
					       ivm_disk_syscall_filter());
	for (i = 0; !err && i < n; i++)
		ivm_disk_service_qemu_thread(p->disk, tids[i]);
	/* A call's hand-offs cross CPUs: read them in order. */
	if (!err)
		ivm_trace_session_hold(p->disk_trace, true);
	if (err) {
		fprintf(stderr, "idlevm: warning: the disk's host side is not followed: %s\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
		ivm_trace_session_destroy(p->disk_trace);
		ivm_disk_service_destroy(p->disk);
		ivm_disk_syscalls_destroy(p->disk_syscalls);
		p->disk_trace = NULL;
		p->disk = NULL;
		p->disk_syscalls = NULL;
	}
}

struct ivm_error *setup_sched_source(struct profiler *p)
{
	const char *events[5] = { "sched:sched_switch" }, *polled[4];
	struct ivm_guest *g = p->guest;
	struct ivm_error *err;
	size_t i, n = 0, nr_events = 1;
	pid_t tids[256];
	bool kvm = false;
	char *filter;

	/* The event formats are read from tracefs: mount it first. */
	err = ivm_tracefs_ensure(&p->res->tracefs_mounted);
	if (!err)
		err = ivm_sched_events_load(NULL, &p->sched_events);
	if (err)
		return err;
	/* One record per wakeup: sched_waking, or sched_wakeup without it. */
	events[nr_events++] = ivm_sched_events_has_waking(p->sched_events) ?
			      "sched:sched_waking" : "sched:sched_wakeup";
	/*
	 * KVM: its halts too (they never fire under TCG).  A HLT exit is a
	 * halt that the scheduler sees only once halt polling gives up, if
	 * at all, and kvm_vcpu_wakeup ends every halt, polled or slept.
	 */
	kvm = g->kvm;
	if (kvm) {
		err = ivm_kvm_events_load(NULL, &p->kvm_events);
		if (err)
			return err;
		events[nr_events++] = "kvm:kvm_exit";
		events[nr_events++] = "kvm:kvm_vcpu_wakeup";
	}
	for (i = 0; i < g->nr_vcpus && n < 256; i++)
		tids[n++] = g->vcpus[i].tid;
	/*
	 * The wakeups go in quietly: each woke the loop for a step that
	 * looked at nothing (a look waits for the vCPU to run: vcpu_woke),
	 * a third of its steps on web01, and a step's wakeup costs more
	 * than its reads where the host is itself a guest
	 * (tests/bench/bench_wakeup.c).  The sleep after one wakes the loop,
	 * which reads both in order.
	 */
	polled[0] = events[0];
	for (i = 2; i < nr_events; i++)
		polled[i - 1] = events[i];
	err = ivm_trace_session_create(polled, nr_events - 1, tids, n, 0,
				       &p->trace);
	if (!err)
		err = ivm_trace_session_add_quiet(p->trace, events + 1, 1,
						  tids, n, 0);
	if (err)
		return err;
	/*
	 * Every record traced wakes the loop, at real-time priority: only
	 * the vCPU threads' sleeps (sched_events.h says why the pid list is
	 * not enough) and their HLT exits.  A kernel that refuses the
	 * filter gets the coarser one, and just wakes us more.
	 */
	filter = ivm_sched_switch_filter(tids, n);
	if (!filter)
		return &ivm_enomem;
	err = ivm_trace_session_filter(p->trace, "sched:sched_switch", filter);
	free(filter);
	if (err) {
		ivm_error_destroy(err);
		ivm_error_destroy(ivm_trace_session_filter(
			p->trace, "sched:sched_switch", "prev_state & 131"));
	}
	setup_host_side(p, events, tids, n);
	setup_disk_side(p, events[1]);
	filter = ivm_sched_wake_filter(tids, n);
	if (!filter)
		return &ivm_enomem;
	ivm_error_destroy(ivm_trace_session_filter(p->trace, events[1],
						   filter));
	free(filter);
	if (kvm)
		ivm_error_destroy(ivm_trace_session_filter(
			p->trace, "kvm:kvm_exit", ivm_kvm_exit_hlt_filter()));
	return NULL;
}
