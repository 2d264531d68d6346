// SPDX-License-Identifier: MIT
/*
 * Reading guest files from synthetic guest memory: the page cache's
 * xarray (two levels, sibling and multi-order entries, value entries,
 * pages not up to date or taken by another file, malformed nodes), the
 * file's mappings in its own and other processes, the per-run cache, the
 * fallback reader a fork child needs, and an ELF build-id read through
 * it all.  Layouts from the guest's 6.1 BTF and a hand-built one.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "synth_mm.h"
#include "unwind/cfi_rows.h"
#include "unwind/uimage.h"
#include "unwind/uunwind_exe.h"

#define FILE_PAGES 20
#define MAP_VA 0x7f0000000000ull

static uint64_t sibling(unsigned int slot)
{
	return (uint64_t)slot << 2 | 2;
}

struct cachefile {
	struct sw_file f;
	struct ivm_guest_file gf;
	uint64_t top;
};

/*
 * A file of FILE_PAGES pages whose page cache holds, by index:
 *   0, 1, 12, 13, 19   pages of frames 0x100 + index, bytes 0xa0 + index
 *   2                  nothing;  3 a value entry (evicted)
 *   4                  a page not up to date;  5 a page of another file
 *   8..11              one folio of 4 pages (frames 0x200..0x203,
 *                      bytes 0xc0..0xc3), slot 8 and three siblings
 *   64..127            one folio of 64 pages (frame 0x400 on), a slot
 *                      of the top node
 *   128..191           a node whose shift is wrong
 */
static void build_cache(struct sworld *w, struct cachefile *c)
{
	static const unsigned int present[] = { 0, 1, 12, 13, 19 };
	uint64_t leaf, bad;
	unsigned int i;

	c->f = sw_file(w, w->root_mount, sw_dentry(w, w->root_dentry, "f"),
		       77, 2, FILE_PAGES * 4096);
	c->top = sw_xa_node(w, 6);
	leaf = sw_xa_node(w, 0);
	sw_xa_set(w, c->top, 0, sw_xa_mknode(leaf));
	for (i = 0; i < sizeof(present) / sizeof(present[0]); i++)
		sw_xa_set(w, leaf, present[i],
			  sw_page(w, 0x100 + present[i], c->f.mapping,
				  present[i], true,
				  (uint8_t)(0xa0 + present[i])));
	sw_xa_set(w, leaf, 3, 0x1234ull << 1 | 1);
	sw_xa_set(w, leaf, 4, sw_page(w, 0x104, c->f.mapping, 4, false, 0));
	sw_xa_set(w, leaf, 5, sw_page(w, 0x105, 0xffff888077770000ull, 5,
				      true, 0));
	for (i = 0; i < 4; i++)
		sw_page(w, 0x200 + i, c->f.mapping, 8 + i, true,
			(uint8_t)(0xc0 + i));
	sw_xa_set(w, leaf, 8, SKM_VMEMMAP + 0x200 * w->gcfg.off.page_size);
	for (i = 9; i < 12; i++)
		sw_xa_set(w, leaf, i, sibling(8));
	sw_xa_set(w, c->top, 1, sw_page(w, 0x400, c->f.mapping, 64, true,
					 0xe0));
	sw_page(w, 0x406, c->f.mapping, 70, true, 0xe6);
	bad = sw_xa_node(w, 3);
	sw_xa_set(w, c->top, 2, sw_xa_mknode(bad));
	sw_xa_head(w, c->f.mapping, sw_xa_mknode(c->top));
	memset(&c->gf, 0, sizeof(c->gf));
	c->gf.file = c->f.file;
	c->gf.inode = c->f.inode;
	c->gf.mapping = c->f.mapping;
	c->gf.ino = 77;
	c->gf.dev = 2;
	c->gf.size = FILE_PAGES * 4096;
}

static struct ivm_gfile *make_gfile(struct sworld *w)
{
	struct ivm_gfile *g = NULL;
	struct ivm_error *err = ivm_gfile_create(&w->gcfg, &g);

	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return g;
}

static void expect_pfn(struct ivm_gfile *g, uint64_t mapping, uint64_t index,
		       int code, uint64_t pfn)
{
	struct ivm_error *err;
	uint64_t got = 0;

	err = ivm_gfile_page_cache_pfn(g, mapping, index, &got);
	if (code < 0) {
		cr_expect_null(err, "index %llu: %s",
			       (unsigned long long)index,
			       err ? ivm_error_string(err) : "");
		cr_expect_eq(got, pfn, "index %llu: frame 0x%llx",
			     (unsigned long long)index,
			     (unsigned long long)got);
	} else {
		cr_expect(err && (int)err->code == code, "index %llu: %s",
			  (unsigned long long)index,
			  err ? ivm_error_string(err) : "found");
	}
	ivm_error_destroy(err);
}

Test(gfile, page_cache_entries)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		struct cachefile c;
		struct ivm_gfile *g;
		struct sworld w;

		sw_init(&w, btfs[b]);
		build_cache(&w, &c);
		g = make_gfile(&w);
		expect_pfn(g, c.gf.mapping, 0, -1, 0x100);
		expect_pfn(g, c.gf.mapping, 13, -1, 0x10d);
		expect_pfn(g, c.gf.mapping, 2, IVM_ERROR_NOT_FOUND, 0);
		expect_pfn(g, c.gf.mapping, 3, IVM_ERROR_NOT_FOUND, 0);
		expect_pfn(g, c.gf.mapping, 4, IVM_ERROR_NOT_FOUND, 0);
		expect_pfn(g, c.gf.mapping, 5, IVM_ERROR_NOT_FOUND, 0);
		expect_pfn(g, c.gf.mapping, 8, -1, 0x200);
		expect_pfn(g, c.gf.mapping, 10, -1, 0x202);
		expect_pfn(g, c.gf.mapping, 11, -1, 0x203);
		expect_pfn(g, c.gf.mapping, 70, -1, 0x406);
		expect_pfn(g, c.gf.mapping, 130, IVM_ERROR_PROTOCOL, 0);
		expect_pfn(g, c.gf.mapping, 5000, IVM_ERROR_NOT_FOUND, 0);
		expect_pfn(g, 0xffff888f00000000ull, 0, IVM_ERROR_FAULT, 0);
		ivm_gfile_destroy(g);
		sw_fini(&w);
	}
}

Test(gfile, malformed_xarrays)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		struct cachefile c;
		struct ivm_gfile *g;
		struct sworld w;
		uint64_t leaf;

		sw_init(&w, btfs[b]);
		build_cache(&w, &c);
		g = make_gfile(&w);
		/* A node pointing to itself: its shift gives it away. */
		sw_xa_set(&w, c.top, 3, sw_xa_mknode(c.top));
		expect_pfn(g, c.gf.mapping, 200, IVM_ERROR_PROTOCOL, 0);
		/* A node below the last level. */
		leaf = ivm_le64(skm_at(&w.k, c.top + w.gcfg.off.xa_node_slots,
				       8)) - 2;
		sw_xa_set(&w, leaf, 20, sw_xa_mknode(leaf));
		expect_pfn(g, c.gf.mapping, 20, IVM_ERROR_PROTOCOL, 0);
		/* A sibling pointing forward. */
		sw_xa_set(&w, leaf, 21, sibling(30));
		expect_pfn(g, c.gf.mapping, 21, IVM_ERROR_PROTOCOL, 0);
		/* Not a struct page: not in vmemmap, or not on a boundary. */
		sw_xa_set(&w, leaf, 22, 0xffff888000001000ull);
		expect_pfn(g, c.gf.mapping, 22, IVM_ERROR_PROTOCOL, 0);
		sw_xa_set(&w, leaf, 23, SKM_VMEMMAP + 8);
		expect_pfn(g, c.gf.mapping, 23, IVM_ERROR_PROTOCOL, 0);
		/* A frame past max_pfn. */
		sw_xa_set(&w, leaf, 24, SKM_VMEMMAP + (w.gcfg.max_pfn + 1) *
						       w.gcfg.off.page_size);
		expect_pfn(g, c.gf.mapping, 24, IVM_ERROR_PROTOCOL, 0);
		/* A shift no index has: deeper than 64 bits. */
		skm_w8(&w.k, c.top + w.gcfg.off.xa_node_shift, 66);
		expect_pfn(g, c.gf.mapping, 0, IVM_ERROR_PROTOCOL, 0);
		/* One entry in the head: index 0 only. */
		sw_xa_head(&w, c.gf.mapping,
			   SKM_VMEMMAP + 0x100 * w.gcfg.off.page_size);
		expect_pfn(g, c.gf.mapping, 0, -1, 0x100);
		expect_pfn(g, c.gf.mapping, 1, IVM_ERROR_NOT_FOUND, 0);
		ivm_gfile_destroy(g);
		sw_fini(&w);
	}
}

static bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

Test(gfile, read_ranges_absent_pages_and_eof)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;
	static uint8_t buf[8 * 4096];

	for (b = 0; b < nb; b++) {
		struct ivm_gfile_read_info info;
		struct ivm_gfile_stats st;
		struct ivm_error *err;
		struct cachefile c;
		struct ivm_gfile *g;
		struct sworld w;

		sw_init(&w, btfs[b]);
		build_cache(&w, &c);
		g = make_gfile(&w);
		/* Pages 0 (from 0x800), 1, 2 (absent), 3 (evicted). */
		memset(buf, 0x5a, sizeof(buf));
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0, 0x800, buf,
				     3 * 4096 + 0x100, &info);
		cr_assert_null(err);
		cr_expect(all_bytes(buf, 0x800, 0xa0));
		cr_expect(all_bytes(buf + 0x800, 4096, 0xa1));
		cr_expect(all_bytes(buf + 0x1800, 4096 + 0x100, 0));
		cr_expect_eq(info.present, 0x800 + 4096);
		cr_expect_eq(info.first_absent, 0x2000);
		cr_expect_eq(info.absent_pages, 2);
		cr_expect_not(info.past_eof);
		cr_expect_eq(info.sources, IVM_GFILE_PAGE_CACHE);
		/* Inside a folio; and the last page, past the end. */
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0, 10 * 4096 + 5,
				     buf, 8, &info);
		cr_assert_null(err);
		cr_expect(all_bytes(buf, 8, 0xc2));
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0,
				     FILE_PAGES * 4096 - 0x800, buf, 0x1000,
				     &info);
		cr_assert_null(err);
		cr_expect(all_bytes(buf, 0x800, 0xa0 + 19));
		cr_expect(all_bytes(buf + 0x800, 0x800, 0));
		cr_expect_eq(info.present, 0x800);
		cr_expect(info.past_eof);
		cr_expect_eq(info.first_absent, FILE_PAGES * 4096);
		cr_expect_eq(info.absent_pages, 0);
		/*
		 * Read again: from this reader's cache, not the guest, and
		 * still said to be the page cache's.
		 */
		w.k.reads = 0;
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0, 0, buf, 4096,
				     &info);
		cr_assert_null(err);
		cr_expect_eq(info.sources,
			     IVM_GFILE_CACHED | IVM_GFILE_PAGE_CACHE);
		cr_expect_eq(w.k.reads, 0);
		cr_expect(all_bytes(buf, 4096, 0xa0));
		ivm_gfile_stats(g, &st);
		cr_expect_gt(st.cache_hits, 0);
		/* Another generation of the inode is another file. */
		c.gf.generation++;
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0, 0, buf, 4096,
				     &info);
		cr_assert_null(err);
		cr_expect_eq(info.sources, IVM_GFILE_PAGE_CACHE);
		/* Bad requests. */
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0, UINT64_MAX - 2,
				     buf, 8, &info);
		cr_expect(err && err->code == IVM_ERROR_INVALID);
		ivm_error_destroy(err);
		err = ivm_gfile_read(g, &c.gf, NULL, NULL, 0, 0, buf,
				     IVM_GFILE_MAX_READ + 1, &info);
		cr_expect(err && err->code == IVM_ERROR_INVALID);
		ivm_error_destroy(err);
		ivm_gfile_destroy(g);
		sw_fini(&w);
	}
}

Test(gfile, cache_stays_bounded)
{
	struct sworld w;
	struct cachefile c;
	struct ivm_gfile *g;
	struct ivm_gfile_stats st;
	struct ivm_gfile_read_info info;
	uint8_t buf[4096];
	int round, i;

	sw_init(&w, synth_hand_btf(false));
	build_cache(&w, &c);
	w.gcfg.cache_pages = 3;
	g = make_gfile(&w);
	/* Five pages through a cache of three, twice: every read right. */
	for (round = 0; round < 2; round++) {
		static const int idx[] = { 0, 1, 12, 13, 19 };

		for (i = 0; i < 5; i++) {
			cr_assert_null(ivm_gfile_read(g, &c.gf, NULL, NULL, 0,
						      idx[i] * 4096ull, buf,
						      sizeof(buf), &info));
			cr_assert(all_bytes(buf, sizeof(buf),
					    (uint8_t)(0xa0 + idx[i])));
		}
	}
	ivm_gfile_stats(g, &st);
	cr_expect_gt(st.cache_evictions, 0);
	ivm_gfile_destroy(g);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}

/* ---- mappings ------------------------------------------------------------- */

struct process {
	struct skm user;		/* its user memory */
	struct ivm_kmem_reader umem;
	struct ivm_mm_maps *maps;
	struct ivm_gfile_space space;
};

/*
 * A process mapping pages 0..3 of the file at MAP_VA (flags as given),
 * with user pages present at the page indexes in have[] (bytes fill).
 */
static void make_process(struct sworld *w, struct cachefile *c,
			 struct process *p, uint64_t flags, bool anon_vma,
			 const unsigned int *have, size_t nr_have,
			 uint8_t fill)
{
	struct ivm_error *err;
	uint64_t vma;
	size_t i;

	skm_init(&p->user);
	for (i = 0; i < nr_have; i++)
		memset(skm_region_at(&p->user, MAP_VA + have[i] * 4096ull,
				     4096), fill, 4096);
	p->umem.read = skm_read;
	p->umem.ctx = &p->user;
	w->mm = skm_alloc(&w->k, 0x800, 64);
	vma = sw_vma(w, MAP_VA, MAP_VA + 4 * 4096, flags, 0, c->f.file);
	if (anon_vma)
		skm_w64(&w->k, vma + w->o->vma_anon_vma, 0xffff888012340000ull);
	sw_maple(w, &vma, 1, 4, 3);
	err = ivm_mm_maps_read(&w->src, w->mm, 0, &p->maps);
	cr_assert_null(err);
	cr_assert_eq(ivm_mm_maps_count(p->maps), 1);
	p->space.maps = p->maps;
	p->space.umem = &p->umem;
}

static void drop_process(struct process *p)
{
	ivm_mm_maps_destroy(p->maps);
	skm_fini(&p->user);
}

Test(gfile, own_mapping_page_cache_then_others)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;
	static uint8_t buf[4 * 4096];

	for (b = 0; b < nb; b++) {
		static const unsigned int own_pages[] = { 0 };
		static const unsigned int other_pages[] = { 2 };
		struct process own, other, cow;
		struct ivm_gfile_read_info info;
		struct cachefile c;
		struct ivm_gfile *g;
		struct sworld w;
		const struct ivm_guest_file *gf;

		sw_init(&w, btfs[b]);
		build_cache(&w, &c);
		make_process(&w, &c, &own, SW_R, false, own_pages, 1, 0x55);
		make_process(&w, &c, &other, SW_R | SW_X, false, other_pages,
			     1, 0x77);
		make_process(&w, &c, &cow, SW_R | SW_W, true, own_pages, 1,
			     0x99);
		gf = &ivm_mm_maps_get(own.maps, 0)->file;
		cr_assert_eq(gf->mapping, c.gf.mapping);
		g = make_gfile(&w);
		/*
		 * Page 0 from the process (its page is the file's), 1 from
		 * the page cache, 2 from the other process, 3 from none.
		 */
		cr_assert_null(ivm_gfile_read(g, gf, &own.space, &other.space,
					      1, 0, buf, sizeof(buf), &info));
		cr_expect(all_bytes(buf, 4096, 0x55));
		cr_expect(all_bytes(buf + 4096, 4096, 0xa1));
		cr_expect(all_bytes(buf + 8192, 4096, 0x77));
		cr_expect(all_bytes(buf + 12288, 4096, 0));
		cr_expect_eq(info.sources, IVM_GFILE_OWN_MAPPING |
					   IVM_GFILE_PAGE_CACHE |
					   IVM_GFILE_OTHER_MAPPING);
		cr_expect_eq(info.absent_pages, 1);
		ivm_gfile_destroy(g);
		/* A mapping with private copies is not the file: the cache. */
		g = make_gfile(&w);
		cr_assert_null(ivm_gfile_read(g, gf, &cow.space, NULL, 0, 0,
					      buf, 4096, &info));
		cr_expect(all_bytes(buf, 4096, 0xa0));
		cr_expect_eq(info.sources, IVM_GFILE_PAGE_CACHE);
		ivm_gfile_destroy(g);
		drop_process(&own);
		drop_process(&other);
		drop_process(&cow);
		sw_fini(&w);
	}
}

Test(gfile, user_reader_falls_back_to_the_file)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;
	uint8_t buf[2 * 4096];

	for (b = 0; b < nb; b++) {
		static const unsigned int child_pages[] = { 1 };
		struct ivm_kmem_reader reader;
		struct ivm_gfile_user u;
		struct process child;
		struct ivm_error *err;
		struct cachefile c;
		struct ivm_gfile *g;
		struct sworld w;
		int cow;

		for (cow = 0; cow < 2; cow++) {
			sw_init(&w, btfs[b]);
			build_cache(&w, &c);
			/* A fork child: only page 1 in its page tables. */
			make_process(&w, &c, &child, SW_R, cow, child_pages,
				     1, 0x66);
			g = make_gfile(&w);
			memset(&u, 0, sizeof(u));
			u.g = g;
			u.src = &w.src;
			u.mm = w.mm;
			u.umem = &child.umem;
			ivm_gfile_user_reader(&u, &reader);
			/* Across pages 0 (file) and 1 (its own). */
			err = reader.read(reader.ctx, MAP_VA + 4000, buf, 200);
			if (cow) {
				/* Private copies possible: no fallback. */
				cr_expect(err && err->code == IVM_ERROR_FAULT);
				cr_expect_eq(err ? err->address : 0,
					     MAP_VA + 4000);
				ivm_error_destroy(err);
			} else {
				cr_assert_null(err, "%s",
					       err ? ivm_error_string(err) : "");
				cr_expect(all_bytes(buf, 96, 0xa0));
				cr_expect(all_bytes(buf + 96, 104, 0x66));
				cr_expect_eq(u.file_pages, 1);
			}
			/* Page 2 has no frame anywhere; 5 is past the VMA. */
			err = reader.read(reader.ctx, MAP_VA + 2 * 4096, buf,
					  8);
			cr_expect(err && err->code == IVM_ERROR_FAULT);
			ivm_error_destroy(err);
			err = reader.read(reader.ctx, MAP_VA + 5 * 4096, buf,
					  8);
			cr_expect(err && err->code == IVM_ERROR_FAULT);
			ivm_error_destroy(err);
			ivm_gfile_destroy(g);
			drop_process(&child);
			sw_fini(&w);
		}
	}
}

/* An ELF header and one PT_NOTE with a build-id, in the file's page 0. */
Test(gfile, build_id_through_the_page_cache)
{
	static const uint8_t id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4,
					5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
					15, 16 };
	struct ivm_gfile_file ff;
	struct ivm_kmem_reader reader;
	uint8_t got[IVM_UBINARY_MAX_BUILD_ID];
	struct ivm_error *err;
	struct cachefile c;
	struct ivm_gfile *g;
	struct sworld w;
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	uint8_t *page;
	size_t len = 0;

	sw_init(&w, synth_hand_btf(false));
	build_cache(&w, &c);
	page = skm_at(&w.k, SKM_POB + (0x100ull << 12), 4096);
	memset(page, 0, 4096);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	ph.p_type = PT_NOTE;
	ph.p_offset = 0x100;
	ph.p_filesz = 16 + sizeof(id);
	memcpy(page, &eh, sizeof(eh));
	memcpy(page + sizeof(eh), &ph, sizeof(ph));
	memcpy(page + 0x100, (uint32_t[]){ 4, sizeof(id), NT_GNU_BUILD_ID },
	       12);
	memcpy(page + 0x10c, "GNU", 4);
	memcpy(page + 0x110, id, sizeof(id));
	g = make_gfile(&w);
	ff = (struct ivm_gfile_file){ .g = g, .file = &c.gf };
	ivm_gfile_file_reader(&ff, &reader);
	err = ivm_uexe_file_build_id(&reader, got, &len);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_expect_eq(len, sizeof(id));
	cr_expect(!memcmp(got, id, sizeof(id)));
	cr_expect_eq(ff.sources, IVM_GFILE_PAGE_CACHE | IVM_GFILE_CACHED);
	/* The note beyond what the cache holds: a fault at its offset. */
	ph.p_offset = 2 * 4096;
	memcpy(page + sizeof(eh), &ph, sizeof(ph));
	ivm_gfile_destroy(g);
	g = make_gfile(&w);
	ff.g = g;
	err = ivm_uexe_file_build_id(&reader, got, &len);
	cr_expect(err && err->code == IVM_ERROR_FAULT &&
		  err->address == 2 * 4096);
	ivm_error_destroy(err);
	ivm_gfile_destroy(g);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}

/* ---- CFI of a fork child's library, from the page cache ------------------ */

#define CFI_LIB "/lib/x86_64-linux-gnu/libc.so.6"
#define CFI_LIB_FRAME 0x10000ull	/* frame of the file's page 0 */
#define CFI_LIB_VA 0x7f1000000000ull

struct file_copy {
	uint8_t *data;
	size_t size;
};

static struct ivm_error *copy_read(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	const struct file_copy *f = ctx;

	if (off > f->size || len > f->size - off)
		return ivm_error_fault(off, "past the end");
	memcpy(buf, f->data + off, len);
	return NULL;
}

/*
 * The real libc.so.6 as a guest file whose page cache (a two-level
 * xarray) holds every page but those in [hole_lo, hole_hi), and that one
 * process maps whole at CFI_LIB_VA holding, in its page tables, only the
 * pages in [held_lo, held_hi) (a fork child holds none).
 */
struct cfi_world {
	struct sworld w;
	struct file_copy copy;
	struct ivm_guest_file gf;
	struct process proc;
	struct ivm_gfile *g;
	struct ivm_gfile_file ff;
	struct ivm_kmem_reader reader;
};

static void cfi_world_init(struct cfi_world *cw, struct ivm_btf *btf,
			   uint64_t hole_lo, uint64_t hole_hi,
			   uint64_t held_lo, uint64_t held_hi)
{
	struct sworld *w = &cw->w;
	struct sw_file f;
	uint64_t top, leaf = 0, vma, npages, i;
	FILE *fp;
	long n;

	memset(cw, 0, sizeof(*cw));
	fp = fopen(CFI_LIB, "rb");
	cr_assert_not_null(fp, "open " CFI_LIB);
	cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	cr_assert_gt(n, 0);
	rewind(fp);
	cw->copy.size = (size_t)n;
	cw->copy.data = malloc(cw->copy.size);
	cr_assert_not_null(cw->copy.data);
	cr_assert_eq(fread(cw->copy.data, 1, cw->copy.size, fp),
		     cw->copy.size);
	fclose(fp);
	npages = (cw->copy.size + 4095) / 4096;
	cr_assert_lt(npages, 64 * 64, "a two-level xarray holds it");

	sw_init(w, btf);
	f = sw_file(w, w->root_mount, sw_dentry(w, w->root_dentry, "libc"),
		    91, 2, cw->copy.size);
	top = sw_xa_node(w, (uint8_t)w->gcfg.off.xa_chunk_shift);
	cr_assert_eq(w->gcfg.off.xa_chunk_shift, 6, "64-slot nodes");
	for (i = 0; i < npages; i++) {
		uint64_t off = i * 4096, len = cw->copy.size - off;

		if (i % 64 == 0) {
			leaf = sw_xa_node(w, 0);
			sw_xa_set(w, top, (unsigned int)(i / 64),
				  sw_xa_mknode(leaf));
		}
		if (off + 4096 > hole_lo && off < hole_hi)
			continue;
		sw_xa_set(w, leaf, (unsigned int)(i % 64),
			  sw_page(w, CFI_LIB_FRAME + i, f.mapping, i, true,
				  0));
		memcpy(skm_at(&w->k, SKM_POB + ((CFI_LIB_FRAME + i) << 12),
			      4096), cw->copy.data + off,
		       len < 4096 ? len : 4096);
	}
	sw_xa_head(w, f.mapping, sw_xa_mknode(top));

	/* The process: one VMA of the whole file, private, no COW. */
	skm_init(&cw->proc.user);
	for (i = held_lo & ~4095ull; i < held_hi && i < cw->copy.size;
	     i += 4096) {
		uint64_t len = cw->copy.size - i;

		memcpy(skm_region_at(&cw->proc.user, CFI_LIB_VA + i, 4096),
		       cw->copy.data + i, len < 4096 ? len : 4096);
	}
	cw->proc.umem.read = skm_read;
	cw->proc.umem.ctx = &cw->proc.user;
	w->mm = skm_alloc(&w->k, 0x800, 64);
	vma = sw_vma(w, CFI_LIB_VA, CFI_LIB_VA + npages * 4096, SW_R | SW_X,
		     0, f.file);
	sw_maple(w, &vma, 1, 4, 3);
	cr_assert_null(ivm_mm_maps_read(&w->src, w->mm, 0, &cw->proc.maps));
	cw->proc.space.maps = cw->proc.maps;
	cw->proc.space.umem = &cw->proc.umem;
	cw->gf = ivm_mm_maps_get(cw->proc.maps, 0)->file;
	cr_assert_eq(cw->gf.mapping, f.mapping);

	cw->g = make_gfile(w);
	cw->ff = (struct ivm_gfile_file){ .g = cw->g, .file = &cw->gf,
					  .own = &cw->proc.space };
	ivm_gfile_file_reader(&cw->ff, &cw->reader);
}

static void cfi_world_fini(struct cfi_world *cw)
{
	ivm_gfile_destroy(cw->g);
	drop_process(&cw->proc);
	sw_fini(&cw->w);
	free(cw->copy.data);
}

/* Link-time pcs of the first FDEs of the table, one in every stride. */
static size_t fde_pcs(const struct ivm_uelf *elf,
		      const struct file_copy *copy, uint64_t *pcs, size_t cap)
{
	uint64_t step = elf->eh.count / cap + 1, i;
	size_t n = 0;

	cr_assert_eq(elf->eh.entry_size, 4);
	for (i = 0; i < elf->eh.count && n < cap; i += step) {
		int32_t rel;
		uint64_t at = elf->eh.table + 8 * i;

		/* Before the data segment, libc's vaddr is its offset. */
		memcpy(&rel, copy->data + at, 4);
		pcs[n++] = (uint64_t)((int64_t)elf->eh.vaddr + rel) + 1;
	}
	return n;
}

Test(gfile, fork_child_cfi_rows_from_the_page_cache)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		struct ivm_kmem_reader plain;
		struct ivm_uimage *truth, *im;
		struct ivm_uimage_stats st;
		struct ivm_uelf_section sec;
		struct cfi_world cw;
		uint64_t pcs[200], hole;
		size_t nr, i, ok = 0, faults = 0;
		char want[1024], got[1024];

		/* The real rows, from the file's own bytes. */
		cfi_world_init(&cw, btfs[b], 0, 0, 0, 0);
		plain = (struct ivm_kmem_reader){ copy_read, &cw.copy };
		cr_assert_null(ivm_uimage_create(&plain, &truth));
		cr_assert_null(ivm_uelf_find_section(&plain,
						     ivm_uimage_elf(truth),
						     ".eh_frame", &sec));
		nr = fde_pcs(ivm_uimage_elf(truth), &cw.copy, pcs, 200);
		cr_assert_gt(nr, 100);
		hole = (sec.offset + sec.size / 2) & ~4095ull;
		cfi_world_fini(&cw);

		/*
		 * A fork child: none of the file in its page tables; the page
		 * cache has all of it but one page of .eh_frame.
		 */
		cfi_world_init(&cw, btfs[b], hole, hole + 4096, 0, 0);
		cr_assert_null(ivm_uimage_create(&cw.reader, &im));
		cr_expect_eq(cw.ff.sources & IVM_GFILE_OWN_MAPPING, 0);
		for (i = 0; i < nr; i++) {
			struct ivm_cfi_row scratch;
			const struct ivm_cfi_row *row;

			row = ivm_uimage_row(im, &cw.reader, &cw.ff.sources,
					     pcs[i], &scratch);
			ivm_uimage_describe_row(truth, &plain, pcs[i], want,
						sizeof(want));
			if (row->state == ROW_FAULT) {
				faults++;
				continue;
			}
			cr_assert_eq(row->state, ROW_OK, "pc 0x%llx",
				     (unsigned long long)pcs[i]);
			ok++;
			cr_expect_str_eq(ivm_cfi_row_format(row, got,
							    sizeof(got)),
					 want, "pc 0x%llx",
					 (unsigned long long)pcs[i]);
		}
		ivm_uimage_stats(im, &st);
		cr_expect_gt(ok, nr / 2);
		cr_expect_gt(faults, 0, "no FDE in the page the cache lacks");
		cr_expect_eq(st.page_cache, ok);
		cr_expect_eq(st.faults, faults);
		cr_expect_eq(st.other_mapping, 0);
		/*
		 * Asked again: a row the image kept is a hit; one decoded
		 * again, from pages gfile kept, still counts as the page
		 * cache's.
		 */
		{
			uint64_t hits = st.hits;

			for (i = 0; i < nr; i++) {
				struct ivm_cfi_row scratch;

				ivm_uimage_row(im, &cw.reader, &cw.ff.sources,
					       pcs[i], &scratch);
			}
			ivm_uimage_stats(im, &st);
			cr_expect_gt(st.hits, hits);
			cr_expect_eq(st.page_cache,
				     2 * ok - (st.hits - hits));
			cr_expect_eq(st.faults, 2 * faults);
		}
		ivm_uimage_destroy(im);
		cfi_world_fini(&cw);

		/*
		 * Its parent, which touched .eh_frame_hdr and .eh_frame: its
		 * rows come from its page tables, none from the page cache.
		 */
		cfi_world_init(&cw, btfs[b], hole, hole + 4096, 0,
			       UINT64_MAX);
		cr_assert_null(ivm_uimage_create(&cw.reader, &im));
		for (i = 0; i < nr; i++) {
			struct ivm_cfi_row scratch;
			const struct ivm_cfi_row *row;

			row = ivm_uimage_row(im, &cw.reader, &cw.ff.sources,
					     pcs[i], &scratch);
			cr_expect_eq(row->state, ROW_OK, "pc 0x%llx",
				     (unsigned long long)pcs[i]);
		}
		ivm_uimage_stats(im, &st);
		cr_expect_eq(st.page_cache, 0);
		cr_expect_eq(st.faults, 0);
		cr_expect_eq(cw.ff.sources, IVM_GFILE_OWN_MAPPING |
					    IVM_GFILE_CACHED);
		ivm_uimage_destroy(im);
		cfi_world_fini(&cw);
		ivm_uimage_destroy(truth);
	}
}
