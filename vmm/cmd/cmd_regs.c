// SPDX-License-Identifier: MIT
/*
 * idlevm regs: each vCPU's registers as the profiler reads them, from QEMU's
 * TCG state in its memory (see tcg_env.h), next to what the monitor says,
 * with the guest paused so that both are exact and must agree.  It answers
 * "will on-CPU sampling be cheap on this host, and is it right?".  Under
 * KVM the answer is the monitor (see tcg_env.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "kernel/guest.h"
#include "access/tcg_env.h"

static void regs_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm regs (--domain NAME | --qmp PATH | --core FILE) [options]\n"
"\n"
"Show each vCPU's instruction and stack pointers, CPL and CR3 as read from\n"
"QEMU's memory (under TCG, the way idlevm profile reads them) and from the\n"
"monitor, and whether they agree.  Under KVM, profile reads them from the\n"
"monitor.  Pauses the guest for a few milliseconds.  Needs no guest kernel.\n"
"\n"
IVM_GUEST_USAGE
"  -h, --help           this help\n");
}

static void print_regs(const char *source, int index,
		       const struct ivm_x86_regs *r, int cpl)
{
	printf("%-5d %-8s %016" PRIx64 " %016" PRIx64 " %016" PRIx64
	       " %-3d %" PRIx64 "\n", index, source, r->rip, r->rsp, r->rbp,
	       cpl, r->cr3);
}

/* Every vCPU's registers as the guest was opened with them. */
static void print_table(const struct ivm_guest *g, const char *source)
{
	size_t i;

	printf("%-5s %-8s %-16s %-16s %-16s %-3s %s\n", "VCPU", "SOURCE",
	       "RIP", "RSP", "RBP", "CPL", "CR3");
	for (i = 0; i < g->nr_vcpus; i++)
		print_regs(source, g->vcpus[i].index, &g->vcpus[i].regs,
			   g->vcpus[i].cpl);
}

/* The fields a stack is unwound from, and the mode. */
static bool same_regs(const struct ivm_qemu_cpu_regs *a,
		      const struct ivm_qemu_cpu_regs *b)
{
	const struct ivm_x86_regs *x = &a->regs, *y = &b->regs;

	return x->rip == y->rip && x->rsp == y->rsp && x->rbp == y->rbp &&
	       x->rax == y->rax && x->r15 == y->r15 && x->cr3 == y->cr3 &&
	       x->cs == y->cs && x->gs_base == y->gs_base && a->cpl == b->cpl;
}

/* Guest paused: both sources for every vCPU. */
static struct ivm_error *compare(struct ivm_guest *g,
				 const struct ivm_tcg_env *env,
				 size_t *disagree)
{
	struct ivm_qemu_registers *mon;
	struct ivm_error *err;
	size_t i;

	err = ivm_qemu_registers_all(g->qmp, &mon);
	if (err)
		return err;
	printf("\n%-5s %-8s %-16s %-16s %-16s %-3s %s\n", "VCPU", "SOURCE",
	       "RIP", "RSP", "RBP", "CPL", "CR3");
	for (i = 0; i < mon->nr && !err; i++) {
		const struct ivm_qemu_cpu_regs *m = &mon->cpu[i];
		struct ivm_qemu_cpu_regs e;

		print_regs("monitor", m->cpu_index, &m->regs, m->cpl);
		err = ivm_tcg_env_read(env, m->cpu_index, &e);
		if (err)
			break;
		print_regs("memory", m->cpu_index, &e.regs, e.cpl);
		if (!same_regs(m, &e)) {
			printf("      ^ disagree\n");
			(*disagree)++;
		}
	}
	free(mon);
	return err;
}

int ivm_cmd_regs(int argc, char **argv)
{
	struct ivm_guest_options opts = { 0 };
	struct ivm_tcg_env *env = NULL;
	struct ivm_error *err, *cerr;
	struct ivm_guest *g;
	size_t disagree = 0;
	enum ivm_qmp_lifecycle state = IVM_QMP_UNKNOWN;
	int rc;

	rc = ivm_guest_command_args(argc, argv, &opts, regs_usage);
	if (rc >= 0)
		return rc;
	/* Registers need no kernel: a guest still booting is read too. */
	opts.machine_only = true;
	err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	if (!g->qmp) {
		/* A core: the registers QEMU saved in it, nothing to compare. */
		print_table(g, "core");
		ivm_guest_close(g);
		return 0;
	}
	/*
	 * Under KVM QEMU's copy of a vCPU's state is stale while it runs,
	 * but the monitor's `info registers` synchronises it first, and with
	 * the guest paused it stays put: the same comparison then checks
	 * that idlevm finds and reads QEMU's copy right on KVM too, while
	 * profile takes the registers of running vCPUs from the monitor.
	 * Locating needs every vCPU in long mode: a KVM guest still in its
	 * firmware or early boot gets the monitor's registers alone.
	 */
	err = ivm_tcg_env_locate(g->qemu_pid, g->qmp, &env);
	if (err && g->kvm) {
		printf("registers: the monitor (KVM; qemu's copy not compared: %s)\n",
		       ivm_error_string(err));
		ivm_error_destroy(err);
		err = ivm_guest_refresh_vcpus(g);
		if (!err)
			print_table(g, "monitor");
		ivm_guest_close(g);
		return err ? ivm_error_report(err) : 0;
	}
	if (err) {
		ivm_guest_close(g);
		return ivm_error_report(err);
	}
	if (g->kvm)
		printf("registers: the monitor (KVM: qemu's copy of the vCPU state is current only after the monitor synchronises it; located, and compared below with the guest paused %.2f ms)\n",
		       (double)ivm_tcg_env_pause_ns(env) / 1e6);
	else
		printf("registers: qemu memory (TCG vCPU state located; the guest was paused %.2f ms)\n",
		       (double)ivm_tcg_env_pause_ns(env) / 1e6);
	err = ivm_qmp_query_status(g->qmp, &state);
	/* A guest someone else paused stays paused. */
	if (!err && state == IVM_QMP_RUNNING)
		err = ivm_qmp_stop(g->qmp);
	if (!err) {
		err = compare(g, env, &disagree);
		cerr = state == IVM_QMP_RUNNING ? ivm_qmp_cont(g->qmp) : NULL;
		if (cerr) {
			ivm_error_destroy(err);
			err = ivm_error_wrap(cerr, "resuming the guest");
		}
	}
	ivm_tcg_env_destroy(env);
	ivm_guest_close(g);
	if (err)
		return ivm_error_report(err);
	if (disagree) {
		fprintf(stderr, "idlevm regs: %zu vCPU(s) disagree between qemu memory and the monitor\n",
			disagree);
		return 1;
	}
	printf("\nall vCPUs agree\n");
	return 0;
}
