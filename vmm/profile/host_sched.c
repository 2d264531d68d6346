// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/host_sched.h"
#include "profile/profile_file.h"
#include "profile/sched_events.h"

enum thread_state {
	UNKNOWN,
	RUNNING,
	ASLEEP,
	WAITING,
};

/* A wait or a sleep that ended, for ivm_host_sched_idle_period. */
struct span {
	uint64_t start, end;
	bool wait;		/* else a sleep */
};

/* An idle period of the guest's, for the waits and sleeps that end later. */
struct period {
	uint64_t start, end;
};

/*
 * A period is written once the profiler saw it end, and the host's
 * records of the sleep it held may be read after that (another session's
 * buffers, another CPU's batch): a third of web01's idle sleep came after
 * its period under TCG.  So the last few periods are kept too, and each
 * wait or sleep is matched with the periods written before it ended, each
 * period with the spans that ended before it was written: every pair is
 * counted once, by whichever of the two came second.  A sleep holds at
 * most a period or two (the guest cannot leave idle while its vCPU's
 * thread sleeps), so a few suffice.
 */
#define RECENT_PERIODS	8

struct vcpu_thread {
	enum thread_state state;
	uint64_t since;		/* ASLEEP, WAITING: from when */
	bool woken;		/* WAITING: after a wakeup (else preempted) */
	char instead[16];	/* WAITING after a preemption: who took it */
	uint64_t wake_ts, wake_delay;	/* its last wakeup, once it ran */
	bool wake_done;
	/*
	 * Woken while still running (since its last switch-in): a wakeup
	 * that raced with its sleep's switch-out (below).
	 */
	bool early_wake;
	uint64_t early_wake_ts;
	struct ivm_host_vcpu totals;
	char names[5][32];	/* its stats' names */
	int schedstat_fd;	/* /proc/TID/schedstat, or -1 */
	uint64_t run_delay0;	/* its run_delay when first read */
	uint64_t run_delay;	/* since then, as last read */
	struct span *spans;	/* ring of IVM_HOST_HISTORY */
	size_t next_span;
	struct period periods[RECENT_PERIODS];	/* a ring */
	size_t next_period;
	/* The waits not yet taken for the file (ivm_host_sched_take_spans). */
	struct ivm_span *out;	/* IVM_HOST_SPANS_MAX */
	size_t nr_out;
	uint32_t out_dropped;
	uint64_t out_dropped_ns;
	uint64_t out_end;	/* where the last span taken ended */
};

struct ivm_host_sched {
	size_t nr;
	struct vcpu_thread *threads;
	uint64_t delays[IVM_HOST_DELAY_BUCKETS];
	/*
	 * A waiting thread switched out again: its switch-in was not seen,
	 * its wait not counted.  Some hosts never record a switch away from
	 * some tasks (a CPU's idle task, say: none of its task-context
	 * events, in any instance, with nothing lost), and the kernel's
	 * run_delay counts what those waits were.  Each ended between its
	 * start and that switch-out: the sum of those spans bounds the
	 * steal the records cannot see.
	 */
	uint64_t missed_switch_ins;
	uint64_t missed_switch_in_ns;
	uint64_t raced_wakeups;		/* wakeups before their sleep's switch */
	struct ivm_host_instead instead[IVM_HOST_INSTEAD_MAX + 1];
	char instead_names[IVM_HOST_INSTEAD_MAX + 1][2][40];
	size_t nr_instead;
};

static const uint64_t delay_bounds[IVM_HOST_DELAY_BUCKETS] = {
	10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull, UINT64_MAX,
};

struct ivm_error *ivm_host_sched_create(size_t nr_vcpus,
					struct ivm_host_sched **ret)
{
	struct ivm_host_sched *hs = calloc(1, sizeof(*hs));
	size_t i;

	if (!hs)
		return &ivm_enomem;
	hs->nr = nr_vcpus;
	hs->threads = calloc(nr_vcpus ? nr_vcpus : 1, sizeof(*hs->threads));
	if (!hs->threads) {
		free(hs);
		return &ivm_enomem;
	}
	for (i = 0; i < nr_vcpus && i < IVM_HOST_STAT_VCPUS; i++) {
		char (*n)[32] = hs->threads[i].names;

		snprintf(n[0], sizeof(n[0]), "vcpu%zu.host_steal_ns", i);
		snprintf(n[1], sizeof(n[1]), "vcpu%zu.host_wake_delay_ns", i);
		snprintf(n[2], sizeof(n[2]), "vcpu%zu.host_wakeups", i);
		snprintf(n[3], sizeof(n[3]), "vcpu%zu.host_sleep_ns", i);
		snprintf(n[4], sizeof(n[4]), "vcpu%zu.host_run_delay_ns", i);
	}
	for (i = 0; i < nr_vcpus; i++)
		hs->threads[i].schedstat_fd = -1;
	for (i = 0; i < nr_vcpus; i++) {
		hs->threads[i].spans = calloc(IVM_HOST_HISTORY,
					      sizeof(struct span));
		hs->threads[i].out = calloc(IVM_HOST_SPANS_MAX,
					    sizeof(struct ivm_span));
		if (!hs->threads[i].spans || !hs->threads[i].out) {
			ivm_host_sched_destroy(hs);
			return &ivm_enomem;
		}
	}
	*ret = hs;
	return NULL;
}

void ivm_host_sched_destroy(struct ivm_host_sched *hs)
{
	size_t i;

	if (!hs)
		return;
	for (i = 0; i < hs->nr; i++) {
		if (hs->threads[i].schedstat_fd >= 0)
			close(hs->threads[i].schedstat_fd);
		free(hs->threads[i].spans);
		free(hs->threads[i].out);
	}
	free(hs->threads);
	free(hs);
}

/* Preempted or yielding: still runnable (TASK_RUNNING, or TASK_REPORT_MAX). */
static bool runnable(uint64_t prev_state)
{
	return (prev_state & ~(uint64_t)0x100) == 0;
}

/* [a, b), if not empty, was in the guest's idle: a wait or a sleep of it. */
static void idle_overlap(struct vcpu_thread *t, uint64_t a, uint64_t b,
			 bool wait)
{
	if (a >= b)
		return;
	if (wait)
		t->totals.steal_idle_ns += b - a;
	else
		t->totals.sleep_idle_ns += b - a;
}

static void remember(struct vcpu_thread *t, uint64_t start, uint64_t end,
		     bool wait)
{
	size_t i, n = t->next_period < RECENT_PERIODS ? t->next_period :
			RECENT_PERIODS;

	t->spans[t->next_span++ % IVM_HOST_HISTORY] =
		(struct span){ start, end, wait };
	for (i = 0; i < n; i++) {
		const struct period *pd = &t->periods[i];

		idle_overlap(t, pd->start > start ? pd->start : start,
			     pd->end < end ? pd->end : end, wait);
	}
}

void ivm_host_sched_idle_period(struct ivm_host_sched *hs, size_t vcpu,
				uint64_t start_ns, uint64_t end_ns)
{
	struct vcpu_thread *t;
	size_t i, n;

	if (vcpu >= hs->nr || end_ns <= start_ns)
		return;
	t = &hs->threads[vcpu];
	n = t->next_span < IVM_HOST_HISTORY ? t->next_span : IVM_HOST_HISTORY;
	/*
	 * Newest first: spans end in the records' time order, so the first
	 * that ended before the period began ends the search (a period is
	 * written when it ends, so only the last few spans are looked at,
	 * not the whole ring, as disk_service.c does for its calls).
	 */
	for (i = 0; i < n; i++) {
		const struct span *sp =
			&t->spans[(t->next_span - 1 - i) % IVM_HOST_HISTORY];
		uint64_t a = sp->start > start_ns ? sp->start : start_ns;
		uint64_t b = sp->end < end_ns ? sp->end : end_ns;

		if (sp->end <= start_ns)
			break;
		idle_overlap(t, a, b, sp->wait);
	}
	t->periods[t->next_period++ % RECENT_PERIODS] =
		(struct period){ start_ns, end_ns };
}

/* A wait, for the timeline: kept if long enough and there is room. */
static void wait_span(struct vcpu_thread *t, uint64_t start, uint64_t ns,
		      bool woken)
{
	if (ns < IVM_HOST_SPAN_MIN_NS || ns > UINT32_MAX ||
	    t->nr_out >= IVM_HOST_SPANS_MAX) {
		t->out_dropped++;
		t->out_dropped_ns += ns;
		return;
	}
	t->out[t->nr_out++] = (struct ivm_span){
		.start_ns = start, .dur_ns = (uint32_t)ns,
		.kind = woken ? IVM_SPAN_WAKE_DELAY : IVM_SPAN_PREEMPTED,
	};
}

static int span_by_start(const void *a, const void *b)
{
	const struct ivm_span *x = a, *y = b;

	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/*
 * The records of the host's CPUs come a CPU's batch at a time, not merged
 * by time, so a wait can end (and be kept) before one that began earlier:
 * the spans are sorted here, and a span that overlaps the one before it
 * (or the last one taken) is cut to what follows it, the time cut counted
 * with the dropped: the lane stays a row of spans one after another, and
 * spans plus dropped time still sum to the steal.
 */
void ivm_host_sched_take_spans(struct ivm_host_sched *hs, size_t vcpu,
			       struct ivm_spans_record *ret)
{
	struct vcpu_thread *t = &hs->threads[vcpu];
	size_t i, nr = 0;

	qsort(t->out, t->nr_out, sizeof(*t->out), span_by_start);
	for (i = 0; i < t->nr_out; i++) {
		struct ivm_span sp = t->out[i];
		uint64_t end = sp.start_ns + sp.dur_ns;

		if (sp.start_ns < t->out_end) {
			uint64_t cut = (end < t->out_end ? end : t->out_end) -
				       sp.start_ns;

			t->out_dropped_ns += cut;
			sp.start_ns += cut;
			sp.dur_ns -= (uint32_t)cut;
		}
		if (sp.dur_ns < IVM_HOST_SPAN_MIN_NS) {
			t->out_dropped++;
			t->out_dropped_ns += sp.dur_ns;
			continue;
		}
		t->out[nr++] = sp;
		t->out_end = end;
	}
	*ret = (struct ivm_spans_record){
		.lane = (uint32_t)vcpu, .min_ns = IVM_HOST_SPAN_MIN_NS,
		.dropped = t->out_dropped, .dropped_ns = t->out_dropped_ns,
		.nr = nr, .spans = t->out,
	};
	t->nr_out = 0;
	t->out_dropped = 0;
	t->out_dropped_ns = 0;
}

static void charge_instead(struct ivm_host_sched *hs, const char *comm,
			   uint64_t ns)
{
	struct ivm_host_instead *in = NULL;
	size_t i;

	/* "" names the rest: a host task without a name is "?". */
	if (!comm[0])
		comm = "?";
	for (i = 0; i < hs->nr_instead && !in; i++)
		if (!strncmp(hs->instead[i].comm, comm, sizeof(in->comm) - 1))
			in = &hs->instead[i];
	if (!in && hs->nr_instead < IVM_HOST_INSTEAD_MAX) {
		i = hs->nr_instead++;
		in = &hs->instead[i];
		memcpy(in->comm, comm, strnlen(comm, sizeof(in->comm) - 1));
		snprintf(hs->instead_names[i][0], sizeof(hs->instead_names[i][0]),
			 "host_instead_ns:%.15s", comm);
		snprintf(hs->instead_names[i][1], sizeof(hs->instead_names[i][1]),
			 "host_instead_waits:%.15s", comm);
	}
	if (!in) {
		in = &hs->instead[IVM_HOST_INSTEAD_MAX];
		hs->nr_instead = IVM_HOST_INSTEAD_MAX + 1;
	}
	in->ns += ns;
	in->waits++;
}

static void switched_in(struct ivm_host_sched *hs, struct vcpu_thread *t,
			const char *prev_comm, uint64_t ts)
{
	uint64_t wait;
	size_t b;

	/*
	 * Asleep and switched in with no wakeup since: its wakeup came
	 * while it was going to sleep.  The waker's record is stamped before
	 * the switch-out (sched_waking fires before it waits for the run
	 * queue's lock that the switch holds), and the enqueue, where the
	 * kernel's run_delay starts, comes just after it.  The wait is from
	 * the switch-out.
	 */
	if (t->state == ASLEEP && t->early_wake) {
		t->state = WAITING;
		t->woken = true;
		t->wake_ts = t->early_wake_ts;
		hs->raced_wakeups++;
	}
	t->early_wake = false;
	if (t->state == WAITING && ts >= t->since) {
		wait = ts - t->since;
		t->totals.steal_ns += wait;
		remember(t, t->since, ts, true);
		wait_span(t, t->since, wait, t->woken);
		if (t->woken) {
			t->totals.wakeups++;
			t->totals.wake_delay_ns += wait;
			t->wake_delay = wait;
			t->wake_done = true;
			for (b = 0; wait >= delay_bounds[b]; b++)
				;
			hs->delays[b]++;
		} else {
			t->totals.preemptions++;
		}
		/*
		 * A preemption's wait is charged to who preempted it; a
		 * wakeup's to who had the CPU when it finally ran.
		 */
		if (wait)
			charge_instead(hs, t->woken ? prev_comm : t->instead,
				       wait);
	}
	t->state = RUNNING;
}

void ivm_host_sched_switch(struct ivm_host_sched *hs, int prev_vcpu,
			   uint64_t prev_state, const char *prev_comm,
			   int next_vcpu, const char *next_comm, uint64_t ts)
{
	struct vcpu_thread *t;

	if (prev_vcpu >= 0 && (size_t)prev_vcpu < hs->nr) {
		t = &hs->threads[prev_vcpu];
		if (t->state == WAITING) {
			hs->missed_switch_ins++;
			if (ts >= t->since)
				hs->missed_switch_in_ns += ts - t->since;
		}
		t->since = ts;
		t->woken = false;
		if (ivm_sched_state_sleeping(prev_state)) {
			t->state = ASLEEP;
		} else if (runnable(prev_state)) {
			t->state = WAITING;
			snprintf(t->instead, sizeof(t->instead), "%s",
				 next_comm);
		} else {
			t->state = UNKNOWN;	/* stopped, traced, dying */
		}
	}
	if (next_vcpu >= 0 && (size_t)next_vcpu < hs->nr)
		switched_in(hs, &hs->threads[next_vcpu], prev_comm, ts);
}

void ivm_host_sched_wake(struct ivm_host_sched *hs, int vcpu, uint64_t ts)
{
	struct vcpu_thread *t;

	if (vcpu < 0 || (size_t)vcpu >= hs->nr)
		return;
	t = &hs->threads[vcpu];
	if (t->state == RUNNING) {
		t->early_wake = true;
		t->early_wake_ts = ts;
	}
	/*
	 * Unknown (the run's first records, or after lost ones): if it was
	 * running, its next record is a switch-out, which starts afresh; if
	 * not, it is a switch-in that ends this wait.
	 */
	if (t->state == UNKNOWN) {
		t->state = WAITING;
		t->since = ts;
		t->woken = true;
		t->wake_ts = ts;
		t->wake_done = false;
		return;
	}
	if (t->state != ASLEEP)
		return;
	if (ts >= t->since) {
		t->totals.sleep_ns += ts - t->since;
		t->totals.sleeps++;
		remember(t, t->since, ts, false);
	}
	t->state = WAITING;
	t->since = ts;
	t->woken = true;
	t->wake_ts = ts;
	t->wake_done = false;
}

/* run_delay (ns), the second field of a schedstat line; false if not. */
static bool read_run_delay(int fd, uint64_t *ret)
{
	char buf[128];
	unsigned long long run, delay;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &run, &delay) != 2)
		return false;
	*ret = delay;
	return true;
}

struct ivm_error *ivm_host_sched_watch(struct ivm_host_sched *hs,
				       size_t vcpu, int tid)
{
	struct vcpu_thread *t = &hs->threads[vcpu];
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "opening %s", path);
	if (!read_run_delay(fd, &t->run_delay0)) {
		close(fd);
		return ivm_error_create(IVM_ERROR_OS, "%s: no run_delay", path);
	}
	if (t->schedstat_fd >= 0)
		close(t->schedstat_fd);
	t->schedstat_fd = fd;
	return NULL;
}

void ivm_host_sched_lost(struct ivm_host_sched *hs)
{
	size_t i;

	for (i = 0; i < hs->nr; i++)
		hs->threads[i].state = UNKNOWN;
}

bool ivm_host_sched_wake_delay(const struct ivm_host_sched *hs, int vcpu,
			       uint64_t wake_ts, uint64_t *delay_ns)
{
	const struct vcpu_thread *t;

	if (vcpu < 0 || (size_t)vcpu >= hs->nr)
		return false;
	t = &hs->threads[vcpu];
	if (!t->wake_done || t->wake_ts != wake_ts)
		return false;
	*delay_ns = t->wake_delay;
	return true;
}

const struct ivm_host_vcpu *ivm_host_sched_vcpu(const struct ivm_host_sched *hs,
						size_t vcpu)
{
	return &hs->threads[vcpu].totals;
}

const uint64_t *ivm_host_sched_delays(const struct ivm_host_sched *hs)
{
	return hs->delays;
}

uint64_t ivm_host_sched_delay_bound(size_t i)
{
	return i < IVM_HOST_DELAY_BUCKETS ? delay_bounds[i] : UINT64_MAX;
}

const struct ivm_host_instead *
ivm_host_sched_instead(const struct ivm_host_sched *hs, size_t *nr)
{
	*nr = hs->nr_instead;
	return hs->instead;
}

static const char *const bucket_names[IVM_HOST_DELAY_BUCKETS] = {
	"host_wake_delay_lt_10us", "host_wake_delay_lt_100us",
	"host_wake_delay_lt_1ms", "host_wake_delay_lt_10ms",
	"host_wake_delay_lt_100ms", "host_wake_delay_ge_100ms",
};

size_t ivm_host_sched_fill_stats(struct ivm_host_sched *hs,
				 struct ivm_stat *st, size_t max)
{
	struct ivm_host_vcpu sum = { 0 };
	size_t n = 0, i;
	uint64_t d;

#define PUT(name, v) do { if (n < max) st[n++] = (struct ivm_stat){ name, v }; } while (0)
	for (i = 0; i < hs->nr; i++) {
		const struct ivm_host_vcpu *t = &hs->threads[i].totals;

		sum.steal_ns += t->steal_ns;
		sum.wake_delay_ns += t->wake_delay_ns;
		sum.wakeups += t->wakeups;
		sum.preemptions += t->preemptions;
		sum.sleep_ns += t->sleep_ns;
		sum.steal_idle_ns += t->steal_idle_ns;
		sum.sleep_idle_ns += t->sleep_idle_ns;
	}
	PUT("host_steal_ns", sum.steal_ns);
	PUT("host_wake_delay_ns", sum.wake_delay_ns);
	PUT("host_wakeups", sum.wakeups);
	PUT("host_preemptions", sum.preemptions);
	PUT("host_sleep_ns", sum.sleep_ns);
	PUT("host_steal_idle_ns", sum.steal_idle_ns);
	PUT("host_sleep_idle_ns", sum.sleep_idle_ns);
	PUT("host_switch_ins_missed", hs->missed_switch_ins);
	PUT("host_switch_ins_missed_ns", hs->missed_switch_in_ns);
	PUT("host_wakeups_raced", hs->raced_wakeups);
	for (i = 0; i < hs->nr && i < IVM_HOST_STAT_VCPUS; i++) {
		struct vcpu_thread *t = &hs->threads[i];

		PUT(t->names[0], t->totals.steal_ns);
		PUT(t->names[1], t->totals.wake_delay_ns);
		PUT(t->names[2], t->totals.wakeups);
		PUT(t->names[3], t->totals.sleep_ns);
		/* Always there once watched: stats diff by position. */
		if (t->schedstat_fd < 0)
			continue;
		if (read_run_delay(t->schedstat_fd, &d) && d >= t->run_delay0)
			t->run_delay = d - t->run_delay0;
		PUT(t->names[4], t->run_delay);
	}
	for (i = 0; i < IVM_HOST_DELAY_BUCKETS; i++)
		PUT(bucket_names[i], hs->delays[i]);
	for (i = 0; i < hs->nr_instead; i++) {
		bool rest = i == IVM_HOST_INSTEAD_MAX;

		PUT(rest ? "host_instead_ns:" : hs->instead_names[i][0],
		    hs->instead[i].ns);
		PUT(rest ? "host_instead_waits:" : hs->instead_names[i][1],
		    hs->instead[i].waits);
	}
#undef PUT
	return n;
}
