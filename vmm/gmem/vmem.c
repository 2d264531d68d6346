// SPDX-License-Identifier: MIT
/* Guest virtual memory readers: see vmem.h. */

#include <string.h>

#include "gmem/vmem.h"

static struct ivm_error *gmem_read(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	struct ivm_kmem_gmem *g = ctx;

	if (g->memo)
		return ivm_x86_64_read_virt_memo(g->gmem, g->memo, g->cr3,
						 g->la57, va, buf, len);
	return ivm_gmem_read_virt(g->gmem, g->cr3, g->la57, va, buf, len);
}

bool ivm_kmem_is_kernel_address(uint64_t va, bool la57)
{
	return (va >> 63) && ivm_x86_64_canonical(va, la57);
}

struct ivm_error *ivm_kmem_read_kernel(const struct ivm_kmem_reader *r,
				       bool la57, uint64_t va, void *buf,
				       size_t len)
{
	if (!ivm_kmem_is_kernel_address(va, la57) || va + len < va)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"0x%llx is not a kernel address",
					(unsigned long long)va);
	return r->read(r->ctx, va, buf, len);
}

struct ivm_error *ivm_kmem_read_upto(const struct ivm_kmem_reader *r,
				     uint64_t va, void *buf, size_t len,
				     size_t *got)
{
	struct ivm_error *err;
	size_t done = 0;

	*got = 0;
	if (!len)
		return NULL;
	err = r->read(r->ctx, va, buf, len);
	if (!err) {
		*got = len;
		return NULL;
	}
	while (done < len) {
		size_t n = (size_t)(4096 - ((va + done) & 4095));
		struct ivm_error *e;

		if (n > len - done)
			n = len - done;
		e = r->read(r->ctx, va + done, (uint8_t *)buf + done, n);
		if (e) {
			ivm_error_destroy(e);
			break;
		}
		done += n;
	}
	if (!done)
		return err;
	ivm_error_destroy(err);
	*got = done;
	return NULL;
}

void ivm_kmem_reader_gmem(struct ivm_kmem_gmem *g,
			  struct ivm_kmem_reader *ret)
{
	ret->read = gmem_read;
	ret->ctx = g;
}

#define CACHE_PAGE 4096ull

void ivm_kmem_cache_invalidate(struct ivm_kmem_cache *cache)
{
	memset(cache->tag, 0, sizeof(cache->tag));
}

static struct ivm_error *cache_read(void *ctx, uint64_t va, void *buf,
				    size_t len)
{
	struct ivm_kmem_cache *c = ctx;
	uint8_t *out = buf;

	while (len) {
		uint64_t page = va & ~(CACHE_PAGE - 1), off = va - page;
		size_t n = CACHE_PAGE - off < len ? (size_t)(CACHE_PAGE - off)
						  : len;
		unsigned int slot = (unsigned int)((page / CACHE_PAGE) %
						   IVM_KMEM_CACHE_PAGES);
		struct ivm_error *err;

		if (c->tag[slot] != (page | 1)) {
			c->misses++;
			err = c->backing.read(c->backing.ctx, page,
					      c->page[slot], CACHE_PAGE);
			if (err) {
				/* pass through: the fault address stays exact */
				ivm_error_destroy(err);
				c->tag[slot] = 0;
				return c->backing.read(c->backing.ctx, va, out,
						       len);
			}
			c->tag[slot] = page | 1;
		} else {
			c->hits++;
		}
		memcpy(out, c->page[slot] + off, n);
		out += n;
		va += n;
		len -= n;
	}
	return NULL;
}

void ivm_kmem_cache_prefetch(struct ivm_kmem_cache *cache, uint64_t va,
			     uint64_t len)
{
	void *pages[IVM_KMEM_CACHE_PAGES];
	uint64_t first, nr, i, ok;
	struct ivm_error *err;
	bool any = false;

	if (!cache->batch || !len || va + len - 1 < va)
		return;
	first = va & ~(CACHE_PAGE - 1);
	nr = ((va + len - 1) & ~(CACHE_PAGE - 1)) / CACHE_PAGE -
	     first / CACHE_PAGE + 1;
	if (nr > IVM_KMEM_CACHE_PAGES)
		nr = IVM_KMEM_CACHE_PAGES;
	/*
	 * At most IVM_KMEM_CACHE_PAGES consecutive pages fall in distinct
	 * slots of the direct-mapped cache.
	 */
	for (i = 0; i < nr; i++) {
		uint64_t page = first + i * CACHE_PAGE;
		unsigned int slot = (unsigned int)((page / CACHE_PAGE) %
						   IVM_KMEM_CACHE_PAGES);

		pages[i] = NULL;
		if (cache->tag[slot] == (page | 1))
			continue;
		/* The slot's old page is dropped whether or not this arrives. */
		cache->tag[slot] = 0;
		pages[i] = cache->page[slot];
		any = true;
	}
	if (!any)
		return;
	err = ivm_x86_64_read_pages_memo(cache->batch->gmem, cache->batch->memo,
					 cache->batch->cr3, cache->batch->la57,
					 first, (size_t)nr, pages, &ok);
	/* Best effort: the reads that need these pages will report it. */
	ivm_error_destroy(err);
	for (i = 0; i < nr; i++) {
		uint64_t page = first + i * CACHE_PAGE;

		if (!pages[i] || !(ok & (1ull << i)))
			continue;
		cache->tag[(page / CACHE_PAGE) % IVM_KMEM_CACHE_PAGES] =
			page | 1;
		cache->prefetched++;
	}
}

void ivm_kmem_cache_init(struct ivm_kmem_cache *cache,
			 const struct ivm_kmem_reader *backing,
			 struct ivm_kmem_reader *ret)
{
	cache->backing = *backing;
	cache->batch = NULL;
	cache->hits = cache->misses = cache->prefetched = 0;
	ivm_kmem_cache_invalidate(cache);
	ret->read = cache_read;
	ret->ctx = cache;
}

void ivm_kmem_cache_init_gmem(struct ivm_kmem_cache *cache,
			      struct ivm_kmem_gmem *g,
			      struct ivm_kmem_reader *ret)
{
	struct ivm_kmem_reader backing;

	ivm_kmem_reader_gmem(g, &backing);
	ivm_kmem_cache_init(cache, &backing, ret);
	cache->batch = g;
}
