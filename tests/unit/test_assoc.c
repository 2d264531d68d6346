// SPDX-License-Identifier: MIT
/* The set-associative slot choice of the caches keyed by guest addresses. */
#include <criterion/criterion.h>
#include <stddef.h>

#include "base/assoc.h"

struct slot {
	int payload;
	uint64_t key;
};

#define NR 16	/* 4 sets of IVM_ASSOC_WAYS */

/* Look key up; on a miss, fill the slot as a cache would. */
static size_t get(struct ivm_assoc *a, struct slot *slots, uint64_t *used,
		  uint64_t key, bool *hit)
{
	size_t i = ivm_assoc_pick(a, slots, sizeof(slots[0]),
				  offsetof(struct slot, key), NR, used, key);

	*hit = slots[i].key == key;
	if (!*hit)
		slots[i] = (struct slot){ .payload = (int)key, .key = key };
	return i;
}

/* Keys of one set: same hash bucket. */
static size_t same_set(uint64_t *keys, size_t want)
{
	uint64_t k, set0 = ivm_hash_u64(0xffff888000001000ull) % (NR / 4);
	size_t n = 0;

	for (k = 0xffff888000001000ull; n < want; k += 0x1000)
		if (ivm_hash_u64(k) % (NR / 4) == set0)
			keys[n++] = k;
	return n;
}

Test(assoc, colliding_keys_stay_up_to_the_ways)
{
	struct slot slots[NR] = { 0 };
	uint64_t used[NR] = { 0 }, keys[IVM_ASSOC_WAYS + 1];
	struct ivm_assoc a = { 0 };
	size_t i, where[IVM_ASSOC_WAYS];
	bool hit;

	same_set(keys, IVM_ASSOC_WAYS + 1);
	for (i = 0; i < IVM_ASSOC_WAYS; i++) {
		where[i] = get(&a, slots, used, keys[i], &hit);
		cr_expect_not(hit);
	}
	/* Used in turn, over and over: every one stays. */
	for (int round = 0; round < 3; round++)
		for (i = 0; i < IVM_ASSOC_WAYS; i++) {
			cr_expect_eq(get(&a, slots, used, keys[i], &hit),
				     where[i]);
			cr_expect(hit);
			cr_expect_eq(slots[where[i]].payload, (int)keys[i]);
		}
}

Test(assoc, the_least_recently_used_goes)
{
	struct slot slots[NR] = { 0 };
	uint64_t used[NR] = { 0 }, keys[IVM_ASSOC_WAYS + 1];
	struct ivm_assoc a = { 0 };
	size_t i, first;
	bool hit;

	same_set(keys, IVM_ASSOC_WAYS + 1);
	for (i = 0; i < IVM_ASSOC_WAYS; i++)
		get(&a, slots, used, keys[i], &hit);
	/* keys[0] used again: keys[1] is now the oldest. */
	first = get(&a, slots, used, keys[0], &hit);
	cr_expect(hit);
	i = get(&a, slots, used, keys[IVM_ASSOC_WAYS], &hit);
	cr_expect_not(hit);
	cr_expect_neq(i, first);
	get(&a, slots, used, keys[0], &hit);
	cr_expect(hit);
	get(&a, slots, used, keys[1], &hit);
	cr_expect_not(hit, "the least recently used key was kept");
}

/*
 * Addresses that agree in every bit below 16 KiB, as slab objects do
 * (web01's mm_structs): they spread over the sets, not into one.
 */
Test(assoc, slab_strided_keys_spread)
{
	size_t count[NR / 4] = { 0 }, i;

	for (i = 0; i < 64; i++)
		count[ivm_hash_u64(0xffff8b7702402d00ull + (i << 14)) %
		      (NR / 4)]++;
	for (i = 0; i < NR / 4; i++)
		cr_expect(count[i] >= 8 && count[i] <= 24,
			  "set %zu got %zu of 64 keys", i, count[i]);
}
