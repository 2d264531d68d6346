// SPDX-License-Identifier: MIT
/*
 * idlevm profile: sample a running guest's idle transitions into a profile
 * file, then print its report.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
"usage: idlevm profile (--domain NAME | --qmp PATH) [options]\n"
"\n"
"Record the guest stacks that ran just before each vCPU went idle (to-idle)\n"
"and just after it woke (from-idle), plus on-CPU ticks, into a profile file;\n"
"then print its report.  Ctrl-C stops early and keeps everything collected.\n"
"\n"
IVM_GUEST_USAGE
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
"      --no-realtime      keep normal scheduling priority; by default the\n"
"                         sched source waits for events at real-time\n"
"                         priority (SCHED_FIFO 1), so that it looks at a\n"
"                         halted vCPU before it wakes on a loaded host\n"
"      --realtime         the default, said explicitly\n"
"      --registers SRC    where on-CPU and from-idle samples take the vCPU's\n"
"                         registers: auto (default: QEMU's memory under TCG,\n"
"                         else the monitor), memory, or monitor (HMP `info\n"
"                         registers`; costs a TCG guest about 0.1 %% per Hz)\n"
"      --capture MODE     auto (default: pin when the guest helper answers,\n"
"                         else optimistic), pin (the helper holds the idle\n"
"                         vCPU and pins the target to it while its stack is\n"
"                         read), optimistic (read and validate) or stop (QMP\n"
"                         stop/cont around the read)\n"
"      --helper-socket PATH  the helper's socket (default: the domain's\n"
"                         helper channel, or helper.sock beside --qmp)\n"
"      --pin-lease MS     lease of each pin (default %d; a hold gets half)\n"
"      --pin-policy P     rescue (default: read unpinned first, pin only a\n"
"                         target found woken) or always (pin every target\n"
"                         not on a vCPU)\n"
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
"      --output-dir DIR   where windows go: DIR/NAME-YYYYmmddTHHMMSSZ.prof\n"
"                         and .pb.gz (NAME: the guest's, START in UTC)\n"
"      --keep N           keep the N newest windows of this guest in DIR\n"
"                         (default 1440; 0: all), oldest removed first\n"
"      --keep-bytes SIZE  and at most SIZE bytes of them (K, M, G; default\n"
"                         no limit); the newest window is always kept\n"
"      --no-pprof         windows: leave the pprof to whoever reads them\n"
"  -h, --help             this help\n", IVM_PIN_LEASE_DEFAULT_MS,
		IVM_SWITCH_BATCH_DEFAULT,
		(double)IVM_SWITCH_INTERVAL_DEFAULT_NS / 1e6, IVM_LABELS_MAX);
}

/* What each --label read: values, "?" (and why the last one was). */
static void print_label_stats(const struct ivm_label_spec *labels, size_t n,
			      const struct ivm_profiler_result *res)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct ivm_label_stats *st = &res->labels[i];
		uint64_t all = st->read + st->unreadable;

		fprintf(stderr,
			"idlevm: label %s: %" PRIu64 " samples with a value, %"
			PRIu64 " unreadable ('?', %.1f%%)%s%s, %" PRIu64
			" samples of processes without %s\n",
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

int ivm_cmd_profile(int argc, char **argv)
{
	enum { OPT_IDLE_EVERY = 256, OPT_POLL, OPT_SOURCE, OPT_CAPTURE,
	       OPT_REALTIME, OPT_NO_REALTIME,
	       OPT_COMM, OPT_NO_REPORT, OPT_BINARY, OPT_HELPER_SOCKET,
	       OPT_PIN_LEASE, OPT_PIN_POLICY, OPT_SYMDIR, OPT_REGISTERS,
	       OPT_WINDOW, OPT_OUTPUT_DIR, OPT_KEEP, OPT_KEEP_BYTES,
	       OPT_NO_PPROF, OPT_SWITCH_EVERY, OPT_SWITCH_BATCH,
	       OPT_SWITCH_INTERVAL, OPT_LABEL };
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
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
		{ "keep", required_argument, NULL, OPT_KEEP },
		{ "keep-bytes", required_argument, NULL, OPT_KEEP_BYTES },
		{ "no-pprof", no_argument, NULL, OPT_NO_PPROF },
		{ "switch-every", required_argument, NULL, OPT_SWITCH_EVERY },
		{ "switch-batch", required_argument, NULL, OPT_SWITCH_BATCH },
		{ "switch-interval", required_argument, NULL,
		  OPT_SWITCH_INTERVAL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_profiler_config cfg = {
		.frequency_hz = 99, .idle_every = 1, .poll_interval_ms = 1,
		.realtime = true,
		.idle_source = IVM_IDLE_SOURCE_THREAD,
		.capture_mode = IVM_CAPTURE_MODE_PIN, .filter_pid = -1,
	};
	struct ivm_guest_options gopts = { 0 };
	struct ivm_report_options ropts = { .out = stdout, .kind = -1,
					    .top = 5 };
	const char *output = "idlevm.prof";
	const char *binaries[16];
	size_t nr_binaries = 0;
	struct ivm_label_spec labels[IVM_LABELS_MAX];
	size_t nr_labels = 0;
	struct ivm_profiler_result res;
	struct ivm_profile_writer *writer;
	struct sigaction sa;
	struct ivm_guest *g;
	struct ivm_error *err;
	const char *helper_socket = NULL;
	char symdir_buf[PATH_MAX];
	const char *symdir = NULL;
	unsigned int pin_lease = IVM_PIN_LEASE_DEFAULT_MS;
	enum ivm_pin_policy pin_policy = IVM_PIN_RESCUE;
	struct ivm_pin_capture *pin = NULL;
	enum { REGS_AUTO, REGS_MEMORY, REGS_MONITOR } regs_source = REGS_AUTO;
	struct ivm_tcg_env *tcg_env = NULL;
	bool report = true, auto_source = true, kvm = false;
	/* Continuous windows (--window, --output-dir). */
	struct ivm_window_dir_config wcfg = { .keep_windows = 1440 };
	struct ivm_window_run windows = { 0 };
	bool output_given = false, window_pprof = true;
	uint64_t size;
	double d;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "o:D:F:p:h",
				longopts, NULL)) != -1) {
		if (ivm_guest_parse_option(&gopts, c, optarg))
			continue;
		switch (c) {
		case 'o':
			output = optarg;
			output_given = true;
			break;
		case OPT_WINDOW:
			if (!parse_double(optarg, &cfg.window_s) ||
			    cfg.window_s < 1)
				goto bad_value;
			break;
		case OPT_OUTPUT_DIR:
			wcfg.dir = optarg;
			break;
		case OPT_KEEP:
			if (!parse_size(optarg, &size) || strpbrk(optarg, "KkMmGg"))
				goto bad_value;
			wcfg.keep_windows = size;
			break;
		case OPT_KEEP_BYTES:
			if (!parse_size(optarg, &size) || !size)
				goto bad_value;
			wcfg.keep_bytes = size;
			break;
		case OPT_NO_PPROF:
			window_pprof = false;
			break;
		case 'D':
			if (!parse_double(optarg, &cfg.duration_s))
				goto bad_value;
			break;
		case 'F':
			if (!parse_double(optarg, &cfg.frequency_hz) ||
			    cfg.frequency_hz > 10000)
				goto bad_value;
			break;
		case OPT_IDLE_EVERY:
			if (!parse_double(optarg, &d) || d > 1e6)
				goto bad_value;
			cfg.idle_every = (uint32_t)d;
			break;
		case OPT_POLL:
			if (!parse_double(optarg, &cfg.poll_interval_ms) ||
			    cfg.poll_interval_ms < 0.1 ||
			    cfg.poll_interval_ms > 1000)
				goto bad_value;
			break;
		case OPT_REALTIME:
			cfg.realtime = true;
			break;
		case OPT_NO_REALTIME:
			cfg.realtime = false;
			break;
		case OPT_SOURCE:
			auto_source = false;
			if (!strcmp(optarg, "auto"))
				auto_source = true;
			else if (!strcmp(optarg, "thread"))
				cfg.idle_source = IVM_IDLE_SOURCE_THREAD;
			else if (!strcmp(optarg, "qmp"))
				cfg.idle_source = IVM_IDLE_SOURCE_QMP;
			else if (!strcmp(optarg, "kvm"))
				cfg.idle_source = IVM_IDLE_SOURCE_KVM;
			else if (!strcmp(optarg, "sched"))
				cfg.idle_source = IVM_IDLE_SOURCE_SCHED;
			else
				goto bad_value;
			break;
		case OPT_CAPTURE:
			if (!strcmp(optarg, "auto") || !strcmp(optarg, "pin"))
				cfg.capture_mode = IVM_CAPTURE_MODE_PIN;
			else if (!strcmp(optarg, "optimistic"))
				cfg.capture_mode = IVM_CAPTURE_MODE_OPTIMISTIC;
			else if (!strcmp(optarg, "stop"))
				cfg.capture_mode = IVM_CAPTURE_MODE_STOP;
			else
				goto bad_value;
			break;
		case OPT_REGISTERS:
			if (!strcmp(optarg, "auto"))
				regs_source = REGS_AUTO;
			else if (!strcmp(optarg, "memory"))
				regs_source = REGS_MEMORY;
			else if (!strcmp(optarg, "monitor"))
				regs_source = REGS_MONITOR;
			else
				goto bad_value;
			break;
		case OPT_HELPER_SOCKET:
			helper_socket = optarg;
			break;
		case OPT_PIN_LEASE:
			if (!parse_double(optarg, &d) || d < 1 ||
			    d > IVM_PROTO_LEASE_MAX_MS)
				goto bad_value;
			pin_lease = (unsigned int)d;
			break;
		case OPT_PIN_POLICY:
			if (!strcmp(optarg, "always"))
				pin_policy = IVM_PIN_ALWAYS;
			else if (!strcmp(optarg, "rescue"))
				pin_policy = IVM_PIN_RESCUE;
			else
				goto bad_value;
			break;
		case OPT_SWITCH_EVERY:
			if (!parse_double(optarg, &d) || d < 1 || d > 1e9 ||
			    d != (uint32_t)d)
				goto bad_value;
			cfg.switch_every = (uint32_t)d;
			break;
		case OPT_SWITCH_BATCH:
			if (!parse_double(optarg, &d) || d < 1 || d > 65536 ||
			    d != (uint32_t)d)
				goto bad_value;
			cfg.switch_batch = (uint32_t)d;
			break;
		case OPT_SWITCH_INTERVAL:
			if (!parse_double(optarg, &cfg.switch_interval_ms) ||
			    cfg.switch_interval_ms < 0.1 ||
			    cfg.switch_interval_ms > 10000)
				goto bad_value;
			break;
		case 'p':
			if (!parse_double(optarg, &d) || d > 4194304)
				goto bad_value;
			cfg.filter_pid = (int)d;
			break;
		case OPT_COMM:
			cfg.filter_comm = optarg;
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
		case OPT_LABEL: {
			size_t i;

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
		}
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
	if (gopts.core_path) {
		fprintf(stderr, "idlevm profile: needs a live guest (--domain or --qmp), not --core\n");
		return 2;
	}
	err = ivm_guest_check_options(&gopts);
	if (err) {
		fprintf(stderr, "idlevm profile: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		return 2;
	}
	if ((cfg.window_s > 0) != !!wcfg.dir) {
		fprintf(stderr, "idlevm profile: --window and --output-dir go together\n");
		return 2;
	}
	if (wcfg.dir && output_given) {
		fprintf(stderr, "idlevm profile: -o or --output-dir, not both\n");
		return 2;
	}
	cfg.status_line = isatty(STDERR_FILENO);
	cfg.binaries = binaries;
	cfg.nr_binaries = nr_binaries;
	cfg.symdir = symdir;
	cfg.labels = labels;
	cfg.nr_labels = nr_labels;
	if (nr_binaries)
		ropts.binary = binaries[0];
	ropts.binaries = binaries;
	ropts.nr_binaries = nr_binaries;
	ropts.symdir = symdir;

	err = ivm_guest_open(&gopts, &g);
	if (err)
		return ivm_error_report(err);
	ivm_error_destroy(ivm_guest_uses_kvm(g, &kvm));
	/*
	 * The host scheduler's events on the vCPU threads mark every halt
	 * and wakeup, under TCG and KVM alike (kvm_exit adds the exit reason
	 * on KVM); without a usable tracefs, the profiler polls the threads
	 * instead and says so.
	 */
	if (auto_source) {
		cfg.idle_source = IVM_IDLE_SOURCE_SCHED;
		cfg.source_fallback = true;
	}
	err = NULL;
	if (regs_source == REGS_MEMORY && kvm)
		err = ivm_error_create(IVM_ERROR_INVALID,
				       "--registers memory needs a guest under TCG, and %s runs on KVM",
				       g->name);
	else if (regs_source != REGS_MONITOR && !kvm)
		err = ivm_tcg_env_locate(g->qemu_pid, g->qmp, &tcg_env);
	if (err && regs_source == REGS_MEMORY) {
		ivm_guest_close(g);
		return ivm_error_report(err);
	}
	if (err) {
		/* Slower, but it works: say so and go on. */
		fprintf(stderr,
			"idlevm: warning: registers through the monitor (%s)\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
	}
	cfg.tcg_env = tcg_env;
	if (cfg.capture_mode == IVM_CAPTURE_MODE_PIN) {
		/*
		 * Pin needs the helper: one HELLO within a short timeout
		 * says whether it is there.  Without it, auto and pin alike
		 * go on optimistic, saying why; a profiler that refused to
		 * run would help nobody, and the mode is printed below.
		 */
		err = ivm_pin_capture_create(g, helper_socket, gopts.qmp_path,
					     IVM_PIN_TIMEOUT_DEFAULT_MS,
					     pin_lease, &pin);
		if (err) {
			fprintf(stderr,
				"idlevm: warning: no pin capture (%s), capturing optimistic\n",
				ivm_error_string(err));
			ivm_error_destroy(err);
			cfg.capture_mode = IVM_CAPTURE_MODE_OPTIMISTIC;
		} else {
			ivm_pin_capture_set_policy(pin, pin_policy);
		}
		cfg.pin = pin;
	}
	if (wcfg.dir) {
		/* Windows: each a whole profile, the first one opened here. */
		wcfg.name = g->name;
		err = ivm_window_run_init(&windows, &wcfg, window_pprof);
		if (!err)
			err = ivm_window_run_open(&windows, &writer);
		if (!err) {
			output = windows.path;
			cfg.next_window = ivm_window_run_next;
			cfg.window_ctx = &windows;
			report = false;
		}
	} else {
		err = ivm_profile_writer_create(output, &writer);
	}
	if (err) {
		ivm_window_run_deinit(&windows);
		ivm_pin_capture_destroy(pin);
		ivm_tcg_env_destroy(tcg_env);
		ivm_guest_close(g);
		return ivm_error_report(err);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: Ctrl-C must cut the poll sleep short. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	fprintf(stderr,
		"idlevm: profiling %s (kernel %s, %zu vCPUs): idle source %s%s, capture %s, registers from %s, %g Hz on-CPU, writing %s\n",
		g->name, g->release, g->nr_vcpus,
		ivm_idle_source_name(cfg.idle_source),
		cfg.source_fallback ? " (thread if tracefs is not usable)" : "",
		ivm_capture_mode_name(cfg.capture_mode),
		tcg_env ? "qemu memory" : "the monitor", cfg.frequency_hz,
		output);
	if (wcfg.dir)
		fprintf(stderr, "idlevm: one window every %g s in %s, keeping %" PRIu64 " windows (0: all) and %" PRIu64 " bytes (0: any)\n",
			cfg.window_s, wcfg.dir, wcfg.keep_windows,
			wcfg.keep_bytes);
	err = ivm_profile_guest(g, &cfg, writer, &stop_requested, &res);
	/* Before the guest: closing the channel ends any lease left. */
	ivm_pin_capture_destroy(pin);
	ivm_tcg_env_destroy(tcg_env);
	ivm_guest_close(g);
	if (wcfg.dir) {
		/* The last window is whole now (or cut short by an error). */
		ivm_window_run_finished(&windows);
		if (windows.report)
			fprintf(stderr, "idlevm: making the last window's pprof\n");
		ivm_window_run_deinit(&windows);
		fprintf(stderr, "idlevm: %u windows in %s (%u pprof made, %u failed); %zu old windows removed by --keep\n",
			windows.windows, wcfg.dir, windows.pprofs,
			windows.pprof_failures, windows.pruned);
	}
	if (err)
		return ivm_error_report(err);
	fprintf(stderr,
		"idlevm: stopped after %.1f s (%s): %" PRIu64 " to_idle, %" PRIu64
		" from_idle, %" PRIu64 " on_cpu samples; discarded %" PRIu64
		" (target ran during the read) + %" PRIu64
		" (target runnable); lost %" PRIu64
		" (capture busy) + %" PRIu64 " (target missed); %" PRIu64
		" idle periods too short to see\n",
		res.elapsed_s, res.end_reason, res.kept[IVM_SAMPLE_TO_IDLE],
		res.kept[IVM_SAMPLE_FROM_IDLE], res.kept[IVM_SAMPLE_ON_CPU],
		res.outcomes[IVM_CAPTURE_DISCARDED_RAN],
		res.outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE],
		res.dispatch.lost_busy, res.dispatch.lost_missed,
		res.dispatch.missed_idle);
	print_label_stats(labels, nr_labels, &res);
	fprintf(stderr,
		"idlevm: targets read from their saved frame: %" PRIu64
		" kept, %" PRIu64 " discarded\n",
		res.blocked_outcomes[IVM_CAPTURE_KEPT],
		res.blocked_outcomes[IVM_CAPTURE_DISCARDED_RAN] +
		res.blocked_outcomes[IVM_CAPTURE_DISCARDED_RUNNABLE]);
	if (res.objects.objects)
		fprintf(stderr,
			"idlevm: user objects: %zu, unwound by the CFI the guest holds: %zu; CFI rows: %"
			PRIu64 " looked up, %" PRIu64
			" read from the file's page cache (not the process's page tables), %"
			PRIu64 " whose bytes the guest did not hold\n",
			res.objects.objects, res.objects.with_image,
			res.objects.row_lookups,
			res.objects.row_page_cache +
			res.objects.row_other_mapping,
			res.objects.row_faults);
	if ((res.to_idle_resolved || res.to_idle_unresolved) &&
	    res.idle_source != IVM_IDLE_SOURCE_SCHED)
		fprintf(stderr,
			"idlevm: to-idle targets the poll could not be sure of: %" PRIu64
			" found in guest memory (%" PRIu64
			" not the task last seen, %" PRIu64
			" in idle periods between two polls), %" PRIu64
			" not found\n",
			res.to_idle_resolved, res.to_idle_retargeted,
			res.dispatch.unseen_to_idle, res.to_idle_unresolved);
	fprintf(stderr,
		"idlevm: idle source %s: %" PRIu64 " idle periods seen (%" PRIu64
		" ended, recorded), %" PRIu64
		" came and went unseen (%" PRIu64
		" rebuilt from the guest scheduler's stamps); %" PRIu64
		" vCPU-thread sleeps (%" PRIu64
		" idle, %" PRIu64 " not idle: QEMU lock or I/O), %" PRIu64
		" trace records read, %" PRIu64 " trace events lost%s\n",
		ivm_idle_source_name(res.idle_source), res.idle.periods_seen,
		res.periods_written, res.idle.unseen_periods,
		res.idle.recovered_periods, res.idle.host_sleeps, res.idle.host_sleeps_idle,
		res.idle.host_sleeps_busy, res.trace_records,
		res.idle.lost_events,
		res.realtime ? "; waited at real-time priority" : "");
	if (cfg.capture_mode == IVM_CAPTURE_MODE_PIN)
		fprintf(stderr,
			"idlevm: pin: %" PRIu64 " pinned, %" PRIu64
			" held only, %" PRIu64 " unneeded, %" PRIu64
			" skipped, %" PRIu64
			" refused, %" PRIu64 " ran before the pin, %" PRIu64
			" lease expired, %" PRIu64 " pin_failed (helper lost), %"
			PRIu64 " unpinned after it; mean round trips: hold+pin %.2f ms, unpin+release %.2f ms\n",
			res.pin.ok, res.pin.hold_only, res.pin.unneeded,
			res.pin.skipped,
			res.pin.refused, res.pin.ran_before_pin,
			res.pin.lease_expired, res.pin.failed, res.pin.unpinned,
			mean_ms(res.pin.pin_ns, res.pin.ok + res.pin.hold_only +
						res.pin.refused),
			mean_ms(res.pin.restore_ns, res.pin.ok +
						    res.pin.hold_only));
	if (cfg.capture_mode == IVM_CAPTURE_MODE_PIN &&
	    (res.pin.readaheads || res.pin.readahead_failed))
		fprintf(stderr,
			"idlevm: CFI the guest did not hold, read into its page cache by the helper: %"
			PRIu64 " files, %.1f KiB, %.0f ms; %" PRIu64
			" refused or failed\n",
			res.pin.readaheads,
			(double)res.pin.readahead_bytes / 1024,
			(double)res.pin.readahead_ns / 1e6,
			res.pin.readahead_failed);
	if (cfg.switch_every) {
		const struct ivm_switch_sampler_stats *ss = &res.switches;

		fprintf(stderr,
			"idlevm: switch sampling every %u switches: %" PRIu64
			" threads watched (%" PRIu64 " met, %" PRIu64
			" gone, %" PRIu64 " past the cap); %" PRIu64
			" crossings, %" PRIu64 " samples kept, %" PRIu64
			" discarded (the thread ran during the read), %" PRIu64
			" capture failed; %" PRIu64 " looks, %.1f us each (max %.1f us), %" PRIu64
			" sweeps of the task lists (%" PRIu64 " cut short)\n",
			cfg.switch_every, ss->watched, ss->threads_met,
			ss->gone, ss->unwatched, ss->crossings,
			res.kept[IVM_SAMPLE_SWITCH], ss->discarded,
			ss->capture_failed, ss->looks,
			ss->looks ? (double)ss->look_ns / 1e3 /
				    (double)ss->looks : 0.0,
			(double)ss->look_max_ns / 1e3, ss->sweeps,
			ss->sweeps_truncated);
	}
	if (!report)
		return 0;
	return ivm_report_file(output, false, &ropts,
			       IVM_CALLTREE_BY_PROCESS | IVM_CALLTREE_BY_THREAD);

bad_value:
	fprintf(stderr, "idlevm profile: bad value '%s' for %s\n", optarg,
		argv[optind - 1]);
	return 2;
}
