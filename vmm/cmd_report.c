// SPDX-License-Identifier: MIT
/*
 * idlevm report FILE: read a profile (complete, cut short or damaged) and
 * print the idle report.  It always says what it could not read.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "commands.h"
#include "profile_file.h"
#include "report.h"
#include "report_pprof.h"
#include "report_svg.h"
#include "syms.h"

static void report_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm report [options] FILE\n"
"\n"
"Print the call tree of a profile recorded by 'idlevm profile'.\n"
"\n"
"  -f, --format FMT   text (default), folded (FlameGraph, speedscope),\n"
"                     pprof (gzipped profile.proto) or svg (flame graph)\n"
"  -o, --output FILE  write the report there (default: standard output)\n"
"  -k, --vmlinux FILE guest kernel debuginfo (default: the one the profile names)\n"
"  -m, --system-map FILE  kernel symbols when the vmlinux is missing or wrong\n"
"  -b, --binary FILE  symbols for user frames (a static guest binary);\n"
"                     repeat for more binaries\n"
"  -s, --symdir DIR   debug files by build-id (DIR/.build-id/xx/rest.debug)\n"
"                     and binaries by name\n"
"  -K, --kind KIND    to_idle, from_idle, on_cpu or all (default all)\n"
"  -n, --top N        stacks per kind in the text report (default 10)\n"
"      --no-threads   group by process only, not by thread\n"
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

/* The profile's metadata, kept as "key: value" lines for the header. */
struct meta_lines {
	char **lines;
	size_t nr;
};

#define MAX_BINARIES	16

struct report_symbols {
	struct ivm_syms *syms;
	const char *binaries[MAX_BINARIES + 1];
	size_t nr_binaries;
};

/*
 * Frames of a pc.  Frames are return addresses (but for the rare exact pc
 * from a register set): pc - 1 is inside the call instruction, so a call
 * that ends a function is not named after the next one.
 */
static unsigned int symbolize(void *ctx, enum ivm_node_type type, uint64_t pc,
			      struct ivm_report_frame *out, unsigned int max)
{
	struct report_symbols *rs = ctx;
	const struct ivm_sym_location *loc;
	unsigned int i;

	if (!rs->syms || !pc)
		return 0;
	loc = type == IVM_NODE_KERNEL ? ivm_syms_kernel(rs->syms, pc - 1) :
					ivm_syms_user(rs->syms, pc - 1);
	if (loc->source == IVM_SYM_SOURCE_NONE)
		return 0;
	for (i = 0; i < loc->nr_frames && i < max; i++)
		out[i] = (struct ivm_report_frame){
			.function = loc->frames[i].function,
			.file = loc->frames[i].file,
			.line = loc->frames[i].line,
			.inlined = loc->frames[i].inlined,
		};
	return i;
}

static void log_symbols(void *ctx, const char *msg)
{
	fprintf(stderr, "idlevm report: %s\n", msg);
}

static const char *meta_value(const struct meta_lines *m, const char *key);

static void load_symbols(struct report_symbols *rs,
			 const struct ivm_report_options *opts,
			 const struct meta_lines *meta)
{
	const char *slide = meta_value(meta, "kaslr_offset");
	struct ivm_syms_config cfg = {
		.vmlinux = opts->vmlinux ? opts->vmlinux :
			   meta_value(meta, "vmlinux"),
		.system_map = opts->system_map,
		.kernel_release = meta_value(meta, "kernel"),
		.binaries = rs->binaries,
		.nr_binaries = rs->nr_binaries,
		.symdir = opts->symdir,
		.log = log_symbols,
	};
	struct ivm_sym_error *err;

	if (cfg.vmlinux && !*cfg.vmlinux)
		cfg.vmlinux = NULL;
	size_t i;

	if (opts->binary)
		rs->binaries[rs->nr_binaries++] = opts->binary;
	for (i = 0; i < opts->nr_binaries && rs->nr_binaries < MAX_BINARIES;
	     i++)
		if (opts->binaries[i] != opts->binary)
			rs->binaries[rs->nr_binaries++] = opts->binaries[i];
	cfg.nr_binaries = rs->nr_binaries;
	if (slide)
		cfg.kaslr_offset = strtoull(slide, NULL, 0);
	err = ivm_syms_create(&cfg, &rs->syms);
	if (err) {
		fprintf(stderr, "idlevm report: no symbols: %s\n",
			ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
	}
}

static void meta_add(struct meta_lines *m, const struct ivm_label *items,
		     size_t nr)
{
	size_t i;

	for (i = 0; i < nr; i++) {
		char **lines = realloc(m->lines, (m->nr + 1) * sizeof(*lines));

		if (!lines)
			return;
		m->lines = lines;
		if (asprintf(&m->lines[m->nr], "%s: %s", items[i].key,
			     items[i].value) >= 0)
			m->nr++;
	}
}

static const char *meta_value(const struct meta_lines *m, const char *key)
{
	size_t i, n = strlen(key);

	/* Later records win: a run may restate what changed. */
	for (i = m->nr; i-- > 0;)
		if (!strncmp(m->lines[i], key, n) && m->lines[i][n] == ':' &&
		    m->lines[i][n + 1] == ' ')
			return m->lines[i] + n + 2;
	return NULL;
}

static void meta_free(struct meta_lines *m)
{
	size_t i;

	for (i = 0; i < m->nr; i++)
		free(m->lines[i]);
	free(m->lines);
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
		{ "output", required_argument, NULL, 'o' },
		{ "top", required_argument, NULL, 'n' },
		{ "no-threads", no_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_report_options opts = { .out = stdout, .kind = -1,
					   .top = 10 };
	const char *binaries[MAX_BINARIES];
	unsigned int grouping = IVM_CALLTREE_BY_PROCESS | IVM_CALLTREE_BY_THREAD;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:K:k:m:b:s:o:n:h", longopts, NULL)) != -1) {
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
			} else {
				fprintf(stderr,
					"idlevm report: unknown format '%s' (text, folded, pprof, svg)\n",
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
		case 'o':
			opts.output = optarg;
			break;
		case 'K':
			opts.kind = parse_kind(optarg);
			if (opts.kind == -2) {
				fprintf(stderr,
					"idlevm report: unknown kind '%s' (to_idle, from_idle, on_cpu, all)\n",
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
		case 'T':
			grouping = IVM_CALLTREE_BY_PROCESS;
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

	return ivm_report_file(argv[optind], false, &opts, grouping);
}

int ivm_report_file(const char *path, bool folded,
		    struct ivm_report_options *opts, unsigned int grouping)
{
	const struct ivm_profile_damage *damage;
	struct ivm_profile_reader *reader;
	struct ivm_calltree *tree;
	struct ivm_profile_record rec;
	struct meta_lines meta = { 0 };
	struct report_symbols syms = { 0 };
	struct ivm_error *err;
	FILE *saved_out;
	uint64_t samples = 0, add_errors = 0;
	size_t i;

	err = ivm_profile_reader_open(path, &reader);
	if (err)
		return ivm_error_report(err);
	err = ivm_calltree_create(grouping, &tree);
	if (err) {
		ivm_profile_reader_destroy(reader);
		return ivm_error_report(err);
	}
	while (ivm_profile_reader_next(reader, &rec)) {
		switch (rec.type) {
		case IVM_RECORD_SAMPLE:
			err = ivm_calltree_add(tree, &rec.sample);
			if (err) {
				add_errors++;
				ivm_error_destroy(err);
			} else {
				samples++;
			}
			break;
		case IVM_RECORD_META:
			meta_add(&meta, rec.meta.items, rec.meta.nr);
			break;
		default:
			break;
		}
	}
	damage = ivm_profile_reader_damage(reader);
	load_symbols(&syms, opts, &meta);
	if (!opts->sym.frames) {
		opts->sym.frames = symbolize;
		opts->sym.ctx = &syms;
	}
	if (folded)
		opts->format = IVM_REPORT_FOLDED;
	saved_out = opts->out;
	if (opts->output) {
		opts->out = fopen(opts->output, "we");
		if (!opts->out) {
			err = ivm_error_os(errno, "creating %s", opts->output);
			opts->out = saved_out;
			goto out;
		}
	}

	switch (opts->format) {
	case IVM_REPORT_TEXT:
		fprintf(opts->out, "idlevm profile %s\n", path);
		for (i = 0; i < meta.nr; i++)
			fprintf(opts->out, "  %s\n", meta.lines[i]);
		fprintf(opts->out, "  kernel symbols: %s\n",
			syms.syms && ivm_syms_kernel_source(syms.syms) ?
			ivm_syms_kernel_source(syms.syms) : "none (raw addresses)");
		fprintf(opts->out, "  samples: %" PRIu64 " (to_idle %" PRIu64
			", from_idle %" PRIu64 ", on_cpu %" PRIu64 ")\n",
			samples, ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE),
			ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE),
			ivm_calltree_total(tree, IVM_SAMPLE_ON_CPU));
		ivm_report_text(tree, opts);
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
		opts->out = saved_out;
	} else if (fflush(opts->out) && !err) {
		err = ivm_error_os(errno, "writing the report");
	}

	/* Never hide loss: say what was skipped, on stderr. */
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
	if (opts->sym.ctx == &syms)
		opts->sym = (struct ivm_symbolizer){ 0 };
	ivm_syms_destroy(syms.syms);
	meta_free(&meta);
	ivm_calltree_destroy(tree);
	ivm_profile_reader_destroy(reader);
	return err ? ivm_error_report(err) : 0;
}
