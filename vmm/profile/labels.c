// SPDX-License-Identifier: MIT
#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assoc.h"
#include "base/bytes.h"
#include "profile/labels.h"

/* ---- --label KEY=SOURCE ---------------------------------------------------- */

static const char *const reserved_keys[] = {
	"kind", "thread", "tid", "process", "pid", "comm", "title",
	"user_build_id", "user_bias",
};

static const char *const source_names[] = { "tls", "var", "key" };
static const char *const type_names[] = { "int", "u64", "str" };

struct ivm_error *ivm_label_spec_parse(const char *arg,
				       struct ivm_label_spec *ret)
{
	const char *eq = strchr(arg, '='), *src, *colon, *sym, *last;
	size_t klen, slen, i;

	memset(ret, 0, sizeof(*ret));
	if (!eq || eq == arg)
		return ivm_error_create(IVM_ERROR_INVALID,
					"--label '%s': not KEY=SOURCE", arg);
	klen = (size_t)(eq - arg);
	if (klen >= sizeof(ret->key))
		return ivm_error_create(IVM_ERROR_INVALID,
					"--label '%s': a key longer than %zu bytes",
					arg, sizeof(ret->key) - 1);
	for (i = 0; i < klen; i++) {
		char c = arg[i];

		if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
		    !(c >= '0' && c <= '9') && c != '_' && c != '-' &&
		    c != '.')
			return ivm_error_create(IVM_ERROR_INVALID,
						"--label '%s': a key of letters, digits, '_', '-' and '.'",
						arg);
	}
	memcpy(ret->key, arg, klen);
	for (i = 0; i < sizeof(reserved_keys) / sizeof(reserved_keys[0]); i++)
		if (!strcmp(ret->key, reserved_keys[i]))
			return ivm_error_create(IVM_ERROR_INVALID,
						"--label '%s': samples already have a '%s'",
						arg, ret->key);
	src = eq + 1;
	colon = strchr(src, ':');
	for (i = 0; colon && i < 3; i++)
		if ((size_t)(colon - src) == strlen(source_names[i]) &&
		    !strncmp(src, source_names[i], strlen(source_names[i])))
			break;
	if (!colon || i == 3)
		return ivm_error_create(IVM_ERROR_INVALID,
					"--label '%s': the source is tls:SYMBOL, var:SYMBOL or key:SYMBOL",
					arg);
	ret->source = (enum ivm_label_source)i;
	sym = colon + 1;
	slen = strlen(sym);
	/* A symbol has no ':'; a last ':' field is the type. */
	last = strrchr(sym, ':');
	ret->type = IVM_LABEL_INT;
	if (last) {
		for (i = 0; i < 3; i++)
			if (!strcmp(last + 1, type_names[i]))
				break;
		if (i == 3)
			return ivm_error_create(IVM_ERROR_INVALID,
						"--label '%s': the type is :int, :u64 or :str",
						arg);
		ret->type = (enum ivm_label_type)i;
		slen = (size_t)(last - sym);
	}
	if (!slen || slen >= sizeof(ret->symbol) || memchr(sym, ':', slen))
		return ivm_error_create(IVM_ERROR_INVALID,
					"--label '%s': no symbol, or a bad one",
					arg);
	memcpy(ret->symbol, sym, slen);
	return NULL;
}

char *ivm_label_spec_format(const struct ivm_label_spec *s, char *buf,
			    size_t size)
{
	snprintf(buf, size, "%s=%s:%s:%s", s->key, source_names[s->source],
		 s->symbol, type_names[s->type]);
	return buf;
}

/* ---- the arithmetic --------------------------------------------------------- */

struct ivm_error *ivm_tls_static_address(uint64_t tp, uint64_t tls_vaddr,
					 uint64_t tls_memsz, uint64_t tls_align,
					 uint64_t sym_offset, uint64_t *ret)
{
	uint64_t align = tls_align ? tls_align : 1, firstbyte, off;

	if (align & (align - 1))
		return ivm_error_create(IVM_ERROR_INVALID,
					"TLS alignment %#llx is no power of two",
					(unsigned long long)align);
	/*
	 * glibc's loader, computed modulo 2^64 as it does:
	 * off = roundup(memsz - firstbyte, align) + firstbyte.
	 */
	firstbyte = (0 - tls_vaddr) & (align - 1);
	off = ((tls_memsz - firstbyte + align - 1) & ~(align - 1)) + firstbyte;
	if (off < tls_memsz || off > tp || sym_offset >= tls_memsz)
		return ivm_error_create(IVM_ERROR_INVALID,
					"TLS block of %#llx bytes: offset %#llx is not in it below %#llx",
					(unsigned long long)tls_memsz,
					(unsigned long long)sym_offset,
					(unsigned long long)tp);
	*ret = tp - off + sym_offset;
	return NULL;
}

const struct ivm_pthread_layout ivm_pthread_layout_glibc = {
	.self = 16,
	.specific = 1296,
	.level1 = 32,
	.specific_1stblock = 784,
	.sizeof_pthread = 2368,
	.level2 = 32,
	.key_data_size = 16,
	.key_data_seq = 0,
	.key_data_data = 8,
	.keys_max = 1024,
	.key_struct_size = 16,
	.key_struct_seq = 0,
};

/* A db_desc_t: bits of one element, count, offset. */
static void desc(const uint8_t d[12], uint32_t *bits, uint32_t *count,
		 uint32_t *offset)
{
	*bits = ivm_le32(d);
	*count = ivm_le32(d + 4);
	*offset = ivm_le32(d + 8);
}

struct ivm_error *ivm_pthread_layout_from_db(const struct ivm_pthread_db *db,
					     uint64_t keys,
					     struct ivm_pthread_layout *ret)
{
	struct ivm_pthread_layout l = ivm_pthread_layout_glibc;
	uint32_t bits, count, off, bits2, count2, off2;

	/* specific[]: pointers, the whole array described at once or not. */
	desc(db->specific, &bits, &count, &off);
	if (!bits || bits % 64 || !count || (uint64_t)bits * count / 64 > 4096)
		goto bad;
	l.specific = off;
	l.level1 = (uint32_t)((uint64_t)bits * count / 64);
	l.specific_1stblock = UINT32_MAX;
	desc(db->level2_data, &bits, &count, &off);
	if (bits < 128 || bits % 8 || !count || count > 4096 || off)
		goto bad;
	l.key_data_size = bits / 8;
	l.level2 = count;
	desc(db->key_data_seq, &bits, &count, &off);
	desc(db->key_data_data, &bits2, &count2, &off2);
	if (bits != 64 || bits2 != 64 || off > l.key_data_size - 8 ||
	    off2 > l.key_data_size - 8)
		goto bad;
	l.key_data_seq = off;
	l.key_data_data = off2;
	desc(db->keys, &bits, &count, &off);
	if (bits < 64 || bits % 8 || !count || count > (1u << 20) || off)
		goto bad;
	l.key_struct_size = bits / 8;
	l.keys_max = count;
	desc(db->key_struct_seq, &bits, &count, &off);
	if (bits != 64 || off > l.key_struct_size - 8)
		goto bad;
	l.key_struct_seq = off;
	l.sizeof_pthread = ivm_le32(db->sizeof_pthread);
	if (l.sizeof_pthread &&
	    (uint64_t)l.specific + 8ull * l.level1 > l.sizeof_pthread)
		goto bad;
	l.keys = keys;
	*ret = l;
	return NULL;
bad:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"libthread_db descriptors this reader cannot follow");
}

static struct ivm_error *read_u64(const struct ivm_kmem_reader *m, uint64_t va,
				  uint64_t *ret)
{
	uint8_t b[8];
	struct ivm_error *err = m->read(m->ctx, va, b, 8);

	if (!err)
		*ret = ivm_le64(b);
	return err;
}

struct ivm_error *ivm_pthread_getspecific(const struct ivm_kmem_reader *umem,
					  const struct ivm_pthread_layout *l,
					  uint64_t tp, uint32_t key,
					  uint64_t *ret)
{
	uint64_t tcb, self, first, level2, seq, data, key_seq;
	uint32_t idx1, idx2;
	struct ivm_error *err;

	*ret = 0;
	if (!l->keys || !l->level2 || key >= l->keys_max)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"key %u: out of range, or no __pthread_keys to check it",
					key);
	idx1 = key / l->level2;
	idx2 = key % l->level2;
	if (idx1 >= l->level1)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"key %u: beyond specific[]", key);
	err = read_u64(umem, tp, &tcb);
	if (!err)
		err = read_u64(umem, tp + l->self, &self);
	if (!err)
		err = read_u64(umem, tp + l->specific, &first);
	if (err)
		return err;
	/*
	 * Is this glibc's struct pthread?  Its header points at itself, and
	 * specific[0] at its own first block, set when the thread was made.
	 */
	if (self != tp || tcb != tp || !first ||
	    (l->specific_1stblock != UINT32_MAX &&
	     first != tp + l->specific_1stblock) ||
	    (l->sizeof_pthread && (first < tp ||
				   first - tp >= l->sizeof_pthread)))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"no struct pthread of this layout at %#llx",
					(unsigned long long)tp);
	level2 = first;
	if (idx1) {
		err = read_u64(umem, tp + l->specific + 8ull * idx1, &level2);
		if (err)
			return err;
		/* A block never allocated: no key of it was set. */
		if (!level2)
			return NULL;
	}
	level2 += (uint64_t)idx2 * l->key_data_size;
	err = read_u64(umem, level2 + l->key_data_data, &data);
	if (err || !data)
		return err;
	err = read_u64(umem, level2 + l->key_data_seq, &seq);
	if (!err)
		err = read_u64(umem, l->keys + (uint64_t)key * l->key_struct_size +
					     l->key_struct_seq, &key_seq);
	if (err)
		return err;
	/* Set under an older key of the same number: pthread_getspecific's NULL. */
	*ret = seq == key_seq ? data : 0;
	return NULL;
}

struct ivm_error *ivm_label_format(const struct ivm_kmem_reader *umem,
				   enum ivm_label_type type, uint64_t value,
				   char *buf, size_t size)
{
	char s[IVM_LABEL_STR_MAX + 1];
	struct ivm_error *err;
	size_t got, i;

	switch (type) {
	case IVM_LABEL_INT:
		snprintf(buf, size, "%" PRId32, (int32_t)(uint32_t)value);
		return NULL;
	case IVM_LABEL_U64:
		snprintf(buf, size, "%" PRIu64, value);
		return NULL;
	default:
		break;
	}
	if (!value) {
		snprintf(buf, size, "(null)");
		return NULL;
	}
	err = ivm_kmem_read_upto(umem, value, s, IVM_LABEL_STR_MAX, &got);
	if (err)
		return err;
	s[got] = '\0';
	/* Cut at the NUL; a string longer than the cap is shown cut. */
	for (i = 0; s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			s[i] = '?';
	/* Read page by page, a string may end before a page it never needed. */
	if (got < IVM_LABEL_STR_MAX && i == got)
		return ivm_error_fault(value + got, "string runs into memory the guest lacks");
	snprintf(buf, size, "%s", s);
	return NULL;
}

/* ---- reading labels at capture ------------------------------------------------ */

/* What a label resolved to in one address space. */
enum resolution {
	R_UNREADABLE,		/* "?": see why */
	R_ABSENT,		/* the program has no such symbol: no label */
	R_OK,
};

struct resolved {
	enum resolution state;
	const char *why;	/* static */
	uint64_t addr;		/* var, key: the variable's run-time address */
	uint64_t tls_vaddr, tls_memsz, tls_align, tls_offset;	/* tls */
};

#define PROC_SLOTS 64

struct proc_slot {
	uint64_t mm, cr3;	/* mm 0: empty */
	bool done;		/* looked up, for good */
	uint64_t retry_ns;	/* not done: when to try again */
	unsigned int tries;	/* lookups that could not finish */
	struct resolved r[IVM_LABELS_MAX];
	bool has_pthread;
	struct ivm_pthread_layout pthread;
};

struct ivm_labels {
	struct ivm_label_spec specs[IVM_LABELS_MAX];
	size_t n;
	struct ivm_labels_guest g;
	/* By mm_struct, set-associative (base/assoc.h). */
	struct proc_slot slots[PROC_SLOTS];
	uint64_t slot_used[PROC_SLOTS];
	struct ivm_assoc slot_assoc;
	struct ivm_label_stats stats[IVM_LABELS_MAX];
	const char *last_why[IVM_LABELS_MAX];
	char values[IVM_LABELS_MAX][IVM_LABEL_STR_MAX + 32];
	char stat_names[IVM_LABELS_MAX][3][IVM_LABEL_KEY_MAX + 24];
};

struct ivm_error *ivm_labels_create(const struct ivm_label_spec *specs,
				    size_t n, const struct ivm_labels_guest *g,
				    struct ivm_labels **ret)
{
	struct ivm_labels *l;

	if (n > IVM_LABELS_MAX)
		return ivm_error_create(IVM_ERROR_INVALID,
					"at most %d labels", IVM_LABELS_MAX);
	l = calloc(1, sizeof(*l));
	if (!l)
		return &ivm_enomem;
	memcpy(l->specs, specs, n * sizeof(*specs));
	l->n = n;
	l->g = *g;
	*ret = l;
	return NULL;
}

void ivm_labels_destroy(struct ivm_labels *l)
{
	free(l);
}

size_t ivm_labels_count(const struct ivm_labels *l)
{
	return l->n;
}

const struct ivm_label_stats *ivm_labels_stats(const struct ivm_labels *l,
					       size_t i)
{
	return i < l->n ? &l->stats[i] : NULL;
}

const char *ivm_labels_last_why(const struct ivm_labels *l, size_t i)
{
	return i < l->n ? l->last_why[i] : NULL;
}

/* glibc's names: what key: needs of the libc (or a static executable). */
static const char *const glibc_names[] = {
	"__pthread_keys",
	"_thread_db_pthread_specific",
	"_thread_db_pthread_key_data_level2_data",
	"_thread_db_pthread_key_data_seq",
	"_thread_db_pthread_key_data_data",
	"_thread_db___pthread_keys",
	"_thread_db_pthread_key_struct_seq",
	"_thread_db_sizeof_pthread",
};
#define NR_GLIBC (sizeof(glibc_names) / sizeof(glibc_names[0]))

/* An ELF object of the process: how to read it, and where it is loaded. */
struct object {
	struct ivm_kmem_reader reader;
	struct ivm_uelf h;
	uint64_t bias;
	struct ivm_uelf_host_file host;
	struct ivm_gfile_file gf;
	struct ivm_guest_file file;
	struct ivm_gfile_space own;
};

/* glibc's layout from object o's symbols (sym, found: glibc_names'). */
static struct ivm_error *layout_of(const struct object *o,
				   const struct ivm_uelf_symbol *sym,
				   const bool *found,
				   struct ivm_pthread_layout *ret)
{
	struct ivm_pthread_db db = { 0 };
	uint8_t *dst[NR_GLIBC] = {
		NULL, db.specific, db.level2_data, db.key_data_seq,
		db.key_data_data, db.keys, db.key_struct_seq,
		db.sizeof_pthread,
	};
	struct ivm_error *err;
	size_t i;

	if (!found[0] || sym[0].type == STT_TLS || sym[0].matches > 1)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no __pthread_keys");
	for (i = 1; i < NR_GLIBC; i++)
		if (!found[i] && i != NR_GLIBC - 1)
			break;
	if (i < NR_GLIBC) {
		/* No descriptors (a static executable): 2.36's, checked. */
		*ret = ivm_pthread_layout_glibc;
		ret->keys = o->bias + sym[0].value;
		return NULL;
	}
	for (i = 1; i < NR_GLIBC; i++) {
		size_t len = i == NR_GLIBC - 1 ? 4 : 12;

		if (!found[i])
			continue;
		if (sym[i].size && sym[i].size < len)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"%s: %llu bytes", glibc_names[i],
						(unsigned long long)sym[i].size);
		err = ivm_uelf_read(&o->reader, &o->h, sym[i].value,
				    dst[i], len);
		if (err)
			return err;
	}
	return ivm_pthread_layout_from_db(&db, o->bias + sym[0].value, ret);
}

/* Is path the C library (libc.so.6, or another soname of it)? */
static bool is_libc(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	return base && !strncmp(base + 1, "libc.so", 7);
}

/*
 * The process's libc as an object: the file mapping of a libc.so from
 * offset 0, its headers through the page cache or the process's own
 * mapping, its bias from that mapping.
 */
static struct ivm_error *find_libc(struct ivm_labels *l,
				   const struct ivm_label_target *t,
				   const struct ivm_mm_maps *maps,
				   struct object *o)
{
	const struct ivm_vma *v;
	struct ivm_error *err;
	size_t i;

	if (!l->g.gfile)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"the guest's page cache is out of reach");
	for (i = 0; (v = ivm_mm_maps_get(maps, i)); i++)
		if (ivm_vma_is_file(v) && !v->pgoff && is_libc(v->path))
			break;
	if (!v)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no libc.so mapped");
	o->file = v->file;
	o->own = (struct ivm_gfile_space){ maps, t->umem };
	o->gf = (struct ivm_gfile_file){ .g = l->g.gfile, .file = &o->file,
					 .own = &o->own };
	ivm_gfile_file_reader(&o->gf, &o->reader);
	err = ivm_uelf_parse(&o->reader, &o->h);
	if (err)
		return err;
	if (!ivm_uelf_bias(&o->h, v->start, v->pgoff, &o->bias))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"libc's mapping at %#llx is none of its segments",
					(unsigned long long)v->start);
	return NULL;
}

/*
 * The load bias of the executable of t (headers h) from the VMA mapping
 * its file from offset 0; *maps gets the VMAs read (the caller's to free).
 */
static struct ivm_error *exe_bias_from_maps(struct ivm_labels *l,
					    const struct ivm_label_target *t,
					    const struct ivm_uelf *h,
					    struct ivm_mm_maps **maps,
					    uint64_t *ret)
{
	struct ivm_guest_file exe;
	const struct ivm_vma *v;
	struct ivm_error *err;
	size_t i;

	if (!l->g.mm_src)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no guest kernel to read mappings from");
	err = ivm_mm_exe_file(l->g.mm_src, t->mm, &exe);
	if (!err && !*maps)
		err = ivm_mm_maps_read(l->g.mm_src, t->mm, 0, maps);
	if (err)
		return err;
	for (i = 0; (v = ivm_mm_maps_get(*maps, i)); i++)
		if (v->file.inode == exe.inode && !v->pgoff &&
		    ivm_uelf_bias(h, v->start, 0, ret))
			return NULL;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no mapping of the executable's first page");
}

/*
 * When to look again after a lookup that could not finish: pages the
 * guest lacks may come, but a table that stays out of reach is not
 * scanned every second: IVM_LABELS_RETRY_NS, doubling up to 64 times it.
 */
static uint64_t retry_at(struct proc_slot *s, uint64_t now_ns)
{
	unsigned int shift = s->tries < 6 ? s->tries : 6;

	s->tries++;
	return now_ns + (IVM_LABELS_RETRY_NS << shift);
}

/* Mark every spec of slot s unreadable for why; retry later if temporary. */
static void resolve_failed(struct proc_slot *s, size_t n, const char *why,
			   bool temporary, uint64_t now_ns)
{
	size_t i;

	for (i = 0; i < n; i++)
		s->r[i] = (struct resolved){ .state = R_UNREADABLE, .why = why };
	s->done = !temporary;
	s->retry_ns = retry_at(s, now_ns);
}

/* Look up every spec's symbol for the process of t, into slot s. */
static void resolve(struct ivm_labels *l, const struct ivm_label_target *t,
		    struct proc_slot *s, uint64_t now_ns)
{
	const char *names[IVM_LABELS_MAX + NR_GLIBC];
	struct ivm_uelf_symbol sym[IVM_LABELS_MAX + NR_GLIBC];
	bool found[IVM_LABELS_MAX + NR_GLIBC], need_pthread = false;
	bool incomplete, retry;
	struct ivm_mm_maps *maps = NULL;
	struct object exe = { .host.fd = -1 }, libc = { .host.fd = -1 };
	struct ivm_error *err;
	size_t i;

	/* The executable: the host copy the capture found, else the guest's. */
	if (t->host_path) {
		err = ivm_uelf_host_file_open(t->host_path, &exe.host,
					      &exe.reader);
	} else if (l->g.gfile) {
		err = ivm_mm_exe_file(l->g.mm_src, t->mm, &exe.file);
		exe.gf = (struct ivm_gfile_file){ .g = l->g.gfile,
						  .file = &exe.file };
		ivm_gfile_file_reader(&exe.gf, &exe.reader);
	} else {
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "no host copy, and the page cache is out of reach");
	}
	if (!err)
		err = ivm_uelf_parse(&exe.reader, &exe.h);
	if (err) {
		resolve_failed(s, l->n, err->code == IVM_ERROR_FAULT ?
			       "the executable's headers are not in guest memory" :
			       "the executable cannot be read", err->code ==
			       IVM_ERROR_FAULT, now_ns);
		goto out;
	}
	/*
	 * Its bias: the capture's, from the auxiliary vector; else from the
	 * mapping of its first page among the process's VMAs.
	 */
	if (exe.h.type == ET_DYN && t->exe && t->exe->dyn) {
		exe.bias = t->exe->bias;
	} else if (exe.h.type == ET_DYN) {
		err = exe_bias_from_maps(l, t, &exe.h, &maps, &exe.bias);
		if (err) {
			resolve_failed(s, l->n, "the PIE's load bias is unknown",
				       err->code == IVM_ERROR_FAULT, now_ns);
			goto out;
		}
	}

	for (i = 0; i < l->n; i++) {
		names[i] = l->specs[i].symbol;
		need_pthread |= l->specs[i].source == IVM_LABEL_KEY;
	}
	for (i = 0; i < NR_GLIBC; i++)
		names[l->n + i] = glibc_names[i];
	err = ivm_uelf_find_symbols(&exe.reader, &exe.h, exe.bias, names,
				    l->n + (need_pthread ? NR_GLIBC : 0), sym,
				    found, &incomplete);
	if (err && err->code == IVM_ERROR_NOT_FOUND) {
		/* No symbol table at all (a stripped static program): none. */
		for (i = 0; i < l->n; i++)
			s->r[i] = (struct resolved){ .state = R_ABSENT };
		s->done = true;
		goto out;
	}
	if (err) {
		resolve_failed(s, l->n, err->code == IVM_ERROR_FAULT ?
			       "the executable's symbol tables are not in guest memory" :
			       "the executable's symbol tables are malformed",
			       err->code == IVM_ERROR_FAULT, now_ns);
		goto out;
	}
	retry = false;
	for (i = 0; i < l->n; i++) {
		const struct ivm_label_spec *sp = &l->specs[i];
		struct resolved *r = &s->r[i];

		*r = (struct resolved){ .state = R_ABSENT };
		if (!found[i] && incomplete) {
			/* It may be in what the guest does not hold (yet). */
			*r = (struct resolved){
				.state = R_UNREADABLE,
				.why = "the executable's symbol tables are not all in guest memory",
			};
			retry = true;
		}
		if (!found[i])
			continue;
		r->state = R_UNREADABLE;
		if (sym[i].matches > 1) {
			r->why = "several variables of that name";
		} else if (sp->source == IVM_LABEL_TLS) {
			if (sym[i].type != STT_TLS || !exe.h.tls_memsz) {
				r->why = "not a __thread variable";
				continue;
			}
			r->tls_vaddr = exe.h.tls_vaddr;
			r->tls_memsz = exe.h.tls_memsz;
			r->tls_align = exe.h.tls_align;
			r->tls_offset = sym[i].value;
			r->state = R_OK;
		} else if (sym[i].type == STT_TLS || sym[i].type == STT_FUNC ||
			   sym[i].type == STT_GNU_IFUNC) {
			r->why = "not a variable";
		} else {
			r->addr = exe.bias + sym[i].value;
			r->state = R_OK;
		}
	}
	/* key: glibc's layout, from the executable if static, else libc. */
	for (i = 0; i < l->n; i++)
		if (l->specs[i].source == IVM_LABEL_KEY && s->r[i].state == R_OK)
			break;
	if (i < l->n) {
		err = layout_of(&exe, sym + l->n, found + l->n, &s->pthread);
		if (err && err->code == IVM_ERROR_NOT_FOUND) {
			ivm_error_destroy(err);
			err = maps ? NULL :
			      !l->g.mm_src ?
			      ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "no guest kernel to read mappings from") :
			      ivm_mm_maps_read(l->g.mm_src, t->mm, 0, &maps);
			if (!err)
				err = find_libc(l, t, maps, &libc);
			if (!err)
				err = ivm_uelf_find_symbols(&libc.reader,
							    &libc.h, libc.bias,
							    glibc_names,
							    NR_GLIBC, sym + l->n,
							    found + l->n,
							    &incomplete);
			if (!err && incomplete && !found[l->n])
				err = ivm_error_fault(0, "libc's symbol tables are not all in guest memory");
			if (!err)
				err = layout_of(&libc, sym + l->n,
						found + l->n, &s->pthread);
		}
		s->has_pthread = !err;
		for (i = 0; err && i < l->n; i++) {
			if (l->specs[i].source != IVM_LABEL_KEY ||
			    s->r[i].state != R_OK)
				continue;
			s->r[i].state = R_UNREADABLE;
			s->r[i].why = err->code == IVM_ERROR_FAULT ?
				      "libc's tables are not in guest memory" :
				      "glibc's thread-specific data cannot be found";
		}
		if (err && err->code == IVM_ERROR_FAULT) {
			/* Try again: the pages may come. */
			s->done = false;
			s->retry_ns = retry_at(s, now_ns);
			ivm_error_destroy(err);
			goto out;
		}
		ivm_error_destroy(err);
	}
	s->done = !retry;
	s->retry_ns = retry_at(s, now_ns);
	err = NULL;
out:
	ivm_error_destroy(err);
	ivm_mm_maps_destroy(maps);
	ivm_uelf_host_file_close(&exe.host);
	ivm_uelf_host_file_close(&libc.host);
}

/* Label i's value in the thread t of slot s into l->values[i]. */
static struct ivm_error *read_value(struct ivm_labels *l,
				    const struct ivm_label_target *t,
				    const struct proc_slot *s, size_t i,
				    const char **why)
{
	const struct ivm_label_spec *sp = &l->specs[i];
	const struct resolved *r = &s->r[i];
	struct ivm_error *err;
	uint64_t addr = r->addr, v = 0;
	uint8_t b[8];

	if (sp->source != IVM_LABEL_VAR && !t->fsbase) {
		*why = "the thread has no thread pointer";
		return ivm_error_create(IVM_ERROR_NOT_FOUND, "no fs base");
	}
	if (sp->source == IVM_LABEL_TLS) {
		/*
		 * The x86-64 TLS ABI has the thread control block's first
		 * word point to itself (%fs:0 is the thread pointer): a fs
		 * base that is no thread's, or stale, fails here.
		 */
		*why = "the fs base holds no thread control block";
		err = t->umem->read(t->umem->ctx, t->fsbase, b, 8);
		if (!err && ivm_le64(b) != t->fsbase)
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "no TCB at the fs base");
		if (!err) {
			*why = "the TLS block does not hold the variable";
			err = ivm_tls_static_address(t->fsbase, r->tls_vaddr,
						     r->tls_memsz, r->tls_align,
						     r->tls_offset, &addr);
		}
		if (err)
			return err;
	}
	*why = "its memory cannot be read";
	if (sp->source == IVM_LABEL_KEY) {
		err = t->umem->read(t->umem->ctx, addr, b, 4);
		if (err)
			return err;
		*why = "no thread-specific data of glibc's layout";
		err = ivm_pthread_getspecific(t->umem, &s->pthread, t->fsbase,
					      ivm_le32(b), &v);
	} else {
		size_t len = sp->type == IVM_LABEL_INT ? 4 : 8;

		memset(b, 0, sizeof(b));
		err = t->umem->read(t->umem->ctx, addr, b, len);
		v = ivm_le64(b);
	}
	if (err)
		return err;
	*why = "the string cannot be read";
	return ivm_label_format(t->umem, sp->type, v, l->values[i],
				sizeof(l->values[i]));
}

void ivm_labels_read(struct ivm_labels *l, const struct ivm_label_target *t,
		     uint64_t now_ns, struct ivm_label *out, size_t *nr)
{
	struct proc_slot *s;
	size_t i;

	*nr = 0;
	if (!l->n || !t->mm)
		return;
	s = &l->slots[ivm_assoc_pick(&l->slot_assoc, l->slots,
				     sizeof(l->slots[0]),
				     offsetof(struct proc_slot, mm),
				     PROC_SLOTS, l->slot_used, t->mm)];
	if (s->mm != t->mm || s->cr3 != t->cr3) {
		memset(s, 0, sizeof(*s));
		s->mm = t->mm;
		s->cr3 = t->cr3;
	}
	if (!s->done && now_ns >= s->retry_ns)
		resolve(l, t, s, now_ns);
	for (i = 0; i < l->n; i++) {
		const char *why = s->r[i].why;
		struct ivm_error *err = NULL;

		if (s->r[i].state == R_ABSENT) {
			l->stats[i].absent++;
			continue;
		}
		if (s->r[i].state == R_OK)
			err = read_value(l, t, s, i, &why);
		if (s->r[i].state != R_OK || err) {
			snprintf(l->values[i], sizeof(l->values[i]), "%s",
				 IVM_LABEL_UNREADABLE);
			l->stats[i].unreadable++;
			l->last_why[i] = why;
		} else {
			l->stats[i].read++;
		}
		ivm_error_destroy(err);
		out[(*nr)++] = (struct ivm_label){ l->specs[i].key,
						   l->values[i] };
	}
}

size_t ivm_labels_fill_stats(struct ivm_labels *l, struct ivm_stat *st,
			     size_t room)
{
	static const char *const what[3] = { "read", "unreadable", "absent" };
	size_t i, k, n = 0;

	for (i = 0; i < l->n; i++) {
		const uint64_t v[3] = { l->stats[i].read, l->stats[i].unreadable,
					l->stats[i].absent };

		for (k = 0; k < 3 && n < room; k++) {
			snprintf(l->stat_names[i][k], sizeof(l->stat_names[i][k]),
				 "%s%s.%s", IVM_STAT_LABEL_PREFIX,
				 l->specs[i].key, what[k]);
			st[n++] = (struct ivm_stat){ l->stat_names[i][k], v[k] };
		}
	}
	return n;
}
