/* SPDX-License-Identifier: MIT */
/*
 * assoc: the slot of a small cache keyed by a guest kernel address (an
 * mm_struct, a task), set-associative with least-recently-used eviction.
 *
 * Why not the address's low bits: kernel objects come from slabs whose
 * objects sit at the same offsets in every slab page, so two hot processes'
 * mm_structs often agree in every bit below the page.  Indexed by those
 * bits, two such processes evicted each other on every capture (web01:
 * php-fpm workers and nginx, 274 evictions in 15 s; each re-read a whole
 * address space's mappings and 30% of idlevm's CPU went there).  Here the
 * set is chosen by a mix of all the key's bits, and a set holds
 * IVM_ASSOC_WAYS keys, so a few colliding keys all stay.
 *
 * The cache owns its slots (an array of its own struct with the key as a
 * uint64_t field, 0 for empty) and a parallel array of use stamps; this
 * picks the index.  Invariant: nr is a multiple of IVM_ASSOC_WAYS.
 */
#ifndef IVM_ASSOC_H
#define IVM_ASSOC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"

#define IVM_ASSOC_WAYS 4

struct ivm_assoc {
	uint64_t tick;		/* last stamp handed out */
};

/*
 * The index among the nr slots (each size bytes, their key key_off bytes
 * in) of the one holding key, else of the slot of key's set to replace:
 * an empty one, else the least recently used.  used[] (nr stamps, zeroed
 * at first) records the choice; the caller compares the slot's key with
 * key to tell a hit from a slot it must fill.
 */
static inline size_t ivm_assoc_pick(struct ivm_assoc *a, const void *slots,
				    size_t size, size_t key_off, size_t nr,
				    uint64_t *used, uint64_t key)
{
	size_t sets = nr / IVM_ASSOC_WAYS;
	size_t first = (size_t)(ivm_hash_u64(key) % sets) * IVM_ASSOC_WAYS;
	size_t i, pick = first;

	for (i = first; i < first + IVM_ASSOC_WAYS; i++) {
		uint64_t k;

		memcpy(&k, (const char *)slots + i * size + key_off,
		       sizeof(k));
		if (k == key) {
			pick = i;
			break;
		}
		if (used[i] < used[pick])
			pick = i;
	}
	used[pick] = ++a->tick;
	return pick;
}

#endif /* IVM_ASSOC_H */
