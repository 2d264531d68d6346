// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "syms.h"

struct ivm_syms {
	struct ivm_symfile *kernel;	/* vmlinux or System.map */
	uint64_t kaslr_offset;
	struct ivm_symfile *binaries[IVM_SYMS_MAX_BINARIES];
	size_t nr_binaries;
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
};

static const struct ivm_sym_location unknown = {
	.source = IVM_SYM_SOURCE_NONE,
};

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
	attach_debug(s, f, symdir);
	s->binaries[s->nr_binaries++] = f;
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

	if (!s->kernel)
		return &unknown;
	/*
	 * Outside the kernel image (a module, or a wrong slide): the image's
	 * symbols would name it after whatever lies nearest.  Modules are
	 * not loaded from the guest's list yet, so they stay raw.
	 */
	if (!ivm_symfile_in_text(s->kernel, link))
		return &unknown;
	return ivm_symfile_lookup(s->kernel, link);
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
