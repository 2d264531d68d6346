/* SPDX-License-Identifier: MIT */
/*
 * A DWARF 5 line table (.debug_line) read directly, for the symbolizer's
 * hot path.  libdw's reader (elfutils 0.188) allocates every row and sorts
 * pointers to them; on a distribution vmlinux that was about 70% of the
 * time of a lookup in a unit seen for the first time.  This reader keeps
 * rows in one array and answers exactly as libdw's dwarf_getsrc_die() and
 * dwarf_filesrc() do (same row among rows at one address, same file
 * names: "DIR/NAME" from the unit's directory table, absolute names
 * kept), so the results do not change, only their cost.
 *
 * Only what it can answer exactly is accepted: DWARF 5 line programs with
 * one operation per instruction and the usual forms.  Anything else
 * (DWARF 2-4, an unknown form or opcode, a corrupt header) makes
 * ivm_dwarf_lines_read() fail, and the caller asks libdw instead.
 *
 * The section bytes are untrusted: every read is bounded by its section;
 * names point into the sections or into memory the table owns.
 */
#ifndef IVM_DWARF_LINES_H
#define IVM_DWARF_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ivm_dwarf_sections {
	const uint8_t *line;		/* .debug_line */
	size_t line_size;
	const uint8_t *line_str;	/* .debug_line_str, or NULL */
	size_t line_str_size;
	const uint8_t *str;		/* .debug_str, or NULL */
	size_t str_size;
};

struct ivm_dwarf_lines;

/*
 * Read the line program at offset in .debug_line (a unit's
 * DW_AT_stmt_list).  false: not supported or corrupt (see above), or no
 * memory; *ret is then NULL.
 */
bool ivm_dwarf_lines_read(const struct ivm_dwarf_sections *sec,
			  uint64_t offset, struct ivm_dwarf_lines **ret);
void ivm_dwarf_lines_destroy(struct ivm_dwarf_lines *t);

/*
 * The row for addr: the last row at or before it unless that row ends a
 * sequence.  false when the table does not cover addr.
 */
bool ivm_dwarf_lines_find(const struct ivm_dwarf_lines *t, uint64_t addr,
			  const char **file, unsigned int *line);

/* File idx of the table (a DW_AT_call_file), NULL if out of range. */
const char *ivm_dwarf_lines_file(const struct ivm_dwarf_lines *t,
				 uint64_t idx);

#endif /* IVM_DWARF_LINES_H */
