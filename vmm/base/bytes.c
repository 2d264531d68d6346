// SPDX-License-Identifier: MIT
#include <stdlib.h>

#include "base/bytes.h"

bool ivm_buf_reserve(struct ivm_buf *b, size_t n)
{
	size_t cap;
	uint8_t *data;

	if (b->nomem)
		return false;
	if (n <= b->cap - b->len)
		return true;
	if (b->len + n < b->len) {
		b->nomem = true;
		return false;
	}
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n) {
		if (cap > SIZE_MAX / 2) {
			b->nomem = true;
			return false;
		}
		cap *= 2;
	}
	data = realloc(b->data, cap);
	if (!data) {
		b->nomem = true;
		return false;
	}
	b->data = data;
	b->cap = cap;
	return true;
}

void ivm_buf_free(struct ivm_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->nomem = false;
}
