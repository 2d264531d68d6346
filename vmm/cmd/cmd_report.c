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
#include "kernel/kmodules.h"
#include "cmd/commands.h"
#include "profile/profile_file.h"
#include "report/report.h"
#include "report/mappings.h"
#include "report/report_pprof.h"
#include "report/report_svg.h"
#include "report/idle_summary.h"
#include "report/timeline.h"
#include "syms.h"

static void report_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm report [options] FILE\n"
"\n"
"Print the call tree of a profile recorded by 'idlevm profile'.\n"
"\n"
"  -f, --format FMT   text (default), folded (FlameGraph, speedscope),\n"
"                     pprof (gzipped profile.proto), svg (flame graph),\n"
"                     timeline (Chrome trace-event JSON for Perfetto or\n"
"                     chrome://tracing, one track per vCPU; with -o F.json\n"
"                     also F.html, a self-contained SVG timeline) or\n"
"                     periods (one tab-separated line per idle period)\n"
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
#define MAX_ADDRESSES	256

struct report_symbols {
	struct ivm_syms *syms;
	const char *binaries[MAX_BINARIES + 1];
	size_t nr_binaries;
	/* Executables the samples name by build-id (label user_build_id). */
	char *build_ids[MAX_BINARIES];
	size_t nr_build_ids;
	char *exe_paths[MAX_BINARIES];
	size_t nr_exe_paths;
	/* The guest's modules as the profile recorded them. */
	struct ivm_kmodule *kmods;
	struct ivm_syms_module *modules;
	size_t nr_modules;
	char *module_dir;
};

/*
 * Remember the executable a sample names, and give the user pcs of a PIE
 * (label user_bias) as link-time addresses, what its symbols use.  A pc
 * further than IVM_REPORT_PIE_SPAN above the bias is not the executable's
 * (the vDSO, a library): it stays as it is.
 */
#define IVM_REPORT_PIE_SPAN (1ull << 30)

static const struct ivm_sample *user_exe(struct report_symbols *rs,
					 const struct ivm_sample *s,
					 struct ivm_sample *copy,
					 uint64_t *pcs)
{
	const char *id = NULL, *bias_s = NULL;
	unsigned long long bias;
	char *end;
	size_t i = 0, k;

	for (i = 0; i < s->nr_labels; i++) {
		if (!strcmp(s->labels[i].key, "user_build_id"))
			id = s->labels[i].value;
		else if (!strcmp(s->labels[i].key, "user_bias"))
			bias_s = s->labels[i].value;
	}
	/* Which executable: i becomes its build-id's index, or none. */
	if (id && (strspn(id, "0123456789abcdef") != strlen(id) ||
		   strlen(id) < 4))
		id = NULL;
	for (i = 0; id && i < rs->nr_build_ids; i++)
		if (!strcmp(rs->build_ids[i], id))
			break;
	if (id && i == rs->nr_build_ids && i < MAX_BINARIES &&
	    (rs->build_ids[i] = strdup(id)))
		rs->nr_build_ids++;
	if (!id || i >= rs->nr_build_ids)
		i = (size_t)-1;
	bias = 0;
	if (bias_s) {
		bias = strtoull(bias_s, &end, 16);
		if (*end)
			bias = 0;
	}
	if (!bias && i == (size_t)-1)
		return s;
	*copy = *s;
	for (k = 0; k < s->nr_user; k++) {
		uint64_t pc = s->user_pcs[k];

		if (bias && pc - bias < IVM_REPORT_PIE_SPAN)
			pc -= bias;
		if (i != (size_t)-1 && !IVM_REPORT_USER_TAG(pc))
			pc |= (uint64_t)(i + 1) << IVM_REPORT_USER_TAG_SHIFT;
		pcs[k] = pc;
	}
	copy->user_pcs = pcs;
	return copy;
}

/*
 * Frames of a pc.  A return address is named by pc - 1, inside the call
 * instruction, so a call that ends a function is not named after the next
 * one; an exact pc (the leaf of a running task, the frame after an
 * interrupt or exception) by itself: it may be a function's first
 * instruction, which pc - 1 would name after the function before.
 */
static unsigned int symbolize(void *ctx, enum ivm_node_type type, uint64_t pc,
			      bool exact, struct ivm_report_frame *out,
			      unsigned int max)
{
	struct report_symbols *rs = ctx;
	const struct ivm_sym_location *loc;
	uint64_t back = exact ? 0 : 1;
	unsigned int i;

	if (!rs->syms || !pc)
		return 0;
	if (type == IVM_NODE_KERNEL) {
		loc = ivm_syms_kernel(rs->syms, pc - back);
	} else if (IVM_REPORT_USER_TAG(pc) &&
		   IVM_REPORT_USER_TAG(pc) <= rs->nr_build_ids) {
		/*
		 * Its executable is known by build-id: only that binary may
		 * name it (another one at the same addresses would name it
		 * wrong); without it the frame stays raw.
		 */
		loc = ivm_syms_user_in(rs->syms,
				       rs->build_ids[IVM_REPORT_USER_TAG(pc) - 1],
				       IVM_REPORT_USER_PC(pc) - back);
		if (!loc)
			return 0;
	} else {
		loc = ivm_syms_user(rs->syms, IVM_REPORT_USER_PC(pc) - back);
	}
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

/*
 * A profile taken without a vmlinux carries the kernel symbols its
 * samples hit ("ksym: ADDR SIZE TYPE NAME").  Turn them into a System.map
 * in an anonymous file, for the symbolizer's System.map source.  Returns
 * the fd (-1: none or no memory); *path gets its /proc path.
 */
static int embedded_system_map(const struct meta_lines *m, char *path,
			       size_t path_size)
{
	size_t i, n = 0;
	FILE *f;
	int fd;

	for (i = 0; i < m->nr; i++)
		n += !strncmp(m->lines[i], "ksym: ", 6);
	if (!n)
		return -1;
	fd = memfd_create("idlevm-ksyms", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	f = fdopen(dup(fd), "w");
	if (!f) {
		close(fd);
		return -1;
	}
	for (i = 0; i < m->nr; i++) {
		unsigned long long addr, size;
		char type, name[200];

		if (strncmp(m->lines[i], "ksym: ", 6) ||
		    sscanf(m->lines[i] + 6, "%llx %llx %c %199s", &addr, &size,
			   &type, name) != 4)
			continue;
		fprintf(f, "%016llx %c %s\n", addr, type, name);
	}
	if (fclose(f)) {
		close(fd);
		return -1;
	}
	snprintf(path, path_size, "/proc/self/fd/%d", fd);
	return fd;
}

/*
 * The modules the profile recorded ("module: NAME BASE SIZE BUILD-ID
 * SECTIONS", see kmodules.h), for the symbolizer.  A malformed line (a
 * damaged file) is skipped and said once.
 */
static void load_modules(struct report_symbols *rs,
			 const struct meta_lines *m)
{
	size_t i, n = 0, bad = 0;

	for (i = 0; i < m->nr; i++)
		n += !strncmp(m->lines[i], "module: ", 8);
	if (!n)
		return;
	rs->kmods = calloc(n, sizeof(*rs->kmods));
	rs->modules = calloc(n, sizeof(*rs->modules));
	if (!rs->kmods || !rs->modules)
		return;
	for (i = 0; i < m->nr; i++) {
		struct ivm_error *err;

		if (strncmp(m->lines[i], "module: ", 8))
			continue;
		err = ivm_kmodule_parse(m->lines[i] + 8,
					&rs->kmods[rs->nr_modules]);
		if (err) {
			bad++;
			ivm_error_destroy(err);
			continue;
		}
		rs->nr_modules++;
	}
	for (i = 0; i < m->nr; i++) {
		struct ivm_error *err;

		if (strncmp(m->lines[i], "module_sections: ", 17))
			continue;
		err = ivm_kmodule_parse_sections(m->lines[i] + 17, rs->kmods,
						 rs->nr_modules);
		if (err) {
			bad++;
			ivm_error_destroy(err);
		}
	}
	for (i = 0; i < rs->nr_modules; i++) {
		struct ivm_kmodule *km = &rs->kmods[i];
		struct ivm_syms_module *sm = &rs->modules[i];
		size_t k;

		/* The symbolizer's view of the same sections. */
		sm->sections = calloc(km->nr_sections ? km->nr_sections : 1,
				      sizeof(*sm->sections));
		if (!sm->sections)
			km->nr_sections = 0;
		for (k = 0; k < km->nr_sections; k++)
			((struct ivm_sym_section_addr *)sm->sections)[k] =
				(struct ivm_sym_section_addr){
					km->sections[k].name,
					km->sections[k].addr };
		sm->nr_sections = km->nr_sections;
		sm->name = km->name;
		sm->build_id = km->build_id[0] ? km->build_id : NULL;
		sm->base = km->base;
		sm->size = km->size;
	}
	if (bad)
		fprintf(stderr, "idlevm report: %zu malformed module records skipped\n",
			bad);
}

/*
 * Where module debug files are when not told: next to the profile's
 * vmlinux as images/build-image caches them (DIR/debug/lib/modules/R),
 * else the symbolizer's default, /usr/lib/debug (Debian's -dbg layout).
 */
static char *default_module_dir(const char *vmlinux, const char *release)
{
	const char *slash = vmlinux ? strrchr(vmlinux, '/') : NULL;
	char *dir, *probe;
	bool found;

	if (!slash || !release)
		return NULL;
	if (asprintf(&dir, "%.*s/debug", (int)(slash - vmlinux), vmlinux) < 0)
		return NULL;
	if (asprintf(&probe, "%s/lib/modules/%s", dir, release) < 0) {
		free(dir);
		return NULL;
	}
	found = !access(probe, R_OK | X_OK);
	free(probe);
	if (!found) {
		free(dir);
		return NULL;
	}
	return dir;
}

static void free_modules(struct report_symbols *rs)
{
	size_t i;

	for (i = 0; i < rs->nr_modules; i++) {
		free((void *)rs->modules[i].sections);
		ivm_kmodule_release(&rs->kmods[i]);
	}
	free(rs->modules);
	free(rs->kmods);
	free(rs->module_dir);
}

/*
 * --address: what each kernel address is, in the profile's guest (its
 * kernel and modules), one line per frame, innermost first.
 */
static void print_addresses(const struct ivm_report_options *opts,
			    struct report_symbols *rs)
{
	size_t i;
	unsigned int k;

	for (i = 0; i < opts->nr_addresses; i++) {
		const struct ivm_sym_location *loc = NULL;

		if (rs->syms)
			loc = ivm_syms_kernel(rs->syms, opts->addresses[i]);
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
	char map_path[64];
	int map_fd = -1;
	size_t i;

	/* A profile taken without a vmlinux names none. */
	if (cfg.vmlinux && !*cfg.vmlinux)
		cfg.vmlinux = NULL;
	/* The profile's own symbol directory, unless told another. */
	if (!cfg.symdir)
		cfg.symdir = meta_value(meta, "symdir");

	/* The binaries the profile was taken with, unless told others. */
	for (i = 0; !opts->binary && !opts->nr_binaries && i < meta->nr &&
		    rs->nr_binaries < MAX_BINARIES; i++)
		if (!strncmp(meta->lines[i], "binary: ", 8))
			rs->binaries[rs->nr_binaries++] = meta->lines[i] + 8;
	if (opts->binary)
		rs->binaries[rs->nr_binaries++] = opts->binary;
	for (i = 0; i < opts->nr_binaries && rs->nr_binaries < MAX_BINARIES;
	     i++)
		if (opts->binaries[i] != opts->binary)
			rs->binaries[rs->nr_binaries++] = opts->binaries[i];
	/* The executables the samples name, from the symdir. */
	for (i = 0; cfg.symdir && i < rs->nr_build_ids &&
	     rs->nr_binaries < MAX_BINARIES; i++) {
		const char *id = rs->build_ids[i];
		char *path;

		if (asprintf(&path, "%s/.build-id/%.2s/%s", cfg.symdir, id,
			     id + 2) < 0)
			continue;
		if (access(path, R_OK)) {
			free(path);
			if (asprintf(&path, "%s/.build-id/%.2s/%s.debug",
				     cfg.symdir, id, id + 2) < 0)
				continue;
			if (access(path, R_OK)) {
				free(path);
				fprintf(stderr, "idlevm report: no executable with build-id %s in %s: its frames stay addresses\n",
					id, cfg.symdir);
				continue;
			}
		}
		rs->exe_paths[rs->nr_exe_paths++] = path;
		rs->binaries[rs->nr_binaries++] = path;
	}
	cfg.nr_binaries = rs->nr_binaries;
	if (slide)
		cfg.kaslr_offset = strtoull(slide, NULL, 0);
	load_modules(rs, meta);
	cfg.modules = rs->modules;
	cfg.nr_modules = rs->nr_modules;
	if (opts->module_dir) {
		cfg.module_dir = opts->module_dir;
	} else {
		rs->module_dir = default_module_dir(cfg.vmlinux,
						    cfg.kernel_release);
		cfg.module_dir = rs->module_dir;
	}
	if (!cfg.system_map) {
		map_fd = embedded_system_map(meta, map_path, sizeof(map_path));
		if (map_fd >= 0) {
			cfg.system_map = map_path;
			if (!cfg.vmlinux)
				fprintf(stderr, "idlevm report: kernel symbols from the profile itself (the guest's kallsyms)\n");
		}
	}
	err = ivm_syms_create(&cfg, &rs->syms);
	if (map_fd >= 0)
		close(map_fd);
	if (err) {
		fprintf(stderr, "idlevm report: no symbols: %s\n",
			ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
	}
}

/*
 * The files the profile's frames are in (report/mappings.h): the kernel
 * ("kernel_text", "kernel_build_id"), its modules, and the executables the
 * samples name by build-id, placed by the host copy of each when there is
 * one whose code is in the file.  What cannot be placed is left out (its
 * frames get no mapping) and said once.
 */
#define PAGE_DOWN(x) ((x) & ~0xfffull)
#define PAGE_UP(x) (((x) + 0xfffull) & ~0xfffull)

static void load_mappings(struct report_symbols *rs,
			  const struct meta_lines *meta,
			  struct ivm_mappings *maps)
{
	const char *text = meta_value(meta, "kernel_text");
	unsigned long long lo, hi;
	struct ivm_error *err = NULL;
	size_t i, k;

	if (text && sscanf(text, "%llx %llx", &lo, &hi) == 2 && lo < hi)
		err = ivm_mappings_add(maps, &(struct ivm_mapping){
			.kind = IVM_MAPPING_KERNEL, .start = lo, .limit = hi,
			.file = "[kernel.kallsyms]",
			.build_id = meta_value(meta, "kernel_build_id"),
			.lo = lo, .hi = hi });
	for (i = 0; !err && i < rs->nr_modules; i++) {
		const struct ivm_kmodule *km = &rs->kmods[i];
		uint64_t start = km->base;
		char file[IVM_KMODULE_NAME_LEN + 4];

		if (!km->base || !km->size || km->base + km->size < km->base)
			continue;
		/* A .ko's addresses are offsets into its .text. */
		for (k = 0; k < km->nr_sections; k++)
			if (!strcmp(km->sections[k].name, ".text") &&
			    km->sections[k].addr >= km->base &&
			    km->sections[k].addr < km->base + km->size)
				start = km->sections[k].addr;
		snprintf(file, sizeof(file), "%s.ko", km->name);
		err = ivm_mappings_add(maps, &(struct ivm_mapping){
			.kind = IVM_MAPPING_MODULE, .start = start,
			.limit = km->base + km->size, .file = file,
			.build_id = km->build_id, .lo = start,
			.hi = km->base + km->size });
	}
	for (i = 0; !err && i < rs->nr_build_ids; i++) {
		const struct ivm_symfile *f =
			ivm_syms_user_file(rs->syms, rs->build_ids[i]);
		struct ivm_mapping m = {
			.kind = IVM_MAPPING_USER, .tag = (uint32_t)i + 1,
			.build_id = rs->build_ids[i], .limit = UINT64_MAX,
			.hi = IVM_REPORT_PIE_SPAN,
		};
		uint64_t vaddr, memsz, offset;

		/* Its code in a host copy: its segment, its file name. */
		if (f && ivm_symfile_exec_segment(f, &vaddr, &memsz, &offset) &&
		    vaddr + memsz > vaddr && PAGE_UP(vaddr + memsz)) {
			m.start = m.lo = PAGE_DOWN(vaddr);
			m.limit = m.hi = PAGE_UP(vaddr + memsz);
			m.offset = PAGE_DOWN(offset);
			m.file = ivm_symfile_path(f);
		}
		err = ivm_mappings_add(maps, &m);
	}
	if (err) {
		fprintf(stderr, "idlevm report: mappings: %s\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
	}
}

/*
 * When the run started (wall clock) and how long the file covers: from
 * its start to its END record, or to its last sample when it was cut
 * short.  Profiles from before "start_ns" have the start to the second
 * and cover from their first sample.
 */
static void run_of(const struct meta_lines *meta, uint64_t first_ns,
		   uint64_t last_ns, uint64_t end_ns, struct ivm_report_run *run)
{
	const char *v;
	uint64_t mono0 = first_ns;
	struct tm tm = { 0 };
	char *end;

	memset(run, 0, sizeof(*run));
	run->guest = meta_value(meta, "guest");
	run->kernel = meta_value(meta, "kernel");
	if ((v = meta_value(meta, "idle_every")))
		run->idle_every = (uint32_t)strtoul(v, NULL, 10);
	if ((v = meta_value(meta, "start_ns")))
		run->start_ns = strtoull(v, &end, 10);
	else if ((v = meta_value(meta, "start")) &&
		 (end = strptime(v, "%Y-%m-%dT%H:%M:%SZ", &tm)) && !*end &&
		 timegm(&tm) > 0)
		run->start_ns = (uint64_t)timegm(&tm) * 1000000000ull;
	if ((v = meta_value(meta, "start_mono_ns")))
		mono0 = strtoull(v, NULL, 10);
	if (!end_ns)
		end_ns = last_ns;
	if (mono0 && end_ns > mono0)
		run->duration_ns = end_ns - mono0;
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

static const char *kernel_source_name(const struct ivm_syms *syms)
{
	const char *src = syms ? ivm_syms_kernel_source(syms) : NULL;

	if (!src)
		return "none (raw addresses)";
	if (!strncmp(src, "/proc/self/fd/", 14))
		return "the profile's own (the guest's kallsyms)";
	return src;
}

/* The header: every item but modules and symbols, which get a summary. */
static void print_meta(FILE *out, const struct meta_lines *m)
{
	size_t i, nr_modules = 0, nr_ksyms = 0;

	for (i = 0; i < m->nr; i++) {
		if (!strncmp(m->lines[i], "module: ", 8))
			nr_modules++;
		else if (!strncmp(m->lines[i], "ksym: ", 6))
			nr_ksyms++;
		else if (!strncmp(m->lines[i], "module_sections: ", 17))
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
		{ "module-dir", required_argument, NULL, 'M' },
		{ "address", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "top", required_argument, NULL, 'n' },
		{ "no-threads", no_argument, NULL, 'T' },
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
	while ((c = getopt_long(argc, argv, "f:K:k:m:b:s:M:a:o:n:h", longopts, NULL)) != -1) {
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
			} else {
				fprintf(stderr,
					"idlevm report: unknown format '%s' (text, folded, pprof, svg, timeline, periods)\n",
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
	struct ivm_idle_summary idle;
	uint64_t first_ns = 0, last_ns = 0, end_ns = 0;
	struct ivm_mappings *mappings = ivm_mappings_create();
	struct ivm_outfile outfile = { .fd = -1 };
	uint64_t *pcs = malloc(IVM_SAMPLE_MAX_FRAMES * sizeof(*pcs));
	struct ivm_sample copy;
	size_t i;

	if (!pcs || !mappings) {
		free(pcs);
		ivm_mappings_destroy(mappings);
		return ivm_error_report(&ivm_enomem);
	}
	err = ivm_profile_reader_open(path, &reader);
	if (err) {
		free(pcs);
		ivm_mappings_destroy(mappings);
		return ivm_error_report(err);
	}
	err = ivm_calltree_create(grouping, &tree);
	if (err) {
		free(pcs);
		ivm_mappings_destroy(mappings);
		ivm_profile_reader_destroy(reader);
		return ivm_error_report(err);
	}
	ivm_idle_summary_init(&idle);
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
			err = ivm_calltree_add(tree, user_exe(&syms, &rec.sample,
							      &copy, pcs));
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
		case IVM_RECORD_END:
			end_ns = rec.stats.time_ns;
			break;
		default:
			break;
		}
	}
	damage = ivm_profile_reader_damage(reader);
	load_symbols(&syms, opts, &meta);
	if (opts->nr_addresses) {
		print_addresses(opts, &syms);
		goto out;
	}
	if (!opts->sym.frames) {
		opts->sym.frames = symbolize;
		opts->sym.ctx = &syms;
	}
	load_mappings(&syms, &meta, mappings);
	opts->mappings = mappings;
	run_of(&meta, first_ns, last_ns, end_ns, &opts->run);
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
			kernel_source_name(syms.syms));
		fprintf(opts->out, "  samples: %" PRIu64 " (to_idle %" PRIu64
			", from_idle %" PRIu64 ", on_cpu %" PRIu64 ")\n",
			samples, ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE),
			ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE),
			ivm_calltree_total(tree, IVM_SAMPLE_ON_CPU));
		ivm_idle_summary_print(&idle, opts->out);
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
	if (opts->format != IVM_REPORT_TEXT)
		ivm_idle_summary_print(&idle, stderr);
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
	/* What pointed into this profile goes with it. */
	opts->mappings = NULL;
	opts->run = (struct ivm_report_run){ 0 };
	ivm_mappings_destroy(mappings);
	ivm_syms_destroy(syms.syms);
	free_modules(&syms);
	for (i = 0; i < syms.nr_build_ids; i++)
		free(syms.build_ids[i]);
	for (i = 0; i < syms.nr_exe_paths; i++)
		free(syms.exe_paths[i]);
	free(pcs);
	meta_free(&meta);
	ivm_idle_summary_deinit(&idle);
	ivm_calltree_destroy(tree);
	ivm_profile_reader_destroy(reader);
	return err ? ivm_error_report(err) : 0;
}
