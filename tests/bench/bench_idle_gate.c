// SPDX-License-Identifier: MIT
/*
 * bench_idle_gate: what the idle gate (vmm/profile/idle_gate.h) spares the
 * profiler's loop on a live guest, without a profile: the gate is loaded
 * for SECONDS and its counts printed.  Every sleep of a vCPU thread wakes
 * the loop without the gate; with it, only those after which the vCPU's
 * guest run queue switched (or the first, or unreadable ones).  The
 * others are split by whether the vCPU's interrupt counts moved (a look
 * then would have refined what woke it: the gate's next record carries
 * them) or nothing did.  The guest's own switch count, read by idlevm
 * after, shows the gate read the right word.  Root only (BPF).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernel/guest.h"
#include "kernel/irq_stat.h"
#include "kernel/kernel_layout.h"
#include "profile/idle_gate.h"
#include "profile/trace_session.h"

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "seconds", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	struct ivm_idle_gate_stats st;
	struct ivm_irq_stat *is = NULL;
	struct ivm_idle_gate *gate;
	struct ivm_guest *g;
	struct ivm_error *err;
	double seconds = 10;
	bool mounted;
	size_t i;
	int c;

	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "n:", longopts,
				NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		if (c == 'n')
			seconds = atof(optarg);
		else
			return 2;
	}
	/* libbpf finds sched_switch's raw tracepoint without tracefs, but
	 * a fresh host's first BPF user may want it anyway. */
	err = ivm_tracefs_ensure(&mounted);
	if (!err)
		err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	if (g->btf)
		ivm_error_destroy(ivm_irq_stat_create(g->btf, g->layout, &is));
	err = ivm_idle_gate_create(g, is, &gate);
	if (err)
		return ivm_error_report(err);
	usleep((useconds_t)(seconds * 1e6));
	ivm_idle_gate_stats(gate, &st);
	for (i = 0; i < g->nr_vcpus; i++) {
		uint64_t now = 0;

		if (g->vcpus[i].cpu < 0 ||
		    ivm_kernel_cpu_switches(g->layout,
					    (unsigned int)g->vcpus[i].cpu, &now))
			continue;
		printf("vCPU %zu: guest CPU %d, %" PRIu64 " switches so far\n",
		       i, g->vcpus[i].cpu, now);
	}
	printf("%.1f s: %" PRIu64 " vCPU-thread sleeps (%.0f/s), %" PRIu64
	       " woke the loop (%.1f%%): switched %" PRIu64 ", first %" PRIu64
	       ", unreadable %" PRIu64 "; let pass: only interrupts moved %" PRIu64
	       " (%.1f%%), nothing moved %" PRIu64 " (%.1f%%); records lost %" PRIu64
	       "\n",
	       seconds, st.sleeps, (double)st.sleeps / seconds, st.records,
	       pct(st.records, st.sleeps), st.switch_moved, st.first,
	       st.read_failed, st.irq_moved, pct(st.irq_moved, st.sleeps),
	       st.none_moved, pct(st.none_moved, st.sleeps), st.ring_full);
	ivm_idle_gate_destroy(gate);
	ivm_irq_stat_destroy(is);
	ivm_guest_close(g);
	return 0;
}
