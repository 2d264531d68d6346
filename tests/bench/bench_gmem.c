// SPDX-License-Identifier: MIT
/*
 * Guest physical read latency and throughput through gmem.
 *
 *   bench_gmem --qmp SOCKET | --domain NAME | --pid PID --region GPA:SIZE:HVA
 *              [--region ...] [--core PATH] [--iterations N] [--cr3 CR3 --va VA]
 *
 * With --qmp (or --domain, a libvirt domain), the QEMU pid and the RAM
 * regions come from the product's own discovery
 * (vmm/access/qemu_discovery.h) over that QMP socket (or libvirt's).  Otherwise they are
 * given: `info mtree -f` for the guest RAM ranges and `gpa2hva GPA` for their
 * host addresses.  Measured, for the process backend and optionally for a core
 * of the same guest: 8-byte and 4 KiB reads at random offsets of the
 * regions (median and p99 latency, MB/s), 16 scattered 8-byte reads in one
 * ivm_gmem_read_phys_many() call, and with --cr3/--va, 8-byte virtual reads
 * in the page at VA, without (four page-table reads plus the data each) and
 * with the translation cache, and the whole 4 KiB page at VA without and
 * with the walk memo (its walk predicted and checked in the data's round
 * trip, as captures read stack pages).  Also what a read of the scheduler's
 * stamps costs (kernel/last_ran.h): 100 tasks as one 2,200-byte span each,
 * as last_ran reads Debian 6.1's task_struct, against the same tasks as two
 * pieces each (the 192 bytes at its start, the 24 at 2,160: the fields
 * alone), one ivm_gmem_read_phys_many() call either way.
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
#include "access/libvirt_domain.h"
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

enum bench_kind { PHYS, MANY, VIRT, VIRT_TLB, PAGE, PAGE_MEMO, SPANS, FIELDS };

/* The stamp read's shape (see the top): tasks, span, the two field groups. */
#define TASKS 100
#define SPAN 2200
#define HEAD 192
#define TAIL_AT 2160
#define TAIL 24

static int run(struct ivm_gmem *gmem, const char *label, enum bench_kind kind,
	       size_t len, size_t iterations, uint64_t cr3, uint64_t va)
{
	static uint8_t buf[1 << 20];
	uint64_t *ns = calloc(iterations, sizeof(*ns));
	uint64_t words[16];
	struct ivm_gmem_piece pieces[2 * TASKS];
	size_t nr_pieces = 16;
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
		/* Tasks at 64-byte boundaries, as the slab places them. */
		for (j = 0; (kind == SPANS || kind == FIELDS) && j < TASKS; j++) {
			uint64_t task = random_gpa(SPAN + 64) & ~63ull;
			uint8_t *b = buf + j * SPAN;

			if (kind == SPANS) {
				pieces[j] = (struct ivm_gmem_piece){ task, b,
								     SPAN };
				continue;
			}
			pieces[2 * j] = (struct ivm_gmem_piece){ task, b, HEAD };
			pieces[2 * j + 1] = (struct ivm_gmem_piece){
				task + TAIL_AT, b + TAIL_AT, TAIL };
		}
		if (kind == SPANS || kind == FIELDS)
			nr_pieces = kind == SPANS ? TASKS : 2 * TASKS;
		t0 = now_ns();
		switch (kind) {
		case PHYS:
			err = ivm_gmem_read_phys(gmem, gpa, buf, len);
			break;
		case MANY:
		case SPANS:
		case FIELDS:
			err = ivm_gmem_read_phys_many(gmem, pieces, nr_pieces);
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
		 kind == SPANS ? "stamps: 100 spans" :
		 kind == FIELDS ? "stamps: 100x2 fields" :
		 kind == VIRT ? "8 B virt" :
		 kind == VIRT_TLB ? "8 B virt, tlb" :
		 kind == PAGE ? "4 KiB virt" :
		 kind == PAGE_MEMO ? "4 KiB virt, memo" :
		 len == 8 ? "8 B" : len == 4096 ? "4 KiB" : "1 MiB");
	report(what, ns, iterations,
	       kind == MANY ? 128 : kind == SPANS ? TASKS * SPAN :
	       kind == FIELDS ? TASKS * (HEAD + TAIL) : len);
	free(ns);
	return 0;
}

static int bench(struct ivm_gmem *gmem, const char *label, size_t iterations,
		 uint64_t cr3, uint64_t va)
{
	int r = 0, k;

	r |= run(gmem, label, PHYS, 8, iterations, 0, 0);
	r |= run(gmem, label, PHYS, 4096, iterations, 0, 0);
	if (largest_size() >= (1 << 20))
		r |= run(gmem, label, PHYS, 1 << 20, iterations / 100 + 1, 0,
			 0);
	r |= run(gmem, label, MANY, 8, iterations, 0, 0);
	/* Alternately, so that the host's drift falls on both. */
	for (k = 0; k < 3; k++) {
		r |= run(gmem, label, SPANS, SPAN, iterations / 10 + 1, 0, 0);
		r |= run(gmem, label, FIELDS, SPAN, iterations / 10 + 1, 0, 0);
	}
	if (cr3) {
		r |= run(gmem, label, VIRT, 8, iterations, cr3, va);
		r |= run(gmem, label, VIRT_TLB, 8, iterations, cr3, va);
		r |= run(gmem, label, PAGE, 4096, iterations, cr3, va);
		r |= run(gmem, label, PAGE_MEMO, 4096, iterations, cr3, va);
	}
	return r;
}

/* Pid and regions through vmm/access/qemu_discovery.h, as idlevm finds them. */
static struct ivm_error *discover(const char *socket_path, const char *domain,
				  pid_t *pid)
{
	struct ivm_qemu_vcpus *vcpus = NULL;
	struct ivm_libvirt_domain *dom = NULL;
	struct ivm_qemu_ram *ram = NULL;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	size_t i;

	if (domain) {
		err = ivm_libvirt_domain_open(NULL, domain, &dom);
		if (!err)
			err = ivm_qmp_connect_libvirt(dom, &qmp);
	} else {
		err = ivm_qmp_connect_socket(socket_path, &qmp);
	}
	if (err) {
		ivm_libvirt_domain_close(dom);
		return err;
	}
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
	ivm_libvirt_domain_close(dom);
	return err;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_gmem --qmp SOCKET | --domain NAME | --pid PID --region GPA:SIZE:HVA\n"
		"                  [--region ...] [--core PATH] [--iterations N] [--cr3 CR3 --va VA]\n");
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
		{ "domain", required_argument, NULL, 'd' },
		{ 0 },
	};
	const char *core_path = NULL, *qmp_path = NULL, *domain = NULL;
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
		case 'd':
			domain = optarg;
			break;
		default:
			usage();
		}
	}
	if ((qmp_path || domain) && (pid || nr_regions || (qmp_path && domain)))
		usage();
	if (qmp_path || domain) {
		err = discover(qmp_path, domain, &pid);
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
