// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <string.h>

#include "base/text_safe.h"

/*
 * Length of the valid UTF-8 character at p (at most n bytes), or 0 when it
 * is not one: overlong forms, surrogates and code points past U+10FFFF
 * are refused, as a decoder that follows RFC 3629 refuses them.  The code
 * point goes to *cp.
 */
static size_t utf8_char(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t len, i;
	uint32_t c, min;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if ((p[0] & 0xe0) == 0xc0) {
		len = 2;
		c = p[0] & 0x1f;
		min = 0x80;
	} else if ((p[0] & 0xf0) == 0xe0) {
		len = 3;
		c = p[0] & 0x0f;
		min = 0x800;
	} else if ((p[0] & 0xf8) == 0xf0) {
		len = 4;
		c = p[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/*
 * Code points that print nothing of their own but change how the rest
 * reads: C0 and C1 controls, DEL, line and paragraph separators, and the
 * bidirectional embeddings, overrides and isolates.
 */
static bool invisible(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c <= 0x9f) ||
	       c == 0x2028 || c == 0x2029 || (c >= 0x202a && c <= 0x202e) ||
	       (c >= 0x2066 && c <= 0x2069) || c == 0x200e || c == 0x200f ||
	       c == 0x061c;
}

char *ivm_text_safe_n(char *out, size_t size, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = 0;

	if (!size)
		return out;
	len = s ? strnlen(s, len) : 0;
	while (i < len) {
		uint32_t c;
		size_t k = utf8_char(p + i, len - i, &c);

		if (k && !invisible(c)) {
			if (o + k > size - 1)
				break;
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		/* Not a printable character: its first byte, escaped. */
		if (o + 4 > size - 1)
			break;
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[p[i] >> 4];
		out[o++] = hex[p[i] & 15];
		i++;
	}
	out[o] = '\0';
	return out;
}

char *ivm_text_safe(char *out, size_t size, const char *s)
{
	return ivm_text_safe_n(out, size, s, s ? strlen(s) : 0);
}

bool ivm_text_is_safe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n = s ? strlen(s) : 0;

	while (i < n) {
		uint32_t c;
		size_t k = utf8_char(p + i, n - i, &c);

		if (!k || invisible(c))
			return false;
		i += k;
	}
	return true;
}
