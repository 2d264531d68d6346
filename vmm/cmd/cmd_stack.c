// SPDX-License-Identifier: MIT
/*
 * idlevm stack: print the call stack, kernel then user, of guest threads,
 * read from the host.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "base/text_safe.h"
#include "profile/capture.h"
#include "cmd/commands.h"
#include "kernel/guest.h"
#include "kernel/kmodules.h"
#include "kernel/kernel_layout.h"
#include "kernel/ksyms.h"
#include "profile/ksym_hits.h"
#include "report/frame_names.h"

static void stack_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm stack (--domain NAME | --qmp PATH | --core FILE)\n"
"                    (--tid TID | --pid PID) [options]\n"
"\n"
"Print the kernel and user call stack of a guest thread (--tid) or of every\n"
"thread of a process (--pid), innermost frame first.\n"
"\n"
IVM_GUEST_USAGE
"  -t, --tid TID        the guest thread\n"
"  -p, --pid PID        every thread of the guest process\n"
"  -b, --binary FILE    host copy of a guest executable: DWARF CFI for its\n"
"                       user frames and its symbols (repeatable; PIEs too)\n"
"  -s, --symdir DIR     look for each process's executable by its build-id\n"
"                       in DIR/.build-id/xx/rest (or rest.debug, if it has\n"
"                       CFI): DWARF CFI and symbols for its user frames\n"
"  -h, --help           this help\n");
}

static const char *truncation(uint32_t flags)
{
	if (flags & IVM_STACK_TRUNC_FAULT)
		return "truncated: unreadable memory";
	if (flags & IVM_STACK_TRUNC_CAP)
		return "truncated: frame cap";
	if (flags & IVM_STACK_TRUNC_LOOP)
		return "truncated: loop";
	if (flags & IVM_STACK_TRUNC_BADINFO)
		return "truncated: no unwind information";
	if (flags & IVM_STACK_TRUNC_NOCFI)
		return "truncated: CFI not in guest memory";
	return NULL;
}

/* The vCPU the task is current on, or -1. */
static int running_on(struct ivm_guest *g, uint64_t task)
{
	size_t i;

	for (i = 0; i < g->nr_vcpus; i++) {
		uint64_t cur;
		struct ivm_error *err;

		if (g->vcpus[i].cpu < 0)
			continue;
		err = ivm_kernel_current_task(g->layout,
					      (unsigned int)g->vcpus[i].cpu,
					      NULL, &cur);
		if (!err && cur == task)
			return (int)i;
		ivm_error_destroy(err);
	}
	return -1;
}

/* What the user part was unwound with, when the executable is known. */
static void print_exe(const struct ivm_capture_exe *x)
{
	char hex[2 * IVM_UBINARY_MAX_BUILD_ID + 1];

	if (!x->known)
		return;
	printf("  (executable build-id %s",
	       ivm_build_id_hex(x->id.build_id, x->id.build_id_len, hex));
	if (x->id.dyn)
		printf(", PIE at bias 0x%" PRIx64, x->id.bias);
	if (x->from_page_cache)
		printf(", headers from the page cache");
	if (x->host_path)
		printf("; user frames by the CFI of %s)\n", x->host_path);
	else if (x->guest_cfi && x->why)
		printf("; user frames by the CFI the guest holds: %s)\n",
		       x->why);
	else if (x->guest_cfi)
		printf("; user frames by the CFI the guest holds)\n");
	else
		printf("; user frames by frame pointers: %s)\n",
		       x->why ? x->why : "no host copy");
}

/* Reads of a thread's stack before giving up on a consistent one. */
#define STACK_TRIES	20

/* One thread's capture, kept until every name is known. */
struct stack_result {
	const struct ivm_guest_task *task;
	int vcpu;			/* guest vCPU index, or -1 */
	int tries;
	struct ivm_capture cap;
};

static int capture_stack(struct ivm_guest *g, struct ivm_capture_engine *e,
			 const struct ivm_guest_task *t,
			 struct stack_result *res)
{
	struct ivm_capture *cap = &res->cap;
	struct ivm_error *err;
	int tries, vcpu = -1;

	res->task = t;
	/* A task that runs during the read spoils it: read again. */
	for (tries = 0; tries < STACK_TRIES; tries++) {
		const struct ivm_x86_regs *regs = NULL;
		int cpl = -1, cpu = -1;

		vcpu = running_on(g, t->addr);
		if (vcpu >= 0) {
			err = ivm_guest_refresh_vcpus(g);
			if (err)
				return ivm_error_report(err);
			if (running_on(g, t->addr) != vcpu)
				continue;
			regs = &g->vcpus[vcpu].regs;
			cpl = g->vcpus[vcpu].cpl;
			cpu = g->vcpus[vcpu].cpu;
		}
		/*
		 * In a memory dump nothing runs: a runnable task's saved
		 * frame is as good as a sleeping one's.
		 */
		err = ivm_capture_task_flags(e, t->addr, regs, cpl, cpu,
					     g->qmp ? 0 : IVM_CAPTURE_F_HELD,
					     cap);
		if (err)
			return ivm_error_report(err);
		if (!g->qmp)
			break;
		/* Live registers that led nowhere: as if it ran, read again. */
		if (cap->outcome == IVM_CAPTURE_KEPT &&
		    !(regs && ivm_capture_live_cut(cap)))
			break;
	}
	res->vcpu = vcpu >= 0 ? g->vcpus[vcpu].index : -1;
	res->tries = tries;
	return 0;
}

/*
 * One frame as the report names it: inline frames first, each on a line
 * of its own ("inlined: NAME FILE:LINE"), then "#N ADDR NAME+OFF
 * [FILE:LINE] [k]".  addr is the run-time address.
 */
static void print_frame(const struct ivm_symbolizer *sym, unsigned int n,
			enum ivm_node_type type, uint64_t pc, uint64_t addr,
			uint8_t flags)
{
	struct ivm_report_frame f[IVM_REPORT_MAX_INLINE];
	bool kernel = type == IVM_NODE_KERNEL;
	char name[IVM_TEXT_SAFE_SIZE(512)];
	unsigned int got, i;

	got = sym->frames(sym->ctx, type, pc, flags & IVM_PC_EXACT, f,
			  IVM_REPORT_MAX_INLINE);
	for (i = 0; i + 1 < got; i++) {
		printf("        inlined: %s", f[i].function ?
		       ivm_text_safe(name, sizeof(name), f[i].function) : "?");
		if (f[i].file)
			printf(" %s:%u", f[i].file, f[i].line);
		printf("\n");
	}
	printf("  #%-3u 0x%016" PRIx64 " ", n, addr);
	if (!got || !f[got - 1].function) {
		printf("?");
	} else {
		printf("%s", ivm_text_safe(name, sizeof(name),
					   f[got - 1].function));
		if (f[got - 1].has_offset)
			printf("+0x%" PRIx64, f[got - 1].offset);
		if (f[got - 1].file)
			printf(" %s:%u", f[got - 1].file, f[got - 1].line);
	}
	/* A frame pointer, or a return address found on the stack. */
	if (flags & IVM_PC_INEXACT)
		printf(" (inexact)");
	printf("%s\n", kernel ? " [k]" : "");
}

static int print_stack(const struct ivm_symbolizer *sym,
		       const struct stack_result *res)
{
	const struct ivm_capture *cap = &res->cap;
	const struct ivm_guest_task *t = res->task;
	const char *why;
	unsigned int i, n = 0;

	char comm[IVM_TEXT_SAFE_SIZE(sizeof(t->comm))];

	printf("tid %d (%s) pid %d, %s", t->pid,
	       ivm_text_safe_n(comm, sizeof(comm), t->comm, sizeof(t->comm)),
	       t->tgid,
	       res->vcpu >= 0 ? "running" : "not running");
	if (res->vcpu >= 0)
		printf(" on vCPU %d", res->vcpu);
	if (cap->outcome != IVM_CAPTURE_KEPT) {
		printf(": no consistent stack (%s after %d tries)\n",
		       ivm_capture_outcome_name(cap->outcome), res->tries);
		return 1;
	}
	printf("\n");
	for (i = 0; i < cap->sample.nr_kernel; i++)
		print_frame(sym, n++, IVM_NODE_KERNEL, cap->kernel_pcs[i],
			    cap->kernel_pcs[i], cap->kernel_flags[i]);
	for (i = 0; i < cap->sample.nr_user; i++)
		print_frame(sym, n++, IVM_NODE_USER, cap->user_pcs[i],
			    cap->user_addrs[i], cap->user_flags[i]);
	why = truncation(cap->sample.stack_flags);
	if (why && res->vcpu >= 0 && res->tries == STACK_TRIES)
		printf("  (%s, in each of %d reads while it ran)\n", why,
		       STACK_TRIES);
	else if (why)
		printf("  (%s)\n", why);
	if (cap->sample.stack_flags & IVM_STACK_NO_USER)
		printf("  (user part not unwound)\n");
	else if (cap->sample.nr_user)
		print_exe(&cap->exe);
	return 0;
}

static struct ivm_error *add_meta(void *ctx, const char *key,
				  const char *value)
{
	ivm_meta_lines_add(ctx, key, value);
	return NULL;
}

/*
 * Without a vmlinux, the guest's own kernel symbols that the stacks hit,
 * as "ksym" lines like a profile's (ksym_hits.h), so stack and report name
 * kernel frames through the same reader.
 */
static void stack_ksyms(struct ivm_guest *g, const struct stack_result *res,
			size_t nr, struct ivm_meta_lines *meta)
{
	const struct ivm_ksym *const *syms = NULL;
	struct ivm_ksym_hits *hits = NULL;
	struct ivm_error *err;
	size_t i, n = 0;

	err = ivm_ksym_hits_create(g->ksyms, ivm_kernel_layout_slide(g->layout),
				   &hits);
	for (i = 0; !err && i < nr; i++)
		err = ivm_ksym_hits_add(hits, res[i].cap.sample.kernel_pcs,
					res[i].cap.sample.nr_kernel);
	if (!err)
		syms = ivm_ksym_hits_take_new(hits, &n);
	for (i = 0; i < n; i++) {
		char line[IVM_KSYM_META_MAX];

		ivm_ksym_meta_value(syms[i], line);
		ivm_meta_lines_add(meta, "ksym", line);
	}
	ivm_error_destroy(err);	/* frames stay unnamed, not wrong */
	ivm_ksym_hits_destroy(hits);
}

/* What a profile's metadata would say of this guest and these captures. */
static void stack_meta(struct ivm_guest *g, struct ivm_capture_engine *e,
		       const struct stack_result *res, size_t nr_res,
		       struct ivm_meta_lines *meta)
{
	const struct ivm_kmodules *mods;
	struct ivm_error *err;
	char buf[32];
	size_t i, k;

	ivm_meta_lines_add(meta, "kernel", g->release);
	if (g->vmlinux)
		ivm_meta_lines_add(meta, "vmlinux", g->vmlinux);
	snprintf(buf, sizeof(buf), "0x%" PRIx64,
		 ivm_kernel_layout_slide(g->layout));
	ivm_meta_lines_add(meta, "kaslr_offset", buf);
	err = ivm_guest_modules(g, &mods);
	for (i = 0; !err && i < mods->nr; i++) {
		char *line = ivm_kmodule_format(&mods->mods[i]);
		char **secs;
		size_t nr = 0;

		if (!line)
			continue;
		ivm_meta_lines_add(meta, "module", line);
		free(line);
		secs = ivm_kmodule_format_sections(&mods->mods[i], &nr);
		for (k = 0; secs && k < nr; k++) {
			ivm_meta_lines_add(meta, "module_sections", secs[k]);
			free(secs[k]);
		}
		free(secs);
	}
	ivm_error_destroy(err);
	ivm_error_destroy(ivm_uobjects_take_meta(
		ivm_capture_engine_objects(e), add_meta, meta));
	if (!g->vmlinux && g->ksyms)
		stack_ksyms(g, res, nr_res, meta);
}

static void log_names(void *ctx, const char *msg)
{
	(void)ctx;
	/*
	 * Without a vmlinux the kernel's names are the guest's kallsyms,
	 * handed over as "ksym" lines that the symbolizer reads as an
	 * anonymous System.map: the guest opening already said so.
	 */
	if (!strncmp(msg, "kernel symbols from /proc/self/fd/", 34) ||
	    !strncmp(msg, "kernel symbols from the profile itself", 38))
		return;
	fprintf(stderr, "idlevm stack: %s\n", msg);
}

int ivm_cmd_stack(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "tid", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "binary", required_argument, NULL, 'b' },
		{ "symdir", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	struct ivm_guest_task_list *list = NULL;
	struct ivm_capture_engine *engine = NULL;
	struct stack_result *results = NULL;
	struct ivm_frame_names *names = NULL;
	struct ivm_frame_names_config ncfg = { .debuginfod = true,
					       .log = log_names };
	struct ivm_meta_lines meta = { 0 };
	struct ivm_symbolizer sym;
	const char *binaries[16], *symdir = NULL;
	size_t nr_binaries = 0, nr_results = 0, i;
	long tid = -1, pid = -1;
	struct ivm_guest *g = NULL;
	struct ivm_error *err;
	int c, rc = 0, found = 0, printed = 0;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "t:p:b:s:h",
				longopts, NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		switch (c) {
		case 't':
		case 'p':
			*(c == 't' ? &tid : &pid) = strtol(optarg, &end, 10);
			if (*end || !*optarg || (c == 't' ? tid : pid) < 0) {
				fprintf(stderr, "idlevm stack: bad id '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'b':
			if (nr_binaries == 16) {
				fprintf(stderr, "idlevm stack: too many --binary\n");
				return 2;
			}
			binaries[nr_binaries++] = optarg;
			break;
		case 's':
			symdir = optarg;
			break;
		case 'h':
			stack_usage(stdout);
			return 0;
		default:
			stack_usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (tid < 0) == (pid < 0)) {
		fprintf(stderr, "idlevm stack: give exactly one of --tid and --pid\n");
		return 2;
	}
	err = ivm_guest_check_options(&opts);
	if (err) {
		fprintf(stderr, "idlevm stack: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		return 2;
	}
	err = ivm_guest_open(&opts, &g);
	if (!err)
		err = ivm_capture_engine_create(g, &engine);
	if (!err && symdir)
		err = ivm_capture_engine_set_symdir(engine, symdir);
	for (i = 0; !err && i < nr_binaries; i++)
		err = ivm_capture_engine_add_binary(engine, binaries[i]);
	if (!err)
		err = ivm_kernel_task_list(g->layout, 0, &list);
	if (!err && !(results = calloc(list->nr ? list->nr : 1,
				       sizeof(*results))))
		err = &ivm_enomem;
	if (err) {
		rc = ivm_error_report(err);
		goto out;
	}
	/* Every stack first: their objects are named together after. */
	for (i = 0; i < list->nr; i++) {
		const struct ivm_guest_task *t = &list->tasks[i];

		if (t->is_idle || (tid >= 0 && t->pid != tid) ||
		    (pid >= 0 && t->tgid != pid))
			continue;
		rc = capture_stack(g, engine, t, &results[nr_results]);
		if (rc)
			goto out;
		nr_results++;
	}
	found = (int)nr_results;
	stack_meta(g, engine, results, nr_results, &meta);
	ncfg.binaries = binaries;
	ncfg.nr_binaries = nr_binaries;
	ncfg.symdir = symdir;
	names = ivm_frame_names_create();
	if (!names) {
		rc = ivm_error_report(&ivm_enomem);
		goto out;
	}
	ivm_frame_names_load(names, &ncfg, &meta);
	sym = ivm_frame_names_symbolizer(names);
	for (i = 0; i < nr_results; i++) {
		if (i)
			printf("\n");
		printed += print_stack(&sym, &results[i]) == 0;
	}
	/*
	 * A busy thread may never hold still long enough: say so for it (done
	 * above) and fail only when no stack at all could be read.
	 */
	if (found && !printed)
		rc = 1;
	if (!found) {
		fprintf(stderr, "idlevm stack: no guest %s %ld%s\n",
			tid >= 0 ? "thread" : "process", tid >= 0 ? tid : pid,
			list->truncated ? " (the task list was truncated)" : "");
		rc = 1;
	}
out:
	ivm_frame_names_destroy(names);
	ivm_meta_lines_free(&meta);
	free(results);
	ivm_guest_task_list_destroy(list);
	ivm_capture_engine_destroy(engine);
	ivm_guest_close(g);
	return rc;
}
