/* SPDX-License-Identifier: MIT */
/*
 * The symbols of one guest profile: its kernel (vmlinux debuginfo, or its
 * symbol table, or a System.map) and the user binaries it ran, each found
 * by path or by build-id in a symbol directory laid out as debuginfod and
 * distributions do (DIR/.build-id/xx/rest.debug).
 *
 * Wrong names are worse than none: a vmlinux whose linux_banner names
 * another release than the one the profile recorded is not used (kernel
 * frames fall back to a System.map if one is given, else stay raw), a
 * separate .debug file is used only when its build-id matches, and every
 * such decision is reported through the log hook.  The library never
 * prints on its own.
 */
#ifndef IVM_SYMS_H
#define IVM_SYMS_H

#include <stddef.h>
#include <stdint.h>

#include "sym_error.h"
#include "symfile.h"

#define IVM_SYMS_MAX_BINARIES	1024
#define IVM_SYMS_MAX_MODULES	4096
#define IVM_SYMS_MODULE_DIR	"/usr/lib/debug"

/*
 * One kernel module the guest had loaded, as the profile recorded it
 * (the guest's /proc/modules, and the files of /sys/module/NAME/sections).
 */
struct ivm_syms_module {
	const char *name;		/* "virtio_console" */
	const char *build_id;		/* hex, or NULL: unknown (then the
					   file found is used unchecked, and
					   the log says so) */
	uint64_t base, size;		/* its core memory, or 0, 0: unknown
					   (then the sections bound it) */
	const struct ivm_sym_section_addr *sections;
	size_t nr_sections;
};

struct ivm_syms_config {
	const char *vmlinux;		/* NULL: no kernel debuginfo */
	const char *system_map;		/* fallback kernel symbols, or NULL */
	const char *kernel_release;	/* what ran, from the profile; NULL:
					   cannot be checked (said in the log) */
	uint64_t kaslr_offset;		/* runtime minus link-time address */
	const char *const *binaries;	/* user binaries (paths, or names to
					   look for in symdir) */
	size_t nr_binaries;
	const char *symdir;		/* NULL: none */
	/*
	 * The guest's modules.  Each module's debug file is found by its
	 * build-id in symdir, else as NAME.ko at any depth under
	 * module_dir/lib/modules/RELEASE/ ('-' and '_' alike; RELEASE is
	 * kernel_release; module_dir NULL: /usr/lib/debug, the -dbg
	 * packages' layout), and used only when its build-id matches.  A
	 * module without a usable file is named raw, source
	 * IVM_SYM_SOURCE_MODULE: "NAME:+0xOFFSET" from its base, or
	 * "NAME:SECTION+0xOFFSET" when the base is unknown.  At most
	 * IVM_SYMS_MAX_MODULES are used.
	 */
	const struct ivm_syms_module *modules;
	size_t nr_modules;
	const char *module_dir;
	/*
	 * Where else a file is found by build-id (hex), after symdir: a
	 * path the callee malloc'ed, or NULL.  Asked for the supplementary
	 * DWARF files (dwz) the debug files refer to, which debuginfod
	 * serves like any debug file.  NULL: nowhere else.
	 */
	char *(*find_by_build_id)(void *ctx, const char *build_id_hex);
	void *find_ctx;
	/* Warnings and decisions, one line each without a newline. */
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
};

struct ivm_syms;

/*
 * Load what the config names.  Missing or mismatched files are not errors:
 * they are logged and their frames fall back; the only error is running
 * out of memory.  The config's strings are copied as needed.
 */
struct ivm_sym_error *ivm_syms_create(const struct ivm_syms_config *cfg,
				      struct ivm_syms **ret);
void ivm_syms_destroy(struct ivm_syms *s);

/*
 * Resolve a kernel address as the guest ran it (KASLR-slid; in a module:
 * by that module's debug file, else raw as above) or a user address.  For
 * a return address pass pc - 1.  Never NULL: an address no source knows
 * has source NONE.  Owned by s.
 */
const struct ivm_sym_location *ivm_syms_kernel(struct ivm_syms *s,
					       uint64_t addr);
const struct ivm_sym_location *ivm_syms_user(struct ivm_syms *s,
					     uint64_t addr);

/*
 * A user address (link-time, for a PIE) in the binary whose build-id is
 * build_id (hex) only: NULL when no binary given has it or addr is not in
 * its text.  With several executables loaded at the same addresses (two
 * PIEs, two fixed-address programs) this is the only lookup that cannot
 * name a frame after the wrong one.
 */
const struct ivm_sym_location *ivm_syms_user_in(struct ivm_syms *s,
						const char *build_id,
						uint64_t addr);

/*
 * The user binary whose build-id is build_id (hex), as given or found in
 * the symbol directory (possibly only its .debug file), or NULL.  Owned
 * by s.
 */
const struct ivm_symfile *ivm_syms_user_file(const struct ivm_syms *s,
					     const char *build_id);

/* The kernel symbol source in use (NULL: none), for the report header. */
const char *ivm_syms_kernel_source(const struct ivm_syms *s);

/*
 * Path of the debug file for a build-id in symdir:
 * "symdir/.build-id/xx/rest.debug".  Caller frees; NULL on bad input
 * (odd length, non-hex, too short) or no memory.
 */
char *ivm_syms_build_id_path(const char *symdir, const char *build_id_hex);

#endif /* IVM_SYMS_H */
