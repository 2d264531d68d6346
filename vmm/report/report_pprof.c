// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/hash.h"
#include "report/mappings.h"
#include "base/text_safe.h"
#include "report/cause_labels.h"
#include "report/report_pprof.h"

/* Field numbers of profile.proto (see vmm/report/report_pprof.proto). */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4, PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
	LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
	MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3,
	MAPPING_FILE_OFFSET = 4, MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3,
	LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1, LINE_LINE = 2,
	FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3,
	FUNCTION_FILENAME = 4,
};

enum { WIRE_VARINT = 0, WIRE_BYTES = 2 };

struct pb {
	uint8_t *buf;
	size_t len, cap;
	bool failed;
};

static void pb_put(struct pb *p, const void *data, size_t n)
{
	if (p->failed)
		return;
	if (n > p->cap - p->len) {
		size_t ncap = p->cap ? p->cap : 4096;
		uint8_t *nb;

		while (ncap - p->len < n) {
			if (ncap > SIZE_MAX / 2) {
				p->failed = true;
				return;
			}
			ncap *= 2;
		}
		nb = realloc(p->buf, ncap);
		if (!nb) {
			p->failed = true;
			return;
		}
		p->buf = nb;
		p->cap = ncap;
	}
	memcpy(p->buf + p->len, data, n);
	p->len += n;
}

static void pb_varint(struct pb *p, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = v & 0x7f;
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	pb_put(p, b, n);
}

static void pb_uint(struct pb *p, unsigned int field, uint64_t v)
{
	pb_varint(p, (uint64_t)field << 3 | WIRE_VARINT);
	pb_varint(p, v);
}

static void pb_bytes(struct pb *p, unsigned int field, const void *data,
		     size_t n)
{
	pb_varint(p, (uint64_t)field << 3 | WIRE_BYTES);
	pb_varint(p, n);
	pb_put(p, data, n);
}

/* Append sub as a length-delimited field and empty sub for reuse. */
static void pb_message(struct pb *p, unsigned int field, struct pb *sub)
{
	if (sub->failed)
		p->failed = true;
	pb_bytes(p, field, sub->buf, sub->len);
	sub->len = 0;
}

/* ---- interning: strings, functions, locations -------------------------- */

struct intern {
	uint64_t *keys;		/* hash of the value, or the value */
	uint32_t *ids;		/* 0: empty slot */
	size_t size, used;
};

/* A location's identity: the frame's type, pc and exactness, as the tree keys it. */
struct loc_key {
	enum ivm_node_type type;
	uint64_t pc;
	bool exact;
};

/* What a mapping's locations had, for its has_* flags. */
struct map_use {
	uint64_t locations, functions, filenames, lines;
};

struct pprof {
	struct pb out, sub, sub2;
	/* strings */
	char **strings;
	size_t nr_strings, cap_strings;
	struct intern string_ix;
	/* functions: (name, file) string ids */
	struct intern function_ix;
	uint32_t nr_functions;
	/* locations: (type, pc) */
	struct intern location_ix;
	struct loc_key *locations;
	uint32_t nr_locations, cap_locations;
	/* per mapping of opts->mappings, by id - 1 */
	const struct ivm_mappings *mappings;
	struct map_use *map_use;
	bool failed;
};

/*
 * Find key in ix; eq() tells a real match from a hash collision.  Returns
 * the id, or 0 with *slot set where to insert.
 */
static uint32_t intern_find(struct pprof *pp, struct intern *ix, uint64_t key,
			    bool (*eq)(struct pprof *, uint32_t, const void *),
			    const void *arg, size_t *slot)
{
	size_t i;

	if ((ix->used + 1) * 2 > ix->size) {
		size_t nsize = ix->size ? ix->size * 2 : 1024, j;
		uint64_t *nk = calloc(nsize, sizeof(*nk));
		uint32_t *ni = calloc(nsize, sizeof(*ni));

		if (!nk || !ni) {
			free(nk);
			free(ni);
			pp->failed = true;
			*slot = SIZE_MAX;
			return 0;
		}
		for (j = 0; j < ix->size; j++) {
			size_t k;

			if (!ix->ids[j])
				continue;
			for (k = ivm_hash_u64(ix->keys[j]) & (nsize - 1); ni[k];
			     k = (k + 1) & (nsize - 1))
				;
			nk[k] = ix->keys[j];
			ni[k] = ix->ids[j];
		}
		free(ix->keys);
		free(ix->ids);
		ix->keys = nk;
		ix->ids = ni;
		ix->size = nsize;
	}
	for (i = ivm_hash_u64(key) & (ix->size - 1); ix->ids[i];
	     i = (i + 1) & (ix->size - 1))
		if (ix->keys[i] == key && eq(pp, ix->ids[i], arg))
			return ix->ids[i];
	*slot = i;
	return 0;
}

static void intern_set(struct intern *ix, size_t slot, uint64_t key,
		       uint32_t id)
{
	ix->keys[slot] = key;
	ix->ids[slot] = id;
	ix->used++;
}

static bool string_eq(struct pprof *pp, uint32_t id, const void *arg)
{
	return !strcmp(pp->strings[id - 1], arg);
}

/*
 * Index of s in the string table (index 0 is "").  Every string goes in
 * safe (text_safe.h): names a guest chose are printed by whatever reads
 * the profile, and profile.proto's strings must be valid UTF-8.
 */
static int64_t string_id(struct pprof *pp, const char *s)
{
	char safe[IVM_TEXT_SAFE_SIZE(1024)];
	uint64_t key;
	uint32_t id;
	size_t slot;
	char *copy;

	if (!s || !*s)
		return 0;
	if (!ivm_text_is_safe(s))
		s = ivm_text_safe(safe, sizeof(safe), s);
	key = ivm_hash_string(s);
	id = intern_find(pp, &pp->string_ix, key, string_eq, s, &slot);
	if (id)
		return id;
	if (slot == SIZE_MAX)
		return 0;
	if (pp->nr_strings == pp->cap_strings) {
		size_t ncap = pp->cap_strings ? pp->cap_strings * 2 : 1024;
		char **n = realloc(pp->strings, ncap * sizeof(*n));

		if (!n) {
			pp->failed = true;
			return 0;
		}
		pp->strings = n;
		pp->cap_strings = ncap;
	}
	copy = strdup(s);
	if (!copy) {
		pp->failed = true;
		return 0;
	}
	pp->strings[pp->nr_strings++] = copy;
	intern_set(&pp->string_ix, slot, key, (uint32_t)pp->nr_strings);
	return (int64_t)pp->nr_strings;
}

static bool always_eq(struct pprof *pp, uint32_t id, const void *arg)
{
	return true;
}

/* Function id of (name, file); written to the output when new. */
static uint32_t function_id(struct pprof *pp, const char *name,
			    const char *file)
{
	int64_t n = string_id(pp, name), f = string_id(pp, file);
	uint64_t key = (uint64_t)n << 32 | (uint64_t)f;
	uint32_t id;
	size_t slot;

	id = intern_find(pp, &pp->function_ix, key, always_eq, NULL, &slot);
	if (id || slot == SIZE_MAX)
		return id;
	id = ++pp->nr_functions;
	intern_set(&pp->function_ix, slot, key, id);
	pb_uint(&pp->sub, FUNCTION_ID, id);
	pb_uint(&pp->sub, FUNCTION_NAME, (uint64_t)n);
	pb_uint(&pp->sub, FUNCTION_SYSTEM_NAME, (uint64_t)n);
	pb_uint(&pp->sub, FUNCTION_FILENAME, (uint64_t)f);
	pb_message(&pp->out, PROFILE_FUNCTION, &pp->sub);
	return id;
}

static bool location_eq(struct pprof *pp, uint32_t id, const void *arg)
{
	const struct loc_key *a = &pp->locations[id - 1], *b = arg;

	return a->type == b->type && a->pc == b->pc && a->exact == b->exact;
}

/*
 * The address a location names: the call instruction for a return address
 * (pc - 1, what the report symbolized and what a symbolizer must be
 * given, as Go's own profiles do), an interrupted pc itself, in the
 * mapping's address space.
 */
static uint64_t location_address(enum ivm_node_type type, uint64_t pc,
				 bool exact)
{
	if (type == IVM_NODE_USER)
		pc = IVM_REPORT_USER_PC(pc);
	return pc && !exact ? pc - 1 : pc;
}

/*
 * Location id of the frames of one pc (frames[0..n), innermost first);
 * written to the output when new.  A pc no symbol names gets a location
 * without lines: an address in its mapping, for a later symbolizer, never
 * a made-up function.
 */
static uint32_t location_id(struct pprof *pp,
			    const struct ivm_report_frame *frames, size_t n)
{
	struct loc_key key = { frames[0].type, frames[0].pc, frames[0].exact };
	uint64_t hash = key.pc ^ (key.type == IVM_NODE_KERNEL ?
				  0x8000000000000001ull : 0) ^
			(key.exact ? 0x4000000000000000ull : 0);
	const struct ivm_mapping *map;
	uint32_t id, fids[IVM_REPORT_MAX_INLINE];
	size_t slot, i, named = 0;
	bool files = false, lines = false;

	id = intern_find(pp, &pp->location_ix, hash, location_eq, &key,
			 &slot);
	if (id || slot == SIZE_MAX)
		return id;
	if (pp->nr_locations == pp->cap_locations) {
		uint32_t ncap = pp->cap_locations ? pp->cap_locations * 2 : 1024;
		struct loc_key *nl;

		if (ncap > UINT32_MAX / 2) {
			pp->failed = true;
			return 0;
		}
		nl = realloc(pp->locations, ncap * sizeof(*nl));
		if (!nl) {
			pp->failed = true;
			return 0;
		}
		pp->locations = nl;
		pp->cap_locations = ncap;
	}
	for (i = 0; i < n && i < IVM_REPORT_MAX_INLINE && frames[i].function &&
		    !frames[i].raw; i++) {
		fids[i] = function_id(pp, frames[i].function, frames[i].file);
		files = files || frames[i].file;
		lines = lines || frames[i].line;
	}
	named = i;
	pp->locations[pp->nr_locations] = key;
	id = ++pp->nr_locations;
	intern_set(&pp->location_ix, slot, hash, id);
	map = ivm_mappings_find(pp->mappings, key.type, key.pc);
	pb_uint(&pp->sub, LOCATION_ID, id);
	if (map) {
		struct map_use *u = &pp->map_use[map->id - 1];

		pb_uint(&pp->sub, LOCATION_MAPPING_ID, map->id);
		u->locations++;
		u->functions += named > 0;
		u->filenames += files;
		u->lines += lines;
	}
	pb_uint(&pp->sub, LOCATION_ADDRESS,
		location_address(key.type, key.pc, key.exact));
	for (i = 0; i < named; i++) {
		pb_uint(&pp->sub2, LINE_FUNCTION_ID, fids[i]);
		pb_uint(&pp->sub2, LINE_LINE, frames[i].line);
		pb_message(&pp->sub, LOCATION_LINE, &pp->sub2);
	}
	pb_message(&pp->out, PROFILE_LOCATION, &pp->sub);
	return id;
}

/*
 * The mappings some location is in, users first: pprof takes the first
 * mapping that is not a library or "[...]" for the main binary.  A
 * mapping's has_* flags say that the report symbolized its locations
 * from the file itself (some got a function, a file, a line), so that a
 * symbolizer leaves them as they are: what that file did not name, it
 * would not name either.  A mapping whose file the report did not have
 * has none set, for a symbolizer that has it.
 */
static void write_mappings(struct pprof *pp)
{
	static const enum ivm_mapping_kind order[] = {
		IVM_MAPPING_USER, IVM_MAPPING_KERNEL, IVM_MAPPING_MODULE,
	};
	size_t k, i, nr = ivm_mappings_count(pp->mappings);

	for (k = 0; k < sizeof(order) / sizeof(order[0]); k++)
		for (i = 0; i < nr; i++) {
			const struct ivm_mapping *m =
				ivm_mappings_at(pp->mappings, i);
			const struct map_use *u = &pp->map_use[i];

			if (m->kind != order[k] || !u->locations)
				continue;
			pb_uint(&pp->sub, MAPPING_ID, m->id);
			pb_uint(&pp->sub, MAPPING_MEMORY_START, m->start);
			pb_uint(&pp->sub, MAPPING_MEMORY_LIMIT, m->limit);
			pb_uint(&pp->sub, MAPPING_FILE_OFFSET, m->offset);
			pb_uint(&pp->sub, MAPPING_FILENAME,
				(uint64_t)string_id(pp, m->file));
			pb_uint(&pp->sub, MAPPING_BUILD_ID,
				(uint64_t)string_id(pp, m->build_id));
			pb_uint(&pp->sub, MAPPING_HAS_FUNCTIONS, u->functions > 0);
			pb_uint(&pp->sub, MAPPING_HAS_FILENAMES, u->filenames > 0);
			pb_uint(&pp->sub, MAPPING_HAS_LINE_NUMBERS, u->lines > 0);
			/* Line numbers come from DWARF, which has inlines. */
			pb_uint(&pp->sub, MAPPING_HAS_INLINE_FRAMES, u->lines > 0);
			pb_message(&pp->out, PROFILE_MAPPING, &pp->sub);
		}
}

static void value_type(struct pprof *pp, unsigned int field, const char *type,
		       const char *unit)
{
	pb_uint(&pp->sub, VALUE_TYPE_TYPE, (uint64_t)string_id(pp, type));
	pb_uint(&pp->sub, VALUE_TYPE_UNIT, (uint64_t)string_id(pp, unit));
	pb_message(&pp->out, field, &pp->sub);
}

static void label(struct pprof *pp, struct pb *sample, const char *key,
		  const char *str, int64_t num)
{
	pb_uint(&pp->sub2, LABEL_KEY, (uint64_t)string_id(pp, key));
	if (str)
		pb_uint(&pp->sub2, LABEL_STR, (uint64_t)string_id(pp, str));
	else
		pb_uint(&pp->sub2, LABEL_NUM, (uint64_t)num);
	pb_message(sample, SAMPLE_LABEL, &pp->sub2);
}

/*
 * Labels of what the stack belongs to beyond its thread and process: its
 * group (keyed by what the tree groups by: "comm", "title" or a label's
 * key), its process's title and its dimension labels, so profile viewers
 * (Pyroscope, Parca) can filter by them.
 */
static void context_labels(struct pprof *pp, const struct ivm_calltree *tree,
			   uint32_t leaf, uint32_t process, struct pb *sample)
{
	const char *group = ivm_calltree_group_name(tree);
	struct ivm_report_context ctx;
	const struct ivm_label *labels = NULL;
	size_t nr = 0, i;
	bool group_is_label = false;

	ivm_report_context_of(tree, leaf, &ctx);
	if (ctx.labels != IVM_CALLTREE_NONE)
		labels = ivm_calltree_labels(
			tree, ivm_calltree_node(tree, ctx.labels)->key, &nr);
	for (i = 0; i < nr; i++) {
		/* A cause the sample does not have is no label. */
		if (!strcmp(labels[i].value, "-") &&
		    ivm_cause_label_key(labels[i].key))
			continue;
		label(pp, sample, labels[i].key, labels[i].value, 0);
		group_is_label |= !strcmp(labels[i].key, group);
	}
	if (ctx.group != IVM_CALLTREE_NONE && !group_is_label)
		label(pp, sample, group, ivm_calltree_string(
			tree, (uint32_t)ivm_calltree_node(tree, ctx.group)->key),
		      0);
	if (process != IVM_CALLTREE_NONE &&
	    ivm_calltree_node(tree, process)->title)
		label(pp, sample, "title", ivm_calltree_string(
			tree, ivm_calltree_node(tree, process)->title), 0);
}

/* Samples of one leaf node: one per kind with a count there. */
static void write_samples(struct pprof *pp, const struct ivm_calltree *tree,
			  const struct ivm_report_options *opts, uint32_t leaf,
			  struct ivm_report_frame *frames, struct pb *sample,
			  struct pb *ids)
{
	const struct ivm_calltree_node *node = ivm_calltree_node(tree, leaf);
	uint32_t process, thread;
	size_t n, i, j;
	char buf[64];
	int kind, k;

	n = ivm_report_stack(tree, opts, leaf, frames, IVM_REPORT_MAX_STACK,
			     &process, &thread);
	/* Locations: one per pc; a pc's inline frames are consecutive. */
	ids->len = 0;
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && frames[j].pc == frames[i].pc &&
				frames[j].type == frames[i].type &&
				frames[j - 1].inlined; j++)
			;
		pb_varint(ids, location_id(pp, frames + i, j - i));
	}
	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++) {
		if (!node->self[kind] ||
		    (opts->kind >= 0 && opts->kind != kind))
			continue;
		pb_bytes(sample, SAMPLE_LOCATION_ID, ids->buf, ids->len);
		pp->sub.len = 0;
		for (k = 0; k < IVM_SAMPLE_NR_KINDS; k++)
			pb_varint(&pp->sub, k == kind ? node->self[kind] : 0);
		/* The time values (value_types): idle_ns, host_wake_ns. */
		pb_varint(&pp->sub, kind == IVM_SAMPLE_TO_IDLE ?
			  node->self_ns[kind] : 0);
		pb_varint(&pp->sub, kind == IVM_SAMPLE_FROM_IDLE ?
			  node->self_ns[kind] : 0);
		pb_message(sample, SAMPLE_VALUE, &pp->sub);
		label(pp, sample, "kind", ivm_sample_kind_name(kind), 0);
		context_labels(pp, tree, leaf, process, sample);
		if (thread != IVM_CALLTREE_NONE) {
			const struct ivm_calltree_node *t =
				ivm_calltree_node(tree, thread);

			label(pp, sample, "thread",
			      ivm_report_task_name(t, buf, sizeof(buf)), 0);
			label(pp, sample, "tid", NULL, (int64_t)t->key);
		}
		if (process != IVM_CALLTREE_NONE) {
			const struct ivm_calltree_node *p =
				ivm_calltree_node(tree, process);

			label(pp, sample, "process",
			      ivm_report_task_name(p, buf, sizeof(buf)), 0);
			label(pp, sample, "pid", NULL, (int64_t)p->key);
		}
		pb_message(&pp->out, PROFILE_SAMPLE, sample);
	}
	if (sample->failed || ids->failed)
		pp->failed = true;
}

static struct ivm_error *gzip_write(FILE *out, const uint8_t *data, size_t len)
{
	z_stream zs = { 0 };
	uint8_t chunk[65536];
	int rc;

	/* windowBits 15 + 16: a gzip wrapper, as pprof files are. */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return &ivm_enomem;
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)len;	/* profiles stay far below 4 GiB */
	do {
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		rc = deflate(&zs, Z_FINISH);
		if (rc == Z_STREAM_ERROR) {
			deflateEnd(&zs);
			return ivm_error_create(IVM_ERROR_INVALID,
						"compressing the pprof profile");
		}
		if (fwrite(chunk, 1, sizeof(chunk) - zs.avail_out, out) !=
		    sizeof(chunk) - zs.avail_out) {
			deflateEnd(&zs);
			return ivm_error_os(errno, "writing the pprof profile");
		}
	} while (rc != Z_STREAM_END);
	deflateEnd(&zs);
	return NULL;
}

/* Context a reader shows with -comments: which guest, which kernel. */
static void comment(struct pprof *pp, const char *key, const char *value)
{
	char *c;

	if (!value || !*value)
		return;
	if (asprintf(&c, "%s: %s", key, value) < 0) {
		pp->failed = true;
		return;
	}
	pb_uint(&pp->out, PROFILE_COMMENT, (uint64_t)string_id(pp, c));
	free(c);
}

struct ivm_error *ivm_report_pprof(const struct ivm_calltree *tree,
				   const struct ivm_report_options *opts)
{
	struct pprof pp = { .mappings = opts->mappings };
	struct pb sample = { 0 }, ids = { 0 };
	struct ivm_report_frame *frames;
	struct ivm_error *err = NULL;
	uint32_t i, nr = ivm_calltree_nr_nodes(tree);
	size_t s, nr_maps = ivm_mappings_count(opts->mappings);
	int kind;

	if (nr > UINT32_MAX / 2)
		return ivm_error_create(IVM_ERROR_INVALID, "call tree too large");
	frames = calloc(IVM_REPORT_MAX_STACK, sizeof(*frames));
	pp.map_use = calloc(nr_maps ? nr_maps : 1, sizeof(*pp.map_use));
	if (!frames || !pp.map_use) {
		free(frames);
		free(pp.map_use);
		return &ivm_enomem;
	}
	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++)
		value_type(&pp, PROFILE_SAMPLE_TYPE, ivm_sample_kind_name(kind),
			   "count");
	/*
	 * Time: how long each to-idle's idle period lasted, how long the
	 * host took to run the vCPU after each from-idle's wakeup, so
	 * `go tool pprof -sample_index=idle_ns` weighs stacks by idle time.
	 */
	value_type(&pp, PROFILE_SAMPLE_TYPE, "idle_ns", "nanoseconds");
	value_type(&pp, PROFILE_SAMPLE_TYPE, "host_wake_ns", "nanoseconds");
	for (i = 0; i < nr; i++) {
		const struct ivm_calltree_node *node = ivm_calltree_node(tree, i);

		for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++)
			if (node->self[kind])
				break;
		if (kind < IVM_SAMPLE_NR_KINDS)
			write_samples(&pp, tree, opts, i, frames, &sample, &ids);
	}
	write_mappings(&pp);
	if (opts->run.start_ns)
		pb_uint(&pp.out, PROFILE_TIME_NANOS, opts->run.start_ns);
	if (opts->run.duration_ns)
		pb_uint(&pp.out, PROFILE_DURATION_NANOS, opts->run.duration_ns);
	/* Idle transitions are what is sampled, every idle_every-th one. */
	value_type(&pp, PROFILE_PERIOD_TYPE, "idle_transitions", "count");
	pb_uint(&pp.out, PROFILE_PERIOD,
		opts->run.idle_every ? opts->run.idle_every : 1);
	comment(&pp, "guest", opts->run.guest);
	comment(&pp, "kernel", opts->run.kernel);
	if (opts->run.scale > 1) {
		char est[128];

		snprintf(est, sizeof(est),
			 "estimated: watched %.1f s of %.1f s (--cpu-budget), values scaled by %.2f",
			 (double)opts->run.watched_ms / 1e3,
			 (double)opts->run.elapsed_ms / 1e3, opts->run.scale);
		comment(&pp, "counts", est);
	}
	pb_uint(&pp.out, PROFILE_DEFAULT_SAMPLE_TYPE,
		(uint64_t)string_id(&pp,
			opts->value == IVM_VALUE_IDLE_TIME ? "idle_ns" :
			opts->value == IVM_VALUE_WAKE_DELAY ? "host_wake_ns" :
			ivm_sample_kind_name(opts->kind >= 0 ? opts->kind :
					     IVM_SAMPLE_TO_IDLE)));
	/* The string table last: every string is known by now. */
	pb_bytes(&pp.out, PROFILE_STRING_TABLE, "", 0);
	for (s = 0; s < pp.nr_strings; s++)
		pb_bytes(&pp.out, PROFILE_STRING_TABLE, pp.strings[s],
			 strlen(pp.strings[s]));
	if (pp.failed || pp.out.failed || pp.sub.failed || pp.sub2.failed)
		err = &ivm_enomem;
	else
		err = gzip_write(opts->out, pp.out.buf, pp.out.len);

	for (s = 0; s < pp.nr_strings; s++)
		free(pp.strings[s]);
	free(pp.strings);
	free(pp.string_ix.keys);
	free(pp.string_ix.ids);
	free(pp.function_ix.keys);
	free(pp.function_ix.ids);
	free(pp.location_ix.keys);
	free(pp.location_ix.ids);
	free(pp.locations);
	free(pp.map_use);
	free(pp.out.buf);
	free(pp.sub.buf);
	free(pp.sub2.buf);
	free(sample.buf);
	free(ids.buf);
	free(frames);
	return err;
}
