// SPDX-License-Identifier: MIT
/*
 * Guest physical read latency and throughput through gmem.
 *
 *   bench_gmem --qmp SOCKET | --pid PID --region GPA:SIZE:HVA [--region ...]
 *              [--core PATH] [--iterations N] [--cr3 CR3 --va VA]
 *
 * With --qmp, the QEMU pid and the RAM regions come from the product's own
 * discovery (vmm/access/qemu_discovery.h) over that QMP socket.  Otherwise they are
 * given: `info mtree -f` for the guest RAM ranges and `gpa2hva GPA` for their
 * host addresses.  Measured, for the process backend and optionally for a core
 * of the same guest: 8-byte and 4 KiB reads at random offsets of the
 * regions (median and p99 latency, MB/s), 16 scattered 8-byte reads in one
 * ivm_gmem_read_phys_many() call, and with --cr3/--va, 8-byte virtual reads
 * in the page at VA, without (four page-table reads plus the data each) and
 * with the translation cache, and the whole 4 KiB page at VA without and
 * with the walk memo (its walk predicted and checked in the data's round
 * trip, as captures read stack pages).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmem/gmem.h"
#include "access/qemu_discovery.h"
#include "access/qmp.h"
#include "gmem/x86_64_paging.h"

#define MAX_REGIONS 16

static struct ivm_gmem_region regions[MAX_REGIONS];
static size_t nr_regions;
static uint64_t total_size;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * A random gpa with len bytes readable inside one region, aligned to len;
 * regions smaller than len are skipped (the largest one is the fallback).
 */
static uint64_t random_gpa(size_t len)
{
	uint64_t off = next_rand() % total_size;
	size_t i, largest = 0;

	for (i = 0; i < nr_regions; i++)
		if (regions[i].size > regions[largest].size)
			largest = i;
	for (i = 0; i < nr_regions; i++) {
		if (off < regions[i].size) {
			uint64_t gpa;

			if (regions[i].size < len) {
				i = largest;
				off %= regions[i].size;
			}
			gpa = regions[i].gpa + off;

			gpa &= ~(uint64_t)(len - 1);
			if (gpa < regions[i].gpa)
				gpa = regions[i].gpa;
			if (gpa + len > regions[i].gpa + regions[i].size)
				gpa = regions[i].gpa + regions[i].size - len;
			return gpa;
		}
		off -= regions[i].size;
	}
	return regions[0].gpa;
}

static uint64_t largest_size(void)
{
	uint64_t max = 0;
	size_t i;

	for (i = 0; i < nr_regions; i++)
		if (regions[i].size > max)
			max = regions[i].size;
	return max;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, size_t n, size_t bytes)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++)
		sum += ns[i];
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("%-28s median %8.2f us  p99 %8.2f us  %9.1f MB/s (mean)\n", what,
	       ns[n / 2] / 1e3, ns[n * 99 / 100] / 1e3,
	       sum ? (double)bytes * n / (sum / 1e9) / 1e6 : 0.0);
}

enum bench_kind { PHYS, MANY, VIRT, VIRT_TLB, PAGE, PAGE_MEMO };

static int run(struct ivm_gmem *gmem, const char *label, enum bench_kind kind,
	       size_t len, size_t iterations, uint64_t cr3, uint64_t va)
{
	static uint8_t buf[1 << 20];
	uint64_t *ns = calloc(iterations, sizeof(*ns));
	uint64_t words[16];
	struct ivm_gmem_piece pieces[16];
	struct ivm_x86_64_tlb tlb = { 0 };
	static struct ivm_x86_64_walk_memo memo;
	char what[64];
	size_t i, j;

	if (!ns)
		return 1;
	for (i = 0; i < iterations; i++) {
		struct ivm_error *err = NULL;
		uint64_t gpa = random_gpa(len), t0;
		/* A word of the page at va (which need not be aligned). */
		uint64_t word_va = (va & ~0xfffull) + (next_rand() % 512) * 8;

		if (kind == MANY)
			for (j = 0; j < 16; j++)
				pieces[j] = (struct ivm_gmem_piece){
					random_gpa(8), &words[j], 8 };
		t0 = now_ns();
		switch (kind) {
		case PHYS:
			err = ivm_gmem_read_phys(gmem, gpa, buf, len);
			break;
		case MANY:
			err = ivm_gmem_read_phys_many(gmem, pieces, 16);
			break;
		case VIRT:
			err = ivm_gmem_read_virt(gmem, cr3, 0, word_va, buf, 8);
			break;
		case VIRT_TLB:
			/* As an unwinder would: many words of one page. */
			err = ivm_x86_64_read_virt(gmem, &tlb, cr3, 0, word_va,
						   buf, 8);
			break;
		case PAGE:
			err = ivm_gmem_read_virt(gmem, cr3, 0, va & ~0xfffull,
						 buf, 4096);
			break;
		case PAGE_MEMO:
			err = ivm_x86_64_read_virt_memo(gmem, &memo, cr3, 0,
							va & ~0xfffull, buf,
							4096);
			break;
		}
		ns[i] = now_ns() - t0;
		if (err) {
			free(ns);
			return ivm_error_report(err);
		}
	}
	snprintf(what, sizeof(what), "%s %s", label,
		 kind == MANY ? "16x8 B many" :
		 kind == VIRT ? "8 B virt" :
		 kind == VIRT_TLB ? "8 B virt, tlb" :
		 kind == PAGE ? "4 KiB virt" :
		 kind == PAGE_MEMO ? "4 KiB virt, memo" :
		 len == 8 ? "8 B" : len == 4096 ? "4 KiB" : "1 MiB");
	report(what, ns, iterations, kind == MANY ? 128 : len);
	free(ns);
	return 0;
}

static int bench(struct ivm_gmem *gmem, const char *label, size_t iterations,
		 uint64_t cr3, uint64_t va)
{
	int r = 0;

	r |= run(gmem, label, PHYS, 8, iterations, 0, 0);
	r |= run(gmem, label, PHYS, 4096, iterations, 0, 0);
	if (largest_size() >= (1 << 20))
		r |= run(gmem, label, PHYS, 1 << 20, iterations / 100 + 1, 0,
			 0);
	r |= run(gmem, label, MANY, 8, iterations, 0, 0);
	if (cr3) {
		r |= run(gmem, label, VIRT, 8, iterations, cr3, va);
		r |= run(gmem, label, VIRT_TLB, 8, iterations, cr3, va);
		r |= run(gmem, label, PAGE, 4096, iterations, cr3, va);
		r |= run(gmem, label, PAGE_MEMO, 4096, iterations, cr3, va);
	}
	return r;
}

/* Pid and regions through vmm/access/qemu_discovery.h, as idlevm finds them. */
static struct ivm_error *discover(const char *socket_path, pid_t *pid)
{
	struct ivm_qemu_vcpus *vcpus = NULL;
	struct ivm_qemu_ram *ram = NULL;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	size_t i;

	err = ivm_qmp_connect_socket(socket_path, &qmp);
	if (err)
		return err;
	err = ivm_qemu_vcpus(qmp, &vcpus);
	if (!err)
		err = ivm_qemu_pid(qmp, vcpus, "/proc", pid);
	if (!err)
		err = ivm_qemu_ram_regions(qmp, &ram);
	if (!err) {
		for (i = 0; i < ram->nr && nr_regions < MAX_REGIONS; i++) {
			regions[nr_regions++] = ram->region[i];
			total_size += ram->region[i].size;
			printf("region gpa 0x%" PRIx64 " size 0x%" PRIx64 " hva 0x%" PRIx64 "\n",
			       ram->region[i].gpa, ram->region[i].size,
			       ram->region[i].hva);
		}
	}
	free(ram);
	free(vcpus);
	ivm_qmp_destroy(qmp);
	return err;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_gmem --qmp SOCKET | --pid PID --region GPA:SIZE:HVA [--region ...]\n"
		"                  [--core PATH] [--iterations N] [--cr3 CR3 --va VA]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "region", required_argument, NULL, 'r' },
		{ "core", required_argument, NULL, 'c' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "cr3", required_argument, NULL, '3' },
		{ "va", required_argument, NULL, 'v' },
		{ "qmp", required_argument, NULL, 'q' },
		{ 0 },
	};
	const char *core_path = NULL, *qmp_path = NULL;
	size_t iterations = 20000;
	uint64_t cr3 = 0, va = 0;
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	pid_t pid = 0;
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pid = atoi(optarg);
			break;
		case 'r':
			if (nr_regions == MAX_REGIONS ||
			    sscanf(optarg, "%" SCNi64 ":%" SCNi64 ":%" SCNi64,
				   &regions[nr_regions].gpa,
				   &regions[nr_regions].size,
				   &regions[nr_regions].hva) != 3)
				usage();
			total_size += regions[nr_regions++].size;
			break;
		case 'c':
			core_path = optarg;
			break;
		case 'n':
			iterations = strtoul(optarg, NULL, 0);
			break;
		case '3':
			cr3 = strtoull(optarg, NULL, 0);
			break;
		case 'v':
			va = strtoull(optarg, NULL, 0);
			break;
		case 'q':
			qmp_path = optarg;
			break;
		default:
			usage();
		}
	}
	if (qmp_path && (pid || nr_regions))
		usage();
	if (qmp_path) {
		err = discover(qmp_path, &pid);
		if (err)
			return ivm_error_report(err);
	}
	if (!pid || !nr_regions || iterations < 100)
		usage();
	err = ivm_gmem_process_create(pid, regions, nr_regions, &gmem);
	if (err)
		return ivm_error_report(err);
	r = bench(gmem, "process", iterations, cr3, va);
	ivm_gmem_destroy(gmem);
	if (core_path) {
		err = ivm_gmem_core_create(core_path, &gmem);
		if (err)
			return ivm_error_report(err);
		r |= bench(gmem, "core", iterations, cr3, va);
		ivm_gmem_destroy(gmem);
	}
	return r;
}
