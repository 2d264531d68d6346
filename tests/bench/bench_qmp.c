// SPDX-License-Identifier: MIT
/*
 * QMP round trips against a real QEMU, over its QMP socket or through
 * libvirt, after a discovery pass that doubles as a live check of the
 * client (vCPU threads, QEMU pid, RAM layout, registers).
 *
 *   bench_qmp --socket /path/qmp.sock [-n 200]
 *   bench_qmp --domain NAME [--connect URI] [-n 200]
 *
 * Prints median and 99th percentile of `query-status`, of
 * `info registers -a` (HMP through human-monitor-command), of one vCPU's
 * `info registers` (what an on-CPU sample cost before tcg_env.h) and, under
 * TCG, of reading one vCPU's registers from QEMU's memory instead, with
 * the time the one-off location took and the guest was paused for it.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access/libvirt_domain.h"
#include "access/qemu_discovery.h"
#include "access/qmp.h"
#include "access/tcg_env.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("%-28s n=%d median %8.1f us  p99 %8.1f us  max %8.1f us\n",
	       what, n, t[n / 2], t[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1],
	       t[n - 1]);
}

static int fail(struct ivm_error *err)
{
	return ivm_error_report(err);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "domain", required_argument, NULL, 'd' },
		{ "connect", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *domain = NULL, *uri = NULL;
	struct ivm_libvirt_domain *dom = NULL;
	struct ivm_qemu_registers *regs;
	struct ivm_qemu_vcpus *vcpus;
	struct ivm_qemu_ram *ram;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	enum ivm_qmp_lifecycle state;
	int n = 200, c, i, major, minor, micro, halted = 0;
	double *t;
	size_t k;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "s:d:c:n:", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'd': domain = optarg; break;
		case 'c': uri = optarg; break;
		case 'n': n = atoi(optarg); break;
		default: return 2;
		}
	}
	if (!sock == !domain || n < 1) {
		fprintf(stderr, "usage: bench_qmp --socket PATH | --domain NAME [--connect URI] [-n N]\n");
		return 2;
	}
	if (domain) {
		/* libvirt's event loop must exist before the connection. */
		err = ivm_qmp_libvirt_event_loop_start();
		if (err)
			return fail(err);
		err = ivm_libvirt_domain_open(uri, domain, &dom);
		if (err)
			return fail(err);
		err = ivm_qmp_connect_libvirt(dom, &qmp);
	} else {
		err = ivm_qmp_connect_socket(sock, &qmp);
	}
	if (err)
		return fail(err);
	ivm_qmp_qemu_version(qmp, &major, &minor, &micro);
	err = ivm_qmp_query_status(qmp, &state);
	if (err)
		return fail(err);
	printf("%s: qemu %d.%d.%d via %s, %s\n", ivm_qmp_name(qmp), major,
	       minor, micro, ivm_qmp_is_libvirt(qmp) ? "libvirt" : "socket",
	       ivm_qmp_lifecycle_name(state));

	err = ivm_qemu_vcpus(qmp, &vcpus);
	if (err)
		return fail(err);
	err = ivm_qemu_pid(qmp, vcpus, "/proc", &pid);
	if (err)
		return fail(err);
	printf("qemu pid %d, %zu vCPUs:", (int)pid, vcpus->nr);
	for (k = 0; k < vcpus->nr; k++)
		printf(" %d=tid %d", vcpus->vcpu[k].index, (int)vcpus->vcpu[k].tid);
	printf("\n");
	err = ivm_qemu_ram_regions(qmp, &ram);
	if (err)
		return fail(err);
	for (k = 0; k < ram->nr; k++)
		printf("ram gpa 0x%" PRIx64 "-0x%" PRIx64 " hva 0x%" PRIx64 "\n",
		       ram->region[k].gpa,
		       ram->region[k].gpa + ram->region[k].size - 1,
		       ram->region[k].hva);
	err = ivm_qemu_registers_all(qmp, &regs);
	if (err)
		return fail(err);
	for (k = 0; k < regs->nr; k++)
		printf("CPU#%d rip 0x%" PRIx64 " cpl %d %s gs_base 0x%" PRIx64
		       " cr3 0x%" PRIx64 " valid 0x%x\n",
		       regs->cpu[k].cpu_index, regs->cpu[k].regs.rip,
		       regs->cpu[k].cpl, regs->cpu[k].halted ? "halted" : "running",
		       regs->cpu[k].regs.gs_base, regs->cpu[k].regs.cr3,
		       regs->cpu[k].regs.valid);
	free(regs);

	t = calloc((size_t)n, sizeof(*t));
	for (i = 0; i < n; i++) {
		double t0 = now_us();

		err = ivm_qmp_execute(qmp, "query-status", NULL, NULL);
		if (err)
			return fail(err);
		t[i] = now_us() - t0;
	}
	report("query-status", t, n);
	for (i = 0; i < n; i++) {
		double t0 = now_us();

		err = ivm_qemu_registers_all(qmp, &regs);
		if (err)
			return fail(err);
		t[i] = now_us() - t0;
		halted += regs->cpu[0].halted;
		free(regs);
	}
	report("info registers -a (parsed)", t, n);
	for (i = 0; i < n; i++) {
		struct ivm_qemu_cpu_regs one;
		double t0 = now_us();

		err = ivm_qemu_registers(qmp, vcpus->vcpu[0].index, &one);
		if (err)
			return fail(err);
		t[i] = now_us() - t0;
	}
	report("info registers, one vCPU", t, n);
	{
		struct ivm_tcg_env *env;
		double t0 = now_us(), located;

		err = ivm_tcg_env_locate(pid, qmp, &env);
		located = now_us() - t0;
		if (err) {
			printf("registers from qemu memory: %s\n",
			       ivm_error_string(err));
			ivm_error_destroy(err);
		} else {
			printf("tcg state located in %.1f ms, guest paused %.2f ms\n",
			       located / 1e3,
			       (double)ivm_tcg_env_pause_ns(env) / 1e6);
			for (i = 0; i < n; i++) {
				struct ivm_qemu_cpu_regs one;

				t0 = now_us();
				err = ivm_tcg_env_read(env, vcpus->vcpu[0].index,
						       &one);
				if (err)
					return fail(err);
				t[i] = now_us() - t0;
			}
			report("registers from qemu memory", t, n);
			ivm_tcg_env_destroy(env);
		}
	}
	printf("vCPU 0 halted in %d of %d samples; lifecycle %s, %" PRIu64 " events lost\n",
	       halted, n, ivm_qmp_lifecycle_name(ivm_qmp_lifecycle(qmp)),
	       ivm_qmp_events_lost(qmp));
	free(t);
	free(ram);
	free(vcpus);
	ivm_qmp_destroy(qmp);
	ivm_libvirt_domain_close(dom);
	return 0;
}
