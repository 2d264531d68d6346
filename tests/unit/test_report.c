// SPDX-License-Identifier: MIT
/*
 * Report writers: text and folded with inline frames and file:line, pprof
 * (decoded by protoc against vmm/report/report_pprof.proto, totals checked), the
 * SVG flame graph, and `idlevm report` over a profile whose kernel
 * addresses are the real vmlinux's, slid.
 */
#include <criterion/criterion.h>
#include <link.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/calltree.h"
#include "cmd/commands.h"
#include "profile/profile_file.h"
#include "report/mappings.h"
#include "report/report.h"
#include "report/report_pprof.h"
#include "report/report_svg.h"
#include "symfile.h"
#include "tmp_files.h"

/*
 * A symbolizer that knows three pcs: 0x1000 is "inner" inlined into
 * "outer" (a.c:10, call site a.c:20), 0x2000 is "main" (a.c:30), kernel
 * 0xffffffff81000010 is "schedule"; anything else is unknown.
 */
static unsigned int fake_frames(void *ctx, enum ivm_node_type type,
				uint64_t pc, bool exact, struct ivm_report_frame *out,
				unsigned int max)
{
	if (max < 2)
		return 0;
	if (type == IVM_NODE_USER && pc == 0x1000) {
		out[0] = (struct ivm_report_frame){ .function = "inner",
			.file = "a.c", .line = 10, .inlined = true };
		out[1] = (struct ivm_report_frame){ .function = "outer",
			.file = "a.c", .line = 20 };
		return 2;
	}
	if (type == IVM_NODE_USER && pc == 0x2000) {
		out[0] = (struct ivm_report_frame){ .function = "main",
			.file = "a.c", .line = 30 };
		return 1;
	}
	if (type == IVM_NODE_KERNEL && pc == 0xffffffff81000010ull) {
		out[0] = (struct ivm_report_frame){ .function = "schedule" };
		return 1;
	}
	return 0;
}

static const uint64_t kpcs[] = { 0xffffffff81000010ull, 0xffffffff81999999ull };
static const uint64_t upcs[] = { 0x1000, 0x2000 };

static struct ivm_calltree *make_tree(void)
{
	struct ivm_calltree *tree;
	struct ivm_sample s = {
		.pid = 7, .tid = 8, .comm = "worker", .nr_kernel = 2,
		.nr_user = 2, .kernel_pcs = kpcs, .user_pcs = upcs,
	};
	int i;

	cr_assert_null(ivm_calltree_create(IVM_CALLTREE_BY_PROCESS |
					   IVM_CALLTREE_BY_THREAD, &tree));
	for (i = 0; i < 5; i++) {
		s.kind = i < 3 ? IVM_SAMPLE_TO_IDLE : IVM_SAMPLE_FROM_IDLE;
		cr_assert_null(ivm_calltree_add(tree, &s));
	}
	s.nr_kernel = 0;
	s.kind = IVM_SAMPLE_ON_CPU;
	cr_assert_null(ivm_calltree_add(tree, &s));
	return tree;
}

static char *run_writer(struct ivm_calltree *tree, int format, int kind)
{
	struct ivm_report_options opts = {
		.kind = kind, .top = 10,
		.sym = { .frames = fake_frames },
	};
	char *buf = NULL;
	size_t len = 0;

	opts.out = open_memstream(&buf, &len);
	cr_assert(opts.out);
	switch (format) {
	case IVM_REPORT_TEXT:
		ivm_report_text(tree, &opts);
		break;
	case IVM_REPORT_FOLDED:
		ivm_report_folded(tree, &opts);
		break;
	case IVM_REPORT_SVG:
		cr_assert_null(ivm_report_svg(tree, &opts));
		break;
	}
	fclose(opts.out);
	return buf;
}

Test(report_writers, folded_expands_inline_frames)
{
	struct ivm_calltree *tree = make_tree();
	char *out = run_writer(tree, IVM_REPORT_FOLDED, -1);

	cr_assert(strstr(out,
		"to_idle;pid_7;worker/8;main;outer;inner_[i];"
		"0xffffffff81999999_[k];schedule_[k] 3\n"), "%s", out);
	cr_assert(strstr(out, "from_idle;pid_7;worker/8;main;outer;"
			      "inner_[i];0xffffffff81999999_[k];schedule_[k] 2\n"),
		  "%s", out);
	cr_assert(strstr(out, "on_cpu;pid_7;worker/8;main;outer;inner_[i] 1\n"),
		  "%s", out);
	free(out);
	ivm_calltree_destroy(tree);
}

/*
 * Time values: to-idle samples weighed by their idle_ns (one without it
 * counts but weighs nothing), from-idle ones by host_wake_ns.
 */
Test(report_writers, stacks_weighed_by_time_values)
{
	struct ivm_counter idle = { IVM_COUNTER_IDLE_NS, 2000000 };
	struct ivm_counter wake = { IVM_COUNTER_HOST_WAKE_NS, 30000 };
	struct ivm_sample s = {
		.pid = 7, .tid = 8, .comm = "worker", .nr_kernel = 2,
		.nr_user = 2, .kernel_pcs = kpcs, .user_pcs = upcs,
		.kind = IVM_SAMPLE_TO_IDLE, .nr_counters = 1,
		.counters = &idle,
	};
	struct ivm_report_options opts = {
		.kind = IVM_SAMPLE_TO_IDLE, .top = 10,
		.sym = { .frames = fake_frames }, .value = IVM_VALUE_IDLE_TIME,
	};
	struct ivm_calltree *tree;
	char *buf = NULL;
	size_t len = 0;
	uint64_t ns;

	cr_assert_null(ivm_calltree_create(IVM_CALLTREE_BY_PROCESS |
					   IVM_CALLTREE_BY_THREAD, &tree));
	cr_assert_null(ivm_calltree_add(tree, &s));
	cr_assert_null(ivm_calltree_add(tree, &s));
	s.nr_counters = 0;			/* a period without an end */
	cr_assert_not(ivm_sample_time_value(&s, &ns));
	cr_assert_null(ivm_calltree_add(tree, &s));
	s.kind = IVM_SAMPLE_FROM_IDLE;
	s.nr_counters = 1;
	s.counters = &wake;
	cr_assert(ivm_sample_time_value(&s, &ns));
	cr_assert_eq(ns, 30000);
	cr_assert_null(ivm_calltree_add(tree, &s));
	/* A counter of the other kind's value is not this kind's. */
	s.kind = IVM_SAMPLE_TO_IDLE;
	cr_assert_not(ivm_sample_time_value(&s, &ns));
	cr_assert_eq(ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE), 3);
	cr_assert_eq(ivm_calltree_timed(tree, IVM_SAMPLE_TO_IDLE), 2);
	cr_assert_eq(ivm_calltree_node(tree, 0)->total_ns[IVM_SAMPLE_TO_IDLE],
		     4000000);
	cr_assert_eq(ivm_calltree_node(tree, 0)->total_ns[IVM_SAMPLE_FROM_IDLE],
		     30000);
	opts.out = open_memstream(&buf, &len);
	ivm_report_folded(tree, &opts);
	fclose(opts.out);
	cr_assert(strstr(buf, "pid_7;worker/8;main;outer;inner_[i];"
			      "0xffffffff81999999_[k];schedule_[k] 4000000\n"),
		  "%s", buf);
	free(buf);
	buf = NULL;
	opts.out = open_memstream(&buf, &len);
	ivm_report_text(tree, &opts);
	fclose(opts.out);
	cr_assert(strstr(buf, "by idle time (0.004 s in 2 of 3 samples)"),
		  "%s", buf);
	cr_assert(strstr(buf, "100.00%  4.000 ms"), "%s", buf);
	free(buf);
	cr_assert_eq(ivm_report_value_kind(IVM_VALUE_WAKE_DELAY),
		     IVM_SAMPLE_FROM_IDLE);
	cr_assert_not(ivm_report_value_parse("idle", &opts.value));
	ivm_calltree_destroy(tree);
}

Test(report_writers, text_shows_file_line_and_inline)
{
	struct ivm_calltree *tree = make_tree();
	char *out = run_writer(tree, IVM_REPORT_TEXT, IVM_SAMPLE_TO_IDLE);

	cr_assert(strstr(out, "== top to-idle stacks (3 samples) =="), "%s", out);
	cr_assert(strstr(out, "          schedule_[k]\n"
			      "          0xffffffff81999999_[k]\n"
			      "          inner  (inlined)  a.c:10\n"
			      "          outer  a.c:20\n"
			      "          main  a.c:30\n"
			      "          worker/8  (thread)\n"
			      "          pid 7  (process)\n"), "%s", out);
	free(out);
	ivm_calltree_destroy(tree);
}

Test(report_writers, svg_is_self_contained_and_escaped)
{
	struct ivm_calltree *tree = make_tree();
	char *out = run_writer(tree, IVM_REPORT_SVG, -1);

	cr_assert(!strncmp(out, "<?xml", 5));
	cr_assert(strstr(out, "</svg>\n"));
	cr_assert(strstr(out, "data-n=\"to-idle\""));
	cr_assert(strstr(out, "data-n=\"from-idle\""));
	cr_assert(strstr(out, "data-n=\"inner [inlined]\""));
	cr_assert(strstr(out, "data-n=\"schedule [k]\""));
	/* Distinct colour families: blue for to-idle, orange from-idle. */
	cr_assert(strstr(out, "fill=\"hsl(2"));
	cr_assert(!strstr(out, "http://www.w3.org/1999/xhtml\" src"));
	cr_assert(!strstr(out, "<script src"), "no external scripts");
	free(out);
	ivm_calltree_destroy(tree);
}

static bool have_protoc(void)
{
	return !access("/usr/bin/protoc", X_OK);
}

/* Sum of the i-th value of every sample in protoc's text output. */
static void protoc_totals(const char *pb_gz, uint64_t totals[3],
			  int *nr_locations_with_inline)
{
	char cmd[512], line[256];
	int vi = -1, lines = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "gunzip -c %s | protoc --decode perftools.profiles.Profile "
		 "-I vmm/report vmm/report/report_pprof.proto", pb_gz);
	p = popen(cmd, "r");
	cr_assert(p);
	*nr_locations_with_inline = 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long v;

		if (!strncmp(line, "sample {", 8))
			vi = 0;
		else if (!strncmp(line, "location {", 10))
			lines = 0;
		else if (sscanf(line, "  value: %llu", &v) == 1 && vi >= 0 &&
			 vi < 3)
			totals[vi++] += v;
		else if (!strncmp(line, "  line {", 8) && ++lines == 2)
			(*nr_locations_with_inline)++;
	}
	cr_assert_eq(pclose(p), 0, "protoc failed to decode %s", pb_gz);
}

/* Removed by the tests' fini, which runs after a failed assertion too. */
static char prof_path[] = "/tmp/ivm-test-prof-XXXXXX";
static char pb_path[] = "/tmp/ivm-test-pb-XXXXXX";

static void remove_files(void)
{
	if (IVM_TMP_MADE(prof_path))
		unlink(prof_path);
	if (IVM_TMP_MADE(pb_path))
		unlink(pb_path);
}

Test(report_writers, pprof_decodes_with_protoc_and_totals_match,
     .fini = remove_files)
{
	struct ivm_calltree *tree = make_tree();
	char *path = prof_path;
	struct ivm_report_options opts = {
		.kind = -1, .sym = { .frames = fake_frames },
	};
	uint64_t totals[3] = { 0 };
	int inl, fd;

	if (!have_protoc())
		cr_skip_test("protoc (protobuf-compiler) not installed");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	opts.out = fdopen(fd, "w");
	cr_assert_null(ivm_report_pprof(tree, &opts));
	fclose(opts.out);
	protoc_totals(path, totals, &inl);
	cr_assert_eq(totals[0], ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE));
	cr_assert_eq(totals[1], ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE));
	cr_assert_eq(totals[2], ivm_calltree_total(tree, IVM_SAMPLE_ON_CPU));
	cr_assert_eq(inl, 1, "the inlined pc is one location with two lines");
	ivm_calltree_destroy(tree);
}

/*
 * `go tool pprof` (Debian's golang-go), the reader every pprof backend
 * agrees with, on a pprof file: its -raw dump with the file's own frames
 * (-symbolize=none: nothing looked up on this host).  NULL when go is not
 * installed.
 */
static char *pprof_raw(const char *pb_gz)
{
	char cmd[512], *buf = NULL;
	size_t len = 0, n;
	char chunk[4096];
	FILE *p, *out;

	if (access("/usr/bin/go", X_OK))
		return NULL;
	snprintf(cmd, sizeof(cmd), "go tool pprof -symbolize=none -raw %s 2>&1",
		 pb_gz);
	p = popen(cmd, "r");
	cr_assert(p);
	out = open_memstream(&buf, &len);
	cr_assert(out);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, out);
	fclose(out);
	cr_assert_eq(pclose(p), 0, "go tool pprof failed: %s", buf);
	return buf;
}

Test(report_writers, pprof_mappings_time_and_raw_frames_in_go_pprof,
     .fini = remove_files)
{
	struct ivm_calltree *tree = make_tree();
	struct ivm_mappings *maps = ivm_mappings_create();
	char *path = prof_path;
	struct ivm_report_options opts = {
		.kind = -1, .sym = { .frames = fake_frames },
		.run = { .start_ns = 1700000000123456789ull,
			 .duration_ns = 5000000000ull, .idle_every = 2,
			 .guest = "web01", .kernel = "6.1.0-56-cloud-amd64" },
	};
	char *raw;
	int fd;

	cr_assert(maps);
	cr_assert_null(ivm_mappings_add(maps, &(struct ivm_mapping){
		.kind = IVM_MAPPING_KERNEL, .start = 0xffffffff81000000ull,
		.limit = 0xffffffff82000000ull, .file = "[kernel.kallsyms]",
		.build_id = "aaaa", .lo = 0xffffffff81000000ull,
		.hi = 0xffffffff82000000ull }));
	/* A module inside the kernel's range wins over it. */
	cr_assert_null(ivm_mappings_add(maps, &(struct ivm_mapping){
		.kind = IVM_MAPPING_MODULE, .start = 0xffffffff81999000ull,
		.limit = 0xffffffff8199a000ull, .file = "virtio.ko",
		.build_id = "cccc", .lo = 0xffffffff81999000ull,
		.hi = 0xffffffff8199a000ull }));
	cr_assert_null(ivm_mappings_add(maps, &(struct ivm_mapping){
		.kind = IVM_MAPPING_USER, .start = 0x1000, .limit = 0x3000,
		.offset = 0x1000, .file = "/usr/bin/worker", .build_id = "bbbb",
		.lo = 0x1000, .hi = 0x3000 }));
	/* Another object's frames at the same addresses: by its tag only. */
	cr_assert_null(ivm_mappings_add(maps, &(struct ivm_mapping){
		.kind = IVM_MAPPING_USER, .tag = 7, .limit = UINT64_MAX,
		.build_id = "dddd", .lo = 0, .hi = 1ull << 30 }));
	cr_assert_eq(ivm_mappings_find(maps, IVM_NODE_USER, 0x1000)->tag, 0);
	cr_assert_eq(ivm_mappings_find(maps, IVM_NODE_USER,
				       7ull << IVM_REPORT_USER_TAG_SHIFT |
				       0x1000)->tag, 7);
	cr_assert_null(ivm_mappings_find(maps, IVM_NODE_USER, 0x4000));
	opts.mappings = maps;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	opts.out = fdopen(fd, "w");
	cr_assert_null(ivm_report_pprof(tree, &opts));
	fclose(opts.out);
	raw = pprof_raw(path);
	/* A skipped test's fini does not run. */
	unlink(path);
	if (!raw)
		cr_skip_test("go (golang-go) not installed");
	cr_assert(strstr(raw, "Time: 2023-11-14 22:13:20.123456789 +0000 UTC"),
		  "%s", raw);
	cr_assert(strstr(raw, "Duration: 5s"), "%s", raw);
	cr_assert(strstr(raw, "PeriodType: idle_transitions count\nPeriod: 2"),
		  "%s", raw);
	cr_assert(strstr(raw, "Comment: guest: web01"), "%s", raw);
	/* One mapping per file a location is in, the executable first. */
	cr_assert(strstr(raw, "Mappings\n"
		  "1: 0x1000/0x3000/0x1000 /usr/bin/worker bbbb [FN][FL][LN][IN]\n"
		  "2: 0xffffffff81000000/0xffffffff82000000/0x0 [kernel.kallsyms] aaaa [FN]\n"
		  "3: 0xffffffff81999000/0xffffffff8199a000/0x0 virtio.ko cccc \n"),
		  "%s", raw);
	/*
	 * Addresses are the calls (return address - 1); an inlined call is
	 * one location, innermost first; a pc nothing names has no lines.
	 */
	cr_assert(strstr(raw, ": 0xfff M=1 inner a.c:10 s=0\n"
			      "             outer a.c:20 s=0\n"), "%s", raw);
	cr_assert(strstr(raw, ": 0x1fff M=1 main a.c:30 s=0\n"), "%s", raw);
	cr_assert(strstr(raw, ": 0xffffffff8100000f M=2 schedule :0 s=0\n"),
		  "%s", raw);
	cr_assert(strstr(raw, ": 0xffffffff81999998 M=3 \n"), "%s", raw);
	free(raw);
	ivm_mappings_destroy(maps);
	ivm_calltree_destroy(tree);
}

/* ---- idlevm report over a profile with real kernel addresses ---------- */

#define VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"
#define SLIDE 0x29c00000ull

static uint64_t map_addr(const char *name)
{
	char cmd[256];
	unsigned long long a = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "awk '$3 == \"%s\" { print $1; exit }' %s", name,
		 "/var/cache/idlevm/6.1.0-56-cloud-amd64/System.map");
	p = popen(cmd, "r");
	cr_assert(p);
	cr_assert_eq(fscanf(p, "%llx", &a), 1);
	pclose(p);
	return a;
}

static void write_profile(const char *path, const char *release)
{
	struct ivm_profile_writer *w;
	uint64_t k[2];
	struct ivm_sample s = {
		.kind = IVM_SAMPLE_TO_IDLE, .pid = 100, .tid = 101,
		.comm = "ls-worker-0", .nr_kernel = 2, .kernel_pcs = k,
	};
	char slide[32];
	int i;

	/* Return addresses inside the caller, as the unwinder records. */
	k[0] = map_addr("__schedule") + 0x300 + SLIDE;
	k[1] = map_addr("schedule") + 0x40 + SLIDE;
	snprintf(slide, sizeof(slide), "0x%llx", SLIDE);
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "kernel", release));
	cr_assert_null(ivm_profile_write_meta(w, "vmlinux", VMLINUX));
	cr_assert_null(ivm_profile_write_meta(w, "kaslr_offset", slide));
	for (i = 0; i < 4; i++)
		cr_assert_null(ivm_profile_write_sample(w, &s));
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));
}

static char *report_of(const char *prof, enum ivm_report_format format)
{
	struct ivm_report_options opts = { .kind = -1, .top = 10,
					   .format = format };
	char *buf = NULL;
	size_t len = 0;

	opts.out = open_memstream(&buf, &len);
	cr_assert_eq(ivm_report_file(prof, false, &opts,
				     IVM_CALLTREE_BY_PROCESS |
				     IVM_CALLTREE_BY_THREAD), 0);
	fclose(opts.out);
	return buf;
}

Test(report_file, real_vmlinux_inline_and_mismatch, .timeout = 60,
     .fini = remove_files)
{
	char *path = prof_path;
	char *out;
	int fd;

	if (access(VMLINUX, R_OK))
		cr_skip_test("%s not present (make image)", VMLINUX);
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	write_profile(path, "6.1.0-56-cloud-amd64");
	out = report_of(path, IVM_REPORT_TEXT);
	cr_assert(strstr(out, "kernel symbols: " VMLINUX), "%s", out);
	cr_assert(strstr(out, "schedule_[k]  kernel/sched/core.c:"), "%s", out);
	cr_assert(strstr(out, "__schedule_[k]"), "%s", out);
	free(out);

	/* The guest ran another kernel: no names from this vmlinux. */
	write_profile(path, "6.1.0-99-cloud-amd64");
	out = report_of(path, IVM_REPORT_FOLDED);
	cr_assert(!strstr(out, "schedule"), "%s", out);
	cr_assert(strstr(out, "0xffffffff"), "%s", out);
	free(out);
}

/* ---- pprof of a recorded profile: mappings from what the file says ----- */

/* A function of this very binary: a user frame a real ELF file names. */
static __attribute__((noinline)) int fleet_user_frame(volatile int x)
{
	return x * 3 + 1;
}

static int main_program_bias(struct dl_phdr_info *info, size_t size,
			     void *data)
{
	*(uint64_t *)data = info->dlpi_addr;
	return 1;	/* the first object is the program itself */
}

static void elf_build_id(const char *path, char *hex, size_t len)
{
	struct ivm_symfile *f;

	cr_assert_null(ivm_symfile_open_elf(path, &f), "opening %s", path);
	snprintf(hex, len, "%s", ivm_symfile_build_id_hex(f));
	ivm_symfile_destroy(f);
	cr_assert(hex[0], "%s has no build-id", path);
}

Test(report_file, pprof_mappings_time_and_names_from_the_profile,
     .timeout = 60, .fini = remove_files)
{
	char *path = prof_path, *pb = pb_path;
	char exe[1024], exe_id[160], k_id[160], buf[256], want[2048];
	struct ivm_report_options opts = { .kind = -1, .top = 10,
					   .format = IVM_REPORT_PPROF };
	uint64_t k[2], u[1], bias = 0, stext, etext;
	struct ivm_label labels[2];
	struct ivm_sample s = {
		.kind = IVM_SAMPLE_TO_IDLE, .pid = 100, .tid = 101,
		.comm = "ls-worker-0", .nr_kernel = 2, .kernel_pcs = k,
		.nr_user = 1, .user_pcs = u, .nr_labels = 2, .labels = labels,
	};
	struct ivm_profile_writer *w;
	char *raw;
	int fd, i;
	ssize_t n;

	if (access(VMLINUX, R_OK))
		cr_skip_test("%s not present (make image)", VMLINUX);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';
	elf_build_id(exe, exe_id, sizeof(exe_id));
	elf_build_id(VMLINUX, k_id, sizeof(k_id));
	dl_iterate_phdr(main_program_bias, &bias);
	stext = map_addr("_stext") + SLIDE;
	etext = map_addr("_etext") + SLIDE;

	/* As the profiler records: slid kernel pcs, run-time user pcs. */
	k[0] = map_addr("__schedule") + 0x300 + SLIDE;
	k[1] = map_addr("schedule") + 0x40 + SLIDE;
	cr_assert_eq(fleet_user_frame(1), 4);
	u[0] = (uint64_t)(uintptr_t)fleet_user_frame + 4;
	labels[0] = (struct ivm_label){ "user_build_id", exe_id };
	snprintf(buf, sizeof(buf), "0x%" PRIx64, bias);
	labels[1] = (struct ivm_label){ "user_bias", buf };
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "guest", "demo"));
	cr_assert_null(ivm_profile_write_meta(w, "kernel", "6.1.0-56-cloud-amd64"));
	cr_assert_null(ivm_profile_write_meta(w, "vmlinux", VMLINUX));
	snprintf(want, sizeof(want), "0x%llx", SLIDE);
	cr_assert_null(ivm_profile_write_meta(w, "kaslr_offset", want));
	cr_assert_null(ivm_profile_write_meta(w, "start_ns", "1700000000000000000"));
	cr_assert_null(ivm_profile_write_meta(w, "start_mono_ns", "1000"));
	cr_assert_null(ivm_profile_write_meta(w, "kernel_build_id", k_id));
	snprintf(want, sizeof(want), "0x%" PRIx64 " 0x%" PRIx64, stext, etext);
	cr_assert_null(ivm_profile_write_meta(w, "kernel_text", want));
	cr_assert_null(ivm_profile_write_meta(w, "binary", exe));
	cr_assert_null(ivm_profile_write_meta(w, "module",
		"virtio_console 0xffffffffc03da000 0xa000 "
		"2a4768ab9c201b9aa409616706c4aafd0defc4be"));
	cr_assert_null(ivm_profile_write_meta(w, "module_sections",
		"virtio_console .text=0xffffffffc03da000,.data=0xffffffffc03e0000"));
	for (i = 0; i < 4; i++) {
		s.time_ns = 1000 + 500000000ull * (uint64_t)i;
		cr_assert_null(ivm_profile_write_sample(w, &s));
	}
	/* A frame in the module: its own mapping, even unnamed. */
	k[0] = 0xffffffffc03da123ull;
	cr_assert_null(ivm_profile_write_sample(w, &s));
	cr_assert_null(ivm_profile_writer_finish(w, 1000 + 3000000000ull,
						 NULL, 0));

	fd = mkstemp(pb);
	cr_assert_geq(fd, 0);
	close(fd);
	opts.output = pb;
	cr_assert_eq(ivm_report_file(path, false, &opts,
				     IVM_CALLTREE_BY_PROCESS |
				     IVM_CALLTREE_BY_THREAD), 0);
	raw = pprof_raw(pb);
	/* A skipped test's fini does not run. */
	unlink(path);
	unlink(pb);
	if (!raw)
		cr_skip_test("go (golang-go) not installed");
	cr_assert(strstr(raw, "Time: 2023-11-14 22:13:20 +0000 UTC"), "%s", raw);
	cr_assert(strstr(raw, "Duration: 3s"), "%s", raw);
	/* This binary, by build-id, placed by its code segment; names. */
	snprintf(want, sizeof(want), " %s %s [FN][FL][LN][IN]\n", exe, exe_id);
	cr_assert(strstr(raw, want), "no %s in %s", want, raw);
	cr_assert(strstr(raw, "fleet_user_frame tests/unit/test_report.c:"),
		  "%s", raw);
	snprintf(want, sizeof(want),
		 "0x%" PRIx64 "/0x%" PRIx64 "/0x0 [kernel.kallsyms] %s [FN][FL][LN][IN]\n",
		 stext, etext, k_id);
	cr_assert(strstr(raw, want), "no %s in %s", want, raw);
	cr_assert(strstr(raw, " schedule kernel/sched/core.c:"), "%s", raw);
	cr_assert(strstr(raw, "0xffffffffc03da000/0xffffffffc03e4000/0x0 "
			      "virtio_console.ko "
			      "2a4768ab9c201b9aa409616706c4aafd0defc4be "),
		  "%s", raw);
	free(raw);
}

/*
 * An interrupted pc at a function's first instruction (the leaf of a task
 * caught running, the frame after an interrupt entry) is named by that
 * function: looked up at pc, not pc - 1, which is the function before.
 * Return addresses at pc - 1 as before.
 */
Test(report_file, exact_pcs_are_looked_up_at_pc, .timeout = 60,
     .fini = remove_files)
{
	char *path = prof_path;
	struct ivm_profile_writer *w;
	uint64_t k[2];
	uint8_t kf[2] = { IVM_PC_EXACT, 0 };
	struct ivm_sample s = {
		.kind = IVM_SAMPLE_ON_CPU, .pid = 100, .tid = 101,
		.comm = "spin", .nr_kernel = 2, .kernel_pcs = k,
		.kernel_flags = kf,
	};
	char slide[32];
	char *out;
	int fd;

	if (access(VMLINUX, R_OK))
		cr_skip_test("%s not present (make image)", VMLINUX);
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	/* The leaf at schedule's first byte; its caller a return address. */
	k[0] = map_addr("schedule") + SLIDE;
	k[1] = map_addr("schedule_timeout") + 0x20 + SLIDE;
	snprintf(slide, sizeof(slide), "0x%llx", SLIDE);
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "kernel",
					      "6.1.0-56-cloud-amd64"));
	cr_assert_null(ivm_profile_write_meta(w, "vmlinux", VMLINUX));
	cr_assert_null(ivm_profile_write_meta(w, "kaslr_offset", slide));
	cr_assert_null(ivm_profile_write_sample(w, &s));
	/* The same pc as a return address names the function before it. */
	kf[0] = 0;
	cr_assert_null(ivm_profile_write_sample(w, &s));
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));
	out = report_of(path, IVM_REPORT_FOLDED);
	cr_assert(strstr(out, "schedule_timeout_[k];schedule_[k] 1"), "%s",
		  out);
	cr_assert(!strstr(out, "schedule_timeout_[k];schedule_[k] 2"), "%s",
		  out);
	free(out);
}
