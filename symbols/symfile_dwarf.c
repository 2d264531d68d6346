// SPDX-License-Identifier: MIT
/*
 * The DWARF side of a symbol file (symfile.h): compilation units found by
 * address (.debug_aranges, else their ranges), each scanned only as far as
 * a lookup needs; a function's inlined calls and lexical blocks indexed at
 * the first address that lands in it; the frames of an address, innermost
 * first, with their files and lines.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwarf_lines.h"
#include "symfile.h"
#include "symfile_int.h"

#define MAX_DIE_DEPTH		64	/* nesting of functions and blocks */

/* A subprogram or inlined call with code, inside one function. */
struct scope {
	Dwarf_Off die_off;
	int32_t parent;		/* index in the function's scopes, -1 at top */
	bool inlined;
	bool block;		/* a lexical block: no frame of its own */
};

/* One address range of a scope; a scope with DW_AT_ranges has several. */
struct scope_range {
	uint64_t lo, hi;
	uint32_t scope;
	uint32_t depth;
};

/*
 * An out-of-line function of a unit, found by the unit's top-level scan;
 * its inlined calls are indexed at the first address that lands in it.
 */
struct func {
	Dwarf_Off die_off;
	bool indexed;
	struct scope *scopes;
	size_t nr_scopes;
	struct scope_range *ranges;	/* sorted by lo, then depth */
	size_t nr_ranges;
};

struct func_range {
	uint64_t lo, hi;
	uint32_t func;
};

#define MAX_SCAN_DEPTH	8	/* namespaces around functions */

/*
 * A compilation unit.  Its top-level DIEs are scanned only as far as a
 * lookup needs (like dwarf_getscopes would, but once): functions seen on
 * the way are kept, and the scan resumes where it stopped.
 */
struct unit {
	Dwarf_Off cu_off;
	Dwarf_Die cudie;
	struct ivm_dwarf_lines *lines;	/* NULL: ask libdw */
	bool lines_read;
	bool scan_started, scan_done;
	Dwarf_Die scan[MAX_SCAN_DEPTH];
	int scan_depth;
	struct func *funcs;
	size_t nr_funcs, cap_funcs;
	struct func_range *franges;
	size_t nr_franges, cap_franges;
};

struct unit_range {
	uint64_t lo, hi;
	Dwarf_Off cu_off;
};

/* ---- DWARF index ------------------------------------------------------- */

static int unit_range_cmp(const void *a, const void *b)
{
	const struct unit_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return 0;
}

static int off_cmp(const void *a, const void *b)
{
	Dwarf_Off x = *(const Dwarf_Off *)a, y = *(const Dwarf_Off *)b;

	return x < y ? -1 : x > y;
}

/*
 * The units .debug_aranges describes, as sorted CU DIE offsets (NULL when
 * there is no table): their ranges are already known to dwarf_addrdie.
 */
static Dwarf_Off *aranges_units(struct ivm_symfile *f, size_t *nr)
{
	Dwarf_Aranges *aranges;
	Dwarf_Off *offs;
	size_t n, i, j;

	*nr = 0;
	if (dwarf_getaranges(f->dwarf, &aranges, &n) != 0 || !n)
		return NULL;
	offs = calloc(n, sizeof(*offs));
	if (!offs)
		return NULL;
	for (i = 0, j = 0; i < n; i++) {
		Dwarf_Addr start;
		Dwarf_Word len;

		if (dwarf_getarangeinfo(dwarf_onearange(aranges, i), &start,
					&len, &offs[j]) == 0)
			j++;
	}
	qsort(offs, j, sizeof(*offs), off_cmp);
	*nr = j;
	return offs;
}

/*
 * The address ranges of the compile units that .debug_aranges does not
 * describe (all of them when it is missing, as clang builds do), once,
 * for the addresses dwarf_addrdie does not place.  A unit aranges lists is
 * skipped: reading every unit's DIE costs each unit's abbreviations
 * (about 70 ms on a distribution vmlinux), and aranges already answered
 * for it.
 */
static void index_unit_ranges(struct ivm_symfile *f)
{
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie;
	uint8_t unit_type;
	size_t cap = 0, nr_known;
	Dwarf_Off *known = aranges_units(f, &nr_known);

	f->ranges_indexed = true;
	while (dwarf_get_units(f->dwarf, cu, &cu, NULL, &unit_type, &cudie,
			       NULL) == 0) {
		Dwarf_Addr base, start, end;
		Dwarf_Off cu_off = dwarf_dieoffset(&cudie);
		ptrdiff_t off = 0;

		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		if (known && bsearch(&cu_off, known, nr_known, sizeof(*known),
				     off_cmp))
			continue;
		while ((off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0) {
			if (end <= start)
				continue;
			if (!GROW(f->unit_ranges, &cap, f->nr_unit_ranges, 1024))
				break;
			f->unit_ranges[f->nr_unit_ranges++] = (struct unit_range){
				.lo = start, .hi = end, .cu_off = cu_off,
			};
		}
	}
	free(known);
	if (f->nr_unit_ranges)
		qsort(f->unit_ranges, f->nr_unit_ranges,
		      sizeof(*f->unit_ranges), unit_range_cmp);
}

static bool unit_range_find(struct ivm_symfile *f, uint64_t addr,
			    Dwarf_Die *cudie)
{
	size_t lo = 0, hi = f->nr_unit_ranges, i;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->unit_ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Units rarely overlap; look back a little in case they do. */
	for (i = lo; i > 0 && lo - i < 8; i--) {
		const struct unit_range *r = &f->unit_ranges[i - 1];

		if (addr < r->hi)
			return dwarf_offdie(f->dwarf, r->cu_off, cudie);
	}
	return false;
}

/* The unit of a CU DIE, created on first use. */
static struct unit *unit_of(struct ivm_symfile *f, Dwarf_Die *cudie)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	struct unit *u;
	size_t i;

	if ((f->nr_units + 1) * 2 > f->units_size) {
		size_t nsize = f->units_size ? f->units_size * 2 : 256, j;
		struct unit **n = calloc(nsize, sizeof(*n));

		if (!n)
			return NULL;
		for (j = 0; j < f->units_size; j++) {
			size_t k;

			if (!f->units[j])
				continue;
			for (k = hash_addr(f->units[j]->cu_off) & (nsize - 1);
			     n[k]; k = (k + 1) & (nsize - 1))
				;
			n[k] = f->units[j];
		}
		free(f->units);
		f->units = n;
		f->units_size = nsize;
	}
	for (i = hash_addr(off) & (f->units_size - 1); f->units[i];
	     i = (i + 1) & (f->units_size - 1))
		if (f->units[i]->cu_off == off)
			return f->units[i];
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->cu_off = off;
	u->cudie = *cudie;
	f->units[i] = u;
	f->nr_units++;
	return u;
}

/*
 * The unit holding addr: .debug_aranges first (read lazily by libdw, no
 * walk of the units), else the units' own ranges, indexed once.
 */
static struct unit *find_unit(struct ivm_symfile *f, uint64_t addr)
{
	Dwarf_Die cudie;

	if (dwarf_addrdie(f->dwarf, addr, &cudie))
		return unit_of(f, &cudie);
	if (!f->ranges_indexed)
		index_unit_ranges(f);
	if (unit_range_find(f, addr, &cudie))
		return unit_of(f, &cudie);
	return NULL;
}

static int scope_range_cmp(const void *a, const void *b)
{
	const struct scope_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return 0;
}

struct func_builder {
	struct func *fn;
	size_t cap_scopes, cap_ranges;
	bool failed;
};

static void add_scope(struct func_builder *b, Dwarf_Die *die, int32_t parent,
		      uint32_t depth, bool inlined, bool block, int32_t *idx)
{
	struct func *fn = b->fn;
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	bool any = false;

	*idx = -1;
	while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
		if (end <= start)
			continue;
		if (!any) {
			if (!GROW(fn->scopes, &b->cap_scopes, fn->nr_scopes, 16)) {
				b->failed = true;
				return;
			}
			*idx = (int32_t)fn->nr_scopes;
			fn->scopes[fn->nr_scopes++] = (struct scope){
				.die_off = dwarf_dieoffset(die),
				.parent = parent,
				.inlined = inlined,
				.block = block,
			};
			any = true;
		}
		if (!GROW(fn->ranges, &b->cap_ranges, fn->nr_ranges, 16)) {
			b->failed = true;
			return;
		}
		fn->ranges[fn->nr_ranges++] = (struct scope_range){
			.lo = start, .hi = end,
			.scope = (uint32_t)*idx, .depth = depth,
		};
	}
}

/*
 * Walk one function's DIE subtree once and keep each inlined call (and
 * the lexical blocks' ones) with its ranges and enclosing scope, so every
 * later address in the function is a binary search, not a tree walk.
 */
static void index_func(struct ivm_symfile *f, struct func *fn)
{
	struct func_builder b = { .fn = fn };
	Dwarf_Die stack[MAX_DIE_DEPTH];
	int32_t scope_of[MAX_DIE_DEPTH];	/* enclosing scope per level */
	int depth = 0;
	uint64_t steps = 0;
	int32_t idx;

	fn->indexed = true;
	if (!dwarf_offdie(f->dwarf, fn->die_off, &stack[0]))
		return;
	add_scope(&b, &stack[0], -1, 0, false, false, &idx);
	if (b.failed || idx < 0)
		goto out;
	scope_of[1] = idx;
	if (dwarf_child(&stack[0], &stack[1]) != 0)
		goto out;
	depth = 1;
	for (;;) {
		Dwarf_Die *die = &stack[depth];
		int tag = dwarf_tag(die);
		int32_t parent = scope_of[depth];
		bool descend = false;

		/* limit iterations so a corrupt unit cannot loop forever */
		if (++steps > (1u << 24))
			break;
		idx = parent;
		switch (tag) {
		case DW_TAG_inlined_subroutine:
		case DW_TAG_subprogram:		/* nested (GNU C) */
			add_scope(&b, die, parent, (uint32_t)depth,
				  tag == DW_TAG_inlined_subroutine, false, &idx);
			if (b.failed)
				goto out;
			descend = idx >= 0;
			break;
		case DW_TAG_lexical_block:
			/*
			 * A level of its own, as dwarf_getscopes() sees it: an
			 * inline inside a block whose ranges miss the address
			 * is not the answer there (nor inside a block with no
			 * ranges at all).
			 */
			add_scope(&b, die, parent, (uint32_t)depth, false, true,
				  &idx);
			if (b.failed)
				goto out;
			descend = idx >= 0;
			break;
		default:
			break;
		}
		if (descend && depth + 1 < MAX_DIE_DEPTH &&
		    dwarf_child(die, &stack[depth + 1]) == 0) {
			scope_of[depth + 1] = idx >= 0 ? idx : parent;
			depth++;
			continue;
		}
		while (dwarf_siblingof(&stack[depth], &stack[depth]) != 0) {
			if (--depth == 0)
				goto out;
		}
	}
out:
	if (b.failed) {
		free(fn->scopes);
		free(fn->ranges);
		fn->scopes = NULL;
		fn->ranges = NULL;
		fn->nr_scopes = fn->nr_ranges = 0;
		return;
	}
	if (fn->nr_ranges)
		qsort(fn->ranges, fn->nr_ranges, sizeof(*fn->ranges),
		      scope_range_cmp);
}

/* Record an out-of-line function met by the scan; its index or -1. */
static int32_t add_func(struct unit *u, Dwarf_Die *die, uint64_t addr,
			bool *holds)
{
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	int32_t idx = -1;

	*holds = false;
	while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
		if (end <= start)
			continue;
		if (idx < 0) {
			if (!GROW(u->funcs, &u->cap_funcs, u->nr_funcs, 64))
				return -1;
			idx = (int32_t)u->nr_funcs++;
			u->funcs[idx] = (struct func){
				.die_off = dwarf_dieoffset(die) };
		}
		if (!GROW(u->franges, &u->cap_franges, u->nr_franges, 64))
			return idx;
		u->franges[u->nr_franges++] = (struct func_range){
			.lo = start, .hi = end, .func = (uint32_t)idx };
		if (addr >= start && addr < end)
			*holds = true;
	}
	return idx;
}

/*
 * The out-of-line function of u holding addr: among those already met,
 * else by resuming the scan of the unit's top-level DIEs.
 */
static struct func *find_func(struct unit *u, uint64_t addr)
{
	size_t i;

	for (i = 0; i < u->nr_franges; i++)
		if (addr >= u->franges[i].lo && addr < u->franges[i].hi)
			return &u->funcs[u->franges[i].func];
	if (!u->scan_started) {
		u->scan_started = true;
		if (dwarf_child(&u->cudie, &u->scan[0]) != 0) {
			u->scan_done = true;
			return NULL;
		}
		u->scan_depth = 0;
	}
	while (!u->scan_done) {
		Dwarf_Die *die = &u->scan[u->scan_depth];
		int tag = dwarf_tag(die);
		int32_t idx = -1;
		bool holds = false, child = false;

		if (tag == DW_TAG_subprogram)
			idx = add_func(u, die, addr, &holds);
		else if (tag == DW_TAG_namespace &&
			 u->scan_depth + 1 < MAX_SCAN_DEPTH &&
			 dwarf_child(die, &u->scan[u->scan_depth + 1]) == 0)
			child = true;
		if (child) {
			u->scan_depth++;
		} else {
			while (dwarf_siblingof(&u->scan[u->scan_depth],
					       &u->scan[u->scan_depth]) != 0) {
				if (u->scan_depth == 0) {
					u->scan_done = true;
					break;
				}
				u->scan_depth--;
			}
		}
		if (holds && idx >= 0)
			return &u->funcs[idx];
	}
	return NULL;
}

/*
 * The innermost scope of fn holding addr, or -1, chosen as libdw's
 * dwarf_getscopes() (and so eu-addr2line) does: from the function down,
 * the first child in DIE order whose own ranges hold addr, until none
 * does.  GCC leaves overlapping sibling inlines (two calls merged) and
 * inlines whose ranges miss an address a nested one holds: this rule,
 * not "the range starting nearest", is what the reference tools answer.
 */
static int32_t innermost_scope(const struct func *fn, uint64_t addr)
{
	size_t lo = 0, hi = fn->nr_ranges, i, j;
	bool stack_holds[256], *holds = stack_holds;
	int32_t cur;

	if (!fn->nr_scopes)
		return -1;
	if (fn->nr_scopes > sizeof(stack_holds)) {
		holds = calloc(fn->nr_scopes, sizeof(*holds));
		if (!holds)
			return -1;
	} else {
		memset(holds, 0, fn->nr_scopes * sizeof(*holds));
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fn->ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Ranges are sorted by start: those before lo start at or below. */
	for (i = 0; i < lo; i++)
		if (addr < fn->ranges[i].hi &&
		    fn->ranges[i].scope < fn->nr_scopes)
			holds[fn->ranges[i].scope] = true;
	cur = -1;
	if (holds[0] && fn->scopes[0].parent < 0) {
		cur = 0;
		/*
		 * Scopes are in DIE pre-order, so a scope's descendants follow
		 * it: one forward pass finds each level's first holder.
		 */
		for (j = 1; j < fn->nr_scopes; j++) {
			if (fn->scopes[j].parent == cur && holds[j])
				cur = (int32_t)j;
		}
	}
	if (holds != stack_holds)
		free(holds);
	return cur;
}

/*
 * The unit's line table read directly (see dwarf_lines.h), once; NULL
 * when it cannot be, and libdw answers instead.
 */
static struct ivm_dwarf_lines *unit_lines(struct ivm_symfile *f,
					  struct unit *u)
{
	Dwarf_Attribute attr;
	Dwarf_Word off;

	if (u->lines_read)
		return u->lines;
	u->lines_read = true;
	if (!f->dwarf_sections.line ||
	    dwarf_formudata(dwarf_attr(&u->cudie, DW_AT_stmt_list, &attr),
			    &off) != 0)
		return NULL;
	ivm_dwarf_lines_read(&f->dwarf_sections, off, &u->lines);
	return u->lines;
}

static const char *call_site_file(struct ivm_symfile *f, struct unit *u,
				  Dwarf_Die *die, unsigned int *line)
{
	struct ivm_dwarf_lines *lines = unit_lines(f, u);
	Dwarf_Die *cudie = &u->cudie;
	Dwarf_Attribute attr;
	Dwarf_Word file_idx, line_no;
	Dwarf_Files *files;
	size_t nfiles;

	*line = 0;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr),
			    &line_no) == 0 && line_no < UINT32_MAX)
		*line = (unsigned int)line_no;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr),
			    &file_idx) != 0)
		return NULL;
	if (lines)
		return ivm_dwarf_lines_file(lines, file_idx);
	if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0 ||
	    file_idx >= nfiles)
		return NULL;
	return dwarf_filesrc(files, file_idx, NULL, NULL);
}

/*
 * Fill frames from DWARF; returns the number of frames (0: DWARF does not
 * know the address).
 */
unsigned int symfile_dwarf_frames(struct ivm_symfile *f, uint64_t addr,
				  struct ivm_sym_frame *frames)
{
	struct unit *u;
	struct func *fn;
	int32_t s = -1;
	unsigned int n = 0;
	struct ivm_dwarf_lines *lines;
	Dwarf_Line *line;

	u = find_unit(f, addr);
	if (!u)
		return 0;
	fn = find_func(u, addr);
	if (fn) {
		if (!fn->indexed)
			index_func(f, fn);
		s = innermost_scope(fn, addr);
	}
	while (fn && s >= 0 && (size_t)s < fn->nr_scopes &&
	       n < IVM_SYM_MAX_INLINE) {
		const struct scope *sc = &fn->scopes[s];
		Dwarf_Die die;

		if (sc->block) {
			if (sc->parent >= s)
				break;
			s = sc->parent;
			continue;
		}
		if (!dwarf_offdie(f->dwarf, sc->die_off, &die))
			break;
		frames[n].function = dwarf_diename(&die);
		frames[n].inlined = sc->inlined;
		/* The outer frame's position is this inlined call's site. */
		if (sc->inlined && n + 1 < IVM_SYM_MAX_INLINE)
			frames[n + 1].file = call_site_file(f, u, &die,
							    &frames[n + 1].line);
		n++;
		if (!sc->inlined)
			break;
		/* Parents were added before children: indexes go down. */
		if (sc->parent >= s)
			break;
		s = sc->parent;
	}
	/*
	 * The line table may know an address that no function DIE covers
	 * (assembly, folded aliases): keep its file:line, the symbol table
	 * will name the function.
	 */
	lines = unit_lines(f, u);
	if (lines) {
		if (ivm_dwarf_lines_find(lines, addr, &frames[0].file,
					 &frames[0].line) && !n)
			n = 1;
		return n;
	}
	line = dwarf_getsrc_die(&u->cudie, addr);
	if (line) {
		int lineno = 0;

		frames[0].file = dwarf_linesrc(line, NULL, NULL);
		dwarf_lineno(line, &lineno);
		frames[0].line = lineno > 0 ? (unsigned int)lineno : 0;
		if (!n)
			n = 1;
	}
	return n;
}


void symfile_dwarf_free(struct ivm_symfile *f)
{
	size_t i, j;

	for (i = 0; i < f->units_size; i++) {
		struct unit *u = f->units[i];

		if (!u)
			continue;
		for (j = 0; j < u->nr_funcs; j++) {
			free(u->funcs[j].scopes);
			free(u->funcs[j].ranges);
		}
		free(u->funcs);
		free(u->franges);
		ivm_dwarf_lines_destroy(u->lines);
		free(u);
	}
	free(f->units);
	free(f->unit_ranges);
}
