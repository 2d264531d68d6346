/* SPDX-License-Identifier: MIT */
/*
 * Hashing for the in-memory tables: strings by FNV-1a (64 bits), integers
 * (addresses, keys that are already hashes) by a full 64-bit mix.
 */
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

/* Every bit of x moves every bit of the result (splitmix64's finalizer). */
static inline uint64_t ivm_hash_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#endif /* IVM_HASH_H */
