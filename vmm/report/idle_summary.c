// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profile/idle_periods.h"
#include "report/idle_summary.h"

void ivm_idle_summary_init(struct ivm_idle_summary *s)
{
	memset(s, 0, sizeof(*s));
}

void ivm_idle_summary_deinit(struct ivm_idle_summary *s)
{
	free(s->periods);
	free(s->samples);
	free(s->spans);
	free(s->stats);
	free(s->stat_names);
	memset(s, 0, sizeof(*s));
}

/*
 * Guest comms (and names from the file) are bytes: keep them printable,
 * one word, with nothing JSON or HTML would read as markup.
 */
static void clean(char *c, size_t size)
{
	size_t i;

	c[size - 1] = '\0';
	for (i = 0; c[i]; i++)
		if ((unsigned char)c[i] <= ' ' || (unsigned char)c[i] > '~' ||
		    c[i] == '"' || c[i] == '\\' || c[i] == '<' || c[i] == '>' ||
		    c[i] == '&' || c[i] == '\'')
			c[i] = '_';
}

static void note_vcpu(struct ivm_idle_summary *s, uint32_t vcpu)
{
	if (vcpu < IVM_IDLE_SUMMARY_MAX_VCPUS && vcpu + 1 > s->nr_vcpus)
		s->nr_vcpus = vcpu + 1;
}

static struct ivm_error *grow(void **arr, size_t *cap, size_t nr, size_t size,
			      size_t max)
{
	size_t ncap;
	void *n;

	if (nr < *cap)
		return NULL;
	ncap = *cap ? 2 * *cap : 1024;
	if (ncap > max)
		ncap = max;
	n = reallocarray(*arr, ncap, size);
	if (!n)
		return &ivm_enomem;
	*arr = n;
	*cap = ncap;
	return NULL;
}

static struct ivm_error *keep_stats(struct ivm_idle_summary *s,
				    const struct ivm_stat *items, size_t nr)
{
	size_t i, len = 0, off = 0;
	struct ivm_stat *st;
	char *names;

	for (i = 0; i < nr; i++)
		len += strlen(items[i].name) + 1;
	st = calloc(nr ? nr : 1, sizeof(*st));
	names = malloc(len ? len : 1);
	if (!st || !names) {
		free(st);
		free(names);
		return &ivm_enomem;
	}
	for (i = 0; i < nr; i++) {
		size_t n = strlen(items[i].name) + 1;

		memcpy(names + off, items[i].name, n);
		st[i].name = names + off;
		st[i].value = items[i].value;
		off += n;
	}
	free(s->stats);
	free(s->stat_names);
	s->stats = st;
	s->stat_names = names;
	s->nr_stats = nr;
	return NULL;
}

static void keep_meta(struct ivm_idle_summary *s,
		      const struct ivm_profile_record *rec)
{
	size_t i;

	for (i = 0; i < rec->meta.nr; i++) {
		const struct ivm_label *m = &rec->meta.items[i];

		if (!strcmp(m->key, "idle_source"))
			snprintf(s->idle_source, sizeof(s->idle_source), "%s",
				 m->value);
		else if (!strcmp(m->key, "guest"))
			snprintf(s->guest, sizeof(s->guest), "%s", m->value);
		else if (!strcmp(m->key, "vcpus"))
			note_vcpu(s, (uint32_t)strtoul(m->value, NULL, 10) - 1);
	}
	clean(s->idle_source, sizeof(s->idle_source));
	clean(s->guest, sizeof(s->guest));
}

enum ivm_idle_cause ivm_idle_cause_of(uint32_t wake_mask)
{
	if (wake_mask & (1u << IVM_IRQ_DEVICE))
		return IVM_IDLE_CAUSE_DEVICE;
	if (wake_mask & (1u << IVM_IRQ_RESCHED | 1u << IVM_IRQ_CALL |
			 1u << IVM_IRQ_TLB))
		return IVM_IDLE_CAUSE_IPI;
	if (wake_mask & (1u << IVM_IRQ_TIMER))
		return IVM_IDLE_CAUSE_TIMER;
	return IVM_IDLE_CAUSE_UNKNOWN;
}

const char *ivm_idle_cause_name(enum ivm_idle_cause c)
{
	static const char *const names[IVM_IDLE_CAUSE_NR] = {
		"device", "ipi", "timer", "unknown",
	};

	return (unsigned int)c < IVM_IDLE_CAUSE_NR ? names[c] : "unknown";
}

static void add_idle_time(struct ivm_idle_summary *s,
			  const struct ivm_idle_record *r)
{
	enum ivm_idle_cause c = ivm_idle_cause_of(r->wake_mask);
	uint64_t ns = r->end_ns - r->start_ns;	/* the reader checked */

	if ((r->flags & IVM_IDLE_START_UNKNOWN) ||
	    r->vcpu >= IVM_IDLE_SUMMARY_MAX_VCPUS) {
		s->untimed_periods++;
		return;
	}
	s->timed_periods++;
	s->idle_ns[r->vcpu] += ns;
	s->cause_ns[c] += ns;
	s->cause_periods[c]++;
}

/* A HOST_SPANS record: its spans kept, its lane's sums counted. */
static struct ivm_error *add_spans(struct ivm_idle_summary *s,
				   const struct ivm_spans_record *sr)
{
	bool disk = sr->lane == IVM_SPAN_LANE_DISK;
	struct ivm_error *err;
	size_t i;

	if (!disk && sr->lane >= IVM_IDLE_SUMMARY_MAX_VCPUS) {
		s->dropped_spans += sr->nr;
		return NULL;
	}
	s->span_records++;
	if (disk) {
		s->disk_left_out += sr->dropped;
		s->disk_left_out_ns += sr->dropped_ns;
	} else {
		s->steal_left_out[sr->lane] += sr->dropped;
		s->steal_left_out_ns[sr->lane] += sr->dropped_ns;
		note_vcpu(s, sr->lane);
	}
	for (i = 0; i < sr->nr; i++) {
		const struct ivm_span *sp = &sr->spans[i];

		if (disk)
			s->disk_span_ns += sp->dur_ns;
		else
			s->steal_span_ns[sr->lane] += sp->dur_ns;
		if (s->nr_spans >= IVM_IDLE_SUMMARY_MAX_SPANS) {
			s->dropped_spans++;
			continue;
		}
		err = grow((void **)&s->spans, &s->cap_spans, s->nr_spans,
			   sizeof(*s->spans), IVM_IDLE_SUMMARY_MAX_SPANS);
		if (err)
			return err;
		/* The reader keeps start + duration within 64 bits. */
		s->spans[s->nr_spans++] = (struct ivm_idle_summary_span){
			.start_ns = sp->start_ns,
			.end_ns = sp->start_ns + sp->dur_ns,
			.lane = sr->lane, .kind = sp->kind, .flags = sp->flags,
		};
	}
	return NULL;
}

struct ivm_error *ivm_idle_summary_add(struct ivm_idle_summary *s,
				       const struct ivm_profile_record *rec)
{
	struct ivm_error *err;

	switch (rec->type) {
	case IVM_RECORD_IDLE_PERIOD:
		add_idle_time(s, &rec->idle);
		if (s->nr_periods >= IVM_IDLE_SUMMARY_MAX_PERIODS ||
		    rec->idle.vcpu >= IVM_IDLE_SUMMARY_MAX_VCPUS) {
			s->dropped_periods++;
			return NULL;
		}
		err = grow((void **)&s->periods, &s->cap_periods,
			   s->nr_periods, sizeof(*s->periods),
			   IVM_IDLE_SUMMARY_MAX_PERIODS);
		if (err)
			return err;
		s->periods[s->nr_periods] = rec->idle;
		clean(s->periods[s->nr_periods].to_idle.comm, IVM_COMM_LEN);
		clean(s->periods[s->nr_periods++].from_idle.comm, IVM_COMM_LEN);
		note_vcpu(s, rec->idle.vcpu);
		return NULL;
	case IVM_RECORD_SAMPLE: {
		struct ivm_idle_summary_sample *t;

		/* Switch samples are about threads, not idle vCPUs. */
		if (rec->sample.kind == IVM_SAMPLE_SWITCH)
			return NULL;
		if (s->nr_samples >= IVM_IDLE_SUMMARY_MAX_SAMPLES ||
		    rec->sample.vcpu >= IVM_IDLE_SUMMARY_MAX_VCPUS) {
			s->dropped_samples++;
			return NULL;
		}
		err = grow((void **)&s->samples, &s->cap_samples,
			   s->nr_samples, sizeof(*s->samples),
			   IVM_IDLE_SUMMARY_MAX_SAMPLES);
		if (err)
			return err;
		t = &s->samples[s->nr_samples++];
		t->time_ns = rec->sample.time_ns;
		t->vcpu = rec->sample.vcpu;
		t->tid = rec->sample.tid;
		t->kind = rec->sample.kind;
		memcpy(t->comm, rec->sample.comm, sizeof(t->comm));
		clean(t->comm, IVM_COMM_LEN);
		note_vcpu(s, rec->sample.vcpu);
		return NULL;
	}
	case IVM_RECORD_STATS:
	case IVM_RECORD_END:
		return keep_stats(s, rec->stats.items, rec->stats.nr);
	case IVM_RECORD_META:
		keep_meta(s, rec);
		return NULL;
	case IVM_RECORD_HOST_SPANS:
		return add_spans(s, &rec->spans);
	default:
		return NULL;
	}
}

uint64_t ivm_idle_summary_stat(const struct ivm_idle_summary *s,
			       const char *name)
{
	size_t i;

	for (i = 0; i < s->nr_stats; i++)
		if (!strcmp(s->stats[i].name, name))
			return s->stats[i].value;
	return 0;
}

bool ivm_idle_summary_has_stat(const struct ivm_idle_summary *s,
			       const char *name)
{
	size_t i;

	for (i = 0; i < s->nr_stats; i++)
		if (!strcmp(s->stats[i].name, name))
			return true;
	return false;
}

void ivm_idle_wake_name(uint32_t wake_mask, char *buf, size_t size)
{
	size_t len = 0;
	int k;

	buf[0] = '\0';
	for (k = 0; k < IVM_IRQ_NR_KINDS; k++) {
		/* A TLB shootdown is a function call too: named once. */
		if (k == IVM_IRQ_TLB || !(wake_mask & (1u << k)))
			continue;
		len += (size_t)snprintf(buf + len, len < size ? size - len : 0,
					"%s%s", len ? "+" : "",
					ivm_irq_kind_name(k));
	}
	if (!len)
		snprintf(buf, size, "unknown");
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

#define ST(n) ivm_idle_summary_stat(s, n)

static void print_run(const struct ivm_idle_summary *s, FILE *out)
{
	uint64_t to_guest, from_guest, unseen, replayed, to_kept, from_kept;

	fprintf(out, "== run ==\n");
	if (ivm_idle_summary_has_stat(s, "elapsed_ms"))
		fprintf(out, "  duration: %.1f s", (double)ST("elapsed_ms") / 1e3);
	else
		fprintf(out, "  duration: not recorded (an older idlevm)");
	fprintf(out, "; idle source: %s; vCPUs: %u\n",
		s->idle_source[0] ? s->idle_source : "not recorded",
		s->nr_vcpus);
	to_kept = ST("to_idle");
	from_kept = ST("from_idle");
	if (!ivm_idle_summary_has_stat(s, "idle_periods_seen")) {
		fprintf(out,
			"  transitions: not counted by the idlevm that wrote this profile; captured %" PRIu64
			" to-idle, %" PRIu64 " from-idle\n", to_kept, from_kept);
		return;
	}
	unseen = ST("idle_periods_unseen");
	replayed = ST("idle_periods_replayed");
	/* Every idle period has one switch into idle and one out of it. */
	to_guest = ST("idle_periods_seen") + unseen;
	from_guest = ST("idle_periods_ended") + unseen;
	fprintf(out,
		"  guest to-idle switches: %" PRIu64 " (%" PRIu64
		" seen at a look, %" PRIu64 " between looks, %" PRIu64
		" of those rebuilt); captured %" PRIu64 " (%.1f%%)",
		to_guest, ST("idle_periods_seen"), unseen, replayed, to_kept,
		pct(to_kept, to_guest));
	/* Rebuilt periods a later run of their task hid (replay.h). */
	if (ST("to_idle_later"))
		fprintf(out, ", %" PRIu64
			" of them with the stack the thread blocked in next (it ran again before the look)",
			ST("to_idle_later"));
	fputc('\n', out);
	fprintf(out,
		"  guest from-idle switches: %" PRIu64 "; captured %" PRIu64
		" (%.1f%%); %" PRIu64 " named from guest memory after the first task left\n",
		from_guest, from_kept, pct(from_kept, from_guest),
		ST("from_idle_resolved"));
	fprintf(out,
		"  not captured, by cause: between looks, not rebuilt %" PRIu64
		"; target ran during the read %" PRIu64 "; target runnable %" PRIu64
		"; capture failed %" PRIu64 "; capture busy %" PRIu64
		"; first task not found %" PRIu64 "; no target %" PRIu64
		"; filtered %" PRIu64 "\n",
		unseen > replayed ? unseen - replayed : 0, ST("discarded_ran"),
		ST("discarded_runnable"), ST("capture_failed"), ST("lost_busy"),
		ST("lost_missed") + ST("from_idle_unresolved"),
		ST("lost_no_target"), ST("filtered"));
	/*
	 * How the stamps named to-idle tasks (last_ran.h): exactly, or as
	 * the CPU's latest task; not at all rather than wrongly when tasks
	 * forked since the task list was walked (unless the CPU's counts
	 * say none of them ran there), when several stopped at the switch's
	 * stamp, or when the CPU ran a task again (a profile without those
	 * counts says 0).
	 */
	if (ivm_idle_summary_has_stat(s, "stamps_exact"))
		fprintf(out, "  to-idle tasks named from the scheduler's stamps: %" PRIu64
			" by the switch's own stamp, %" PRIu64
			" as the CPU's latest task; %" PRIu64
			" not named (tasks forked since the walk of the task list; %" PRIu64
			" walks, %" PRIu64 " of them for forks), %" PRIu64
			" not named (tasks tied on the switch's stamp), %" PRIu64
			" not named (the CPU ran a task again)\n",
			ST("stamps_exact"), ST("stamps_latest"),
			ST("stamps_stale_refused"), ST("stamps_walks"),
			ST("stamps_stale_walks"), ST("stamps_tied_refused"),
			ST("stamps_running_refused"));
	if (ivm_idle_summary_has_stat(s, "stamps_stale_local"))
		fprintf(out, "  lookups of the stamps after forks: %" PRIu64
			" answered (no forked task switched in on their CPU), refused %" PRIu64
			" first tasks and %" PRIu64 " windows of unseen periods\n",
			ST("stamps_stale_local"), ST("stamps_stale_refused_first"),
			ST("stamps_stale_refused_window"));
	/* What the walks cost: reads per task met (kernel_layout.h). */
	if (ivm_idle_summary_has_stat(s, "stamps_walk_reads") &&
	    ST("stamps_walk_tasks"))
		fprintf(out, "  task-list walks: %" PRIu64 " tasks met in %" PRIu64
			" reads (%.2f a task)\n",
			ST("stamps_walk_tasks"), ST("stamps_walk_reads"),
			(double)ST("stamps_walk_reads") /
				(double)ST("stamps_walk_tasks"));
	/* How many reads of the stamps were of the tasks that ran (last_ran.h). */
	if (ivm_idle_summary_has_stat(s, "stamps_hot_reads"))
		fprintf(out, "  reads of the scheduler's stamps: %" PRIu64
			" of every task, %" PRIu64 " of those that ran lately (%" PRIu64
			" more that a task outside them had run)\n",
			ST("stamps_full_reads"), ST("stamps_hot_reads"),
			ST("stamps_hot_misses"));
	/* Looks that saw rq->curr and current apart (vcpu_watch.h). */
	if (ST("mid_switch_looks"))
		fprintf(out, "  looks at a vCPU in the middle of a switch: %" PRIu64
			" (they decided nothing)\n", ST("mid_switch_looks"));
	/*
	 * A guest's process controls its stack, registers and CFI: the user
	 * stacks it stopped early, by why (capture.h ivm_capture_user_stats).
	 * Not "cut short": the report says that of a damaged file.
	 */
	if (ivm_idle_summary_has_stat(s, "user_stacks"))
		fprintf(out,
			"  user stacks: %" PRIu64 " unwound, stopped early: unreadable %" PRIu64
			", frame cap %" PRIu64 ", no progress %" PRIu64
			", CFI refused %" PRIu64 ", CFI not in memory %" PRIu64
			"; not unwound: refused %" PRIu64 ", no address space %" PRIu64 "\n",
			ST("user_stacks"), ST("user_stack_fault"),
			ST("user_stack_cap"), ST("user_stack_loop"),
			ST("user_stack_bad_cfi"), ST("user_stack_no_cfi"),
			ST("user_stack_errors"), ST("user_stack_unreadable"));
	/* Running targets whose live registers led nowhere (profiler.h). */
	if (ST("live_rereads"))
		fprintf(out, "  running threads read again (their registers, read as they ran, led the unwind nowhere): %" PRIu64
			" reads; %" PRIu64 " stacks whole after them, %" PRIu64
			" still stopped early\n", ST("live_rereads"),
			ST("live_rereads_mended"), ST("live_rereads_failed"));
	fprintf(out,
		"  host events: %" PRIu64 " vCPU-thread sleeps (%" PRIu64
		" idle halts, %" PRIu64 " not idle: QEMU lock or I/O), %" PRIu64
		" wakeups, %" PRIu64 " trace events lost\n",
		ST("host_sleeps"), ST("host_sleeps_idle"), ST("host_sleeps_busy"),
		ST("host_wakes"), ST("trace_lost"));
	/* The idle gate (idle_gate.h): the sleeps that did not wake idlevm. */
	if (ivm_idle_summary_has_stat(s, "gate_sleeps"))
		fprintf(out, "  idle gate (BPF in the host kernel): %" PRIu64
			" of %" PRIu64 " vCPU-thread sleeps woke idlevm; let pass %" PRIu64
			" (the vCPU halted again unswitched: %" PRIu64
			" with interrupt counts kept, %" PRIu64
			" with nothing moved), %" PRIu64 " unreadable, %" PRIu64
			" records lost\n",
			ST("gate_wakeups"), ST("gate_sleeps"),
			ST("gate_passed_irqs") + ST("gate_passed_quiet"),
			ST("gate_passed_irqs"), ST("gate_passed_quiet"),
			ST("gate_unreadable"), ST("gate_ring_full"));
	if (ST("guest_paused_s"))
		fprintf(out, "  the guest was not running for %" PRIu64
			" s of the run (paused, or stopped by QEMU): no samples then\n",
			ST("guest_paused_s"));
	if (ivm_idle_summary_has_stat(s, "pin_reconnects"))
		fprintf(out, "  pin capture: %" PRIu64 " pinned, %" PRIu64
			" held only; the helper lost %" PRIu64 " times, back %" PRIu64
			" times, %" PRIu64 " captures unpinned meanwhile\n",
			ST("pin_ok"), ST("pin_hold_only"), ST("pin_failed"),
			ST("pin_reconnects"), ST("pin_unpinned"));
	if (ST("libvirt_reconnects"))
		fprintf(out, "  libvirtd went away and its connection was opened again %" PRIu64
			" times (no lifecycle events meanwhile)\n",
			ST("libvirt_reconnects"));
	/*
	 * KVM: what its own events said.  Halts that ended while KVM polled
	 * never reached the host scheduler; no HLT exits at all with halts
	 * seen means a KVM that emulates HLT (a PVM host, for a guest
	 * without PVM support), where only the sleeps start a halt.
	 */
	if (ivm_idle_summary_has_stat(s, "kvm_halt_exits"))
		fprintf(out,
			"  kvm events: %" PRIu64 " HLT exits; halts ended: %" PRIu64
			" after the vCPU thread slept, %" PRIu64
			" while KVM polled (halt_poll_ns)\n",
			ST("kvm_halt_exits"), ST("kvm_halts_slept"),
			ST("kvm_halts_polled"));
	/* The sched source's: the others have no sleeps to look after. */
	if (ivm_idle_summary_has_stat(s, "halt_looked_late") && ST("host_sleeps_idle")) {
		struct ivm_idle_stats is = {
			.halt_looked_100us = ST("halt_looked_100us"),
			.halt_looked_1ms = ST("halt_looked_1ms"),
			.halt_looked_late = ST("halt_looked_late"),
		};
		char looks[160];

		ivm_idle_looks_text(&is, looks, sizeof(looks));
		fprintf(out, "  %s; idle periods shorter than the wait come and go unseen\n",
			looks);
	}
}

/* Duration buckets of the histogram. */
static const uint64_t bucket_ns[] = { 100000, 1000000, 10000000, 100000000,
				      1000000000 };
#define NR_BUCKETS 6
static const char *const bucket_name[NR_BUCKETS] = {
	"<100us", "<1ms", "<10ms", "<100ms", "<1s", ">=1s" };

static int bucket(uint64_t ns)
{
	int b;

	for (b = 0; b < NR_BUCKETS - 1; b++)
		if (ns < bucket_ns[b])
			return b;
	return NR_BUCKETS - 1;
}

struct pair_count {
	char from[IVM_COMM_LEN], to[IVM_COMM_LEN];
	uint64_t n;
};

static int by_count(const void *a, const void *b)
{
	const struct pair_count *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : strcmp(x->from, y->from);
}

/* Tally (to-idle comm, from-idle comm) pairs; a small open table. */
static size_t count_pairs(const struct ivm_idle_summary *s,
			  struct pair_count *pairs, size_t cap)
{
	size_t i, k, n = 0;

	for (i = 0; i < s->nr_periods; i++) {
		const struct ivm_idle_record *r = &s->periods[i];
		const char *from = r->to_idle.comm[0] ? r->to_idle.comm : "?";
		const char *to = r->from_idle.comm[0] ? r->from_idle.comm : "?";

		for (k = 0; k < n; k++)
			if (!strcmp(pairs[k].from, from) &&
			    !strcmp(pairs[k].to, to))
				break;
		if (k == n) {
			if (n == cap)
				continue;	/* rare pairs past the cap */
			snprintf(pairs[n].from, IVM_COMM_LEN, "%s", from);
			snprintf(pairs[n].to, IVM_COMM_LEN, "%s", to);
			pairs[n++].n = 0;
		}
		pairs[k].n++;
	}
	qsort(pairs, n, sizeof(*pairs), by_count);
	return n;
}

static void print_periods(const struct ivm_idle_summary *s, FILE *out)
{
	uint64_t wake[1u << IVM_IRQ_NR_KINDS] = { 0 }, known = 0;
	uint64_t timer_only = 0, timer_any = 0, no_start = 0;
	double timer = 0;
	static struct pair_count pairs[4096];
	size_t i, n;
	uint32_t v;
	int b;

	fprintf(out, "== idle periods: %zu recorded", s->nr_periods);
	if (s->dropped_periods)
		fprintf(out, " (%" PRIu64 " more past the report's cap)",
			s->dropped_periods);
	fprintf(out, " ==\n  vCPU  periods   idle s");
	for (b = 0; b < NR_BUCKETS; b++)
		fprintf(out, " %7s", bucket_name[b]);
	fputc('\n', out);
	for (v = 0; v < s->nr_vcpus; v++) {
		uint64_t hist[NR_BUCKETS] = { 0 }, count = 0, total = 0;

		for (i = 0; i < s->nr_periods; i++) {
			const struct ivm_idle_record *r = &s->periods[i];

			if (r->vcpu != v)
				continue;
			count++;
			/* No start, no duration: not a short period. */
			if (r->flags & IVM_IDLE_START_UNKNOWN) {
				no_start++;
				continue;
			}
			total += r->end_ns - r->start_ns;
			hist[bucket(r->end_ns - r->start_ns)]++;
		}
		fprintf(out, "  %4u %8" PRIu64 " %8.3f", v, count,
			(double)total / 1e9);
		for (b = 0; b < NR_BUCKETS; b++)
			fprintf(out, " %7" PRIu64, hist[b]);
		fputc('\n', out);
	}
	if (no_start)
		fprintf(out, "  (%" PRIu64 " rebuilt periods whose start is not known are not in the durations)\n",
			no_start);
	for (i = 0; i < s->nr_periods; i++) {
		uint32_t m = s->periods[i].wake_mask &
			     ~(1u << IVM_IRQ_TLB) & ((1u << IVM_IRQ_NR_KINDS) - 1);

		wake[m]++;
		/*
		 * Two kinds in one wake window: which came first is not
		 * known, so each counts for half.
		 */
		if (m) {
			known++;
			if (m & (1u << IVM_IRQ_TIMER)) {
				timer += 1.0 / __builtin_popcount(m);
				timer_any++;
				timer_only += m == 1u << IVM_IRQ_TIMER;
			}
		}
	}
	fprintf(out, "  wake causes (interrupts between the last halt and the switch out of idle):\n");
	for (i = 0; i < (1u << IVM_IRQ_NR_KINDS); i++) {
		char name[64];

		if (!wake[i])
			continue;
		ivm_idle_wake_name((uint32_t)i, name, sizeof(name));
		fprintf(out, "    %-24s %8" PRIu64 "  %5.1f%%\n", name, wake[i],
			pct(wake[i], s->nr_periods));
	}
	fprintf(out, "  timer share of known wake causes: %.1f%% of %" PRIu64
		" (a mixed cause counts for each of its kinds in part; %.1f%% to %.1f%% as mixed ones count for the timer or not)\n",
		known ? 100.0 * timer / (double)known : 0.0, known,
		pct(timer_only, known), pct(timer_any, known));
	n = count_pairs(s, pairs, sizeof(pairs) / sizeof(pairs[0]));
	fprintf(out, "  to-idle -> from-idle (who hands the CPU to whom through idle):\n");
	for (i = 0; i < n && i < 15; i++)
		fprintf(out, "    %8" PRIu64 "  %-16s -> %s\n", pairs[i].n,
			pairs[i].from, pairs[i].to);
}

void ivm_idle_summary_print(const struct ivm_idle_summary *s, FILE *out)
{
	print_run(s, out);
	if (s->nr_periods)
		print_periods(s, out);
}

void ivm_idle_summary_print_periods(const struct ivm_idle_summary *s,
				    FILE *out)
{
	size_t i;

	for (i = 0; i < s->nr_periods; i++) {
		const struct ivm_idle_record *r = &s->periods[i];
		char wake[64];

		ivm_idle_wake_name(r->wake_mask, wake, sizeof(wake));
		fprintf(out,
			"%u\t%" PRIu64 "\t%" PRIu64 "\t0x%x\t%s\t%u\t%u\t%s\t%u\t%u\t%s\t%" PRIu64
			"\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
			r->vcpu, r->start_ns, r->end_ns, r->flags, wake,
			r->to_idle.pid, r->to_idle.tid,
			r->to_idle.comm[0] ? r->to_idle.comm : "?",
			r->from_idle.pid, r->from_idle.tid,
			r->from_idle.comm[0] ? r->from_idle.comm : "?",
			r->before.rq_clock, r->after.rq_clock,
			r->before.idle_switches, r->after.idle_switches);
	}
}
