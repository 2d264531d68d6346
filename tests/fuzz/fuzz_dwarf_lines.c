// SPDX-License-Identifier: MIT
/*
 * symbols/dwarf_lines.c over hostile bytes: the input is split into a
 * .debug_line and a .debug_line_str/.debug_str (a 2-byte little-endian
 * length of the first comes first), the line program at offset 0 is read
 * and a few addresses and file indexes are looked up.
 */
#include <stdint.h>
#include <stddef.h>

#include "dwarf_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_dwarf_sections sec = { 0 };
	struct ivm_dwarf_lines *t;
	const char *file;
	unsigned int line, i;
	size_t n;

	if (size < 2)
		return 0;
	n = (size_t)data[0] | (size_t)data[1] << 8;
	data += 2;
	size -= 2;
	if (n > size)
		n = size;
	sec.line = data;
	sec.line_size = n;
	sec.line_str = sec.str = data + n;
	sec.line_str_size = sec.str_size = size - n;
	if (!ivm_dwarf_lines_read(&sec, 0, &t))
		return 0;
	for (i = 0; i < 64; i++) {
		ivm_dwarf_lines_find(t, (uint64_t)i * 3, &file, &line);
		ivm_dwarf_lines_file(t, i);
	}
	ivm_dwarf_lines_find(t, UINT64_MAX, &file, &line);
	ivm_dwarf_lines_destroy(t);
	return 0;
}
