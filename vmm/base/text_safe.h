/* SPDX-License-Identifier: MIT */
/*
 * text_safe: a string that came from a guest (a thread's comm, a process
 * title, a mapped file's path, a symbol of a guest binary, a label's
 * value), made safe to print on the host operator's terminal and in
 * line- and tab-separated output.
 *
 * Any user of a guest can name a thread with escape sequences (ESC [ 2 J
 * clears the screen, OSC sets the terminal's title or worse), BEL, tabs and
 * newlines (a forged line in a TSV or a report), invalid UTF-8, C1 controls
 * (which some terminals take for ESC [) or Unicode's bidirectional
 * overrides (text that reads other than it is).  Printable ASCII and valid,
 * printable UTF-8 pass through unchanged; every other byte becomes "\xNN"
 * (two lowercase hex digits), so nothing is lost and nothing is executed.
 * A backslash passes through: the escape is for safety, not round trips.
 *
 * Formats with escapes of their own (SVG, HTML, JSON) apply them on top.
 */
#ifndef IVM_TEXT_SAFE_H
#define IVM_TEXT_SAFE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Write the safe form of the len bytes at s (a NUL ends them early) into
 * out, NUL-terminated, truncated to size - 1 bytes at a whole character or
 * escape (never in the middle of one).  Returns out.  size must be >= 1.
 */
char *ivm_text_safe_n(char *out, size_t size, const char *s, size_t len);

/* The same for a NUL-terminated s (NULL gives ""). */
char *ivm_text_safe(char *out, size_t size, const char *s);

/* Whether s needs no escape at all (so it can be printed as it is). */
bool ivm_text_is_safe(const char *s);

/* Bytes ivm_text_safe needs for a string of n bytes, at most. */
#define IVM_TEXT_SAFE_SIZE(n) (4 * (n) + 1)

#endif /* IVM_TEXT_SAFE_H */
