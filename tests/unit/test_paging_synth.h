/* SPDX-License-Identifier: MIT */
/*
 * Synthetic guest RAM with page tables, for the page-walk and gmem tests:
 * a host buffer stands for guest RAM at gpa 0, tables are carved out of it
 * from the top down, and synth_map() installs a mapping of any size.
 */
#ifndef IVM_TEST_PAGING_SYNTH_H
#define IVM_TEST_PAGING_SYNTH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "gmem/x86_64_paging.h"

#define SYNTH_P 0x1ull
#define SYNTH_RW 0x2ull
#define SYNTH_US 0x4ull
#define SYNTH_PS 0x80ull
#define SYNTH_NX (1ull << 63)

struct synth {
	uint8_t *ram;
	uint64_t size;		/* bytes of RAM at gpa 0 */
	uint64_t next_table;	/* tables are allocated downwards from here */
	uint64_t root;		/* gpa of the top-level table */
	bool la57;
};

static inline uint64_t synth_alloc_table(struct synth *s)
{
	cr_assert(s->next_table >= 4096, "synthetic ram out of table space");
	s->next_table -= 4096;
	memset(s->ram + s->next_table, 0, 4096);
	return s->next_table;
}

static inline void synth_init(struct synth *s, uint64_t size, bool la57)
{
	s->ram = aligned_alloc(4096, size);
	cr_assert(s->ram);
	memset(s->ram, 0, size);
	s->size = size;
	s->next_table = size;
	s->la57 = la57;
	s->root = synth_alloc_table(s);
}

static inline void synth_fini(struct synth *s)
{
	free(s->ram);
	s->ram = NULL;
}

static inline uint64_t *synth_entry(struct synth *s, uint64_t table,
				    uint64_t va, int level)
{
	unsigned int shift = 12 + 9 * (level - 1);

	cr_assert(table + 4096 <= s->size);
	return (uint64_t *)(s->ram + table) + ((va >> shift) & 511);
}

/*
 * Map va to pa with a page of page_size (4K, 2M, 1G).  Intermediate tables
 * get P|RW|US so the leaf flags decide permissions.  Returns the leaf entry.
 */
static inline uint64_t *synth_map(struct synth *s, uint64_t va, uint64_t pa,
				  uint64_t page_size, uint64_t flags)
{
	int leaf_level = page_size == IVM_X86_64_PAGE_SIZE_1G ? 3 :
			 page_size == IVM_X86_64_PAGE_SIZE_2M ? 2 : 1;
	uint64_t table = s->root;
	int level;

	for (level = s->la57 ? 5 : 4; level > leaf_level; level--) {
		uint64_t *e = synth_entry(s, table, va, level);

		if (!(*e & SYNTH_P))
			*e = synth_alloc_table(s) | SYNTH_P | SYNTH_RW |
			     SYNTH_US;
		table = *e & IVM_X86_64_PTE_ADDR_MASK;
	}
	uint64_t *leaf = synth_entry(s, table, va, leaf_level);

	*leaf = pa | flags | (leaf_level > 1 ? SYNTH_PS : 0);
	return leaf;
}

/* The entry at level for va, following the tables as they are now. */
static inline uint64_t *synth_walk_to(struct synth *s, uint64_t va, int level)
{
	uint64_t table = s->root;
	int l;

	for (l = s->la57 ? 5 : 4; l > level; l--)
		table = *synth_entry(s, table, va, l) &
			IVM_X86_64_PTE_ADDR_MASK;
	return synth_entry(s, table, va, level);
}

#endif /* IVM_TEST_PAGING_SYNTH_H */
