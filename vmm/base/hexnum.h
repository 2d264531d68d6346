/* SPDX-License-Identifier: MIT */
/*
 * Small pieces shared by the text and table code of vmm/: hex numbers in
 * text from anywhere (System.map, VMCOREINFO, QEMU's monitor, profile
 * metadata), and the hash mixer of the open-addressing sets keyed by
 * guest addresses or pointers.
 *
 * Every input is hostile: a number is at most 16 digits, and nothing is
 * read at or past end.
 */
#ifndef IVM_HEXNUM_H
#define IVM_HEXNUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of hex digit c (either case), or -1. */
static inline int ivm_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The hex number of 1..16 digits at p[*pos..end): stops at the first
 * non-digit, which the caller judges, and advances *pos to it.  false
 * (*pos unchanged) for no digit or more than 16.
 */
static inline bool ivm_hex_span(const char *p, size_t end, size_t *pos,
				uint64_t *ret)
{
	size_t i = *pos, digits = 0;
	uint64_t v = 0;
	int d;

	while (i < end && (d = ivm_hex_digit(p[i])) >= 0) {
		if (++digits > 16)
			return false;
		v = v << 4 | (uint64_t)d;
		i++;
	}
	if (!digits)
		return false;
	*pos = i;
	*ret = v;
	return true;
}

/* Exactly the len bytes at s as 1..16 hex digits. */
static inline bool ivm_parse_hex64(const char *s, size_t len, uint64_t *ret)
{
	size_t pos = 0;

	return ivm_hex_span(s, len, &pos, ret) && pos == len;
}

/*
 * Slot hash of a guest address or a host pointer: both are aligned, so
 * the high bits are mixed down into the low ones a mask keeps.
 */
static inline size_t ivm_hash_addr(uint64_t a)
{
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return (size_t)a;
}

#endif /* IVM_HEXNUM_H */
