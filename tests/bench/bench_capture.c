// SPDX-License-Identifier: MIT
/*
 * Benchmark: whole stack captures (task_struct read, kernel stack by ORC,
 * user stack by DWARF CFI or frame pointers, task_struct read again) from a
 * live guest or a memory dump, as `idlevm stack` and the profiler do them.
 *
 *   bench_capture (--qmp PATH | --domain NAME | --core FILE [--vmlinux F])
 *                 [--binary FILE] [--symdir DIR] [--comm PREFIX]
 *                 [--pid PID] [--rounds N]
 *
 * Captures every non-running task whose comm starts with PREFIX (default
 * "ls-worker") ROUNDS times (default 200) after one warm-up round, and
 * prints stacks per second, the median and p99 microseconds per kept stack,
 * the mean frames per stack, and the guest memory reads per kept stack
 * (ivm_gmem_backend_calls: live, the process_vm_readv() system calls),
 * median and mean.  --pid keeps the tasks of one guest process.  The
 * warm-up round's captures are the first of each process: they identify
 * its executable and open its host copy (--binary, --symdir), read its
 * mappings and the headers of every ELF object it maps (no host copy:
 * their CFI and names come from guest memory); their median is printed
 * apart.  Then the user objects met, the memory their per-build-id caches
 * hold, and the CFI rows looked up (from the cache, and those whose bytes
 * the guest did not hold).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "profile/capture.h"
#include "kernel/guest.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "binary", required_argument, NULL, 'b' },
		{ "comm", required_argument, NULL, 'm' },
		{ "symdir", required_argument, NULL, 's' },
		{ "pid", required_argument, NULL, 'p' },
		{ "rounds", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	const char *binary = NULL, *prefix = "ls-worker", *symdir = NULL;
	uint64_t first[64];
	size_t nr_first = 0;
	long pid = -1;
	struct ivm_guest_task_list *list;
	struct ivm_capture_engine *engine;
	struct ivm_capture *cap;
	struct ivm_guest *g;
	struct ivm_error *err;
	uint64_t *lat, *calls, frames = 0, t0, total_ns = 0, calls_sum = 0;
	size_t i, nr = 0, kept = 0, targets = 0, cap_lat;
	int c, rounds = 200, r;

	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "b:m:r:s:p:",
				longopts, NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		if (c == 'b')
			binary = optarg;
		else if (c == 'm')
			prefix = optarg;
		else if (c == 'r')
			rounds = atoi(optarg);
		else if (c == 's')
			symdir = optarg;
		else if (c == 'p')
			pid = atol(optarg);
		else
			return 2;
	}
	err = ivm_guest_open(&opts, &g);
	if (!err)
		err = ivm_capture_engine_create(g, &engine);
	if (!err && binary)
		err = ivm_capture_engine_add_binary(engine, binary);
	if (!err && symdir)
		err = ivm_capture_engine_set_symdir(engine, symdir);
	if (!err)
		err = ivm_kernel_task_list(g->layout, 0, &list);
	if (err)
		return ivm_error_report(err);
	cap = malloc(sizeof(*cap));
	for (i = 0; i < list->nr; i++)
		targets += !strncmp(list->tasks[i].comm, prefix, strlen(prefix)) &&
			   (pid < 0 || list->tasks[i].tgid == pid);
	if (!targets || rounds < 1) {
		fprintf(stderr, "bench_capture: no task named %s*\n", prefix);
		return 1;
	}
	cap_lat = targets * (size_t)rounds;
	lat = calloc(cap_lat, sizeof(*lat));
	calls = calloc(cap_lat, sizeof(*calls));
	if (!cap || !lat || !calls) {
		fprintf(stderr, "bench_capture: out of memory\n");
		return 1;
	}
	for (r = -1; r < rounds; r++) {
		for (i = 0; i < list->nr; i++) {
			const struct ivm_guest_task *t = &list->tasks[i];
			uint64_t dt, c0;

			if (strncmp(t->comm, prefix, strlen(prefix)) ||
			    (pid >= 0 && t->tgid != pid))
				continue;
			c0 = ivm_gmem_backend_calls(g->gmem);
			t0 = ivm_mono_ns();
			err = ivm_capture_task(engine, t->addr, NULL, -1, -1, cap);
			dt = ivm_mono_ns() - t0;
			c0 = ivm_gmem_backend_calls(g->gmem) - c0;
			if (err)
				return ivm_error_report(err);
			if (r < 0) {
				/* warm-up: the first capture of each task */
				if (nr_first < 64)
					first[nr_first++] = dt;
				continue;
			}
			total_ns += dt;
			nr++;
			if (cap->outcome != IVM_CAPTURE_KEPT)
				continue;
			calls[kept] = c0;
			calls_sum += c0;
			lat[kept++] = dt;
			frames += cap->sample.nr_kernel + cap->sample.nr_user;
		}
	}
	qsort(lat, kept, sizeof(*lat), cmp_u64);
	qsort(calls, kept, sizeof(*calls), cmp_u64);
	printf("%s: %zu captures of %zu tasks (%zu kept, %zu discarded as running)\n",
	       opts.core_path ? "core" : "live", nr, targets, kept, nr - kept);
	if (kept)
		printf("  %.0f stacks/s, median %.2f us, p99 %.2f us per kept stack, %.1f frames per stack\n",
		       (double)nr / ((double)total_ns / 1e9),
		       (double)lat[kept / 2] / 1e3,
		       (double)lat[kept * 99 / 100] / 1e3,
		       (double)frames / (double)kept);
	if (kept)
		printf("  guest memory reads per kept stack: median %" PRIu64 ", mean %.1f\n",
		       calls[kept / 2], (double)calls_sum / (double)kept);
	{
		struct ivm_uobjects *objs = ivm_capture_engine_objects(engine);
		struct ivm_uobjects_stats us;

		ivm_uobjects_stats(objs, &us);
		printf("  user objects: %zu (%zu with guest CFI), their caches %.1f KiB; CFI rows: %" PRIu64
		       " lookups, %" PRIu64 " from the cache, %" PRIu64
		       " decoded from the page cache, %" PRIu64
		       " not in guest memory, %" PRIu64 " malformed\n",
		       us.objects, us.with_image,
		       (double)ivm_uobjects_memory(objs) / 1024,
		       us.row_lookups, us.row_hits,
		       us.row_page_cache + us.row_other_mapping,
		       us.row_faults, us.row_bad);
	}
	if (nr_first) {
		printf("  first capture of each task (warm-up): %.2f us",
		       (double)first[0] / 1e3);
		qsort(first + 1, nr_first - 1, sizeof(*first), cmp_u64);
		if (nr_first > 1)
			printf(" the very first, median of the rest %.2f us",
			       (double)first[1 + (nr_first - 1) / 2] / 1e3);
		printf("\n");
	}
	free(lat);
	free(calls);
	free(cap);
	ivm_guest_task_list_destroy(list);
	ivm_capture_engine_destroy(engine);
	ivm_guest_close(g);
	return 0;
}
