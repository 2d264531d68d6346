// SPDX-License-Identifier: MIT
/*
 * idlevm report FILE: read a profile (complete, cut short or damaged) and
 * print the idle report.  It always says what it could not read.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/outfile.h"
#include "report/calltree.h"
#include "cmd/commands.h"
#include "profile/profile_file.h"
#include "profile/labels.h"
#include "profile/proc_info.h"
#include "report/frame_names.h"
#include "report/report.h"
#include "report/mappings.h"
#include "report/report_pprof.h"
#include "report/report_svg.h"
#include "report/idle_summary.h"
#include "report/threads.h"
#include "report/cause_labels.h"
#include "report/timeline.h"
#include "report/why_idle.h"
#include "syms.h"

static void report_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm report [options] FILE\n"
"\n"
"Print the call tree of a profile recorded by 'idlevm profile'.\n"
"\n"
"  -f, --format FMT   text (default), folded (FlameGraph, speedscope),\n"
"                     pprof (gzipped profile.proto; labels wake and\n"
"                     host_wake: why idle), svg (flame graph),\n"
"                     timeline (Chrome trace-event JSON for Perfetto or\n"
"                     chrome://tracing, one track per vCPU and beside it\n"
"                     the host's steal, and its disk service; with\n"
"                     -o F.json also F.html, a self-contained SVG\n"
"                     timeline),\n"
"                     periods (one tab-separated line per idle period) or\n"
"                     threads (one line per guest thread over the run:\n"
"                     switches, run delay, CPU time, switch samples; a\n"
"                     profile taken with --switch-every)\n"
"      --sort COLUMN  threads: sort by " IVM_THREADS_SORT_NAMES "\n"
"                     (default switches)\n"
"  -o, --output FILE  write the report there (default: standard output)\n"
"  -k, --vmlinux FILE guest kernel debuginfo (default: the one the profile names)\n"
"  -m, --system-map FILE  kernel symbols when the vmlinux is missing or wrong\n"
"  -b, --binary FILE  symbols for user frames (a static guest binary);\n"
"                     repeat for more binaries\n"
"  -s, --symdir DIR   debug files by build-id (DIR/.build-id/xx/rest.debug)\n"
"                     and binaries by name\n"
"  -M, --module-dir DIR  kernel module debug files under DIR/lib/modules/RELEASE\n"
"                     (default: next to the vmlinux, else /usr/lib/debug)\n"
"  -a, --address ADDR print what kernel address ADDR (as the guest ran it)\n"
"                     was, instead of the report; repeatable\n"
"  -K, --kind KIND    to_idle, from_idle, on_cpu, switch or all (default all)\n"
"  -n, --top N        stacks per kind in the text report (default 10)\n"
"  -V, --value V      what stacks weigh: count (samples, the default),\n"
"                     idle_time (to-idle stacks by how long the idle\n"
"                     period they began lasted) or wake_delay (from-idle\n"
"                     stacks by how long the host took to run the vCPU\n"
"                     after its wakeup); pprof always has both as sample\n"
"                     types idle_ns and host_wake_ns\n"
"      --no-threads   group by process only, not by thread\n"
"  -q, --quiet        with a format other than text, no account of the run\n"
"                     on stderr (its losses and damage are still said)\n"
"  -g, --group-by G   the tree's top level: thread (process, then thread;\n"
"                     the default), process, comm (all processes of one\n"
"                     name), title (processes by command line, as ps shows\n"
"                     it) or label:KEY (the value of label KEY, a --label\n"
"                     of the profile)\n"
"  -h, --help         this help\n");
}

static int parse_kind(const char *s)
{
	int k;

	if (!strcmp(s, "all"))
		return -1;
	for (k = 0; k < IVM_SAMPLE_NR_KINDS; k++)
		if (!strcmp(s, ivm_sample_kind_name(k)))
			return k;
	return -2;
}

#define MAX_BINARIES	16
#define MAX_ADDRESSES	256


/*
 * --address: what each kernel address is, in the profile's guest (its
 * kernel and modules), one line per frame, innermost first.
 */
static void print_addresses(const struct ivm_report_options *opts,
			    struct ivm_syms *syms)
{
	size_t i;
	unsigned int k;

	for (i = 0; i < opts->nr_addresses; i++) {
		const struct ivm_sym_location *loc = NULL;

		if (syms)
			loc = ivm_syms_kernel(syms, opts->addresses[i]);
		if (!loc || loc->source == IVM_SYM_SOURCE_NONE ||
		    !loc->nr_frames) {
			fprintf(opts->out, "0x%016" PRIx64 "  ?\n",
				opts->addresses[i]);
			continue;
		}
		for (k = 0; k < loc->nr_frames; k++) {
			const struct ivm_sym_frame *f = &loc->frames[k];

			if (k)
				fprintf(opts->out, "%20s", "");
			else
				fprintf(opts->out, "0x%016" PRIx64 "  ",
					opts->addresses[i]);
			fprintf(opts->out, "%s", f->function ? f->function : "?");
			/* The offset is the outermost function's. */
			if (k + 1 == loc->nr_frames)
				fprintf(opts->out, "+0x%" PRIx64, loc->offset);
			if (f->file)
				fprintf(opts->out, "  %s:%u", f->file, f->line);
			fprintf(opts->out, "%s\n", f->inlined ? "  (inlined)" : "");
		}
	}
}


/*
 * When the run started (wall clock) and how long the file covers: from
 * its start to its END record, or to its last sample when it was cut
 * short.  Profiles from before "start_ns" have the start to the second
 * and cover from their first sample.
 */
static void run_of(const struct ivm_meta_lines *meta, uint64_t first_ns,
		   uint64_t last_ns, uint64_t end_ns, struct ivm_report_run *run)
{
	const char *v;
	uint64_t mono0 = first_ns;
	struct tm tm = { 0 };
	char *end;

	memset(run, 0, sizeof(*run));
	run->guest = ivm_meta_lines_value(meta, "guest");
	run->kernel = ivm_meta_lines_value(meta, "kernel");
	if ((v = ivm_meta_lines_value(meta, "idle_every")))
		run->idle_every = (uint32_t)strtoul(v, NULL, 10);
	if ((v = ivm_meta_lines_value(meta, "start_ns")))
		run->start_ns = strtoull(v, &end, 10);
	else if ((v = ivm_meta_lines_value(meta, "start")) &&
		 (end = strptime(v, "%Y-%m-%dT%H:%M:%SZ", &tm)) && !*end &&
		 timegm(&tm) > 0)
		run->start_ns = (uint64_t)timegm(&tm) * 1000000000ull;
	if ((v = ivm_meta_lines_value(meta, "start_mono_ns")))
		mono0 = strtoull(v, NULL, 10);
	if (!end_ns)
		end_ns = last_ns;
	if (mono0 && end_ns > mono0)
		run->duration_ns = end_ns - mono0;
}


/*
 * A run under --cpu-budget watched the guest only part of the time: its
 * counts, scaled by all the time over the time watched, estimate the
 * whole run's (cpu_budget.h).
 */
static void scale_watched(const struct ivm_idle_summary *idle,
			  struct ivm_calltree *tree,
			  struct ivm_report_run *run)
{
	run->scale = 1;
	if (!ivm_idle_summary_has_stat(idle, "watched_ms"))
		return;
	run->watched_ms = ivm_idle_summary_stat(idle, "watched_ms");
	run->elapsed_ms = ivm_idle_summary_stat(idle, "elapsed_ms");
	if (!run->watched_ms || run->watched_ms >= run->elapsed_ms)
		return;
	run->scale = (double)run->elapsed_ms / (double)run->watched_ms;
	ivm_calltree_scale(tree, run->scale);
}

/* Every sample the tree holds (as scaled, if it was). */
static uint64_t tree_samples(const struct ivm_calltree *tree)
{
	uint64_t n = 0;
	int k;

	for (k = 0; k < IVM_SAMPLE_NR_KINDS; k++)
		n += ivm_calltree_total(tree, k);
	return n;
}

static void log_symbols(void *ctx, const char *msg)
{
	fprintf(stderr, "idlevm report: %s\n", msg);
}

static const char *kernel_source_name(const struct ivm_syms *syms)
{
	const char *src = syms ? ivm_syms_kernel_source(syms) : NULL;

	if (!src)
		return "none (raw addresses)";
	if (!strncmp(src, "/proc/self/fd/", 14))
		return "the profile's own (the guest's kallsyms)";
	return src;
}

/*
 * The header: every item but modules, symbols and user objects, which get
 * a summary.
 */
static void print_meta(FILE *out, const struct ivm_meta_lines *m)
{
	size_t i, nr_modules = 0, nr_ksyms = 0, nr_objects = 0, nr_usyms = 0;

	for (i = 0; i < m->nr; i++) {
		if (!strncmp(m->lines[i], "module: ", 8))
			nr_modules++;
		else if (!strncmp(m->lines[i], "ksym: ", 6))
			nr_ksyms++;
		else if (!strncmp(m->lines[i], "uobject: ", 9))
			nr_objects++;
		else if (!strncmp(m->lines[i], "usym: ", 6))
			nr_usyms++;
		else if (!strncmp(m->lines[i], "module_sections: ", 17) ||
			 !strncmp(m->lines[i], "umap: ", 6) ||
			 !strncmp(m->lines[i], IVM_META_PROCESS ": ",
				  sizeof(IVM_META_PROCESS) + 1))
			continue;
		else
			/* An empty value ("vmlinux: " without one) as "-". */
			fprintf(out, "  %s%s\n", m->lines[i],
				m->lines[i][strlen(m->lines[i]) - 1] == ' ' ?
				"-" : "");
	}
	if (nr_ksyms)
		fprintf(out, "  kernel symbols carried: %zu (from the guest's kallsyms)\n",
			nr_ksyms);
	if (nr_objects)
		fprintf(out, "  user objects: %zu records, names carried: %zu (from the guest's symbol tables)\n",
			nr_objects, nr_usyms);
	if (!nr_modules)
		return;
	fprintf(out, "  modules: %zu (", nr_modules);
	for (i = 0; i < m->nr; i++) {
		const char *name = m->lines[i] + 8;

		if (strncmp(m->lines[i], "module: ", 8))
			continue;
		fprintf(out, "%.*s%s", (int)strcspn(name, " "), name,
			--nr_modules ? " " : ")\n");
	}
}


int ivm_cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "kind", required_argument, NULL, 'K' },
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "system-map", required_argument, NULL, 'm' },
		{ "binary", required_argument, NULL, 'b' },
		{ "symdir", required_argument, NULL, 's' },
		{ "module-dir", required_argument, NULL, 'M' },
		{ "address", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "top", required_argument, NULL, 'n' },
		{ "no-threads", no_argument, NULL, 'T' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "group-by", required_argument, NULL, 'g' },
		{ "sort", required_argument, NULL, 'S' },
		{ "value", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_report_options opts = { .out = stdout, .kind = -1,
					   .top = 10 };
	const char *binaries[MAX_BINARIES];
	uint64_t addresses[MAX_ADDRESSES];
	size_t nr_addresses = 0;
	unsigned int grouping = IVM_CALLTREE_BY_PROCESS | IVM_CALLTREE_BY_THREAD;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:K:k:m:b:s:M:a:o:n:g:V:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "text")) {
				opts.format = IVM_REPORT_TEXT;
			} else if (!strcmp(optarg, "folded")) {
				opts.format = IVM_REPORT_FOLDED;
			} else if (!strcmp(optarg, "pprof")) {
				opts.format = IVM_REPORT_PPROF;
			} else if (!strcmp(optarg, "svg")) {
				opts.format = IVM_REPORT_SVG;
			} else if (!strcmp(optarg, "timeline")) {
				opts.format = IVM_REPORT_TIMELINE;
			} else if (!strcmp(optarg, "periods")) {
				opts.format = IVM_REPORT_PERIODS;
			} else if (!strcmp(optarg, "threads")) {
				opts.format = IVM_REPORT_THREADS;
			} else {
				fprintf(stderr,
					"idlevm report: unknown format '%s' (text, folded, pprof, svg, timeline, periods, threads)\n",
					optarg);
				return 2;
			}
			break;
		case 'k':
			opts.vmlinux = optarg;
			break;
		case 'm':
			opts.system_map = optarg;
			break;
		case 'b':
			if (opts.nr_binaries == MAX_BINARIES) {
				fprintf(stderr, "idlevm report: at most %d binaries\n",
					MAX_BINARIES);
				return 2;
			}
			binaries[opts.nr_binaries++] = optarg;
			opts.binaries = binaries;
			break;
		case 's':
			opts.symdir = optarg;
			break;
		case 'M':
			opts.module_dir = optarg;
			break;
		case 'a':
			if (nr_addresses == MAX_ADDRESSES) {
				fprintf(stderr, "idlevm report: at most %d addresses\n",
					MAX_ADDRESSES);
				return 2;
			}
			addresses[nr_addresses] = strtoull(optarg, &end, 0);
			if (*end || !*optarg) {
				fprintf(stderr, "idlevm report: bad address '%s'\n",
					optarg);
				return 2;
			}
			nr_addresses++;
			opts.addresses = addresses;
			opts.nr_addresses = nr_addresses;
			break;
		case 'o':
			opts.output = optarg;
			break;
		case 'K':
			opts.kind = parse_kind(optarg);
			if (opts.kind == -2) {
				fprintf(stderr,
					"idlevm report: unknown kind '%s' (to_idle, from_idle, on_cpu, switch, all)\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			opts.top = (unsigned int)strtoul(optarg, &end, 10);
			if (*end || !*optarg) {
				fprintf(stderr, "idlevm report: bad --top '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'q':
			opts.quiet = true;
			break;
		case 'T':
			grouping = IVM_CALLTREE_BY_PROCESS;
			opts.group_by = IVM_GROUP_BY_PROCESS;
			break;
		case 'g': {
			struct ivm_error *err = ivm_group_by_parse(
				optarg, &opts.group_by, &opts.group_label);

			if (err) {
				fprintf(stderr, "idlevm report: %s\n",
					ivm_error_string(err));
				ivm_error_destroy(err);
				return 2;
			}
			break;
		}
		case 'S': {
			enum ivm_threads_sort sort;

			if (!ivm_threads_sort_parse(optarg, &sort)) {
				fprintf(stderr,
					"idlevm report: unknown --sort column '%s' (" IVM_THREADS_SORT_NAMES ")\n",
					optarg);
				return 2;
			}
			opts.sort = sort;
			break;
		}
		case 'V':
			if (!ivm_report_value_parse(optarg, &opts.value)) {
				fprintf(stderr,
					"idlevm report: unknown --value '%s' (count, idle_time, wake_delay)\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			report_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		report_usage(stderr);
		return 2;
	}
	/* A time value is one kind's: the report is of that kind. */
	if (opts.value != IVM_VALUE_COUNT) {
		int kind = ivm_report_value_kind(opts.value);

		if (opts.kind >= 0 && opts.kind != kind) {
			fprintf(stderr,
				"idlevm report: --value %s weighs %s samples, not %s\n",
				opts.value == IVM_VALUE_IDLE_TIME ? "idle_time" :
				"wake_delay", ivm_sample_kind_name(kind),
				ivm_sample_kind_name(opts.kind));
			return 2;
		}
		opts.kind = kind;
	}

	return ivm_report_file(argv[optind], false, &opts, grouping);
}

/* The timeline's HTML page beside its JSON: F.json -> F.html, F -> F.html. */
static struct ivm_error *write_timeline_html(const struct ivm_idle_summary *s,
					     const char *json_path)
{
	size_t n = strlen(json_path);
	struct ivm_error *err;
	char *path;
	FILE *f;

	if (n > 5 && !strcmp(json_path + n - 5, ".json"))
		n -= 5;
	if (asprintf(&path, "%.*s.html", (int)n, json_path) < 0)
		return &ivm_enomem;
	f = fopen(path, "we");
	if (!f) {
		err = ivm_error_os(errno, "creating %s", path);
		free(path);
		return err;
	}
	err = ivm_timeline_html(s, f);
	if (fclose(f) && !err)
		err = ivm_error_os(errno, "writing %s", path);
	if (!err)
		fprintf(stderr, "idlevm report: timeline page %s\n", path);
	free(path);
	return err;
}

/*
 * What the report needs of the metadata as it streams by, before and
 * between samples: the processes said so far (each sample belongs to the
 * one last said for its pid) and the profile's --label keys, the tree's
 * dimensions, fixed at the first sample (the profiler says them first).
 */
struct report_stream {
	struct ivm_proc_table *procs;
	char *dims[IVM_SAMPLE_MAX_LABELS];
	size_t nr_dims;
	bool dims_set;
	/* pprof: the why-idle causes are dimensions too (cause_labels.h). */
	bool cause_dims;
	struct ivm_cause_labels causes;
	uint64_t bad_process;		/* malformed "process" items */
	/* The last STATS/END counts of each label ("label.KEY.WHAT"). */
	struct {
		char name[IVM_LABEL_KEY_MAX + 24];
		uint64_t value;
	} label_stats[3 * IVM_LABELS_MAX];
	size_t nr_label_stats;
};

static void stream_stats(struct report_stream *rs, const struct ivm_stat *st,
			 size_t nr)
{
	size_t i, k;

	for (i = 0; i < nr; i++) {
		if (strncmp(st[i].name, IVM_STAT_LABEL_PREFIX,
			    sizeof(IVM_STAT_LABEL_PREFIX) - 1))
			continue;
		for (k = 0; k < rs->nr_label_stats; k++)
			if (!strcmp(rs->label_stats[k].name, st[i].name))
				break;
		if (k == rs->nr_label_stats) {
			if (k == 3 * IVM_LABELS_MAX)
				continue;
			snprintf(rs->label_stats[k].name,
				 sizeof(rs->label_stats[k].name), "%s",
				 st[i].name);
			rs->nr_label_stats++;
		}
		rs->label_stats[k].value = st[i].value;
	}
}

/* One line per label: its counts as the profile's last STATS said. */
static void print_label_stats(const struct report_stream *rs, FILE *out,
			      const char *indent)
{
	size_t i, k;

	for (i = 0; i < rs->nr_dims; i++) {
		uint64_t v[3] = { 0 };
		static const char *const what[3] = { "read", "unreadable",
						     "absent" };
		char name[IVM_LABEL_KEY_MAX + 24];

		for (k = 0; k < 3; k++) {
			size_t j;

			snprintf(name, sizeof(name), "%s%s.%s",
				 IVM_STAT_LABEL_PREFIX, rs->dims[i], what[k]);
			for (j = 0; j < rs->nr_label_stats; j++)
				if (!strcmp(rs->label_stats[j].name, name))
					v[k] = rs->label_stats[j].value;
		}
		fprintf(out, "%slabel %s: %" PRIu64 " samples with a value, %" PRIu64
			" unreadable ('?'), %" PRIu64
			" samples of processes without it\n", indent, rs->dims[i],
			v[0], v[1], v[2]);
	}
}

static void stream_meta(struct report_stream *rs,
			const struct ivm_label *items, size_t nr)
{
	struct ivm_proc_info info;
	struct ivm_error *err;
	uint32_t pid;
	size_t i;

	for (i = 0; i < nr; i++) {
		const char *eq;

		if (!strcmp(items[i].key, IVM_META_PROCESS)) {
			err = ivm_proc_info_parse(items[i].value, &pid, &info);
			if (err) {
				rs->bad_process++;
				ivm_error_destroy(err);
				continue;
			}
			ivm_proc_table_set(rs->procs, pid, &info);
		} else if (!strcmp(items[i].key, "label") && !rs->dims_set &&
			   rs->nr_dims < IVM_SAMPLE_MAX_LABELS &&
			   (eq = strchr(items[i].value, '=')) &&
			   eq > items[i].value) {
			rs->dims[rs->nr_dims] = strndup(items[i].value,
							(size_t)(eq - items[i].value));
			if (rs->dims[rs->nr_dims])
				rs->nr_dims++;
		}
	}
}

static struct ivm_error *stream_sample(struct report_stream *rs,
				       struct ivm_calltree *tree,
				       const struct ivm_sample *s)
{
	const struct ivm_proc_info *info = ivm_proc_table_get(rs->procs, s->pid);
	struct ivm_calltree_context ctx = { 0 };
	struct ivm_error *err;

	if (!rs->dims_set) {
		const char *dims[IVM_SAMPLE_MAX_LABELS];
		size_t n = 0, i;

		for (i = 0; i < rs->nr_dims; i++)
			dims[n++] = rs->dims[i];
		if (rs->cause_dims && n + 2 <= IVM_SAMPLE_MAX_LABELS) {
			dims[n++] = IVM_CAUSE_LABEL_WAKE;
			dims[n++] = IVM_CAUSE_LABEL_HOST_WAKE;
		}
		rs->dims_set = true;
		err = ivm_calltree_set_dimensions(tree, dims, n);
		if (err)
			return err;
	}
	if (info) {
		ctx.process_comm = info->comm;
		ctx.title = info->title;
	}
	return ivm_calltree_add_ctx(tree, s, &ctx);
}

static void stream_free(struct report_stream *rs)
{
	size_t i;

	ivm_proc_table_destroy(rs->procs);
	for (i = 0; i < rs->nr_dims; i++)
		free(rs->dims[i]);
}

int ivm_report_file(const char *path, bool folded,
		    struct ivm_report_options *opts, unsigned int grouping)
{
	struct report_stream stream = { 0 };
	const struct ivm_profile_damage *damage;
	struct ivm_profile_reader *reader;
	struct ivm_calltree *tree = NULL;
	struct ivm_profile_record rec;
	struct ivm_meta_lines meta = { 0 };
	struct ivm_frame_names *names = ivm_frame_names_create();
	struct ivm_frame_names_config ncfg = {
		.vmlinux = opts->vmlinux, .system_map = opts->system_map,
		.symdir = opts->symdir, .module_dir = opts->module_dir,
		.debuginfod = true, .log = log_symbols,
	};
	const char *binaries[MAX_BINARIES + 1];
	struct ivm_error *err;
	FILE *saved_out;
	uint64_t samples = 0, add_errors = 0;
	struct ivm_idle_summary idle;
	uint64_t first_ns = 0, last_ns = 0, end_ns = 0;
	struct ivm_mappings *mappings = ivm_mappings_create();
	struct ivm_outfile outfile = { .fd = -1 };
	struct ivm_threads *threads = NULL;
	uint64_t *pcs = malloc(IVM_SAMPLE_MAX_FRAMES * sizeof(*pcs));
	struct ivm_sample copy, labelled;
	struct ivm_label labels[IVM_SAMPLE_MAX_LABELS];
	size_t i;

	if (!pcs || !mappings || !names) {
		free(pcs);
		ivm_mappings_destroy(mappings);
		ivm_frame_names_destroy(names);
		return ivm_error_report(&ivm_enomem);
	}
	err = ivm_profile_reader_open(path, &reader);
	if (err) {
		free(pcs);
		ivm_mappings_destroy(mappings);
		ivm_frame_names_destroy(names);
		return ivm_error_report(err);
	}
	err = ivm_calltree_create(grouping, &tree);
	if (!err && opts->group_by != IVM_GROUP_BY_THREAD)
		err = ivm_calltree_group_by(tree, opts->group_by,
					    opts->group_label);
	if (!err)
		err = ivm_proc_table_create(&stream.procs);
	if (!err)
		err = ivm_threads_create(&threads);
	if (err) {
		ivm_calltree_destroy(tree);
		free(pcs);
		ivm_mappings_destroy(mappings);
		ivm_frame_names_destroy(names);
		ivm_profile_reader_destroy(reader);
		return ivm_error_report(err);
	}
	ivm_idle_summary_init(&idle);
	ivm_cause_labels_init(&stream.causes);
	stream.cause_dims = opts->format == IVM_REPORT_PPROF && !folded;
	while (ivm_profile_reader_next(reader, &rec)) {
		err = ivm_idle_summary_add(&idle, &rec);
		if (err) {
			add_errors++;
			ivm_error_destroy(err);
		}
		switch (rec.type) {
		case IVM_RECORD_SAMPLE:
			if (!first_ns || rec.sample.time_ns < first_ns)
				first_ns = rec.sample.time_ns;
			if (rec.sample.time_ns > last_ns)
				last_ns = rec.sample.time_ns;
			err = stream_sample(&stream, tree,
					    ivm_cause_labels_sample(
						    &stream.causes,
						    ivm_frame_names_sample(
							    names, &rec.sample,
							    &copy, pcs),
						    &labelled, labels));
			if (err) {
				add_errors++;
				ivm_error_destroy(err);
			} else {
				samples++;
			}
			break;
		case IVM_RECORD_IDLE_PERIOD:
			ivm_cause_labels_period(&stream.causes, &rec.idle);
			break;
		case IVM_RECORD_META:
			for (i = 0; i < rec.meta.nr; i++)
				ivm_meta_lines_add(&meta, rec.meta.items[i].key,
						   rec.meta.items[i].value);
			stream_meta(&stream, rec.meta.items, rec.meta.nr);
			break;
		case IVM_RECORD_STATS:
			stream_stats(&stream, rec.stats.items, rec.stats.nr);
			break;
		case IVM_RECORD_END:
			end_ns = rec.stats.time_ns;
			stream_stats(&stream, rec.stats.items, rec.stats.nr);
			break;
		case IVM_RECORD_THREAD:
			err = ivm_threads_add(threads, &rec.thread);
			if (err) {
				add_errors++;
				ivm_error_destroy(err);
			}
			break;
		default:
			break;
		}
	}
	damage = ivm_profile_reader_damage(reader);
	/* --binary first, then the rest; none: the profile's own. */
	if (opts->binary || opts->nr_binaries) {
		size_t n = 0;

		if (opts->binary)
			binaries[n++] = opts->binary;
		for (i = 0; i < opts->nr_binaries && n < MAX_BINARIES; i++)
			if (opts->binaries[i] != opts->binary)
				binaries[n++] = opts->binaries[i];
		ncfg.binaries = binaries;
		ncfg.nr_binaries = n;
	}
	ivm_frame_names_load(names, &ncfg, &meta);
	if (opts->nr_addresses) {
		print_addresses(opts, ivm_frame_names_syms(names));
		goto out;
	}
	if (!opts->sym.frames)
		opts->sym = ivm_frame_names_symbolizer(names);
	ivm_frame_names_mappings(names, mappings);
	opts->mappings = mappings;
	run_of(&meta, first_ns, last_ns, end_ns, &opts->run);
	scale_watched(&idle, tree, &opts->run);
	if (folded)
		opts->format = IVM_REPORT_FOLDED;
	saved_out = opts->out;
	if (opts->output) {
		/* It takes its name once complete (a watcher never sees half). */
		err = ivm_outfile_open(opts->output, O_TRUNC, &outfile);
		if (!err && !(opts->out = fdopen(outfile.fd, "w")))
			err = ivm_error_os(errno, "creating %s", opts->output);
		if (err) {
			ivm_outfile_close(&outfile);
			opts->out = saved_out;
			goto out;
		}
		outfile.fd = -1;	/* stdio's now */
	}

	switch (opts->format) {
	case IVM_REPORT_TEXT:
		fprintf(opts->out, "idlevm profile %s\n", path);
		print_meta(opts->out, &meta);
		fprintf(opts->out, "  kernel symbols: %s\n",
			kernel_source_name(ivm_frame_names_syms(names)));
		print_label_stats(&stream, opts->out, "  ");
		fprintf(opts->out, "  samples: %" PRIu64 " (to_idle %" PRIu64
			", from_idle %" PRIu64 ", on_cpu %" PRIu64 ")\n",
			opts->run.scale > 1 ? tree_samples(tree) : samples,
			ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE),
			ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE),
			ivm_calltree_total(tree, IVM_SAMPLE_ON_CPU));
		if (opts->run.scale > 1)
			fprintf(opts->out, "  estimated: the guest was watched %.1f s of %.1f s (--cpu-budget %s%%); counts below are scaled by %.2f (%" PRIu64 " samples recorded)\n",
				(double)opts->run.watched_ms / 1e3,
				(double)opts->run.elapsed_ms / 1e3,
				ivm_meta_lines_value(&meta, "cpu_budget") ?
				ivm_meta_lines_value(&meta, "cpu_budget") : "?",
				opts->run.scale, samples);
		/* Apart, so the line above reads as it always did. */
		if (ivm_calltree_total(tree, IVM_SAMPLE_SWITCH))
			fprintf(opts->out, "  switch samples: %" PRIu64
				" (every %s switches of a thread)\n",
				ivm_calltree_total(tree, IVM_SAMPLE_SWITCH),
				ivm_meta_lines_value(&meta, "switch_every") ?
				ivm_meta_lines_value(&meta, "switch_every") :
				"?");
		ivm_why_idle_print(&idle, tree, opts->out);
		ivm_idle_summary_print(&idle, opts->out);
		if (ivm_threads_nr(threads)) {
			fprintf(opts->out,
				"== threads: the %u that switched most (-f threads: all) ==\n",
				opts->top);
			ivm_threads_print(threads, IVM_THREADS_BY_SWITCHES,
					  opts->top, opts->out);
		}
		ivm_report_text(tree, opts);
		break;
	case IVM_REPORT_TIMELINE:
		err = ivm_timeline_json(&idle, opts->out);
		if (!err && opts->output)
			err = write_timeline_html(&idle, opts->output);
		break;
	case IVM_REPORT_PERIODS:
		ivm_idle_summary_print_periods(&idle, opts->out);
		break;
	case IVM_REPORT_THREADS:
		if (!ivm_threads_nr(threads))
			fprintf(stderr,
				"idlevm report: %s has no per-thread records (a profile taken without --switch-every)\n",
				path);
		ivm_threads_print(threads, (enum ivm_threads_sort)opts->sort,
				  0, opts->out);
		break;
	case IVM_REPORT_FOLDED:
		ivm_report_folded(tree, opts);
		break;
	case IVM_REPORT_PPROF:
		err = ivm_report_pprof(tree, opts);
		break;
	case IVM_REPORT_SVG:
		err = ivm_report_svg(tree, opts);
		break;
	}
	if (opts->output) {
		if (fclose(opts->out) && !err)
			err = ivm_error_os(errno, "writing %s", opts->output);
		if (!err)
			err = ivm_outfile_publish(&outfile);
		ivm_outfile_close(&outfile);	/* unpublished: removed */
		opts->out = saved_out;
	} else if (fflush(opts->out) && !err) {
		err = ivm_error_os(errno, "writing the report");
	}

	/* The run and its losses are always told; here the output is data. */
	if (opts->format != IVM_REPORT_TEXT && !opts->quiet) {
		ivm_idle_summary_print(&idle, stderr);
		print_label_stats(&stream, stderr, "idlevm report: ");
	}
	/* Never hide loss: say what was skipped, on stderr. */
	if (stream.bad_process)
		fprintf(stderr, "idlevm report: %" PRIu64
			" malformed process records skipped\n",
			stream.bad_process);
	if (damage->records_bad || damage->bytes_skipped ||
	    damage->tail_bytes || damage->records_unknown || add_errors)
		fprintf(stderr,
			"idlevm report: kept %" PRIu64 " intact records; skipped %"
			PRIu64 " damaged records, %" PRIu64
			" bytes of garbage, %" PRIu64
			" bytes of a torn last record, %" PRIu64
			" records of unknown type\n",
			damage->records_ok, damage->records_bad + add_errors,
			damage->bytes_skipped, damage->tail_bytes,
			damage->records_unknown);
	if (!damage->ended)
		fprintf(stderr,
			"idlevm report: %s has no end record: the run was cut short; showing what it flushed\n",
			path);

out:
	if (opts->sym.ctx == names)
		opts->sym = (struct ivm_symbolizer){ 0 };
	/* What pointed into this profile goes with it. */
	opts->mappings = NULL;
	opts->run = (struct ivm_report_run){ 0 };
	ivm_mappings_destroy(mappings);
	ivm_frame_names_destroy(names);
	free(pcs);
	ivm_meta_lines_free(&meta);
	stream_free(&stream);
	ivm_idle_summary_deinit(&idle);
	ivm_threads_destroy(threads);
	ivm_calltree_destroy(tree);
	ivm_profile_reader_destroy(reader);
	return err ? ivm_error_report(err) : 0;
}
