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

#include "profile/capture.h"
#include "cmd/commands.h"
#include "kernel/guest.h"
#include "kernel/ksyms.h"

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

#define MAX_EXE_SYMS 16

/* The symbols of an executable found by build-id, loaded once. */
struct exe_syms {
	uint8_t build_id[IVM_UBINARY_MAX_BUILD_ID];
	size_t build_id_len;
	struct ivm_ksyms *syms;		/* NULL: none usable */
};

struct stack_syms {
	const struct ivm_ksyms *kernel;
	uint64_t slide;
	struct ivm_ksyms *user[16];
	size_t nr_user;
	const char *symdir;
	struct exe_syms exes[MAX_EXE_SYMS];
	size_t nr_exes;
	/* For the stack being printed. */
	const struct ivm_capture_exe *exe;
	const struct ivm_ksyms *exe_syms;
};

/*
 * Symbols of the executable a capture saw: from the host copy its CFI
 * came from, else from the symdir's separate debug file (a stripped
 * executable's symbols are there).
 */
static const struct ivm_ksyms *exe_symbols(struct stack_syms *ss,
					   const struct ivm_capture_exe *x)
{
	struct exe_syms *es;
	const char *paths[2] = { x->host_path, NULL };
	char *debug = NULL;
	size_t i;

	if (!x->known)
		return NULL;
	for (i = 0; i < ss->nr_exes; i++)
		if (ss->exes[i].build_id_len == x->id.build_id_len &&
		    !memcmp(ss->exes[i].build_id, x->id.build_id,
			    x->id.build_id_len))
			return ss->exes[i].syms;
	if (ss->nr_exes == MAX_EXE_SYMS)
		return NULL;
	es = &ss->exes[ss->nr_exes++];
	memcpy(es->build_id, x->id.build_id, x->id.build_id_len);
	es->build_id_len = x->id.build_id_len;
	if (ss->symdir)
		paths[1] = debug = ivm_uexe_symdir_path(ss->symdir,
							x->id.build_id,
							x->id.build_id_len,
							true);
	for (i = 0; i < 2 && !es->syms; i++) {
		struct ivm_error *err;

		if (!paths[i])
			continue;
		err = ivm_ksyms_load_elf(paths[i], &es->syms);
		ivm_error_destroy(err);
		if (!err && !ivm_ksyms_count(es->syms)) {
			ivm_ksyms_destroy(es->syms);
			es->syms = NULL;
		}
	}
	free(debug);
	return es->syms;
}

/* Whether pc lies in the code of the executable (at its bias). */
static bool in_exe(const struct ivm_capture_exe *x, uint64_t pc)
{
	size_t i;

	for (i = 0; x && x->known && i < x->id.nr_exec; i++)
		if (pc - x->id.bias - x->id.exec[i].vaddr <
		    x->id.exec[i].memsz)
			return true;
	return false;
}

static void print_frame(const struct stack_syms *ss, unsigned int n,
			uint64_t pc, bool kernel)
{
	const struct ivm_ksym *sym = NULL;
	uint64_t off = 0;
	size_t i;

	/* Return addresses point after the call: name pc - 1's function. */
	if (kernel) {
		sym = ivm_ksyms_symbolize(ss->kernel, pc - ss->slide - 1, &off);
	} else if (ss->exe_syms && in_exe(ss->exe, pc - 1)) {
		/* Link-time addresses: a PIE's symbols are off by its bias. */
		sym = ivm_ksyms_symbolize(ss->exe_syms,
					  pc - ss->exe->id.bias - 1, &off);
	} else {
		for (i = 0; i < ss->nr_user && !sym; i++) {
			sym = ivm_ksyms_symbolize(ss->user[i], pc - 1, &off);
			if (sym && sym->size && off >= sym->size)
				sym = NULL;
		}
	}
	if (sym && sym->size && off >= sym->size)
		sym = NULL;
	if (sym)
		printf("  #%-3u 0x%016" PRIx64 " %s+0x%" PRIx64 "%s\n", n, pc,
		       sym->name, off + 1, kernel ? " [k]" : "");
	else
		printf("  #%-3u 0x%016" PRIx64 " ?%s\n", n, pc,
		       kernel ? " [k]" : "");
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
	else
		printf("; user frames by frame pointers: %s)\n",
		       x->why ? x->why : "no host copy");
}

static int print_stack(struct ivm_guest *g, struct ivm_capture_engine *e,
		       struct stack_syms *ss,
		       const struct ivm_guest_task *t, struct ivm_capture *cap)
{
	struct ivm_error *err;
	const char *why;
	int tries, vcpu = -1;
	unsigned int i, n = 0;

	/* A task that runs during the read spoils it: read again. */
	for (tries = 0; tries < 20; tries++) {
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
		if (cap->outcome == IVM_CAPTURE_KEPT || !g->qmp)
			break;
	}
	printf("tid %d (%s) pid %d, %s", t->pid, t->comm, t->tgid,
	       vcpu >= 0 ? "running" : "not running");
	if (vcpu >= 0)
		printf(" on vCPU %d", g->vcpus[vcpu].index);
	if (cap->outcome != IVM_CAPTURE_KEPT) {
		printf(": no consistent stack (%s after %d tries)\n",
		       ivm_capture_outcome_name(cap->outcome), tries);
		return 1;
	}
	printf("\n");
	ss->exe = &cap->exe;
	ss->exe_syms = exe_symbols(ss, &cap->exe);
	for (i = 0; i < cap->sample.nr_kernel; i++)
		print_frame(ss, n++, cap->sample.kernel_pcs[i], true);
	for (i = 0; i < cap->sample.nr_user; i++)
		print_frame(ss, n++, cap->sample.user_pcs[i], false);
	why = truncation(cap->sample.stack_flags);
	if (why)
		printf("  (%s)\n", why);
	if (cap->sample.stack_flags & IVM_STACK_NO_USER)
		printf("  (user part not unwound)\n");
	else if (cap->sample.nr_user)
		print_exe(&cap->exe);
	return 0;
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
	struct ivm_capture *cap = NULL;
	struct stack_syms ss = { 0 };
	const char *binaries[16];
	size_t nr_binaries = 0, i;
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
			ss.symdir = optarg;
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
	if (!err && ss.symdir)
		err = ivm_capture_engine_set_symdir(engine, ss.symdir);
	for (i = 0; !err && i < nr_binaries; i++) {
		err = ivm_capture_engine_add_binary(engine, binaries[i]);
		if (!err)
			err = ivm_ksyms_load_elf(binaries[i], &ss.user[ss.nr_user++]);
	}
	if (!err)
		err = ivm_kernel_task_list(g->layout, 0, &list);
	if (!err && !(cap = malloc(sizeof(*cap))))
		err = &ivm_enomem;
	if (err) {
		rc = ivm_error_report(err);
		goto out;
	}
	ss.kernel = g->ksyms;
	ss.slide = ivm_kernel_layout_slide(g->layout);
	for (i = 0; i < list->nr; i++) {
		const struct ivm_guest_task *t = &list->tasks[i];

		if (t->is_idle || (tid >= 0 && t->pid != tid) ||
		    (pid >= 0 && t->tgid != pid))
			continue;
		if (found++)
			printf("\n");
		printed += print_stack(g, engine, &ss, t, cap) == 0;
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
	free(cap);
	for (i = 0; i < ss.nr_user; i++)
		ivm_ksyms_destroy(ss.user[i]);
	for (i = 0; i < ss.nr_exes; i++)
		ivm_ksyms_destroy(ss.exes[i].syms);
	ivm_guest_task_list_destroy(list);
	ivm_capture_engine_destroy(engine);
	ivm_guest_close(g);
	return rc;
}
