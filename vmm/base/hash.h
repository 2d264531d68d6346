/* SPDX-License-Identifier: MIT */
/* String hashing for the in-memory tables (FNV-1a, 64 bits). */
#ifndef IVM_HASH_H
#define IVM_HASH_H

#include <stdint.h>

static inline uint64_t ivm_hash_string(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

#endif /* IVM_HASH_H */
