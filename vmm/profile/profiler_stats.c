// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernel/last_ran.h"
#include "profile/profiler_int.h"
#include "profile/replay.h"

static void fill_switch_stats(const struct profiler *p, struct ivm_stat *st,
			      size_t *nr);

/*
 * st[*n] = { name, value } while the table has room; past MAX_STATS (a
 * stat added without growing it) only counted, so fill_stats() says so
 * instead of writing past its caller's array.
 */
static void put_stat(struct ivm_stat *st, size_t *n, const char *name,
		     uint64_t value)
{
	if (*n < MAX_STATS)
		st[*n] = (struct ivm_stat){ name, value };
	(*n)++;
}

/* Where a filler of its own writes (st + n or the end), and how many. */
static struct ivm_stat *stat_at(struct ivm_stat *st, size_t n)
{
	return st + (n < MAX_STATS ? n : MAX_STATS);
}

static size_t stat_room(size_t n)
{
	return n < MAX_STATS ? MAX_STATS - n : 0;
}

static const char *const stage_stat[IVM_STAGE_NR] = {
	"stage_other_us", "stage_events_us", "stage_looks_us",
	"stage_stamps_us", "stage_capture_us", "stage_write_us",
};

static const char *const stage_reads_stat[IVM_STAGE_NR] = {
	"stage_other_reads", "stage_events_reads", "stage_looks_reads",
	"stage_stamps_reads", "stage_capture_reads", "stage_write_reads",
};

/*
 * What the idle signal saw, and the guest's idle transitions counted from
 * its own idle-task switch counts: every period whose start was seen, and
 * every one that came and went between two looks.
 */
static void fill_idle_stats(const struct profiler *p, struct ivm_stat *st,
			    size_t *nr)
{
	const struct ivm_idle_stats *is = ivm_idle_periods_stats(p->periods);
	size_t n = *nr;

	put_stat(st, &n, "idle_periods_seen", is->periods_seen);
	put_stat(st, &n, "idle_periods_ended", is->periods_ended);
	put_stat(st, &n, "idle_periods_unseen", is->unseen_periods);
	put_stat(st, &n, "idle_periods_written", p->res->periods_written);
	put_stat(st, &n, "from_idle_late", is->from_idle_late);
	put_stat(st, &n, "host_sleeps", is->host_sleeps);
	put_stat(st, &n, "host_sleeps_idle", is->host_sleeps_idle);
	put_stat(st, &n, "host_sleeps_busy", is->host_sleeps_busy);
	put_stat(st, &n, "halt_looked_100us", is->halt_looked_100us);
	put_stat(st, &n, "halt_looked_1ms", is->halt_looked_1ms);
	put_stat(st, &n, "halt_looked_late", is->halt_looked_late);
	put_stat(st, &n, "host_wakes", is->host_wakes);
	put_stat(st, &n, "wakes_no_switch", is->wakes_no_switch);
	put_stat(st, &n, "halts_passed", is->halts_passed);
	put_stat(st, &n, "own_switches", is->own_switches);
	put_stat(st, &n, "idle_periods_replayed", is->recovered_periods);
	put_stat(st, &n, "idle_periods_no_start", p->res->periods_no_start);
	put_stat(st, &n, "to_idle_valued", p->res->valued[IVM_SAMPLE_TO_IDLE]);
	put_stat(st, &n, "from_idle_valued",
		 p->res->valued[IVM_SAMPLE_FROM_IDLE]);
	put_stat(st, &n, "to_idle_later",
		 p->res->kept_later[IVM_SAMPLE_TO_IDLE]);
	put_stat(st, &n, "guest_paused_s", p->res->paused_s);
	/* libvirtd restarted: its connection opened again. */
	put_stat(st, &n, "libvirt_reconnects",
		 ivm_qmp_reconnects(p->guest->qmp));
	put_stat(st, &n, "trace_lost", is->lost_events);
	put_stat(st, &n, "trace_records", p->res->trace_records);
	put_stat(st, &n, "host_trace_records", p->res->host_trace_records);
	put_stat(st, &n, "host_trace_lost", p->host_trace_lost);
	put_stat(st, &n, "host_trace_reads", p->host_sides_reads);
	if (p->guest->kvm) {
		put_stat(st, &n, "kvm_halt_exits", is->kvm_halt_exits);
		put_stat(st, &n, "kvm_halts_slept", is->kvm_halts_slept);
		put_stat(st, &n, "kvm_halts_polled", is->kvm_halts_polled);
	}
	*nr = n;
}

/* How user stacks ended, by reason (capture.h): what a guest cut short. */
static void fill_user_stack_stats(const struct ivm_capture_user_stats *u,
				  struct ivm_stat *st, size_t *nr)
{
	size_t n = *nr;

	put_stat(st, &n, "user_stacks", u->unwinds);
	put_stat(st, &n, "user_stack_fault", u->fault);
	put_stat(st, &n, "user_stack_cap", u->cap);
	put_stat(st, &n, "user_stack_loop", u->loop);
	put_stat(st, &n, "user_stack_bad_cfi", u->bad_cfi);
	put_stat(st, &n, "user_stack_no_cfi", u->no_cfi);
	put_stat(st, &n, "user_stack_errors", u->errors);
	put_stat(st, &n, "user_stack_unreadable", u->no_reader);
	*nr = n;
}

void fill_stats(const struct profiler *p, struct ivm_stat *st,
		       size_t *nr)
{
	const struct ivm_profiler_result *r = p->res;
	const struct ivm_dispatch_stats *d = ivm_dispatch_stats(p->dispatch);
	/* What a cache holds now, not a count: a window says it as it is. */
	bool level[MAX_STATS] = { false };
	size_t n = 0, i;

	put_stat(st, &n, "elapsed_ms", (ivm_mono_ns() - p->start_ns) / 1000000);
	put_stat(st, &n, "to_idle", r->kept[IVM_SAMPLE_TO_IDLE]);
	put_stat(st, &n, "from_idle", r->kept[IVM_SAMPLE_FROM_IDLE]);
	put_stat(st, &n, "on_cpu", r->kept[IVM_SAMPLE_ON_CPU]);
	put_stat(st, &n, "discarded_ran",
		 r->outcomes[IVM_CAPTURE_DISCARDED_RAN]);
	put_stat(st, &n, "discarded_runnable",
		 r->outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE]);
	put_stat(st, &n, "capture_failed", r->outcomes[IVM_CAPTURE_FAILED]);
	put_stat(st, &n, "blocked_kept", r->blocked_outcomes[IVM_CAPTURE_KEPT]);
	put_stat(st, &n, "blocked_discarded",
		 r->blocked_outcomes[IVM_CAPTURE_DISCARDED_RAN] +
		 r->blocked_outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE]);
	put_stat(st, &n, "filtered", r->filtered);
	put_stat(st, &n, "lost_busy", d->lost_busy);
	put_stat(st, &n, "lost_missed", d->lost_missed);
	put_stat(st, &n, "lost_no_target", d->lost_no_target);
	put_stat(st, &n, "missed_idle", d->missed_idle);
	put_stat(st, &n, "idle_transitions", d->idle_transitions);
	put_stat(st, &n, "inconsistent", d->inconsistent);
	put_stat(st, &n, "unseen_to_idle", d->unseen_to_idle);
	put_stat(st, &n, "to_idle_resolved", r->to_idle_resolved);
	put_stat(st, &n, "to_idle_retargeted", r->to_idle_retargeted);
	put_stat(st, &n, "to_idle_unresolved", r->to_idle_unresolved);
	put_stat(st, &n, "capture_retries", r->retries);
	put_stat(st, &n, "torn_reads", r->torn_reads);
	put_stat(st, &n, "mid_switch_looks", r->mid_switch_looks);
	put_stat(st, &n, "live_rereads", r->live_rereads);
	put_stat(st, &n, "live_rereads_mended", r->live_rereads_mended);
	put_stat(st, &n, "live_rereads_failed", r->live_rereads_failed);
	put_stat(st, &n, "from_idle_resolved", r->from_idle_resolved);
	put_stat(st, &n, "from_idle_unresolved", r->from_idle_unresolved);
	{
		struct ivm_uobjects_stats us;
		struct ivm_capture_maps_stats ms;

		ivm_uobjects_stats(ivm_capture_engine_objects(p->engine), &us);
		level[n] = true;
		put_stat(st, &n, "user_objects", us.objects);
		level[n] = true;
		put_stat(st, &n, "user_images_bytes", us.image_memory);
		put_stat(st, &n, "user_images_dropped", us.images_dropped);
		ivm_capture_engine_maps_stats(p->engine, &ms);
		level[n] = true;
		put_stat(st, &n, "user_maps_bytes", ms.bytes);
		put_stat(st, &n, "user_maps_dropped", ms.dropped);
		put_stat(st, &n, "cfi_rows", us.row_lookups);
		put_stat(st, &n, "cfi_rows_absent", us.row_faults);
		put_stat(st, &n, "cfi_rows_page_cache",
			 us.row_page_cache + us.row_other_mapping);
		fill_user_stack_stats(ivm_capture_engine_user_stats(p->engine),
				      st, &n);
	}
	if (p->cfg->capture_mode == IVM_CAPTURE_MODE_PIN && p->cfg->pin) {
		const struct ivm_pin_stats *ps =
			ivm_pin_capture_stats(p->cfg->pin);

		put_stat(st, &n, "pin_ok", ps->ok);
		put_stat(st, &n, "pin_hold_only", ps->hold_only);
		put_stat(st, &n, "pin_skipped", ps->skipped);
		put_stat(st, &n, "pin_unneeded", ps->unneeded);
		put_stat(st, &n, "pin_running", ps->running);
		put_stat(st, &n, "pin_reread", ps->reread);
		put_stat(st, &n, "pin_refused", ps->refused);
		put_stat(st, &n, "pin_ran_before", ps->ran_before_pin);
		put_stat(st, &n, "pin_lease_expired", ps->lease_expired);
		put_stat(st, &n, "pin_timed_out", ps->timed_out);
		put_stat(st, &n, "pin_failed", ps->failed);
		put_stat(st, &n, "pin_unpinned", ps->unpinned);
		put_stat(st, &n, "pin_reconnects", ps->reconnects);
		put_stat(st, &n, "pin_requests", ps->requests);
		put_stat(st, &n, "pin_holds", ps->holds);
		put_stat(st, &n, "pin_pins", ps->pins);
		put_stat(st, &n, "pin_lease_us", ps->lease_us);
		put_stat(st, &n, "pin_refused_rt", ps->refused_rt);
		put_stat(st, &n, "readaheads", ps->readaheads);
		put_stat(st, &n, "readahead_bytes", ps->readahead_bytes);
		put_stat(st, &n, "readahead_failed", ps->readahead_failed);
	}
	fill_idle_stats(p, st, &n);
	fill_switch_stats(p, st, &n);
	if (p->last_ran) {
		const struct ivm_last_ran_stats *ls =
			ivm_last_ran_stats(p->last_ran);

		put_stat(st, &n, "stamps_exact", ls->exact);
		put_stat(st, &n, "stamps_latest", ls->latest);
		put_stat(st, &n, "stamps_walks", ls->walks);
		put_stat(st, &n, "stamps_stale_walks", ls->stale_walks);
		put_stat(st, &n, "stamps_stale_refused", ls->stale_refused);
		put_stat(st, &n, "stamps_tied_refused", ls->tied_refused);
		put_stat(st, &n, "stamps_running_refused", ls->running_refused);
		put_stat(st, &n, "stamps_stale_refused_first",
			 ls->stale_refused_first);
		put_stat(st, &n, "stamps_stale_refused_window",
			 ls->stale_refused_window);
		put_stat(st, &n, "stamps_stale_local", ls->stale_local);
		put_stat(st, &n, "stamps_full_reads", ls->full_reads);
		put_stat(st, &n, "stamps_hot_reads", ls->hot_reads);
		put_stat(st, &n, "stamps_hot_misses", ls->hot_misses);
		put_stat(st, &n, "stamps_walk_tasks", ls->walk_tasks);
		put_stat(st, &n, "stamps_walk_reads", ls->walk_reads);
	}
	put_stat(st, &n, "polls", r->polls);
	put_stat(st, &n, "poll_errors", r->poll_errors);
	/* The idle gate's decisions (idle_gate.h), from the kernel's maps. */
	if (p->gate) {
		struct ivm_idle_gate_stats gs;

		ivm_idle_gate_stats(p->gate, &gs);
		put_stat(st, &n, "gate_sleeps", gs.sleeps);
		put_stat(st, &n, "gate_wakeups", gs.records);
		put_stat(st, &n, "gate_passed_irqs", gs.irq_moved);
		put_stat(st, &n, "gate_passed_quiet", gs.none_moved);
		put_stat(st, &n, "gate_unreadable", gs.read_failed);
		put_stat(st, &n, "gate_ring_full", gs.ring_full);
	}
	if (p->engine && ivm_capture_engine_labels(p->engine))
		n += ivm_labels_fill_stats(ivm_capture_engine_labels(p->engine),
					   stat_at(st, n), stat_room(n));
	/* What this guest's profiling cost the host (idlevm's thread). */
	put_stat(st, &n, "host_cpu_ms", r->cpu_ns / 1000000);
	/*
	 * Under a CPU budget, the time the guest was watched: counts
	 * estimate the whole run's scaled by elapsed_ms / watched_ms.
	 */
	if (p->cfg->cpu_budget > 0) {
		put_stat(st, &n, "watched_ms",
			 ivm_cpu_budget_watched_ns(&p->budget,
						   ivm_mono_ns()) / 1000000);
		put_stat(st, &n, "budget_gaps", p->budget_gaps);
	}
	/* ... and the loop's time by stage (stage_clock.h), in us. */
	for (i = 0; i < IVM_STAGE_NR; i++)
		put_stat(st, &n, stage_stat[i], p->stages.ns[i] / 1000);
	for (i = 0; i < IVM_STAGE_NR; i++)
		put_stat(st, &n, stage_reads_stat[i], p->stages.reads[i]);
	/* The timeline's spans (write_spans), before the tables that grow. */
	if (p->host) {
		put_stat(st, &n, "timeline_spans", p->spans_written);
		put_stat(st, &n, "timeline_spans_dropped", p->spans_dropped);
		put_stat(st, &n, "timeline_span_bytes", p->span_bytes);
	}
	if (p->disk) {
		put_stat(st, &n, "disk_trace_records", p->disk_trace_records);
		put_stat(st, &n, "disk_trace_lost", p->disk_trace_lost);
		n += ivm_disk_service_fill_stats(p->disk, stat_at(st, n),
						 stat_room(n));
	}
	/* Last: its table of host tasks grows (host_sched.h). */
	if (p->host)
		n += ivm_host_sched_fill_stats(p->host, stat_at(st, n),
						 stat_room(n));
	if (n > MAX_STATS) {
		fprintf(stderr, "idlevm: internal: %zu running totals past MAX_STATS (%d) left out of the profile\n",
			n - MAX_STATS, MAX_STATS);
		n = MAX_STATS;
	}
	/* Of this window only (next_window() took the counts at its start). */
	for (i = 0; i < n && i < p->nr_window_base; i++)
		if (!level[i] &&
		    st[i].value >= p->window_base[i].value)
			st[i].value -= p->window_base[i].value;
	*nr = n;
}

/*
 * A lane that breaks the record's rules (a bug of the spans' producer)
 * costs its spans, counted as dropped, not the run: the samples matter
 * more.  Only the file's own errors end it.
 */
static struct ivm_error *write_lane(struct profiler *p,
				    const struct ivm_spans_record *sr)
{
	struct ivm_error *err;

	err = ivm_profile_write_spans(p->writer, sr, &p->span_bytes);
	if (err && err->code == IVM_ERROR_INVALID) {
		ivm_error_destroy(err);
		p->spans_dropped += sr->nr + sr->dropped;
		return NULL;
	}
	p->spans_written += sr->nr;
	p->spans_dropped += sr->dropped;
	return err;
}

/*
 * What the host did in time since the last flush, for the timeline: one
 * HOST_SPANS record per vCPU with waits to show and one for the disks
 * (profile_file.h).  Taken even when the write fails: the spans are gone
 * either way, and the next flush must not repeat them.
 */
struct ivm_error *write_spans(struct profiler *p)
{
	struct ivm_spans_record sr;
	struct ivm_error *err;
	size_t i;

	/* Their records up to now: the spans end here. */
	err = host_sides_read(p, true);
	for (i = 0; p->host && p->writer && i < p->guest->nr_vcpus &&
		    i < IVM_SPAN_MAX_VCPUS; i++) {
		ivm_host_sched_take_spans(p->host, i, &sr);
		if (!err)
			err = write_lane(p, &sr);
	}
	if (p->disk && p->writer) {
		ivm_disk_service_take_spans(p->disk, &sr);
		if (!err)
			err = write_lane(p, &sr);
	}
	return err;
}

/* Running totals only: a window's stats are differences (next_window). */
static void fill_switch_stats(const struct profiler *p, struct ivm_stat *st,
			      size_t *nr)
{
	const struct ivm_switch_sampler_stats *ss = &p->res->switches;
	size_t n = *nr;

	if (!p->switches)
		return;
	ivm_switch_sampler_stats(p->switches, &p->res->switches);
	put_stat(st, &n, "switch", p->res->kept[IVM_SAMPLE_SWITCH]);
	put_stat(st, &n, "switch_crossings", ss->crossings);
	put_stat(st, &n, "switch_coalesced", ss->coalesced);
	put_stat(st, &n, "switch_discarded", ss->discarded);
	put_stat(st, &n, "switch_capture_failed", ss->capture_failed);
	put_stat(st, &n, "switch_deferred", ss->deferred);
	put_stat(st, &n, "switch_waited_on_cpu", ss->waited_on_cpu);
	put_stat(st, &n, "switch_looks", ss->looks);
	put_stat(st, &n, "switch_look_ns", ss->look_ns);
	put_stat(st, &n, "switch_reads", ss->reads);
	put_stat(st, &n, "switch_read_failed", ss->read_failed);
	put_stat(st, &n, "switch_threads_met", ss->threads_met);
	put_stat(st, &n, "switch_threads_gone", ss->gone);
	put_stat(st, &n, "switch_unwatched", ss->unwatched);
	put_stat(st, &n, "switch_sweeps", ss->sweeps);
	put_stat(st, &n, "switch_sweeps_truncated", ss->sweeps_truncated);
	put_stat(st, &n, "switch_walk_reads", ss->walk_reads);
	*nr = n;
}
