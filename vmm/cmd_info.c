// SPDX-License-Identifier: MIT
/*
 * idlevm info: what the host sees of a guest, read from outside: kernel
 * release, KASLR offset, vCPUs with their host thread, HLT state and the
 * guest task current on each.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "guest.h"

static void info_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm info (--domain NAME | --qmp PATH | --core FILE) [options]\n"
"\n"
"Show the guest kernel and each vCPU's state and current task.\n"
"\n"
IVM_GUEST_USAGE
"  -h, --help           this help\n");
}

/* Parse argv into opts; returns -1 to go on, else an exit status. */
int ivm_guest_command_args(int argc, char **argv,
			   struct ivm_guest_options *opts,
			   void (*usage)(FILE *out))
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_error *err;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "h", longopts,
				NULL)) != -1) {
		if (ivm_guest_parse_option(opts, c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		usage(stderr);
		return 2;
	}
	if (optind != argc) {
		fprintf(stderr, "idlevm %s: unexpected argument '%s'\n",
			argv[0], argv[optind]);
		return 2;
	}
	err = ivm_guest_check_options(opts);
	if (err) {
		fprintf(stderr, "idlevm %s: %s\n", argv[0],
			ivm_error_string(err));
		ivm_error_destroy(err);
		return 2;
	}
	return -1;
}

/* The current task of every vCPU (0 where unknown) into cur. */
static void read_currents(struct ivm_guest *g, uint64_t *cur)
{
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < g->nr_vcpus; i++) {
		cur[i] = 0;
		if (g->vcpus[i].cpu < 0)
			continue;
		err = ivm_kernel_current_task(g->layout,
					      (unsigned int)g->vcpus[i].cpu,
					      NULL, &cur[i]);
		if (err)
			cur[i] = 0;
		ivm_error_destroy(err);
	}
}

/*
 * HLT state and `current` come from two reads milliseconds apart (the
 * registers through the monitor, current from guest memory), and a busy
 * guest switches tasks in between.  Take a snapshot where current did not
 * change around the register read, so halted and current belong together;
 * give up after a few tries and say so.  Returns false if it never held.
 */
static bool consistent_snapshot(struct ivm_guest *g, uint64_t *cur,
				struct ivm_error **errp)
{
	uint64_t *before = calloc(g->nr_vcpus, sizeof(*before));
	bool same = false;
	int tries;
	size_t i;

	*errp = NULL;
	if (!before) {
		*errp = &ivm_enomem;
		return false;
	}
	for (tries = 0; tries < 40 && !same; tries++) {
		read_currents(g, before);
		*errp = ivm_guest_refresh_vcpus(g);
		if (*errp)
			break;
		read_currents(g, cur);
		same = true;
		for (i = 0; i < g->nr_vcpus; i++)
			same &= before[i] == cur[i];
	}
	free(before);
	return same;
}

static void print_current(struct ivm_guest *g, struct ivm_guest_vcpu *v,
			  uint64_t addr)
{
	struct ivm_guest_task task;
	struct ivm_error *err;

	if (v->cpu < 0 || !addr) {
		printf("?");
		return;
	}
	err = ivm_kernel_read_task(g->layout, addr, &task);
	if (err) {
		printf("? (%s)", ivm_error_string(err));
		ivm_error_destroy(err);
		return;
	}
	printf("%s pid %d tgid %d%s", task.comm, task.pid, task.tgid,
	       task.is_idle ? " (idle)" : "");
}

int ivm_cmd_info(int argc, char **argv)
{
	struct ivm_guest_options opts = { 0 };
	uint64_t *cur;
	struct ivm_guest *g;
	struct ivm_error *err = NULL;
	bool consistent = true;
	size_t i;
	int rc;

	rc = ivm_guest_command_args(argc, argv, &opts, info_usage);
	if (rc >= 0)
		return rc;
	err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	cur = calloc(g->nr_vcpus, sizeof(*cur));
	if (!cur) {
		ivm_guest_close(g);
		return ivm_error_report(&ivm_enomem);
	}
	if (g->qmp)
		consistent = consistent_snapshot(g, cur, &err);
	else
		read_currents(g, cur);
	if (err) {
		free(cur);
		ivm_guest_close(g);
		return ivm_error_report(err);
	}

	printf("guest:            %s%s\n", g->name,
	       g->dom ? " (libvirt)" : g->qmp ? " (qmp)" : " (core)");
	if (g->qemu_pid)
		printf("qemu pid:         %d\n", (int)g->qemu_pid);
	printf("guest memory:     %s\n", g->gmem_kind);
	printf("kernel:           %s\n", g->release);
	printf("vmlinux:          %s\n", g->vmlinux ? g->vmlinux :
	       "none (kallsyms, BTF and ORC from guest memory)");
	printf("kaslr offset:     0x%" PRIx64 "\n",
	       ivm_kernel_layout_slide(g->layout));
	printf("page_offset_base: 0x%" PRIx64 "\n",
	       ivm_kernel_layout_page_offset_base(g->layout));
	printf("guest cpus:       %u\n", ivm_kernel_layout_nr_cpus(g->layout));
	printf("vcpus:            %zu\n", g->nr_vcpus);
	printf("\n%-5s %-8s %-4s %-8s %-4s %s\n", "VCPU", "THREAD", "CPU",
	       "STATE", "CPL", "CURRENT");
	for (i = 0; i < g->nr_vcpus; i++) {
		struct ivm_guest_vcpu *v = &g->vcpus[i];

		printf("%-5d %-8d %-4d %-8s %-4d ", v->index, (int)v->tid,
		       v->cpu, g->qmp ? (v->halted ? "halted" : "running") :
		       "-", v->cpl);
		print_current(g, v, cur[i]);
		printf("\n");
	}
	if (!consistent)
		printf("\n(the guest switched tasks during every read: states and tasks may be from different moments)\n");
	free(cur);
	ivm_guest_close(g);
	return 0;
}
