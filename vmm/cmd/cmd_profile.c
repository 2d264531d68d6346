// SPDX-License-Identifier: MIT
/*
 * idlevm profile: sample a running guest's idle transitions into a profile
 * file, then print its report.
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "access/libvirt_domain.h"
#include "base/clock.h"
#include "cmd/boot_watch.h"
#include "cmd/commands.h"
#include "cmd/window_run.h"
#include "profile/capture_pin.h"
#include "kernel/guest.h"
#include "profile/profiler.h"
#include "access/tcg_env.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void profile_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm profile (--domain NAME... | --all-domains | --qmp PATH) [options]\n"
"\n"
"Record the guest stacks that ran just before each vCPU went idle (to-idle)\n"
"and just after it woke (from-idle), plus on-CPU ticks, into a profile file;\n"
"then print its report.  Ctrl-C stops early and keeps everything collected.\n"
"\n"
IVM_GUEST_USAGE
"                         (repeat --domain for several guests in one run;\n"
"                         they need --output-dir)\n"
"      --all-domains      every running libvirt domain, and those that start\n"
"                         later (looked for every 5 s); needs --output-dir\n"
"      --match GLOB       with --all-domains: only domains whose name matches\n"
"  -o, --output FILE      profile file (default idlevm.prof)\n"
"  -D, --duration SEC     stop after SEC seconds (default: at Ctrl-C)\n"
"  -F, --frequency HZ     on-CPU samples per second per vCPU (default 99; 0 off)\n"
"      --idle-every N     sample every Nth idle transition (default 1; 0 off)\n"
"      --poll-interval MS polling period of the thread and qmp sources\n"
"                         (default 1)\n"
"      --idle-source SRC  auto (default: sched where tracefs is usable, else\n"
"                         thread), sched (host sched_switch/sched_wakeup of\n"
"                         the vCPU threads, event-driven; TCG and KVM),\n"
"                         thread (polls vCPU thread state), qmp (polls HLT)\n"
"                         or kvm (kvm_exit tracepoints, hardware KVM only)\n"
"      --realtime         wait for the sched source's events at real-time\n"
"                         priority (SCHED_FIFO 1): more short idle periods\n"
"                         seen on a loaded host, at a cost to the guest's\n"
"                         latency (every event preempts a vCPU thread)\n"
"      --no-realtime      normal scheduling priority: the default\n"
"      --cpu-budget PCT   the most of a host core idlevm may spend on each\n"
"                         guest, in percent: above it the guest is watched\n"
"                         only in some slices of time, and reports scale\n"
"                         counts back (default 1 with --window, else 0: no\n"
"                         limit)\n"
"      --disk             time QEMU's I/O calls too (the host's service of\n"
"                         the guest's disks, with the sched source): while\n"
"                         they are traced every host syscall costs more\n"
"      --registers SRC    where on-CPU and from-idle samples take the vCPU's\n"
"                         registers: auto (default: QEMU's memory under TCG,\n"
"                         else the monitor), memory, or monitor (HMP `info\n"
"                         registers`; costs a TCG guest about 0.1 %% per Hz)\n"
"      --capture MODE     optimistic (the default, also `auto`: read, and\n"
"                         keep only if the target did not run meanwhile),\n"
"                         pin (the in-guest helper holds the idle vCPU and\n"
"                         pins the target to it while its stack is read;\n"
"                         costs the guest, see README) or stop (QMP\n"
"                         stop/cont around the read)\n"
"      --helper-socket PATH  the helper's socket (default: the domain's\n"
"                         helper channel, or helper.sock beside --qmp)\n"
"      --pin-lease MS     how long the helper holds the vCPU and keeps the\n"
"                         target pinned, from its reply (default %g ms;\n"
"                         fractions allowed; an older helper needs at least\n"
"                         %d)\n"
"      --pin-policy P     rescue (default: read unpinned first, pin only a\n"
"                         target found woken) or always (pin every target\n"
"                         not on a vCPU)\n"
"      --no-readahead     never ask the guest helper to read CFI the guest\n"
"                         does not hold into its page cache (by default it\n"
"                         is asked once per object, in every capture mode)\n"
"      --switch-every N   context-switch sampling: every guest thread's\n"
"                         voluntary and involuntary switches, run-queue wait\n"
"                         and CPU time, read from guest memory, and its stack\n"
"                         each time its switches cross a multiple of N\n"
"                         (samples of kind switch; idlevm report -f threads)\n"
"      --switch-batch N   threads whose counters one look reads (default %d)\n"
"      --switch-interval MS  between two such looks (default %g)\n"
"  -p, --pid PID          keep only samples of this guest process\n"
"      --comm PATTERN     keep only samples whose thread name matches\n"
"      --binary FILE      host copy of a guest executable (PIE or not): its\n"
"                         DWARF CFI unwinds the processes running it\n"
"                         (repeatable)\n"
"      --symdir DIR       look for each process's executable by its build-id\n"
"                         in DIR/.build-id/xx/rest (or rest.debug, if it has\n"
"                         CFI); the report then defaults to DIR too\n"
"      --label KEY=SOURCE read a business category at each capture from the\n"
"                         sampled thread's process, as the sample's label KEY\n"
"                         (repeatable, up to %d): SOURCE is tls:SYMBOL (a\n"
"                         __thread variable of the executable), var:SYMBOL\n"
"                         (a global) or key:SYMBOL (the thread's\n"
"                         pthread_getspecific() of the pthread_key_t in\n"
"                         SYMBOL), then :int (default), :u64 or :str; a value\n"
"                         that cannot be read is '?', and counted\n"
"      --no-report        do not print the report at the end\n"
"      --window SEC       continuous: one whole profile per SEC seconds in\n"
"                         --output-dir, until Ctrl-C or -D; each window's\n"
"                         pprof is made beside it (no report is printed)\n"
"      --output-dir DIR   one profile per guest (per window with --window)\n"
"                         and its pprof: DIR/NAME-YYYYmmddTHHMMSSZ.prof and\n"
"                         .pb.gz (NAME: the guest's, START in UTC)\n"
"      --keep N           keep the N newest windows of this guest in DIR\n"
"                         (default 1440; 0: all), oldest removed first\n"
"      --keep-bytes SIZE  and at most SIZE bytes of them (K, M, G; default\n"
"                         no limit); the newest window is always kept\n"
"      --no-pprof         windows: leave the pprof to whoever reads them\n"
"  -h, --help             this help\n", IVM_PIN_LEASE_DEFAULT_US / 1000.0,
		IVM_PIN_LEASE_V1_MIN_MS,
		IVM_SWITCH_BATCH_DEFAULT,
		(double)IVM_SWITCH_INTERVAL_DEFAULT_NS / 1e6, IVM_LABELS_MAX);
}

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

/* "123", "64K", "10M", "2G" (powers of 1024). */
static bool parse_size(const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno || *s == '-')
		return false;
	switch (*end) {
	case 'K': case 'k':
		shift = 10;
		break;
	case 'M': case 'm':
		shift = 20;
		break;
	case 'G': case 'g':
		shift = 30;
		break;
	case '\0':
		break;
	default:
		return false;
	}
	if (*end && end[1])
		return false;
	if (v > (UINT64_MAX >> shift))
		return false;
	*ret = (uint64_t)v << shift;
	return true;
}

static bool parse_double(const char *s, double *ret)
{
	char *end;

	*ret = strtod(s, &end);
	return *s && !*end && *ret >= 0;
}

/* Guests one run profiles at most. */
#define MAX_GUESTS 64
/* How often --all-domains looks for domains that started. */
#define SCAN_NS 5000000000ull

enum regs_source { REGS_AUTO, REGS_MEMORY, REGS_MONITOR };

/* What every guest's run shares: the command line. */
struct profile_opts {
	struct ivm_profiler_config cfg;	/* each run copies it */
	struct ivm_guest_options gopts;	/* --connect, --qmp, --vmlinux */
	bool auto_source;
	enum regs_source regs;
	const char *helper_socket;
	unsigned int pin_lease_us;
	enum ivm_pin_policy pin_policy;
	bool no_readahead;	/* --no-readahead */
	struct ivm_window_dir_config wcfg;	/* dir: a file per guest */
	bool window_pprof;
	const char *output;		/* no dir: the one guest's file */
	uint64_t end_ns;		/* -D: the run's end; 0 none */
	bool several;			/* say which guest each line is of */
};

/* One guest's run. */
struct guest_run {
	char *name;			/* the domain (or QMP socket) */
	struct ivm_guest *g;
	struct ivm_tcg_env *tcg_env;
	struct ivm_pin_capture *pin;
	struct ivm_profiler_config cfg;
	struct ivm_window_run windows;
	struct ivm_profiler_result res;
	struct ivm_profiler *pr;
	bool running;
	bool busy;			/* in its step (maybe waiting for its helper) */
	bool ended;			/* its step said the run is over */
	struct ivm_error *end_err;	/* and why, if an error */
	uint64_t attach_ns;		/* CPU time opening the guest took */
	/* The loop's last wait: whether it was in it, and its descriptors. */
	bool waited;
	size_t fd_first, nr_fds;
	struct ivm_boot_watch boot;	/* whether the boot profiled goes on */
	/*
	 * Between two boots of the guest (a continuous run follows it): no
	 * profiler, the guest opened again at retry_at until its kernel is
	 * usable.  g stays open (a panicked kernel) until a reset says a new
	 * boot is under way.
	 */
	bool waiting;
	uint64_t waiting_since, retry_at, retry_ns;
	uint64_t partial_since;		/* opened, some vCPU without a CPU yet */
	char last_try[256];		/* what the last try said */
	char after[256];		/* the next window's "after" metadata */
};

/* The runs of this process, for serve_others(). */
static struct guest_run *all_runs;
static size_t *nr_all_runs;

/* CPU time of this thread (one thread runs every guest). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * One step of r's run; a run that ends is left for the loop to close.
 * A boot that ended ends the run before the step: nothing of the next
 * boot goes into its file.
 */
static void step_run(struct guest_run *r)
{
	struct ivm_error *err;
	unsigned int end;

	r->busy = true;
	ivm_boot_watch_poll(&r->boot, ivm_mono_ns());
	end = ivm_boot_watch_first(&r->boot);
	if (end)
		ivm_profiler_end(r->pr, ivm_boot_end_reason(end));
	if (!ivm_profiler_step(r->pr, stop_requested, &err)) {
		r->ended = true;
		r->end_err = err;
	}
	r->busy = false;
}

/* Whether r can be stepped now (running, not over, not in a step). */
static bool steppable(const struct guest_run *r)
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
static bool step_due(const struct guest_run *r, const struct pollfd *fds,
		     size_t first, size_t n, uint64_t now)
{
	size_t i;

	if (stop_requested || now >= ivm_profiler_wake_at(r->pr))
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
	struct pollfd fds[4 * IVM_PROFILER_MAX_POLLFDS];
	size_t first[MAX_GUESTS], count[MAX_GUESTS];
	uint64_t lent = 0;
	int ret;

	for (;;) {
		uint64_t now = ivm_mono_ns(), wake = deadline_ns;
		struct timespec ts;
		size_t n = 1, i;
		int r;

		fds[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
		for (i = 0; i < *nr_all_runs; i++) {
			struct guest_run *o = &all_runs[i];

			first[i] = n;
			count[i] = 0;
			if (o == me || !steppable(o))
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
		for (i = 0; i < *nr_all_runs; i++) {
			struct guest_run *o = &all_runs[i];
			uint64_t cpu0;

			if (o == me || !steppable(o) ||
			    !step_due(o, fds, first[i], count[i], now))
				continue;
			/*
			 * No round trip of theirs meanwhile: their steps stay
			 * short, and this guest's reply is taken while its
			 * leases hold (one pin in flight per process).
			 */
			if (o->pin)
				ivm_pin_capture_pause(o->pin, true);
			cpu0 = thread_cpu_ns();
			step_run(o);
			lent += thread_cpu_ns() - cpu0;
			if (o->pin)
				ivm_pin_capture_pause(o->pin, false);
		}
	}
	ivm_profiler_lend_cpu(me->pr, lent);
	return ret;
}

/* "idlevm: " or "idlevm: NAME: " before a guest's lines. */
static void who(const struct profile_opts *o, const struct guest_run *r)
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
	uint64_t all = 0, kept = 0;
	int i;

	for (i = 0; i < IVM_STAGE_NR; i++)
		all += res->stage_ns[i];
	for (i = 0; i < IVM_SAMPLE_NR_KINDS; i++)
		kept += res->kept[i];
	if (!all)
		return;
	who(o, r);
	fprintf(stderr, "time by stage:");
	for (i = 0; i < IVM_STAGE_NR; i++)
		fprintf(stderr, " %s %.0f%%", ivm_stage_name(i),
			100.0 * (double)res->stage_ns[i] / (double)all);
	if (kept)
		fprintf(stderr, "; %.1f us of host CPU per sample recorded",
			(double)res->cpu_ns / 1e3 / (double)kept);
	fputc('\n', stderr);
}

/* Free what run_attach made (not the profiler, which finish frees). */
static void run_release(struct guest_run *r)
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
	bool kvm = false;

	r->attach_ns = thread_cpu_ns();
	r->cfg = o->cfg;
	if (!o->gopts.qmp_path)
		gopts.domain = r->name;
	err = ivm_guest_open(&gopts, &r->g);
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
		who(o, r);
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
			who(o, r);
			fprintf(stderr, "warning: no pin capture (%s), capturing optimistic\n",
				ivm_error_string(err));
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
	who(o, r);
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
	r->attach_ns = thread_cpu_ns() - r->attach_ns;
	err = ivm_profiler_start(r->g, &r->cfg, writer, &r->res, &r->pr);
	if (err)
		return err;
	ivm_boot_watch_attach(&r->boot, r->g);
	r->running = true;
	return NULL;
}

/* Start profiling a guest (domain, or NULL: the --qmp socket). */
static struct ivm_error *run_start(struct guest_run *r,
				   const struct profile_opts *o,
				   const char *domain)
{
	memset(r, 0, sizeof(*r));
	r->name = strdup(domain ? domain : o->gopts.qmp_path);
	if (!r->name)
		return &ivm_enomem;
	return run_attach(r, o);
}

/* What a guest's run did, on stderr, as its closing lines. */
static void run_summary(const struct profile_opts *o,
			const struct guest_run *r)
{
	const struct ivm_profiler_result *res = &r->res;

	who(o, r);
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
		who(o, r);
		fprintf(stderr,
			"the guest was not running for %" PRIu64
			" s of the run (paused, or stopped by QEMU: `idlevm info` says which): no samples then\n",
			res->paused_s);
	}
	who(o, r);
	fprintf(stderr,
		"targets read from their saved frame: %" PRIu64
		" kept, %" PRIu64 " discarded\n",
		res->blocked_outcomes[IVM_CAPTURE_KEPT],
		res->blocked_outcomes[IVM_CAPTURE_DISCARDED_RAN] +
		res->blocked_outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE]);
	if (res->objects.objects) {
		who(o, r);
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
		who(o, r);
		fprintf(stderr,
			"to-idle targets the poll could not be sure of: %" PRIu64
			" found in guest memory (%" PRIu64
			" not the task last seen, %" PRIu64
			" in idle periods between two polls), %" PRIu64
			" not found\n",
			res->to_idle_resolved, res->to_idle_retargeted,
			res->dispatch.unseen_to_idle, res->to_idle_unresolved);
	}
	who(o, r);
	fprintf(stderr,
		"idle source %s: %" PRIu64 " idle periods seen (%" PRIu64
		" ended, recorded), %" PRIu64
		" came and went unseen (%" PRIu64
		" rebuilt from the guest scheduler's stamps, %" PRIu64
		" of them with no start: hidden by a second run of their to-idle thread); %" PRIu64
		" vCPU-thread sleeps (%" PRIu64
		" idle, %" PRIu64 " not idle: QEMU lock or I/O), %" PRIu64
		" trace records read, %" PRIu64 " trace events lost%s\n",
		ivm_idle_source_name(res->idle_source), res->idle.periods_seen,
		res->periods_written, res->idle.unseen_periods,
		res->idle.recovered_periods, res->periods_no_start,
		res->idle.host_sleeps,
		res->idle.host_sleeps_idle, res->idle.host_sleeps_busy,
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
		who(o, r);
		fprintf(stderr, "%s%s\n", looks,
			is->halt_looked_late * 100 >=
			IVM_IDLE_LOOK_LATE_HINT_PCT * is->host_sleeps_idle &&
			!res->realtime ?
			"; idle periods shorter than the delay came and went unseen: on a busy host, --realtime looks sooner, at a cost to the guest's latency" :
			"");
	}
	if (r->cfg.capture_mode == IVM_CAPTURE_MODE_PIN) {
		who(o, r);
		fprintf(stderr,
			"pin: %" PRIu64 " pinned, %" PRIu64
			" held only, %" PRIu64 " unneeded, %" PRIu64
			" running (not pinned), %" PRIu64
			" read again (asleep again), %" PRIu64
			" skipped, %" PRIu64
			" refused, %" PRIu64 " ran before the pin, %" PRIu64
			" lease expired, %" PRIu64 " unanswered in time, %" PRIu64
			" pin_failed (helper lost), %"
			PRIu64 " unpinned after it; mean round trips: hold+pin %.2f ms, unpin+release %.2f ms\n",
			res->pin.ok, res->pin.hold_only, res->pin.unneeded,
			res->pin.running, res->pin.reread, res->pin.skipped,
			res->pin.refused, res->pin.ran_before_pin,
			res->pin.lease_expired, res->pin.timed_out,
			res->pin.failed, res->pin.unpinned,
			mean_ms(res->pin.pin_ns, res->pin.ok +
						 res->pin.hold_only +
						 res->pin.refused),
			mean_ms(res->pin.restore_ns, res->pin.ok +
						     res->pin.hold_only));
		who(o, r);
		print_footprint(res);
	}
	if (res->pin.readaheads || res->pin.readahead_failed) {
		who(o, r);
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

		who(o, r);
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
	who(o, r);
	fprintf(stderr, "host CPU %.2f s over %.1f s (%.1f%% of a core), and %.2f s opening the guest\n",
		(double)res->cpu_ns / 1e9, res->elapsed_s,
		res->elapsed_s > 0 ?
		100.0 * (double)res->cpu_ns / 1e9 / res->elapsed_s : 0,
		(double)r->attach_ns / 1e9);
	if (r->cfg.cpu_budget > 0) {
		who(o, r);
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
	if (o->wcfg.dir) {
		who(o, r);
		fprintf(stderr, "%u windows in %s (%u pprof made, %u failed); %zu old windows removed by --keep\n",
			r->windows.windows, o->wcfg.dir, r->windows.pprofs,
			r->windows.pprof_failures, r->windows.pruned);
	}
}

/*
 * End a guest's run: its file's END record (its last window's pprof),
 * the closing lines, the guest closed.  Returns err, or the error of
 * writing the file's end.
 */
static struct ivm_error *run_end(struct guest_run *r,
				 const struct profile_opts *o,
				 struct ivm_error *err)
{
	struct ivm_error *ferr = ivm_profiler_finish(r->pr);

	r->pr = NULL;
	r->running = false;
	r->ended = false;
	run_release(r);
	if (o->wcfg.dir) {
		/* The last window is whole now (or cut short by an error). */
		ivm_window_run_finished(&r->windows);
		ivm_window_run_deinit(&r->windows);
	}
	run_summary(o, r);
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
static bool follows(const struct guest_run *r, const struct profile_opts *o,
		    bool all_domains)
{
	unsigned int seen = ivm_boot_watch_seen(&r->boot);
	enum ivm_qmp_lifecycle state = r->g && r->g->qmp ?
		ivm_qmp_lifecycle_cached(r->g->qmp) : IVM_QMP_GONE;

	if (o->cfg.window_s <= 0 || r->end_err || stop_requested ||
	    (o->end_ns && ivm_mono_ns() >= o->end_ns))
		return false;
	if (!all_domains)
		return true;
	return (seen & (IVM_BOOT_RESET | IVM_BOOT_PANIC | IVM_BOOT_CHANGED)) &&
	       !(seen & (IVM_BOOT_GONE | IVM_BOOT_SHUTDOWN)) &&
	       state != IVM_QMP_GONE && state != IVM_QMP_SHUTDOWN;
}

/*
 * r's boot ended and its run follows the guest: the window ends whole
 * (its pprof made, the closing lines for this boot said), the guest is
 * closed (a panicked one kept until a reset), and run_resume opens it
 * again.  Returns the error of writing the window's end, if any.
 */
static struct ivm_error *run_between(struct guest_run *r,
				     const struct profile_opts *o)
{
	struct ivm_error *ferr = ivm_profiler_finish(r->pr);
	unsigned int seen = ivm_boot_watch_seen(&r->boot);
	char *last = r->windows.path ? strdup(r->windows.path) : NULL;
	const char *base = last && strrchr(last, '/') ?
			   strrchr(last, '/') + 1 : last;
	struct tm tm;
	time_t t = time(NULL);
	char when[32];

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
		run_release(r);
	}
	ivm_window_run_finished(&r->windows);
	run_summary(o, r);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(r->after, sizeof(r->after), "%s at %s; the window before: %s",
		 r->res.end_reason, when, base ? base : "none");
	who(o, r);
	fprintf(stderr, "%s: window %s ended, whole; following the guest to its next boot%s\n",
		r->res.end_reason, base ? base : "(none)",
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

/* A run waiting for its guest's next boot ends there (stop, -D). */
static void run_stop_waiting(struct guest_run *r, const struct profile_opts *o)
{
	run_release(r);
	r->waiting = false;
	ivm_window_run_deinit(&r->windows);
	who(o, r);
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
static void run_resume(struct guest_run *r, const struct profile_opts *o,
		       bool rt)
{
	uint64_t now = ivm_mono_ns();
	struct ivm_error *err;

	if (r->g) {
		ivm_boot_watch_poll(&r->boot, now);
		if (!(ivm_boot_watch_seen(&r->boot) &
		      (IVM_BOOT_RESET | IVM_BOOT_GONE | IVM_BOOT_SHUTDOWN)))
			return;
		run_release(r);
		r->retry_at = now;
	}
	if (now < r->retry_at)
		return;
	err = run_attach(r, o);
	if (!err) {
		r->waiting = false;
		r->waited = false;	/* stepped at once, not by old descriptors */
		ivm_profiler_set_realtime(r->pr, rt);
		who(o, r);
		fprintf(stderr, "the guest is back after %.1f s: kernel %s, kaslr_offset 0x%" PRIx64 ", window %s\n",
			(double)(ivm_mono_ns() - r->waiting_since) / 1e9,
			r->g->release, ivm_kernel_layout_slide(r->g->layout),
			r->windows.path ? r->windows.path : "?");
		return;
	}
	if (strcmp(r->last_try, ivm_error_string(err))) {
		snprintf(r->last_try, sizeof(r->last_try), "%s",
			 ivm_error_string(err));
		who(o, r);
		fprintf(stderr, "waiting for the guest's next kernel: %s (trying again, every %llu s at most)\n",
			r->last_try, RETRY_MAX_NS / 1000000000ull);
	}
	ivm_error_destroy(err);
	run_release(r);
	/* The writer of a window that could not start was removed. */
	ivm_window_run_finished(&r->windows);
	r->retry_ns = r->retry_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS :
		      r->retry_ns * 2;
	r->retry_at = ivm_mono_ns() + r->retry_ns;
}

/* Whether a run of this domain is going on (or waits for its next boot). */
static bool profiling(const struct guest_run *runs, size_t nr,
		      const char *name)
{
	size_t i;

	for (i = 0; i < nr; i++)
		if ((runs[i].running || runs[i].waiting) &&
		    !strcmp(runs[i].name, name))
			return true;
	return false;
}

/* How long a domain that could not be profiled waits to be tried again. */
#define RETRY_NS 15000000000ull

/* A domain --all-domains could not profile, and when to try it again. */
struct not_yet {
	char name[256];
	uint64_t retry_at;
};

/*
 * --all-domains: start a run for each running domain (matching glob) not
 * profiled yet.  A domain that cannot be profiled (one still booting has
 * no kernel to find yet) is said once and tried again every RETRY_NS.
 */
static void scan_domains(struct guest_run *runs, size_t *nr,
			 const struct profile_opts *o, const char *glob,
			 struct not_yet *later, size_t *nr_later, bool rt)
{
	uint64_t now = ivm_mono_ns();
	struct ivm_error *err;
	char **names;
	size_t n, i, k;

	err = ivm_libvirt_running_domains(o->gopts.connect_uri, &names, &n);
	if (err) {
		fprintf(stderr, "idlevm: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		return;
	}
	for (i = 0; i < n; i++) {
		struct not_yet *ny = NULL;
		struct guest_run *r;

		if ((glob && fnmatch(glob, names[i], 0)) ||
		    profiling(runs, *nr, names[i]) ||
		    strlen(names[i]) >= sizeof(ny->name))
			continue;
		for (k = 0; k < *nr_later && !ny; k++)
			if (!strcmp(later[k].name, names[i]))
				ny = &later[k];
		if (ny && now < ny->retry_at)
			continue;
		/* A slot: a new one, or one whose run ended. */
		for (k = 0; k < *nr && (runs[k].running || runs[k].waiting); k++)
			;
		if (k == MAX_GUESTS) {
			if (!ny && *nr_later < MAX_GUESTS)
				fprintf(stderr, "idlevm: at most %d guests: %s left out\n",
					MAX_GUESTS, names[i]);
			ny = ny ? ny : *nr_later < MAX_GUESTS ?
			     &later[(*nr_later)++] : NULL;
			if (ny) {
				snprintf(ny->name, sizeof(ny->name), "%s", names[i]);
				ny->retry_at = now + RETRY_NS;
			}
			continue;
		}
		r = &runs[k];
		if (k < *nr)
			free(r->name);
		err = run_start(r, o, names[i]);
		if (!err) {
			if (k == *nr)
				(*nr)++;
			if (rt)
				ivm_profiler_set_realtime(r->pr, true);
			if (ny)
				*ny = later[--*nr_later];
			continue;
		}
		if (!ny)
			fprintf(stderr, "idlevm: %s: %s (trying again every %llu s)\n",
				names[i], ivm_error_string(err),
				RETRY_NS / 1000000000ull);
		ivm_error_destroy(err);
		run_release(r);
		ivm_window_run_deinit(&r->windows);
		free(r->name);
		r->name = NULL;
		if (k == *nr)
			memset(r, 0, sizeof(*r));
		if (!ny && *nr_later < MAX_GUESTS) {
			ny = &later[(*nr_later)++];
			snprintf(ny->name, sizeof(ny->name), "%s", names[i]);
		}
		if (ny)
			ny->retry_at = now + RETRY_NS;
	}
	ivm_libvirt_free_names(names, n);
}

int ivm_cmd_profile(int argc, char **argv)
{
	enum { OPT_IDLE_EVERY = 256, OPT_POLL, OPT_SOURCE, OPT_CAPTURE,
	       OPT_REALTIME, OPT_NO_REALTIME, OPT_DISK, OPT_CPU_BUDGET,
	       OPT_COMM, OPT_NO_REPORT, OPT_BINARY, OPT_HELPER_SOCKET,
	       OPT_PIN_LEASE, OPT_PIN_POLICY, OPT_NO_READAHEAD, OPT_SYMDIR, OPT_REGISTERS,
	       OPT_WINDOW, OPT_OUTPUT_DIR, OPT_KEEP, OPT_KEEP_BYTES,
	       OPT_NO_PPROF, OPT_ALL_DOMAINS, OPT_MATCH, OPT_SWITCH_EVERY,
	       OPT_SWITCH_BATCH, OPT_SWITCH_INTERVAL, OPT_LABEL };
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'D' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "idle-every", required_argument, NULL, OPT_IDLE_EVERY },
		{ "poll-interval", required_argument, NULL, OPT_POLL },
		{ "idle-source", required_argument, NULL, OPT_SOURCE },
		{ "realtime", no_argument, NULL, OPT_REALTIME },
		{ "no-realtime", no_argument, NULL, OPT_NO_REALTIME },
		{ "disk", no_argument, NULL, OPT_DISK },
		{ "cpu-budget", required_argument, NULL, OPT_CPU_BUDGET },
		{ "capture", required_argument, NULL, OPT_CAPTURE },
		{ "registers", required_argument, NULL, OPT_REGISTERS },
		{ "pid", required_argument, NULL, 'p' },
		{ "comm", required_argument, NULL, OPT_COMM },
		{ "no-report", no_argument, NULL, OPT_NO_REPORT },
		{ "binary", required_argument, NULL, OPT_BINARY },
		{ "symdir", required_argument, NULL, OPT_SYMDIR },
		{ "label", required_argument, NULL, OPT_LABEL },
		{ "helper-socket", required_argument, NULL, OPT_HELPER_SOCKET },
		{ "pin-lease", required_argument, NULL, OPT_PIN_LEASE },
		{ "pin-policy", required_argument, NULL, OPT_PIN_POLICY },
		{ "no-readahead", no_argument, NULL, OPT_NO_READAHEAD },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
		{ "keep", required_argument, NULL, OPT_KEEP },
		{ "keep-bytes", required_argument, NULL, OPT_KEEP_BYTES },
		{ "no-pprof", no_argument, NULL, OPT_NO_PPROF },
		{ "all-domains", no_argument, NULL, OPT_ALL_DOMAINS },
		{ "match", required_argument, NULL, OPT_MATCH },
		{ "switch-every", required_argument, NULL, OPT_SWITCH_EVERY },
		{ "switch-batch", required_argument, NULL, OPT_SWITCH_BATCH },
		{ "switch-interval", required_argument, NULL,
		  OPT_SWITCH_INTERVAL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct guest_run runs[MAX_GUESTS];
	struct profile_opts o = {
		.cfg = {
			.frequency_hz = 99, .idle_every = 1,
			/*
			 * Normal priority by default.  Measured on web01
			 * (tests/bench/web01_latency.sh, 2 host cores): at
			 * SCHED_FIFO the service's p99 was 1.09-1.14 times
			 * its detached value, at SCHED_OTHER 0.90-1.06, for
			 * about one point less of the guest's idle
			 * transitions captured (t_62: 95.0-95.5% against
			 * 95.9-96.9%).
			 */
			.poll_interval_ms = 1, .realtime = false,
			.idle_source = IVM_IDLE_SOURCE_THREAD,
			.capture_mode = IVM_CAPTURE_MODE_OPTIMISTIC,
			.filter_pid = -1,
		},
		.auto_source = true, .regs = REGS_AUTO,
		.pin_lease_us = IVM_PIN_LEASE_DEFAULT_US,
		.pin_policy = IVM_PIN_RESCUE,
		.wcfg = { .keep_windows = 1440 },
		.window_pprof = true,
		.output = "idlevm.prof",
	};
	struct ivm_report_options ropts = { .out = stdout, .kind = -1,
					    .top = 5 };
	const char *domains[MAX_GUESTS], *binaries[16], *glob = NULL;
	size_t nr_domains = 0, nr_binaries = 0, nr_runs = 0, i;
	static struct not_yet later[MAX_GUESTS];
	size_t nr_later = 0;
	struct pollfd fds[4 * IVM_PROFILER_MAX_POLLFDS];
	struct ivm_error *err = NULL, *first_err = NULL;
	struct ivm_label_spec labels[IVM_LABELS_MAX];
	size_t nr_labels = 0;
	struct sigaction sa;
	char symdir_buf[PATH_MAX];
	const char *symdir = NULL;
	bool report = true, output_given = false, all_domains = false;
	bool rt = false, budget_given = false;
	uint64_t size, next_scan = 0, t0;
	struct rusage ru;
	double d;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "o:D:F:p:h",
				longopts, NULL)) != -1) {
		if (c == 'd') {
			/* Repeatable: several guests in one run. */
			if (nr_domains == MAX_GUESTS) {
				fprintf(stderr, "idlevm profile: at most %d guests\n",
					MAX_GUESTS);
				return 2;
			}
			domains[nr_domains++] = optarg;
			continue;
		}
		if (ivm_guest_parse_option(&o.gopts, c, optarg))
			continue;
		switch (c) {
		case 'o':
			o.output = optarg;
			output_given = true;
			break;
		case 'D':
			if (!parse_double(optarg, &o.cfg.duration_s))
				goto bad_value;
			break;
		case 'F':
			if (!parse_double(optarg, &o.cfg.frequency_hz) ||
			    o.cfg.frequency_hz > 10000)
				goto bad_value;
			break;
		case OPT_IDLE_EVERY:
			if (!parse_double(optarg, &d) || d > 1e6)
				goto bad_value;
			o.cfg.idle_every = (uint32_t)d;
			break;
		case OPT_POLL:
			if (!parse_double(optarg, &o.cfg.poll_interval_ms) ||
			    o.cfg.poll_interval_ms < 0.1 ||
			    o.cfg.poll_interval_ms > 1000)
				goto bad_value;
			break;
		case OPT_REALTIME:
			o.cfg.realtime = true;
			break;
		case OPT_NO_REALTIME:
			o.cfg.realtime = false;
			break;
		case OPT_DISK:
			o.cfg.disk = true;
			break;
		case OPT_CPU_BUDGET:
			if (!parse_double(optarg, &o.cfg.cpu_budget) ||
			    o.cfg.cpu_budget < 0 || o.cfg.cpu_budget > 100)
				goto bad_value;
			budget_given = true;
			break;
		case OPT_SOURCE:
			o.auto_source = false;
			if (!strcmp(optarg, "auto"))
				o.auto_source = true;
			else if (!strcmp(optarg, "thread"))
				o.cfg.idle_source = IVM_IDLE_SOURCE_THREAD;
			else if (!strcmp(optarg, "qmp"))
				o.cfg.idle_source = IVM_IDLE_SOURCE_QMP;
			else if (!strcmp(optarg, "kvm"))
				o.cfg.idle_source = IVM_IDLE_SOURCE_KVM;
			else if (!strcmp(optarg, "sched"))
				o.cfg.idle_source = IVM_IDLE_SOURCE_SCHED;
			else
				goto bad_value;
			break;
		case OPT_CAPTURE:
			/*
			 * auto is optimistic: measured on web01 and lockstorm,
			 * pinning kept no more samples than the read's own
			 * checks and cost the guest (README, "Pin capture").
			 */
			if (!strcmp(optarg, "pin"))
				o.cfg.capture_mode = IVM_CAPTURE_MODE_PIN;
			else if (!strcmp(optarg, "optimistic") ||
				 !strcmp(optarg, "auto"))
				o.cfg.capture_mode = IVM_CAPTURE_MODE_OPTIMISTIC;
			else if (!strcmp(optarg, "stop"))
				o.cfg.capture_mode = IVM_CAPTURE_MODE_STOP;
			else
				goto bad_value;
			break;
		case OPT_REGISTERS:
			if (!strcmp(optarg, "auto"))
				o.regs = REGS_AUTO;
			else if (!strcmp(optarg, "memory"))
				o.regs = REGS_MEMORY;
			else if (!strcmp(optarg, "monitor"))
				o.regs = REGS_MONITOR;
			else
				goto bad_value;
			break;
		case OPT_HELPER_SOCKET:
			o.helper_socket = optarg;
			break;
		case OPT_PIN_LEASE:
			if (!parse_double(optarg, &d) || d < 0.01 ||
			    d > IVM_PROTO_LEASE_MAX_MS)
				goto bad_value;
			o.pin_lease_us = (unsigned int)(d * 1000 + 0.5);
			break;
		case OPT_NO_READAHEAD:
			o.no_readahead = true;
			break;
		case OPT_PIN_POLICY:
			if (!strcmp(optarg, "always"))
				o.pin_policy = IVM_PIN_ALWAYS;
			else if (!strcmp(optarg, "rescue"))
				o.pin_policy = IVM_PIN_RESCUE;
			else
				goto bad_value;
			break;
		case OPT_SWITCH_EVERY:
			if (!parse_double(optarg, &d) || d < 1 || d > 1e9 ||
			    d != (uint32_t)d)
				goto bad_value;
			o.cfg.switch_every = (uint32_t)d;
			break;
		case OPT_SWITCH_BATCH:
			if (!parse_double(optarg, &d) || d < 1 || d > 65536 ||
			    d != (uint32_t)d)
				goto bad_value;
			o.cfg.switch_batch = (uint32_t)d;
			break;
		case OPT_SWITCH_INTERVAL:
			if (!parse_double(optarg, &o.cfg.switch_interval_ms) ||
			    o.cfg.switch_interval_ms < 0.1 ||
			    o.cfg.switch_interval_ms > 10000)
				goto bad_value;
			break;
		case 'p':
			if (!parse_double(optarg, &d) || d > 4194304)
				goto bad_value;
			o.cfg.filter_pid = (int)d;
			break;
		case OPT_COMM:
			o.cfg.filter_comm = optarg;
			break;
		case OPT_NO_REPORT:
			report = false;
			break;
		case OPT_BINARY:
			if (nr_binaries == sizeof(binaries) / sizeof(binaries[0])) {
				fprintf(stderr, "idlevm profile: too many --binary\n");
				return 2;
			}
			binaries[nr_binaries++] = optarg;
			break;
		case OPT_SYMDIR:
			/*
			 * Absolute, for the report run from elsewhere; and a
			 * missing directory is refused before the guest is
			 * touched.
			 */
			symdir = realpath(optarg, symdir_buf);
			if (!symdir) {
				fprintf(stderr, "idlevm profile: --symdir %s: %s\n",
					optarg, strerror(errno));
				return 2;
			}
			break;
		case OPT_WINDOW:
			if (!parse_double(optarg, &o.cfg.window_s) ||
			    o.cfg.window_s < 1)
				goto bad_value;
			break;
		case OPT_OUTPUT_DIR:
			o.wcfg.dir = optarg;
			break;
		case OPT_KEEP:
			if (!parse_size(optarg, &size) || strpbrk(optarg, "KkMmGg"))
				goto bad_value;
			o.wcfg.keep_windows = size;
			break;
		case OPT_KEEP_BYTES:
			if (!parse_size(optarg, &size) || !size)
				goto bad_value;
			o.wcfg.keep_bytes = size;
			break;
		case OPT_NO_PPROF:
			o.window_pprof = false;
			break;
		case OPT_ALL_DOMAINS:
			all_domains = true;
			break;
		case OPT_MATCH:
			glob = optarg;
			break;
		case OPT_LABEL:
			if (nr_labels == IVM_LABELS_MAX) {
				fprintf(stderr, "idlevm profile: at most %d --label\n",
					IVM_LABELS_MAX);
				return 2;
			}
			err = ivm_label_spec_parse(optarg, &labels[nr_labels]);
			if (err) {
				fprintf(stderr, "idlevm profile: %s\n",
					ivm_error_string(err));
				ivm_error_destroy(err);
				return 2;
			}
			for (i = 0; i < nr_labels; i++)
				if (!strcmp(labels[i].key, labels[nr_labels].key)) {
					fprintf(stderr, "idlevm profile: --label %s given twice\n",
						labels[i].key);
					return 2;
				}
			nr_labels++;
			break;
		case 'h':
			profile_usage(stdout);
			return 0;
		default:
			profile_usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "idlevm profile: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	if (o.gopts.core_path) {
		fprintf(stderr, "idlevm profile: needs a live guest (--domain or --qmp), not --core\n");
		return 2;
	}
	if (nr_domains == 1)
		o.gopts.domain = domains[0];
	if ((all_domains || nr_domains > 1) &&
	    (o.gopts.qmp_path || (nr_domains && all_domains))) {
		fprintf(stderr, "idlevm profile: --all-domains, several --domain or one --qmp\n");
		return 2;
	}
	if (glob && !all_domains) {
		fprintf(stderr, "idlevm profile: --match goes with --all-domains\n");
		return 2;
	}
	if (!all_domains && nr_domains < 2) {
		err = ivm_guest_check_options(&o.gopts);
		if (err) {
			fprintf(stderr, "idlevm profile: %s\n", ivm_error_string(err));
			ivm_error_destroy(err);
			return 2;
		}
	}
	o.several = all_domains || nr_domains > 1;
	if (o.cfg.window_s > 0 && !o.wcfg.dir) {
		fprintf(stderr, "idlevm profile: --window needs --output-dir\n");
		return 2;
	}
	if (o.several && !o.wcfg.dir) {
		fprintf(stderr, "idlevm profile: several guests need --output-dir (a file each)\n");
		return 2;
	}
	if (o.wcfg.dir && output_given) {
		fprintf(stderr, "idlevm profile: -o or --output-dir, not both\n");
		return 2;
	}
	if (o.several && o.helper_socket) {
		fprintf(stderr, "idlevm profile: --helper-socket is for one guest\n");
		return 2;
	}
	/*
	 * A continuous run is an agent left on the host: it keeps to a
	 * budget unless told otherwise.  A one-off run takes what it needs.
	 */
	if (!budget_given && o.cfg.window_s > 0)
		o.cfg.cpu_budget = 1;
	o.cfg.status_line = isatty(STDERR_FILENO) && !o.several;
	o.cfg.binaries = binaries;
	o.cfg.nr_binaries = nr_binaries;
	o.cfg.symdir = symdir;
	o.cfg.labels = labels;
	o.cfg.nr_labels = nr_labels;
	if (nr_binaries)
		ropts.binary = binaries[0];
	ropts.binaries = binaries;
	ropts.nr_binaries = nr_binaries;
	ropts.symdir = symdir;
	if (o.wcfg.dir)
		report = false;		/* files and their pprof, no text */
	t0 = ivm_mono_ns();
	/*
	 * Several guests, or one followed across its boots: -D ends the
	 * run; one guest: its profile's.
	 */
	if (o.cfg.duration_s > 0 && (o.several || o.cfg.window_s > 0))
		o.end_ns = t0 + (uint64_t)(o.cfg.duration_s * 1e9);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: Ctrl-C must cut the wait short. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	if (all_domains) {
		fprintf(stderr, "idlevm: profiling every running domain%s%s, and those that start\n",
			glob ? " matching " : "", glob ? glob : "");
	} else {
		for (i = 0; i < (nr_domains ? nr_domains : 1); i++) {
			err = run_start(&runs[nr_runs], &o,
					nr_domains ? domains[i] : NULL);
			if (!err) {
				nr_runs++;
				continue;
			}
			if (!o.several) {
				run_release(&runs[0]);
				ivm_window_run_deinit(&runs[0].windows);
				free(runs[0].name);
				return ivm_error_report(err);
			}
			/* One guest that cannot be profiled: the others can. */
			fprintf(stderr, "idlevm: %s: %s\n", domains[i],
				ivm_error_string(err));
			ivm_error_destroy(err);
			run_release(&runs[nr_runs]);
			ivm_window_run_deinit(&runs[nr_runs].windows);
			free(runs[nr_runs].name);
		}
		if (!nr_runs)
			return 1;
	}
	if (o.wcfg.dir && o.cfg.window_s > 0)
		fprintf(stderr, "idlevm: one window every %g s in %s, keeping %" PRIu64 " windows (0: all) and %" PRIu64 " bytes (0: any) per guest\n",
			o.cfg.window_s, o.wcfg.dir, o.wcfg.keep_windows,
			o.wcfg.keep_bytes);
	/* One thread, real-time if a run waits for events. */
	for (i = 0; i < nr_runs && !rt; i++)
		rt = ivm_profiler_wants_realtime(runs[i].pr);
	if (all_domains && o.cfg.realtime)
		rt = true;
	if (rt)
		rt = ivm_realtime(true);
	for (i = 0; i < nr_runs; i++)
		ivm_profiler_set_realtime(runs[i].pr, rt);

	/* The loop: every guest's events and polls in one wait. */
	all_runs = runs;
	nr_all_runs = &nr_runs;
	for (;;) {
		uint64_t now = ivm_mono_ns(), wake = now + 1000000000ull;
		size_t nr_fds = 0, running = 0;

		if (all_domains && !stop_requested &&
		    (!o.end_ns || now < o.end_ns) && now >= next_scan) {
			scan_domains(runs, &nr_runs, &o, glob, later,
				     &nr_later, rt);
			ivm_profiler_cpu_sync();	/* no run's cost */
			next_scan = ivm_mono_ns() + SCAN_NS;
		}
		for (i = 0; i < nr_runs; i++) {
			struct guest_run *r = &runs[i];

			if (!r->waiting)
				;
			else if (stop_requested ||
				 (o.end_ns && ivm_mono_ns() >= o.end_ns))
				run_stop_waiting(r, &o);
			else
				run_resume(r, &o, rt);
		}
		for (i = 0; i < nr_runs; i++) {
			struct guest_run *r = &runs[i];

			/* One new since the last wait is stepped at once. */
			if (steppable(r) &&
			    (!r->waited || step_due(r, fds, r->fd_first,
						    r->nr_fds, ivm_mono_ns())))
				step_run(r);
		}
		for (i = 0; i < nr_runs; i++) {
			struct guest_run *r = &runs[i];

			if (r->running && r->ended &&
			    follows(r, &o, all_domains)) {
				/* Its boot is over; the run waits for the next. */
				err = run_between(r, &o);
				if (err) {
					who(&o, r);
					fprintf(stderr, "%s\n", ivm_error_string(err));
					ivm_error_destroy(err);
					err = NULL;
				}
			}
			if (r->waiting) {
				running++;
				if (stop_requested)
					wake = ivm_mono_ns();	/* ended next */
				else if (r->g && ivm_mono_ns() + 100000000ull < wake)
					wake = ivm_mono_ns() + 100000000ull;
				else if (!r->g && r->retry_at < wake)
					wake = r->retry_at;
				continue;
			}
			if (r->running && r->ended) {
				/* This guest's run is over; the others go on. */
				err = run_end(r, &o, r->end_err);
				r->end_err = NULL;
				if (err && o.several) {
					fprintf(stderr, "idlevm: %s: %s\n",
						r->name, ivm_error_string(err));
					ivm_error_destroy(err);
				} else if (err) {
					first_err = err;
				}
				err = NULL;
				continue;
			}
			if (!r->running)
				continue;
			running++;
			r->waited = true;
			r->fd_first = nr_fds;
			r->nr_fds = ivm_profiler_pollfds(r->pr, fds + nr_fds,
							 sizeof(fds) / sizeof(fds[0]) - nr_fds);
			nr_fds += r->nr_fds;
			if (ivm_profiler_wake_at(r->pr) < wake)
				wake = ivm_profiler_wake_at(r->pr);
		}
		if (stop_requested || (o.end_ns && ivm_mono_ns() >= o.end_ns)) {
			if (!running)
				break;
		} else if (!running && !all_domains) {
			break;
		}
		if (all_domains && next_scan < wake)
			wake = next_scan;
		if (o.end_ns && o.end_ns < wake)
			wake = o.end_ns;
		ivm_profiler_wait(fds, nr_fds, wake);
	}
	if (rt)
		ivm_realtime(false);
	if (o.several) {
		double secs = (double)(ivm_mono_ns() - t0) / 1e9, cpu;
		uint64_t in_runs = 0;

		for (i = 0; i < nr_runs; i++)
			in_runs += runs[i].res.cpu_ns;
		getrusage(RUSAGE_SELF, &ru);
		cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		      (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
		fprintf(stderr, "idlevm: %zu guests over %.1f s: host CPU %.2f s (%.1f%% of a core), %.2f s of it in the guests' runs\n",
			nr_runs, secs, cpu, secs > 0 ? 100.0 * cpu / secs : 0,
			(double)in_runs / 1e9);
	}
	for (i = 0; i < nr_runs; i++)
		free(runs[i].name);
	if (first_err)
		return ivm_error_report(first_err);
	if (!report)
		return 0;
	return ivm_report_file(o.output, false, &ropts,
			       IVM_CALLTREE_BY_PROCESS | IVM_CALLTREE_BY_THREAD);

bad_value:
	fprintf(stderr, "idlevm profile: bad value '%s' for %s\n", optarg,
		argv[optind - 1]);
	return 2;
}
