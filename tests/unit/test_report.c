// SPDX-License-Identifier: MIT
/*
 * Report writers: text and folded with inline frames and file:line, pprof
 * (decoded by protoc against vmm/report/report_pprof.proto, totals checked), the
 * SVG flame graph, and `idlevm report` over a profile whose kernel
 * addresses are the real vmlinux's, slid.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/calltree.h"
#include "cmd/commands.h"
#include "profile/profile_file.h"
#include "report/report.h"
#include "report/report_pprof.h"
#include "report/report_svg.h"

/*
 * A symbolizer that knows three pcs: 0x1000 is "inner" inlined into
 * "outer" (a.c:10, call site a.c:20), 0x2000 is "main" (a.c:30), kernel
 * 0xffffffff81000010 is "schedule"; anything else is unknown.
 */
static unsigned int fake_frames(void *ctx, enum ivm_node_type type,
				uint64_t pc, struct ivm_report_frame *out,
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

Test(report_writers, pprof_decodes_with_protoc_and_totals_match)
{
	struct ivm_calltree *tree = make_tree();
	char path[] = "/tmp/ivm-test-pprof-XXXXXX";
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
	unlink(path);
	cr_assert_eq(totals[0], ivm_calltree_total(tree, IVM_SAMPLE_TO_IDLE));
	cr_assert_eq(totals[1], ivm_calltree_total(tree, IVM_SAMPLE_FROM_IDLE));
	cr_assert_eq(totals[2], ivm_calltree_total(tree, IVM_SAMPLE_ON_CPU));
	cr_assert_eq(inl, 1, "the inlined pc is one location with two lines");
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

Test(report_file, real_vmlinux_inline_and_mismatch, .timeout = 60)
{
	char path[] = "/tmp/ivm-test-prof-XXXXXX";
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
	unlink(path);
}
