/* SPDX-License-Identifier: MIT */
/*
 * One symbol source: an ELF file (a guest kernel's vmlinux, a guest kernel
 * module, a user binary or its separate .debug file) or a System.map.
 *
 * An address is resolved to a location: its function and, where DWARF has
 * them, the chain of inline frames with file:line for each.  The best
 * source available answers: DWARF first, then the ELF symbol table (or
 * System.map), else the location is unknown.  Results are cached, so a
 * profile pays for each distinct address once.
 *
 * The answers are eu-addr2line's (elfutils): the same inline chain (the
 * innermost scope chosen as dwarf_getscopes() does) and the same
 * file:line, checked by tests/bench/bench_symbols and the unit tests.
 *
 * DWARF is indexed lazily: the unit of an address comes from
 * .debug_aranges (the ranges of units it lacks, indexed once, when it
 * misses); a unit's top-level functions are scanned only as far as
 * lookups need, a function's inlined calls are indexed at the first
 * address in it, and a unit's line table is read once, directly
 * (dwarf_lines.h), libdw being the fallback.  So a 600 MB vmlinux opens in
 * tens of milliseconds and a profile pays only for the functions and units
 * its addresses touch, once.
 *
 * Symbol files are untrusted input: a truncated or corrupt file fails to
 * open with an IVM_SYM_ERROR_FORMAT error naming the file, or (when only
 * the DWARF is damaged) opens with DWARF disabled; lookups never read out
 * of bounds and never crash.
 */
#ifndef IVM_SYMFILE_H
#define IVM_SYMFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sym_error.h"

#define IVM_SYM_MAX_INLINE	16	/* inline depth kept per address */
#define IVM_SYM_BUILD_ID_MAX	64	/* bytes */

enum ivm_sym_source {
	IVM_SYM_SOURCE_NONE,	/* no symbol covers the address */
	IVM_SYM_SOURCE_SYMTAB,	/* ELF symbol table or System.map */
	IVM_SYM_SOURCE_DWARF,	/* debuginfo: inline frames, file:line */
	IVM_SYM_SOURCE_MODULE,	/* inside a kernel module known only by
				   its load address: one frame named
				   "MODULE:+0xOFFSET" (ivm_syms) */
};

/*
 * One frame of a location.  Strings are owned by the symfile and live as
 * long as it does; any of them may be NULL (unknown).
 */
struct ivm_sym_frame {
	const char *function;
	const char *file;	/* as the compiler recorded it */
	unsigned int line;	/* 0: unknown */
	bool inlined;		/* inlined into the next (outer) frame */
};

/*
 * What an address is.  frames[0] is the innermost (the code at the
 * address), frames[nr_frames - 1] the out-of-line function holding it; an
 * inlined frame's file:line is where its code is, the outer frame's
 * file:line is the call site.  offset is addr minus the start of the
 * out-of-line function's symbol (0 if unknown).
 */
struct ivm_sym_location {
	enum ivm_sym_source source;
	unsigned int nr_frames;		/* 0 when source is NONE */
	uint64_t offset;
	struct ivm_sym_frame frames[];
};

struct ivm_symfile;

/*
 * Open an ELF file.  Its symbol table and (if present and sane) DWARF are
 * used; a file with neither opens but resolves nothing.  Errors: OS (cannot
 * open), FORMAT (not ELF, truncated, corrupt section table, a relocatable
 * object: see ivm_symfile_open_module()).
 */
struct ivm_sym_error *ivm_symfile_open_elf(const char *path,
					   struct ivm_symfile **ret);

/* Where the guest loaded one section of a kernel module. */
struct ivm_sym_section_addr {
	const char *name;	/* ".text", ".text.unlikely", ".rodata"... */
	uint64_t addr;
};

/*
 * Open a kernel module's .ko (ET_REL, with DWARF: a -dbg package's copy)
 * as the guest loaded it: each section named in sections is placed at its
 * address (the guest's /sys/module/NAME/sections/), the module's symbols
 * and DWARF are relocated accordingly (libdwfl applies its .rela.debug_*),
 * and lookups then take guest kernel addresses.  .init.* sections are
 * never placed: the kernel frees them after the module's init and reuses
 * the memory.  The caller checks the build-id.  Errors: OS, FORMAT (not
 * ELF, not ET_REL, corrupt), NOT_FOUND (no code section has an address),
 * NOMEM.
 */
struct ivm_sym_error *ivm_symfile_open_module(
	const char *path, const char *name,
	const struct ivm_sym_section_addr *sections, size_t nr_sections,
	struct ivm_symfile **ret);

/*
 * Open a System.map ("ADDRESS TYPE NAME" per line; text symbols are used).
 * Garbage lines are skipped and counted; a file with no usable line is a
 * FORMAT error.
 */
struct ivm_sym_error *ivm_symfile_open_system_map(const char *path,
						  struct ivm_symfile **ret);

/* Parse a System.map held in memory (for tests and fuzzing). */
struct ivm_sym_error *ivm_symfile_system_map_from_memory(
	const char *name, const char *buf, size_t len,
	struct ivm_symfile **ret);

void ivm_symfile_destroy(struct ivm_symfile *f);

const char *ivm_symfile_path(const struct ivm_symfile *f);
bool ivm_symfile_has_dwarf(const struct ivm_symfile *f);
size_t ivm_symfile_nr_symbols(const struct ivm_symfile *f);

/*
 * Use another file's DWARF for this one (a stripped binary and its
 * separate .debug file).  f takes ownership of debug.  The caller has
 * checked that their build-ids match.
 */
void ivm_symfile_set_debug(struct ivm_symfile *f, struct ivm_symfile *debug);

/*
 * The build-id (hex) of the supplementary DWARF file f's DWARF refers to
 * (dwz's .gnu_debugaltlink: Debian's -dbgsym debug files have one) when
 * libdw found none where it looks (next to f, /usr/lib/debug/.build-id),
 * else NULL.  Without that file, functions and inline frames whose DIEs
 * dwz moved there have no names; line tables still answer.  path, if not
 * NULL, gets the file's path as the link records it (owned by f; Debian:
 * /usr/lib/debug/.dwz/TRIPLET/PACKAGE.debug).
 */
const char *ivm_symfile_missing_alt(struct ivm_symfile *f, const char **path);
/*
 * Give f's DWARF the supplementary file at path, before any lookup.  f
 * owns it.  Errors: OS, FORMAT (not ELF; f needs none), MISMATCH (no DWARF
 * or another build-id than ivm_symfile_missing_alt's).
 */
struct ivm_sym_error *ivm_symfile_set_alt(struct ivm_symfile *f,
					  const char *path);

/* The GNU build-id note in hex, owned by f ("" if none). */
const char *ivm_symfile_build_id_hex(const struct ivm_symfile *f);

/*
 * A kernel's release from its linux_banner ("Linux version RELEASE ..."),
 * owned by f; NULL when the file has none (not a vmlinux, or stripped of
 * its symbol table).
 */
const char *ivm_symfile_kernel_release(const struct ivm_symfile *f);

/* [lo, hi) of the executable sections (0, 0 for a System.map: unknown). */
void ivm_symfile_text_range(const struct ivm_symfile *f, uint64_t *lo,
			    uint64_t *hi);

/*
 * The first executable PT_LOAD whose bytes are in the file: its link-time
 * address, size in memory and file offset.  False for a System.map, a
 * relocatable file and a separate .debug file (which keeps the program
 * headers, with offsets of its own, but not the code).
 */
bool ivm_symfile_exec_segment(const struct ivm_symfile *f, uint64_t *vaddr,
			      uint64_t *memsz, uint64_t *offset);

/*
 * Whether addr is in an executable section (a System.map: between its first
 * text symbol and _etext).
 */
bool ivm_symfile_in_text(const struct ivm_symfile *f, uint64_t addr);

/*
 * Resolve a link-time address (the caller removes any load bias or KASLR
 * slide; for a return address, pass pc - 1 so the call is named, not the
 * code after it).  Never fails: unknown addresses, and memory exhaustion,
 * give a location with source NONE.  The location is owned by f and valid
 * until ivm_symfile_destroy().
 */
const struct ivm_sym_location *ivm_symfile_lookup(struct ivm_symfile *f,
						  uint64_t addr);

/* Lookups answered from the cache, and the ones computed. */
void ivm_symfile_cache_stats(const struct ivm_symfile *f, uint64_t *hits,
			     uint64_t *misses);

#endif /* IVM_SYMFILE_H */
