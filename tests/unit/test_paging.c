// SPDX-License-Identifier: MIT
/* x86-64 page walks over synthetic guest RAM built in host buffers. */
#include <criterion/criterion.h>

#include "gmem/gmem.h"
#include "test_paging_synth.h"
#include "gmem/x86_64_paging.h"

#define RAM_SIZE (8ull << 20)
/*
 * A second, small RAM region high up, for 1 GiB pages; its end is not page
 * aligned, so a page can be half RAM.
 */
#define HIGH_GPA (5ull << 30)
#define HIGH_SIZE 0xf800ull

static struct synth s;
static uint8_t *high;
static struct ivm_gmem *gmem;

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
	cr_assert_null(ivm_gmem_buffer_create(regions, 2, &gmem));
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
	gmem = NULL;
	synth_fini(&s);
	free(high);
}

/* Translate, expecting success. */
static struct ivm_x86_64_translation tr_ok(uint64_t cr3, uint64_t va)
{
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;

	err = ivm_x86_64_translate(gmem, cr3, s.la57, va, &tr);
	cr_assert_null(err, "translate 0x%llx: %s", (unsigned long long)va,
		       ivm_error_string(err));
	return tr;
}

/* Translate, expecting a fault at va. */
static void tr_fault(uint64_t cr3, uint64_t va, const char *what)
{
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;

	err = ivm_x86_64_translate(gmem, cr3, s.la57, va, &tr);
	cr_assert_not_null(err, "%s: 0x%llx translated", what,
			   (unsigned long long)va);
	cr_assert_eq(err->code, IVM_ERROR_FAULT, "%s: %s", what,
		     ivm_error_string(err));
	cr_assert_eq(err->address, va, "%s: fault address 0x%llx", what,
		     (unsigned long long)err->address);
	ivm_error_destroy(err);
}

Test(paging, canonical)
{
	cr_assert(ivm_x86_64_canonical(0, false));
	cr_assert(ivm_x86_64_canonical(0x00007fffffffffffull, false));
	cr_assert(!ivm_x86_64_canonical(0x0000800000000000ull, false));
	cr_assert(ivm_x86_64_canonical(0xffff800000000000ull, false));
	cr_assert(!ivm_x86_64_canonical(0xff00800000000000ull, false));
	cr_assert(ivm_x86_64_canonical(0x00ffffffffffffffull, true));
	cr_assert(ivm_x86_64_canonical(0x0000800000000000ull, true));
	cr_assert(!ivm_x86_64_canonical(0x0100000000000000ull, true));
	cr_assert(ivm_x86_64_canonical(0xff00000000000000ull, true));
	cr_assert(!ivm_x86_64_canonical(0xfe00000000000000ull, true));
}

Test(paging, level4_4k, .init = setup4, .fini = teardown)
{
	uint64_t va = 0xffffffff81234000ull;
	struct ivm_x86_64_translation tr;

	synth_map(&s, va, 0x5000, IVM_X86_64_PAGE_SIZE_4K,
		  SYNTH_P | SYNTH_RW | SYNTH_NX);
	/* PCID in the low bits and the no-flush bit must be ignored. */
	tr = tr_ok(s.root | 0x123 | (1ull << 63), va + 0x9a8);
	cr_assert_eq(tr.pa, 0x59a8);
	cr_assert_eq(tr.page_size, IVM_X86_64_PAGE_SIZE_4K);
	cr_assert(tr.writable);
	cr_assert(!tr.user);
	cr_assert(tr.nx);
	/* The neighbouring page is not mapped. */
	tr_fault(s.root, va + 0x1000, "unmapped 4k neighbour");
	tr_fault(s.root, va - 0x1000, "unmapped 4k neighbour below");
}

Test(paging, user_readonly_permissions, .init = setup4, .fini = teardown)
{
	struct ivm_x86_64_translation tr;

	synth_map(&s, 0x400000, 0x7000, IVM_X86_64_PAGE_SIZE_4K,
		  SYNTH_P | SYNTH_US);
	tr = tr_ok(s.root, 0x400010);
	cr_assert(tr.user);
	cr_assert(!tr.writable);
	cr_assert(!tr.nx);
	/* Clearing U/S at an upper level takes user access away. */
	*synth_walk_to(&s, 0x400000, 3) &= ~SYNTH_US;
	tr = tr_ok(s.root, 0x400010);
	cr_assert(!tr.user);
}

Test(paging, large_pages, .init = setup4, .fini = teardown)
{
	struct ivm_x86_64_translation tr;
	uint64_t va2m = 0xffff888000200000ull, va1g = 0xffff888040000000ull;
	uint64_t *pde;

	synth_map(&s, va2m, 0x200000, IVM_X86_64_PAGE_SIZE_2M,
		  SYNTH_P | SYNTH_RW);
	tr = tr_ok(s.root, va2m + 0x12345);
	cr_assert_eq(tr.pa, 0x212345);
	cr_assert_eq(tr.page_size, IVM_X86_64_PAGE_SIZE_2M);

	/* PAT (bit 12) in a large-page entry is not an address bit. */
	pde = synth_walk_to(&s, va2m, 2);
	*pde |= 1ull << 12;
	tr = tr_ok(s.root, va2m + 0x12345);
	cr_assert_eq(tr.pa, 0x212345);
	/* Bits 20:13 are reserved in a 2 MiB entry: the CPU faults. */
	*pde |= 1ull << 13;
	tr_fault(s.root, va2m, "reserved bit in 2m entry");

	synth_map(&s, va1g, HIGH_GPA, IVM_X86_64_PAGE_SIZE_1G,
		  SYNTH_P | SYNTH_RW | SYNTH_US);
	tr = tr_ok(s.root, va1g + 0x3ffffff8ull);
	cr_assert_eq(tr.pa, HIGH_GPA + 0x3ffffff8ull);
	cr_assert_eq(tr.page_size, IVM_X86_64_PAGE_SIZE_1G);
	cr_assert(tr.user);
	/* NX and protection-key bits do not leak into the address. */
	*synth_walk_to(&s, va1g, 3) |= SYNTH_NX | (0xfull << 59);
	tr = tr_ok(s.root, va1g + 8);
	cr_assert_eq(tr.pa, HIGH_GPA + 8);
	cr_assert(tr.nx);
}

Test(paging, ps_bit_in_pml4_is_reserved, .init = setup4, .fini = teardown)
{
	uint64_t va = 0x7f0000001000ull;

	synth_map(&s, va, 0x3000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	tr_ok(s.root, va);
	*synth_walk_to(&s, va, 4) |= SYNTH_PS;
	tr_fault(s.root, va, "ps in pml4e");
}

Test(paging, not_present_at_each_level4, .init = setup4, .fini = teardown)
{
	uint64_t va = 0xffffc90000003000ull;
	int level;

	for (level = 4; level >= 1; level--) {
		uint64_t *e;

		synth_map(&s, va, 0x6000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
		tr_ok(s.root, va);
		e = synth_walk_to(&s, va, level);
		*e &= ~SYNTH_P;
		tr_fault(s.root, va, "not present");
		*e |= SYNTH_P;
	}
}

Test(paging, level5, .init = setup5, .fini = teardown)
{
	/* Above the 4-level canonical range: needs LA57. */
	uint64_t va = 0xff11000000000000ull + 0x7000;
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;
	int level;

	synth_map(&s, va, 0x9000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	synth_map(&s, 0x0100000000000000ull - 0x200000, 0x400000,
		  IVM_X86_64_PAGE_SIZE_2M, SYNTH_P | SYNTH_US);
	tr = tr_ok(s.root, va + 0x10);
	cr_assert_eq(tr.pa, 0x9010);
	tr = tr_ok(s.root, 0x0100000000000000ull - 0x200000 + 0x42);
	cr_assert_eq(tr.pa, 0x400042);
	cr_assert(tr.user);
	/* The same va is non-canonical for a 4-level walk. */
	err = ivm_x86_64_translate(gmem, s.root, false, va, &tr);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	ivm_error_destroy(err);
	tr_fault(s.root, 0xfe00000000000000ull, "non-canonical la57");
	for (level = 5; level >= 1; level--) {
		uint64_t *e = synth_walk_to(&s, va, level);

		*e &= ~SYNTH_P;
		tr_fault(s.root, va, "not present, 5-level");
		*e |= SYNTH_P;
		tr_ok(s.root, va);
	}
}

Test(paging, non_canonical, .init = setup4, .fini = teardown)
{
	tr_fault(s.root, 0x0000800000000000ull, "non-canonical low");
	tr_fault(s.root, 0x8000000000000000ull, "non-canonical high");
}

Test(paging, tables_outside_ram, .init = setup4, .fini = teardown)
{
	uint64_t va = 0xffffffff80000000ull;
	uint64_t *e;

	synth_map(&s, va, 0x1000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	/* cr3 itself beyond RAM, into the hole before HIGH_GPA. */
	tr_fault(2ull << 30, va, "cr3 in a hole");
	/* cr3 beyond everything, at the top of the 52-bit space. */
	tr_fault(0x000ffffffffff000ull, va, "cr3 at the top");
	/* A pdpt entry pointing into the hole. */
	e = synth_walk_to(&s, va, 3);
	*e = (3ull << 30) | SYNTH_P;
	tr_fault(s.root, va, "pd in a hole");
	/* A pd in the high region's last full page: readable, but empty. */
	*e = (HIGH_GPA + 0xe000) | SYNTH_P;
	memset(high + 0xe000, 0, 4096);
	tr_fault(s.root, va, "empty pd in high region");
	/* A pd in its last, half page: the entry read itself faults. */
	*e = (HIGH_GPA + 0xf000) | SYNTH_P;
	tr_fault(s.root, va, "pd half outside ram");
}

Test(paging, cyclic_tables, .init = setup4, .fini = teardown)
{
	struct ivm_x86_64_translation tr;
	uint64_t *pml4 = (uint64_t *)(s.ram + s.root);
	uint64_t self = 0x1ffull;	/* index 511 points back at the pml4 */
	uint64_t va;

	pml4[self] = s.root | SYNTH_P | SYNTH_RW;
	/*
	 * The recursive slot: va with all four indexes 511 resolves to the
	 * pml4 page itself, through the pml4 four times.
	 */
	va = 0xfffffffffffff000ull;
	tr = tr_ok(s.root, va + 8 * self);
	cr_assert_eq(tr.pa, s.root + 8 * self);
	/* Index 510 at the last level is not present: a fault, not a hang. */
	tr_fault(s.root, 0xffffffffffffe000ull, "cyclic, missing leaf");
	/* A pd entry that points at its own pd, with PS clear. */
	synth_map(&s, 0x200000000ull, 0x3000, IVM_X86_64_PAGE_SIZE_4K,
		  SYNTH_P);
	uint64_t *pde = synth_walk_to(&s, 0x200000000ull, 2);
	uint64_t pd_gpa = (uint64_t)((uint8_t *)pde - s.ram) & ~0xfffull;

	*pde = pd_gpa | SYNTH_P;
	tr = tr_ok(s.root, 0x200000000ull);
	/* The "pt" is the pd, whose entry 0 is itself: maps to the pd page. */
	cr_assert_eq(tr.pa, pd_gpa);
}

Test(paging, read_virt_spanning_pages, .init = setup4, .fini = teardown)
{
	uint64_t va = 0xffffffff82000000ull;
	uint8_t buf[64];
	struct ivm_error *err;
	size_t i;

	/* Two virtually adjacent pages, physically apart and reversed. */
	synth_map(&s, va, 0x20000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	synth_map(&s, va + 0x1000, 0x10000, IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	for (i = 0; i < 32; i++) {
		s.ram[0x20000 + 0xfe0 + i] = (uint8_t)i;
		s.ram[0x10000 + i] = (uint8_t)(32 + i);
	}
	err = ivm_gmem_read_virt(gmem, s.root, 0, va + 0xfe0, buf, 64);
	cr_assert_null(err, "%s", ivm_error_string(err));
	for (i = 0; i < 64; i++)
		cr_assert_eq(buf[i], i);
	/* Third page missing: the fault names its first byte. */
	err = ivm_gmem_read_virt(gmem, s.root, 0, va + 0x1ff0, buf, 32);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	cr_assert_eq(err->address, va + 0x2000);
	ivm_error_destroy(err);
	/* A mapped page whose frame is only half RAM: the first missing byte. */
	synth_map(&s, va + 0x2000, HIGH_GPA + 0xf000, IVM_X86_64_PAGE_SIZE_4K,
		  SYNTH_P);
	err = ivm_gmem_read_virt(gmem, s.root, 0, va + 0x1ff0, buf, 64);
	cr_assert_null(err, "%s", ivm_error_string(err));
	err = ivm_gmem_read_virt(gmem, s.root, 0, va + 0x27f0, buf, 32);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	cr_assert_eq(err->address, va + 0x2800, "fault at 0x%llx",
		     (unsigned long long)err->address);
	ivm_error_destroy(err);
}

Test(paging, read_virt_large_page_to_high_region, .init = setup4,
     .fini = teardown)
{
	uint64_t va = 0xffff880000000000ull;
	uint64_t word = 0x1122334455667788ull, got;
	struct ivm_error *err;

	synth_map(&s, va, HIGH_GPA, IVM_X86_64_PAGE_SIZE_1G, SYNTH_P);
	memcpy(high + 0x100, &word, 8);
	err = ivm_gmem_read_virt(gmem, s.root, 0, va + 0x100, &got, 8);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(got, word);
	/* Inside the 1 GiB page but past the end of the region. */
	err = ivm_gmem_read_virt(gmem, s.root, 0, va + HIGH_SIZE - 4, &got, 8);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_FAULT);
	cr_assert_eq(err->address, va + HIGH_SIZE);
	ivm_error_destroy(err);
}

Test(paging, tlb, .init = setup4, .fini = teardown)
{
	struct ivm_x86_64_tlb tlb = { 0 };
	struct ivm_x86_64_translation tr;
	uint64_t va = 0xffffc90000013000ull, va2m = 0xffff888000400000ull;
	uint64_t other_root, word = 0x0123456789abcdefull, got;
	struct ivm_error *err;
	int i;

	synth_map(&s, va, 0x30000, IVM_X86_64_PAGE_SIZE_4K,
		  SYNTH_P | SYNTH_RW);
	synth_map(&s, va2m, 0x400000, IVM_X86_64_PAGE_SIZE_2M, SYNTH_P);
	memcpy(s.ram + 0x30ff8, &word, 8);

	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root, false,
						   va + 0x10, &tr));
	cr_assert_eq(tr.pa, 0x30010);
	cr_assert_eq(tlb.misses, 1);
	/* Same page, other offset, PCID bits in cr3: a hit. */
	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root | 7,
						   false, va + 0xff8, &tr));
	cr_assert_eq(tr.pa, 0x30ff8);
	cr_assert(tr.writable);
	cr_assert_eq(tlb.hits, 1);
	cr_assert_null(ivm_x86_64_read_virt(gmem, &tlb, s.root, false,
					    va + 0xff8, &got, 8));
	cr_assert_eq(got, word);
	cr_assert_eq(tlb.hits, 2);
	/* A 2 MiB page is one entry for all its 4 KiB pieces. */
	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root, false,
						   va2m + 0x1234, &tr));
	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root, false,
						   va2m + 0x1fffff, &tr));
	cr_assert_eq(tr.pa, 0x5fffff);
	cr_assert_eq(tr.page_size, IVM_X86_64_PAGE_SIZE_2M);
	cr_assert_eq(tlb.misses, 2);
	cr_assert_eq(tlb.hits, 3);
	/* Another address space (la57 or cr3) does not hit. */
	err = ivm_x86_64_translate_cached(gmem, &tlb, s.root, true, va, &tr);
	cr_assert_not_null(err);	/* the 4-level tables read as 5-level */
	ivm_error_destroy(err);
	other_root = synth_alloc_table(&s);
	err = ivm_x86_64_translate_cached(gmem, &tlb, other_root, false, va,
					  &tr);
	cr_assert_not_null(err);
	cr_assert_eq(err->address, va);
	ivm_error_destroy(err);
	/* Faults are not cached. */
	cr_assert_eq(tlb.misses, 4);

	/* The guest remaps: the cache keeps the old one until a flush. */
	*synth_walk_to(&s, va, 1) = 0x31000 | SYNTH_P;
	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root, false,
						   va, &tr));
	cr_assert_eq(tr.pa, 0x30000);
	ivm_x86_64_tlb_flush(&tlb);
	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root, false,
						   va, &tr));
	cr_assert_eq(tr.pa, 0x31000);
	cr_assert(!tr.writable);

	/* Eviction: more pages than entries, each still translates right. */
	for (i = 0; i < 3 * IVM_X86_64_TLB_ENTRIES; i++)
		synth_map(&s, 0x600000 + i * 0x1000ull, 0x40000 + i * 0x1000ull,
			  IVM_X86_64_PAGE_SIZE_4K, SYNTH_P);
	for (i = 0; i < 3 * IVM_X86_64_TLB_ENTRIES; i++) {
		cr_assert_null(ivm_x86_64_translate_cached(
			gmem, &tlb, s.root, false, 0x600008 + i * 0x1000ull,
			&tr));
		cr_assert_eq(tr.pa, 0x40008 + i * 0x1000ull);
	}
	cr_assert_null(ivm_x86_64_translate_cached(gmem, &tlb, s.root, false,
						   0x600008 + 23 * 0x1000ull,
						   &tr));
	cr_assert_eq(tr.pa, 0x40008 + 23 * 0x1000ull);
}
