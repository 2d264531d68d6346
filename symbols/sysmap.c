// SPDX-License-Identifier: MIT
/* The one System.map / kallsyms line reader: see sysmap.h. */

#include <string.h>

#include "sysmap.h"

static bool name_char_ok(char c)
{
	/* Kernel symbol names are printable ASCII without blanks. */
	return c > ' ' && c < 0x7f;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool is_letter(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool parse_line(const char *line, size_t len,
		       struct ivm_sysmap_line *ret)
{
	size_t i = 0, start;
	uint64_t addr = 0;
	int d;

	for (; i < len && (d = hex_digit(line[i])) >= 0; i++) {
		if (i == 16)
			return false;
		addr = addr << 4 | (uint64_t)d;
	}
	/* " X " after 1..16 digits */
	if (i == 0 || len - i < 4 || line[i] != ' ' || line[i + 2] != ' ' ||
	    !is_letter(line[i + 1]))
		return false;
	ret->addr = addr;
	ret->type = line[i + 1];
	start = i + 3;
	for (i = start; i < len && name_char_ok(line[i]); i++)
		;
	ret->name = line + start;
	ret->name_len = i - start;
	if (ret->name_len == 0 || ret->name_len > IVM_SYSMAP_MAX_NAME)
		return false;
	ret->module = NULL;
	ret->module_len = 0;
	if (i == len)
		return true;
	/* kallsyms: "\t[module]", nothing else. */
	if (line[i] != '\t' || i + 2 >= len || line[i + 1] != '[' ||
	    line[len - 1] != ']')
		return false;
	start = i + 2;
	for (i = start; i < len - 1; i++)
		if (!name_char_ok(line[i]) || line[i] == ']')
			return false;
	ret->module = line + start;
	ret->module_len = len - 1 - start;
	return true;
}

enum ivm_sysmap_next ivm_sysmap_next(const char *text, size_t len,
				     size_t *pos, struct ivm_sysmap_line *ret)
{
	while (*pos < len) {
		const char *line = text + *pos;
		const char *nl = memchr(line, '\n', len - *pos);
		size_t line_len = nl ? (size_t)(nl - line) : len - *pos;

		*pos += line_len + (nl ? 1 : 0);
		if (line_len && line[line_len - 1] == '\r')
			line_len--;
		if (line_len == 0)
			continue;
		/* NUL bytes fail name_char_ok(), so a line with one fails. */
		return parse_line(line, line_len, ret) ? IVM_SYSMAP_LINE :
							 IVM_SYSMAP_MALFORMED;
	}
	return IVM_SYSMAP_END;
}
