// SPDX-License-Identifier: MIT
/*
 * bench_uunwind: how fast the user unwinders are on real stacks, DWARF CFI
 * (with and without its row cache) against frame pointers.
 *
 *   bench_uunwind [--binary PATH] [--samples N] [--iterations N]
 *
 * Starts the demo workload (default build/guest/lockstorm-nofp, a static
 * glibc binary run natively), stops its first worker N times (default 200)
 * with PTRACE_INTERRUPT, and keeps each sample's registers and a copy of
 * its stack (up to 64 KiB above rsp); then kills the workload.  Each
 * unwinder then runs over every snapshot --iterations times (default 20)
 * from a host buffer, so the figures are the unwinder's own cost, not
 * process_vm_readv's.  Prints, per unwinder, frames per stack, stacks per
 * second and the median and p99 time per stack in microseconds; and how
 * many stacks reach worker_main.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "unwind/uunwind.h"
#include "unwind/uunwind_dwarf.h"

#define SNAP_MAX (64u << 10)
#define MAX_FRAMES 128

struct snapshot {
	struct ivm_x86_regs regs;
	uint64_t base;		/* = regs.rsp */
	size_t len;
	uint8_t *bytes;
};

static struct ivm_error *snap_read(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	const struct snapshot *s = ctx;

	if (va >= s->base && va - s->base <= s->len &&
	    len <= s->len - (va - s->base)) {
		memcpy(buf, s->bytes + (va - s->base), len);
		return NULL;
	}
	return ivm_error_fault(va, "outside the snapshot");
}

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

static pid_t workload = -1;

static void kill_workload(void)
{
	if (workload <= 0)
		return;
	kill(workload, SIGKILL);
	for (;;) {
		pid_t r = waitpid(-1, NULL, __WALL);

		if (r == workload || (r < 0 && errno != EINTR))
			break;
	}
	workload = -1;
}

static pid_t start_workload(const char *bin)
{
	char buf[8192];
	size_t len = 0;
	int fds[2];

	if (pipe(fds))
		return -1;
	workload = fork();
	if (workload < 0)
		return -1;
	if (workload == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		execl(bin, bin, "--threads", "2", "--seconds", "60",
		      "--report-interval", "0", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		const char *line;
		ssize_t n;
		int tid;

		if (poll(&pfd, 1, 5000) != 1)
			break;
		n = read(fds[0], buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		line = strstr(buf, "comm=ls-worker-0 role=worker");
		if (line) {
			while (line > buf && line[-1] != '\n')
				line--;
			if (sscanf(line, "lockstorm: start tid=%d", &tid) == 1) {
				close(fds[0]);
				return tid;
			}
		}
		if (len == sizeof(buf) - 1)
			break;
	}
	close(fds[0]);
	return -1;
}

static int capture(const char *bin, struct snapshot *snaps, size_t n)
{
	pid_t tid = start_workload(bin);

	if (tid < 0) {
		fprintf(stderr, "bench_uunwind: %s: no worker started\n", bin);
		return -1;
	}
	if (ptrace(PTRACE_SEIZE, tid, 0, 0)) {
		perror("bench_uunwind: PTRACE_SEIZE");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct u;
		struct iovec local, remote;
		ssize_t got;
		int status;

		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) ||
		    waitpid(tid, &status, __WALL) != tid ||
		    ptrace(PTRACE_GETREGS, tid, 0, &u)) {
			perror("bench_uunwind: ptrace");
			return -1;
		}
		memset(&snaps[i].regs, 0, sizeof(snaps[i].regs));
		snaps[i].regs = (struct ivm_x86_regs){
			.valid = IVM_X86_REGS_GPRS,
			.rax = u.rax, .rbx = u.rbx, .rcx = u.rcx, .rdx = u.rdx,
			.rsi = u.rsi, .rdi = u.rdi, .rbp = u.rbp, .rsp = u.rsp,
			.r8 = u.r8, .r9 = u.r9, .r10 = u.r10, .r11 = u.r11,
			.r12 = u.r12, .r13 = u.r13, .r14 = u.r14, .r15 = u.r15,
			.rip = u.rip, .rflags = u.eflags,
		};
		snaps[i].base = u.rsp;
		snaps[i].bytes = malloc(SNAP_MAX);
		if (!snaps[i].bytes)
			return -1;
		/* Thread stacks end at a guard page or the mapping's end:
		 * shrink until the read fits. */
		for (size_t want = SNAP_MAX; want >= 4096; want /= 2) {
			local = (struct iovec){ snaps[i].bytes, want };
			remote = (struct iovec){ (void *)(uintptr_t)u.rsp, want };
			got = process_vm_readv(workload, &local, 1, &remote, 1,
					       0);
			if (got > 0) {
				snaps[i].len = (size_t)got;
				break;
			}
		}
		if (ptrace(PTRACE_CONT, tid, 0, 0)) {
			perror("bench_uunwind: PTRACE_CONT");
			return -1;
		}
		usleep(1000 + (i * 997) % 3000);
	}
	kill_workload();
	return 0;
}

enum which { FP, DWARF_CACHED, DWARF_UNCACHED };

static void run(const char *label, enum which which, struct ivm_ubinary *b,
		const struct ivm_umapping *maps, size_t nr_maps,
		struct snapshot *snaps, size_t n, unsigned int iterations,
		const struct ivm_ksyms *syms)
{
	size_t total = n * iterations, k = 0, reached = 0;
	double *times = calloc(total, sizeof(*times)), sum = 0;
	struct ivm_frame frames[MAX_FRAMES];
	uint64_t nframes = 0;

	if (!times)
		return;
	if (which != FP)
		ivm_ubinary_set_cache(b, which == DWARF_CACHED);
	for (unsigned int it = 0; it < iterations; it++) {
		for (size_t i = 0; i < n; i++) {
			struct ivm_kmem_reader r = { snap_read, &snaps[i] };
			struct ivm_error *err;
			struct ivm_stack st;
			double t0, t1;

			ivm_stack_init(&st, frames, MAX_FRAMES);
			t0 = now_us();
			if (which == FP)
				err = ivm_uunwind_fp(&r, &snaps[i].regs, 0,
						     &st);
			else
				err = ivm_uunwind_dwarf(&r, &snaps[i].regs, 0,
							maps, nr_maps, &st);
			t1 = now_us();
			if (err) {
				fprintf(stderr, "bench_uunwind: %s\n",
					ivm_error_string(err));
				ivm_error_destroy(err);
			}
			times[k++] = t1 - t0;
			sum += t1 - t0;
			nframes += st.nr;
			if (it)
				continue;
			for (uint32_t f = 0; f < st.nr; f++) {
				const struct ivm_ksym *sym;

				sym = ivm_ksyms_symbolize(syms,
					st.frames[f].pc -
					(st.frames[f].flags & IVM_FRAME_REGS ?
					 0 : 1), NULL);
				if (sym && !strcmp(sym->name, "worker_main")) {
					reached++;
					break;
				}
			}
		}
	}
	qsort(times, total, sizeof(*times), cmp_double);
	printf("%-16s %5.1f frames/stack, %4zu/%zu reach worker_main, "
	       "%9.0f stacks/s, median %.2f us/stack, p99 %.2f us\n", label,
	       (double)nframes / total, reached, n, total / (sum / 1e6),
	       times[total / 2], times[total * 99 / 100]);
	free(times);
}

int main(int argc, char **argv)
{
	const char *bin = "build/guest/lockstorm-nofp";
	unsigned int samples = 200, iterations = 20;
	struct ivm_umapping maps[IVM_UBINARY_MAX_EXEC];
	struct ivm_ubinary_stats stats;
	struct snapshot *snaps;
	struct ivm_ubinary *b;
	struct ivm_ksyms *syms;
	struct ivm_error *err;
	size_t nr_maps;
	int opt;

	static const struct option longopts[] = {
		{ "binary", required_argument, NULL, 'b' },
		{ "samples", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b': bin = optarg; break;
		case 's': samples = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'i': iterations = (unsigned int)strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: see the comment at the top of tests/bench/bench_uunwind.c\n");
			return 2;
		}
	}
	if (!samples || !iterations)
		return 2;
	err = ivm_ubinary_open(bin, &b);
	if (!err)
		err = ivm_ksyms_load_elf(bin, &syms);
	if (err)
		return ivm_error_report(err);
	if (ivm_ubinary_is_dyn(b)) {
		fprintf(stderr, "bench_uunwind: %s: needs a static non-PIE binary\n",
			bin);
		return 1;
	}
	nr_maps = ivm_ubinary_mappings(b, 0, maps, IVM_UBINARY_MAX_EXEC);
	snaps = calloc(samples, sizeof(*snaps));
	if (!snaps || capture(bin, snaps, samples)) {
		kill_workload();
		return 1;
	}
	printf("%s: %u samples of one worker, %u iterations each\n", bin,
	       samples, iterations);
	run("frame pointers", FP, b, maps, nr_maps, snaps, samples,
	    iterations, syms);
	run("dwarf, no cache", DWARF_UNCACHED, b, maps, nr_maps, snaps,
	    samples, iterations, syms);
	run("dwarf, cached", DWARF_CACHED, b, maps, nr_maps, snaps, samples,
	    iterations, syms);
	ivm_ubinary_stats(b, &stats);
	printf("row cache: %llu lookups, %llu hits\n",
	       (unsigned long long)stats.lookups,
	       (unsigned long long)stats.hits);
	for (unsigned int i = 0; i < samples; i++)
		free(snaps[i].bytes);
	free(snaps);
	ivm_ksyms_destroy(syms);
	ivm_ubinary_destroy(b);
	return 0;
}
