/* SPDX-License-Identifier: MIT */
/*
 * Private to the gmem backends (vmm/gmem*.c): the gmem object and the guest
 * RAM region table shared by the process and buffer backends.
 */
#ifndef IVM_GMEM_INTERNAL_H
#define IVM_GMEM_INTERNAL_H

#include "gmem/gmem.h"

struct ivm_gmem {
	const struct ivm_gmem_ops *ops;
	void *priv;
	uint64_t backend_calls;	/* see ivm_gmem_backend_calls() */
};

/*
 * Regions sorted by gpa, checked not to overlap, not to be empty and not to
 * wrap around either address space (gpa + size and hva + size fit in 64
 * bits, so "end" is always representable).
 */
struct ivm_gmem_region_table {
	struct ivm_gmem_region *regions;
	size_t nr;
};

/* Copy, sort and check regions into table; fails with IVM_ERROR_INVALID. */
struct ivm_error *ivm_gmem_region_table_init(
	struct ivm_gmem_region_table *table,
	const struct ivm_gmem_region *regions, size_t nr_regions);
void ivm_gmem_region_table_deinit(struct ivm_gmem_region_table *table);

/* The region holding gpa, or NULL if gpa is in a hole.  O(log n). */
const struct ivm_gmem_region *
ivm_gmem_region_find(const struct ivm_gmem_region_table *table, uint64_t gpa);

#endif /* IVM_GMEM_INTERNAL_H */
