/* SPDX-License-Identifier: MIT */
/*
 * sysmap: the one reader of System.map text ("ffffffff81000000 T _text" a
 * line), also /proc/kallsyms text, whose lines may end in "\t[module]".
 * Both vmm/kernel/ksyms.c (link-time symbols for the kernel layout) and
 * symbols/symfile.c (names for reports) read the format through it.
 *
 * Hostile input: the text may come from anywhere.  A line parses only if
 * it is, exactly, 1 to 16 hex digits, one blank, a type letter, one blank,
 * a name of 1 to IVM_SYSMAP_MAX_NAME printable non-blank ASCII bytes, and
 * optionally a tab and "[module]" of such bytes.  Anything else (other
 * blanks, NUL bytes, a trailing blank, a longer name) makes the line
 * malformed: it is skipped whole and counted, never trusted in part.  A
 * carriage return before the newline is ignored.
 */
#ifndef IVM_SYSMAP_H
#define IVM_SYSMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IVM_SYSMAP_MAX_NAME 512		/* KSYM_NAME_LEN of Linux 6.1 */

/* One parsed line; name and module point into the text, not terminated. */
struct ivm_sysmap_line {
	uint64_t addr;
	char type;		/* nm-style type letter: 'T', 't', 'd', ... */
	const char *name;
	size_t name_len;	/* >= 1 */
	const char *module;	/* kallsyms "[module]" name, or NULL */
	size_t module_len;
};

enum ivm_sysmap_next {
	IVM_SYSMAP_END,		/* no more text */
	IVM_SYSMAP_LINE,	/* *ret holds the next line */
	IVM_SYSMAP_MALFORMED,	/* a line that does not parse was skipped */
};

/*
 * Read the line of text[0..len) that starts at *pos and advance *pos past
 * it and its newline.  Empty lines are skipped without a word.  The text
 * need not be NUL-terminated and is not modified.
 */
enum ivm_sysmap_next ivm_sysmap_next(const char *text, size_t len,
				     size_t *pos, struct ivm_sysmap_line *ret);

#endif /* IVM_SYSMAP_H */
