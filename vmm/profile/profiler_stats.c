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

static const char *const stage_stat[IVM_STAGE_NR] = {
	"stage_other_us", "stage_events_us", "stage_looks_us",
	"stage_stamps_us", "stage_capture_us", "stage_write_us",
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

	st[n++] = (struct ivm_stat){ "idle_periods_seen", is->periods_seen };
	st[n++] = (struct ivm_stat){ "idle_periods_ended", is->periods_ended };
	st[n++] = (struct ivm_stat){ "idle_periods_unseen",
				     is->unseen_periods };
	st[n++] = (struct ivm_stat){ "idle_periods_written",
				     p->res->periods_written };
	st[n++] = (struct ivm_stat){ "from_idle_late", is->from_idle_late };
	st[n++] = (struct ivm_stat){ "host_sleeps", is->host_sleeps };
	st[n++] = (struct ivm_stat){ "host_sleeps_idle", is->host_sleeps_idle };
	st[n++] = (struct ivm_stat){ "host_sleeps_busy", is->host_sleeps_busy };
	st[n++] = (struct ivm_stat){ "halt_looked_100us",
				     is->halt_looked_100us };
	st[n++] = (struct ivm_stat){ "halt_looked_1ms", is->halt_looked_1ms };
	st[n++] = (struct ivm_stat){ "halt_looked_late", is->halt_looked_late };
	st[n++] = (struct ivm_stat){ "host_wakes", is->host_wakes };
	st[n++] = (struct ivm_stat){ "wakes_no_switch", is->wakes_no_switch };
	st[n++] = (struct ivm_stat){ "own_switches", is->own_switches };
	st[n++] = (struct ivm_stat){ "idle_periods_replayed",
				     is->recovered_periods };
	st[n++] = (struct ivm_stat){ "idle_periods_no_start",
				     p->res->periods_no_start };
	st[n++] = (struct ivm_stat){ "to_idle_valued",
				     p->res->valued[IVM_SAMPLE_TO_IDLE] };
	st[n++] = (struct ivm_stat){ "from_idle_valued",
				     p->res->valued[IVM_SAMPLE_FROM_IDLE] };
	st[n++] = (struct ivm_stat){ "to_idle_later",
				     p->res->kept_later[IVM_SAMPLE_TO_IDLE] };
	st[n++] = (struct ivm_stat){ "guest_paused_s", p->res->paused_s };
	/* libvirtd restarted: its connection opened again. */
	st[n++] = (struct ivm_stat){ "libvirt_reconnects",
				     ivm_qmp_reconnects(p->guest->qmp) };
	st[n++] = (struct ivm_stat){ "trace_lost", is->lost_events };
	st[n++] = (struct ivm_stat){ "trace_records", p->res->trace_records };
	st[n++] = (struct ivm_stat){ "host_trace_records",
				     p->res->host_trace_records };
	st[n++] = (struct ivm_stat){ "host_trace_lost", p->host_trace_lost };
	st[n++] = (struct ivm_stat){ "host_trace_reads", p->host_sides_reads };
	if (p->guest->kvm) {
		st[n++] = (struct ivm_stat){ "kvm_halt_exits",
					     is->kvm_halt_exits };
		st[n++] = (struct ivm_stat){ "kvm_halts_slept",
					     is->kvm_halts_slept };
		st[n++] = (struct ivm_stat){ "kvm_halts_polled",
					     is->kvm_halts_polled };
	}
	*nr = n;
}

/* How user stacks ended, by reason (capture.h): what a guest cut short. */
static void fill_user_stack_stats(const struct ivm_capture_user_stats *u,
				  struct ivm_stat *st, size_t *nr)
{
	size_t n = *nr;

	st[n++] = (struct ivm_stat){ "user_stacks", u->unwinds };
	st[n++] = (struct ivm_stat){ "user_stack_fault", u->fault };
	st[n++] = (struct ivm_stat){ "user_stack_cap", u->cap };
	st[n++] = (struct ivm_stat){ "user_stack_loop", u->loop };
	st[n++] = (struct ivm_stat){ "user_stack_bad_cfi", u->bad_cfi };
	st[n++] = (struct ivm_stat){ "user_stack_no_cfi", u->no_cfi };
	st[n++] = (struct ivm_stat){ "user_stack_errors", u->errors };
	st[n++] = (struct ivm_stat){ "user_stack_unreadable", u->no_reader };
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

	st[n++] = (struct ivm_stat){ "elapsed_ms",
				     (ivm_mono_ns() - p->start_ns) / 1000000 };
	st[n++] = (struct ivm_stat){ "to_idle", r->kept[IVM_SAMPLE_TO_IDLE] };
	st[n++] = (struct ivm_stat){ "from_idle", r->kept[IVM_SAMPLE_FROM_IDLE] };
	st[n++] = (struct ivm_stat){ "on_cpu", r->kept[IVM_SAMPLE_ON_CPU] };
	st[n++] = (struct ivm_stat){ "discarded_ran",
				     r->outcomes[IVM_CAPTURE_DISCARDED_RAN] };
	st[n++] = (struct ivm_stat){ "discarded_runnable",
				     r->outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE] };
	st[n++] = (struct ivm_stat){ "capture_failed",
				     r->outcomes[IVM_CAPTURE_FAILED] };
	st[n++] = (struct ivm_stat){ "blocked_kept",
				     r->blocked_outcomes[IVM_CAPTURE_KEPT] };
	st[n++] = (struct ivm_stat){
		"blocked_discarded",
		r->blocked_outcomes[IVM_CAPTURE_DISCARDED_RAN] +
		r->blocked_outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE] };
	st[n++] = (struct ivm_stat){ "filtered", r->filtered };
	st[n++] = (struct ivm_stat){ "lost_busy", d->lost_busy };
	st[n++] = (struct ivm_stat){ "lost_missed", d->lost_missed };
	st[n++] = (struct ivm_stat){ "lost_no_target", d->lost_no_target };
	st[n++] = (struct ivm_stat){ "missed_idle", d->missed_idle };
	st[n++] = (struct ivm_stat){ "idle_transitions", d->idle_transitions };
	st[n++] = (struct ivm_stat){ "inconsistent", d->inconsistent };
	st[n++] = (struct ivm_stat){ "unseen_to_idle", d->unseen_to_idle };
	st[n++] = (struct ivm_stat){ "to_idle_resolved", r->to_idle_resolved };
	st[n++] = (struct ivm_stat){ "to_idle_retargeted",
				     r->to_idle_retargeted };
	st[n++] = (struct ivm_stat){ "to_idle_unresolved",
				     r->to_idle_unresolved };
	st[n++] = (struct ivm_stat){ "capture_retries", r->retries };
	st[n++] = (struct ivm_stat){ "torn_reads", r->torn_reads };
	st[n++] = (struct ivm_stat){ "mid_switch_looks", r->mid_switch_looks };
	st[n++] = (struct ivm_stat){ "live_rereads", r->live_rereads };
	st[n++] = (struct ivm_stat){ "live_rereads_mended",
				     r->live_rereads_mended };
	st[n++] = (struct ivm_stat){ "live_rereads_failed",
				     r->live_rereads_failed };
	st[n++] = (struct ivm_stat){ "from_idle_resolved",
				     r->from_idle_resolved };
	st[n++] = (struct ivm_stat){ "from_idle_unresolved",
				     r->from_idle_unresolved };
	{
		struct ivm_uobjects_stats us;
		struct ivm_capture_maps_stats ms;

		ivm_uobjects_stats(ivm_capture_engine_objects(p->engine), &us);
		level[n] = true;
		st[n++] = (struct ivm_stat){ "user_objects", us.objects };
		level[n] = true;
		st[n++] = (struct ivm_stat){ "user_images_bytes",
					     us.image_memory };
		st[n++] = (struct ivm_stat){ "user_images_dropped",
					     us.images_dropped };
		ivm_capture_engine_maps_stats(p->engine, &ms);
		level[n] = true;
		st[n++] = (struct ivm_stat){ "user_maps_bytes", ms.bytes };
		st[n++] = (struct ivm_stat){ "user_maps_dropped",
					     ms.dropped };
		st[n++] = (struct ivm_stat){ "cfi_rows", us.row_lookups };
		st[n++] = (struct ivm_stat){ "cfi_rows_absent",
					     us.row_faults };
		st[n++] = (struct ivm_stat){ "cfi_rows_page_cache",
					     us.row_page_cache +
					     us.row_other_mapping };
		fill_user_stack_stats(ivm_capture_engine_user_stats(p->engine),
				      st, &n);
	}
	if (p->cfg->capture_mode == IVM_CAPTURE_MODE_PIN && p->cfg->pin) {
		const struct ivm_pin_stats *ps =
			ivm_pin_capture_stats(p->cfg->pin);

		st[n++] = (struct ivm_stat){ "pin_ok", ps->ok };
		st[n++] = (struct ivm_stat){ "pin_hold_only", ps->hold_only };
		st[n++] = (struct ivm_stat){ "pin_skipped", ps->skipped };
		st[n++] = (struct ivm_stat){ "pin_unneeded", ps->unneeded };
		st[n++] = (struct ivm_stat){ "pin_running", ps->running };
		st[n++] = (struct ivm_stat){ "pin_reread", ps->reread };
		st[n++] = (struct ivm_stat){ "pin_refused", ps->refused };
		st[n++] = (struct ivm_stat){ "pin_ran_before",
					     ps->ran_before_pin };
		st[n++] = (struct ivm_stat){ "pin_lease_expired",
					     ps->lease_expired };
		st[n++] = (struct ivm_stat){ "pin_timed_out", ps->timed_out };
		st[n++] = (struct ivm_stat){ "pin_failed", ps->failed };
		st[n++] = (struct ivm_stat){ "pin_unpinned", ps->unpinned };
		st[n++] = (struct ivm_stat){ "pin_reconnects", ps->reconnects };
		st[n++] = (struct ivm_stat){ "pin_requests", ps->requests };
		st[n++] = (struct ivm_stat){ "pin_holds", ps->holds };
		st[n++] = (struct ivm_stat){ "pin_pins", ps->pins };
		st[n++] = (struct ivm_stat){ "pin_lease_us", ps->lease_us };
		st[n++] = (struct ivm_stat){ "pin_refused_rt",
					     ps->refused_rt };
		st[n++] = (struct ivm_stat){ "readaheads", ps->readaheads };
		st[n++] = (struct ivm_stat){ "readahead_bytes",
					     ps->readahead_bytes };
		st[n++] = (struct ivm_stat){ "readahead_failed",
					     ps->readahead_failed };
	}
	fill_idle_stats(p, st, &n);
	fill_switch_stats(p, st, &n);
	if (p->last_ran) {
		const struct ivm_last_ran_stats *ls =
			ivm_last_ran_stats(p->last_ran);

		st[n++] = (struct ivm_stat){ "stamps_exact", ls->exact };
		st[n++] = (struct ivm_stat){ "stamps_latest", ls->latest };
		st[n++] = (struct ivm_stat){ "stamps_walks", ls->walks };
		st[n++] = (struct ivm_stat){ "stamps_stale_walks",
					     ls->stale_walks };
		st[n++] = (struct ivm_stat){ "stamps_stale_refused",
					     ls->stale_refused };
		st[n++] = (struct ivm_stat){ "stamps_tied_refused",
					     ls->tied_refused };
		st[n++] = (struct ivm_stat){ "stamps_running_refused",
					     ls->running_refused };
		st[n++] = (struct ivm_stat){ "stamps_stale_refused_first",
					     ls->stale_refused_first };
		st[n++] = (struct ivm_stat){ "stamps_stale_refused_window",
					     ls->stale_refused_window };
		st[n++] = (struct ivm_stat){ "stamps_stale_local",
					     ls->stale_local };
		st[n++] = (struct ivm_stat){ "stamps_full_reads",
					     ls->full_reads };
		st[n++] = (struct ivm_stat){ "stamps_hot_reads",
					     ls->hot_reads };
		st[n++] = (struct ivm_stat){ "stamps_hot_misses",
					     ls->hot_misses };
		st[n++] = (struct ivm_stat){ "stamps_walk_tasks",
					     ls->walk_tasks };
		st[n++] = (struct ivm_stat){ "stamps_walk_reads",
					     ls->walk_reads };
	}
	st[n++] = (struct ivm_stat){ "polls", r->polls };
	st[n++] = (struct ivm_stat){ "poll_errors", r->poll_errors };
	if (p->engine && ivm_capture_engine_labels(p->engine))
		n += ivm_labels_fill_stats(ivm_capture_engine_labels(p->engine),
					   st + n, MAX_STATS - n);
	/* What this guest's profiling cost the host (idlevm's thread). */
	st[n++] = (struct ivm_stat){ "host_cpu_ms", r->cpu_ns / 1000000 };
	/*
	 * Under a CPU budget, the time the guest was watched: counts
	 * estimate the whole run's scaled by elapsed_ms / watched_ms.
	 */
	if (p->cfg->cpu_budget > 0) {
		st[n++] = (struct ivm_stat){ "watched_ms",
			ivm_cpu_budget_watched_ns(&p->budget, ivm_mono_ns()) /
			1000000 };
		st[n++] = (struct ivm_stat){ "budget_gaps", p->budget_gaps };
	}
	/* ... and the loop's time by stage (stage_clock.h), in us. */
	for (i = 0; i < IVM_STAGE_NR; i++)
		st[n++] = (struct ivm_stat){ stage_stat[i],
					     p->stages.ns[i] / 1000 };
	/* The timeline's spans (write_spans), before the tables that grow. */
	if (p->host) {
		st[n++] = (struct ivm_stat){ "timeline_spans", p->spans_written };
		st[n++] = (struct ivm_stat){ "timeline_spans_dropped",
					     p->spans_dropped };
		st[n++] = (struct ivm_stat){ "timeline_span_bytes",
					     p->span_bytes };
	}
	if (p->disk) {
		st[n++] = (struct ivm_stat){ "disk_trace_records",
					     p->disk_trace_records };
		st[n++] = (struct ivm_stat){ "disk_trace_lost",
					     p->disk_trace_lost };
		n += ivm_disk_service_fill_stats(p->disk, st + n,
						 MAX_STATS - n);
	}
	/* Last: its table of host tasks grows (host_sched.h). */
	if (p->host)
		n += ivm_host_sched_fill_stats(p->host, st + n, MAX_STATS - n);
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
	st[n++] = (struct ivm_stat){ "switch", p->res->kept[IVM_SAMPLE_SWITCH] };
	st[n++] = (struct ivm_stat){ "switch_crossings", ss->crossings };
	st[n++] = (struct ivm_stat){ "switch_coalesced", ss->coalesced };
	st[n++] = (struct ivm_stat){ "switch_discarded", ss->discarded };
	st[n++] = (struct ivm_stat){ "switch_capture_failed",
				     ss->capture_failed };
	st[n++] = (struct ivm_stat){ "switch_deferred", ss->deferred };
	st[n++] = (struct ivm_stat){ "switch_waited_on_cpu",
				     ss->waited_on_cpu };
	st[n++] = (struct ivm_stat){ "switch_looks", ss->looks };
	st[n++] = (struct ivm_stat){ "switch_look_ns", ss->look_ns };
	st[n++] = (struct ivm_stat){ "switch_reads", ss->reads };
	st[n++] = (struct ivm_stat){ "switch_read_failed", ss->read_failed };
	st[n++] = (struct ivm_stat){ "switch_threads_met", ss->threads_met };
	st[n++] = (struct ivm_stat){ "switch_threads_gone", ss->gone };
	st[n++] = (struct ivm_stat){ "switch_unwatched", ss->unwatched };
	st[n++] = (struct ivm_stat){ "switch_sweeps", ss->sweeps };
	st[n++] = (struct ivm_stat){ "switch_sweeps_truncated",
				     ss->sweeps_truncated };
	st[n++] = (struct ivm_stat){ "switch_walk_reads", ss->walk_reads };
	*nr = n;
}
