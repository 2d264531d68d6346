// SPDX-License-Identifier: MIT
/*
 * idlevm profile: sample a running guest's idle transitions into a profile
 * file, then print its report.
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
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
#include "base/fd_limit.h"
#include "cmd/commands.h"
#include "cmd/profile_runs.h"

volatile sig_atomic_t profile_stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	profile_stop_requested = 1;
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
"      --no-idle-gate     wake idlevm at every sleep of a vCPU thread (TCG,\n"
"                         sched source), not only at those after which the\n"
"                         guest switched: no BPF program in the host kernel\n"
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

/* How often --all-domains looks for domains that started. */
#define SCAN_NS 5000000000ull

/*
 * How often the heap's free pages go back to the kernel.  free() gives
 * back only the top of glibc's heap; a long run's churn (each window's
 * tables, the trace reads' buffers, address spaces aged out) leaves whole
 * free pages below live blocks, resident for as long as the run.
 * malloc_trim(0) returns every whole free page (MADV_DONTNEED), so RSS
 * follows what the run holds; it costs a walk of the free lists.
 */
#define HEAP_TRIM_NS 60000000000ull

/*
 * How long a domain that could not be profiled waits to be tried again:
 * one that boots is usable within seconds, and a try costs a few
 * milliseconds of libvirt and guest reads, so 1 s, doubling up to 5 s.
 * One left out for want of a slot waits RETRY_FULL_NS.
 */
#define RETRY_FIRST_NS 1000000000ull
#define RETRY_MAX_NS 5000000000ull
#define RETRY_FULL_NS 15000000000ull

/* A domain --all-domains could not profile, and when to try it again. */
struct not_yet {
	char name[256];
	uint64_t retry_at, retry_ns;
};

/*
 * --all-domains: start a run for each running domain (matching glob) not
 * profiled yet.  A domain that cannot be profiled (one still booting has
 * no kernel to find yet) is said once and tried again, backing off from
 * RETRY_FIRST_NS to RETRY_MAX_NS.  Returns when the next try of a running
 * domain is due (UINT64_MAX: none): the scan is due then.
 */
static uint64_t scan_domains(struct guest_run *runs, size_t *nr,
			     const struct profile_opts *o, const char *glob,
			     struct not_yet *later, size_t *nr_later, bool rt,
			     unsigned long *list_failures)
{
	uint64_t now = ivm_mono_ns(), due = UINT64_MAX;
	struct ivm_error *err;
	char **names;
	size_t n, i, k;

	/* libvirtd away: said once, not at every scan, and when it is back. */
	err = ivm_libvirt_running_domains(o->gopts.connect_uri, &names, &n);
	if (err) {
		if (!(*list_failures)++)
			fprintf(stderr, "idlevm: %s: no new domain is joined until libvirt answers again (said once)\n",
				ivm_error_string(err));
		ivm_error_destroy(err);
		return due;
	}
	if (*list_failures) {
		fprintf(stderr, "idlevm: libvirt answers again: new domains are joined (%lu scans failed meanwhile)\n",
			*list_failures);
		*list_failures = 0;
	}
	for (i = 0; i < n; i++) {
		struct not_yet *ny = NULL;
		struct guest_run *r;

		if ((glob && fnmatch(glob, names[i], 0)) ||
		    guest_runs_profile(runs, *nr, names[i]) ||
		    strlen(names[i]) >= sizeof(ny->name))
			continue;
		for (k = 0; k < *nr_later && !ny; k++)
			if (!strcmp(later[k].name, names[i]))
				ny = &later[k];
		if (ny && now < ny->retry_at) {
			due = ny->retry_at < due ? ny->retry_at : due;
			continue;
		}
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
				ny->retry_at = now + RETRY_FULL_NS;
				due = ny->retry_at < due ? ny->retry_at : due;
			}
			continue;
		}
		r = &runs[k];
		if (k < *nr)
			free(r->name);
		err = guest_run_start(r, o, names[i]);
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
			fprintf(stderr, "idlevm: %s: %s (trying again after %llu s, then up to every %llu s)\n",
				names[i], ivm_error_string(err),
				RETRY_FIRST_NS / 1000000000ull,
				RETRY_MAX_NS / 1000000000ull);
		ivm_error_destroy(err);
		guest_run_release(r);
		ivm_window_run_deinit(&r->windows);
		free(r->name);
		r->name = NULL;
		if (k == *nr)
			memset(r, 0, sizeof(*r));
		if (!ny && *nr_later < MAX_GUESTS) {
			ny = &later[(*nr_later)++];
			snprintf(ny->name, sizeof(ny->name), "%s", names[i]);
			ny->retry_ns = 0;
		}
		if (ny) {
			ny->retry_ns = !ny->retry_ns ? RETRY_FIRST_NS :
				       ny->retry_ns * 2 > RETRY_MAX_NS ?
				       RETRY_MAX_NS : ny->retry_ns * 2;
			ny->retry_at = ivm_mono_ns() + ny->retry_ns;
			due = ny->retry_at < due ? ny->retry_at : due;
		}
	}
	ivm_libvirt_free_names(names, n);
	return due;
}

int ivm_cmd_profile(int argc, char **argv)
{
	enum { OPT_IDLE_EVERY = 256, OPT_POLL, OPT_SOURCE, OPT_CAPTURE,
	       OPT_REALTIME, OPT_NO_REALTIME, OPT_DISK, OPT_NO_IDLE_GATE,
	       OPT_CPU_BUDGET,
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
		{ "no-idle-gate", no_argument, NULL, OPT_NO_IDLE_GATE },
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
	unsigned long list_failures = 0;
	struct pollfd fds[MAX_GUESTS * IVM_PROFILER_MAX_POLLFDS + 1];
	bool polled;	/* fds' revents are the last wait's */
	struct ivm_error *err = NULL, *first_err = NULL;
	struct ivm_label_spec labels[IVM_LABELS_MAX];
	size_t nr_labels = 0;
	struct sigaction sa;
	char symdir_buf[PATH_MAX];
	const char *symdir = NULL;
	bool report = true, output_given = false, all_domains = false;
	bool rt = false, budget_given = false;
	uint64_t size, next_scan = 0, next_trim, t0;
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
		case OPT_NO_IDLE_GATE:
			o.cfg.no_idle_gate = true;
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
	/* Each guest's sessions: a descriptor per host CPU (fd_limit.h). */
	ivm_fd_limit_raise();

	if (all_domains) {
		fprintf(stderr, "idlevm: profiling every running domain%s%s, and those that start\n",
			glob ? " matching " : "", glob ? glob : "");
	} else {
		for (i = 0; i < (nr_domains ? nr_domains : 1); i++) {
			err = guest_run_start(&runs[nr_runs], &o,
					nr_domains ? domains[i] : NULL);
			if (!err) {
				nr_runs++;
				continue;
			}
			if (!o.several) {
				guest_run_release(&runs[0]);
				ivm_window_run_deinit(&runs[0].windows);
				free(runs[0].name);
				return ivm_error_report(err);
			}
			/* One guest that cannot be profiled: the others can. */
			fprintf(stderr, "idlevm: %s: %s\n", domains[i],
				ivm_error_string(err));
			ivm_error_destroy(err);
			guest_run_release(&runs[nr_runs]);
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
	profile_all_runs = runs;
	profile_nr_all_runs = &nr_runs;
	polled = false;
	next_trim = ivm_mono_ns() + HEAP_TRIM_NS;
	for (;;) {
		uint64_t now = ivm_mono_ns(), wake = now + 1000000000ull;
		size_t nr_fds = 0, running = 0;

		if (all_domains && !profile_stop_requested &&
		    (!o.end_ns || now < o.end_ns) && now >= next_scan) {
			uint64_t due = scan_domains(runs, &nr_runs, &o, glob,
						    later, &nr_later, rt,
						    &list_failures);

			ivm_profiler_cpu_sync();	/* no run's cost */
			next_scan = ivm_mono_ns() + SCAN_NS;
			if (due < next_scan)
				next_scan = due;
		}
		if (now >= next_trim) {
			malloc_trim(0);
			ivm_profiler_cpu_sync();	/* no run's cost */
			next_trim = ivm_mono_ns() + HEAP_TRIM_NS;
		}
		for (i = 0; i < nr_runs; i++) {
			struct guest_run *r = &runs[i];

			if (!r->waiting)
				;
			else if (profile_stop_requested ||
				 (o.end_ns && ivm_mono_ns() >= o.end_ns))
				guest_run_stop_waiting(r, &o);
			else
				guest_run_resume(r, &o, rt);
		}
		for (i = 0; i < nr_runs; i++) {
			struct guest_run *r = &runs[i];

			/* One new since the last wait is stepped at once. */
			if (guest_run_steppable(r) &&
			    (!r->waited || guest_run_step_due(r, fds, r->fd_first,
						    r->nr_fds, ivm_mono_ns()))) {
				/* Its empty buffers need no read. */
				if (r->waited && polled)
					ivm_profiler_polled(r->pr,
							    fds + r->fd_first,
							    r->nr_fds);
				guest_run_step(r);
			}
			/* Its windows' pprofs: one done, one waiting a turn. */
			if (r->windows.report || r->windows.pending)
				ivm_window_run_poll(&r->windows);
		}
		for (i = 0; i < nr_runs; i++) {
			struct guest_run *r = &runs[i];

			if (r->running && r->ended &&
			    guest_run_follows(r, &o, all_domains)) {
				if (!guest_run_settled(r, ivm_mono_ns())) {
					/* Why QEMU went: libvirt says soon. */
					running++;
					if (ivm_mono_ns() + 20000000ull < wake)
						wake = ivm_mono_ns() + 20000000ull;
					continue;
				}
				/* Its boot is over; the run waits for the next. */
				err = guest_run_between(r, &o);
				if (err) {
					guest_run_who(&o, r);
					fprintf(stderr, "%s\n", ivm_error_string(err));
					ivm_error_destroy(err);
					err = NULL;
				}
			}
			if (r->waiting) {
				running++;
				if (profile_stop_requested)
					wake = ivm_mono_ns();	/* ended next */
				else if (r->g && ivm_mono_ns() + 100000000ull < wake)
					wake = ivm_mono_ns() + 100000000ull;
				else if (!r->g && r->retry_at < wake)
					wake = r->retry_at;
				continue;
			}
			if (r->running && r->ended) {
				/* This guest's run is over; the others go on. */
				err = guest_run_end(r, &o, r->end_err);
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
			guest_run_monitor_news(r, &o);
			running++;
			r->waited = true;
			r->fd_first = nr_fds;
			r->nr_fds = ivm_profiler_pollfds(r->pr, fds + nr_fds,
							 sizeof(fds) / sizeof(fds[0]) - nr_fds);
			nr_fds += r->nr_fds;
			if (ivm_profiler_wake_at(r->pr) < wake)
				wake = ivm_profiler_wake_at(r->pr);
		}
		if (profile_stop_requested || (o.end_ns && ivm_mono_ns() >= o.end_ns)) {
			if (!running)
				break;
		} else if (!running && !all_domains) {
			break;
		}
		if (all_domains && next_scan < wake)
			wake = next_scan;
		if (o.end_ns && o.end_ns < wake)
			wake = o.end_ns;
		polled = ivm_profiler_wait(fds, nr_fds, wake);
	}
	if (rt)
		ivm_realtime(false);
	if (o.several) {
		double secs = (double)(ivm_mono_ns() - t0) / 1e9, cpu;
		uint64_t in_runs = 0;
		size_t heap = 0;

		for (i = 0; i < nr_runs; i++) {
			in_runs += runs[i].res.cpu_ns;
			if (runs[i].heap_end > heap)
				heap = runs[i].heap_end;
		}
		getrusage(RUSAGE_SELF, &ru);
		cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		      (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
		fprintf(stderr, "idlevm: %zu guests over %.1f s: host CPU %.2f s (%.1f%% of a core), %.2f s of it in the guests' runs; heap at most %.1f MiB as a run ended, peak RSS %.1f MiB\n",
			nr_runs, secs, cpu, secs > 0 ? 100.0 * cpu / secs : 0,
			(double)in_runs / 1e9,
			(double)heap / (1024.0 * 1024.0),
			(double)ru.ru_maxrss / 1024);
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
