// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "dwarf_lines.h"

/* DWARF 5 constants (dwarf.h has them, but this file needs only these). */
#define FORM_block		0x09
#define FORM_data1		0x0b
#define FORM_data2		0x05
#define FORM_data4		0x06
#define FORM_data8		0x07
#define FORM_data16		0x1e
#define FORM_line_strp		0x1f
#define FORM_string		0x08
#define FORM_strp		0x0e
#define FORM_udata		0x0f
#define LNCT_path		1
#define LNCT_directory_index	2

#define MAX_FORMATS		16
#define MAX_ENTRIES		(1u << 20)	/* dirs or files of one unit */
#define MAX_ROWS		(1u << 26)

struct row {
	uint64_t addr;
	uint32_t file;
	int32_t line;
	uint32_t order;		/* program order, for a stable sort */
	bool end_sequence;
};

struct ivm_dwarf_lines {
	struct row *rows;
	size_t nr_rows;
	const char **files;	/* composed names, NULL: none */
	size_t nr_files;
	char *names;		/* arena holding the composed names */
};

/*
 * A bounded cursor over section bytes: reads past the end set bad.  Kept as
 * start/end pointers (the line program jumps and re-bounds it); the bytes
 * themselves are decoded by base/bytes.h, the project's one reader of
 * little-endian words and LEB128.
 */
struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t read_n(struct cursor *c, size_t n)
{
	uint64_t v;

	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	v = ivm_le_load(c->p, (unsigned int)n);
	c->p += n;
	return v;
}

/* The LEB128 readers of bytes.h on this cursor's bytes. */
static struct ivm_cursor leb_begin(const struct cursor *c)
{
	struct ivm_cursor ic;

	ivm_cursor_init(&ic, c->p, (size_t)(c->end - c->p));
	ic.bad = c->bad;
	return ic;
}

static void leb_end(struct cursor *c, const struct ivm_cursor *ic)
{
	c->bad = ic->bad;
	if (!c->bad)
		c->p = ic->p;
}

static uint64_t uleb(struct cursor *c)
{
	struct ivm_cursor ic = leb_begin(c);
	uint64_t v = ivm_get_uleb(&ic);

	leb_end(c, &ic);
	return v;
}

static int64_t sleb(struct cursor *c)
{
	struct ivm_cursor ic = leb_begin(c);
	int64_t v = ivm_get_sleb(&ic);

	leb_end(c, &ic);
	return v;
}

/* A NUL-terminated string at off in a section, or NULL. */
static const char *section_string(const uint8_t *sec, size_t size,
				  uint64_t off)
{
	if (!sec || off >= size || !memchr(sec + off, '\0', size - off))
		return NULL;
	return (const char *)sec + off;
}

struct entry_format {
	uint64_t type, form;
};

/*
 * One attribute of a directory or file entry: its string for the forms a
 * path takes, its number for the others.  false: a form not supported.
 */
static bool read_form(struct cursor *c, const struct ivm_dwarf_sections *sec,
		      uint64_t form, size_t offset_size, const char **str,
		      uint64_t *num)
{
	const uint8_t *start = c->p;

	*str = NULL;
	*num = 0;
	switch (form) {
	case FORM_string:
		if (c->bad || !memchr(c->p, '\0', (size_t)(c->end - c->p)))
			return false;
		*str = (const char *)start;
		c->p += strlen(*str) + 1;
		return true;
	case FORM_line_strp:
		*str = section_string(sec->line_str, sec->line_str_size,
				      read_n(c, offset_size));
		return *str != NULL;
	case FORM_strp:
		*str = section_string(sec->str, sec->str_size,
				      read_n(c, offset_size));
		return *str != NULL;
	case FORM_udata:
		*num = uleb(c);
		return true;
	case FORM_data1:
		*num = read_n(c, 1);
		return true;
	case FORM_data2:
		*num = read_n(c, 2);
		return true;
	case FORM_data4:
		*num = read_n(c, 4);
		return true;
	case FORM_data8:
		*num = read_n(c, 8);
		return true;
	case FORM_data16:
		read_n(c, 8);
		read_n(c, 8);
		return true;
	case FORM_block: {
		uint64_t len = uleb(c);

		if (c->bad || len > (uint64_t)(c->end - c->p))
			return false;
		c->p += len;
		return true;
	}
	default:
		return false;
	}
}

static bool read_formats(struct cursor *c, struct entry_format *fmt,
			 size_t *nr)
{
	size_t i;

	*nr = read_n(c, 1);
	if (*nr > MAX_FORMATS)
		return false;
	for (i = 0; i < *nr; i++) {
		fmt[i].type = uleb(c);
		fmt[i].form = uleb(c);
	}
	return !c->bad;
}

/* One directory or file entry: its path and directory index. */
static bool read_entry(struct cursor *c, const struct ivm_dwarf_sections *sec,
		       const struct entry_format *fmt, size_t nr_fmt,
		       size_t offset_size, const char **path, uint64_t *dir)
{
	size_t i;

	*path = NULL;
	*dir = 0;
	for (i = 0; i < nr_fmt; i++) {
		const char *s;
		uint64_t n;

		if (!read_form(c, sec, fmt[i].form, offset_size, &s, &n) ||
		    c->bad)
			return false;
		if (fmt[i].type == LNCT_path)
			*path = s;
		else if (fmt[i].type == LNCT_directory_index)
			*dir = n;
	}
	return *path != NULL;
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* As libdw: an end of sequence first, then program order. */
	if (x->end_sequence != y->end_sequence)
		return x->end_sequence ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * Sort rows as libdw does (row_cmp, a total order: program order breaks
 * ties).  The rows come as a few ascending runs (one per sequence, mostly),
 * so a natural merge sort does it in a few linear passes, where qsort took
 * a quarter of the time of a lookup.  false: no memory.
 */
static bool sort_rows(struct ivm_dwarf_lines *t)
{
	size_t n = t->nr_rows, nr_runs = 0, i, *starts;
	struct row *tmp, *src = t->rows, *dst;

	if (n < 2)
		return true;
	starts = malloc((n + 1) * sizeof(*starts));
	if (!starts)
		return false;
	starts[nr_runs++] = 0;
	for (i = 1; i < n; i++)
		if (row_cmp(&src[i - 1], &src[i]) > 0)
			starts[nr_runs++] = i;
	if (nr_runs == 1) {
		free(starts);
		return true;
	}
	starts[nr_runs] = n;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp) {
		free(starts);
		return false;
	}
	dst = tmp;
	while (nr_runs > 1) {
		size_t r, out = 0;

		for (r = 0; r < nr_runs; r += 2) {
			size_t a = starts[r], a_end = starts[r + 1], k = a;
			size_t b = a_end, b_end = r + 2 <= nr_runs ?
						  starts[r + 2] : a_end;

			while (a < a_end && b < b_end)
				dst[k++] = row_cmp(&src[b], &src[a]) < 0 ?
					   src[b++] : src[a++];
			while (a < a_end)
				dst[k++] = src[a++];
			while (b < b_end)
				dst[k++] = src[b++];
			starts[out++] = starts[r];
		}
		starts[out] = n;
		nr_runs = out;
		{
			struct row *swap = src;

			src = dst;
			dst = swap;
		}
	}
	if (src != t->rows) {
		free(t->rows);
		t->rows = src;
	} else {
		free(tmp);
	}
	free(starts);
	return true;
}

struct program {
	uint8_t min_inst, line_range, opcode_base, address_size;
	int8_t line_base;
	const uint8_t *std_lengths;
	bool default_is_stmt;
};

static bool emit(struct ivm_dwarf_lines *t, size_t *cap, uint64_t addr,
		 uint64_t file, uint64_t line, bool end)
{
	if (t->nr_rows == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		struct row *n;

		if (ncap > MAX_ROWS)
			return false;
		n = realloc(t->rows, ncap * sizeof(*n));
		if (!n)
			return false;
		t->rows = n;
		*cap = ncap;
	}
	t->rows[t->nr_rows] = (struct row){
		.addr = addr,
		.file = file > UINT32_MAX ? UINT32_MAX : (uint32_t)file,
		.line = (int32_t)(uint32_t)line,
		.order = (uint32_t)t->nr_rows,
		.end_sequence = end,
	};
	t->nr_rows++;
	return true;
}

/* Run the line program; false on anything it cannot follow exactly. */
static bool run_program(struct ivm_dwarf_lines *t, struct cursor *c,
			const struct program *pg)
{
	/* libdw keeps the line in an unsigned int: wrap the same way. */
	uint64_t addr = 0, file = 1, line = 1;
	size_t cap = 0;

	while (c->p < c->end && !c->bad) {
		uint8_t op = (uint8_t)read_n(c, 1);

		if (op >= pg->opcode_base) {
			unsigned int adj = op - pg->opcode_base;

			addr += (uint64_t)(adj / pg->line_range) * pg->min_inst;
			line += (uint64_t)(int64_t)(pg->line_base +
						    (int)(adj % pg->line_range));
			if (!emit(t, &cap, addr, file, line, false))
				return false;
			continue;
		}
		switch (op) {
		case 0: {	/* extended */
			uint64_t len = uleb(c);
			const uint8_t *next;
			uint8_t ext;

			if (c->bad || !len || len > (uint64_t)(c->end - c->p))
				return false;
			next = c->p + len;
			ext = (uint8_t)read_n(c, 1);
			if (ext == 1) {		/* end_sequence */
				if (!emit(t, &cap, addr, file, line, true))
					return false;
				addr = 0;
				file = 1;
				line = 1;
			} else if (ext == 2) {	/* set_address */
				if (len - 1 != pg->address_size)
					return false;
				addr = read_n(c, pg->address_size);
			} else if (ext == 3) {	/* define_file: DWARF 2-4 */
				return false;
			}
			c->p = next;
			break;
		}
		case 1:		/* copy */
			if (!emit(t, &cap, addr, file, line, false))
				return false;
			break;
		case 2:		/* advance_pc */
			addr += uleb(c) * pg->min_inst;
			break;
		case 3:		/* advance_line */
			line += (uint64_t)sleb(c);
			break;
		case 4:		/* set_file */
			file = uleb(c);
			break;
		case 8:		/* const_add_pc */
			addr += (uint64_t)((255 - pg->opcode_base) /
					   pg->line_range) * pg->min_inst;
			break;
		case 9:		/* fixed_advance_pc */
			addr += read_n(c, 2);
			break;
		case 5: case 12:	/* set_column, set_isa */
			uleb(c);
			break;
		case 6: case 7: case 10: case 11:	/* flags only */
			break;
		default: {	/* unknown standard opcode: skip its operands */
			unsigned int i, n = pg->std_lengths[op - 1];

			for (i = 0; i < n; i++)
				uleb(c);
			break;
		}
		}
	}
	return !c->bad;
}

/* "DIR/NAME" as libdw composes it; absolute names as they are. */
static bool compose_files(struct ivm_dwarf_lines *t, const char **paths,
			  const uint64_t *dir_of, size_t nr_files,
			  const char **dirs, size_t nr_dirs)
{
	size_t i, total = 0;
	char *p;

	for (i = 0; i < nr_files; i++) {
		if (paths[i][0] != '/' && dir_of[i] >= nr_dirs)
			return false;	/* libdw rejects the table too */
		total += strlen(paths[i]) + 1;
		if (paths[i][0] != '/')
			total += strlen(dirs[dir_of[i]]) + 1;
	}
	t->names = malloc(total ? total : 1);
	t->files = calloc(nr_files ? nr_files : 1, sizeof(*t->files));
	if (!t->names || !t->files)
		return false;
	p = t->names;
	for (i = 0; i < nr_files; i++) {
		t->files[i] = p;
		if (paths[i][0] != '/') {
			p = stpcpy(p, dirs[dir_of[i]]);
			*p++ = '/';
		}
		p = stpcpy(p, paths[i]) + 1;
	}
	t->nr_files = nr_files;
	return true;
}

bool ivm_dwarf_lines_read(const struct ivm_dwarf_sections *sec,
			  uint64_t offset, struct ivm_dwarf_lines **ret)
{
	struct entry_format fmt[MAX_FORMATS];
	struct ivm_dwarf_lines *t = NULL;
	struct cursor c, hdr;
	struct program pg;
	const char **dirs = NULL, **paths = NULL;
	uint64_t unit_len, header_len, nr_dirs, nr_files, *dir_of = NULL;
	size_t offset_size = 4, nr_fmt, i;
	bool ok = false;

	*ret = NULL;
	if (!sec->line || offset >= sec->line_size)
		return false;
	c = (struct cursor){ .p = sec->line + offset,
			     .end = sec->line + sec->line_size };
	unit_len = read_n(&c, 4);
	if (unit_len == 0xffffffff) {
		unit_len = read_n(&c, 8);
		offset_size = 8;
	}
	if (c.bad || unit_len > (uint64_t)(c.end - c.p))
		return false;
	c.end = c.p + unit_len;
	if (read_n(&c, 2) != 5)		/* version */
		return false;
	pg.address_size = (uint8_t)read_n(&c, 1);
	if (read_n(&c, 1) != 0 ||	/* segment selectors */
	    (pg.address_size != 8 && pg.address_size != 4))
		return false;
	header_len = read_n(&c, offset_size);
	if (c.bad || header_len > (uint64_t)(c.end - c.p))
		return false;
	hdr = (struct cursor){ .p = c.p, .end = c.p + header_len };
	c.p += header_len;		/* the program */
	pg.min_inst = (uint8_t)read_n(&hdr, 1);
	if (read_n(&hdr, 1) != 1)	/* VLIW op_index: not followed */
		return false;
	pg.default_is_stmt = read_n(&hdr, 1);
	pg.line_base = (int8_t)read_n(&hdr, 1);
	pg.line_range = (uint8_t)read_n(&hdr, 1);
	pg.opcode_base = (uint8_t)read_n(&hdr, 1);
	if (hdr.bad || !pg.line_range || !pg.opcode_base ||
	    (size_t)(hdr.end - hdr.p) < (size_t)pg.opcode_base - 1)
		return false;
	pg.std_lengths = hdr.p;
	hdr.p += pg.opcode_base - 1;

	if (!read_formats(&hdr, fmt, &nr_fmt))
		return false;
	nr_dirs = uleb(&hdr);
	if (hdr.bad || nr_dirs > MAX_ENTRIES)
		return false;
	dirs = calloc(nr_dirs ? nr_dirs : 1, sizeof(*dirs));
	if (!dirs)
		return false;
	for (i = 0; i < nr_dirs; i++) {
		uint64_t unused;

		if (!read_entry(&hdr, sec, fmt, nr_fmt, offset_size, &dirs[i],
				&unused))
			goto out;
	}
	if (!read_formats(&hdr, fmt, &nr_fmt))
		goto out;
	nr_files = uleb(&hdr);
	if (hdr.bad || nr_files > MAX_ENTRIES)
		goto out;
	paths = calloc(nr_files ? nr_files : 1, sizeof(*paths));
	dir_of = calloc(nr_files ? nr_files : 1, sizeof(*dir_of));
	t = calloc(1, sizeof(*t));
	if (!paths || !dir_of || !t)
		goto out;
	for (i = 0; i < nr_files; i++)
		if (!read_entry(&hdr, sec, fmt, nr_fmt, offset_size, &paths[i],
				&dir_of[i]))
			goto out;
	if (!compose_files(t, paths, dir_of, nr_files, dirs, nr_dirs) ||
	    !run_program(t, &c, &pg))
		goto out;
	if (!sort_rows(t))
		goto out;
	/*
	 * As libdw does: the highest row ends a sequence, whatever the
	 * program said (some compilers forget the last end_sequence).
	 */
	if (t->nr_rows)
		t->rows[t->nr_rows - 1].end_sequence = true;
	*ret = t;
	t = NULL;
	ok = true;
out:
	ivm_dwarf_lines_destroy(t);
	free(dirs);
	free(paths);
	free(dir_of);
	return ok;
}

void ivm_dwarf_lines_destroy(struct ivm_dwarf_lines *t)
{
	if (!t)
		return;
	free(t->rows);
	free(t->files);
	free(t->names);
	free(t);
}

bool ivm_dwarf_lines_find(const struct ivm_dwarf_lines *t, uint64_t addr,
			  const char **file, unsigned int *line)
{
	size_t l = 0, u;
	const struct row *r;

	if (!t->nr_rows)
		return false;
	/* libdw's search: the last row whose address is <= addr. */
	u = t->nr_rows - 1;
	while (l < u) {
		size_t idx = u - (u - l) / 2;

		if (addr < t->rows[idx].addr)
			u = idx - 1;
		else
			l = idx;
	}
	r = &t->rows[l];
	if (r->end_sequence || r->addr > addr)
		return false;
	*file = ivm_dwarf_lines_file(t, r->file);
	*line = r->line > 0 ? (unsigned int)r->line : 0;
	return true;
}

const char *ivm_dwarf_lines_file(const struct ivm_dwarf_lines *t,
				 uint64_t idx)
{
	return idx < t->nr_files ? t->files[idx] : NULL;
}
