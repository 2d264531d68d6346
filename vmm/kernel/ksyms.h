/* SPDX-License-Identifier: MIT */
/*
 * ksyms: the guest kernel's link-time symbol addresses.
 *
 * From the .symtab of a vmlinux ELF (libelf), from a System.map text
 * ("ffffffff81000000 T _text" per line; /proc/kallsyms lines with a
 * trailing "\t[module]" are accepted too), or from the guest kernel's own
 * compressed kallsyms tables in its memory (vmm/kernel/kallsyms_guest.h, through
 * ivm_ksyms_adopt()).  Addresses are link-time: add
 * the KASLR slide (vmm/kernel/kernel_layout.h) to get run-time addresses of
 * symbols in the kernel image.  Per-CPU variables of x86-64 kernels before
 * 6.15 have small "addresses" (offsets into the per-CPU area, not slid).
 *
 * Lookups by name (exact; a global symbol wins over a local one of the same
 * name) and by address (the symbol at or below it) are binary searches over
 * arrays sorted once at load.
 *
 * Hostile input: System.map text may come from anywhere.  Lines that do
 * not parse (bad hex, missing fields, over-long names, NUL bytes, no final
 * newline) are skipped and counted, never trusted in part; the text and
 * the number of symbols are capped.
 */
#ifndef IVM_KSYMS_H
#define IVM_KSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct ivm_ksyms;

/* Caps on hostile input. */
#define IVM_KSYMS_MAX_TEXT (256u << 20)	/* System.map bytes */
#define IVM_KSYMS_MAX_SYMS (4u << 20)	/* symbols kept */
#define IVM_KSYMS_MAX_NAME 512		/* KSYM_NAME_LEN of 6.1 */

struct ivm_ksym {
	const char *name;	/* owned by the ivm_ksyms */
	uint64_t addr;		/* link-time address */
	uint64_t size;		/* 0 when unknown (System.map) */
	char type;		/* nm-style type letter: 'T', 'd', ... */
};

/*
 * Load the ELF symbol table of path (.symtab, else .dynsym), e.g. a
 * vmlinux.  Section and file symbols and undefined ones are left out.
 */
struct ivm_error *ivm_ksyms_load_elf(const char *path, struct ivm_ksyms **ret);

/* Load a System.map (or kallsyms) file; capped at IVM_KSYMS_MAX_TEXT. */
struct ivm_error *ivm_ksyms_load_system_map(const char *path,
					    struct ivm_ksyms **ret);

/*
 * Parse System.map text of len bytes (need not be NUL-terminated; copied).
 * Fails when no line at all parses.
 */
struct ivm_error *ivm_ksyms_parse_system_map(const char *text, size_t len,
					     struct ivm_ksyms **ret);

/*
 * Make a table of symbols decoded elsewhere (e.g. the guest's kallsyms,
 * vmm/kernel/kallsyms_guest.h): syms[0..nr) with names pointing into arena, both
 * malloc'd; takes ownership of both, also on failure.  The array is
 * sorted in place.  what names the source in errors.  Fails when nr is 0
 * or above IVM_KSYMS_MAX_SYMS.
 */
struct ivm_error *ivm_ksyms_adopt(struct ivm_ksym *syms, size_t nr,
				  char *arena, const char *what,
				  struct ivm_ksyms **ret);

void ivm_ksyms_destroy(struct ivm_ksyms *ksyms);

size_t ivm_ksyms_count(const struct ivm_ksyms *ksyms);
/* Lines of a System.map text that were skipped as malformed. */
size_t ivm_ksyms_malformed(const struct ivm_ksyms *ksyms);

/* Symbol i (< ivm_ksyms_count) in address order, or NULL. */
const struct ivm_ksym *ivm_ksyms_at(const struct ivm_ksyms *ksyms, size_t i);

/*
 * The symbol named name, or NULL.  The pointer is valid until
 * ivm_ksyms_destroy().
 */
const struct ivm_ksym *ivm_ksyms_find(const struct ivm_ksyms *ksyms,
				      const char *name);

/* Address of symbol name; IVM_ERROR_NOT_FOUND naming it when absent. */
struct ivm_error *ivm_ksyms_lookup(const struct ivm_ksyms *ksyms,
				   const char *name, uint64_t *ret);

/*
 * The symbol with the greatest address <= addr (ties: a global one), or
 * NULL when addr is below every symbol.  *offset (may be NULL) gets addr
 * minus the symbol's address.  No upper bound is applied unless the symbol
 * has a size: callers decide whether a large offset is plausible.
 */
const struct ivm_ksym *ivm_ksyms_symbolize(const struct ivm_ksyms *ksyms,
					   uint64_t addr, uint64_t *offset);

#endif /* IVM_KSYMS_H */
