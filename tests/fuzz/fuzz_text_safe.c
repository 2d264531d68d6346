// SPDX-License-Identifier: MIT
/*
 * base/text_safe.h on any bytes (a guest's thread names, titles, paths
 * and symbols): the output fits its buffer, is NUL-terminated, is safe in
 * its turn, and, when nothing was cut, is at least as long as the input
 * (every byte is kept or escaped, none dropped).
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/text_safe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t out_size, n;
	char *out;

	if (size < 2)
		return 0;
	out_size = 1 + data[0] % 64;
	data++;
	size--;
	if (data[0] & 1)
		out_size = IVM_TEXT_SAFE_SIZE(size);
	out = malloc(out_size);
	if (!out)
		return 0;
	ivm_text_safe_n(out, out_size, (const char *)data, size);
	n = strlen(out);
	assert(n < out_size);
	assert(ivm_text_is_safe(out));
	if (out_size == IVM_TEXT_SAFE_SIZE(size))
		assert(n >= strnlen((const char *)data, size));
	free(out);
	return 0;
}
