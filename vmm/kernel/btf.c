// SPDX-License-Identifier: MIT
/*
 * BTF member lookups over libbpf.
 *
 * libbpf validates a blob's header, sections and type record sizes, but (in
 * the 1.1 we build against) not that a type id named inside a record points
 * at an existing type, nor that typedef chains or anonymous nesting end.  So
 * this file never follows an id without btf__type_by_id() (bounds-checked)
 * and bounds every walk: MAX_DEPTH for chains and nesting, a visit budget
 * for member searches (a hostile blob could nest wide anonymous structs so
 * that a naive search is exponential).
 */
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <elfutils/libdw.h>

#include "kernel/btf.h"

/* Deeper than any real kernel type nests (task_struct is < 10). */
#define MAX_DEPTH 32
/* Member records looked at per search; task_struct has a few hundred. */
#define MAX_VISITS (1u << 20)
/* Longest path component we accept. */
#define MAX_NAME 128

struct ivm_btf {
	struct btf *btf;
};

static struct ivm_error *btf_wrap_libbpf(struct btf *b, const char *what,
					 struct ivm_btf **ret)
{
	struct ivm_btf *btf;
	int err = errno;

	if (!b)
		return ivm_error_create(IVM_ERROR_ELF, "%s: invalid or no BTF (%s)",
					what, strerror(err ? err : EINVAL));
	btf = calloc(1, sizeof(*btf));
	if (!btf) {
		btf__free(b);
		return &ivm_enomem;
	}
	btf->btf = b;
	*ret = btf;
	return NULL;
}

struct ivm_error *ivm_btf_load_file(const char *path, struct ivm_btf **ret)
{
	struct btf *b;

	struct ivm_error *err, *dwarf_err;

	/* btf__parse tries ELF first, then raw BTF. */
	errno = 0;
	b = btf__parse(path, NULL);
	if (libbpf_get_error(b)) {
		errno = (int)-libbpf_get_error(b);
		b = NULL;
	}
	err = btf_wrap_libbpf(b, path, ret);
	if (!err)
		return NULL;
	/* A vmlinux built without BTF: its DWARF will do. */
	dwarf_err = ivm_btf_load_dwarf(path, ret);
	if (!dwarf_err) {
		ivm_error_destroy(err);
		return NULL;
	}
	{
		struct ivm_error *both;

		both = ivm_error_create(IVM_ERROR_ELF, "%s; DWARF fallback: %s",
					ivm_error_string(err),
					ivm_error_string(dwarf_err));
		ivm_error_destroy(err);
		ivm_error_destroy(dwarf_err);
		return both;
	}
}

/*
 * Our own check of the header before libbpf sees the blob.  libbpf 1.1
 * accepts a hdr_len shorter than the header or not a multiple of 4, which
 * puts every type record at a misaligned address (found by fuzz_btf).  A
 * guest kernel's BTF is always little-endian, 4-byte aligned, version 1.
 */
static struct ivm_error *btf_check_header(const void *data, size_t size)
{
	struct btf_header hdr;
	uint64_t end_types, end_strs;

	if (size < sizeof(hdr))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"BTF blob of %zu bytes is shorter than its header",
					size);
	memcpy(&hdr, data, sizeof(hdr));
	if (hdr.magic != BTF_MAGIC || hdr.version != BTF_VERSION)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"BTF blob has bad magic 0x%x or version %u",
					hdr.magic, hdr.version);
	if (hdr.hdr_len < sizeof(hdr) || hdr.hdr_len % 4 ||
	    hdr.type_off % 4 || hdr.type_len % 4)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"BTF header misaligned (hdr_len %u, type_off %u, type_len %u)",
					hdr.hdr_len, hdr.type_off, hdr.type_len);
	/* 64-bit sums of 32-bit fields cannot overflow. */
	end_types = (uint64_t)hdr.hdr_len + hdr.type_off + hdr.type_len;
	end_strs = (uint64_t)hdr.hdr_len + hdr.str_off + hdr.str_len;
	if (end_types > size || end_strs > size)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"BTF sections end past the %zu byte blob",
					size);
	return NULL;
}

struct ivm_error *ivm_btf_load_blob(const void *data, size_t size,
				    struct ivm_btf **ret)
{
	struct ivm_error *err;
	struct btf *b;

	if (!data || size == 0)
		return ivm_error_create(IVM_ERROR_INVALID, "empty BTF blob");
	if (size > IVM_BTF_MAX_SIZE)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"BTF blob of %zu bytes is larger than the %u byte cap",
					size, IVM_BTF_MAX_SIZE);
	err = btf_check_header(data, size);
	if (err)
		return err;
	errno = 0;
	/* btf__new copies data; it never keeps a pointer to it. */
	b = btf__new(data, (uint32_t)size);
	if (libbpf_get_error(b)) {
		errno = (int)-libbpf_get_error(b);
		b = NULL;
	}
	return btf_wrap_libbpf(b, "BTF blob", ret);
}

void ivm_btf_destroy(struct ivm_btf *btf)
{
	if (!btf)
		return;
	btf__free(btf->btf);
	free(btf);
}

static const struct btf_type *type_get(const struct btf *b, uint32_t id)
{
	/* Bounds-checked lookup: NULL for an id past the last type. */
	return btf__type_by_id(b, id);
}

static bool is_modifier(const struct btf_type *t)
{
	switch (btf_kind(t)) {
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
		return true;
	default:
		return false;
	}
}

/* Follow typedefs and qualifiers to the underlying type, bounded. */
static const struct btf_type *type_skip_mods(const struct btf *b, uint32_t id,
					     uint32_t *ret_id)
{
	const struct btf_type *t;
	int depth;

	for (depth = 0; depth < MAX_DEPTH; depth++) {
		t = type_get(b, id);
		if (!t)
			return NULL;
		if (!is_modifier(t)) {
			if (ret_id)
				*ret_id = id;
			return t;
		}
		id = t->type;
	}
	return NULL;
}

/*
 * sizeof a type.  Our own instead of btf__resolve_size so that every id is
 * bounds-checked and array sizes are overflow-checked in 64 bits.
 */
static struct ivm_error *type_size(const struct btf *b, uint32_t id,
				   uint64_t *ret)
{
	uint64_t factor = 1;
	const struct btf_type *t;
	int depth;

	for (depth = 0; depth < MAX_DEPTH; depth++) {
		t = type_get(b, id);
		if (!t)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"BTF type id %u does not exist", id);
		switch (btf_kind(t)) {
		case BTF_KIND_INT:
		case BTF_KIND_ENUM:
		case BTF_KIND_ENUM64:
		case BTF_KIND_STRUCT:
		case BTF_KIND_UNION:
		case BTF_KIND_DATASEC:
		case BTF_KIND_FLOAT:
			if (t->size && factor > UINT64_MAX / t->size)
				goto overflow;
			*ret = factor * t->size;
			return NULL;
		case BTF_KIND_PTR: {
			size_t psz = btf__pointer_size(b);

			if (!psz)
				psz = 8;
			if (factor > UINT64_MAX / psz)
				goto overflow;
			*ret = factor * psz;
			return NULL;
		}
		case BTF_KIND_ARRAY: {
			const struct btf_array *a = btf_array(t);

			if (a->nelems && factor > UINT64_MAX / a->nelems)
				goto overflow;
			factor *= a->nelems;
			id = a->type;
			break;
		}
		case BTF_KIND_TYPEDEF:
		case BTF_KIND_VOLATILE:
		case BTF_KIND_CONST:
		case BTF_KIND_RESTRICT:
		case BTF_KIND_TYPE_TAG:
		case BTF_KIND_VAR:
			id = t->type;
			break;
		default:
			return ivm_error_create(IVM_ERROR_INVALID,
						"BTF type id %u (kind %u) has no size",
						id, btf_kind(t));
		}
	}
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"BTF type id %u: type chain too deep", id);
overflow:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"BTF type id %u: size overflows", id);
}

/*
 * First struct or union named name, or the one a typedef of that name
 * stands for (irq_cpustat_t is a typedef of an anonymous struct).
 */
static struct ivm_error *find_composite(const struct btf *b, const char *name,
					uint32_t *ret_id,
					const struct btf_type **ret)
{
	int32_t id = btf__find_by_name_kind(b, name, BTF_KIND_STRUCT);
	const struct btf_type *t;
	uint32_t real;

	if (id <= 0)
		id = btf__find_by_name_kind(b, name, BTF_KIND_UNION);
	if (id <= 0) {
		id = btf__find_by_name_kind(b, name, BTF_KIND_TYPEDEF);
		t = id > 0 ? type_skip_mods(b, (uint32_t)id, &real) : NULL;
		if (t && (btf_is_struct(t) || btf_is_union(t)))
			id = (int32_t)real;
		else
			id = 0;
	}
	if (id <= 0)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"struct %s not found in BTF", name);
	t = type_get(b, (uint32_t)id);
	if (!t)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"BTF type id %d does not exist", id);
	*ret_id = (uint32_t)id;
	*ret = t;
	return NULL;
}

struct member_search {
	const struct btf *b;
	const char *name;
	size_t name_len;
	unsigned int visits;
	/* found: */
	uint64_t bit_offset;
	uint32_t bitfield_size;
	uint32_t type_id;
};

/*
 * Search t's members for s->name, descending into anonymous struct/union
 * members.  Returns 1 when found, 0 when not, -1 when the walk was cut
 * (budget or depth exhausted: a hostile or broken blob).
 */
static int member_search(struct member_search *s, const struct btf_type *t,
			 uint64_t base_bits, int depth)
{
	const struct btf_member *m = btf_members(t);
	uint16_t i, vlen = btf_vlen(t);

	if (depth >= MAX_DEPTH)
		return -1;
	for (i = 0; i < vlen; i++, m++) {
		const char *mname;
		uint64_t bits;

		if (++s->visits > MAX_VISITS)
			return -1;
		mname = btf__name_by_offset(s->b, m->name_off);
		if (!mname)
			return -1;
		bits = base_bits + btf_member_bit_offset(t, i);
		if (mname[0]) {
			if (strlen(mname) == s->name_len &&
			    !memcmp(mname, s->name, s->name_len)) {
				s->bit_offset = bits;
				s->bitfield_size = btf_member_bitfield_size(t, i);
				s->type_id = m->type;
				return 1;
			}
			continue;
		}
		/* Anonymous member: look inside when it is a struct/union. */
		{
			const struct btf_type *inner;
			int found;

			inner = type_skip_mods(s->b, m->type, NULL);
			if (!inner || !btf_is_composite(inner))
				continue;
			found = member_search(s, inner, bits, depth + 1);
			if (found)
				return found;
		}
	}
	return 0;
}

struct ivm_error *ivm_btf_member_find(const struct ivm_btf *btf,
				      const char *type_name, const char *path,
				      struct ivm_btf_member *ret)
{
	const struct btf *b = btf->btf;
	const struct btf_type *t;
	struct ivm_error *err;
	uint64_t offset_bits = 0, size = 0;
	uint32_t id, type_id = 0;
	const char *p = path;
	int components = 0;

	err = find_composite(b, type_name, &id, &t);
	if (err)
		return err;
	if (!*path)
		return ivm_error_create(IVM_ERROR_INVALID,
					"empty member path in struct %s",
					type_name);
	while (*p) {
		struct member_search s = { .b = b };
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		int found;

		if (len == 0 || len > MAX_NAME || ++components > MAX_DEPTH)
			return ivm_error_create(IVM_ERROR_INVALID,
						"bad member path '%s'", path);
		if (!t || !btf_is_composite(t))
			return ivm_error_create(IVM_ERROR_INVALID,
						"%s.%.*s: '%.*s' is not in a struct or union",
						type_name, (int)(p - path - 1),
						path, (int)len, p);
		s.name = p;
		s.name_len = len;
		found = member_search(&s, t, 0, 0);
		if (found < 0)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"%s.%s: BTF nesting too deep or too wide",
						type_name, path);
		if (!found)
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"%s.%s not found: no member '%.*s'",
						type_name, path, (int)len, p);
		if (s.bitfield_size || s.bit_offset % 8)
			return ivm_error_create(IVM_ERROR_INVALID,
						"%s.%s is a bitfield: no byte offset",
						type_name, path);
		if (s.bit_offset > UINT64_MAX - offset_bits)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"%s.%s: offset overflows",
						type_name, path);
		offset_bits += s.bit_offset;
		type_id = s.type_id;
		p += len;
		if (*p == '.') {
			p++;
			if (!*p)
				return ivm_error_create(IVM_ERROR_INVALID,
							"bad member path '%s'",
							path);
			t = type_skip_mods(b, type_id, NULL);
		}
	}
	err = type_size(b, type_id, &size);
	if (err)
		return ivm_error_wrap(err, "%s.%s", type_name, path);
	ret->offset = offset_bits / 8;
	ret->size = size;
	ret->type_id = type_id;
	return NULL;
}

struct ivm_error *ivm_btf_type_size(const struct ivm_btf *btf,
				    const char *type_name, uint64_t *ret)
{
	const struct btf_type *t;
	struct ivm_error *err;
	uint32_t id;

	err = find_composite(btf->btf, type_name, &id, &t);
	if (err)
		return err;
	*ret = t->size;
	return NULL;
}

struct ivm_error *ivm_btf_enum_value(const struct ivm_btf *btf,
				     const char *enum_name, const char *name,
				     int64_t *ret)
{
	const struct btf *b = btf->btf;
	uint32_t id, n = btf__type_cnt(b);

	for (id = 1; id < n; id++) {
		const struct btf_type *t = type_get(b, id);
		uint16_t i, vlen;

		if (!t || !btf_is_any_enum(t))
			continue;
		if (enum_name) {
			const char *tname = btf__name_by_offset(b, t->name_off);

			if (!tname || strcmp(tname, enum_name))
				continue;
		}
		vlen = btf_vlen(t);
		for (i = 0; i < vlen; i++) {
			const char *ename;
			int64_t value;

			if (btf_is_enum(t)) {
				const struct btf_enum *e = btf_enum(t) + i;

				ename = btf__name_by_offset(b, e->name_off);
				/* kflag set: a signed enum. */
				value = btf_kflag(t) ? (int64_t)e->val
						     : (int64_t)(uint32_t)e->val;
			} else {
				const struct btf_enum64 *e = btf_enum64(t) + i;

				ename = btf__name_by_offset(b, e->name_off);
				value = (int64_t)btf_enum64_value(e);
			}
			if (ename && !strcmp(ename, name)) {
				*ret = value;
				return NULL;
			}
		}
	}
	if (enum_name)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"enumerator %s of enum %s not found in BTF",
					name, enum_name);
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"enumerator %s not found in BTF", name);
}

/* ---- DWARF fallback ----------------------------------------------------- */

/*
 * A vmlinux without .BTF (CONFIG_DEBUG_INFO_BTF=n) still has DWARF.  Rather
 * than a second lookup engine, the structs idlevm needs are converted from
 * DWARF into a BTF built with libbpf, so every lookup above works on them
 * unchanged.  Only what member lookups need is converted: embedded structs
 * and unions recursively, pointers as void *, arrays and everything else
 * as char arrays of the right size.
 */

static const char *const dwarf_wanted[] = {
	"task_struct", "mm_struct", "signal_struct", "list_head", "pt_regs",
	"inactive_task_frame", "pcpu_hot", "rq",
};
#define NR_WANTED (sizeof(dwarf_wanted) / sizeof(dwarf_wanted[0]))

struct dwarf_conv {
	struct btf *b;
	int t_char, t_void_ptr, t_index;
	/* DIE offset -> BTF id of converted structs/unions. */
	struct {
		Dwarf_Off die;
		int id;
	} *done;
	size_t nr_done, cap_done;
	unsigned int nr_types;
};

/* More than any kernel struct embeds; bounds a corrupt DWARF. */
#define DWARF_MAX_TYPES 20000

static int dwarf_conv_type(struct dwarf_conv *c, Dwarf_Die *die, int depth);

static int dwarf_remember(struct dwarf_conv *c, Dwarf_Off off, int id)
{
	if (c->nr_done == c->cap_done) {
		size_t ncap = c->cap_done ? c->cap_done * 2 : 64;
		void *n = reallocarray(c->done, ncap, sizeof(*c->done));

		if (!n)
			return -ENOMEM;
		c->done = n;
		c->cap_done = ncap;
	}
	c->done[c->nr_done].die = off;
	c->done[c->nr_done].id = id;
	c->nr_done++;
	return id;
}

static int dwarf_char_array(struct dwarf_conv *c, Dwarf_Word size)
{
	if (size > UINT32_MAX)
		return -E2BIG;
	return btf__add_array(c->b, c->t_index, c->t_char, (uint32_t)size);
}

static int dwarf_member_offset(Dwarf_Die *m, Dwarf_Die *type_die,
			       uint64_t *bit_off, uint32_t *bit_size)
{
	Dwarf_Attribute attr;
	Dwarf_Word loc = 0, v;
	int bs;

	*bit_size = 0;
	*bit_off = 0;
	if (dwarf_attr(m, DW_AT_data_member_location, &attr) &&
	    dwarf_formudata(&attr, &loc))
		return -EINVAL;	/* a location expression: not in kernels */
	*bit_off = loc * 8;
	bs = dwarf_bitsize(m);
	if (bs <= 0)
		return 0;
	*bit_size = (uint32_t)bs;
	if (dwarf_attr(m, DW_AT_data_bit_offset, &attr)) {
		if (dwarf_formudata(&attr, &v))
			return -EINVAL;
		*bit_off = v;
	} else if (dwarf_attr(m, DW_AT_bit_offset, &attr)) {
		/* DWARF 2/3: counted from the top of the storage unit. */
		int byte_size = dwarf_bytesize(m);

		if (byte_size <= 0 && type_die)
			byte_size = dwarf_bytesize(type_die);
		if (byte_size <= 0 || dwarf_formudata(&attr, &v) ||
		    v + (uint64_t)bs > (uint64_t)byte_size * 8)
			return -EINVAL;
		*bit_off = loc * 8 + (uint64_t)byte_size * 8 - v - (uint64_t)bs;
	}
	return 0;
}

static int dwarf_conv_composite(struct dwarf_conv *c, Dwarf_Die *die,
				int depth)
{
	Dwarf_Off off = dwarf_dieoffset(die);
	Dwarf_Die child, type_mem;
	const char *name = dwarf_diename(die);
	int *ids = NULL, id, i = 0, n = 0, size;
	size_t k;

	for (k = 0; k < c->nr_done; k++)
		if (c->done[k].die == off)
			return c->done[k].id;
	size = dwarf_bytesize(die);
	if (size < 0)
		size = 0;
	/* Member types first: libbpf adds fields to the last type added. */
	if (dwarf_child(die, &child) == 0) {
		do {
			if (dwarf_tag(&child) == DW_TAG_member)
				n++;
		} while (dwarf_siblingof(&child, &child) == 0 && n < 65535);
	}
	if (n) {
		ids = calloc((size_t)n, sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		dwarf_child(die, &child);
		do {
			Dwarf_Attribute attr;
			Dwarf_Die *t;

			if (dwarf_tag(&child) != DW_TAG_member)
				continue;
			t = dwarf_formref_die(dwarf_attr_integrate(&child,
					DW_AT_type, &attr), &type_mem);
			ids[i] = t ? dwarf_conv_type(c, t, depth + 1) : 0;
			if (ids[i] < 0) {
				id = ids[i];
				free(ids);
				return id;
			}
			i++;
		} while (i < n && dwarf_siblingof(&child, &child) == 0);
	}
	if (dwarf_tag(die) == DW_TAG_union_type)
		id = btf__add_union(c->b, name, (uint32_t)size);
	else
		id = btf__add_struct(c->b, name, (uint32_t)size);
	i = 0;
	if (id > 0 && n && dwarf_child(die, &child) == 0) {
		do {
			uint64_t bit_off;
			uint32_t bit_size;
			Dwarf_Attribute attr;
			Dwarf_Die *t;
			int e;

			if (dwarf_tag(&child) != DW_TAG_member)
				continue;
			if (i >= n)
				break;
			t = dwarf_formref_die(dwarf_attr_integrate(&child,
					DW_AT_type, &attr), &type_mem);
			e = dwarf_member_offset(&child, t, &bit_off,
						&bit_size);
			if (e || bit_off > UINT32_MAX) {
				id = e ? e : -E2BIG;
				break;
			}
			e = btf__add_field(c->b, dwarf_diename(&child), ids[i],
					   (uint32_t)bit_off, bit_size);
			if (e < 0) {
				id = e;
				break;
			}
			i++;
		} while (dwarf_siblingof(&child, &child) == 0);
	}
	free(ids);
	if (id < 0)
		return id;
	return dwarf_remember(c, off, id);
}

static int dwarf_conv_type(struct dwarf_conv *c, Dwarf_Die *die, int depth)
{
	Dwarf_Attribute attr;
	Dwarf_Die target;
	Dwarf_Word size;

	if (depth > MAX_DEPTH || ++c->nr_types > DWARF_MAX_TYPES)
		return -ELOOP;
	switch (dwarf_tag(die)) {
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
		return dwarf_conv_composite(c, die, depth);
	case DW_TAG_pointer_type:
		return c->t_void_ptr;
	case DW_TAG_typedef:
	case DW_TAG_const_type:
	case DW_TAG_volatile_type:
	case DW_TAG_restrict_type:
	case DW_TAG_atomic_type:
		if (!dwarf_formref_die(dwarf_attr_integrate(die, DW_AT_type,
							    &attr), &target))
			return 0;	/* const void */
		return dwarf_conv_type(c, &target, depth + 1);
	default:
		/* Base types, enums, arrays: only their size matters. */
		if (dwarf_aggregate_size(die, &size))
			return 0;
		return dwarf_char_array(c, size);
	}
}

struct ivm_error *ivm_btf_load_dwarf(const char *path, struct ivm_btf **ret)
{
	struct dwarf_conv c = { 0 };
	bool found[NR_WANTED] = { false };
	struct ivm_error *err = NULL;
	Dwarf_Off off = 0, next;
	size_t hsize, nr_found = 0, k;
	Dwarf *dw;
	int fd, e = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "opening %s", path);
	dw = dwarf_begin(fd, DWARF_C_READ);
	if (!dw) {
		close(fd);
		return ivm_error_create(IVM_ERROR_ELF, "%s: no DWARF: %s", path,
					dwarf_errmsg(-1));
	}
	c.b = btf__new_empty();
	if (!c.b) {
		err = &ivm_enomem;
		goto out;
	}
	c.t_char = btf__add_int(c.b, "char", 1, BTF_INT_CHAR);
	c.t_index = btf__add_int(c.b, "unsigned int", 4, 0);
	c.t_void_ptr = btf__add_ptr(c.b, 0);
	/*
	 * Definitions of the wanted structs are top-level DIEs of the CUs
	 * that include their headers; the first definition found wins.
	 */
	while (nr_found < NR_WANTED && e >= 0 &&
	       dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, die;

		if (dwarf_offdie(dw, off + hsize, &cu) &&
		    dwarf_child(&cu, &die) == 0) {
			do {
				const char *name;
				int tag = dwarf_tag(&die);

				if ((tag != DW_TAG_structure_type &&
				     tag != DW_TAG_union_type) ||
				    dwarf_hasattr(&die, DW_AT_declaration))
					continue;
				name = dwarf_diename(&die);
				for (k = 0; name && k < NR_WANTED; k++) {
					if (found[k] ||
					    strcmp(name, dwarf_wanted[k]))
						continue;
					c.nr_types = 0;
					e = dwarf_conv_composite(&c, &die, 0);
					found[k] = true;
					nr_found++;
					break;
				}
			} while (e >= 0 && dwarf_siblingof(&die, &die) == 0);
		}
		off = next;
	}
	if (e < 0) {
		err = ivm_error_create(IVM_ERROR_ELF,
				       "%s: converting DWARF types: %s", path,
				       strerror(-e));
	} else if (!found[0]) {
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "%s: no struct task_struct in its DWARF",
				       path);
	}
	if (!err) {
		err = btf_wrap_libbpf(c.b, path, ret);
		c.b = NULL;
	}
out:
	btf__free(c.b);
	free(c.done);
	dwarf_end(dw);
	close(fd);
	return err;
}
