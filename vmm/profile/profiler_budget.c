// SPDX-License-Identifier: MIT
/*
 * --cpu-budget: the run watches the guest only in some slices of time
 * (cpu_budget.h).  Here the profiler stops watching at the end of a
 * watched slice and begins again, from nothing, at the start of the next.
 */
#include <string.h>

#include "profile/profiler_int.h"

/*
 * Switch the run's sessions on or off; switched on, they first drop what
 * they hold (records from before the gap).  A session that cannot be
 * switched off keeps recording: only the saving is lost.
 */
static void sessions_enable(struct profiler *p, bool on)
{
	struct ivm_trace_session *s[] = { p->trace, p->host_trace,
					  p->disk_trace };
	size_t i;

	for (i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		if (!s[i])
			continue;
		if (on)
			ivm_trace_session_discard(s[i]);
		ivm_error_destroy(ivm_trace_session_enable(s[i], on));
	}
}

/* The end of a watched slice: what is held goes out, the events stop. */
static struct ivm_error *stop_watching(struct profiler *p)
{
	/* The host's records of the slice's end; its next start drops them. */
	ivm_error_destroy(host_sides_read(p, true));
	sessions_enable(p, false);
	/* The gate's sleeps meanwhile would fill its ring for nothing. */
	if (p->gate)
		ivm_error_destroy(ivm_idle_gate_enable(p->gate, false));
	return write_all_held(p);
}

/*
 * A watched slice begins: nothing seen before the gap says anything of
 * now.  The first look,
 * at once, starts every vCPU afresh, as at the start of a run.
 */
static void start_watching(struct profiler *p)
{
	size_t i;

	sessions_enable(p, true);
	gate_read(p, true);
	if (p->gate)
		ivm_error_destroy(ivm_idle_gate_enable(p->gate, true));
	ivm_dispatch_forget(p->dispatch);
	ivm_idle_periods_forget(p->periods);
	if (p->host)
		ivm_host_sched_lost(p->host);
	if (p->disk)
		ivm_disk_service_lost(p->disk);
	for (i = 0; i < p->guest->nr_vcpus; i++) {
		struct vcpu_poll *vp = &p->vcpus[i];

		memset(vp->follow_at, 0, sizeof(vp->follow_at));
		vp->was_idle = false;
		vp->last_current = 0;
		/* Its events of the gap were not recorded: as at the start. */
		vp->halted = false;
	}
	p->first_cache_ok = false;
	p->look_due = true;
	p->budget_gaps++;
}

struct ivm_error *budget_tick(struct profiler *p, uint64_t now)
{
	if (!ivm_cpu_budget_tick(&p->budget, now))
		return NULL;
	if (p->budget.watching) {
		start_watching(p);
		return NULL;
	}
	return stop_watching(p);
}
