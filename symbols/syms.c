// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "syms.h"

/* A raw module location, by address (open addressing). */
struct raw_slot {
	uint64_t addr;
	struct ivm_sym_location *loc;	/* NULL: empty */
};

struct module {
	char *name;
	uint64_t base, size;		/* 0, 0: unknown */
	struct ivm_sym_section_addr *sections;	/* names owned */
	size_t nr_sections;
	struct ivm_symfile *file;	/* NULL: named raw */
	char *build_id;			/* hex, or NULL: unknown */
	bool tried;			/* its debug file was looked for */
};

/* A .ko under the module directory, by module name ('-' read as '_'). */
struct ko_file {
	char *name;
	char *path;
};

struct ivm_syms {
	struct ivm_symfile *kernel;	/* vmlinux or System.map */
	struct module *modules;
	size_t nr_modules;
	struct ko_file *kos;		/* sorted by name */
	size_t nr_kos;
	bool kos_scanned;
	/*
	 * Where module debug files are looked for, copied from the config:
	 * a module's file is opened at the first address inside it, so a
	 * report pays (and logs) only for the modules its samples touch.
	 */
	char *symdir, *module_dir, *release;
	struct raw_slot *raw;
	size_t raw_size, raw_used;	/* raw_size: power of two */
	uint64_t kaslr_offset;
	struct ivm_symfile *binaries[IVM_SYMS_MAX_BINARIES];
	size_t nr_binaries;
	char *(*find_by_build_id)(void *ctx, const char *build_id_hex);
	void *find_ctx;
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
};

static const struct ivm_sym_location unknown = {
	.source = IVM_SYM_SOURCE_NONE,
};

static size_t hash_addr(uint64_t addr)
{
	addr ^= addr >> 33;
	addr *= 0xff51afd7ed558ccdull;
	addr ^= addr >> 33;
	return (size_t)addr;
}

static void logf_(struct ivm_syms *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void logf_(struct ivm_syms *s, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (!s->log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	s->log(s->log_ctx, buf);
}

char *ivm_syms_build_id_path(const char *symdir, const char *hex)
{
	size_t i, n = strlen(hex);
	char *path;

	if (n < 4 || n % 2)
		return NULL;
	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)hex[i]))
			return NULL;
	if (asprintf(&path, "%s/.build-id/%.2s/%s.debug", symdir, hex,
		     hex + 2) < 0)
		return NULL;
	return path;
}

#define DEBUG_ROOT	"/usr/lib/debug"

/*
 * Give f's DWARF the supplementary file (dwz) it refers to when libdw did
 * not find it itself: from symdir by build-id, or at the path the link
 * records taken as under symdir (a copy of /usr/lib/debug, as unpacked
 * -dbgsym packages give: they ship the file under .dwz/ with no build-id
 * link), else wherever the caller finds files (debuginfod).  Whichever
 * is found, its build-id is checked.
 */
static void attach_alt(struct ivm_syms *s, struct ivm_symfile *f,
		       const char *symdir)
{
	const char *recorded = NULL;
	const char *hex = ivm_symfile_missing_alt(f, &recorded);
	struct ivm_sym_error *err;
	char *path = NULL;

	if (!hex)
		return;
	if (symdir) {
		path = ivm_syms_build_id_path(symdir, hex);
		if (path && access(path, R_OK)) {
			free(path);
			path = NULL;
		}
	}
	if (!path && symdir && recorded && recorded[0] == '/' &&
	    !strstr(recorded, "/../")) {
		const char *rest = recorded;

		if (!strncmp(rest, DEBUG_ROOT "/", sizeof(DEBUG_ROOT)))
			rest += sizeof(DEBUG_ROOT) - 1;
		if (asprintf(&path, "%s%s", symdir, rest) < 0)
			path = NULL;
		else if (access(path, R_OK)) {
			free(path);
			path = NULL;
		}
	}
	if (!path && s->find_by_build_id)
		path = s->find_by_build_id(s->find_ctx, hex);
	if (!path) {
		logf_(s, "%s: its supplementary DWARF file (build-id %s) was not found: some functions and inline frames stay unnamed",
		      ivm_symfile_path(f), hex);
		return;
	}
	err = ivm_symfile_set_alt(f, path);
	if (err) {
		logf_(s, "%s", ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
	}
	free(path);
}

/*
 * Give f the DWARF of its separate debug file in symdir, if f lacks DWARF
 * and a file with the same build-id is there.
 */
static void attach_debug(struct ivm_syms *s, struct ivm_symfile *f,
			 const char *symdir)
{
	const char *hex = ivm_symfile_build_id_hex(f);
	struct ivm_symfile *debug;
	struct ivm_sym_error *err;
	char *path;

	if (ivm_symfile_has_dwarf(f) || !symdir)
		return;
	if (!*hex) {
		logf_(s, "%s: no debuginfo and no build-id to find it by: function names only",
		      ivm_symfile_path(f));
		return;
	}
	path = ivm_syms_build_id_path(symdir, hex);
	if (!path)
		return;
	if (access(path, R_OK)) {
		logf_(s, "%s: no debuginfo, none in %s for build-id %s: function names only",
		      ivm_symfile_path(f), symdir, hex);
		free(path);
		return;
	}
	err = ivm_symfile_open_elf(path, &debug);
	if (err) {
		logf_(s, "%s", ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
		free(path);
		return;
	}
	if (strcmp(ivm_symfile_build_id_hex(debug), hex)) {
		logf_(s, "%s: build-id %s does not match %s (%s): not used",
		      path, ivm_symfile_build_id_hex(debug),
		      ivm_symfile_path(f), hex);
		ivm_symfile_destroy(debug);
	} else {
		logf_(s, "%s: debuginfo from %s", ivm_symfile_path(f), path);
		attach_alt(s, debug, symdir);
		ivm_symfile_set_debug(f, debug);
	}
	free(path);
}

static void load_kernel(struct ivm_syms *s, const struct ivm_syms_config *cfg)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *f = NULL;
	const char *release;

	if (cfg->vmlinux) {
		err = ivm_symfile_open_elf(cfg->vmlinux, &f);
		if (err) {
			logf_(s, "no kernel debuginfo: %s",
			      ivm_sym_error_string(err));
			ivm_sym_error_destroy(err);
		}
	}
	if (f) {
		release = ivm_symfile_kernel_release(f);
		if (!cfg->kernel_release) {
			logf_(s, "%s: the profile does not say which kernel ran: names are not checked",
			      cfg->vmlinux);
		} else if (!release) {
			logf_(s, "%s: no linux_banner to check against kernel %s: not used",
			      cfg->vmlinux, cfg->kernel_release);
			ivm_symfile_destroy(f);
			f = NULL;
		} else if (strcmp(release, cfg->kernel_release)) {
			logf_(s, "%s is kernel %s but the guest ran %s: not used (wrong names otherwise)",
			      cfg->vmlinux, release, cfg->kernel_release);
			ivm_symfile_destroy(f);
			f = NULL;
		}
	}
	if (f) {
		attach_debug(s, f, cfg->symdir);
		if (!ivm_symfile_has_dwarf(f))
			logf_(s, "%s: no DWARF: kernel frames without inline frames or file:line",
			      cfg->vmlinux);
		s->kernel = f;
		return;
	}
	if (cfg->system_map) {
		err = ivm_symfile_open_system_map(cfg->system_map, &f);
		if (err) {
			logf_(s, "no kernel symbols: %s",
			      ivm_sym_error_string(err));
			ivm_sym_error_destroy(err);
			return;
		}
		logf_(s, "kernel symbols from %s (function names only)",
		      cfg->system_map);
		s->kernel = f;
	}
}

static void load_binary(struct ivm_syms *s, const char *name,
			const char *symdir)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *f;
	const char *base = strrchr(name, '/');
	char *alt = NULL;

	base = base ? base + 1 : name;
	/* A name not found as given is looked for in the symbol directory. */
	if (access(name, R_OK) && symdir) {
		if (asprintf(&alt, "%s/%s", symdir, name) >= 0 &&
		    access(alt, R_OK)) {
			free(alt);
			alt = NULL;
			if (asprintf(&alt, "%s/%s", symdir, base) < 0)
				alt = NULL;
		}
	}
	err = ivm_symfile_open_elf(alt ? alt : name, &f);
	free(alt);
	if (err) {
		logf_(s, "no user symbols: %s", ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
		return;
	}
	attach_alt(s, f, symdir);
	attach_debug(s, f, symdir);
	s->binaries[s->nr_binaries++] = f;
}

/* ---- kernel modules ---------------------------------------------------- */

#define MAX_KO_FILES	65536	/* a distribution kernel has ~4000 */
#define MAX_KO_DEPTH	16
#define MAX_RAW_OFFSET	(16u << 20)	/* a section's code, at most */

static void normalize_name(char *name)
{
	for (; *name; name++)
		if (*name == '-')
			*name = '_';
}

static int ko_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ko_file *)a)->name,
		      ((const struct ko_file *)b)->name);
}

/*
 * Collect the .ko files under dir (bounded depth and count: the directory
 * is the user's, but a loop of symlinks must not hang us; symlinks are not
 * followed).
 */
static void scan_ko_dir(struct ivm_syms *s, const char *dir, int depth,
			size_t *cap)
{
	DIR *d;
	struct dirent *e;

	if (depth > MAX_KO_DEPTH || s->nr_kos >= MAX_KO_FILES)
		return;
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)) && s->nr_kos < MAX_KO_FILES) {
		size_t len = strlen(e->d_name);
		unsigned char type;
		char *path;

		if (e->d_name[0] == '.')
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
			break;
		type = e->d_type;
		if (type == DT_UNKNOWN) {	/* some filesystems: ask */
			struct stat st;

			type = lstat(path, &st) ? DT_UNKNOWN :
			       S_ISDIR(st.st_mode) ? DT_DIR :
			       S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type == DT_DIR) {
			scan_ko_dir(s, path, depth + 1, cap);
			free(path);
			continue;
		}
		if (type != DT_REG || len < 4 ||
		    strcmp(e->d_name + len - 3, ".ko")) {
			free(path);
			continue;
		}
		if (s->nr_kos == *cap) {
			size_t ncap = *cap ? *cap * 2 : 256;
			struct ko_file *n = realloc(s->kos, ncap * sizeof(*n));

			if (!n) {
				free(path);
				break;
			}
			s->kos = n;
			*cap = ncap;
		}
		s->kos[s->nr_kos].name = strndup(e->d_name, len - 3);
		if (!s->kos[s->nr_kos].name) {
			free(path);
			break;
		}
		normalize_name(s->kos[s->nr_kos].name);
		s->kos[s->nr_kos++].path = path;
	}
	closedir(d);
}

static const char *find_ko(struct ivm_syms *s, const char *name)
{
	struct ko_file key, *k;
	char *norm;

	if (!s->nr_kos)
		return NULL;
	norm = strdup(name);
	if (!norm)
		return NULL;
	normalize_name(norm);
	key.name = norm;
	k = bsearch(&key, s->kos, s->nr_kos, sizeof(*s->kos), ko_cmp);
	free(norm);
	return k ? k->path : NULL;
}

/*
 * Open m's debug file at path; NULL (and a log line saying why) unless it
 * is the module the guest ran, as far as its build-id tells.
 */
static struct ivm_symfile *open_module_file(struct ivm_syms *s,
					    const struct module *m,
					    const char *build_id,
					    const char *path)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *f;
	const char *hex;

	err = ivm_symfile_open_module(path, m->name, m->sections,
				      m->nr_sections, &f);
	if (err) {
		logf_(s, "module %s: %s: named raw", m->name,
		      ivm_sym_error_string(err));
		ivm_sym_error_destroy(err);
		return NULL;
	}
	hex = ivm_symfile_build_id_hex(f);
	if (!build_id) {
		logf_(s, "module %s: symbols from %s (the guest's build-id is unknown: not checked)",
		      m->name, path);
	} else if (strcasecmp(hex, build_id)) {
		logf_(s, "module %s: %s has build-id %s, the guest's is %s: not used, named raw",
		      m->name, path, *hex ? hex : "(none)", build_id);
		ivm_symfile_destroy(f);
		return NULL;
	} else {
		logf_(s, "module %s: symbols from %s", m->name, path);
	}
	if (!ivm_symfile_has_dwarf(f))
		logf_(s, "module %s: %s has no DWARF: function names only",
		      m->name, path);
	return f;
}

static void load_module_file(struct ivm_syms *s, struct module *m)
{
	const char *path = NULL, *build_id = m->build_id;
	char *by_id = NULL, *dir;

	if (build_id && s->symdir) {
		by_id = ivm_syms_build_id_path(s->symdir, build_id);
		if (by_id && !access(by_id, R_OK)) {
			m->file = open_module_file(s, m, build_id, by_id);
			if (m->file) {
				free(by_id);
				return;
			}
		}
		free(by_id);
	}
	if (!s->release) {
		logf_(s, "module %s: the profile does not say which kernel ran: no module files looked for, named raw",
		      m->name);
		return;
	}
	if (!s->kos_scanned) {
		size_t cap = 0;

		s->kos_scanned = true;
		if (asprintf(&dir, "%s/lib/modules/%s", s->module_dir ?
			     s->module_dir : IVM_SYMS_MODULE_DIR,
			     s->release) < 0)
			return;
		scan_ko_dir(s, dir, 0, &cap);
		if (s->nr_kos)
			qsort(s->kos, s->nr_kos, sizeof(*s->kos), ko_cmp);
		else
			logf_(s, "no module debug files in %s: modules named raw",
			      dir);
		free(dir);
	}
	path = find_ko(s, m->name);
	if (!path) {
		if (s->nr_kos)
			logf_(s, "module %s: no %s.ko in %s/lib/modules/%s: named raw",
			      m->name, m->name, s->module_dir ?
			      s->module_dir : IVM_SYMS_MODULE_DIR,
			      s->release);
		return;
	}
	m->file = open_module_file(s, m, build_id, path);
}

static void load_modules(struct ivm_syms *s, const struct ivm_syms_config *cfg)
{
	size_t i, j, nr = cfg->nr_modules;

	if (!nr || !cfg->modules)
		return;
	if ((cfg->symdir && !(s->symdir = strdup(cfg->symdir))) ||
	    (cfg->module_dir && !(s->module_dir = strdup(cfg->module_dir))) ||
	    (cfg->kernel_release &&
	     !(s->release = strdup(cfg->kernel_release))))
		return;
	if (nr > IVM_SYMS_MAX_MODULES) {
		logf_(s, "%zu modules: the first %d used", nr,
		      IVM_SYMS_MAX_MODULES);
		nr = IVM_SYMS_MAX_MODULES;
	}
	s->modules = calloc(nr, sizeof(*s->modules));
	if (!s->modules)
		return;
	for (i = 0; i < nr; i++) {
		const struct ivm_syms_module *cm = &cfg->modules[i];
		struct module *m = &s->modules[s->nr_modules];

		if (!cm->name || !*cm->name)
			continue;
		m->name = strdup(cm->name);
		m->sections = calloc(cm->nr_sections ? cm->nr_sections : 1,
				     sizeof(*m->sections));
		if (!m->name || !m->sections) {
			free(m->name);
			free(m->sections);
			break;
		}
		for (j = 0; j < cm->nr_sections; j++) {
			if (!cm->sections[j].name)
				continue;
			m->sections[m->nr_sections].name =
				strdup(cm->sections[j].name);
			if (!m->sections[m->nr_sections].name)
				break;
			m->sections[m->nr_sections++].addr =
				cm->sections[j].addr;
		}
		m->base = cm->base;
		m->size = cm->base + cm->size > cm->base ? cm->size : 0;
		if (cm->build_id && *cm->build_id)
			m->build_id = strdup(cm->build_id);
		s->nr_modules++;
	}
}

static bool code_section_name(const char *name)
{
	size_t len = strlen(name);

	/* .text, .text.unlikely, .exit.text, .noinstr.text, .sched.text... */
	return strncmp(name, ".init", 5) &&
	       (!strncmp(name, ".text", 5) ||
		(len >= 5 && !strcmp(name + len - 5, ".text")));
}

/*
 * Which module's code holds addr, known only by load addresses: in its
 * core memory when the profile gave it; else after one of its code
 * sections, with no section of any module starting in between.
 */
static const struct module *raw_module(const struct ivm_syms *s,
				       uint64_t addr,
				       const struct ivm_sym_section_addr **sec)
{
	const struct module *best_m = NULL;
	const struct ivm_sym_section_addr *best = NULL;
	size_t i, j;

	*sec = NULL;
	for (i = 0; i < s->nr_modules; i++) {
		const struct module *m = &s->modules[i];

		if (m->size && addr >= m->base && addr - m->base < m->size)
			return m;
	}
	for (i = 0; i < s->nr_modules; i++)
		for (j = 0; j < s->modules[i].nr_sections; j++) {
			const struct ivm_sym_section_addr *x =
				&s->modules[i].sections[j];

			if (x->addr <= addr && (!best || x->addr > best->addr) &&
			    strncmp(x->name, ".init", 5)) {
				best = x;
				best_m = &s->modules[i];
			}
		}
	if (!best || !code_section_name(best->name) ||
	    addr - best->addr >= MAX_RAW_OFFSET || best_m->size)
		return NULL;
	*sec = best;
	return best_m;
}

static const struct ivm_sym_location *raw_location(struct ivm_syms *s,
						   uint64_t addr)
{
	const struct ivm_sym_section_addr *sec;
	const struct module *m = raw_module(s, addr, &sec);
	struct ivm_sym_location *loc;
	char *name;
	size_t i;
	int n;

	if (!m)
		return &unknown;
	if (s->raw_size)
		for (i = hash_addr(addr) & (s->raw_size - 1); s->raw[i].loc;
		     i = (i + 1) & (s->raw_size - 1))
			if (s->raw[i].addr == addr)
				return s->raw[i].loc;
	if ((s->raw_used + 1) * 2 > s->raw_size) {
		size_t nsize = s->raw_size ? s->raw_size * 2 : 256, j;
		struct raw_slot *nr = calloc(nsize, sizeof(*nr));

		if (!nr)
			return &unknown;
		for (j = 0; j < s->raw_size; j++) {
			if (!s->raw[j].loc)
				continue;
			for (i = hash_addr(s->raw[j].addr) & (nsize - 1);
			     nr[i].loc; i = (i + 1) & (nsize - 1))
				;
			nr[i] = s->raw[j];
		}
		free(s->raw);
		s->raw = nr;
		s->raw_size = nsize;
	}
	/* The name lives right after the location, in the same block. */
	n = sec ? snprintf(NULL, 0, "%s:%s+0x%" PRIx64, m->name, sec->name,
			   addr - sec->addr) :
		  snprintf(NULL, 0, "%s:+0x%" PRIx64, m->name, addr - m->base);
	if (n < 0)
		return &unknown;
	loc = calloc(1, sizeof(*loc) + sizeof(loc->frames[0]) + (size_t)n + 1);
	if (!loc)
		return &unknown;
	name = (char *)loc + sizeof(*loc) + sizeof(loc->frames[0]);
	if (sec)
		snprintf(name, (size_t)n + 1, "%s:%s+0x%" PRIx64, m->name,
			 sec->name, addr - sec->addr);
	else
		snprintf(name, (size_t)n + 1, "%s:+0x%" PRIx64, m->name,
			 addr - m->base);
	loc->source = IVM_SYM_SOURCE_MODULE;
	loc->nr_frames = 1;
	loc->offset = sec ? addr - sec->addr : addr - m->base;
	loc->frames[0].function = name;
	for (i = hash_addr(addr) & (s->raw_size - 1); s->raw[i].loc;
	     i = (i + 1) & (s->raw_size - 1))
		;
	s->raw[i].addr = addr;
	s->raw[i].loc = loc;
	s->raw_used++;
	return loc;
}

static const struct ivm_sym_location *module_location(struct ivm_syms *s,
						      uint64_t addr)
{
	const struct ivm_sym_section_addr *sec;
	struct module *m = (struct module *)raw_module(s, addr, &sec);
	size_t i;

	/* The module holding addr: its file is looked for the first time. */
	if (m && !m->tried) {
		m->tried = true;
		load_module_file(s, m);
	}
	for (i = 0; i < s->nr_modules; i++)
		if (s->modules[i].file &&
		    ivm_symfile_in_text(s->modules[i].file, addr))
			return ivm_symfile_lookup(s->modules[i].file, addr);
	return raw_location(s, addr);
}

struct ivm_sym_error *ivm_syms_create(const struct ivm_syms_config *cfg,
				      struct ivm_syms **ret)
{
	struct ivm_syms *s = calloc(1, sizeof(*s));
	size_t i;

	if (!s)
		return &ivm_sym_enomem;
	s->log = cfg->log;
	s->log_ctx = cfg->log_ctx;
	s->find_by_build_id = cfg->find_by_build_id;
	s->find_ctx = cfg->find_ctx;
	s->kaslr_offset = cfg->kaslr_offset;
	load_kernel(s, cfg);
	for (i = 0; i < cfg->nr_binaries; i++) {
		if (s->nr_binaries == IVM_SYMS_MAX_BINARIES) {
			logf_(s, "more than %d binaries: %s and later ignored",
			      IVM_SYMS_MAX_BINARIES, cfg->binaries[i]);
			break;
		}
		load_binary(s, cfg->binaries[i], cfg->symdir);
	}
	load_modules(s, cfg);
	*ret = s;
	return NULL;
}

void ivm_syms_destroy(struct ivm_syms *s)
{
	size_t i;

	if (!s)
		return;
	ivm_symfile_destroy(s->kernel);
	for (i = 0; i < s->nr_binaries; i++)
		ivm_symfile_destroy(s->binaries[i]);
	for (i = 0; i < s->nr_modules; i++) {
		struct module *m = &s->modules[i];
		size_t j;

		ivm_symfile_destroy(m->file);
		for (j = 0; j < m->nr_sections; j++)
			free((char *)m->sections[j].name);
		free(m->sections);
		free(m->name);
		free(m->build_id);
	}
	free(s->modules);
	free(s->symdir);
	free(s->module_dir);
	free(s->release);
	for (i = 0; i < s->nr_kos; i++) {
		free(s->kos[i].name);
		free(s->kos[i].path);
	}
	free(s->kos);
	for (i = 0; i < s->raw_size; i++)
		free(s->raw[i].loc);
	free(s->raw);
	free(s);
}

const char *ivm_syms_kernel_source(const struct ivm_syms *s)
{
	return s->kernel ? ivm_symfile_path(s->kernel) : NULL;
}

const struct ivm_sym_location *ivm_syms_kernel(struct ivm_syms *s,
					       uint64_t addr)
{
	uint64_t link = addr - s->kaslr_offset;

	/*
	 * Outside the kernel image (a module, or a wrong slide) the image's
	 * symbols would name an address after whatever lies nearest: only
	 * its own text is looked up there.  Modules are placed at run-time
	 * addresses, which KASLR does not slide further.
	 */
	if (s->kernel && ivm_symfile_in_text(s->kernel, link))
		return ivm_symfile_lookup(s->kernel, link);
	return module_location(s, addr);
}

const struct ivm_sym_location *ivm_syms_user_in(struct ivm_syms *s,
						const char *build_id,
						uint64_t addr)
{
	size_t i;

	for (i = 0; i < s->nr_binaries; i++) {
		const char *hex = ivm_symfile_build_id_hex(s->binaries[i]);

		if (hex && *hex && !strcasecmp(hex, build_id))
			return ivm_symfile_in_text(s->binaries[i], addr) ?
			       ivm_symfile_lookup(s->binaries[i], addr) : NULL;
	}
	return NULL;
}

const struct ivm_symfile *ivm_syms_user_file(const struct ivm_syms *s,
					     const char *build_id)
{
	size_t i;

	for (i = 0; s && i < s->nr_binaries; i++) {
		const char *hex = ivm_symfile_build_id_hex(s->binaries[i]);

		if (hex && *hex && !strcasecmp(hex, build_id))
			return s->binaries[i];
	}
	return NULL;
}

const struct ivm_sym_location *ivm_syms_user(struct ivm_syms *s,
					     uint64_t addr)
{
	size_t i;

	/* Static non-PIE binaries: link-time addresses are runtime ones. */
	for (i = 0; i < s->nr_binaries; i++)
		if (ivm_symfile_in_text(s->binaries[i], addr))
			return ivm_symfile_lookup(s->binaries[i], addr);
	return &unknown;
}
