// SPDX-License-Identifier: MIT
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernel/kmodules.h"
#include "profile/uobjects.h"
#include "report/frame_names.h"
#include "report/mappings.h"

/* Executables that old profiles name by build-id (label user_build_id). */
#define MAX_OLD_EXES	16
/* Frames named "FILE+0xADDR" kept, each a string the writers print. */
#define MAX_RAW_NAMES	(1u << 20)

/* A function the guest's symbol tables named ("usym"). */
struct usym {
	uint64_t vaddr, size;
	const char *name;	/* into the metadata line */
};

/* A user object of the run ("uobject"), by its number - 1. */
struct object {
	char build_id[2 * IVM_UELF_MAX_BUILD_ID + 1];	/* "" if unused */
	const char *path;	/* into the metadata line, or NULL */
	struct usym *usyms;	/* sorted by vaddr */
	size_t nr_usyms, cap_usyms;
};

struct ivm_frame_names {
	struct ivm_syms *syms;
	const struct ivm_frame_names_config *cfg;	/* during load only */
	/* Old profiles: executables by build-id, tag = index + 1. */
	char *build_ids[MAX_OLD_EXES];
	size_t nr_build_ids;
	/* New ones: the objects of the metadata, tag = id. */
	struct object *objects;
	size_t nr_objects;
	struct ivm_meta_lines meta;	/* a copy: objects point into it */
	/* Files found for the symbolizer, and strings made for frames. */
	char **owned;
	size_t nr_owned, cap_owned;
	size_t nr_raw;
	/* The guest's modules as the metadata recorded them. */
	struct ivm_kmodule *kmods;
	struct ivm_syms_module *modules;
	size_t nr_modules;
	char *module_dir;
	debuginfod_client *dbgd;
	size_t dbgd_hits, dbgd_misses;
	int dbgd_error;			/* errno of a failure, not a miss */
};

/* ---- metadata lines ----------------------------------------------------- */

void ivm_meta_lines_add(struct ivm_meta_lines *m, const char *key,
			const char *value)
{
	char **lines = realloc(m->lines, (m->nr + 1) * sizeof(*lines));

	if (!lines)
		return;
	m->lines = lines;
	if (asprintf(&m->lines[m->nr], "%s: %s", key, value) >= 0)
		m->nr++;
}

const char *ivm_meta_lines_value(const struct ivm_meta_lines *m,
				 const char *key)
{
	size_t i, n = strlen(key);

	/* Later records win: a run may restate what changed. */
	for (i = m->nr; i-- > 0;)
		if (!strncmp(m->lines[i], key, n) && m->lines[i][n] == ':' &&
		    m->lines[i][n + 1] == ' ')
			return m->lines[i] + n + 2;
	return NULL;
}

void ivm_meta_lines_free(struct ivm_meta_lines *m)
{
	size_t i;

	for (i = 0; i < m->nr; i++)
		free(m->lines[i]);
	free(m->lines);
	m->lines = NULL;
	m->nr = 0;
}

/* ---- life ----------------------------------------------------------------- */

struct ivm_frame_names *ivm_frame_names_create(void)
{
	return calloc(1, sizeof(struct ivm_frame_names));
}

static void free_modules(struct ivm_frame_names *rs);

void ivm_frame_names_destroy(struct ivm_frame_names *fn)
{
	size_t i;

	if (!fn)
		return;
	ivm_syms_destroy(fn->syms);
	free_modules(fn);
	for (i = 0; i < fn->nr_build_ids; i++)
		free(fn->build_ids[i]);
	for (i = 0; i < fn->nr_objects; i++)
		free(fn->objects[i].usyms);
	free(fn->objects);
	for (i = 0; i < fn->nr_owned; i++)
		free(fn->owned[i]);
	free(fn->owned);
	ivm_meta_lines_free(&fn->meta);
	if (fn->dbgd)
		debuginfod_end(fn->dbgd);
	free(fn);
}

/* Keep s (malloc'd) for the names' life; NULL when it could not. */
static const char *own(struct ivm_frame_names *fn, char *s)
{
	if (!s)
		return NULL;
	if (fn->nr_owned == fn->cap_owned) {
		size_t cap = fn->cap_owned ? 2 * fn->cap_owned : 64;
		char **n = realloc(fn->owned, cap * sizeof(*n));

		if (!n) {
			free(s);
			return NULL;
		}
		fn->owned = n;
		fn->cap_owned = cap;
	}
	fn->owned[fn->nr_owned++] = s;
	return s;
}

static void logf_(struct ivm_frame_names *fn, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!fn->cfg || !fn->cfg->log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fn->cfg->log(fn->cfg->log_ctx, buf);
}

/* ---- old profiles: the executable by label ------------------------------- */

/*
 * A pc further than IVM_REPORT_PIE_SPAN above a PIE's bias is not the
 * executable's (the vDSO, a library): it stays as it is.
 */
#define IVM_REPORT_PIE_SPAN (1ull << 30)

const struct ivm_sample *ivm_frame_names_sample(struct ivm_frame_names *rs,
						const struct ivm_sample *s,
						struct ivm_sample *copy,
						uint64_t *pcs)
{
	const char *id = NULL, *bias_s = NULL;
	unsigned long long bias;
	char *end;
	size_t i = 0, k;

	for (i = 0; i < s->nr_labels; i++) {
		if (!strcmp(s->labels[i].key, "user_build_id"))
			id = s->labels[i].value;
		else if (!strcmp(s->labels[i].key, "user_bias"))
			bias_s = s->labels[i].value;
	}
	/* Which executable: i becomes its build-id's index, or none. */
	if (id && (strspn(id, "0123456789abcdef") != strlen(id) ||
		   strlen(id) < 4))
		id = NULL;
	for (i = 0; id && i < rs->nr_build_ids; i++)
		if (!strcmp(rs->build_ids[i], id))
			break;
	if (id && i == rs->nr_build_ids && i < MAX_OLD_EXES &&
	    (rs->build_ids[i] = strdup(id)))
		rs->nr_build_ids++;
	if (!id || i >= rs->nr_build_ids)
		i = (size_t)-1;
	bias = 0;
	if (bias_s) {
		bias = strtoull(bias_s, &end, 16);
		if (*end)
			bias = 0;
	}
	if (!bias && i == (size_t)-1)
		return s;
	*copy = *s;
	for (k = 0; k < s->nr_user; k++) {
		uint64_t pc = s->user_pcs[k];

		if (bias && pc - bias < IVM_REPORT_PIE_SPAN)
			pc -= bias;
		if (i != (size_t)-1 && !IVM_REPORT_USER_TAG(pc))
			pc |= (uint64_t)(i + 1) << IVM_REPORT_USER_TAG_SHIFT;
		pcs[k] = pc;
	}
	copy->user_pcs = pcs;
	return copy;
}

/* ---- naming a frame ------------------------------------------------------- */

/*
 * A location's frames; the out-of-line one (the last) carries the pc's
 * offset into its function (the location's is that of pc - back).
 */
static unsigned int copy_location(const struct ivm_sym_location *loc,
				  uint64_t back, struct ivm_report_frame *out,
				  unsigned int max)
{
	unsigned int i;

	for (i = 0; i < loc->nr_frames && i < max; i++)
		out[i] = (struct ivm_report_frame){
			.function = loc->frames[i].function,
			.file = loc->frames[i].file,
			.line = loc->frames[i].line,
			.inlined = loc->frames[i].inlined,
		};
	if (i == loc->nr_frames && i) {
		out[i - 1].has_offset = true;
		out[i - 1].offset = loc->offset + back;
	}
	return i;
}

static const struct usym *find_usym(const struct object *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->nr_usyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->usyms[mid].vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && vaddr - o->usyms[lo - 1].vaddr < o->usyms[lo - 1].size)
		return &o->usyms[lo - 1];
	return NULL;
}

/* The frames of a tagged pc of the new format (object id = tag). */
static unsigned int object_frames(struct ivm_frame_names *rs, uint64_t pc,
				  uint64_t back, struct ivm_report_frame *out,
				  unsigned int max)
{
	uint32_t id = IVM_UPC_ID(pc);
	uint64_t vaddr = IVM_UPC_VADDR(pc);
	const struct ivm_sym_location *loc = NULL;
	const struct usym *u;
	struct object *o;
	const char *base;

	if (!id || id > rs->nr_objects || !rs->objects[id - 1].build_id[0] ||
	    !max)
		return 0;
	o = &rs->objects[id - 1];
	if (rs->syms)
		loc = ivm_syms_user_in(rs->syms, o->build_id, vaddr - back);
	if (loc && loc->source != IVM_SYM_SOURCE_NONE && loc->nr_frames)
		return copy_location(loc, back, out, max);
	u = find_usym(o, vaddr - back);
	if (u) {
		out[0] = (struct ivm_report_frame){ .function = u->name,
			.has_offset = true, .offset = vaddr - u->vaddr };
		return 1;
	}
	/* Nothing names it: its file and address, never a guess. */
	if (rs->nr_raw >= MAX_RAW_NAMES)
		return 0;
	base = o->path ? strrchr(o->path, '/') : NULL;
	base = base ? base + 1 : o->path;
	{
		char *s = NULL;

		if (base && *base) {
			if (asprintf(&s, "%s+0x%" PRIx64, base, vaddr) < 0)
				s = NULL;
		} else if (asprintf(&s, "[%.12s]+0x%" PRIx64, o->build_id,
				    vaddr) < 0) {
			s = NULL;
		}
		out[0] = (struct ivm_report_frame){ .function = own(rs, s),
						    .raw = true };
	}
	if (!out[0].function)
		return 0;
	rs->nr_raw++;
	return 1;
}

/*
 * Frames of a pc.  A return address is named by pc - 1, inside the call
 * instruction, so a call that ends a function is not named after the next
 * one; an exact pc (the leaf of a running task, the frame after an
 * interrupt or exception) by itself: it may be a function's first
 * instruction, which pc - 1 would name after the function before.
 */
static unsigned int symbolize(void *ctx, enum ivm_node_type type, uint64_t pc,
			      bool exact, struct ivm_report_frame *out,
			      unsigned int max)
{
	struct ivm_frame_names *rs = ctx;
	const struct ivm_sym_location *loc;
	uint64_t back = exact ? 0 : 1;

	if (!pc)
		return 0;
	if (type == IVM_NODE_USER && rs->nr_objects)
		return object_frames(rs, pc, back, out, max);
	if (!rs->syms)
		return 0;
	if (type == IVM_NODE_KERNEL) {
		loc = ivm_syms_kernel(rs->syms, pc - back);
	} else if (IVM_REPORT_USER_TAG(pc) &&
		   IVM_REPORT_USER_TAG(pc) <= rs->nr_build_ids) {
		/*
		 * Its executable is known by build-id: only that binary may
		 * name it (another one at the same addresses would name it
		 * wrong); without it the frame stays raw.
		 */
		loc = ivm_syms_user_in(rs->syms,
				       rs->build_ids[IVM_REPORT_USER_TAG(pc) - 1],
				       IVM_REPORT_USER_PC(pc) - back);
		if (!loc)
			return 0;
	} else {
		loc = ivm_syms_user(rs->syms, IVM_REPORT_USER_PC(pc) - back);
	}
	if (loc->source == IVM_SYM_SOURCE_NONE)
		return 0;
	return copy_location(loc, back, out, max);
}

struct ivm_symbolizer ivm_frame_names_symbolizer(struct ivm_frame_names *fn)
{
	return (struct ivm_symbolizer){ symbolize, fn };
}

struct ivm_syms *ivm_frame_names_syms(struct ivm_frame_names *fn)
{
	return fn->syms;
}

#define PAGE_DOWN(x) ((x) & ~0xfffull)
#define PAGE_UP(x) (((x) + 0xfffull) & ~0xfffull)

/* Place a user mapping by the host copy with build-id id, if any. */
static void host_segment(struct ivm_frame_names *rs, const char *id,
			 struct ivm_mapping *m)
{
	const struct ivm_symfile *f = rs->syms ?
				      ivm_syms_user_file(rs->syms, id) : NULL;
	uint64_t vaddr, memsz, offset;

	if (f && ivm_symfile_exec_segment(f, &vaddr, &memsz, &offset) &&
	    vaddr + memsz > vaddr && PAGE_UP(vaddr + memsz)) {
		m->start = m->lo = PAGE_DOWN(vaddr);
		m->limit = m->hi = PAGE_UP(vaddr + memsz);
		m->offset = PAGE_DOWN(offset);
		m->file = ivm_symfile_path(f);
	}
}

/*
 * Object id's code segment (link-time) from the first "umap" item of it:
 * a process's executable mapping, less its bias.
 */
static bool object_segment(const struct ivm_meta_lines *m, uint32_t id,
			   uint64_t *start, uint64_t *end, uint64_t *offset)
{
	size_t i;

	for (i = 0; i < m->nr; i++) {
		unsigned long long s, e, pgoff, bias;
		unsigned int pid, oid;

		if (strncmp(m->lines[i], "umap: ", 6) ||
		    sscanf(m->lines[i] + 6, "%u %u %llx %llx %llx %llx", &pid,
			   &oid, &s, &e, &pgoff, &bias) != 6 || oid != id ||
		    s >= e)
			continue;
		/* Unsigned wrap is the arithmetic of a bias. */
		*start = s - bias;
		*end = e - bias;
		*offset = pgoff;
		return *start < *end;
	}
	return false;
}

void ivm_frame_names_mappings(struct ivm_frame_names *rs,
			      struct ivm_mappings *maps)
{
	const struct ivm_meta_lines *meta = &rs->meta;
	const char *text = ivm_meta_lines_value(meta, "kernel_text");
	unsigned long long lo, hi;
	struct ivm_error *err = NULL;
	size_t i, k;

	if (text && sscanf(text, "%llx %llx", &lo, &hi) == 2 && lo < hi)
		err = ivm_mappings_add(maps, &(struct ivm_mapping){
			.kind = IVM_MAPPING_KERNEL, .start = lo, .limit = hi,
			.file = "[kernel.kallsyms]",
			.build_id = ivm_meta_lines_value(meta, "kernel_build_id"),
			.lo = lo, .hi = hi });
	for (i = 0; !err && i < rs->nr_modules; i++) {
		const struct ivm_kmodule *km = &rs->kmods[i];
		uint64_t start = km->base;
		char file[IVM_KMODULE_NAME_LEN + 4];

		if (!km->base || !km->size || km->base + km->size < km->base)
			continue;
		/* A .ko's addresses are offsets into its .text. */
		for (k = 0; k < km->nr_sections; k++)
			if (!strcmp(km->sections[k].name, ".text") &&
			    km->sections[k].addr >= km->base &&
			    km->sections[k].addr < km->base + km->size)
				start = km->sections[k].addr;
		snprintf(file, sizeof(file), "%s.ko", km->name);
		err = ivm_mappings_add(maps, &(struct ivm_mapping){
			.kind = IVM_MAPPING_MODULE, .start = start,
			.limit = km->base + km->size, .file = file,
			.build_id = km->build_id, .lo = start,
			.hi = km->base + km->size });
	}
	/* Old profiles: the executables their samples name by build-id. */
	for (i = 0; !err && i < rs->nr_build_ids; i++) {
		struct ivm_mapping m = {
			.kind = IVM_MAPPING_USER, .tag = (uint32_t)i + 1,
			.build_id = rs->build_ids[i], .limit = UINT64_MAX,
			.hi = IVM_REPORT_PIE_SPAN,
		};

		host_segment(rs, rs->build_ids[i], &m);
		err = ivm_mappings_add(maps, &m);
	}
	/* The user objects of the run, each where a process had its code. */
	for (i = 0; !err && i < rs->nr_objects; i++) {
		const struct object *o = &rs->objects[i];
		struct ivm_mapping m = {
			.kind = IVM_MAPPING_USER, .tag = (uint32_t)i + 1,
			.build_id = o->build_id, .file = o->path,
			.limit = UINT64_MAX, .hi = 1ull << IVM_UPC_TAG_SHIFT,
		};
		uint64_t start, end, offset;

		if (!o->build_id[0])
			continue;
		/* A host copy names the file a symbolizer can open. */
		host_segment(rs, o->build_id, &m);
		if (m.limit == UINT64_MAX &&
		    object_segment(meta, (uint32_t)i + 1, &start, &end,
				   &offset)) {
			m.start = m.lo = PAGE_DOWN(start);
			m.limit = m.hi = PAGE_UP(end);
			m.offset = PAGE_DOWN(offset);
		}
		err = ivm_mappings_add(maps, &m);
	}
	if (err) {
		logf_(rs, "mappings: %s", ivm_error_string(err));
		ivm_error_destroy(err);
	}
}

/* ---- kernel symbols and modules of the metadata ---------------------------- */

/*
 * A profile taken without a vmlinux carries the kernel symbols its
 * samples hit ("ksym: ADDR SIZE TYPE NAME").  Turn them into a System.map
 * in an anonymous file, for the symbolizer's System.map source.  Returns
 * the fd (-1: none or no memory); *path gets its /proc path.
 */
static int embedded_system_map(const struct ivm_meta_lines *m, char *path,
			       size_t path_size)
{
	size_t i, n = 0;
	FILE *f;
	int fd;

	for (i = 0; i < m->nr; i++)
		n += !strncmp(m->lines[i], "ksym: ", 6);
	if (!n)
		return -1;
	fd = memfd_create("idlevm-ksyms", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	f = fdopen(dup(fd), "w");
	if (!f) {
		close(fd);
		return -1;
	}
	for (i = 0; i < m->nr; i++) {
		unsigned long long addr, size;
		char type, name[200];

		if (strncmp(m->lines[i], "ksym: ", 6) ||
		    sscanf(m->lines[i] + 6, "%llx %llx %c %199s", &addr, &size,
			   &type, name) != 4)
			continue;
		fprintf(f, "%016llx %c %s\n", addr, type, name);
	}
	if (fclose(f)) {
		close(fd);
		return -1;
	}
	snprintf(path, path_size, "/proc/self/fd/%d", fd);
	return fd;
}

/*
 * The modules the profile recorded ("module: NAME BASE SIZE BUILD-ID
 * SECTIONS", see kmodules.h), for the symbolizer.  A malformed line (a
 * damaged file) is skipped and said once.
 */
static void load_modules(struct ivm_frame_names *rs,
			 const struct ivm_meta_lines *m)
{
	size_t i, n = 0, bad = 0;

	for (i = 0; i < m->nr; i++)
		n += !strncmp(m->lines[i], "module: ", 8);
	if (!n)
		return;
	rs->kmods = calloc(n, sizeof(*rs->kmods));
	rs->modules = calloc(n, sizeof(*rs->modules));
	if (!rs->kmods || !rs->modules)
		return;
	for (i = 0; i < m->nr; i++) {
		struct ivm_error *err;

		if (strncmp(m->lines[i], "module: ", 8))
			continue;
		err = ivm_kmodule_parse(m->lines[i] + 8,
					&rs->kmods[rs->nr_modules]);
		if (err) {
			bad++;
			ivm_error_destroy(err);
			continue;
		}
		rs->nr_modules++;
	}
	for (i = 0; i < m->nr; i++) {
		struct ivm_error *err;

		if (strncmp(m->lines[i], "module_sections: ", 17))
			continue;
		err = ivm_kmodule_parse_sections(m->lines[i] + 17, rs->kmods,
						 rs->nr_modules);
		if (err) {
			bad++;
			ivm_error_destroy(err);
		}
	}
	for (i = 0; i < rs->nr_modules; i++) {
		struct ivm_kmodule *km = &rs->kmods[i];
		struct ivm_syms_module *sm = &rs->modules[i];
		size_t k;

		/* The symbolizer's view of the same sections. */
		sm->sections = calloc(km->nr_sections ? km->nr_sections : 1,
				      sizeof(*sm->sections));
		if (!sm->sections)
			km->nr_sections = 0;
		for (k = 0; k < km->nr_sections; k++)
			((struct ivm_sym_section_addr *)sm->sections)[k] =
				(struct ivm_sym_section_addr){
					km->sections[k].name,
					km->sections[k].addr };
		sm->nr_sections = km->nr_sections;
		sm->name = km->name;
		sm->build_id = km->build_id[0] ? km->build_id : NULL;
		sm->base = km->base;
		sm->size = km->size;
	}
	if (bad)
		logf_(rs, "%zu malformed module records skipped", bad);
}

/*
 * Where module debug files are when not told: next to the profile's
 * vmlinux as images/build-image caches them (DIR/debug/lib/modules/R),
 * else the symbolizer's default, /usr/lib/debug (Debian's -dbg layout).
 */
static char *default_module_dir(const char *vmlinux, const char *release)
{
	const char *slash = vmlinux ? strrchr(vmlinux, '/') : NULL;
	char *dir, *probe;
	bool found;

	if (!slash || !release)
		return NULL;
	if (asprintf(&dir, "%.*s/debug", (int)(slash - vmlinux), vmlinux) < 0)
		return NULL;
	if (asprintf(&probe, "%s/lib/modules/%s", dir, release) < 0) {
		free(dir);
		return NULL;
	}
	found = !access(probe, R_OK | X_OK);
	free(probe);
	if (!found) {
		free(dir);
		return NULL;
	}
	return dir;
}

static void free_modules(struct ivm_frame_names *rs)
{
	size_t i;

	for (i = 0; i < rs->nr_modules; i++) {
		free((void *)rs->modules[i].sections);
		ivm_kmodule_release(&rs->kmods[i]);
	}
	free(rs->modules);
	free(rs->kmods);
	free(rs->module_dir);
}

/* ---- user objects of the metadata ------------------------------------------- */

static int usym_cmp(const void *a, const void *b)
{
	const struct usym *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The "uobject" and "usym" items, into rs->objects. */
static void load_objects(struct ivm_frame_names *rs)
{
	const struct ivm_meta_lines *m = &rs->meta;
	size_t i, bad = 0;

	for (i = 0; i < m->nr; i++) {
		uint8_t id_bytes[IVM_UELF_MAX_BUILD_ID];
		const char *path;
		struct ivm_error *err;
		size_t len, k;
		uint32_t id;
		bool dyn;

		if (strncmp(m->lines[i], "uobject: ", 9))
			continue;
		err = ivm_uobject_parse(m->lines[i] + 9, &id, id_bytes, &len,
					&dyn, &path);
		if (err) {
			ivm_error_destroy(err);
			bad++;
			continue;
		}
		if (id > rs->nr_objects) {
			struct object *n = realloc(rs->objects,
						   id * sizeof(*n));

			if (!n)
				return;
			memset(n + rs->nr_objects, 0,
			       (id - rs->nr_objects) * sizeof(*n));
			rs->objects = n;
			rs->nr_objects = id;
		}
		for (k = 0; k < len; k++)
			snprintf(rs->objects[id - 1].build_id + 2 * k, 3,
				 "%02x", id_bytes[k]);
		/* Restated with its path once that was known: later wins. */
		if (path)
			rs->objects[id - 1].path = path;
	}
	for (i = 0; i < m->nr; i++) {
		struct ivm_error *err;
		struct object *o;
		const char *name;
		uint64_t vaddr, size;
		uint32_t id;

		if (strncmp(m->lines[i], "usym: ", 6))
			continue;
		err = ivm_usym_parse(m->lines[i] + 6, &id, &vaddr, &size,
				     &name);
		if (err || id > rs->nr_objects) {
			ivm_error_destroy(err);
			bad++;
			continue;
		}
		o = &rs->objects[id - 1];
		if (o->nr_usyms == o->cap_usyms) {
			size_t cap = o->cap_usyms ? 2 * o->cap_usyms : 16;
			struct usym *n = realloc(o->usyms, cap * sizeof(*n));

			if (!n)
				continue;
			o->usyms = n;
			o->cap_usyms = cap;
		}
		o->usyms[o->nr_usyms++] = (struct usym){ vaddr, size, name };
	}
	for (i = 0; i < rs->nr_objects; i++)
		if (rs->objects[i].nr_usyms)
			qsort(rs->objects[i].usyms, rs->objects[i].nr_usyms,
			      sizeof(struct usym), usym_cmp);
	if (bad)
		logf_(rs, "%zu malformed user object records skipped", bad);
}

/*
 * A file with debug info or symbols for build-id (hex) id: the symbol
 * directory's executable, else its .debug, else debuginfod's.  Caller
 * frees; NULL when none.
 */
static char *object_file(struct ivm_frame_names *rs, const char *symdir,
			 const char *id)
{
	char *path;
	int fd;

	if (symdir && strlen(id) > 2) {
		if (asprintf(&path, "%s/.build-id/%.2s/%s", symdir, id,
			     id + 2) >= 0) {
			if (!access(path, R_OK))
				return path;
			free(path);
		}
		if (asprintf(&path, "%s/.build-id/%.2s/%s.debug", symdir, id,
			     id + 2) >= 0) {
			if (!access(path, R_OK))
				return path;
			free(path);
		}
	}
	if (!rs->dbgd)
		return NULL;
	/* Length 0: id is hex, as debuginfod takes it. */
	fd = debuginfod_find_debuginfo(rs->dbgd, (const unsigned char *)id,
				       0, &path);
	if (fd < 0) {
		/* Said once for all, at the end of the load. */
		rs->dbgd_misses++;
		if (fd != -ENOENT)
			rs->dbgd_error = -fd;
		return NULL;
	}
	rs->dbgd_hits++;
	close(fd);
	return path;
}

/*
 * syms' find_by_build_id: a supplementary DWARF file (dwz's, which every
 * Debian -dbgsym debug file refers to) from debuginfod, which serves it
 * like any debug file.  The symbol directory was tried before.
 */
static char *supplementary_file(void *ctx, const char *id)
{
	struct ivm_frame_names *rs = ctx;
	char *path;
	int fd;

	if (!rs->dbgd)
		return NULL;
	fd = debuginfod_find_debuginfo(rs->dbgd, (const unsigned char *)id,
				       0, &path);
	if (fd < 0)
		return NULL;
	close(fd);
	return path;
}

/* ---- loading --------------------------------------------------------------- */

static void log_syms(void *ctx, const char *msg)
{
	struct ivm_frame_names *fn = ctx;

	logf_(fn, "%s", msg);
}

void ivm_frame_names_load(struct ivm_frame_names *rs,
			  const struct ivm_frame_names_config *opts,
			  const struct ivm_meta_lines *meta)
{
	const char *slide = ivm_meta_lines_value(meta, "kaslr_offset");
	struct ivm_syms_config cfg = {
		.vmlinux = opts->vmlinux ? opts->vmlinux :
			   ivm_meta_lines_value(meta, "vmlinux"),
		.system_map = opts->system_map,
		.kernel_release = ivm_meta_lines_value(meta, "kernel"),
		.symdir = opts->symdir,
		.find_by_build_id = supplementary_file,
		.log = log_syms,
		.find_ctx = rs,
		.log_ctx = rs,
	};
	const char **binaries = NULL;
	size_t nr_binaries = 0, cap, i;
	struct ivm_sym_error *err;
	char map_path[64];
	int map_fd = -1;

	rs->cfg = opts;
	/* A copy: the objects' paths and names point into its lines. */
	rs->meta.lines = calloc(meta->nr ? meta->nr : 1, sizeof(char *));
	for (i = 0; rs->meta.lines && i < meta->nr; i++)
		if ((rs->meta.lines[rs->meta.nr] = strdup(meta->lines[i])))
			rs->meta.nr++;
	meta = &rs->meta;
	load_objects(rs);
	if (opts->debuginfod && getenv("DEBUGINFOD_URLS") &&
	    *getenv("DEBUGINFOD_URLS"))
		rs->dbgd = debuginfod_begin();

	/* A profile taken without a vmlinux names none. */
	if (cfg.vmlinux && !*cfg.vmlinux)
		cfg.vmlinux = NULL;
	/* The profile's own symbol directory, unless told another. */
	if (!cfg.symdir)
		cfg.symdir = ivm_meta_lines_value(meta, "symdir");
	cap = meta->nr + opts->nr_binaries + rs->nr_build_ids +
	      rs->nr_objects + 1;
	binaries = calloc(cap, sizeof(*binaries));
	if (!binaries)
		goto out;
	/* The binaries the profile was taken with, unless told others. */
	for (i = 0; !opts->binaries && i < meta->nr; i++)
		if (!strncmp(meta->lines[i], "binary: ", 8))
			binaries[nr_binaries++] = meta->lines[i] + 8;
	for (i = 0; opts->binaries && i < opts->nr_binaries; i++)
		binaries[nr_binaries++] = opts->binaries[i];
	/* The executables old samples name, from the symdir. */
	for (i = 0; cfg.symdir && i < rs->nr_build_ids; i++) {
		char *path = object_file(rs, cfg.symdir, rs->build_ids[i]);

		if (!path) {
			logf_(rs, "no executable with build-id %s in %s: its frames stay addresses",
			      rs->build_ids[i], cfg.symdir);
			continue;
		}
		binaries[nr_binaries++] = own(rs, path);
	}
	/* Every object of the run, by build-id. */
	for (i = 0; i < rs->nr_objects; i++) {
		const char *id = rs->objects[i].build_id;
		char *path;

		if (!*id)
			continue;
		path = object_file(rs, cfg.symdir, id);
		if (path)
			binaries[nr_binaries++] = own(rs, path);
	}
	if (rs->dbgd)
		logf_(rs, "debuginfod: debug info for %zu of %zu user objects%s%s",
		      rs->dbgd_hits, rs->dbgd_hits + rs->dbgd_misses,
		      rs->dbgd_error ? "; last error: " : "",
		      rs->dbgd_error ? strerror(rs->dbgd_error) : "");
	cfg.binaries = binaries;
	cfg.nr_binaries = nr_binaries;
	if (slide)
		cfg.kaslr_offset = strtoull(slide, NULL, 0);
	load_modules(rs, meta);
	cfg.modules = rs->modules;
	cfg.nr_modules = rs->nr_modules;
	if (opts->module_dir) {
		cfg.module_dir = opts->module_dir;
	} else {
		rs->module_dir = default_module_dir(cfg.vmlinux,
						    cfg.kernel_release);
		cfg.module_dir = rs->module_dir;
	}
	if (!cfg.system_map) {
		map_fd = embedded_system_map(meta, map_path, sizeof(map_path));
		if (map_fd >= 0) {
			cfg.system_map = map_path;
			if (!cfg.vmlinux)
				logf_(rs, "kernel symbols from the profile itself (the guest's kallsyms)");
		}
	}
	err = ivm_syms_create(&cfg, &rs->syms);
	if (map_fd >= 0)
		close(map_fd);
	if (err) {
		logf_(rs, "no symbols: %s", ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
	}
out:
	free(binaries);
	rs->cfg = NULL;
}
