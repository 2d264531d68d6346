// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/text_safe.h"
#include "report/report.h"
#include "report/why_idle.h"

#define ST(n) ivm_idle_summary_stat(s, n)
#define TOP_INSTEAD 8
#define TOP_THREADS 5

static const char *const cause_why[IVM_IDLE_CAUSE_NR] = {
	"I/O completed (disk, network)",
	"another vCPU woke a task here: lock or futex hand-off, pipe, queue",
	"a sleep or timeout ended",
	"no interrupt count moved (or none was read)",
};

static double sec(uint64_t ns)
{
	return (double)ns / 1e9;
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static uint64_t vcpu_stat(const struct ivm_idle_summary *s, size_t v,
			  const char *what)
{
	char name[64];

	snprintf(name, sizeof(name), "vcpu%zu.%s", v, what);
	return ST(name);
}

static bool has_vcpu_stat(const struct ivm_idle_summary *s, size_t v,
			  const char *what)
{
	char name[64];

	snprintf(name, sizeof(name), "vcpu%zu.%s", v, what);
	return ivm_idle_summary_has_stat(s, name);
}

/* The host tasks that ran while vCPU threads waited, most time first. */
static void print_instead(const struct ivm_idle_summary *s, FILE *out)
{
	static const char prefix[] = "host_instead_ns:";
	const struct ivm_stat *top[TOP_INSTEAD] = { NULL };
	uint64_t rest = 0;
	char buf[64];
	size_t i, k;

	for (i = 0; i < s->nr_stats; i++) {
		const struct ivm_stat *st = &s->stats[i];

		if (strncmp(st->name, prefix, sizeof(prefix) - 1) || !st->value)
			continue;
		/* "" is the host's rest: never one of the top. */
		if (!st->name[sizeof(prefix) - 1]) {
			rest += st->value;
			continue;
		}
		for (k = 0; k < TOP_INSTEAD; k++)
			if (!top[k] || st->value > top[k]->value)
				break;
		if (k == TOP_INSTEAD) {
			rest += st->value;
			continue;
		}
		if (top[TOP_INSTEAD - 1])
			rest += top[TOP_INSTEAD - 1]->value;
		memmove(&top[k + 1], &top[k],
			(TOP_INSTEAD - 1 - k) * sizeof(top[0]));
		top[k] = st;
	}
	if (!top[0])
		return;
	fprintf(out, "      ran instead:");
	for (k = 0; k < TOP_INSTEAD && top[k]; k++)
		fprintf(out, "%s %s %.3f s", k ? "," : "",
			ivm_text_safe(buf, sizeof(buf),
				      top[k]->name + sizeof(prefix) - 1),
			sec(top[k]->value));
	if (rest)
		fprintf(out, ", the rest %.3f s", sec(rest));
	fputc('\n', out);
}

static void print_delays(const struct ivm_idle_summary *s, FILE *out)
{
	static const char *const buckets[][2] = {
		{ "host_wake_delay_lt_10us", "under 10 us" },
		{ "host_wake_delay_lt_100us", "under 100 us" },
		{ "host_wake_delay_lt_1ms", "under 1 ms" },
		{ "host_wake_delay_lt_10ms", "under 10 ms" },
		{ "host_wake_delay_lt_100ms", "under 100 ms" },
		{ "host_wake_delay_ge_100ms", "100 ms or more" },
	};
	bool first = true;
	size_t i;

	fprintf(out, "      after a wakeup %14.3f s  in %" PRIu64 " wakeups",
		sec(ST("host_wake_delay_ns")), ST("host_wakeups"));
	for (i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
		if (!ST(buckets[i][0]))
			continue;
		fprintf(out, "%s%s %" PRIu64, first ? ": " : ", ",
			buckets[i][1], ST(buckets[i][0]));
		first = false;
	}
	fputc('\n', out);
}

#define TOP_BEGAN 4
#define MAX_COMMS 64

struct comm_time {
	char comm[IVM_COMM_LEN];
	uint64_t ns;
};

static int by_comm_ns(const void *a, const void *b)
{
	const struct comm_time *x = a, *y = b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/*
 * The guest tasks (by name) that went idle before the periods of cause c,
 * most idle time first: whose wait it was (the records' to-idle task).
 */
static void print_began(const struct ivm_idle_summary *s,
			enum ivm_idle_cause c, FILE *out)
{
	struct comm_time t[MAX_COMMS + 1] = { { "", 0 } };
	size_t nr = 0, i, k;
	uint64_t rest = 0;
	char buf[64];

	for (i = 0; i < s->nr_periods; i++) {
		const struct ivm_idle_record *r = &s->periods[i];
		const char *comm = r->to_idle.tid ? r->to_idle.comm : "?";

		if ((r->flags & IVM_IDLE_START_UNKNOWN) ||
		    ivm_idle_cause_of(r->wake_mask) != c)
			continue;
		for (k = 0; k < nr && strcmp(t[k].comm, comm); k++)
			;
		if (k == nr && nr < MAX_COMMS)
			snprintf(t[nr++].comm, IVM_COMM_LEN, "%s", comm);
		if (k < nr)
			t[k].ns += r->end_ns - r->start_ns;
		else
			rest += r->end_ns - r->start_ns;
	}
	if (!nr)
		return;
	qsort(t, nr, sizeof(t[0]), by_comm_ns);
	fprintf(out, "        went idle after:");
	for (k = 0; k < nr; k++) {
		if (k >= TOP_BEGAN) {
			rest += t[k].ns;
			continue;
		}
		fprintf(out, "%s %s %.3f s", k ? "," : "",
			ivm_text_safe(buf, sizeof(buf), t[k].comm), sec(t[k].ns));
	}
	if (rest)
		fprintf(out, ", the rest %.3f s", sec(rest));
	fputc('\n', out);
}

static const char *const disk_kinds[] = { "read", "write", "flush", "other" };

/*
 * Under "woken by device": what the host's storage (QEMU's I/O calls) did
 * during those periods.  The host cannot tell a disk's interrupt from a
 * network card's, so this is the time the disk was busy while the guest
 * waited for a device, not proof that it waited for the disk.
 */
static void print_disk_device(const struct ivm_idle_summary *s, FILE *out)
{
	uint64_t busy = ST("disk_device_busy_ns");
	char name[64];
	bool first = true;
	size_t k;

	if (!ivm_idle_summary_has_stat(s, "disk_device_busy_ns")) {
		fprintf(out, "        host storage: not followed (profile --disk)\n");
		return;
	}
	fprintf(out, "        host storage busy %11.3f s %6.1f%%  of it, in %" PRIu64
		" of %" PRIu64 " periods (%" PRIu64 " of QEMU's I/O calls on the host",
		sec(busy), pct(busy, s->cause_ns[IVM_IDLE_CAUSE_DEVICE]),
		ST("disk_device_periods_served"), ST("disk_device_periods"),
		ST("disk_device_calls"));
	for (k = 0; k < sizeof(disk_kinds) / sizeof(disk_kinds[0]); k++) {
		snprintf(name, sizeof(name), "disk_device_ns_%s", disk_kinds[k]);
		if (!ST(name))
			continue;
		fprintf(out, "%s%s %.3f s", first ? ": " : ", ", disk_kinds[k],
			sec(ST(name)));
		first = false;
	}
	fprintf(out, ")\n");
}

/* The host's service of the guest's disk over the whole run. */
static void print_disk(const struct ivm_idle_summary *s, FILE *out)
{
	static const char *const buckets[][2] = {
		{ "disk_service_lt_100us", "under 100 us" },
		{ "disk_service_lt_1ms", "under 1 ms" },
		{ "disk_service_lt_10ms", "under 10 ms" },
		{ "disk_service_lt_100ms", "under 100 ms" },
		{ "disk_service_ge_100ms", "100 ms or more" },
	};
	uint64_t calls = 0, ns = 0;
	char name[64];
	bool first = true;
	size_t k;

	if (!ivm_idle_summary_has_stat(s, "disk_calls_read"))
		return;
	for (k = 0; k < sizeof(disk_kinds) / sizeof(disk_kinds[0]); k++) {
		snprintf(name, sizeof(name), "disk_calls_%s", disk_kinds[k]);
		calls += ST(name);
		snprintf(name, sizeof(name), "disk_ns_%s", disk_kinds[k]);
		ns += ST(name);
	}
	fprintf(out, "  host storage %22.3f s          QEMU's I/O calls for the guest's disks, %" PRIu64
		" calls by %" PRIu64 " threads", sec(ns), calls, ST("disk_threads"));
	for (k = 0; k < sizeof(disk_kinds) / sizeof(disk_kinds[0]); k++) {
		uint64_t n, t;

		snprintf(name, sizeof(name), "disk_calls_%s", disk_kinds[k]);
		n = ST(name);
		snprintf(name, sizeof(name), "disk_ns_%s", disk_kinds[k]);
		t = ST(name);
		if (!n)
			continue;
		fprintf(out, "%s%s %" PRIu64 " %.3f s", first ? ": " : ", ",
			disk_kinds[k], n, sec(t));
		first = false;
	}
	fputc('\n', out);
	first = true;
	fprintf(out, "      each call took");
	for (k = 0; k < sizeof(buckets) / sizeof(buckets[0]); k++) {
		if (!ST(buckets[k][0]))
			continue;
		fprintf(out, "%s%s %" PRIu64, first ? " " : ", ",
			buckets[k][1], ST(buckets[k][0]));
		first = false;
	}
	fprintf(out, "%s\n", first ? " (none)" : "");
	if (ST("disk_handoffs"))
		fprintf(out, "      between the calls %9.3f s          QEMU's I/O threads waited for a host CPU, in %" PRIu64
			" hand-offs (a worker woken for a request, a thread woken by a worker that finished one)\n",
			sec(ST("disk_handoff_ns")), ST("disk_handoffs"));
	if (ST("disk_calls_async"))
		fprintf(out, "      not timed: %" PRIu64 " io_uring_enter and io_submit calls (aio=io_uring or native: the host kernel serves the requests with no call of QEMU's to time; an iothread may also wait for its files through io_uring)\n",
			ST("disk_calls_async"));
	if (ST("disk_trace_lost") || ST("disk_unmatched"))
		fprintf(out, "      not counted: the calls around %" PRIu64
			" host records lost and %" PRIu64 " calls whose start or end was not seen\n",
			ST("disk_trace_lost"), ST("disk_unmatched"));
}

struct thread_time {
	uint32_t node;
	uint64_t ns;
};

static int by_ns(const void *a, const void *b)
{
	const struct thread_time *x = a, *y = b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* Threads (or processes) whose to-idle samples began the most idle time. */
static void print_threads(const struct ivm_calltree *tree, FILE *out)
{
	uint32_t i, n = ivm_calltree_nr_nodes(tree);
	enum ivm_node_type want = IVM_NODE_THREAD;
	struct thread_time *t;
	size_t nr = 0, k;
	char buf[128];

	if (!ivm_calltree_timed(tree, IVM_SAMPLE_TO_IDLE))
		return;
	t = calloc(n ? n : 1, sizeof(*t));
	if (!t)
		return;
	for (i = 0; i < n; i++)
		if (ivm_calltree_node(tree, i)->type == IVM_NODE_THREAD)
			break;
	if (i == n)
		want = IVM_NODE_PROCESS;
	for (i = 0; i < n; i++) {
		const struct ivm_calltree_node *node = ivm_calltree_node(tree, i);

		if (node->type == want && node->total_ns[IVM_SAMPLE_TO_IDLE])
			t[nr++] = (struct thread_time){
				i, node->total_ns[IVM_SAMPLE_TO_IDLE] };
	}
	qsort(t, nr, sizeof(*t), by_ns);
	fprintf(out, "  idle time the %s began (to-idle samples with a time, %"
		PRIu64 " of %" PRIu64 "; report --value idle_time: by stack):\n",
		want == IVM_NODE_THREAD ? "threads" : "processes",
		ivm_calltree_timed(tree, IVM_SAMPLE_TO_IDLE),
		ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE));
	for (k = 0; k < nr && k < TOP_THREADS; k++)
		fprintf(out, "    %10.3f s  %s\n", sec(t[k].ns),
			ivm_report_task_name(ivm_calltree_node(tree, t[k].node),
					     buf, sizeof(buf)));
	free(t);
}

void ivm_why_idle_print(const struct ivm_idle_summary *s,
			const struct ivm_calltree *tree, FILE *out)
{
	bool host = ivm_idle_summary_has_stat(s, "host_steal_ns");
	uint64_t elapsed = ST("elapsed_ms") * 1000000ull, vcpu_ns, idle = 0;
	bool part = ivm_idle_summary_has_stat(s, "watched_ms") &&
		    ST("watched_ms") < ST("elapsed_ms");
	uint64_t steal = ST("host_steal_ns"), sleep = ST("host_sleep_ns");
	uint64_t steal_idle = ST("host_steal_idle_ns");
	uint64_t sleep_idle = ST("host_sleep_idle_ns"), busy_steal, blocked;
	uint64_t parts, rest;
	size_t nr = s->nr_vcpus, v;
	int c;

	while (host && nr < IVM_IDLE_SUMMARY_MAX_VCPUS &&
	       has_vcpu_stat(s, nr, "host_steal_ns"))
		nr++;
	if (!elapsed || !nr)
		return;
	/*
	 * Under --cpu-budget the periods and the host's side were followed
	 * in the watched time only: the split is of that time.
	 */
	if (part)
		elapsed = ST("watched_ms") * 1000000ull;
	vcpu_ns = elapsed * nr;
	for (v = 0; v < nr; v++)
		idle += s->idle_ns[v];
	fprintf(out, "== why idle: %zu vCPUs x %.2f s%s = %.2f s of vCPU time ==\n",
		nr, sec(elapsed), part ? " watched (--cpu-budget)" : "",
		sec(vcpu_ns));
	fprintf(out, "  guest idle (halted) %15.3f s %6.1f%%  in %" PRIu64
		" periods", sec(idle), pct(idle, vcpu_ns), s->timed_periods);
	if (s->untimed_periods)
		fprintf(out, " (and %" PRIu64 " without a start, not timed)",
			s->untimed_periods);
	fputc('\n', out);
	for (c = 0; c < IVM_IDLE_CAUSE_NR; c++) {
		if (!s->cause_ns[c])
			continue;
		fprintf(out, "      woken by %-7s %14.3f s %6.1f%%  %s\n",
			ivm_idle_cause_name(c), sec(s->cause_ns[c]),
			pct(s->cause_ns[c], idle), cause_why[c]);
		print_began(s, c, out);
		if (c == IVM_IDLE_CAUSE_DEVICE && host)
			print_disk_device(s, out);
	}
	if (!host) {
		fprintf(out, "  host side: not recorded (idle source %s)\n",
			s->idle_source[0] ? s->idle_source : "unknown");
		print_threads(tree, out);
		fputc('\n', out);
		return;
	}
	/*
	 * The host's time outside the guest's idle periods: there the
	 * guest had work and waited for the host.  Inside them, a halted
	 * vCPU's thread is kicked, waits and sleeps again: the guest's idle.
	 */
	busy_steal = steal > steal_idle ? steal - steal_idle : 0;
	blocked = sleep > sleep_idle ? sleep - sleep_idle : 0;
	fprintf(out, "  host steal %24.3f s %6.1f%%  the vCPU had work; its thread waited for a host CPU\n",
		sec(busy_steal), pct(busy_steal, vcpu_ns));
	print_delays(s, out);
	print_instead(s, out);
	if (ST("host_trace_lost") || ST("host_switch_ins_missed"))
		fprintf(out, "      not counted: the waits around %" PRIu64
			" host records lost and %" PRIu64
			" switch-ins the host did not record (those at most %.3f s)\n",
			ST("host_trace_lost"), ST("host_switch_ins_missed"),
			sec(ST("host_switch_ins_missed_ns")));
	fprintf(out, "  host sleep, not idle %14.3f s %6.1f%%  the vCPU had work; its thread blocked on the host (QEMU's lock, I/O)\n",
		sec(blocked), pct(blocked, vcpu_ns));
	parts = idle + busy_steal + blocked;
	rest = vcpu_ns > parts ? vcpu_ns - parts : 0;
	fprintf(out, "  the rest %26.3f s %6.1f%%  running guest code\n",
		sec(rest), pct(rest, vcpu_ns));
	/*
	 * The parts are of one time and cannot add up to more: if they
	 * do, a period or a wait was counted twice.  Said, not hidden in
	 * a rest of zero.
	 */
	if (parts > vcpu_ns)
		fprintf(out, "      (the parts above add up to %.3f s more than the vCPU time: some of it counted twice)\n",
			sec(parts - vcpu_ns));
	print_disk(s, out);
	fprintf(out, "  (in the idle periods the host also kept the threads waiting %.3f s and asleep %.3f s)\n",
		sec(steal_idle), sec(sleep_idle));
	fprintf(out, "  per vCPU        idle s     steal s  run_delay s     sleep s   (host: all of the run)\n");
	for (v = 0; v < nr; v++) {
		fprintf(out, "    vcpu%-4zu %10.3f  %10.3f", v, sec(s->idle_ns[v]),
			sec(vcpu_stat(s, v, "host_steal_ns")));
		/* The kernel's own count of the same waits (schedstat). */
		if (has_vcpu_stat(s, v, "host_run_delay_ns"))
			fprintf(out, "  %11.3f", sec(vcpu_stat(s, v,
							"host_run_delay_ns")));
		else
			fprintf(out, "  %11s", "-");
		fprintf(out, "  %10.3f\n", sec(vcpu_stat(s, v, "host_sleep_ns")));
	}
	print_threads(tree, out);
	fputc('\n', out);
}
