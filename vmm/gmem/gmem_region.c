// SPDX-License-Identifier: MIT
/*
 * Guest RAM region table: the gpa -> host address map behind the process and
 * buffer backends.
 */
#include <stdlib.h>
#include <string.h>

#include "gmem/gmem_internal.h"

static int region_cmp(const void *a, const void *b)
{
	const struct ivm_gmem_region *ra = a, *rb = b;

	if (ra->gpa != rb->gpa)
		return ra->gpa < rb->gpa ? -1 : 1;
	return 0;
}

struct ivm_error *ivm_gmem_region_table_init(
	struct ivm_gmem_region_table *table,
	const struct ivm_gmem_region *regions, size_t nr_regions)
{
	struct ivm_gmem_region *copy;
	size_t i;

	table->regions = NULL;
	table->nr = 0;
	if (!nr_regions)
		return ivm_error_create(IVM_ERROR_INVALID,
					"no guest ram regions");
	if (nr_regions > SIZE_MAX / sizeof(*copy))
		return &ivm_enomem;
	for (i = 0; i < nr_regions; i++) {
		const struct ivm_gmem_region *r = &regions[i];

		/*
		 * An end of exactly 2^64 is rejected too: it would wrap to 0
		 * and every "addr < end" test below would be wrong.
		 */
		if (!r->size || r->gpa + r->size <= r->gpa ||
		    r->hva + r->size <= r->hva)
			return ivm_error_create(IVM_ERROR_INVALID,
						"guest ram region gpa 0x%llx size 0x%llx hva 0x%llx is empty or wraps around",
						(unsigned long long)r->gpa,
						(unsigned long long)r->size,
						(unsigned long long)r->hva);
	}
	copy = malloc(nr_regions * sizeof(*copy));
	if (!copy)
		return &ivm_enomem;
	memcpy(copy, regions, nr_regions * sizeof(*copy));
	qsort(copy, nr_regions, sizeof(*copy), region_cmp);
	for (i = 1; i < nr_regions; i++) {
		if (copy[i].gpa < copy[i - 1].gpa + copy[i - 1].size) {
			struct ivm_error *err;

			err = ivm_error_create(IVM_ERROR_INVALID,
					       "guest ram regions overlap: gpa 0x%llx+0x%llx and 0x%llx+0x%llx",
					       (unsigned long long)copy[i - 1].gpa,
					       (unsigned long long)copy[i - 1].size,
					       (unsigned long long)copy[i].gpa,
					       (unsigned long long)copy[i].size);
			free(copy);
			return err;
		}
	}
	table->regions = copy;
	table->nr = nr_regions;
	return NULL;
}

void ivm_gmem_region_table_deinit(struct ivm_gmem_region_table *table)
{
	free(table->regions);
	table->regions = NULL;
	table->nr = 0;
}

const struct ivm_gmem_region *
ivm_gmem_region_find(const struct ivm_gmem_region_table *table, uint64_t gpa)
{
	size_t lo = 0, hi = table->nr;

	/* Find the last region starting at or below gpa. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (table->regions[mid].gpa <= gpa)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	if (gpa - table->regions[lo - 1].gpa < table->regions[lo - 1].size)
		return &table->regions[lo - 1];
	return NULL;
}
