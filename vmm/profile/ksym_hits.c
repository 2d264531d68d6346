// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/hexnum.h"
#include "profile/ksym_hits.h"

struct ivm_ksym_hits {
	const struct ivm_ksyms *ksyms;
	uint64_t slide;
	/* Open addressing over symbol pointers; cap a power of two. */
	const struct ivm_ksym **set;
	size_t cap, nr;
	/* Hit since the last take, in order. */
	const struct ivm_ksym **fresh;
	size_t nr_fresh, cap_fresh, taken;
};

struct ivm_error *ivm_ksym_hits_create(const struct ivm_ksyms *ksyms,
				       uint64_t slide,
				       struct ivm_ksym_hits **ret)
{
	struct ivm_ksym_hits *h = calloc(1, sizeof(*h));

	if (!h)
		return &ivm_enomem;
	h->ksyms = ksyms;
	h->slide = slide;
	h->cap = 1024;
	h->set = calloc(h->cap, sizeof(*h->set));
	if (!h->set) {
		free(h);
		return &ivm_enomem;
	}
	*ret = h;
	return NULL;
}

void ivm_ksym_hits_destroy(struct ivm_ksym_hits *h)
{
	if (!h)
		return;
	free(h->set);
	free(h->fresh);
	free(h);
}

static size_t slot(const struct ivm_ksym *sym, size_t cap)
{
	return ivm_hash_addr((uint64_t)(uintptr_t)sym) & (cap - 1);
}

/* Insert; true if it was not there yet. */
static bool insert(const struct ivm_ksym **set, size_t cap,
		   const struct ivm_ksym *sym)
{
	size_t i = slot(sym, cap);

	while (set[i]) {
		if (set[i] == sym)
			return false;
		i = (i + 1) & (cap - 1);
	}
	set[i] = sym;
	return true;
}

static struct ivm_error *grow(struct ivm_ksym_hits *h)
{
	size_t cap = h->cap * 2, i;
	const struct ivm_ksym **set = calloc(cap, sizeof(*set));

	if (!set)
		return &ivm_enomem;
	for (i = 0; i < h->cap; i++)
		if (h->set[i])
			insert(set, cap, h->set[i]);
	free(h->set);
	h->set = set;
	h->cap = cap;
	return NULL;
}

static struct ivm_error *add_one(struct ivm_ksym_hits *h, uint64_t link)
{
	const struct ivm_ksym *sym;
	uint64_t off;

	sym = ivm_ksyms_symbolize(h->ksyms, link, &off);
	/* No size (kallsyms): a far offset is the next unnamed region. */
	if (!sym || (sym->size && off >= sym->size))
		return NULL;
	if (2 * (h->nr + 1) > h->cap) {
		struct ivm_error *err = grow(h);

		if (err)
			return err;
	}
	if (!insert(h->set, h->cap, sym))
		return NULL;
	h->nr++;
	if (h->nr_fresh == h->cap_fresh) {
		size_t cap = h->cap_fresh ? 2 * h->cap_fresh : 64;
		const struct ivm_ksym **f = realloc(h->fresh,
						    cap * sizeof(*f));

		if (!f)
			return &ivm_enomem;
		h->fresh = f;
		h->cap_fresh = cap;
	}
	h->fresh[h->nr_fresh++] = sym;
	return NULL;
}

struct ivm_error *ivm_ksym_hits_add(struct ivm_ksym_hits *h,
				    const uint64_t *pcs, size_t n)
{
	struct ivm_error *err;
	size_t i;

	if (h->taken) {
		h->nr_fresh = 0;
		h->taken = 0;
	}
	for (i = 0; i < n; i++) {
		uint64_t link = pcs[i] - h->slide;

		/* The call instruction of a return address, and pc itself. */
		err = add_one(h, link - 1);
		if (!err)
			err = add_one(h, link);
		if (err)
			return err;
	}
	return NULL;
}

const struct ivm_ksym *const *ivm_ksym_hits_take_new(struct ivm_ksym_hits *h,
						     size_t *nr)
{
	if (h->taken) {
		h->nr_fresh = 0;
		h->taken = 0;
	}
	*nr = h->nr_fresh;
	h->taken = 1;
	return h->fresh;
}

void ivm_ksym_hits_forget(struct ivm_ksym_hits *h)
{
	size_t i;

	for (i = 0; i < h->cap; i++)
		h->set[i] = NULL;
	h->nr = 0;
	h->nr_fresh = 0;
	h->taken = 0;
}

void ivm_ksym_meta_value(const struct ivm_ksym *k,
			 char buf[IVM_KSYM_META_MAX])
{
	char *c;

	snprintf(buf, IVM_KSYM_META_MAX, "0x%" PRIx64 " 0x%" PRIx64 " %c %s",
		 k->addr, k->size, k->type ? k->type : 't', k->name);
	/* Guest bytes: one line, printable. */
	for (c = buf; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
}
