// SPDX-License-Identifier: MIT
/*
 * A profile run's start and end (profiler_int.h): the capture engine and
 * the tables of the run, the idle source and the watch of the vCPUs, the
 * file's metadata (the guest, its kernel, its modules); and all of it let
 * go at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernel/irq_stat.h"
#include "kernel/kimage.h"
#include "kernel/last_ran.h"
#include "profile/idle_periods.h"
#include "profile/kvm_events.h"
#include "profile/sched_events.h"
#include "profile/ksym_hits.h"
#include "profile/profiler_int.h"
#include "profile/vcpu_watch.h"
#include "profile/trace_session.h"

/*
 * The guest's modules, one "module" metadata item each, so a report made
 * elsewhere can symbolize addresses in module code.  Not fatal: a guest
 * whose module list cannot be read is profiled all the same, and the
 * file says why its module frames will stay raw.
 */
static struct ivm_error *write_modules(struct profiler *p)
{
	const struct ivm_kmodules *mods;
	struct ivm_error *err;
	size_t i;

	err = ivm_guest_modules(p->guest, &mods);
	if (err) {
		struct ivm_error *werr = ivm_profile_write_meta(
			p->writer, "modules_error", ivm_error_string(err));

		ivm_error_destroy(err);
		return werr;
	}
	for (i = 0; i < mods->nr && !err; i++) {
		char *line = ivm_kmodule_format(&mods->mods[i]);
		char **secs = NULL;
		size_t nr = 0, k;

		if (line)
			secs = ivm_kmodule_format_sections(&mods->mods[i], &nr);
		if (!line || !secs) {
			free(line);
			err = &ivm_enomem;
			break;
		}
		err = ivm_profile_write_meta(p->writer, "module", line);
		for (k = 0; k < nr; k++) {
			if (!err)
				err = ivm_profile_write_meta(p->writer,
							     "module_sections",
							     secs[k]);
			free(secs[k]);
		}
		free(secs);
		free(line);
	}
	if (!err && mods->truncated)
		err = ivm_profile_write_meta(p->writer, "modules_error",
					     ivm_error_string(mods->error));
	return err;
}

struct ivm_error *write_meta(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	const struct ivm_profiler_config *c = p->cfg;
	char buf[64];
	struct ivm_error *err;
	time_t now = time(NULL);
	struct ivm_kimage kimage;
	struct timespec wall;
	struct tm tm;
	size_t i;

#define META(k, v)							\
	do {								\
		err = ivm_profile_write_meta(p->writer, k, v);		\
		if (err)						\
			return err;					\
	} while (0)
	META("guest", g->name);
	META("kernel", g->release);
	META("vmlinux", g->vmlinux);
	snprintf(buf, sizeof(buf), "0x%" PRIx64,
		 ivm_kernel_layout_slide(g->layout));
	META("kaslr_offset", buf);
	snprintf(buf, sizeof(buf), "%zu", g->nr_vcpus);
	META("vcpus", buf);
	META("idle_source", ivm_idle_source_name(p->source));
	META("capture", ivm_capture_mode_name(c->capture_mode));
	/* Where running vCPUs' registers came from (on-CPU, from-idle). */
	META("registers", c->tcg_env ? "qemu memory" : "monitor");
	snprintf(buf, sizeof(buf), "%g", c->frequency_hz);
	META("frequency_hz", buf);
	snprintf(buf, sizeof(buf), "%u", c->idle_every);
	META("idle_every", buf);
	snprintf(buf, sizeof(buf), "%g", c->poll_interval_ms);
	META("poll_interval_ms", buf);
	if (c->switch_every) {
		snprintf(buf, sizeof(buf), "%u", c->switch_every);
		META("switch_every", buf);
	}
	if (c->cpu_budget > 0) {
		snprintf(buf, sizeof(buf), "%g", c->cpu_budget);
		META("cpu_budget", buf);
	}
	gmtime_r(&now, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	META("start", buf);
	/*
	 * The same moment on the wall clock and on the samples' clock, to
	 * nanoseconds: a report places the samples in time and says how long
	 * the file covers (pprof's time_nanos, duration_nanos).
	 */
	clock_gettime(CLOCK_REALTIME, &wall);
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)wall.tv_sec *
		 UINT64_C(1000000000) + (uint64_t)wall.tv_nsec);
	META("start_ns", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, ivm_mono_ns());
	META("start_mono_ns", buf);
	/* The vmlinux a symbol server needs, even when the host has none. */
	ivm_kimage_read(g->layout, &kimage);
	if (kimage.build_id[0])
		META("kernel_build_id", kimage.build_id);
	if (kimage.text_start) {
		snprintf(buf, sizeof(buf), "0x%" PRIx64 " 0x%" PRIx64,
			 kimage.text_start, kimage.text_end);
		META("kernel_text", buf);
	}
	/* A report of the file defaults to the same symbols. */
	if (c->symdir)
		META("symdir", c->symdir);
	/* What each label is, in order: the report's dimensions. */
	for (i = 0; i < c->nr_labels; i++) {
		char spec[IVM_LABEL_KEY_MAX + IVM_UELF_MAX_NAME + 16];

		META(IVM_META_LABEL, ivm_label_spec_format(&c->labels[i], spec,
							   sizeof(spec)));
	}
	for (i = 0; i < c->nr_binaries; i++) {
		char *path = realpath(c->binaries[i], NULL);

		err = ivm_profile_write_meta(p->writer, "binary",
					     path ? path : c->binaries[i]);
		free(path);
		if (err)
			return err;
	}
#undef META
	return write_modules(p);
}

static struct ivm_error *setup_watch(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	struct ivm_vcpu_watch_target *targets;
	struct ivm_error *err;
	size_t i, watched = 0;

	p->views = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*p->views));
	p->views2 = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*p->views));
	p->last_views = calloc(g->nr_vcpus ? g->nr_vcpus : 1,
			       sizeof(*p->views));
	if (!p->views2 || !p->last_views)
		return &ivm_enomem;
	targets = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*targets));
	if (!p->views || !targets) {
		free(targets);
		return &ivm_enomem;
	}
	/*
	 * The CPUs' switch counts tell the dispatch monitor when the task it
	 * saw last is not sure to be the one that went to idle; they are
	 * only worth reading when last_ran can then find the right one, and
	 * last_ran is only kept when some are read: a to-idle request is
	 * only marked `resolve` on a CPU whose count is watched.
	 */
	err = ivm_last_ran_create(g->layout, g->gmem, &p->last_ran);
	if (err) {
		ivm_error_destroy(err);
		p->last_ran = NULL;
	}
	for (i = 0; i < g->nr_vcpus; i++) {
		targets[i].cpu = g->vcpus[i].cpu;
		targets[i].idle_task = p->vcpus[i].idle_task;
		if (!p->last_ran || g->vcpus[i].cpu < 0)
			continue;
		err = ivm_kernel_cpu_switches_va(g->layout,
						 (unsigned int)g->vcpus[i].cpu,
						 &targets[i].switches_va);
		watched += !err;
		ivm_error_destroy(err);	/* 0 stays: not watched */
		/* Tells a look that caught a switch (vcpu_watch.h). */
		err = ivm_kernel_cpu_rq_curr_va(g->layout,
						(unsigned int)g->vcpus[i].cpu,
						&targets[i].rq_curr_va);
		ivm_error_destroy(err);
		/* Names the from-idle task after the fact (last_ran.h). */
		err = ivm_kernel_cpu_rq_clock_va(g->layout,
						 (unsigned int)g->vcpus[i].cpu,
						 &targets[i].rq_clock_va);
		ivm_error_destroy(err);
		/* ... and the to-idle task exactly (last_ran.h). */
		err = ivm_kernel_cpu_rq_idle_stamp_va(g->layout,
						(unsigned int)g->vcpus[i].cpu,
						&targets[i].rq_idle_stamp_va);
		ivm_error_destroy(err);
	}
	if (!watched) {
		ivm_last_ran_destroy(p->last_ran);
		p->last_ran = NULL;
	}
	/* Interrupt counts make idle periods say what woke the vCPU. */
	err = g->btf ? ivm_irq_stat_create(g->btf, g->layout, &p->irq_stat) :
		       NULL;
	ivm_error_destroy(err);
	err = ivm_vcpu_watch_create(g->layout, g->gmem, targets, g->nr_vcpus,
				    p->nvcsw_off, p->nivcsw_off, p->irq_stat,
				    &p->watch);
	free(targets);
	return err;
}

/*
 * Under TCG the sched source's sleeps wake the loop through the idle gate
 * (idle_gate.h) where the host allows it; else each wakes it, as before.
 */
static void setup_gate(struct profiler *p)
{
	struct ivm_error *err;

	if (p->source != IVM_IDLE_SOURCE_SCHED || !p->trace ||
	    p->guest->kvm || p->cfg->no_idle_gate)
		return;
	err = ivm_idle_gate_create(p->guest, p->irq_stat, &p->gate);
	if (err) {
		fprintf(stderr, "idlevm: note: every vCPU sleep wakes idlevm: the idle gate cannot start (%s)\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
	}
}

struct ivm_error *run_setup(struct profiler *p)
{
	struct ivm_guest *g = p->guest;
	const struct ivm_kernel_offsets *off;
	struct ivm_dispatch_config dc = {
		.idle_every = p->cfg->idle_every,
		.tick_ns = p->cfg->frequency_hz > 0 ?
			   (uint64_t)(1e9 / p->cfg->frequency_hz) : 0,
	};
	struct ivm_error *err;
	size_t i;

	if (!g->qmp)
		return ivm_error_create(IVM_ERROR_INVALID,
					"profiling needs a live guest, not a core");
	off = ivm_kernel_layout_offsets(g->layout);
	p->nvcsw_off = off->task_nvcsw;
	p->nivcsw_off = off->task_nivcsw;
	err = ivm_capture_engine_create(g, &p->engine);
	if (!err)
		err = ivm_proc_table_create(&p->procs);
	if (err)
		return err;
	for (i = 0; i < p->cfg->nr_binaries; i++) {
		err = ivm_capture_engine_add_binary(p->engine,
						    p->cfg->binaries[i]);
		if (err)
			return err;
	}
	if (p->cfg->symdir) {
		err = ivm_capture_engine_set_symdir(p->engine, p->cfg->symdir);
		if (err)
			return err;
	}
	err = ivm_capture_engine_set_labels(p->engine, p->cfg->labels,
					    p->cfg->nr_labels);
	if (err)
		return err;
	p->vcpus = calloc(g->nr_vcpus, sizeof(*p->vcpus));
	p->held = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*p->held));
	if (!p->vcpus || !p->held)
		return &ivm_enomem;
	err = ivm_idle_periods_create((uint32_t)g->nr_vcpus, &p->periods);
	if (err)
		return err;
	if (p->source == IVM_IDLE_SOURCE_SCHED) {
		err = setup_sched_source(p);
		if (err && !p->cfg->source_fallback)
			return err;
		if (err) {
			/* Auto: polling works wherever /proc does. */
			fprintf(stderr,
				"idlevm: warning: the sched idle source cannot start (%s): idle source thread (polling) instead\n",
				ivm_error_string(err));
			ivm_error_destroy(err);
			ivm_trace_session_destroy(p->trace);
			ivm_trace_session_destroy(p->host_trace);
			ivm_trace_session_destroy(p->disk_trace);
			p->trace = p->host_trace = p->disk_trace = NULL;
			p->source = IVM_IDLE_SOURCE_THREAD;
		} else if (p->res->tracefs_mounted) {
			fprintf(stderr,
				"idlevm: mounted tracefs on /sys/kernel/tracing for the sched idle source\n");
		}
	}
	p->res->idle_source = p->source;
	/*
	 * The sched source samples idle periods itself, one to-idle and one
	 * from-idle each; the dispatch monitor keeps the on-CPU ticks.
	 */
	if (p->source == IVM_IDLE_SOURCE_SCHED)
		dc.idle_every = 0;
	err = ivm_dispatch_create((uint32_t)g->nr_vcpus, &dc, &p->dispatch);
	if (err)
		return err;
	if (p->source == IVM_IDLE_SOURCE_KVM) {
		static const char *const events[] = {
			"kvm:kvm_exit", "kvm:kvm_vcpu_wakeup", "kvm:kvm_entry",
		};
		pid_t tids[256];
		size_t n = 0;

		if (!g->kvm)
			return ivm_error_create(IVM_ERROR_INVALID,
						"the kvm idle source needs a guest on hardware KVM, and %s runs under TCG: use --idle-source thread",
						g->name);
		for (i = 0; i < g->nr_vcpus && n < 256; i++)
			tids[n++] = g->vcpus[i].tid;
		err = ivm_tracefs_ensure(&p->res->tracefs_mounted);
		if (!err)
			err = ivm_kvm_events_load(NULL, &p->kvm_events);
		if (!err)
			err = ivm_trace_session_create(events, 3, tids, n, 0,
						       &p->trace);
		if (err)
			return err;
	}
	for (i = 0; i < g->nr_vcpus; i++) {
		struct vcpu_poll *vp = &p->vcpus[i];
		char path[64];

		vp->stat_fd = -1;
		if (g->vcpus[i].cpu >= 0)
			vp->idle_task = ivm_kernel_layout_idle_task(
				g->layout, (unsigned int)g->vcpus[i].cpu);
		if (p->source != IVM_IDLE_SOURCE_THREAD)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat",
			 (int)g->qemu_pid, (int)g->vcpus[i].tid);
		vp->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (vp->stat_fd < 0)
			return ivm_error_os(errno, "opening %s", path);
	}
	err = setup_watch(p);
	if (!err)
		setup_gate(p);
	if (!err && !g->vmlinux)
		err = ivm_ksym_hits_create(g->ksyms,
					   ivm_kernel_layout_slide(g->layout),
					   &p->ksym_hits);
	if (!err)
		err = write_meta(p);
	if (!err)
		err = switch_setup(p);
	/* Setup is over: the file takes its name now (see profile_file.h). */
	if (!err)
		err = ivm_profile_writer_flush(p->writer);
	return err;
}

void run_teardown(struct profiler *p)
{
	size_t i;

	if (p->vcpus)
		for (i = 0; i < p->guest->nr_vcpus; i++)
			if (p->vcpus[i].stat_fd >= 0)
				close(p->vcpus[i].stat_fd);
	free(p->vcpus);
	if (p->held)
		for (i = 0; i < p->guest->nr_vcpus; i++)
			ivm_sample_release(&p->held[i]);
	free(p->held);
	free(p->views);
	free(p->views2);
	free(p->last_views);
	ivm_switch_sampler_destroy(p->switches);
	ivm_vcpu_watch_destroy(p->watch);
	ivm_last_ran_destroy(p->last_ran);
	ivm_ksym_hits_destroy(p->ksym_hits);
	ivm_idle_gate_destroy(p->gate);
	ivm_trace_session_destroy(p->trace);
	ivm_trace_session_destroy(p->host_trace);
	ivm_trace_session_destroy(p->disk_trace);
	ivm_kvm_events_destroy(p->kvm_events);
	ivm_sched_events_destroy(p->sched_events);
	ivm_host_sched_destroy(p->host);
	ivm_disk_syscalls_destroy(p->disk_syscalls);
	ivm_disk_service_destroy(p->disk);
	ivm_idle_periods_destroy(p->periods);
	ivm_irq_stat_destroy(p->irq_stat);
	ivm_capture_engine_destroy(p->engine);
	ivm_proc_table_destroy(p->procs);
	ivm_dispatch_destroy(p->dispatch);
}

