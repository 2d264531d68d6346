// SPDX-License-Identifier: MIT
/* The closing lines of a guest's run of `idlevm profile` (profile_runs.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>


#include "cmd/profile_runs.h"

/*
 * What each --label read: values, "?" (and why the last one was); guest:
 * the guest's name before each line when a run has several, or NULL.
 */
static void print_label_stats(const struct ivm_label_spec *labels, size_t n,
			      const struct ivm_profiler_result *res,
			      const char *guest)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct ivm_label_stats *st = &res->labels[i];
		uint64_t all = st->read + st->unreadable;

		fprintf(stderr,
			"idlevm: %s%slabel %s: %" PRIu64 " samples with a value, %"
			PRIu64 " unreadable ('?', %.1f%%)%s%s, %" PRIu64
			" samples of processes without %s\n",
			guest ? guest : "", guest ? ": " : "",
			labels[i].key, st->read, st->unreadable,
			all ? 100.0 * (double)st->unreadable / (double)all : 0.0,
			res->label_why[i] ? ": the last because " : "",
			res->label_why[i] ? res->label_why[i] : "",
			st->absent, labels[i].symbol);
	}
}

static double mean_ms(uint64_t total_ns, uint64_t n)
{
	return n ? (double)total_ns / 1e6 / (double)n : 0;
}

/*
 * What the helper did in the guest for this profile, as the helper counted
 * it (protocol 2), else as idlevm asked for it: the cost of watching.
 */
static void print_footprint(const struct ivm_profiler_result *res)
{
	const struct ivm_helper_stats *hs = &res->helper;
	uint64_t req = 0, wake = 0, holds = 0, hold_ns = 0, pins = 0, hp = 0,
		 pin_ns = 0, ends = 0, late = 0, rt = 0;
	double el = res->elapsed_s > 0 ? res->elapsed_s : 1;

	if (!hs->nr) {
		fprintf(stderr,
			"helper footprint (asked by idlevm; this helper does not count): %" PRIu64
			" requests (%.1f/s), %" PRIu64 " holds, %" PRIu64
			" pins\n",
			res->pin.requests, res->pin.requests / el,
			res->pin.holds, res->pin.pins);
		return;
	}
	ivm_helper_stats_get(hs, "requests", &req);
	ivm_helper_stats_get(hs, "wakeups", &wake);
	ivm_helper_stats_get(hs, "holds", &holds);
	ivm_helper_stats_get(hs, "hold_ns", &hold_ns);
	ivm_helper_stats_get(hs, "pins", &pins);
	ivm_helper_stats_get(hs, "held_pins", &hp);
	ivm_helper_stats_get(hs, "held_pin_ns", &pin_ns);
	ivm_helper_stats_get(hs, "lease_ends", &ends);
	ivm_helper_stats_get(hs, "late_holds", &late);
	ivm_helper_stats_get(hs, "refused_rt", &rt);
	fprintf(stderr,
		"helper footprint: %" PRIu64 " requests (%.1f/s), %"
		PRIu64 " wakeups of its loop; %" PRIu64
		" holds spinning %.1f ms in all (%.2f%% of one vCPU), %" PRIu64
		" pins keeping threads %.1f ms in all; %" PRIu64
		" holds ended by their lease, %" PRIu64 " too late to pin, %"
		PRIu64 " real-time targets not pinned\n",
		req, req / el, wake, holds, hold_ns / 1e6,
		hold_ns / 1e7 / el, pins + hp, pin_ns / 1e6, ends, late, rt);
}

/* "idlevm: " or "idlevm: NAME: " before a guest's lines. */
void guest_run_who(const struct profile_opts *o, const struct guest_run *r)
{
	if (o->several)
		fprintf(stderr, "idlevm: %s: ", r->name);
	else
		fprintf(stderr, "idlevm: ");
}

/*
 * Where the loop's time went (stage_clock.h), and per recorded sample:
 * what a user weighs against the profile's worth.
 */
static void print_stages(const struct profile_opts *o, const struct guest_run *r)
{
	const struct ivm_profiler_result *res = &r->res;
	uint64_t all = 0, kept = 0, reads;
	const char *sep;
	int i;

	for (i = 0; i < IVM_STAGE_NR; i++)
		all += res->stage_ns[i];
	for (i = 0; i < IVM_SAMPLE_NR_KINDS; i++)
		kept += res->kept[i];
	if (!all)
		return;
	guest_run_who(o, r);
	fprintf(stderr, "time by stage:");
	for (i = 0; i < IVM_STAGE_NR; i++)
		fprintf(stderr, " %s %.0f%%", ivm_stage_name(i),
			100.0 * (double)res->stage_ns[i] / (double)all);
	if (kept)
		fprintf(stderr, "; %.1f us of host CPU per sample recorded",
			(double)res->cpu_ns / 1e3 / (double)kept);
	fputc('\n', stderr);
	/* The guest memory reads behind it: system calls, unless mapped. */
	for (i = reads = 0; i < IVM_STAGE_NR; i++)
		reads += res->stage_reads[i];
	if (!kept || !reads)
		return;
	guest_run_who(o, r);
	fprintf(stderr, "guest memory reads per sample recorded: %.1f (",
		(double)reads / (double)kept);
	for (i = 0, sep = ""; i < IVM_STAGE_NR; i++) {
		if (!res->stage_reads[i])
			continue;
		fprintf(stderr, "%s%s %.1f", sep, ivm_stage_name(i),
			(double)res->stage_reads[i] / (double)kept);
		sep = ", ";
	}
	fprintf(stderr, ")\n");
}

static double mib(size_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/*
 * What the guest holds of idlevm's memory: what opening it took (its
 * kernel's symbols, ORC and BTF, for its whole boot), what its run's
 * start took, and its caches with their bounds (a window's processes and
 * names are forgotten at the next window; user objects and their CFI rows
 * are kept for the boot, processes' mappings while captures use them).
 * Alone, the process's heap and peak RSS too; with several guests the
 * loop's last line says those.
 */
static void print_memory(const struct profile_opts *o,
			 const struct guest_run *r)
{
	const struct ivm_profiler_result *res = &r->res;

	guest_run_who(o, r);
	fprintf(stderr,
		"memory: %.1f MiB opening the guest (its kernel's symbols, ORC, BTF%s), %.1f MiB starting its run; %zu processes (at most %u) and %zu function names (at most %u) in the last window; %zu user objects (at most %u), %.1f MiB with their images (the images at most %.0f MiB: %" PRIu64 " dropped, made again when next needed); %zu processes' mappings, %.1f MiB (%" PRIu64 " forgotten after a minute unused)",
		mib(r->heap_open),
		r->ktables_users > 1 ? ", shared by guests of the same kernel" : "",
		mib(r->heap_start), res->procs,
		IVM_PROC_INFO_MAX, res->objects.syms, IVM_UOBJECTS_MAX_SYMS,
		res->objects.objects, IVM_UOBJECTS_MAX,
		mib(res->objects.memory), mib(IVM_UOBJECTS_IMAGE_BYTES),
		res->objects.images_dropped, res->maps.spaces,
		mib(res->maps.bytes), res->maps.dropped);
	if (!o->several) {
		struct rusage ru;

		getrusage(RUSAGE_SELF, &ru);
		fprintf(stderr, "; idlevm's heap %.1f MiB as it ended, peak RSS %.1f MiB",
			mib(r->heap_end), (double)ru.ru_maxrss / 1024);
	}
	fputc('\n', stderr);
}

/* What a guest's run did, on stderr, as its closing lines. */
/* The vCPU threads' sleeps, and with the idle gate which woke idlevm. */
static void sleeps_text(const struct ivm_profiler_result *res, char *buf,
			size_t size)
{
	if (res->gated)
		/* The sleeps the gate let pass had no look: no idle/not. */
		snprintf(buf, size, "%" PRIu64
			 " vCPU-thread sleeps (%" PRIu64
			 " woke idlevm through the idle gate: %" PRIu64
			 " idle, %" PRIu64 " not idle; %" PRIu64
			 " let pass, unswitched)",
			 res->gate.sleeps, res->gate.records,
			 res->idle.host_sleeps_idle, res->idle.host_sleeps_busy,
			 res->gate.irq_moved + res->gate.none_moved);
	else
		snprintf(buf, size, "%" PRIu64
			 " vCPU-thread sleeps (%" PRIu64 " idle, %" PRIu64
			 " not idle: QEMU lock or I/O)",
			 res->idle.host_sleeps, res->idle.host_sleeps_idle,
			 res->idle.host_sleeps_busy);
}

void guest_run_summary(const struct profile_opts *o,
		       const struct guest_run *r)
{
	const struct ivm_profiler_result *res = &r->res;
	char sleeps[256];

	guest_run_who(o, r);
	fprintf(stderr,
		"stopped after %.1f s (%s): %" PRIu64 " to_idle, %" PRIu64
		" from_idle, %" PRIu64 " on_cpu samples; discarded %" PRIu64
		" (target ran during the read) + %" PRIu64
		" (target runnable); lost %" PRIu64
		" (capture busy) + %" PRIu64 " (target missed); %" PRIu64
		" idle periods too short to see\n",
		res->elapsed_s, res->end_reason, res->kept[IVM_SAMPLE_TO_IDLE],
		res->kept[IVM_SAMPLE_FROM_IDLE], res->kept[IVM_SAMPLE_ON_CPU],
		res->outcomes[IVM_CAPTURE_DISCARDED_RAN],
		res->outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE],
		res->dispatch.lost_busy, res->dispatch.lost_missed,
		res->dispatch.missed_idle);
	print_label_stats(r->cfg.labels, r->cfg.nr_labels, res,
			  o->several ? r->name : NULL);
	if (res->paused_s) {
		guest_run_who(o, r);
		fprintf(stderr,
			"the guest was not running for %" PRIu64
			" s of the run (paused, or stopped by QEMU: `idlevm info` says which): no samples then\n",
			res->paused_s);
	}
	guest_run_who(o, r);
	fprintf(stderr,
		"targets read from their saved frame: %" PRIu64
		" kept, %" PRIu64 " discarded\n",
		res->blocked_outcomes[IVM_CAPTURE_KEPT],
		res->blocked_outcomes[IVM_CAPTURE_DISCARDED_RAN] +
		res->blocked_outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE]);
	if (res->objects.objects) {
		guest_run_who(o, r);
		fprintf(stderr,
			"user objects: %zu, unwound by the CFI the guest holds: %zu; CFI rows: %"
			PRIu64 " looked up, %" PRIu64
			" read from the file's page cache (not the process's page tables), %"
			PRIu64 " whose bytes the guest did not hold\n",
			res->objects.objects, res->objects.with_image,
			res->objects.row_lookups,
			res->objects.row_page_cache +
			res->objects.row_other_mapping,
			res->objects.row_faults);
	}
	if ((res->to_idle_resolved || res->to_idle_unresolved) &&
	    res->idle_source != IVM_IDLE_SOURCE_SCHED) {
		guest_run_who(o, r);
		fprintf(stderr,
			"to-idle targets the poll could not be sure of: %" PRIu64
			" found in guest memory (%" PRIu64
			" not the task last seen, %" PRIu64
			" in idle periods between two polls), %" PRIu64
			" not found\n",
			res->to_idle_resolved, res->to_idle_retargeted,
			res->dispatch.unseen_to_idle, res->to_idle_unresolved);
	}
	guest_run_who(o, r);
	sleeps_text(res, sleeps, sizeof(sleeps));
	fprintf(stderr,
		"idle source %s: %" PRIu64 " idle periods seen (%" PRIu64
		" ended, recorded), %" PRIu64
		" came and went unseen (%" PRIu64
		" rebuilt from the guest scheduler's stamps, %" PRIu64
		" of them with no start: hidden by a second run of their to-idle thread); %s, %" PRIu64
		" trace records read, %" PRIu64 " trace events lost%s\n",
		ivm_idle_source_name(res->idle_source), res->idle.periods_seen,
		res->periods_written, res->idle.unseen_periods,
		res->idle.recovered_periods, res->periods_no_start, sleeps,
		res->trace_records, res->idle.lost_events,
		res->realtime ? "; waited at real-time priority" : "");
	if (res->idle.host_sleeps_idle) {
		const struct ivm_idle_stats *is = &res->idle;
		char looks[160];

		/*
		 * Late looks miss the idle periods shorter than their
		 * delay: say so, and what helps, when there are many.
		 */
		ivm_idle_looks_text(is, looks, sizeof(looks));
		guest_run_who(o, r);
		fprintf(stderr, "%s%s\n", looks,
			is->halt_looked_late * 100 >=
			IVM_IDLE_LOOK_LATE_HINT_PCT * is->host_sleeps_idle &&
			!res->realtime ?
			"; idle periods shorter than the delay came and went unseen: on a busy host, --realtime looks sooner, at a cost to the guest's latency" :
			"");
	}
	if (r->cfg.capture_mode == IVM_CAPTURE_MODE_PIN) {
		guest_run_who(o, r);
		fprintf(stderr,
			"pin: %" PRIu64 " pinned, %" PRIu64
			" held only, %" PRIu64 " unneeded, %" PRIu64
			" running (not pinned), %" PRIu64
			" read again (asleep again), %" PRIu64
			" skipped, %" PRIu64
			" refused, %" PRIu64 " ran before the pin, %" PRIu64
			" lease expired, %" PRIu64 " unanswered in time, %" PRIu64
			" pin_failed (helper lost), %" PRIu64
			" pin_reconnects (it answered again), %"
			PRIu64 " unpinned meanwhile; mean round trips: hold+pin %.2f ms, unpin+release %.2f ms\n",
			res->pin.ok, res->pin.hold_only, res->pin.unneeded,
			res->pin.running, res->pin.reread, res->pin.skipped,
			res->pin.refused, res->pin.ran_before_pin,
			res->pin.lease_expired, res->pin.timed_out,
			res->pin.failed, res->pin.reconnects, res->pin.unpinned,
			mean_ms(res->pin.pin_ns, res->pin.ok +
						 res->pin.hold_only +
						 res->pin.refused),
			mean_ms(res->pin.restore_ns, res->pin.ok +
						     res->pin.hold_only));
		guest_run_who(o, r);
		print_footprint(res);
	}
	if (res->pin.readaheads || res->pin.readahead_failed) {
		guest_run_who(o, r);
		fprintf(stderr,
			"CFI the guest did not hold, read into its page cache by the helper: %"
			PRIu64 " files, %.1f KiB, %.0f ms; %" PRIu64
			" refused or failed\n",
			res->pin.readaheads,
			(double)res->pin.readahead_bytes / 1024,
			(double)res->pin.readahead_ns / 1e6,
			res->pin.readahead_failed);
	}
	if (r->cfg.switch_every) {
		const struct ivm_switch_sampler_stats *ss = &res->switches;

		guest_run_who(o, r);
		fprintf(stderr,
			"switch sampling every %u switches: %" PRIu64
			" threads watched (%" PRIu64 " met, %" PRIu64
			" gone, %" PRIu64 " past the cap); %" PRIu64
			" crossings, %" PRIu64 " samples kept, %" PRIu64
			" discarded (the thread ran during the read), %" PRIu64
			" capture failed; %" PRIu64 " looks, %.1f us each (max %.1f us), %" PRIu64
			" sweeps of the task lists (%" PRIu64 " cut short)\n",
			r->cfg.switch_every, ss->watched, ss->threads_met,
			ss->gone, ss->unwatched, ss->crossings,
			res->kept[IVM_SAMPLE_SWITCH], ss->discarded,
			ss->capture_failed, ss->looks,
			ss->looks ? (double)ss->look_ns / 1e3 /
				    (double)ss->looks : 0.0,
			(double)ss->look_max_ns / 1e3, ss->sweeps,
			ss->sweeps_truncated);
	}
	guest_run_who(o, r);
	fprintf(stderr, "host CPU %.2f s over %.1f s (%.1f%% of a core), and %.2f s opening the guest\n",
		(double)res->cpu_ns / 1e9, res->elapsed_s,
		res->elapsed_s > 0 ?
		100.0 * (double)res->cpu_ns / 1e9 / res->elapsed_s : 0,
		(double)r->attach_ns / 1e9);
	if (r->cfg.cpu_budget > 0) {
		guest_run_who(o, r);
		fprintf(stderr, "CPU budget %g%% of a core: the guest was watched %.1f s of %.1f s (%.1f%%, %" PRIu64 " of %" PRIu64 " slices); reports scale counts by %.2f\n",
			r->cfg.cpu_budget, (double)res->watched_ns / 1e9,
			res->elapsed_s,
			res->elapsed_s > 0 ? 100.0 * (double)res->watched_ns /
					     1e9 / res->elapsed_s : 0,
			res->watched_slices, res->slices,
			res->watched_ns ? res->elapsed_s * 1e9 /
					  (double)res->watched_ns : 0);
	}
	print_stages(o, r);
	print_memory(o, r);
	if (o->wcfg.dir) {
		guest_run_who(o, r);
		fprintf(stderr, "%u windows in %s (%u pprof made, %u failed); %zu old windows removed by --keep\n",
			r->windows.windows, o->wcfg.dir, r->windows.pprofs,
			r->windows.pprof_failures, r->windows.pruned);
	}
}
