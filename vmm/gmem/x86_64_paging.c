// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <string.h>

#include "gmem/x86_64_paging.h"

#define PTE_P (1ull << 0)
#define PTE_RW (1ull << 1)
#define PTE_US (1ull << 2)
#define PTE_PS (1ull << 7)
#define PTE_NX (1ull << 63)

static const char *const level_names[] = {
	[1] = "pt", [2] = "pd", [3] = "pdpt", [4] = "pml4", [5] = "pml5",
};

bool ivm_x86_64_canonical(uint64_t va, bool la57)
{
	int bits = la57 ? 57 : 48;

	/* Sign-extend from the top implemented bit and compare. */
	return (uint64_t)((int64_t)(va << (64 - bits)) >> (64 - bits)) == va;
}

/*
 * One walk in progress: the table to read at level, and what the levels
 * above said.  Shared by the plain walk and the memoized one, so both apply
 * exactly the same checks to every entry.
 */
struct walk {
	uint64_t va;
	uint64_t table;		/* gpa of the table at level */
	int level;
	bool user, writable, nx;
	bool done;		/* tr holds the translation */
	struct ivm_x86_64_translation tr;
};

enum step {
	STEP_TABLE,		/* went one level down */
	STEP_LEAF,		/* translated */
	STEP_NOT_PRESENT,
	STEP_RESERVED_PS,	/* PS in a PML4/PML5 entry */
	STEP_RESERVED_BITS,	/* reserved address bits in a large page */
};

static void walk_begin(struct walk *w, uint64_t cr3, bool la57, uint64_t va)
{
	w->va = va;
	w->table = cr3 & IVM_X86_64_PTE_ADDR_MASK;
	w->level = la57 ? 5 : 4;
	w->user = true;
	w->writable = true;
	w->nx = false;
	w->done = false;
}

static uint64_t walk_entry_gpa(const struct walk *w)
{
	unsigned int shift = 12 + 9 * (w->level - 1);

	return w->table + ((w->va >> shift) & 511) * 8;
}

/*
 * Apply the entry read at walk_entry_gpa(w): one level down, or the
 * translation, or a reason to fault (w unchanged then).  Level 1 always
 * ends the walk, so a walk takes at most five steps.
 */
static enum step walk_apply(struct walk *w, uint64_t entry)
{
	unsigned int shift = 12 + 9 * (w->level - 1);

	if (!(entry & PTE_P))
		return STEP_NOT_PRESENT;
	if (w->level == 1 || (entry & PTE_PS)) {
		uint64_t page_size = 1ull << shift;
		uint64_t frame = entry & IVM_X86_64_PTE_ADDR_MASK;

		/*
		 * PS in a PML4/PML5 entry is reserved; in a PDPT or PD entry
		 * it makes a large page whose bit 12 is PAT and bits
		 * shift-1:13 are reserved.  In a PT entry bit 7 is PAT and
		 * level 1 ends the walk anyway.
		 */
		if (w->level > 3)
			return STEP_RESERVED_PS;
		if (w->level > 1) {
			uint64_t reserved = (page_size - 1) &
					    ~(IVM_X86_64_PAGE_SIZE_4K * 2 - 1);

			if (frame & reserved)
				return STEP_RESERVED_BITS;
			frame &= ~(page_size - 1);
		}
		w->tr.pa = frame | (w->va & (page_size - 1));
		w->tr.page_size = page_size;
		w->tr.user = w->user && (entry & PTE_US);
		w->tr.writable = w->writable && (entry & PTE_RW);
		w->tr.nx = w->nx || (entry & PTE_NX);
		w->done = true;
		return STEP_LEAF;
	}
	w->user = w->user && (entry & PTE_US);
	w->writable = w->writable && (entry & PTE_RW);
	w->nx = w->nx || (entry & PTE_NX);
	w->table = entry & IVM_X86_64_PTE_ADDR_MASK;
	w->level--;
	return STEP_TABLE;
}

/* walk_apply, with the fault error the walk ends with, if it does. */
static struct ivm_error *walk_step(struct walk *w, uint64_t entry)
{
	uint64_t entry_gpa = walk_entry_gpa(w);
	const char *name = level_names[w->level];

	switch (walk_apply(w, entry)) {
	case STEP_TABLE:
	case STEP_LEAF:
		return NULL;
	case STEP_NOT_PRESENT:
		return ivm_error_fault(w->va,
				       "0x%" PRIx64 " not mapped: %s entry at gpa 0x%" PRIx64 " not present",
				       w->va, name, entry_gpa);
	case STEP_RESERVED_PS:
		return ivm_error_fault(w->va,
				       "0x%" PRIx64 " not mapped: reserved page size bit in %s entry at gpa 0x%" PRIx64,
				       w->va, name, entry_gpa);
	case STEP_RESERVED_BITS:
	default:
		return ivm_error_fault(w->va,
				       "0x%" PRIx64 " not mapped: reserved bits set in %s entry 0x%" PRIx64 " at gpa 0x%" PRIx64,
				       w->va, name, entry, entry_gpa);
	}
}

/* The fault for an entry of w that could not be read. */
static struct ivm_error *walk_entry_fault(const struct walk *w)
{
	return ivm_error_fault(w->va,
			       "page table for 0x%" PRIx64 " outside guest ram: %s entry at gpa 0x%" PRIx64,
			       w->va, level_names[w->level],
			       walk_entry_gpa(w));
}

/* The same from the backend's error err, which is consumed. */
static struct ivm_error *walk_read_failed(const struct walk *w,
					  struct ivm_error *err)
{
	if (err->code != IVM_ERROR_FAULT)
		return ivm_error_wrap(err, "reading %s entry for 0x%" PRIx64,
				      level_names[w->level], w->va);
	ivm_error_destroy(err);
	return walk_entry_fault(w);
}

struct ivm_error *ivm_x86_64_translate(struct ivm_gmem *gmem, uint64_t cr3,
				       bool la57, uint64_t va,
				       struct ivm_x86_64_translation *ret)
{
	struct walk w;

	if (!ivm_x86_64_canonical(va, la57))
		return ivm_error_fault(va,
				       "non-canonical virtual address 0x%" PRIx64,
				       va);
	/*
	 * One read per level and no other loop: a hostile table pointing back
	 * at itself ends after at most five reads like any other walk.
	 */
	walk_begin(&w, cr3, la57, va);
	while (!w.done) {
		struct ivm_error *err;
		uint64_t entry;

		err = ivm_gmem_read_phys(gmem, walk_entry_gpa(&w), &entry,
					 sizeof(entry));
		if (err)
			return walk_read_failed(&w, err);
		err = walk_step(&w, entry);
		if (err)
			return err;
	}
	*ret = w.tr;
	return NULL;
}

void ivm_x86_64_tlb_flush(struct ivm_x86_64_tlb *tlb)
{
	unsigned int i;

	for (i = 0; i < IVM_X86_64_TLB_ENTRIES; i++)
		tlb->entries[i].valid = false;
	tlb->next = 0;
}

struct ivm_error *ivm_x86_64_translate_cached(struct ivm_gmem *gmem,
					      struct ivm_x86_64_tlb *tlb,
					      uint64_t cr3, bool la57,
					      uint64_t va,
					      struct ivm_x86_64_translation *ret)
{
	struct ivm_x86_64_tlb_entry *e;
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;
	unsigned int i;

	if (!tlb)
		return ivm_x86_64_translate(gmem, cr3, la57, va, ret);
	cr3 &= IVM_X86_64_PTE_ADDR_MASK;
	for (i = 0; i < IVM_X86_64_TLB_ENTRIES; i++) {
		e = &tlb->entries[i];
		if (e->valid && e->cr3 == cr3 && e->la57 == la57 &&
		    (va & ~(e->tr.page_size - 1)) == e->va_base) {
			*ret = e->tr;
			ret->pa += va - e->va_base;
			tlb->hits++;
			return NULL;
		}
	}
	tlb->misses++;
	err = ivm_x86_64_translate(gmem, cr3, la57, va, &tr);
	if (err)
		return err;
	e = &tlb->entries[tlb->next];
	tlb->next = (tlb->next + 1) % IVM_X86_64_TLB_ENTRIES;
	e->cr3 = cr3;
	e->la57 = la57;
	e->va_base = va & ~(tr.page_size - 1);
	e->tr = tr;
	e->tr.pa &= ~(tr.page_size - 1);
	e->valid = true;
	*ret = tr;
	return NULL;
}

struct ivm_error *ivm_x86_64_read_virt(struct ivm_gmem *gmem,
				       struct ivm_x86_64_tlb *tlb, uint64_t cr3,
				       bool la57, uint64_t va, void *buf,
				       size_t len)
{
	uint8_t *out = buf;

	while (len) {
		struct ivm_x86_64_translation tr;
		struct ivm_error *err;
		uint64_t chunk;

		err = ivm_x86_64_translate_cached(gmem, tlb, cr3, la57, va,
						  &tr);
		if (err)
			return err;
		/* Each page is translated on its own: the next may be elsewhere. */
		chunk = tr.page_size - (va & (tr.page_size - 1));
		if (chunk > len)
			chunk = len;
		err = ivm_gmem_read_phys(gmem, tr.pa, out, chunk);
		if (err) {
			uint64_t bad_va;

			if (err->code != IVM_ERROR_FAULT)
				return ivm_error_wrap(err,
						      "reading virtual address 0x%" PRIx64,
						      va);
			/*
			 * Report the virtual address of the first missing
			 * byte; the backend named its physical address, inside
			 * [tr.pa, tr.pa + chunk) as long as it keeps its
			 * contract.
			 */
			bad_va = va;
			if (err->address >= tr.pa &&
			    err->address - tr.pa < chunk)
				bad_va = va + (err->address - tr.pa);
			ivm_error_destroy(err);
			return ivm_error_fault(bad_va,
					       "virtual address 0x%" PRIx64 " (gpa 0x%" PRIx64 ") outside guest ram",
					       bad_va,
					       tr.pa + (bad_va - va));
		}
		out += chunk;
		len -= chunk;
		va += chunk;
		if (!va && len)
			return ivm_error_fault(0,
					       "virtual read wraps around the address space");
	}
	return NULL;
}

/*
 * Memoized walks.  The memo is only ever a prediction: every entry it
 * predicts is read again in the same round trip and compared before
 * anything read below it is believed (see the header).
 */

static unsigned int memo_slot(uint64_t entry_gpa)
{
	/* Fibonacci hashing of the entry index: neighbours spread out. */
	return (unsigned int)(((entry_gpa >> 3) * 0x9e3779b97f4a7c15ull) >>
			      (64 - IVM_X86_64_MEMO_BITS));
}

static bool memo_lookup(const struct ivm_x86_64_walk_memo *memo,
			uint64_t entry_gpa, uint64_t *ret)
{
	const struct ivm_x86_64_memo_slot *m;

	if (!memo)
		return false;
	m = &memo->slots[memo_slot(entry_gpa)];
	if (m->tag != (entry_gpa | 1))
		return false;
	*ret = m->entry;
	return true;
}

static void memo_store(struct ivm_x86_64_walk_memo *memo, uint64_t entry_gpa,
		       uint64_t entry)
{
	struct ivm_x86_64_memo_slot *m;

	if (!memo)
		return;
	m = &memo->slots[memo_slot(entry_gpa)];
	m->tag = entry_gpa | 1;		/* entry gpas are 8-byte aligned */
	m->entry = entry;
}

void ivm_x86_64_walk_memo_clear(struct ivm_x86_64_walk_memo *memo)
{
	memset(memo->slots, 0, sizeof(memo->slots));
}

/* Pieces per batch: 64 KiB of virtual reads, a stack's worth of pages. */
#define BATCH_PIECES 16
/* Levels of a walk, and the rounds a batch can take: one per level + data. */
#define MAX_LEVELS 5
#define MAX_ROUNDS (MAX_LEVELS + 1)
#define BATCH_ENTRIES (BATCH_PIECES * MAX_LEVELS)

/* A piece of a virtual read: len bytes at va, inside one 4 KiB page. */
struct vpiece {
	uint64_t va;
	uint8_t *buf;
	size_t len;
	struct ivm_error *err;	/* the piece's fault, once it failed */
	bool active;		/* neither read nor failed yet */
	struct walk w;		/* the walk as far as it is confirmed */
	/* This round: the entries read, as far as the memo predicted. */
	unsigned int nr_pred;
	uint16_t pred_ent[MAX_LEVELS];	/* index into batch.ent */
	bool pred_known[MAX_LEVELS];
	uint64_t pred_val[MAX_LEVELS];
	int data;		/* index into batch.data, -1: none */
};

/* The reads of one round trip: entries first, then the pieces' data. */
struct batch {
	uint64_t ent_gpa[BATCH_ENTRIES];
	uint64_t ent[BATCH_ENTRIES];
	bool ent_bad[BATCH_ENTRIES];	/* could not be read */
	size_t nr_ent;
	struct ivm_gmem_piece data[BATCH_PIECES];
	struct ivm_error *data_err[BATCH_PIECES];
	size_t nr_data;
	struct ivm_gmem_piece reads[BATCH_ENTRIES + BATCH_PIECES];
};

static uint16_t batch_entry(struct batch *b, uint64_t gpa)
{
	size_t i;

	/* Pieces of one stack share their upper entries: read them once. */
	for (i = 0; i < b->nr_ent; i++)
		if (b->ent_gpa[i] == gpa)
			return (uint16_t)i;
	b->ent_gpa[b->nr_ent] = gpa;
	b->ent_bad[b->nr_ent] = false;
	return (uint16_t)b->nr_ent++;
}

static int batch_data(struct batch *b, uint64_t gpa, uint8_t *buf,
		      size_t len)
{
	b->data[b->nr_data] = (struct ivm_gmem_piece){ gpa, buf, len };
	b->data_err[b->nr_data] = NULL;
	return (int)b->nr_data++;
}

/*
 * Queue what piece p reads this round: the entry at its current level,
 * then, while the memo knows the entry just queued, the one below it, and
 * the data once a predicted walk reaches a page.  At most one entry per
 * level: the walk is bounded as a plain one is.
 */
static void plan_piece(struct batch *b, const struct ivm_x86_64_walk_memo *memo,
		       struct vpiece *p)
{
	struct walk sim = p->w;

	p->nr_pred = 0;
	p->data = -1;
	if (p->w.done) {
		p->data = batch_data(b, p->w.tr.pa, p->buf, p->len);
		return;
	}
	while (p->nr_pred < MAX_LEVELS) {
		uint64_t gpa = walk_entry_gpa(&sim);
		unsigned int k = p->nr_pred++;
		enum step st;

		p->pred_ent[k] = batch_entry(b, gpa);
		p->pred_known[k] = memo_lookup(memo, gpa, &p->pred_val[k]);
		if (!p->pred_known[k])
			return;
		st = walk_apply(&sim, p->pred_val[k]);
		if (st == STEP_LEAF) {
			p->data = batch_data(b, sim.tr.pa, p->buf, p->len);
			return;
		}
		if (st != STEP_TABLE)
			return;
	}
}

/*
 * Issue the round's reads in one ivm_gmem_read_phys_many(): entries in the
 * order planned (adjacent ones, such as the PTEs of a stack's pages, in one
 * range), then the data.  On a fault, which read faulted is found by
 * reading each on its own: that is the rare path (tables or pages outside
 * guest RAM) and keeps every fault exact.  Errors other than faults are
 * returned.
 */
static struct ivm_error *batch_issue(struct ivm_gmem *gmem, struct batch *b)
{
	struct ivm_error *err;
	size_t i, n = 0;

	for (i = 0; i < b->nr_ent; i++) {
		struct ivm_gmem_piece *last = n ? &b->reads[n - 1] : NULL;

		/* Entry gpas are below 2^52: the sums cannot wrap. */
		if (last && (uint8_t *)last->buf + last->len ==
			    (uint8_t *)&b->ent[i] &&
		    last->gpa + last->len == b->ent_gpa[i]) {
			last->len += 8;
			continue;
		}
		b->reads[n++] = (struct ivm_gmem_piece){ b->ent_gpa[i],
							 &b->ent[i], 8 };
	}
	for (i = 0; i < b->nr_data; i++)
		b->reads[n++] = b->data[i];
	err = ivm_gmem_read_phys_many(gmem, b->reads, n);
	if (!err)
		return NULL;
	if (err->code != IVM_ERROR_FAULT)
		return err;
	ivm_error_destroy(err);
	for (i = 0; i < b->nr_ent; i++) {
		err = ivm_gmem_read_phys(gmem, b->ent_gpa[i], &b->ent[i], 8);
		if (err && err->code != IVM_ERROR_FAULT)
			return err;
		b->ent_bad[i] = err != NULL;
		ivm_error_destroy(err);
	}
	for (i = 0; i < b->nr_data; i++) {
		err = ivm_gmem_read_phys(gmem, b->data[i].gpa, b->data[i].buf,
					 b->data[i].len);
		if (err && err->code != IVM_ERROR_FAULT) {
			while (i--)
				ivm_error_destroy(b->data_err[i]);
			return err;
		}
		b->data_err[i] = err;
	}
	return NULL;
}

/* The data read of p came back as err (NULL: read whole). */
static void finish_data(struct vpiece *p, const struct ivm_error *err)
{
	uint64_t bad_va = p->va;

	p->active = false;
	if (!err)
		return;
	/*
	 * Name the virtual address of the first missing byte: the backend
	 * named its physical address, inside [pa, pa + len) as long as it
	 * keeps its contract.
	 */
	if (err->address >= p->w.tr.pa && err->address - p->w.tr.pa < p->len)
		bad_va = p->va + (err->address - p->w.tr.pa);
	p->err = ivm_error_fault(bad_va,
				 "virtual address 0x%" PRIx64 " (gpa 0x%" PRIx64 ") outside guest ram",
				 bad_va, p->w.tr.pa + (bad_va - p->va));
}

/*
 * Check what p read this round against what the memo predicted, top level
 * first, and take the walk as far as the fresh entries agree.  The first
 * entry that was not predicted, or differs, is applied as read (it was read
 * from where a fresh walk would read it) and ends the round for p: what was
 * read below it came from a stale prediction and is ignored.
 */
static void check_piece(struct batch *b, struct ivm_x86_64_walk_memo *memo,
			struct vpiece *p)
{
	unsigned int k;

	if (p->w.done) {
		finish_data(p, b->data_err[p->data]);
		return;
	}
	for (k = 0; k < p->nr_pred; k++) {
		unsigned int i = p->pred_ent[k];
		uint64_t fresh = b->ent[i];
		bool same = p->pred_known[k] && fresh == p->pred_val[k];

		if (b->ent_bad[i]) {
			p->err = walk_entry_fault(&p->w);
			p->active = false;
			return;
		}
		if (memo) {
			memo_store(memo, b->ent_gpa[i], fresh);
			if (same)
				memo->confirmed++;
			else if (p->pred_known[k])
				memo->changed++;
			else
				memo->unknown++;
		}
		p->err = walk_step(&p->w, fresh);
		if (p->err) {
			p->active = false;
			return;
		}
		if (!same)
			return;
		if (p->w.done) {
			if (p->data >= 0)
				finish_data(p, b->data_err[p->data]);
			return;
		}
	}
}

/*
 * Read nr (<= BATCH_PIECES) pieces, each ending with p->err set or
 * cleared.  Returns only errors other than faults (the pieces' errors are
 * then destroyed).  Every round trip takes each unfinished piece at least
 * one level down, or reads its data: at most MAX_ROUNDS of them.
 */
static struct ivm_error *read_pieces(struct ivm_gmem *gmem,
				     struct ivm_x86_64_walk_memo *memo,
				     uint64_t cr3, bool la57,
				     struct vpiece *pieces, size_t nr)
{
	struct batch batch, *b = &batch;
	struct ivm_error *err = NULL;
	size_t i, round;

	for (i = 0; i < nr; i++) {
		struct vpiece *p = &pieces[i];

		p->err = NULL;
		p->active = true;
		if (!ivm_x86_64_canonical(p->va, la57)) {
			p->err = ivm_error_fault(p->va,
						 "non-canonical virtual address 0x%" PRIx64,
						 p->va);
			p->active = false;
		}
		walk_begin(&p->w, cr3, la57, p->va);
	}
	for (round = 0; round < MAX_ROUNDS; round++) {
		bool any = false;

		b->nr_ent = 0;
		b->nr_data = 0;
		for (i = 0; i < nr; i++) {
			if (!pieces[i].active)
				continue;
			plan_piece(b, memo, &pieces[i]);
			any = true;
		}
		if (!any)
			break;
		err = batch_issue(gmem, b);
		if (err)
			break;
		for (i = 0; i < nr; i++)
			if (pieces[i].active)
				check_piece(b, memo, &pieces[i]);
		for (i = 0; i < b->nr_data; i++)
			ivm_error_destroy(b->data_err[i]);
	}
	for (i = 0; i < nr; i++) {
		struct vpiece *p = &pieces[i];

		if (err) {
			ivm_error_destroy(p->err);
			p->err = NULL;
		} else if (p->active) {
			/* Not reached: a walk ends within MAX_ROUNDS. */
			p->err = ivm_error_fault(p->va,
						 "page walk for 0x%" PRIx64 " did not end",
						 p->va);
			p->active = false;
		}
	}
	if (err)
		return ivm_error_wrap(err, "reading virtual address 0x%" PRIx64,
				      pieces[0].va);
	return NULL;
}

struct ivm_error *ivm_x86_64_read_virt_memo(struct ivm_gmem *gmem,
					    struct ivm_x86_64_walk_memo *memo,
					    uint64_t cr3, bool la57,
					    uint64_t va, void *buf,
					    size_t len)
{
	struct vpiece pieces[BATCH_PIECES];
	uint8_t *out = buf;

	while (len) {
		struct ivm_error *err, *first = NULL;
		bool wraps = false;
		size_t n = 0, i;

		while (len && n < BATCH_PIECES) {
			size_t chunk = IVM_X86_64_PAGE_SIZE_4K -
				       (va & (IVM_X86_64_PAGE_SIZE_4K - 1));

			if (chunk > len)
				chunk = len;
			pieces[n].va = va;
			pieces[n].buf = out;
			pieces[n].len = chunk;
			n++;
			out += chunk;
			len -= chunk;
			va += chunk;
			if (!va && len) {
				wraps = true;
				break;
			}
		}
		err = read_pieces(gmem, memo, cr3, la57, pieces, n);
		if (err)
			return err;
		/* The first piece that failed is the read's fault. */
		for (i = 0; i < n; i++) {
			if (!first)
				first = pieces[i].err;
			else
				ivm_error_destroy(pieces[i].err);
		}
		if (first)
			return first;
		if (wraps)
			return ivm_error_fault(0,
					       "virtual read wraps around the address space");
	}
	return NULL;
}

struct ivm_error *ivm_x86_64_read_pages_memo(struct ivm_gmem *gmem,
					     struct ivm_x86_64_walk_memo *memo,
					     uint64_t cr3, bool la57,
					     uint64_t va, size_t nr,
					     void *const *pages,
					     uint64_t *ret)
{
	struct vpiece pieces[BATCH_PIECES];
	size_t done = 0;

	*ret = 0;
	if ((va & (IVM_X86_64_PAGE_SIZE_4K - 1)) || nr > 64 ||
	    (nr && va + (nr - 1) * IVM_X86_64_PAGE_SIZE_4K < va))
		return ivm_error_create(IVM_ERROR_INVALID,
					"bad page range 0x%" PRIx64 " + %zu pages",
					va, nr);
	while (done < nr) {
		size_t idx[BATCH_PIECES], n = 0, i;
		struct ivm_error *err;

		for (; done < nr && n < BATCH_PIECES; done++) {
			if (!pages[done])
				continue;
			idx[n] = done;
			pieces[n].va = va + done * IVM_X86_64_PAGE_SIZE_4K;
			pieces[n].buf = pages[done];
			pieces[n].len = IVM_X86_64_PAGE_SIZE_4K;
			n++;
		}
		if (!n)
			break;
		err = read_pieces(gmem, memo, cr3, la57, pieces, n);
		if (err)
			return err;
		for (i = 0; i < n; i++) {
			if (!pieces[i].err)
				*ret |= 1ull << idx[i];
			ivm_error_destroy(pieces[i].err);
		}
	}
	return NULL;
}
