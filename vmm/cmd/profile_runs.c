// SPDX-License-Identifier: MIT
/*
 * A guest's run of `idlevm profile`: opened, stepped, ended, and in a
 * continuous run followed across the guest's boots (profile_runs.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access/libvirt_domain.h"
#include "base/caps.h"
#include "base/clock.h"
#include "base/heap.h"
#include "kernel/ktables.h"
#include "cmd/profile_runs.h"

/* The runs of this process, for serve_others(). */
struct guest_run *profile_all_runs;
size_t *profile_nr_all_runs;

/*
 * One step of r's run; a run that ends is left for the loop to close.
 * A boot that ended ends the run before the step: nothing of the next
 * boot goes into its file.
 */
void guest_run_step(struct guest_run *r)
{
	struct ivm_error *err;
	unsigned int end;

	r->busy = true;
	ivm_boot_watch_poll(&r->boot, ivm_mono_ns());
	end = ivm_boot_watch_first(&r->boot);
	if (end)
		ivm_profiler_end(r->pr, ivm_boot_end_reason(end));
	if (!ivm_profiler_step(r->pr, profile_stop_requested, &err)) {
		r->ended = true;
		r->end_err = err;
	}
	r->busy = false;
}

/* Whether r can be stepped now (running, not over, not in a step). */
bool guest_run_steppable(const struct guest_run *r)
{
	return r->running && !r->ended && !r->busy;
}

/*
 * Whether a step of r is due after a wait on fds, where r's descriptors
 * were fds[first, first + n): one of them is ready, or its wake time has
 * come, or a stop was asked.  The others are not stepped: a wakeup for one
 * guest's event costs nothing for the other guests (ivm_profiler_wake_at()
 * is when a step is due at the latest).
 */
bool guest_run_step_due(const struct guest_run *r, const struct pollfd *fds,
			size_t first, size_t n, uint64_t now)
{
	size_t i;

	if (profile_stop_requested || now >= ivm_profiler_wake_at(r->pr))
		return true;
	for (i = first; i < first + n; i++)
		if (fds[i].revents)
			return true;
	return false;
}

/*
 * A guest's helper round trip (tens of ms under TCG) waits here rather
 * than in poll(): meanwhile the other guests' events are served, as if
 * each had the thread to itself, except that their captures make no
 * round trip of their own (unpinned reads, counted as skipped pins): one
 * pin in flight per process, so this guest's reply is taken as soon as it
 * comes, while its leases hold.  A guest in a step is never stepped again
 * before that step ends.  The CPU time the others take is lent: not the
 * waiting guest's cost.
 */
static int serve_others(void *ctx, int fd, uint64_t deadline_ns)
{
	struct guest_run *me = ctx;
	struct pollfd fds[MAX_GUESTS * IVM_PROFILER_MAX_POLLFDS + 1];
	size_t first[MAX_GUESTS], count[MAX_GUESTS];
	uint64_t lent = 0;
	int ret;

	for (;;) {
		uint64_t now = ivm_mono_ns(), wake = deadline_ns;
		struct timespec ts;
		size_t n = 1, i;
		int r;

		fds[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
		for (i = 0; i < *profile_nr_all_runs; i++) {
			struct guest_run *o = &profile_all_runs[i];

			first[i] = n;
			count[i] = 0;
			if (o == me || !guest_run_steppable(o))
				continue;
			count[i] = ivm_profiler_pollfds(o->pr, fds + n,
							sizeof(fds) / sizeof(fds[0]) - n);
			n += count[i];
			if (ivm_profiler_wake_at(o->pr) < wake)
				wake = ivm_profiler_wake_at(o->pr);
		}
		if (now >= deadline_ns) {
			ret = 0;
			break;
		}
		ts.tv_sec = wake > now ? (time_t)((wake - now) / 1000000000ull) : 0;
		ts.tv_nsec = wake > now ? (long)((wake - now) % 1000000000ull) : 0;
		r = ppoll(fds, (nfds_t)n, &ts, NULL);
		if (r < 0 && errno != EINTR) {
			ret = -1;
			break;
		}
		if (r > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			ret = 1;
			break;
		}
		now = ivm_mono_ns();
		for (i = 0; i < *profile_nr_all_runs; i++) {
			struct guest_run *o = &profile_all_runs[i];
			uint64_t cpu0;

			if (o == me || !guest_run_steppable(o) ||
			    !guest_run_step_due(o, fds, first[i], count[i], now))
				continue;
			/*
			 * No round trip of theirs meanwhile: their steps stay
			 * short, and this guest's reply is taken while its
			 * leases hold (one pin in flight per process).
			 */
			if (o->pin)
				ivm_pin_capture_pause(o->pin, true);
			if (r >= 0)
				ivm_profiler_polled(o->pr, fds + first[i],
						    count[i]);
			/*
			 * A step is charged the thread's CPU since the last
			 * step ended (profiler.h): that of the waiting guest's
			 * own step is none of o's.
			 */
			cpu0 = ivm_thread_cpu_ns();
			ivm_profiler_cpu_sync();
			guest_run_step(o);
			lent += ivm_thread_cpu_ns() - cpu0;
			if (o->pin)
				ivm_pin_capture_pause(o->pin, false);
		}
	}
	ivm_profiler_lend_cpu(me->pr, lent);
	return ret;
}

/* Free what run_attach made (not the profiler, which finish frees). */
void guest_run_release(struct guest_run *r)
{
	ivm_boot_watch_detach(&r->boot);
	/* Before the guest: closing the channel ends any lease left. */
	ivm_pin_capture_destroy(r->pin);
	ivm_tcg_env_destroy(r->tcg_env);
	ivm_guest_close(r->g);
	r->pin = NULL;
	r->tcg_env = NULL;
	r->g = NULL;
}

/* How long a guest whose vCPUs are not all its kernel's CPUs yet may stay so. */
#define PARTIAL_NS 20000000000ull

/*
 * A guest opened again after a boot ended: usable once every vCPU is one
 * of its kernel's CPUs (the kernel has brought them all up), or after
 * PARTIAL_NS of being found otherwise (a guest that runs with CPUs
 * offline).  A kernel caught earlier in its boot has half its per-CPU
 * state unset.
 */
static struct ivm_error *booted_enough(struct guest_run *r)
{
	uint64_t now = ivm_mono_ns();
	size_t i;

	for (i = 0; i < r->g->nr_vcpus; i++)
		if (r->g->vcpus[i].cpu < 0)
			break;
	if (i == r->g->nr_vcpus)
		return NULL;
	if (!r->partial_since)
		r->partial_since = now;
	if (now - r->partial_since >= PARTIAL_NS)
		return NULL;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"vCPU %zu is none of kernel %s's CPUs yet (still booting)",
				i, r->g->release);
}

/* What the heap grew by since it held before bytes (none if it shrank). */
static size_t heap_growth(size_t before)
{
	size_t now = ivm_heap_bytes();

	return now > before ? now - before : 0;
}

/* Whether r's kernel tables are shared, as far as r has seen. */
static void note_sharing(struct guest_run *r)
{
	unsigned int users = r->g && r->g->ktables ?
			     ivm_ktables_users(r->g->ktables) : 0;

	if (users > r->ktables_users)
		r->ktables_users = users;
}

/* What the run holds as it ends, for its closing lines. */
static void note_memory(struct guest_run *r)
{
	r->heap_end = ivm_heap_bytes();
	note_sharing(r);
}

/*
 * The helper's socket refused this process: a libvirt domain's channel
 * is a socket of libvirt-qemu's, which root opens with CAP_DAC_OVERRIDE.
 */
static const char *helper_denied(const struct ivm_error *err)
{
	if (err->code != IVM_ERROR_OS || err->errnum != EACCES ||
	    ivm_caps_effective(IVM_CAP_DAC_OVERRIDE))
		return "";
	return "; opening it needs CAP_DAC_OVERRIDE";
}

/*
 * Open the guest and start profiling it: its registers' source, the
 * helper for pin captures, its file (or next window), its profiler.  On
 * error, what it opened is left for run_release.
 */
static struct ivm_error *run_attach(struct guest_run *r,
				    const struct profile_opts *o)
{
	struct ivm_guest_options gopts = o->gopts;
	struct ivm_profile_writer *writer;
	struct ivm_error *err;
	size_t heap0 = ivm_heap_bytes();
	bool kvm = false;

	r->attach_ns = ivm_thread_cpu_ns();
	r->cfg = o->cfg;
	if (!o->gopts.qmp_path)
		gopts.domain = r->name;
	err = ivm_guest_open(&gopts, &r->g);
	r->heap_open = heap_growth(heap0);
	r->ktables_users = 0;
	note_sharing(r);
	/* A new connection: what was said of the last one is over. */
	r->monitor_lost_ms = 0;
	r->monitor_reconnects = 0;
	if (!err && r->waiting)
		err = booted_enough(r);
	if (err)
		return err;
	kvm = r->g->kvm;
	/*
	 * The host scheduler's events on the vCPU threads mark every halt
	 * and wakeup, under TCG and KVM alike (kvm_exit adds the exit reason
	 * on KVM); without a usable tracefs, the profiler polls the threads
	 * instead and says so.
	 */
	if (o->auto_source) {
		r->cfg.idle_source = IVM_IDLE_SOURCE_SCHED;
		r->cfg.source_fallback = true;
	}
	err = NULL;
	if (o->regs == REGS_MEMORY && kvm)
		err = ivm_error_create(IVM_ERROR_INVALID,
				       "--registers memory needs a guest under TCG, and %s runs on KVM",
				       r->g->name);
	else if (o->regs != REGS_MONITOR && !kvm)
		err = ivm_tcg_env_locate(r->g->qemu_pid, r->g->qmp, &r->tcg_env);
	if (err && o->regs == REGS_MEMORY)
		return err;
	if (err) {
		/* Slower, but it works: say so and go on. */
		guest_run_who(o, r);
		fprintf(stderr, "warning: registers through the monitor (%s)\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
	}
	r->cfg.tcg_env = r->tcg_env;
	if (r->cfg.capture_mode == IVM_CAPTURE_MODE_PIN) {
		/*
		 * Pin needs the helper: one HELLO within a short timeout
		 * says whether it is there.  Without it, go on optimistic,
		 * saying why; a profiler that refused to run would help
		 * nobody, and the mode is printed below.
		 */
		err = ivm_pin_capture_create(r->g, o->helper_socket,
					     gopts.qmp_path,
					     IVM_PIN_TIMEOUT_DEFAULT_MS,
					     o->pin_lease_us, &r->pin);
		if (err) {
			guest_run_who(o, r);
			fprintf(stderr, "warning: no pin capture (%s%s), capturing optimistic\n",
				ivm_error_string(err), helper_denied(err));
			ivm_error_destroy(err);
			r->cfg.capture_mode = IVM_CAPTURE_MODE_OPTIMISTIC;
		} else {
			ivm_pin_capture_set_policy(r->pin, o->pin_policy);
			/* One thread for all: others go on during round trips. */
			if (o->several)
				ivm_pin_capture_set_wait(r->pin, serve_others, r);
		}
		r->cfg.pin = r->pin;
	} else if (r->cfg.capture_mode == IVM_CAPTURE_MODE_OPTIMISTIC &&
		   !o->no_readahead) {
		/*
		 * No pinning, but a helper that answers can still read the
		 * CFI the guest lacks into its page cache (pages of a
		 * server's .eh_frame that no process ever touched), so that
		 * later stacks unwind whole.  No helper: quietly without.
		 */
		err = ivm_pin_capture_create(r->g, o->helper_socket,
					     gopts.qmp_path,
					     IVM_PIN_TIMEOUT_DEFAULT_MS,
					     o->pin_lease_us, &r->pin);
		if (err && *helper_denied(err)) {
			/* A helper there, out of reach: not quietly. */
			guest_run_who(o, r);
			fprintf(stderr, "warning: no CFI readahead by the helper (%s%s)\n",
				ivm_error_string(err), helper_denied(err));
		}
		if (err) {
			ivm_error_destroy(err);
			r->pin = NULL;
		} else if (o->several) {
			ivm_pin_capture_set_wait(r->pin, serve_others, r);
		}
		r->cfg.pin = r->pin;
	}
	if (o->wcfg.dir) {
		/* A whole profile per window (or per run), in the directory. */
		struct ivm_window_dir_config wcfg = o->wcfg;

		wcfg.name = r->g->name;
		err = r->windows.dir ? NULL :
		      ivm_window_run_init(&r->windows, &wcfg, o->window_pprof);
		if (!err)
			err = ivm_window_run_open(&r->windows, &writer);
		if (!err && r->cfg.window_s > 0) {
			r->cfg.next_window = ivm_window_run_next;
			r->cfg.window_ctx = &r->windows;
		}
	} else {
		err = ivm_profile_writer_create(o->output, &writer);
	}
	if (err)
		return err;
	/* A window after a boot ended says so, and which window was before. */
	if (r->after[0]) {
		err = ivm_profile_write_meta(writer, "after", r->after);
		if (err) {
			ivm_profile_writer_destroy(writer);
			return err;
		}
	}
	/* -D is the run's: a guest found later gets what is left of it. */
	if (o->end_ns) {
		uint64_t now = ivm_mono_ns();

		r->cfg.duration_s = o->end_ns > now ?
				    (double)(o->end_ns - now) / 1e9 : 0.001;
	}
	guest_run_who(o, r);
	fprintf(stderr,
		"profiling %s (kernel %s, %zu vCPUs, %s): idle source %s%s%s, capture %s, registers from %s, %g Hz on-CPU, writing %s\n",
		r->g->name, r->g->release, r->g->nr_vcpus,
		r->g->kvm ? "KVM" : "TCG",
		ivm_idle_source_name(r->cfg.idle_source),
		r->g->kvm && r->cfg.idle_source == IVM_IDLE_SOURCE_SCHED ?
			" with kvm HLT exits and wakeups" : "",
		r->cfg.source_fallback ? " (thread if tracefs is not usable)" : "",
		ivm_capture_mode_name(r->cfg.capture_mode),
		r->tcg_env ? "qemu memory" : "the monitor",
		r->cfg.frequency_hz,
		o->wcfg.dir ? r->windows.path : o->output);
	r->attach_ns = ivm_thread_cpu_ns() - r->attach_ns;
	heap0 = ivm_heap_bytes();
	err = ivm_profiler_start(r->g, &r->cfg, writer, &r->res, &r->pr);
	r->heap_start = heap_growth(heap0);
	if (err)
		return err;
	ivm_boot_watch_attach(&r->boot, r->g);
	r->running = true;
	return NULL;
}

/* Start profiling a guest (domain, or NULL: the --qmp socket). */
struct ivm_error *guest_run_start(struct guest_run *r,
				  const struct profile_opts *o,
				  const char *domain)
{
	memset(r, 0, sizeof(*r));
	r->name = strdup(domain ? domain : o->gopts.qmp_path);
	if (!r->name)
		return &ivm_enomem;
	return run_attach(r, o);
}

/*
 * End a guest's run: its file's END record (its last window's pprof),
 * the closing lines, the guest closed.  Returns err, or the error of
 * writing the file's end.
 */
struct ivm_error *guest_run_end(struct guest_run *r,
				const struct profile_opts *o,
				struct ivm_error *err)
{
	struct ivm_error *ferr;

	note_memory(r);
	ferr = ivm_profiler_finish(r->pr);

	r->pr = NULL;
	r->running = false;
	r->ended = false;
	guest_run_release(r);
	if (o->wcfg.dir) {
		/* The last window is whole now (or cut short by an error). */
		ivm_window_run_finished(&r->windows);
		ivm_window_run_deinit(&r->windows);
	}
	guest_run_summary(o, r);
	if (err) {
		ivm_error_destroy(ferr);
		return err;
	}
	return ferr;
}

/* How often a guest between two boots is opened again, at most. */
#define RETRY_FIRST_NS 1000000000ull
#define RETRY_MAX_NS 5000000000ull

/*
 * Whether r's run, which its profiler ended, follows the guest to its
 * next boot rather than ending: a continuous run (--window) that was not
 * stopped, out of time or failed, so the guest's boot ended (a reset, a
 * panic, a shutdown, QEMU gone: whichever saw it first, the watch, the
 * monitor or a read of QEMU's memory that found no process, QEMU maybe
 * still a zombie then).  With --all-domains only while the machine is
 * there (a reset, a panic): a domain that went away is joined again by
 * the scan once it runs.
 */
bool guest_run_follows(const struct guest_run *r, const struct profile_opts *o,
		       bool all_domains)
{
	unsigned int seen = ivm_boot_watch_seen(&r->boot);
	enum ivm_qmp_lifecycle state = r->g && r->g->qmp ?
		ivm_qmp_lifecycle_cached(r->g->qmp) : IVM_QMP_GONE;

	if (o->cfg.window_s <= 0 || r->end_err || profile_stop_requested ||
	    (o->end_ns && ivm_mono_ns() >= o->end_ns))
		return false;
	if (!all_domains)
		return true;
	return (seen & (IVM_BOOT_RESET | IVM_BOOT_PANIC | IVM_BOOT_CHANGED)) &&
	       !(seen & (IVM_BOOT_GONE | IVM_BOOT_SHUTDOWN)) &&
	       state != IVM_QMP_GONE && state != IVM_QMP_SHUTDOWN;
}

/*
 * Whether r's boot is known to have ended the way it did.  A QEMU that
 * exits is found by a read of its memory or a monitor call that fails
 * before libvirt's event says why (a save, a migration: the boot goes on
 * elsewhere; measured: after the window had ended), so a run that found
 * it gone waits for that event.  libvirt sends it once it has cleaned up
 * after QEMU (qemuProcessStop: cgroups, labels, the save file closed),
 * which took more than 2 s on a loaded CI host; every QEMU gone gets its
 * STOPPED event from a libvirtd alive, so the wait is long and ends at
 * once when the connection to libvirtd is lost: no event comes then.
 */
#define SETTLE_NS 30000000000ull

bool guest_run_settled(struct guest_run *r, uint64_t now)
{
	if (!r->g || !r->g->qmp || !ivm_qmp_libvirt_events(r->g->qmp) ||
	    strcmp(r->res.end_reason, IVM_END_GONE))
		return true;
	ivm_boot_watch_poll(&r->boot, now);
	if (ivm_boot_watch_stop_told(&r->boot) ||
	    ivm_qmp_libvirt_lost_ms(r->g->qmp))
		return true;
	if (!r->gone_at)
		r->gone_at = now;
	return now - r->gone_at >= SETTLE_NS;
}

/*
 * r's boot ended and its run follows the guest: the window ends whole
 * (its pprof made, the closing lines for this boot said), the guest is
 * closed (a panicked one kept until a reset), and run_resume opens it
 * again.  Returns the error of writing the window's end, if any.
 */
struct ivm_error *guest_run_between(struct guest_run *r,
				    const struct profile_opts *o)
{
	struct ivm_error *ferr;
	unsigned int seen = ivm_boot_watch_seen(&r->boot);
	char *last = r->windows.path ? strdup(r->windows.path) : NULL;
	const char *base = last && strrchr(last, '/') ?
			   strrchr(last, '/') + 1 : last;
	struct tm tm;
	time_t t = time(NULL);
	char when[32];

	/* Its why, when the event came after the run found QEMU gone. */
	if (ivm_boot_watch_first(&r->boot) & (IVM_BOOT_SAVED | IVM_BOOT_MIGRATED))
		snprintf(r->res.end_reason, sizeof(r->res.end_reason), "%s",
			 ivm_boot_end_reason(ivm_boot_watch_first(&r->boot)));
	r->gone_at = 0;
	note_memory(r);
	ferr = ivm_profiler_finish(r->pr);
	r->pr = NULL;
	r->running = false;
	r->ended = false;
	if (seen == IVM_BOOT_PANIC && r->g && r->g->qmp &&
	    ivm_qmp_lifecycle_cached(r->g->qmp) != IVM_QMP_GONE) {
		/* The panicked kernel stays until a reset: keep watching. */
		ivm_pin_capture_destroy(r->pin);
		ivm_tcg_env_destroy(r->tcg_env);
		r->pin = NULL;
		r->tcg_env = NULL;
	} else {
		guest_run_release(r);
	}
	ivm_window_run_finished(&r->windows);
	guest_run_summary(o, r);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(r->after, sizeof(r->after), "%s at %s; the window before: %s",
		 r->res.end_reason, when, base ? base : "none");
	guest_run_who(o, r);
	/* A saved or migrated guest's boot goes on, elsewhere or later. */
	fprintf(stderr, "%s: window %s ended, whole; %s%s\n",
		r->res.end_reason, base ? base : "(none)",
		ivm_boot_watch_first(&r->boot) &
		(IVM_BOOT_SAVED | IVM_BOOT_MIGRATED) ?
		"waiting for the guest to run here again (restored, or started anew)" :
		"following the guest to its next boot",
		r->g ? " (waiting for a reset)" : "");
	free(last);
	r->waiting = true;
	r->waiting_since = ivm_mono_ns();
	r->retry_ns = RETRY_FIRST_NS;
	r->retry_at = r->waiting_since + r->retry_ns;
	r->partial_since = 0;
	r->last_try[0] = '\0';
	return ferr;
}

/*
 * Say once when r's libvirt connection closed (libvirtd stopped or
 * restarting: QEMU and the guest go on, so does the window) and when it
 * is open again.
 */
void guest_run_monitor_news(struct guest_run *r, const struct profile_opts *o)
{
	int64_t lost;
	uint64_t back;

	if (!r->running || !r->g || !r->g->qmp)
		return;
	lost = ivm_qmp_libvirt_lost_ms(r->g->qmp);
	back = ivm_qmp_reconnects(r->g->qmp);
	if (lost && !r->monitor_lost_ms) {
		r->monitor_lost_ms = lost;
		guest_run_who(o, r);
		fprintf(stderr, "libvirt's connection closed (libvirtd stopped or restarting): the window goes on, the kernel looked at every 100 ms for a reboot until it is back\n");
	}
	if (back != r->monitor_reconnects) {
		struct timespec ts;
		int64_t now;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		guest_run_who(o, r);
		fprintf(stderr, "libvirt's connection is back%s%.1f s (opened again %" PRIu64 " times), %s; the guest is %s\n",
			r->monitor_lost_ms ? " after " : ", lost for less than ",
			r->monitor_lost_ms ? (double)(now - r->monitor_lost_ms) / 1e3 : 1.0,
			back, ivm_qmp_libvirt_events(r->g->qmp) ?
			"its events registered again" :
			"its state polled every 100 ms (its events could not be registered)",
			ivm_qmp_lifecycle_name(ivm_qmp_lifecycle_cached(r->g->qmp)));
		r->monitor_reconnects = back;
		r->monitor_lost_ms = 0;
	}
}

/* A run waiting for its guest's next boot ends there (stop, -D). */
void guest_run_stop_waiting(struct guest_run *r, const struct profile_opts *o)
{
	guest_run_release(r);
	r->waiting = false;
	ivm_window_run_deinit(&r->windows);
	guest_run_who(o, r);
	fprintf(stderr, "stopped while waiting %.1f s for the guest's next boot; %u windows in %s\n",
		(double)(ivm_mono_ns() - r->waiting_since) / 1e9,
		r->windows.windows, o->wcfg.dir);
}

/*
 * A run between two boots, at its retry time: a panicked kernel kept
 * open is let go once a reset (or the end of QEMU) was seen; then the
 * guest is opened again, and profiled from a new window once its kernel
 * is usable.  Each new reason to wait is said once.
 */
void guest_run_resume(struct guest_run *r, const struct profile_opts *o,
		      bool rt)
{
	uint64_t now = ivm_mono_ns();
	struct ivm_error *err;

	if (r->g) {
		ivm_boot_watch_poll(&r->boot, now);
		if (!(ivm_boot_watch_seen(&r->boot) &
		      (IVM_BOOT_RESET | IVM_BOOT_GONE | IVM_BOOT_SHUTDOWN)))
			return;
		guest_run_release(r);
		r->retry_at = now;
	}
	if (now < r->retry_at)
		return;
	err = run_attach(r, o);
	if (!err) {
		r->waiting = false;
		r->waited = false;	/* stepped at once, not by old descriptors */
		ivm_profiler_set_realtime(r->pr, rt);
		guest_run_who(o, r);
		fprintf(stderr, "the guest is back after %.1f s: kernel %s, kaslr_offset 0x%" PRIx64 ", window %s\n",
			(double)(ivm_mono_ns() - r->waiting_since) / 1e9,
			r->g->release, ivm_kernel_layout_slide(r->g->layout),
			r->windows.path ? r->windows.path : "?");
		return;
	}
	if (strcmp(r->last_try, ivm_error_string(err))) {
		snprintf(r->last_try, sizeof(r->last_try), "%s",
			 ivm_error_string(err));
		guest_run_who(o, r);
		fprintf(stderr, "waiting for the guest's next kernel: %s (trying again, every %llu s at most)\n",
			r->last_try, RETRY_MAX_NS / 1000000000ull);
	}
	ivm_error_destroy(err);
	guest_run_release(r);
	/* The writer of a window that could not start was removed. */
	ivm_window_run_finished(&r->windows);
	r->retry_ns = r->retry_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS :
		      r->retry_ns * 2;
	r->retry_at = ivm_mono_ns() + r->retry_ns;
}

/* Whether a run of this domain is going on (or waits for its next boot). */
bool guest_runs_profile(const struct guest_run *runs, size_t nr,
			const char *name)
{
	size_t i;

	for (i = 0; i < nr; i++)
		if ((runs[i].running || runs[i].waiting) &&
		    !strcmp(runs[i].name, name))
			return true;
	return false;
}
