// SPDX-License-Identifier: MIT
/*
 * gmem over host buffers: the regions' hva fields are pointers in this
 * process.  For unit tests and fuzzing, so they exercise the same region
 * table and fault reporting as the process backend without a QEMU.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmem/gmem_internal.h"

static struct ivm_error *buffer_read_phys(struct ivm_gmem *gmem, uint64_t gpa,
					  void *buf, size_t len)
{
	const struct ivm_gmem_region_table *table = gmem->priv;
	uint8_t *out = buf;

	while (len) {
		const struct ivm_gmem_region *r;
		uint64_t off, n;

		r = ivm_gmem_region_find(table, gpa);
		if (!r)
			return ivm_error_fault(gpa,
					       "guest physical address 0x%" PRIx64 " not in guest ram",
					       gpa);
		off = gpa - r->gpa;
		n = r->size - off;
		if (n > len)
			n = len;
		memcpy(out, (const void *)(uintptr_t)(r->hva + off), n);
		out += n;
		len -= n;
		/* Regions never end at 2^64, so gpa cannot wrap here. */
		gpa += n;
	}
	return NULL;
}

static void buffer_destroy(struct ivm_gmem *gmem)
{
	struct ivm_gmem_region_table *table = gmem->priv;

	ivm_gmem_region_table_deinit(table);
	free(table);
}

static const struct ivm_gmem_ops buffer_ops = {
	.read_phys = buffer_read_phys,
	.destroy = buffer_destroy,
};

struct ivm_error *ivm_gmem_buffer_create(const struct ivm_gmem_region *regions,
					 size_t nr_regions,
					 struct ivm_gmem **ret)
{
	struct ivm_gmem_region_table *table;
	struct ivm_error *err;

	table = calloc(1, sizeof(*table));
	if (!table)
		return &ivm_enomem;
	err = ivm_gmem_region_table_init(table, regions, nr_regions);
	if (!err)
		err = ivm_gmem_create(&buffer_ops, table, ret);
	if (err) {
		ivm_gmem_region_table_deinit(table);
		free(table);
	}
	return err;
}
