// SPDX-License-Identifier: MIT
/*
 * gmem: the generic part.  Dispatch to the backend, batched reads for
 * backends without their own; virtual reads live with the page walker
 * (x86_64_paging.c).
 */
#include <stdlib.h>

#include "gmem/gmem_internal.h"
#include "gmem/x86_64_paging.h"

struct ivm_error *ivm_gmem_create(const struct ivm_gmem_ops *ops, void *priv,
				  struct ivm_gmem **ret)
{
	struct ivm_gmem *gmem = calloc(1, sizeof(*gmem));

	if (!gmem)
		return &ivm_enomem;
	gmem->ops = ops;
	gmem->priv = priv;
	*ret = gmem;
	return NULL;
}

void *ivm_gmem_priv(struct ivm_gmem *gmem)
{
	return gmem->priv;
}

void ivm_gmem_destroy(struct ivm_gmem *gmem)
{
	if (!gmem)
		return;
	if (gmem->ops->destroy)
		gmem->ops->destroy(gmem);
	free(gmem);
}

uint64_t ivm_gmem_backend_calls(const struct ivm_gmem *gmem)
{
	return __atomic_load_n(&gmem->backend_calls, __ATOMIC_RELAXED);
}

const uint64_t *ivm_gmem_backend_calls_word(const struct ivm_gmem *gmem)
{
	return &gmem->backend_calls;
}

struct ivm_error *ivm_gmem_read_phys(struct ivm_gmem *gmem, uint64_t gpa,
				     void *buf, size_t len)
{
	if (!len)
		return NULL;
	/* Relaxed: a statistic, but gmem reads may come from several threads. */
	__atomic_fetch_add(&gmem->backend_calls, 1, __ATOMIC_RELAXED);
	return gmem->ops->read_phys(gmem, gpa, buf, len);
}

struct ivm_error *ivm_gmem_read_phys_many(struct ivm_gmem *gmem,
					  const struct ivm_gmem_piece *pieces,
					  size_t nr_pieces)
{
	size_t i;

	if (gmem->ops->read_phys_many) {
		__atomic_fetch_add(&gmem->backend_calls, 1, __ATOMIC_RELAXED);
		return gmem->ops->read_phys_many(gmem, pieces, nr_pieces);
	}
	for (i = 0; i < nr_pieces; i++) {
		struct ivm_error *err;

		err = ivm_gmem_read_phys(gmem, pieces[i].gpa, pieces[i].buf,
					 pieces[i].len);
		if (err)
			return err;
	}
	return NULL;
}

struct ivm_error *ivm_gmem_read_virt(struct ivm_gmem *gmem, uint64_t cr3,
				     int la57, uint64_t va, void *buf,
				     size_t len)
{
	return ivm_x86_64_read_virt(gmem, NULL, cr3, la57, va, buf, len);
}
