// SPDX-License-Identifier: MIT
/*
 * Benchmark: reading a guest process's mappings and its files' bytes from
 * guest memory, as `idlevm maps` and the capture engine do.
 *
 *   bench_maps (--qmp PATH | --domain NAME | --core FILE [--vmlinux F])
 *              --pid PID [--rounds N] [--file PATH]
 *
 * Prints, each over ROUNDS (default 200) after one warm-up, the median and
 * p99 microseconds and the guest memory reads (live: process_vm_readv()
 * system calls) of:
 *  - a whole VMA walk of PID (paths, files, names: ivm_mm_maps_read);
 *  - one address looked up alone (ivm_mm_vma_at: a tree descent);
 *  - a 4 KiB page of a mapped file from the page cache (xarray, struct
 *    page, the frame), a different page each time, nothing kept;
 *  - the same page again from the per-run cache.
 * The file is PATH, or the process's first file mapping.  For a process
 * of ~120 mappings: `mapfiles -n 100 DIR /dev/shm` in the guest.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernel/gfile.h"
#include "kernel/guest.h"
#include "kernel/mm_maps.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

struct series {
	uint64_t *ns, *calls;
	int n;
};

static void report(const char *what, struct series *s)
{
	uint64_t calls = 0;
	int i;

	for (i = 0; i < s->n; i++)
		calls += s->calls[i];
	qsort(s->ns, (size_t)s->n, sizeof(*s->ns), cmp_u64);
	printf("%-34s median %8.2f us  p99 %8.2f us  reads %.1f\n", what,
	       s->ns[s->n / 2] / 1e3, s->ns[(s->n * 99) / 100] / 1e3,
	       (double)calls / s->n);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "pid", required_argument, NULL, 'p' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "file", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	struct series walk, one, page, cached;
	struct ivm_gfile_config cfg;
	struct ivm_guest_task_list *list;
	struct ivm_gfile_read_info info;
	const struct ivm_vma *file = NULL;
	struct ivm_mm_source src;
	struct ivm_mm_maps *maps;
	struct ivm_gfile *g;
	struct ivm_guest *guest;
	struct ivm_error *err;
	const char *path = NULL;
	uint64_t mm = 0, pages;
	static uint8_t buf[4096];
	long pid = -1;
	int c, rounds = 200, r;
	size_t i, nr_vmas;

	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "p:r:f:",
				longopts, NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		if (c == 'p')
			pid = atol(optarg);
		else if (c == 'r')
			rounds = atoi(optarg);
		else if (c == 'f')
			path = optarg;
		else
			return 2;
	}
	if (pid < 0 || rounds < 1) {
		fprintf(stderr, "bench_maps: --pid PID [--rounds N] [--file PATH]\n");
		return 2;
	}
	err = ivm_guest_open(&opts, &guest);
	if (!err)
		err = ivm_mm_source_init(&src, guest->layout, guest->btf);
	if (!err)
		err = ivm_gfile_config_init(&cfg, guest->layout, guest->btf);
	if (!err) {
		/* One page kept: every page-cache read below misses. */
		cfg.cache_pages = 1;
		err = ivm_gfile_create(&cfg, &g);
	}
	if (!err)
		err = ivm_kernel_task_list(guest->layout, 0, &list);
	if (err)
		return ivm_error_report(err);
	for (i = 0; i < list->nr && !mm; i++)
		if (list->tasks[i].tgid == pid)
			mm = list->tasks[i].mm;
	if (!mm) {
		fprintf(stderr, "bench_maps: no process %ld with an mm\n", pid);
		return 1;
	}
	err = ivm_mm_maps_read(&src, mm, 0, &maps);
	if (err)
		return ivm_error_report(err);
	nr_vmas = ivm_mm_maps_count(maps);
	for (i = 0; i < nr_vmas && !file; i++) {
		const struct ivm_vma *v = ivm_mm_maps_get(maps, i);

		if (ivm_vma_is_file(v) && v->file.size >= 8192 &&
		    (!path || (v->path && !strcmp(v->path, path))))
			file = v;
	}
	if (!file) {
		fprintf(stderr, "bench_maps: pid %ld maps no file %s of two pages or more\n",
			pid, path ? path : "");
		return 1;
	}
	pages = file->file.size / 4096;
	printf("pid %ld: %zu mappings%s; file %s, %" PRIu64 " pages\n", pid,
	       nr_vmas, ivm_mm_maps_truncated(maps) ? " (truncated)" : "",
	       file->path, pages);
	walk.ns = calloc((size_t)rounds, sizeof(uint64_t));
	walk.calls = calloc((size_t)rounds, sizeof(uint64_t));
	one.ns = calloc((size_t)rounds, sizeof(uint64_t));
	one.calls = calloc((size_t)rounds, sizeof(uint64_t));
	page.ns = calloc((size_t)rounds, sizeof(uint64_t));
	page.calls = calloc((size_t)rounds, sizeof(uint64_t));
	cached.ns = calloc((size_t)rounds, sizeof(uint64_t));
	cached.calls = calloc((size_t)rounds, sizeof(uint64_t));
	walk.n = one.n = page.n = cached.n = rounds;
	for (r = -1; r < rounds; r++) {
		const struct ivm_vma *v = ivm_mm_maps_get(maps,
						(size_t)(r < 0 ? 0 : r) % nr_vmas);
		struct ivm_mm_maps *m2;
		struct ivm_vma one_vma;
		uint64_t t0, c0, dt[4], dc[4];
		int k;

		c0 = ivm_gmem_backend_calls(guest->gmem);
		t0 = ivm_mono_ns();
		err = ivm_mm_maps_read(&src, mm, 0, &m2);
		dt[0] = ivm_mono_ns() - t0;
		dc[0] = ivm_gmem_backend_calls(guest->gmem) - c0;
		if (err)
			return ivm_error_report(err);
		ivm_mm_maps_destroy(m2);

		c0 = ivm_gmem_backend_calls(guest->gmem);
		t0 = ivm_mono_ns();
		err = ivm_mm_vma_at(&src, mm, v->start, &one_vma);
		dt[1] = ivm_mono_ns() - t0;
		dc[1] = ivm_gmem_backend_calls(guest->gmem) - c0;
		if (err)
			return ivm_error_report(err);

		c0 = ivm_gmem_backend_calls(guest->gmem);
		t0 = ivm_mono_ns();
		err = ivm_gfile_read(g, &file->file, NULL, NULL, 0,
				     (uint64_t)(r + 1) % pages * 4096, buf,
				     sizeof(buf), &info);
		dt[2] = ivm_mono_ns() - t0;
		dc[2] = ivm_gmem_backend_calls(guest->gmem) - c0;
		if (err)
			return ivm_error_report(err);
		if (info.present != sizeof(buf))
			fprintf(stderr, "bench_maps: page %" PRIu64 " not in the page cache\n",
				(uint64_t)(r + 1) % pages);

		c0 = ivm_gmem_backend_calls(guest->gmem);
		t0 = ivm_mono_ns();
		err = ivm_gfile_read(g, &file->file, NULL, NULL, 0,
				     (uint64_t)(r + 1) % pages * 4096, buf,
				     sizeof(buf), &info);
		dt[3] = ivm_mono_ns() - t0;
		dc[3] = ivm_gmem_backend_calls(guest->gmem) - c0;
		if (err)
			return ivm_error_report(err);
		if (r < 0)
			continue;
		for (k = 0; k < 4; k++) {
			struct series *s = k == 0 ? &walk : k == 1 ? &one :
					   k == 2 ? &page : &cached;

			s->ns[r] = dt[k];
			s->calls[r] = dc[k];
		}
	}
	printf("memory: %s\n", guest->gmem_kind);
	report("whole VMA walk", &walk);
	report("one address (tree descent)", &one);
	report("4 KiB page from the page cache", &page);
	report("the same page, kept", &cached);
	ivm_mm_maps_destroy(maps);
	ivm_gfile_destroy(g);
	ivm_guest_task_list_destroy(list);
	ivm_guest_close(guest);
	return 0;
}
