// SPDX-License-Identifier: MIT
/*
 * Memoized page walks (x86_64_paging.h: ivm_x86_64_walk_memo) over
 * synthetic guest RAM: they must read exactly what a fresh walk reads, in
 * fewer round trips, whatever the guest does to its tables between reads.
 * The gmem under test counts its batched round trips, as the process
 * backend would make system calls.
 */
#include <criterion/criterion.h>

#include "gmem/gmem.h"
#include "unwind/kunwind.h"
#include "test_paging_synth.h"
#include "gmem/x86_64_paging.h"

#define RAM_SIZE (8ull << 20)
/* A small region high up whose end is not page aligned. */
#define HIGH_GPA (5ull << 30)
#define HIGH_SIZE 0xf800ull

static struct synth s;
static uint8_t *high;
static struct ivm_gmem *inner;		/* the buffer backend */
static struct ivm_gmem *gmem;		/* inner, with batches, counted */
static struct ivm_x86_64_walk_memo memo;

/* A backend with batched reads, over the buffer backend. */
static struct ivm_error *count_read_phys(struct ivm_gmem *g, uint64_t gpa,
					 void *buf, size_t len)
{
	return ivm_gmem_read_phys(inner, gpa, buf, len);
}

static struct ivm_error *count_read_many(struct ivm_gmem *g,
					 const struct ivm_gmem_piece *pieces,
					 size_t nr)
{
	return ivm_gmem_read_phys_many(inner, pieces, nr);
}

static const struct ivm_gmem_ops count_ops = {
	.read_phys = count_read_phys,
	.read_phys_many = count_read_many,
};

static void setup_gmem(bool la57)
{
	struct ivm_gmem_region regions[2];

	synth_init(&s, RAM_SIZE, la57);
	high = calloc(1, HIGH_SIZE);
	cr_assert(high);
	regions[0] = (struct ivm_gmem_region){ 0, RAM_SIZE,
					       (uintptr_t)s.ram };
	regions[1] = (struct ivm_gmem_region){ HIGH_GPA, HIGH_SIZE,
					       (uintptr_t)high };
	cr_assert_null(ivm_gmem_buffer_create(regions, 2, &inner));
	cr_assert_null(ivm_gmem_create(&count_ops, NULL, &gmem));
	memset(&memo, 0, sizeof(memo));
}

static void setup4(void)
{
	setup_gmem(false);
}

static void setup5(void)
{
	setup_gmem(true);
}

static void teardown(void)
{
	ivm_gmem_destroy(gmem);
	ivm_gmem_destroy(inner);
	gmem = inner = NULL;
	synth_fini(&s);
	free(high);
}

/* Fill the frame at pa with bytes that say where they are. */
static void fill_frame(uint64_t pa, uint8_t seed)
{
	size_t i;

	for (i = 0; i < 4096; i++)
		s.ram[pa + i] = (uint8_t)(seed + i * 13 + (i >> 8));
}

/*
 * Read through the memo and through a plain walk; both must agree on
 * success, bytes and fault address.  Returns the memo read's round trips.
 */
static uint64_t read_both(uint64_t va, size_t len, struct ivm_error **ret)
{
	static uint8_t plain[3 * 4096], memod[3 * 4096];
	struct ivm_error *perr, *merr;
	uint64_t before;

	cr_assert(len <= sizeof(plain));
	memset(plain, 0xaa, len);
	memset(memod, 0x55, len);
	perr = ivm_gmem_read_virt(inner, s.root, s.la57, va, plain, len);
	before = ivm_gmem_backend_calls(gmem);
	merr = ivm_x86_64_read_virt_memo(gmem, &memo, s.root, s.la57, va,
					 memod, len);
	before = ivm_gmem_backend_calls(gmem) - before;
	cr_assert_eq(!perr, !merr, "va 0x%llx: plain %s, memo %s",
		     (unsigned long long)va, ivm_error_string(perr),
		     ivm_error_string(merr));
	if (perr) {
		cr_assert_eq(merr->code, IVM_ERROR_FAULT, "%s",
			     ivm_error_string(merr));
		cr_assert_eq(merr->address, perr->address,
			     "va 0x%llx: memo fault 0x%llx, plain 0x%llx",
			     (unsigned long long)va,
			     (unsigned long long)merr->address,
			     (unsigned long long)perr->address);
	} else {
		cr_assert_arr_eq(memod, plain, len, "va 0x%llx: bytes differ",
				 (unsigned long long)va);
	}
	ivm_error_destroy(perr);
	if (ret)
		*ret = merr;
	else
		ivm_error_destroy(merr);
	return before;
}

Test(paging_memo, warm_walk_is_one_round_trip, .init = setup4,
     .fini = teardown)
{
	uint64_t va = 0xffffc90000104000ull;
	uint64_t n;

	synth_map(&s, va, 0x40000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	fill_frame(0x40000, 1);
	/* Cold: one round trip per level (4), then the data (1). */
	n = read_both(va + 0x10, 64, NULL);
	cr_assert_eq(n, 5, "cold read took %llu round trips",
		     (unsigned long long)n);
	cr_assert_eq(memo.unknown, 4);
	/* Warm: the four entries and the data in one. */
	n = read_both(va + 0x800, 256, NULL);
	cr_assert_eq(n, 1, "warm read took %llu round trips",
		     (unsigned long long)n);
	cr_assert_eq(memo.confirmed, 4);
	/* A neighbour in the same table: upper entries known, PTE not. */
	synth_map(&s, va + 0x1000, 0x41000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	fill_frame(0x41000, 2);
	n = read_both(va + 0x1000, 4096, NULL);
	cr_assert_eq(n, 2, "neighbour took %llu round trips",
		     (unsigned long long)n);
	/* Both pages in one read, warm: one round trip. */
	n = read_both(va + 0xff0, 32, NULL);
	cr_assert_eq(n, 1);
	/* Without a memo: a plain walk per round trip. */
	{
		uint8_t buf[8];
		uint64_t before = ivm_gmem_backend_calls(gmem);

		cr_assert_null(ivm_x86_64_read_virt_memo(gmem, NULL, s.root,
							 false, va, buf, 8));
		cr_assert_eq(ivm_gmem_backend_calls(gmem) - before, 5);
	}
}

Test(paging_memo, remapped_page_is_never_stale, .init = setup4,
     .fini = teardown)
{
	uint64_t va = 0xffffc90000200000ull, *pte, *pde;
	uint64_t n;

	synth_map(&s, va, 0x50000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	fill_frame(0x50000, 10);
	fill_frame(0x51000, 20);
	fill_frame(0x52000, 30);
	read_both(va, 4096, NULL);
	read_both(va, 4096, NULL);
	/* The guest points the page elsewhere: the new frame is read. */
	pte = synth_walk_to(&s, va, 1);
	*pte = 0x51000 | SYNTH_P;
	n = read_both(va, 4096, NULL);
	cr_assert_eq(memo.changed, 1);
	/* One round trip found the change, one read the data. */
	cr_assert_eq(n, 2, "%llu round trips", (unsigned long long)n);
	/* And then warm again. */
	cr_assert_eq(read_both(va, 4096, NULL), 1);

	/*
	 * A new page table under the same pd entry's slot (as when Linux
	 * frees and reallocates one): the old table is still in RAM with
	 * the old mapping, and must not be used.
	 */
	pde = synth_walk_to(&s, va, 2);
	{
		uint64_t new_pt = synth_alloc_table(&s);

		*(uint64_t *)(s.ram + new_pt + 8 * ((va >> 12) & 511)) =
			0x52000 | SYNTH_P;
		*pde = new_pt | SYNTH_P | SYNTH_RW;
	}
	read_both(va + 8, 64, NULL);
	{
		uint8_t b;

		cr_assert_null(ivm_x86_64_read_virt_memo(gmem, &memo, s.root,
							 false, va + 8, &b, 1));
		cr_assert_eq(b, s.ram[0x52000 + 8]);
	}
	/* A 4 KiB mapping replaced by a 2 MiB page (a huge vmap). */
	*pde = 0x400000 | SYNTH_P | SYNTH_PS;
	read_both(va + 0x1234, 64, NULL);
	cr_assert_eq(read_both(va + 0x1234, 64, NULL), 1);
}

Test(paging_memo, unmapped_after_warm_faults_exactly, .init = setup4,
     .fini = teardown)
{
	uint64_t va = 0x7ffd12340000ull;
	struct ivm_error *err;
	int level;

	for (level = 4; level >= 1; level--) {
		uint64_t *e;

		synth_map(&s, va, 0x60000, IVM_X86_64_PAGE_SIZE_4K,
			  SYNTH_P | SYNTH_US);
		read_both(va + 0x40, 8, NULL);
		read_both(va + 0x40, 8, NULL);
		e = synth_walk_to(&s, va, level);
		*e &= ~SYNTH_P;
		read_both(va + 0x40, 8, &err);
		cr_assert_not_null(err, "level %d", level);
		cr_assert_eq(err->address, va + 0x40);
		ivm_error_destroy(err);
		*e |= SYNTH_P;
	}
	/* A read spanning into an unmapped page: its first byte. */
	read_both(va + 0xff8, 16, &err);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, va + 0x1000);
	ivm_error_destroy(err);
}

Test(paging_memo, tables_moved_outside_ram, .init = setup4, .fini = teardown)
{
	uint64_t va = 0xffffffff80000000ull, *e, pdpte;
	struct ivm_error *err;

	synth_map(&s, va, 0x1000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	read_both(va, 8, NULL);
	read_both(va, 8, NULL);
	/* The pd moves into a hole: the walk faults at va, not a crash. */
	e = synth_walk_to(&s, va, 3);
	pdpte = *e;
	*e = (3ull << 30) | SYNTH_P;
	read_both(va, 8, &err);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, va);
	ivm_error_destroy(err);
	/* Into the high region's half page: the entry read itself faults. */
	*e = (HIGH_GPA + 0xf000) | SYNTH_P;
	read_both(va, 8, &err);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	/* The data frame half outside RAM: the first missing byte. */
	*e = pdpte;
	read_both(va, 8, NULL);
	synth_map(&s, va, HIGH_GPA + 0xf000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	read_both(va + 0x7f0, 8, NULL);
	read_both(va + 0x7f0, 32, &err);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, va + 0x800);
	ivm_error_destroy(err);
	/* Warm, then the same fault again through the predicted walk. */
	read_both(va + 0x7f0, 32, &err);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, va + 0x800);
	ivm_error_destroy(err);
}

Test(paging_memo, hostile_cyclic_tables_end, .init = setup4, .fini = teardown)
{
	uint64_t *pml4 = (uint64_t *)(s.ram + s.root);
	uint64_t va, n;
	struct ivm_error *err;
	int i;

	/* Every pml4 entry points back at the pml4 itself. */
	for (i = 0; i < 512; i++)
		pml4[i] = s.root | SYNTH_P | SYNTH_RW;
	va = 0xfffffffffffff000ull;
	for (i = 0; i < 3; i++) {
		n = read_both(va + 8, 64, NULL);
		cr_assert_leq(n, 5);
	}
	cr_assert_eq(n, 1);
	/* A not-present leaf in the loop: a fault, not a hang. */
	pml4[510] = 0;
	read_both(0xffffffffffffe000ull, 8, &err);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	/* The entry flips between table and garbage from read to read. */
	for (i = 0; i < 8; i++) {
		pml4[511] = (i & 1) ? (s.root | SYNTH_P) :
				      (s.root | SYNTH_P | SYNTH_PS);
		n = read_both(va + 8 * i, 8, &err);
		cr_assert_leq(n, 6);
		ivm_error_destroy(err);
	}
	/* Non-canonical addresses fault at themselves. */
	read_both(0x0000800000000000ull, 8, &err);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, 0x0000800000000000ull);
	ivm_error_destroy(err);
	/* A read running off the top of the address space. */
	pml4[511] = s.root | SYNTH_P;
	read_both(0xfffffffffffffff0ull, 32, &err);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, 0);
	ivm_error_destroy(err);
}

Test(paging_memo, large_pages_and_la57, .init = setup5, .fini = teardown)
{
	uint64_t va2m = 0xff11000000200000ull, va1g = 0xff11000040000000ull;

	synth_map(&s, va2m, 0x200000, IVM_X86_64_PAGE_SIZE_2M, SYNTH_P);
	synth_map(&s, va1g, HIGH_GPA, IVM_X86_64_PAGE_SIZE_1G, SYNTH_P);
	fill_frame(0x234000, 3);
	read_both(va2m + 0x34000, 4096, NULL);
	/* Five levels, a 2 MiB leaf at level 2: four entries and the data. */
	cr_assert_eq(read_both(va2m + 0x34ff0, 16, NULL), 1);
	/* Pages of one 2 MiB page share the walk: a 12 KiB read, warm. */
	cr_assert_eq(read_both(va2m + 0x10000, 3 * 4096, NULL), 1);
	read_both(va1g + 0x100, 64, NULL);
	cr_assert_eq(read_both(va1g + 0x100, 64, NULL), 1);
	{
		struct ivm_error *err;

		read_both(va1g + HIGH_SIZE - 8, 16, &err);
		cr_assert_not_null(err);
		cr_assert_eq(err->address, va1g + HIGH_SIZE);
		ivm_error_destroy(err);
	}
}

Test(paging_memo, memo_collisions_evict_only, .init = setup4,
     .fini = teardown)
{
	uint64_t base = 0x10000000ull;
	unsigned int i, round;

	/* Far more entries than slots: every read still right. */
	for (i = 0; i < 1200; i++)
		synth_map(&s, base + i * 0x200000ull, 0x100000 + (i % 64) * 0x1000,
			  IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	for (i = 0; i < 64; i++)
		fill_frame(0x100000 + i * 0x1000, (uint8_t)i);
	for (round = 0; round < 2; round++)
		for (i = 0; i < 1200; i += 7)
			read_both(base + i * 0x200000ull + 8 * i % 4096, 8,
				  NULL);
	ivm_x86_64_walk_memo_clear(&memo);
	cr_assert_eq(read_both(base, 8, NULL), 5);
}

Test(paging_memo, read_pages_batches_a_stack, .init = setup4,
     .fini = teardown)
{
	/* A 16 KiB vmalloc'd stack: adjacent PTEs, scattered frames. */
	uint64_t va = 0xffffc90000c40000ull, frames[4] = {
		0x73000, 0x71000, 0x7a000, 0x70000 };
	static uint8_t bufs[5][4096];
	void *pages[5];
	uint64_t ok, n;
	int i;

	for (i = 0; i < 4; i++) {
		synth_map(&s, va + i * 0x1000ull, frames[i],
			  IVM_X86_64_PAGE_SIZE_4K, SYNTH_P | SYNTH_RW);
		fill_frame(frames[i], (uint8_t)(40 + i));
	}
	for (i = 0; i < 5; i++)
		pages[i] = bufs[i];
	/* Page 4 is the guard page: not mapped. */
	n = ivm_gmem_backend_calls(gmem);
	cr_assert_null(ivm_x86_64_read_pages_memo(gmem, &memo, s.root, false,
						  va, 5, pages, &ok));
	cr_assert_eq(ok, 0xf, "mask 0x%llx", (unsigned long long)ok);
	cr_assert_leq(ivm_gmem_backend_calls(gmem) - n, 5);
	for (i = 0; i < 4; i++)
		cr_assert_arr_eq(bufs[i], s.ram + frames[i], 4096);
	/* Warm: the whole stack in one round trip. */
	memset(bufs, 0, sizeof(bufs));
	n = ivm_gmem_backend_calls(gmem);
	cr_assert_null(ivm_x86_64_read_pages_memo(gmem, &memo, s.root, false,
						  va, 4, pages, &ok));
	cr_assert_eq(ivm_gmem_backend_calls(gmem) - n, 1);
	cr_assert_eq(ok, 0xf);
	for (i = 0; i < 4; i++)
		cr_assert_arr_eq(bufs[i], s.ram + frames[i], 4096);
	/* NULL skips a page; a remapped page is read where it is now. */
	*synth_walk_to(&s, va + 0x2000, 1) = 0x7b000 | SYNTH_P;
	fill_frame(0x7b000, 99);
	pages[1] = NULL;
	cr_assert_null(ivm_x86_64_read_pages_memo(gmem, &memo, s.root, false,
						  va, 4, pages, &ok));
	cr_assert_eq(ok, 0xd);
	cr_assert_arr_eq(bufs[2], s.ram + 0x7b000, 4096);
	/* A frame outside RAM leaves its page out, the others arrive. */
	*synth_walk_to(&s, va + 0x3000, 1) = (3ull << 30) | SYNTH_P;
	cr_assert_null(ivm_x86_64_read_pages_memo(gmem, &memo, s.root, false,
						  va, 4, pages, &ok));
	cr_assert_eq(ok, 0x5, "mask 0x%llx", (unsigned long long)ok);
	/* Bad ranges are the caller's mistake. */
	{
		struct ivm_error *err;

		err = ivm_x86_64_read_pages_memo(gmem, &memo, s.root, false,
						 va + 8, 1, pages, &ok);
		cr_assert_not_null(err);
		cr_assert_eq(err->code, IVM_ERROR_INVALID);
		ivm_error_destroy(err);
		err = ivm_x86_64_read_pages_memo(gmem, &memo, s.root, false,
						 0xfffffffffffff000ull, 2,
						 pages, &ok);
		cr_assert_not_null(err);
		cr_assert_eq(err->code, IVM_ERROR_INVALID);
		ivm_error_destroy(err);
	}
}

Test(paging_memo, kmem_cache_prefetch, .init = setup4, .fini = teardown)
{
	uint64_t va = 0xffffc90000d00000ull, n, word;
	static struct ivm_kmem_cache cache;
	struct ivm_kmem_gmem kg = { gmem, s.root, 0, &memo };
	struct ivm_kmem_reader reader;
	struct ivm_error *err;
	int i;

	for (i = 0; i < 4; i++) {
		synth_map(&s, va + i * 0x1000ull, 0x80000 + i * 0x2000ull,
			  IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
		fill_frame(0x80000 + i * 0x2000ull, (uint8_t)i);
	}
	ivm_kmem_cache_init_gmem(&cache, &kg, &reader);
	/* From an sp in page 1 to the top of the stack: pages 1..3. */
	ivm_kmem_cache_prefetch(&cache, va + 0x1f00, 0x4000 - 0x1f00);
	cr_assert_eq(cache.prefetched, 3);
	n = ivm_gmem_backend_calls(gmem);
	for (i = 1; i < 4; i++) {
		cr_assert_null(reader.read(reader.ctx, va + i * 0x1000ull + 8,
					   &word, 8));
		cr_assert_eq(memcmp(&word, s.ram + 0x80000 + i * 0x2000 + 8, 8),
			     0);
	}
	cr_assert_eq(ivm_gmem_backend_calls(gmem) - n, 0,
		     "prefetched pages were read again");
	/* Prefetching what is cached reads nothing. */
	ivm_kmem_cache_prefetch(&cache, va + 0x1000, 0x3000);
	cr_assert_eq(ivm_gmem_backend_calls(gmem) - n, 0);
	/* Invalidate: read again, warm, one round trip for all three. */
	ivm_kmem_cache_invalidate(&cache);
	ivm_kmem_cache_prefetch(&cache, va + 0x1000, 0x3000);
	cr_assert_eq(ivm_gmem_backend_calls(gmem) - n, 1);
	/* An unmapped page is not cached; its read still faults exactly. */
	ivm_kmem_cache_invalidate(&cache);
	*synth_walk_to(&s, va + 0x2000, 1) = 0;
	ivm_kmem_cache_prefetch(&cache, va, 0x4000);
	cr_assert_eq(cache.prefetched, 3 + 3 + 3);
	err = reader.read(reader.ctx, va + 0x2010, &word, 8);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, va + 0x2010);
	ivm_error_destroy(err);
	/* A wrapping or empty range, and a cache without a gmem: nothing. */
	n = ivm_gmem_backend_calls(gmem);
	ivm_kmem_cache_prefetch(&cache, 0xfffffffffffff000ull, 0x2000);
	ivm_kmem_cache_prefetch(&cache, va, 0);
	{
		struct ivm_kmem_reader plain, over;

		ivm_kmem_reader_gmem(&kg, &plain);
		ivm_kmem_cache_init(&cache, &plain, &over);
		ivm_kmem_cache_prefetch(&cache, va, 0x4000);
		cr_assert_eq(cache.prefetched, 0);
	}
	cr_assert_eq(ivm_gmem_backend_calls(gmem) - n, 0);
}
