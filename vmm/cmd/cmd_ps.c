// SPDX-License-Identifier: MIT
/*
 * idlevm ps: the guest's tasks, read from the host by walking the guest
 * kernel's task list in guest memory.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/text_safe.h"
#include "cmd/commands.h"
#include "kernel/guest.h"
#include "kernel/proc_args.h"
#include "kernel/task_name.h"

static void ps_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm ps (--domain NAME | --qmp PATH | --core FILE) [options]\n"
"\n"
"List the guest's tasks (every thread) as the guest kernel knows them, with\n"
"each process's command line (ARGS) as the guest's ps -o args shows it:\n"
"[COMM] for a kernel thread, a title the process set itself (nginx,\n"
"php-fpm) where it did, '+' after one cut short.\n"
"\n"
IVM_GUEST_USAGE
"  -h, --help           this help\n");
}

/* The letter ps(1) shows for a task state (include/linux/sched.h bits). */
static char state_letter(const struct ivm_guest_task *t)
{
	uint64_t s = t->state;

	if (s == 0)
		return 'R';
	if ((s & 0x402) == 0x402)	/* TASK_IDLE: uninterruptible, noload */
		return 'I';
	if (s & 0x1)
		return 'S';
	if (s & 0x2)
		return 'D';
	if (s & 0x4)
		return 'T';
	if (s & 0x8)
		return 't';
	if (s & 0x10)
		return 'X';
	if (s & 0x20)
		return 'Z';
	if (s & 0x40)
		return 'P';
	return '?';
}

static int task_cmp(const void *a, const void *b)
{
	const struct ivm_guest_task *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/*
 * The command line of t's process into buf as ps -o args shows it: read
 * once per address space (threads share it; the list is sorted by tgid).
 */
struct args_reader {
	struct ivm_guest *g;
	struct ivm_kmem_reader kmem;
	struct ivm_proc_args_offsets off;
	bool has_off;
	struct ivm_task_name_offsets names;
	uint64_t last_mm;
	char raw[IVM_PROC_ARGS_MAX];
	char shown[IVM_PROC_ARGS_MAX + 2];
};

static const char *process_args(struct args_reader *r,
				const struct ivm_guest_task *t)
{
	struct ivm_kmem_gmem umem = { 0 };
	struct ivm_kmem_reader ureader;
	struct ivm_proc_args args;
	struct ivm_error *err;
	uint64_t cr3;
	size_t n;

	if (t->mm && t->mm == r->last_mm)
		return r->shown;
	r->last_mm = 0;
	if (!t->mm || (t->flags & IVM_GUEST_PF_KTHREAD)) {
		char name[IVM_TASK_NAME_MAX];

		/* As ps shows a process without a command line. */
		snprintf(r->shown, sizeof(r->shown), "[%s]",
			 ivm_task_name(&r->kmem,
				       ivm_kernel_layout_la57(r->g->layout),
				       &r->names, t->addr, t->comm, t->flags,
				       name, sizeof(name)));
		return r->shown;
	}
	if (!r->has_off)
		return "-";
	err = ivm_kernel_task_user_cr3(r->g->layout, t, &cr3);
	if (!err) {
		umem.gmem = r->g->gmem;
		umem.cr3 = cr3;
		umem.la57 = ivm_kernel_layout_la57(r->g->layout);
		ivm_kmem_reader_gmem(&umem, &ureader);
		err = ivm_proc_args_read(&r->kmem, &r->off, t->mm, &ureader,
					 umem.la57, r->raw, sizeof(r->raw),
					 &args);
	}
	if (err) {
		ivm_error_destroy(err);
		return "?";
	}
	n = ivm_proc_args_display(r->raw, args.len, r->shown,
				  sizeof(r->shown) - 1);
	/* ps shows a process with an empty command line by its name. */
	if (!n)
		snprintf(r->shown, sizeof(r->shown), "[%s]", t->comm);
	else if (args.truncated)
		r->shown[n] = '+', r->shown[n + 1] = '\0';
	r->last_mm = t->mm;
	return r->shown;
}

int ivm_cmd_ps(int argc, char **argv)
{
	static struct args_reader args;
	struct ivm_guest_options opts = { 0 };
	struct ivm_guest_task_list *list;
	struct ivm_guest *g;
	struct ivm_error *err;
	size_t i;
	int rc;

	rc = ivm_guest_command_args(argc, argv, &opts, ps_usage);
	if (rc >= 0)
		return rc;
	err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	err = ivm_kernel_task_list(g->layout, 0, &list);
	if (err) {
		ivm_guest_close(g);
		return ivm_error_report(err);
	}
	qsort(list->tasks, list->nr, sizeof(list->tasks[0]), task_cmp);
	args.g = g;
	ivm_kernel_layout_reader(g->layout, &args.kmem);
	ivm_task_name_offsets_from_btf(g->btf, &args.names);
	err = ivm_proc_args_offsets_from_btf(g->btf, &args.off);
	args.has_off = !err;
	if (err) {
		fprintf(stderr, "idlevm ps: no command lines: %s\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
	}
	printf("%7s %7s %-16s %s %4s %s\n", "PID", "TID", "COMM", "S", "CPU",
	       "ARGS");
	for (i = 0; i < list->nr; i++) {
		const struct ivm_guest_task *t = &list->tasks[i];

		char comm[IVM_TEXT_SAFE_SIZE(sizeof(t->comm))];
		char shown[IVM_TEXT_SAFE_SIZE(sizeof(args.shown))];

		/* Names and titles are the guest's words (text_safe.h). */
		printf("%7d %7d %-16s %c %4u %s\n", t->tgid, t->pid,
		       ivm_text_safe_n(comm, sizeof(comm), t->comm,
				       sizeof(t->comm)),
		       state_letter(t), t->cpu,
		       ivm_text_safe(shown, sizeof(shown),
				     process_args(&args, t)));
	}
	rc = 0;
	if (list->truncated) {
		fprintf(stderr, "idlevm ps: task list truncated after %zu tasks: %s\n",
			list->nr, ivm_error_string(list->error));
		rc = 1;
	}
	ivm_guest_task_list_destroy(list);
	ivm_guest_close(g);
	return rc;
}
