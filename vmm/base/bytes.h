/* SPDX-License-Identifier: MIT */
/*
 * Little-endian byte cursors for host-side file formats.
 *
 * A reading cursor never reads past its end: every get on an exhausted
 * cursor returns zero and sets the sticky `bad` flag, so a decoder can read a
 * whole structure and check once (the libbpf/drgn habit of checking lengths
 * before use, made impossible to forget).  A writing buffer grows on demand
 * and remembers allocation failure the same way.
 */
#ifndef IVM_BYTES_H
#define IVM_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct ivm_cursor {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static inline void ivm_cursor_init(struct ivm_cursor *c, const void *p,
				   size_t len)
{
	c->p = p;
	c->left = len;
	c->bad = false;
}

/* Pointer to the next n bytes and advance, or NULL (and bad) if short. */
static inline const uint8_t *ivm_cursor_take(struct ivm_cursor *c, size_t n)
{
	const uint8_t *p = c->p;

	if (c->bad || n > c->left) {
		c->bad = true;
		c->left = 0;
		return NULL;
	}
	c->p += n;
	c->left -= n;
	return p;
}

static inline uint64_t ivm_le_load(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	while (n--)
		v = (v << 8) | p[n];
	return v;
}

/* Guest and file data are little-endian whatever the host is. */
static inline uint64_t ivm_le64(const uint8_t *p)
{
	return ivm_le_load(p, 8);
}

static inline uint32_t ivm_le32(const uint8_t *p)
{
	return (uint32_t)ivm_le_load(p, 4);
}

static inline uint8_t ivm_get_u8(struct ivm_cursor *c)
{
	const uint8_t *p = ivm_cursor_take(c, 1);

	return p ? p[0] : 0;
}

static inline uint16_t ivm_get_u16(struct ivm_cursor *c)
{
	const uint8_t *p = ivm_cursor_take(c, 2);

	return p ? (uint16_t)ivm_le_load(p, 2) : 0;
}

static inline uint32_t ivm_get_u32(struct ivm_cursor *c)
{
	const uint8_t *p = ivm_cursor_take(c, 4);

	return p ? (uint32_t)ivm_le_load(p, 4) : 0;
}

static inline uint64_t ivm_get_u64(struct ivm_cursor *c)
{
	const uint8_t *p = ivm_cursor_take(c, 8);

	return p ? ivm_le_load(p, 8) : 0;
}

/*
 * DWARF LEB128.  A value longer than 11 bytes (past 70 bits, padding
 * included) or cut short marks the cursor bad and reads as 0; bits past
 * 64 are dropped.
 */
static inline uint64_t ivm_get_uleb(struct ivm_cursor *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	for (;;) {
		uint8_t b = ivm_get_u8(c);

		if (c->bad)
			return 0;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
		if (shift > 70) {
			c->bad = true;
			return 0;
		}
	}
}

static inline int64_t ivm_get_sleb(struct ivm_cursor *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		b = ivm_get_u8(c);
		if (c->bad)
			return 0;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (shift > 70) {
			c->bad = true;
			return 0;
		}
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return (int64_t)v;
}

struct ivm_buf {
	uint8_t *data;
	size_t len, cap;
	bool nomem;
};

/* Make room for n more bytes; false (and nomem) if that fails. */
bool ivm_buf_reserve(struct ivm_buf *b, size_t n);
void ivm_buf_free(struct ivm_buf *b);

static inline void ivm_put_bytes(struct ivm_buf *b, const void *p, size_t n)
{
	if (!ivm_buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static inline void ivm_put_le(struct ivm_buf *b, uint64_t v, unsigned int n)
{
	unsigned int i;

	if (!ivm_buf_reserve(b, n))
		return;
	for (i = 0; i < n; i++)
		b->data[b->len++] = (uint8_t)(v >> (8 * i));
}

static inline void ivm_put_u8(struct ivm_buf *b, uint8_t v)
{
	ivm_put_le(b, v, 1);
}

static inline void ivm_put_u16(struct ivm_buf *b, uint16_t v)
{
	ivm_put_le(b, v, 2);
}

static inline void ivm_put_u32(struct ivm_buf *b, uint32_t v)
{
	ivm_put_le(b, v, 4);
}

static inline void ivm_put_u64(struct ivm_buf *b, uint64_t v)
{
	ivm_put_le(b, v, 8);
}

/* Overwrite 4 bytes at off (which must already be written). */
static inline void ivm_buf_patch_u32(struct ivm_buf *b, size_t off, uint32_t v)
{
	unsigned int i;

	if (b->nomem || off + 4 > b->len)
		return;
	for (i = 0; i < 4; i++)
		b->data[off + i] = (uint8_t)(v >> (8 * i));
}

#endif /* IVM_BYTES_H */
