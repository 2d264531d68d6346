// SPDX-License-Identifier: MIT
/*
 * Bytes of guest files: from mappings whose pages are the file's, and
 * from the page cache (the address_space's xarray, struct page to frame
 * through vmemmap, the frame through the direct map).
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/hexnum.h"
#include "kernel/gfile.h"

#define PAGE_SHIFT 12
#define PAGE_MASK_4K ((uint64_t)IVM_GFILE_PAGE_SIZE - 1)

/* Default vmemmap bases without CONFIG_RANDOMIZE_MEMORY. */
#define VMEMMAP_4LEVEL 0xffffea0000000000ull
#define VMEMMAP_5LEVEL 0xffd4000000000000ull
/* 52-bit physical addresses. */
#define MAX_PFN_LIMIT (1ull << 40)

/* XArray entry encodings (include/linux/xarray.h). */
#define XA_INTERNAL 2ull
#define XA_NODE_MIN 4096ull
#define MAX_CHUNK_SHIFT 8

/* Page sources, as indexes of ivm_gfile_stats.pages_from. */
enum { FROM_OWN, FROM_CACHE, FROM_OTHER, FROM_NONE };

struct cache_entry {
	uint64_t inode, ino, dev, index;
	uint32_t generation;
	int32_t next;			/* bucket chain, -1 ends */
	bool valid, referenced;
	uint8_t from;			/* FROM_OWN, FROM_CACHE, FROM_OTHER */
};

struct ivm_gfile {
	struct ivm_gfile_config cfg;
	size_t nr_entries;
	struct cache_entry *entries;
	uint8_t *data;			/* nr_entries pages */
	int32_t *buckets;
	size_t nr_buckets;		/* a power of two */
	size_t hand;			/* clock hand for eviction */
	struct ivm_gfile_stats stats;
};

/* ---- configuration ------------------------------------------------------ */

struct ivm_error *ivm_gfile_offsets_from_btf(const struct ivm_btf *btf,
					     struct ivm_gfile_offsets *ret)
{
	struct ivm_gfile_offsets o;
	struct ivm_error *err;
	uint32_t size, slots;
	int64_t bit;

	memset(&o, 0, sizeof(o));
	err = ivm_btf_offset(btf, "address_space", "i_pages.xa_head", 8,
			     &o.mapping_xa_head, NULL);
	if (!err)
		err = ivm_btf_offset(btf, "xa_node", "shift", 1,
				     &o.xa_node_shift, NULL);
	if (!err)
		err = ivm_btf_offset(btf, "xa_node", "slots", 0,
				     &o.xa_node_slots, &size);
	if (!err)
		err = ivm_btf_struct_size(btf, "page", &o.page_size);
	if (!err)
		err = ivm_btf_offset(btf, "page", "flags", 8, &o.page_flags,
				     NULL);
	if (!err)
		err = ivm_btf_offset(btf, "page", "mapping", 8,
				     &o.page_mapping, NULL);
	if (!err)
		err = ivm_btf_offset(btf, "page", "index", 8, &o.page_index,
				     NULL);
	if (!err)
		err = ivm_btf_enum_value(btf, "pageflags", "PG_uptodate", &bit);
	if (err)
		return ivm_error_wrap(err, "the guest kernel's page cache");
	/* XA_CHUNK_SIZE slots of 8 bytes, a power of two. */
	slots = size / 8;
	for (o.xa_chunk_shift = 1; o.xa_chunk_shift <= MAX_CHUNK_SHIFT;
	     o.xa_chunk_shift++)
		if (1u << o.xa_chunk_shift == slots)
			break;
	if (size % 8 || o.xa_chunk_shift > MAX_CHUNK_SHIFT || bit < 0 ||
	    bit > 63 || o.page_size < 16 || o.page_size > 4096)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"the guest kernel's page cache: %u bytes of xa_node slots, struct page of %u bytes, PG_uptodate %lld",
					size, o.page_size, (long long)bit);
	o.pg_uptodate = (uint32_t)bit;
	*ret = o;
	return NULL;
}

struct ivm_error *ivm_gfile_config_init(struct ivm_gfile_config *cfg,
					const struct ivm_kernel_layout *layout,
					const struct ivm_btf *btf)
{
	struct ivm_error *err;
	uint64_t addr;

	memset(cfg, 0, sizeof(*cfg));
	err = ivm_gfile_offsets_from_btf(btf, &cfg->off);
	if (err)
		return err;
	ivm_kernel_layout_reader(layout, &cfg->kmem);
	cfg->la57 = ivm_kernel_layout_la57(layout);
	cfg->page_offset_base = ivm_kernel_layout_page_offset_base(layout);
	cfg->vmemmap_base = cfg->la57 ? VMEMMAP_5LEVEL : VMEMMAP_4LEVEL;
	/* CONFIG_RANDOMIZE_MEMORY (KASLR): the base is a variable. */
	err = ivm_kernel_symbol(layout, "vmemmap_base", &addr);
	if (!err)
		err = ivm_kernel_read_ptr(layout, addr, "vmemmap_base",
					  &cfg->vmemmap_base);
	if (err && err->code != IVM_ERROR_NOT_FOUND)
		return err;
	ivm_error_destroy(err);
	/* Without max_pfn, any frame of 52-bit physical memory is taken. */
	cfg->max_pfn = MAX_PFN_LIMIT;
	err = ivm_kernel_symbol(layout, "max_pfn", &addr);
	if (!err)
		err = ivm_kernel_read(layout, addr, &cfg->max_pfn,
				      sizeof(cfg->max_pfn));
	if (err && err->code != IVM_ERROR_NOT_FOUND)
		return ivm_error_wrap(err, "reading max_pfn");
	ivm_error_destroy(err);
	if (!cfg->max_pfn || cfg->max_pfn > MAX_PFN_LIMIT)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"implausible max_pfn 0x%llx",
					(unsigned long long)cfg->max_pfn);
	return NULL;
}

struct ivm_error *ivm_gfile_create(const struct ivm_gfile_config *cfg,
				   struct ivm_gfile **ret)
{
	struct ivm_gfile *g;
	size_t n = cfg->cache_pages ? cfg->cache_pages :
				      IVM_GFILE_DEFAULT_CACHE_PAGES;
	size_t i;

	if (n > (1u << 20) || cfg->off.xa_chunk_shift == 0 ||
	    cfg->off.xa_chunk_shift > MAX_CHUNK_SHIFT)
		return ivm_error_create(IVM_ERROR_INVALID,
					"gfile: bad configuration");
	g = calloc(1, sizeof(*g));
	if (!g)
		return &ivm_enomem;
	g->cfg = *cfg;
	g->nr_entries = n;
	for (g->nr_buckets = 16; g->nr_buckets < 2 * n; g->nr_buckets *= 2)
		;
	g->entries = calloc(n, sizeof(*g->entries));
	g->data = malloc(n * IVM_GFILE_PAGE_SIZE);
	g->buckets = malloc(g->nr_buckets * sizeof(*g->buckets));
	if (!g->entries || !g->data || !g->buckets) {
		ivm_gfile_destroy(g);
		return &ivm_enomem;
	}
	for (i = 0; i < g->nr_buckets; i++)
		g->buckets[i] = -1;
	*ret = g;
	return NULL;
}

void ivm_gfile_destroy(struct ivm_gfile *g)
{
	if (!g)
		return;
	free(g->entries);
	free(g->data);
	free(g->buckets);
	free(g);
}

void ivm_gfile_stats(const struct ivm_gfile *g, struct ivm_gfile_stats *ret)
{
	*ret = g->stats;
}

/* ---- the cache of pages read ------------------------------------------- */

static size_t bucket_of(const struct ivm_gfile *g,
			const struct ivm_guest_file *f, uint64_t index)
{
	return ivm_hash_addr(f->inode ^ (index * 0x9e3779b97f4a7c15ull) ^
			     f->ino) & (g->nr_buckets - 1);
}

static bool entry_is(const struct cache_entry *e,
		     const struct ivm_guest_file *f, uint64_t index)
{
	return e->valid && e->inode == f->inode && e->index == index &&
	       e->ino == f->ino && e->dev == f->dev &&
	       e->generation == f->generation;
}

/* The page kept, and *from where it was read from first. */
static const uint8_t *cache_find(struct ivm_gfile *g,
				 const struct ivm_guest_file *f,
				 uint64_t index, int *from)
{
	int32_t i;

	for (i = g->buckets[bucket_of(g, f, index)]; i >= 0;
	     i = g->entries[i].next) {
		if (entry_is(&g->entries[i], f, index)) {
			g->entries[i].referenced = true;
			*from = g->entries[i].from;
			return g->data + (size_t)i * IVM_GFILE_PAGE_SIZE;
		}
	}
	return NULL;
}

static void cache_unlink(struct ivm_gfile *g, size_t victim)
{
	struct cache_entry *e = &g->entries[victim];
	int32_t *link;

	for (link = &g->buckets[bucket_of(g,
			&(struct ivm_guest_file){ .inode = e->inode,
						  .ino = e->ino },
			e->index)];
	     *link >= 0; link = &g->entries[*link].next) {
		if ((size_t)*link == victim) {
			*link = e->next;
			break;
		}
	}
	e->valid = false;
}

/* Keep page index of f; the clock picks what to replace. */
static void cache_insert(struct ivm_gfile *g, const struct ivm_guest_file *f,
			 uint64_t index, int from, const uint8_t *page)
{
	struct cache_entry *e;
	size_t victim, b;

	/* Bounded: the second pass finds every reference bit cleared. */
	for (;;) {
		victim = g->hand;
		g->hand = (g->hand + 1) % g->nr_entries;
		if (!g->entries[victim].valid ||
		    !g->entries[victim].referenced)
			break;
		g->entries[victim].referenced = false;
	}
	if (g->entries[victim].valid) {
		cache_unlink(g, victim);
		g->stats.cache_evictions++;
	}
	e = &g->entries[victim];
	e->inode = f->inode;
	e->ino = f->ino;
	e->dev = f->dev;
	e->generation = f->generation;
	e->index = index;
	e->valid = true;
	e->referenced = false;
	e->from = (uint8_t)from;
	b = bucket_of(g, f, index);
	e->next = g->buckets[b];
	g->buckets[b] = (int32_t)victim;
	memcpy(g->data + victim * IVM_GFILE_PAGE_SIZE, page,
	       IVM_GFILE_PAGE_SIZE);
}

/* ---- the page cache ----------------------------------------------------- */

static bool kernel_ptr(const struct ivm_gfile *g, uint64_t va)
{
	return ivm_kmem_is_kernel_address(va, g->cfg.la57);
}

static struct ivm_error *kread(const struct ivm_gfile *g, uint64_t va,
			       void *buf, size_t len)
{
	return ivm_kmem_read_kernel(&g->cfg.kmem, g->cfg.la57, va, buf, len);
}

static bool xa_is_node(uint64_t entry)
{
	return (entry & 3) == XA_INTERNAL && entry > XA_NODE_MIN;
}

static struct ivm_error *not_cached(uint64_t mapping, uint64_t index,
				    const char *why)
{
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"page %llu of address_space 0x%llx: %s",
				(unsigned long long)index,
				(unsigned long long)mapping, why);
}

/*
 * The xarray entry for index, and the first index the entry covers (a
 * multi-order entry covers a naturally aligned run of them).
 */
static struct ivm_error *xa_lookup(struct ivm_gfile *g, uint64_t mapping,
				   uint64_t index, uint64_t *entry,
				   uint64_t *first)
{
	const struct ivm_gfile_offsets *o = &g->cfg.off;
	unsigned int cs = o->xa_chunk_shift, level;
	uint64_t slots = 1ull << cs, head, node;
	const struct ivm_kernel_field f[] = {
		{ o->xa_node_shift, 1 }, { o->xa_node_slots, (uint32_t)slots * 8 },
	};
	uint8_t buf[(8 << MAX_CHUNK_SHIFT) + 512];
	struct ivm_error *err;
	int want_shift = -1;
	uint32_t lo, hi;

	/* Each node in one read: its shift and its slots. */
	ivm_kernel_fields_span(f, 2, &lo, &hi);
	if (hi - lo > sizeof(buf))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"xa_node: %u bytes to read", hi - lo);

	err = kread(g, mapping + o->mapping_xa_head, buf, 8);
	if (err)
		return err;
	head = ivm_le64(buf);
	if (!xa_is_node(head)) {
		/* One entry at index 0 lives in the head itself. */
		*entry = index == 0 ? head : 0;
		*first = 0;
		return NULL;
	}
	node = head - XA_INTERNAL;
	/* Each level takes cs bits of a 64-bit index. */
	for (level = 0; level <= 64 / cs + 1; level++) {
		uint8_t shift;
		uint64_t off, e;

		err = kread(g, node + lo, buf, hi - lo);
		if (err)
			return err;
		shift = buf[o->xa_node_shift - lo];
		if (shift % cs || shift >= 64 ||
		    (want_shift >= 0 && shift != want_shift))
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"xa_node 0x%llx: shift %u%s",
						(unsigned long long)node,
						shift,
						want_shift >= 0 ?
						", not one level below its parent" :
						"");
		/* The top node covers indices below slots << shift. */
		if (want_shift < 0 && shift + cs < 64 &&
		    index >> (shift + cs)) {
			*entry = 0;
			*first = index;
			return NULL;
		}
		off = (index >> shift) & (slots - 1);
		e = ivm_le64(buf + o->xa_node_slots - lo + 8 * off);
		/* A sibling names the slot holding the multi-order entry. */
		if ((e & 3) == XA_INTERNAL && (e >> 2) < slots) {
			uint64_t canon = e >> 2;

			if (canon >= off)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"xa_node 0x%llx: slot %llu is a sibling of slot %llu",
							(unsigned long long)node,
							(unsigned long long)off,
							(unsigned long long)canon);
			off = canon;
			e = ivm_le64(buf + o->xa_node_slots - lo + 8 * off);
		}
		if (xa_is_node(e)) {
			if (shift == 0)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"xa_node 0x%llx: a node below the last level",
							(unsigned long long)node);
			node = e - XA_INTERNAL;
			want_shift = shift - cs;
			continue;
		}
		*entry = e;
		/* Index bits below this slot's, and of later slots, cleared. */
		*first = (index & ~((slots << shift) - 1)) + (off << shift);
		return NULL;
	}
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"xarray of 0x%llx deeper than an index is wide",
				(unsigned long long)mapping);
}

struct ivm_error *ivm_gfile_page_cache_pfn(struct ivm_gfile *g,
					   uint64_t mapping, uint64_t index,
					   uint64_t *ret)
{
	const struct ivm_gfile_offsets *o = &g->cfg.off;
	uint64_t entry, first, head_pfn, pfn, flags;
	uint8_t page[64];
	struct ivm_error *err;
	uint32_t span;

	if (!kernel_ptr(g, mapping))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"address_space 0x%llx is not a kernel address",
					(unsigned long long)mapping);
	err = xa_lookup(g, mapping, index, &entry, &first);
	if (err)
		return err;
	if (!entry)
		return not_cached(mapping, index, "not in the page cache");
	/* Value entries: shadows of evicted pages, swap entries. */
	if (entry & 1)
		return not_cached(mapping, index, "evicted (a value entry)");
	if ((entry & 3) == XA_INTERNAL)
		return not_cached(mapping, index, "an internal entry");
	if (entry < g->cfg.vmemmap_base ||
	    (entry - g->cfg.vmemmap_base) % o->page_size)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"page-cache entry 0x%llx is not a struct page",
					(unsigned long long)entry);
	head_pfn = (entry - g->cfg.vmemmap_base) / o->page_size;
	pfn = head_pfn + (index - first);
	if (head_pfn >= g->cfg.max_pfn || pfn < head_pfn ||
	    pfn >= g->cfg.max_pfn)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"page-cache entry 0x%llx: frame 0x%llx past max_pfn",
					(unsigned long long)entry,
					(unsigned long long)pfn);
	/* The head page (folio) says whose it is, where, and if it is read. */
	span = o->page_flags + 8;
	if (o->page_mapping + 8 > span)
		span = o->page_mapping + 8;
	if (o->page_index + 8 > span)
		span = o->page_index + 8;
	if (span > sizeof(page))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct page: fields beyond 64 bytes");
	err = kread(g, entry, page, span);
	if (err)
		return err;
	flags = ivm_le64(page + o->page_flags);
	if (ivm_le64(page + o->page_mapping) != mapping ||
	    ivm_le64(page + o->page_index) != first)
		return not_cached(mapping, index,
				  "its page belongs elsewhere now");
	if (!(flags & (1ull << o->pg_uptodate)))
		return not_cached(mapping, index, "not up to date");
	*ret = pfn;
	return NULL;
}

/* ---- mappings ----------------------------------------------------------- */

/* Does vma show file's page at offset off (page aligned) as the file's? */
static bool vma_shows(const struct ivm_vma *vma,
		      const struct ivm_guest_file *file, uint64_t off,
		      uint64_t *va)
{
	if (vma->file.inode != file->inode || vma->file.ino != file->ino ||
	    vma->file.dev != file->dev)
		return false;
	if (!(vma->prot & IVM_VMA_SHARED) && (vma->prot & IVM_VMA_ANON_PAGES))
		return false;
	if (off < vma->pgoff || off - vma->pgoff >= vma->end - vma->start)
		return false;
	*va = vma->start + (off - vma->pgoff);
	return true;
}

static bool read_from_space(const struct ivm_gfile_space *s,
			    const struct ivm_guest_file *file, uint64_t off,
			    uint8_t *page)
{
	size_t i, n;

	if (!s || !s->maps || !s->umem)
		return false;
	n = ivm_mm_maps_count(s->maps);
	for (i = 0; i < n; i++) {
		const struct ivm_vma *v = ivm_mm_maps_get(s->maps, i);
		struct ivm_error *err;
		uint64_t va;

		if (!vma_shows(v, file, off, &va))
			continue;
		err = s->umem->read(s->umem->ctx, va, page,
				    IVM_GFILE_PAGE_SIZE);
		if (!err)
			return true;
		ivm_error_destroy(err);
	}
	return false;
}

static bool read_from_page_cache(struct ivm_gfile *g,
				 const struct ivm_guest_file *file,
				 uint64_t index, uint8_t *page)
{
	struct ivm_error *err;
	uint64_t pfn;

	if (!file->mapping)
		return false;
	err = ivm_gfile_page_cache_pfn(g, file->mapping, index, &pfn);
	if (!err)
		err = kread(g, g->cfg.page_offset_base + (pfn << PAGE_SHIFT),
			    page, IVM_GFILE_PAGE_SIZE);
	ivm_error_destroy(err);
	return !err;
}

/* Page index of file from the first source that has it; -1 none. */
static int read_page(struct ivm_gfile *g, const struct ivm_guest_file *file,
		     const struct ivm_gfile_space *own,
		     const struct ivm_gfile_space *others, size_t nr_others,
		     uint64_t index, uint8_t *page)
{
	uint64_t off = index << PAGE_SHIFT;
	size_t i;

	if (read_from_space(own, file, off, page))
		return FROM_OWN;
	if (read_from_page_cache(g, file, index, page))
		return FROM_CACHE;
	for (i = 0; i < nr_others; i++)
		if (read_from_space(&others[i], file, off, page))
			return FROM_OTHER;
	return -1;
}

struct ivm_error *ivm_gfile_read(struct ivm_gfile *g,
				 const struct ivm_guest_file *file,
				 const struct ivm_gfile_space *own,
				 const struct ivm_gfile_space *others,
				 size_t nr_others, uint64_t off, void *buf,
				 size_t len, struct ivm_gfile_read_info *ret)
{
	static const unsigned int source_bit[] = {
		IVM_GFILE_OWN_MAPPING, IVM_GFILE_PAGE_CACHE,
		IVM_GFILE_OTHER_MAPPING,
	};
	uint8_t *out = buf, *page = NULL;
	uint64_t pos = off, end = off + len;

	memset(ret, 0, sizeof(*ret));
	ret->first_absent = UINT64_MAX;
	if (!file || !file->inode || (len && !buf) ||
	    len > IVM_GFILE_MAX_READ || end < off)
		return ivm_error_create(IVM_ERROR_INVALID,
					"gfile: bad read of %zu bytes at 0x%llx",
					len, (unsigned long long)off);
	memset(buf, 0, len);
	while (pos < end) {
		uint64_t index = pos >> PAGE_SHIFT;
		uint64_t in_page = pos & PAGE_MASK_4K;
		uint64_t n = IVM_GFILE_PAGE_SIZE - in_page, have;
		const uint8_t *src;
		int from = -1;

		if (n > end - pos)
			n = end - pos;
		/* Bytes at or past i_size are in no page. */
		have = pos >= file->size ? 0 :
		       file->size - pos < n ? file->size - pos : n;
		if (have < n)
			ret->past_eof = true;
		src = have ? cache_find(g, file, index, &from) : NULL;
		if (src) {
			g->stats.cache_hits++;
			ret->sources |= IVM_GFILE_CACHED | source_bit[from];
		} else if (have) {
			g->stats.cache_misses++;
			/* Room for a miss only: most reads hit the cache. */
			if (!page)
				page = malloc(IVM_GFILE_PAGE_SIZE);
			if (!page)
				return &ivm_enomem;
			from = read_page(g, file, own, others, nr_others,
					 index, page);
			g->stats.pages_from[from < 0 ? FROM_NONE : from]++;
			if (from >= 0) {
				ret->sources |= source_bit[from];
				cache_insert(g, file, index, from, page);
				src = page;
			}
		}
		if (src) {
			memcpy(out + (pos - off), src + in_page, have);
			ret->present += have;
		} else if (have) {
			ret->absent_pages++;
		}
		if ((src ? have : 0) < n && ret->first_absent == UINT64_MAX)
			ret->first_absent = pos + (src ? have : 0);
		pos += n;
	}
	free(page);
	return NULL;
}

/* ---- a file as a reader -------------------------------------------------- */

static struct ivm_error *file_read(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	struct ivm_gfile_file *f = ctx;
	struct ivm_gfile_read_info info;
	struct ivm_error *err;

	err = ivm_gfile_read(f->g, f->file, f->own, f->others, f->nr_others,
			     off, buf, len, &info);
	if (err)
		return err;
	f->sources |= info.sources;
	if (info.present != len)
		return ivm_error_fault(info.first_absent,
				       "byte 0x%llx of the file is not in guest memory%s",
				       (unsigned long long)info.first_absent,
				       info.past_eof ? " (past its end)" : "");
	return NULL;
}

void ivm_gfile_file_reader(struct ivm_gfile_file *f,
			   struct ivm_kmem_reader *ret)
{
	ret->read = file_read;
	ret->ctx = f;
}

/* ---- a process's memory, with its files behind it ---------------------- */

static struct ivm_error *user_read_page(struct ivm_gfile_user *u,
					uint64_t va, uint8_t *buf, size_t len,
					struct ivm_error *fault)
{
	struct ivm_gfile_read_info info;
	struct ivm_error *err;
	const struct ivm_vma *v = &u->last;

	if (!u->has_last || va < v->start || va >= v->end) {
		u->has_last = false;
		err = ivm_mm_vma_at(u->src, u->mm, va, &u->last);
		if (err) {
			ivm_error_destroy(err);
			return fault;
		}
		u->has_last = true;
	}
	if (!ivm_vma_is_file(v) ||
	    (!(v->prot & IVM_VMA_SHARED) && (v->prot & IVM_VMA_ANON_PAGES)) ||
	    len > v->end - va)
		return fault;
	err = ivm_gfile_read(u->g, &v->file, NULL, NULL, 0,
			     v->pgoff + (va - v->start), buf, len, &info);
	if (err) {
		ivm_error_destroy(fault);
		return err;
	}
	if (info.present != len)
		return fault;
	ivm_error_destroy(fault);
	u->file_pages++;
	return NULL;
}

static struct ivm_error *user_read(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	struct ivm_gfile_user *u = ctx;
	struct ivm_error *err;
	uint8_t *out = buf;
	size_t done = 0;

	err = u->umem->read(u->umem->ctx, va, buf, len);
	if (!err || err->code != IVM_ERROR_FAULT)
		return err;
	ivm_error_destroy(err);
	/* Page by page: the page tables where they map, else the file. */
	while (done < len) {
		uint64_t at = va + done;
		size_t n = IVM_GFILE_PAGE_SIZE - (at & PAGE_MASK_4K);

		if (n > len - done)
			n = len - done;
		err = u->umem->read(u->umem->ctx, at, out + done, n);
		if (err && err->code == IVM_ERROR_FAULT)
			err = user_read_page(u, at, out + done, n, err);
		if (err)
			return err;
		done += n;
	}
	return NULL;
}

void ivm_gfile_user_reader(struct ivm_gfile_user *u,
			   struct ivm_kmem_reader *ret)
{
	ret->read = user_read;
	ret->ctx = u;
}
