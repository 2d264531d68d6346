// SPDX-License-Identifier: MIT
/*
 * gmem physical reads: the buffer backend, and the process backend against
 * this very process (real process_vm_readv() on our own buffers).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "gmem/gmem.h"

/*
 * Three regions: [0, 64K) [64K, 96K) adjacent, then a hole, then
 * [1M, 1M+16K).  Each byte holds a function of its gpa.
 */
#define NR_REGIONS 3
static uint8_t *bufs[NR_REGIONS];
static struct ivm_gmem_region regions[NR_REGIONS] = {
	/* Deliberately unsorted. */
	{ .gpa = 0x100000, .size = 0x4000 },
	{ .gpa = 0, .size = 0x10000 },
	{ .gpa = 0x10000, .size = 0x8000 },
};

static uint8_t pattern(uint64_t gpa)
{
	return (uint8_t)(gpa * 7 + (gpa >> 8));
}

static void fill(void)
{
	int i;

	for (i = 0; i < NR_REGIONS; i++) {
		uint64_t j;

		bufs[i] = malloc(regions[i].size);
		cr_assert(bufs[i]);
		for (j = 0; j < regions[i].size; j++)
			bufs[i][j] = pattern(regions[i].gpa + j);
		regions[i].hva = (uintptr_t)bufs[i];
	}
}

static void unfill(void)
{
	int i;

	for (i = 0; i < NR_REGIONS; i++)
		free(bufs[i]);
}

static void check_pattern(const uint8_t *buf, uint64_t gpa, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		cr_assert_eq(buf[i], pattern(gpa + i), "byte at gpa 0x%llx",
			     (unsigned long long)(gpa + i));
}

static void expect_fault(struct ivm_error *err, uint64_t address)
{
	cr_assert_not_null(err, "read succeeded, expected a fault at 0x%llx",
			   (unsigned long long)address);
	cr_assert_eq(err->code, IVM_ERROR_FAULT, "%s", ivm_error_string(err));
	cr_assert_eq(err->address, address, "fault at 0x%llx, expected 0x%llx",
		     (unsigned long long)err->address,
		     (unsigned long long)address);
	ivm_error_destroy(err);
}

/* The same checks for both backends. */
static void exercise(struct ivm_gmem *gmem)
{
	uint8_t buf[0x9000];
	uint64_t word;

	cr_assert_null(ivm_gmem_read_phys(gmem, 0x1234, buf, 100));
	check_pattern(buf, 0x1234, 100);
	cr_assert_null(ivm_gmem_read_u64_phys(gmem, 0x100008, &word));
	check_pattern((uint8_t *)&word, 0x100008, 8);
	/* Spanning the two adjacent regions: split, and read in full. */
	cr_assert_null(ivm_gmem_read_phys(gmem, 0xf000, buf, 0x2000));
	check_pattern(buf, 0xf000, 0x2000);
	/* All of [0, 96K) in one call. */
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x10000 - 0x4000, buf,
					  0x9000));
	check_pattern(buf, 0xc000, 0x9000);
	/* Last byte of the second region, then the hole. */
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x17fff, buf, 1));
	expect_fault(ivm_gmem_read_phys(gmem, 0x17ff0, buf, 0x20), 0x18000);
	expect_fault(ivm_gmem_read_phys(gmem, 0x18000, buf, 1), 0x18000);
	expect_fault(ivm_gmem_read_phys(gmem, 0x80000, buf, 8), 0x80000);
	/* End of the last region, and far beyond everything. */
	expect_fault(ivm_gmem_read_phys(gmem, 0x103ffc, buf, 8), 0x104000);
	expect_fault(ivm_gmem_read_phys(gmem, UINT64_MAX - 3, buf, 8),
		     UINT64_MAX - 3);
	/* Zero-length reads succeed anywhere. */
	cr_assert_null(ivm_gmem_read_phys(gmem, 0xdead0000, buf, 0));
}

static void exercise_many(struct ivm_gmem *gmem)
{
	uint8_t a[8], b[0x3000], c[16], d[4];
	struct ivm_gmem_piece pieces[] = {
		{ 0x100, a, sizeof(a) },
		{ 0xe800, b, sizeof(b) },	/* spans two regions */
		{ 0x100010, c, sizeof(c) },
		{ 0x5, d, 0 },
		{ 0x7, d, sizeof(d) },
	};
	struct ivm_gmem_piece bad[] = {
		{ 0x100, a, sizeof(a) },
		{ 0x17ffc, c, sizeof(c) },	/* runs into the hole */
		{ 0x20000000, d, sizeof(d) },	/* later hole: not reported */
	};

	cr_assert_null(ivm_gmem_read_phys_many(gmem, pieces, 5));
	check_pattern(a, 0x100, sizeof(a));
	check_pattern(b, 0xe800, sizeof(b));
	check_pattern(c, 0x100010, sizeof(c));
	check_pattern(d, 0x7, sizeof(d));
	memset(a, 0, sizeof(a));
	expect_fault(ivm_gmem_read_phys_many(gmem, bad, 3), 0x18000);
	/* Pieces before the faulting one are complete. */
	check_pattern(a, 0x100, sizeof(a));
	cr_assert_null(ivm_gmem_read_phys_many(gmem, NULL, 0));
}

Test(gmem, buffer_backend, .init = fill, .fini = unfill)
{
	struct ivm_gmem *gmem;

	cr_assert_null(ivm_gmem_buffer_create(regions, NR_REGIONS, &gmem));
	cr_assert(!ivm_gmem_is_core(gmem));
	exercise(gmem);
	exercise_many(gmem);
	ivm_gmem_destroy(gmem);
	ivm_gmem_destroy(NULL);
}

Test(gmem, process_backend_self, .init = fill, .fini = unfill)
{
	struct ivm_gmem *gmem;

	cr_assert_null(ivm_gmem_process_create(getpid(), regions, NR_REGIONS,
					       &gmem));
	exercise(gmem);
	exercise_many(gmem);
	ivm_gmem_destroy(gmem);
}

Test(gmem, process_many_batches, .init = fill, .fini = unfill)
{
	/* More pieces than one process_vm_readv() batch takes. */
	enum { N = 1500 };
	struct ivm_gmem_piece *pieces = calloc(N, sizeof(*pieces));
	uint64_t *words = calloc(N, sizeof(*words));
	struct ivm_gmem *gmem;
	size_t i;

	cr_assert(pieces && words);
	for (i = 0; i < N; i++) {
		pieces[i].gpa = (i * 97) % (0x18000 - 8);
		pieces[i].buf = &words[i];
		pieces[i].len = 8;
	}
	cr_assert_null(ivm_gmem_process_create(getpid(), regions, NR_REGIONS,
					       &gmem));
	cr_assert_null(ivm_gmem_read_phys_many(gmem, pieces, N));
	for (i = 0; i < N; i++)
		check_pattern((uint8_t *)&words[i], pieces[i].gpa, 8);
	/* A fault in the third batch names its address. */
	pieces[1200].gpa = 0x30000;
	expect_fault(ivm_gmem_read_phys_many(gmem, pieces, N), 0x30000);
	ivm_gmem_destroy(gmem);
	free(pieces);
	free(words);
}

/*
 * Pieces that start in the page where the last one ended, after it, share
 * its remote range (one pin of the page): each lands in its own buffer,
 * whatever the order and overlaps of the others.
 */
Test(gmem, process_pieces_of_one_page, .init = fill, .fini = unfill)
{
	uint64_t w[8];
	uint8_t big[0x1100];
	struct ivm_gmem_piece pieces[] = {
		{ 0x2000, &w[0], 8 },
		{ 0x2010, &w[1], 8 },		/* a gap of 8 */
		{ 0x2008, &w[2], 8 },		/* behind: a range of its own */
		{ 0x2ff8, &w[3], 8 },		/* the same page, far on */
		{ 0x3000, big, sizeof(big) },	/* right after, two pages */
		{ 0x4104, &w[4], 4 },
		{ 0x4100, &w[5], 8 },		/* overlaps the last */
		{ 0x17ff8, &w[6], 8 },		/* the region's last word */
	};
	struct ivm_gmem_piece into_hole[] = {
		{ 0x17f00, &w[0], 8 },
		{ 0x17ff8, &w[1], 16 },		/* runs out of the region */
	};
	struct ivm_gmem *gmem;
	size_t i;

	cr_assert_null(ivm_gmem_process_create(getpid(), regions, NR_REGIONS,
					       &gmem));
	cr_assert_null(ivm_gmem_read_phys_many(gmem, pieces, 8));
	for (i = 0; i < 8; i++)
		check_pattern(pieces[i].buf, pieces[i].gpa, pieces[i].len);
	expect_fault(ivm_gmem_read_phys_many(gmem, into_hole, 2), 0x18000);
	check_pattern((uint8_t *)&w[0], 0x17f00, 8);
	ivm_gmem_destroy(gmem);
}

Test(gmem, process_unmapped_host_memory)
{
	/*
	 * The region table claims RAM at an hva the process does not have
	 * mapped (a stale table): a fault at the gpa, not a crash or garbage.
	 */
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ivm_gmem_region r;
	struct ivm_gmem *gmem;
	uint8_t buf[32];

	cr_assert(map != MAP_FAILED);
	memset(map, 0xab, page);
	cr_assert_eq(munmap(map + page, page), 0);
	r = (struct ivm_gmem_region){ 0x1000000, 2 * page, (uintptr_t)map };
	cr_assert_null(ivm_gmem_process_create(getpid(), &r, 1, &gmem));
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x1000000 + page - 16, buf,
					  16));
	cr_assert_eq(buf[0], 0xab);
	/* Short read: the fault is at the first byte of the missing page. */
	expect_fault(ivm_gmem_read_phys(gmem, 0x1000000 + page - 16, buf, 32),
		     0x1000000 + page);
	/* Entirely missing: EFAULT from the kernel. */
	expect_fault(ivm_gmem_read_phys(gmem, 0x1000000 + page + 8, buf, 8),
		     0x1000000 + page + 8);
	/* The same through the batched path, alone and after a good piece. */
	{
		struct ivm_gmem_piece bad = { 0x1000000 + page + 8, buf, 8 };
		struct ivm_gmem_piece two[] = {
			{ 0x1000000, buf, 8 },
			{ 0x1000000 + page - 4, buf + 8, 8 },
		};

		expect_fault(ivm_gmem_read_phys_many(gmem, &bad, 1),
			     0x1000000 + page + 8);
		expect_fault(ivm_gmem_read_phys_many(gmem, two, 2),
			     0x1000000 + page);
	}
	ivm_gmem_destroy(gmem);
	munmap(map, page);
}

Test(gmem, process_gone)
{
	struct ivm_gmem_region r = { 0, 4096, 0 };
	static uint8_t page[4096];
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	uint64_t word;
	pid_t child;

	r.hva = (uintptr_t)page;
	child = fork();
	cr_assert(child >= 0);
	if (!child)
		_exit(0);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	/* Reaped: the pid is gone (reuse within this test is negligible). */
	cr_assert_null(ivm_gmem_process_create(child, &r, 1, &gmem));
	err = ivm_gmem_read_u64_phys(gmem, 0, &word);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_GONE, "%s", ivm_error_string(err));
	cr_assert(strstr(ivm_error_string(err), "qemu process exited"));
	ivm_error_destroy(err);
	ivm_gmem_destroy(gmem);
}

Test(gmem, region_table_rejects)
{
	static uint8_t b[4096];
	uintptr_t h = (uintptr_t)b;
	struct ivm_gmem_region overlap[] = {
		{ 0x2000, 0x2000, h }, { 0x0, 0x1000, h }, { 0x3000, 0x10, h },
	};
	struct ivm_gmem_region empty[] = { { 0x0, 0, h } };
	struct ivm_gmem_region wrap_gpa[] = { { UINT64_MAX - 0xfff, 0x1000, h } };
	struct ivm_gmem_region wrap_hva[] = { { 0, 0x1000, UINT64_MAX - 10 } };
	struct ivm_gmem_region touching[] = {
		{ 0x1000, 0x1000, h }, { 0x0, 0x1000, h },
	};
	struct ivm_gmem *gmem = NULL;
	struct ivm_error *err;

	err = ivm_gmem_buffer_create(overlap, 3, &gmem);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	cr_assert(strstr(ivm_error_string(err), "overlap"));
	ivm_error_destroy(err);
	err = ivm_gmem_process_create(getpid(), overlap, 3, &gmem);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_gmem_buffer_create(empty, 1, &gmem);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_gmem_buffer_create(wrap_gpa, 1, &gmem);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_gmem_buffer_create(wrap_hva, 1, &gmem);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_gmem_buffer_create(NULL, 0, &gmem);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_gmem_process_create(0, touching, 2, &gmem);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	cr_assert_null(gmem);
	/* Touching is not overlapping. */
	cr_assert_null(ivm_gmem_buffer_create(touching, 2, &gmem));
	ivm_gmem_destroy(gmem);
}

/* A backend of our own through the public ops table. */
static int custom_reads;

static struct ivm_error *custom_read(struct ivm_gmem *gmem, uint64_t gpa,
				     void *buf, size_t len)
{
	custom_reads++;
	if (gpa >= 0x1000 || len > 0x1000 - gpa)
		return ivm_error_fault(gpa < 0x1000 ? 0x1000 : gpa, "custom");
	memset(buf, *(int *)ivm_gmem_priv(gmem), len);
	return NULL;
}

static void custom_destroy(struct ivm_gmem *gmem)
{
	*(int *)ivm_gmem_priv(gmem) = -1;
}

Test(gmem, custom_backend)
{
	static const struct ivm_gmem_ops ops = {
		.read_phys = custom_read,
		.destroy = custom_destroy,
	};
	int fillbyte = 0x5a;
	uint8_t a[4], b[4];
	struct ivm_gmem_piece pieces[] = { { 0, a, 4 }, { 0xffe, b, 4 } };
	struct ivm_gmem *gmem;
	struct ivm_error *err;

	cr_assert_null(ivm_gmem_create(&ops, &fillbyte, &gmem));
	/* Without read_phys_many, pieces go one by one. */
	expect_fault(ivm_gmem_read_phys_many(gmem, pieces, 2), 0x1000);
	cr_assert_eq(custom_reads, 2);
	cr_assert_eq(a[3], 0x5a);
	err = ivm_gmem_core_read_vaddr(gmem, 0, a, 1);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	cr_assert_eq(ivm_gmem_core_nr_cpus(gmem), 0);
	ivm_gmem_destroy(gmem);
	cr_assert_eq(fillbyte, -1);
}
