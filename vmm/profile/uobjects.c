// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hexnum.h"
#include "profile/uobjects.h"
#include "unwind/uunwind_exe.h"

/* Metadata items waiting to be taken. */
struct pending {
	char key[8];
	char *value;
};

struct ivm_uobjects {
	struct ivm_uobject *objects[IVM_UOBJECTS_MAX];
	size_t nr;
	/* (pid, id, start) of umap items, and (id, vaddr) of usym ones. */
	uint64_t *seen;
	size_t seen_cap, nr_seen, nr_syms;
	struct pending *pending;
	size_t nr_pending, cap_pending;
	uint64_t clock;			/* one tick per use of an image */
	uint64_t dropped;		/* images the bound dropped */
	/* Their counters, so that the run's sums never go back. */
	struct ivm_uobjects_stats gone;
};

struct ivm_error *ivm_uobjects_create(struct ivm_uobjects **ret)
{
	struct ivm_uobjects *t = calloc(1, sizeof(*t));

	if (!t)
		return &ivm_enomem;
	t->seen_cap = 1024;
	t->seen = calloc(t->seen_cap, sizeof(*t->seen));
	if (!t->seen) {
		free(t);
		return &ivm_enomem;
	}
	*ret = t;
	return NULL;
}

void ivm_uobjects_destroy(struct ivm_uobjects *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->nr; i++) {
		ivm_uimage_destroy(t->objects[i]->image);
		free(t->objects[i]->path);
		free(t->objects[i]);
	}
	for (i = 0; i < t->nr_pending; i++)
		free(t->pending[i].value);
	free(t->pending);
	free(t->seen);
	free(t);
}

/* Queue an item; lost (not worth failing a capture for) on no memory. */
static void push(struct ivm_uobjects *t, const char *key, char *value)
{
	if (!value)
		return;
	if (t->nr_pending == t->cap_pending) {
		size_t cap = t->cap_pending ? 2 * t->cap_pending : 64;
		struct pending *p = realloc(t->pending, cap * sizeof(*p));

		if (!p) {
			free(value);
			return;
		}
		t->pending = p;
		t->cap_pending = cap;
	}
	snprintf(t->pending[t->nr_pending].key,
		 sizeof(t->pending[0].key), "%s", key);
	t->pending[t->nr_pending++].value = value;
}

/* Guest bytes in metadata: one line of printable characters. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

static void announce(struct ivm_uobjects *t, const struct ivm_uobject *o)
{
	char hex[2 * IVM_UELF_MAX_BUILD_ID + 1];
	char *v;

	if (asprintf(&v, "%" PRIu32 " %s %s %s", o->id,
		     ivm_build_id_hex(o->build_id, o->build_id_len, hex),
		     o->dyn ? "dyn" : "exec", o->path ? o->path : "-") < 0)
		return;
	printable(v);
	push(t, "uobject", v);
}

struct ivm_uobject *ivm_uobjects_get(struct ivm_uobjects *t,
				     const uint8_t *build_id, size_t len,
				     bool dyn, const char *path)
{
	struct ivm_uobject *o;
	size_t i;

	if (!len || len > IVM_UELF_MAX_BUILD_ID)
		return NULL;
	for (i = 0; i < t->nr; i++) {
		o = t->objects[i];
		if (o->build_id_len == len && !memcmp(o->build_id, build_id,
						      len)) {
			ivm_uobjects_set_path(t, o, path);
			return o;
		}
	}
	if (t->nr == IVM_UOBJECTS_MAX || !(o = calloc(1, sizeof(*o))))
		return NULL;
	o->id = (uint32_t)t->nr + 1;
	memcpy(o->build_id, build_id, len);
	o->build_id_len = len;
	o->dyn = dyn;
	if (path && *path)
		o->path = strndup(path, IVM_UOBJECT_MAX_PATH);
	t->objects[t->nr++] = o;
	announce(t, o);
	return o;
}

struct ivm_uobject *ivm_uobjects_by_id(const struct ivm_uobjects *t,
				       uint32_t id)
{
	return id && id <= t->nr ? t->objects[id - 1] : NULL;
}

void ivm_uobjects_set_path(struct ivm_uobjects *t, struct ivm_uobject *o,
			   const char *path)
{
	if (o->path || !path || !*path)
		return;
	o->path = strndup(path, IVM_UOBJECT_MAX_PATH);
	if (o->path)
		announce(t, o);
}

/* Insert key into the seen set; true when it was not there. */
static bool first_time(struct ivm_uobjects *t, uint64_t key)
{
	size_t i;

	if (2 * (t->nr_seen + 1) > t->seen_cap) {
		size_t cap = 2 * t->seen_cap, j;
		uint64_t *n = calloc(cap, sizeof(*n));

		if (!n)
			return false;
		for (j = 0; j < t->seen_cap; j++) {
			if (!t->seen[j])
				continue;
			i = ivm_hash_addr(t->seen[j]) & (cap - 1);
			while (n[i])
				i = (i + 1) & (cap - 1);
			n[i] = t->seen[j];
		}
		free(t->seen);
		t->seen = n;
		t->seen_cap = cap;
	}
	/* Keys are never 0: they hold an object id, which is not. */
	i = ivm_hash_addr(key) & (t->seen_cap - 1);
	while (t->seen[i]) {
		if (t->seen[i] == key)
			return false;
		i = (i + 1) & (t->seen_cap - 1);
	}
	t->seen[i] = key;
	t->nr_seen++;
	return true;
}

void ivm_uobjects_note_map(struct ivm_uobjects *t, uint32_t pid,
			   const struct ivm_uobject *o, uint64_t start,
			   uint64_t end, uint64_t pgoff, uint64_t bias)
{
	/* Odd keys: note_symbol's are even. */
	uint64_t key = (ivm_hash_addr(start ^ ((uint64_t)pid << 32)) ^
			((uint64_t)o->id << 48)) | 1;
	char *v;

	if (!first_time(t, key))
		return;
	if (asprintf(&v, "%" PRIu32 " %" PRIu32 " 0x%" PRIx64 " 0x%" PRIx64
		     " 0x%" PRIx64 " 0x%" PRIx64, pid, o->id, start, end,
		     pgoff, bias) >= 0)
		push(t, "umap", v);
}

void ivm_uobjects_note_symbol(struct ivm_uobjects *t,
			      const struct ivm_uobject *o, uint64_t vaddr,
			      uint64_t size, const char *name)
{
	char *v;

	/* Even keys: note_map's are odd, so the two never collide. */
	if (t->nr_syms >= IVM_UOBJECTS_MAX_SYMS ||
	    !first_time(t, (IVM_UPC(o->id, vaddr) << 1) | 2))
		return;
	t->nr_syms++;
	if (asprintf(&v, "%" PRIu32 " 0x%" PRIx64 " 0x%" PRIx64 " %.200s",
		     o->id, vaddr, size, name) < 0)
		return;
	printable(v);
	push(t, "usym", v);
}

struct ivm_error *ivm_uobjects_take_meta(struct ivm_uobjects *t,
					 struct ivm_error *(*emit)(void *ctx,
						const char *key,
						const char *value),
					 void *ctx)
{
	struct ivm_error *err = NULL;
	size_t i;

	for (i = 0; i < t->nr_pending; i++) {
		err = emit(ctx, t->pending[i].key, t->pending[i].value);
		if (err)
			break;
		free(t->pending[i].value);
	}
	/* Nothing ever pending (a kernel thread's stack): pending is NULL. */
	if (i) {
		memmove(t->pending, t->pending + i,
			(t->nr_pending - i) * sizeof(*t->pending));
		t->nr_pending -= i;
	}
	return err;
}

void ivm_uobjects_forget(struct ivm_uobjects *t)
{
	size_t i;

	for (i = 0; i < t->nr_pending; i++)
		free(t->pending[i].value);
	t->nr_pending = 0;
	memset(t->seen, 0, t->seen_cap * sizeof(*t->seen));
	t->nr_seen = 0;
	t->nr_syms = 0;
	for (i = 0; i < t->nr; i++)
		announce(t, t->objects[i]);
}

static size_t image_memory(const struct ivm_uobject *o)
{
	struct ivm_uimage_stats st;

	if (!o->image)
		return 0;
	ivm_uimage_stats(o->image, &st);
	return st.memory;
}

static size_t images_memory(const struct ivm_uobjects *t)
{
	size_t n = 0, i;

	for (i = 0; i < t->nr; i++)
		n += image_memory(t->objects[i]);
	return n;
}

/* The table's own bytes, its objects' images apart. */
static size_t table_memory(const struct ivm_uobjects *t)
{
	return sizeof(*t) + t->seen_cap * sizeof(*t->seen) +
	       t->cap_pending * sizeof(*t->pending) +
	       t->nr * sizeof(struct ivm_uobject);
}

size_t ivm_uobjects_memory(const struct ivm_uobjects *t)
{
	return table_memory(t) + images_memory(t);
}

void ivm_uobjects_adopt(struct ivm_uobjects *t, struct ivm_uobject *o,
			struct ivm_uimage *im)
{
	if (!o->image) {
		o->image = im;
		im = NULL;
	}
	ivm_uimage_destroy(im);
	if (o->image)
		o->used = ++t->clock;
}

struct ivm_uimage *ivm_uobjects_image(struct ivm_uobjects *t,
				      struct ivm_uobject *o,
				      const struct ivm_kmem_reader *file)
{
	const struct ivm_uelf *elf;
	struct ivm_uimage *im;
	struct ivm_error *err;

	if (!o->image) {
		err = ivm_uimage_create(file, &im);
		if (err) {
			ivm_error_destroy(err);
			return NULL;
		}
		/* The file read may not be the one numbered: say none. */
		elf = ivm_uimage_elf(im);
		if (elf->build_id_len != o->build_id_len ||
		    memcmp(elf->build_id, o->build_id, o->build_id_len)) {
			ivm_uimage_destroy(im);
			return NULL;
		}
		ivm_uobjects_adopt(t, o, im);
		return o->image;
	}
	ivm_uobjects_adopt(t, o, NULL);
	return o->image;
}

/* Add the CFI row counters of im to ret. */
static void add_counts(struct ivm_uobjects_stats *ret,
		       const struct ivm_uimage *im)
{
	struct ivm_uimage_stats st;

	ivm_uimage_stats(im, &st);
	ret->row_lookups += st.lookups;
	ret->row_hits += st.hits;
	ret->row_faults += st.faults;
	ret->row_bad += st.bad;
	ret->row_page_cache += st.page_cache;
	ret->row_other_mapping += st.other_mapping;
}

/* Least recently used first. */
static int by_use(const void *a, const void *b)
{
	const struct ivm_uobject *x = *(struct ivm_uobject *const *)a;
	const struct ivm_uobject *y = *(struct ivm_uobject *const *)b;

	return x->used < y->used ? -1 : x->used > y->used;
}

size_t ivm_uobjects_bound(struct ivm_uobjects *t, size_t max)
{
	struct ivm_uobject **lru;
	size_t held = images_memory(t), n = 0, dropped = 0, i;

	if (held <= max)
		return 0;
	lru = malloc(t->nr * sizeof(*lru));
	if (!lru)
		return 0;
	for (i = 0; i < t->nr; i++)
		if (t->objects[i]->image)
			lru[n++] = t->objects[i];
	qsort(lru, n, sizeof(*lru), by_use);
	for (i = 0; i + 1 < n && held > max; i++) {
		held -= image_memory(lru[i]);
		add_counts(&t->gone, lru[i]->image);
		ivm_uimage_destroy(lru[i]->image);
		lru[i]->image = NULL;
		dropped++;
	}
	free(lru);
	t->dropped += dropped;
	return dropped;
}

void ivm_uobjects_stats(const struct ivm_uobjects *t,
			struct ivm_uobjects_stats *ret)
{
	size_t i;

	*ret = t->gone;
	ret->objects = t->nr;
	ret->syms = t->nr_syms;
	ret->image_memory = images_memory(t);
	ret->memory = table_memory(t) + ret->image_memory;
	ret->images_dropped = t->dropped;
	for (i = 0; i < t->nr; i++) {
		if (!t->objects[i]->image)
			continue;
		ret->with_image++;
		add_counts(ret, t->objects[i]->image);
	}
}

/* ---- parsing ------------------------------------------------------------- */

static bool parse_hex_id(const char **p, uint8_t *id, size_t *len)
{
	const char *s = *p;
	size_t n = 0;

	while (ivm_hex_digit(s[0]) >= 0 && ivm_hex_digit(s[1]) >= 0 &&
	       n < IVM_UELF_MAX_BUILD_ID) {
		id[n++] = (uint8_t)(ivm_hex_digit(s[0]) << 4 |
				    ivm_hex_digit(s[1]));
		s += 2;
	}
	if (!n || (*s != ' ' && *s))
		return false;
	*len = n;
	*p = s;
	return true;
}

struct ivm_error *ivm_uobject_parse(const char *value, uint32_t *id,
				    uint8_t *build_id, size_t *build_id_len,
				    bool *dyn, const char **path)
{
	const char *p = value;
	char *end;
	unsigned long v = strtoul(p, &end, 10);

	if (end == p || *end != ' ' || !v || v > IVM_UOBJECTS_MAX)
		goto bad;
	*id = (uint32_t)v;
	p = end + 1;
	if (!parse_hex_id(&p, build_id, build_id_len) || *p != ' ')
		goto bad;
	p++;
	if (!strncmp(p, "dyn ", 4))
		*dyn = true;
	else if (!strncmp(p, "exec ", 5))
		*dyn = false;
	else
		goto bad;
	p += *dyn ? 4 : 5;
	*path = strcmp(p, "-") && *p ? p : NULL;
	return NULL;
bad:
	return ivm_error_create(IVM_ERROR_INVALID, "bad uobject '%.80s'",
				value);
}

struct ivm_error *ivm_usym_parse(const char *value, uint32_t *id,
				 uint64_t *vaddr, uint64_t *size,
				 const char **name)
{
	const char *p = value;
	char *end;
	unsigned long v = strtoul(p, &end, 10);

	if (end == p || *end != ' ' || !v || v > IVM_UOBJECTS_MAX)
		goto bad;
	*id = (uint32_t)v;
	p = end + 1;
	*vaddr = strtoull(p, &end, 16);
	if (end == p || *end != ' ')
		goto bad;
	p = end + 1;
	*size = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || !end[1] || !*size ||
	    *vaddr + *size < *vaddr)
		goto bad;
	*name = end + 1;
	return NULL;
bad:
	return ivm_error_create(IVM_ERROR_INVALID, "bad usym '%.80s'", value);
}
