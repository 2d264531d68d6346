// SPDX-License-Identifier: MIT
/*
 * idlevm ps: the guest's tasks, read from the host by walking the guest
 * kernel's task list in guest memory.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd/commands.h"
#include "kernel/guest.h"

static void ps_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm ps (--domain NAME | --qmp PATH | --core FILE) [options]\n"
"\n"
"List the guest's tasks (every thread) as the guest kernel knows them.\n"
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

int ivm_cmd_ps(int argc, char **argv)
{
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
	printf("%7s %7s %-16s %s %4s\n", "PID", "TID", "COMM", "S", "CPU");
	for (i = 0; i < list->nr; i++) {
		const struct ivm_guest_task *t = &list->tasks[i];

		printf("%7d %7d %-16s %c %4u\n", t->tgid, t->pid, t->comm,
		       state_letter(t), t->cpu);
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
