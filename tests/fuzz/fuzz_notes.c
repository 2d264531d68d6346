// SPDX-License-Identifier: MIT
/*
 * ELF notes from a hostile guest (the kernel's .notes, a module's
 * .note.gnu.build-id): the GNU build-id among them.  A heap copy of
 * exactly the input is walked, so ASan sees any read past it.
 *
 * What is found must be what the notes say: lower-case hex of 1..20
 * bytes, NUL-terminated within the buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kimage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char hex[IVM_BUILD_ID_HEX_LEN];
	uint8_t *copy = malloc(size ? size : 1);
	size_t n;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	memset(hex, 'x', sizeof(hex));
	ivm_notes_build_id(copy, size, hex);
	n = strnlen(hex, sizeof(hex));
	if (n == sizeof(hex) || n % 2 || n > 40 ||
	    strspn(hex, "0123456789abcdef") != n)
		abort();
	free(copy);
	return 0;
}
