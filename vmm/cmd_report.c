// SPDX-License-Identifier: MIT
/*
 * idlevm report FILE: read a profile (complete, cut short or damaged) and
 * print the idle report.  It always says what it could not read.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "commands.h"
#include "ksyms.h"
#include "profile_file.h"
#include "report.h"

enum report_format { FORMAT_TEXT, FORMAT_FOLDED };

static void report_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm report [options] FILE\n"
"\n"
"Print the call tree of a profile recorded by 'idlevm profile'.\n"
"\n"
"  -f, --format FMT   text (default) or folded (FlameGraph, speedscope)\n"
"  -k, --vmlinux FILE guest kernel symbols (default: the one the profile names)\n"
"  -b, --binary FILE  symbols for user frames (a static guest binary)\n"
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

struct report_symbols {
	struct ivm_ksyms *kernel;
	uint64_t slide;
	struct ivm_ksyms *user;
};

/*
 * Name a frame.  Frames are return addresses (but for the rare exact pc
 * from a register set): pc - 1 is inside the call instruction, so a call
 * that ends a function is not named after the next one.
 */
static const char *symbolize(void *ctx, enum ivm_node_type type, uint64_t pc,
			     char *buf, size_t len)
{
	struct report_symbols *rs = ctx;
	const struct ivm_ksyms *table;
	const struct ivm_ksym *sym;
	uint64_t off, addr = pc - 1;

	if (type == IVM_NODE_KERNEL) {
		table = rs->kernel;
		addr -= rs->slide;
	} else {
		table = rs->user;
	}
	if (!table)
		return NULL;
	sym = ivm_ksyms_symbolize(table, addr, &off);
	/* Past the end of a sized symbol, or far from it: not its name. */
	if (!sym || (sym->size && off >= sym->size) ||
	    (!sym->size && off > (1u << 20)))
		return NULL;
	snprintf(buf, len, "%s%s", sym->name,
		 type == IVM_NODE_KERNEL ? "_[k]" : "");
	return buf;
}

static const char *meta_value(const struct meta_lines *m, const char *key);

static void load_symbols(struct report_symbols *rs,
			 const struct ivm_report_options *opts,
			 const struct meta_lines *meta)
{
	const char *vmlinux = opts->vmlinux ? opts->vmlinux :
			      meta_value(meta, "vmlinux");
	const char *slide = meta_value(meta, "kaslr_offset");
	struct ivm_error *err;

	if (slide)
		rs->slide = strtoull(slide, NULL, 0);
	if (vmlinux) {
		err = ivm_ksyms_load_elf(vmlinux, &rs->kernel);
		if (err) {
			fprintf(stderr, "idlevm report: no kernel symbols: %s\n",
				ivm_error_string(err));
			ivm_error_destroy(err);
		}
	}
	if (opts->binary) {
		err = ivm_ksyms_load_elf(opts->binary, &rs->user);
		if (err) {
			fprintf(stderr, "idlevm report: no user symbols: %s\n",
				ivm_error_string(err));
			ivm_error_destroy(err);
		}
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
		{ "binary", required_argument, NULL, 'b' },
		{ "top", required_argument, NULL, 'n' },
		{ "no-threads", no_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_report_options opts = { .out = stdout, .kind = -1,
					   .top = 10 };
	enum report_format format = FORMAT_TEXT;
	unsigned int grouping = IVM_CALLTREE_BY_PROCESS | IVM_CALLTREE_BY_THREAD;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:K:k:b:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "text")) {
				format = FORMAT_TEXT;
			} else if (!strcmp(optarg, "folded")) {
				format = FORMAT_FOLDED;
			} else {
				fprintf(stderr,
					"idlevm report: unknown format '%s' (text, folded)\n",
					optarg);
				return 2;
			}
			break;
		case 'k':
			opts.vmlinux = optarg;
			break;
		case 'b':
			opts.binary = optarg;
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

	return ivm_report_file(argv[optind], format == FORMAT_FOLDED, &opts,
			       grouping);
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
	if (!opts->sym.name) {
		opts->sym.name = symbolize;
		opts->sym.ctx = &syms;
	}

	if (!folded) {
		printf("idlevm profile %s\n", path);
		for (i = 0; i < meta.nr; i++)
			printf("  %s\n", meta.lines[i]);
		printf("  samples: %" PRIu64 " (to_idle %" PRIu64
		       ", from_idle %" PRIu64 ", on_cpu %" PRIu64 ")\n",
		       samples, ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE),
		       ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE),
		       ivm_calltree_total(tree, IVM_SAMPLE_ON_CPU));
		ivm_report_text(tree, opts);
	} else {
		ivm_report_folded(tree, opts);
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

	if (opts->sym.ctx == &syms)
		opts->sym = (struct ivm_symbolizer){ 0 };
	ivm_ksyms_destroy(syms.kernel);
	ivm_ksyms_destroy(syms.user);
	meta_free(&meta);
	ivm_calltree_destroy(tree);
	ivm_profile_reader_destroy(reader);
	return 0;
}
