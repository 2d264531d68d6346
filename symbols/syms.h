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

#define IVM_SYMS_MAX_BINARIES	16

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
 * Resolve a kernel address as the guest ran it (KASLR-slid) or a user
 * address.  For a return address pass pc - 1.  Never NULL: an address no
 * source knows has source NONE.  Owned by s.
 */
const struct ivm_sym_location *ivm_syms_kernel(struct ivm_syms *s,
					       uint64_t addr);
const struct ivm_sym_location *ivm_syms_user(struct ivm_syms *s,
					     uint64_t addr);

/* The kernel symbol source in use (NULL: none), for the report header. */
const char *ivm_syms_kernel_source(const struct ivm_syms *s);

/*
 * Path of the debug file for a build-id in symdir:
 * "symdir/.build-id/xx/rest.debug".  Caller frees; NULL on bad input
 * (odd length, non-hex, too short) or no memory.
 */
char *ivm_syms_build_id_path(const char *symdir, const char *build_id_hex);

#endif /* IVM_SYMS_H */
