// SPDX-License-Identifier: MIT
/*
 * idlevm info: what the host sees of a guest, read from outside: the
 * accelerator, kernel release, KASLR offset, vCPUs with their host thread,
 * HLT state and the guest task current on each.  A guest whose kernel
 * cannot be found yet (still in its firmware or early boot) gets the
 * machine's part and the reason, with exit status 1.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text_safe.h"
#include "cmd/commands.h"
#include "kernel/guest.h"

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

/*
 * The current task of every vCPU (0 where unknown) into cur, and its CPU's
 * context-switch count (0 where unknown) into switches.
 */
static void read_currents(struct ivm_guest *g, uint64_t *cur,
			  uint64_t *switches)
{
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < g->nr_vcpus; i++) {
		unsigned int cpu = (unsigned int)g->vcpus[i].cpu;

		cur[i] = 0;
		switches[i] = 0;
		if (g->vcpus[i].cpu < 0)
			continue;
		err = ivm_kernel_current_task(g->layout, cpu, NULL, &cur[i]);
		if (err)
			cur[i] = 0;
		ivm_error_destroy(err);
		err = ivm_kernel_cpu_switches(g->layout, cpu, &switches[i]);
		if (err)
			switches[i] = 0;
		ivm_error_destroy(err);
	}
}

/*
 * HLT state and `current` come from two reads milliseconds apart (the
 * registers through the monitor, current from guest memory), and a busy
 * guest switches tasks in between.  Each vCPU's line is taken from a try
 * where nothing switched on its CPU around the register read, so its state
 * and task belong together.  The same `current` on both sides is not
 * enough: a task that blocks, lets the CPU halt and is woken again looks
 * unchanged, so the CPU's switch count must not have moved either (where
 * the kernel lets us read it).  vCPUs are judged one by one: with several
 * busy CPUs a try where none of them switched is rare.  After a few tries,
 * give up on the rest: they are marked in unsettled[] (their line is from
 * the last try).  Returns how many there are.
 */
static size_t consistent_snapshot(struct ivm_guest *g, uint64_t *cur,
				  bool *unsettled, struct ivm_error **errp)
{
	size_t n = g->nr_vcpus, left = n, i;
	uint64_t *words = calloc(4 * n, sizeof(*words));
	struct ivm_guest_vcpu *kept = calloc(n, sizeof(*kept));
	uint64_t *before, *after, *sw_before, *sw_after;
	int tries;

	*errp = NULL;
	if (!words || !kept) {
		*errp = &ivm_enomem;
		goto out;
	}
	before = words;
	after = words + n;
	sw_before = words + 2 * n;
	sw_after = words + 3 * n;
	for (i = 0; i < n; i++)
		unsettled[i] = true;
	for (tries = 0; tries < 40 && left; tries++) {
		read_currents(g, before, sw_before);
		*errp = ivm_guest_refresh_vcpus(g);
		if (*errp)
			goto out;
		read_currents(g, after, sw_after);
		for (i = 0; i < n; i++) {
			if (!unsettled[i])
				continue;
			cur[i] = after[i];
			if (before[i] != after[i] || sw_before[i] != sw_after[i])
				continue;
			kept[i] = g->vcpus[i];
			unsettled[i] = false;
			left--;
		}
	}
	for (i = 0; i < n; i++)
		if (!unsettled[i])
			g->vcpus[i] = kept[i];
out:
	free(words);
	free(kept);
	return left;
}

static void print_current(struct ivm_guest *g, struct ivm_guest_vcpu *v,
			  uint64_t addr)
{
	struct ivm_guest_task task;
	char comm[IVM_TEXT_SAFE_SIZE(sizeof(task.comm))];
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
	printf("%s pid %d tgid %d%s",
	       ivm_text_safe_n(comm, sizeof(comm), task.comm, sizeof(task.comm)),
	       task.pid, task.tgid,
	       task.is_idle ? " (idle)" : "");
}

/*
 * A guest whose kernel is not there yet (firmware, early boot) or not
 * found: what the host sees of the machine, and why no kernel.
 */
static int print_machine_only(struct ivm_guest *g, struct ivm_error *why)
{
	struct ivm_error *err;
	size_t i;

	err = g->qmp ? ivm_guest_refresh_vcpus(g) : NULL;
	printf("kernel:           not found (%s)\n", ivm_error_string(why));
	printf("vcpus:            %zu\n", g->nr_vcpus);
	printf("\n%-5s %-8s %-8s %-4s %s\n", "VCPU", "THREAD", "STATE", "CPL",
	       "RIP");
	for (i = 0; !err && i < g->nr_vcpus; i++) {
		struct ivm_guest_vcpu *v = &g->vcpus[i];

		printf("%-5d %-8d %-8s %-4d %016" PRIx64 "\n", v->index,
		       (int)v->tid, g->qmp ? (v->halted ? "halted" : "running") :
		       "-", v->cpl, v->regs.rip);
	}
	fprintf(stderr, "idlevm info: %s\n", ivm_error_string(why));
	ivm_error_destroy(why);
	ivm_guest_close(g);
	return err ? ivm_error_report(err) : 1;
}

int ivm_cmd_info(int argc, char **argv)
{
	struct ivm_guest_options opts = { 0 };
	char state[32];
	uint64_t *cur;
	bool *unsettled;
	struct ivm_guest *g;
	struct ivm_error *err = NULL;
	size_t nr_unsettled = 0, i;
	int rc;

	rc = ivm_guest_command_args(argc, argv, &opts, info_usage);
	if (rc >= 0)
		return rc;
	/* The machine first: it is worth showing while the kernel is not. */
	opts.machine_only = true;
	err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	printf("guest:            %s%s\n", g->name,
	       !g->qmp ? " (core)" :
	       ivm_qmp_is_libvirt(g->qmp) ? " (libvirt)" : " (qmp)");
	if (g->qemu_pid)
		printf("qemu pid:         %d\n", (int)g->qemu_pid);
	if (g->qmp)
		printf("accelerator:      %s\n", g->kvm ?
		       "KVM (registers of running vCPUs through the monitor)" :
		       "TCG (registers of running vCPUs from qemu's memory)");
	if (g->qmp && !ivm_qmp_run_state(g->qmp, state, sizeof(state)))
		printf("state:            %s%s\n", state,
		       !strcmp(state, "internal-error") ?
		       " (KVM could not run the guest on, and QEMU stopped it: see the host's dmesg)" : "");
	printf("guest memory:     %s\n", g->gmem_kind);
	err = ivm_guest_open_kernel(g, &opts);
	if (err)
		return print_machine_only(g, err);
	cur = calloc(2 * (size_t)g->nr_vcpus, sizeof(*cur));
	unsettled = calloc(g->nr_vcpus ? g->nr_vcpus : 1, sizeof(*unsettled));
	if (!cur || !unsettled)
		err = &ivm_enomem;
	else if (g->qmp)
		nr_unsettled = consistent_snapshot(g, cur, unsettled, &err);
	else
		read_currents(g, cur, cur + g->nr_vcpus);
	if (err) {
		free(cur);
		free(unsettled);
		ivm_guest_close(g);
		return ivm_error_report(err);
	}

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
		printf("%s\n", unsettled[i] ? " *" : "");
	}
	if (nr_unsettled)
		printf("\n* the guest switched tasks on this CPU during every read: its state and task may be from different moments\n");
	free(cur);
	free(unsettled);
	ivm_guest_close(g);
	return 0;
}
