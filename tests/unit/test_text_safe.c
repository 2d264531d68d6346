// SPDX-License-Identifier: MIT
/*
 * Guest strings made safe for the operator's terminal (base/text_safe.h):
 * the hostile titles of issue 32 (ESC, BEL, OSC), broken and overlong
 * UTF-8, C1 controls and bidirectional overrides are escaped; readable
 * text, UTF-8 included, is kept as it is; truncation never splits.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/text_safe.h"

static const char *safe(const char *s)
{
	static char out[256];

	return ivm_text_safe(out, sizeof(out), s);
}

Test(text_safe, readable_text_unchanged)
{
	cr_expect_str_eq(safe("nginx: worker process"), "nginx: worker process");
	cr_expect_str_eq(safe("php-fpm: pool www"), "php-fpm: pool www");
	cr_expect_str_eq(safe("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa7"),
			 "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa7");
	cr_expect_str_eq(safe("a\\b"), "a\\b");
	cr_expect_str_eq(safe(""), "");
	cr_expect_str_eq(safe(NULL), "");
	cr_expect(ivm_text_is_safe("kworker/0:1H"));
}

Test(text_safe, terminal_controls_escaped)
{
	/* The title a guest user set in issue 32. */
	cr_expect_str_eq(safe("\x1b[2J\x07\x1b]0;x\x07<i>"),
			 "\\x1b[2J\\x07\\x1b]0;x\\x07<i>");
	cr_expect_str_eq(safe("a\tb\nc\rd\x7f"), "a\\x09b\\x0ac\\x0dd\\x7f");
	cr_expect_not(ivm_text_is_safe("x\x1b"));
	/* C1 CSI (U+009B) as UTF-8, and as a raw byte (not UTF-8). */
	cr_expect_str_eq(safe("\xc2\x9b" "2J"), "\\xc2\\x9b2J");
	cr_expect_str_eq(safe("\x9b" "2J"), "\\x9b2J");
	/* Right-to-left override and a line separator. */
	cr_expect_str_eq(safe("ab\xe2\x80\xae" "cd"), "ab\\xe2\\x80\\xaecd");
	cr_expect_str_eq(safe("\xe2\x80\xa8"), "\\xe2\\x80\\xa8");
	/* The output is safe in its turn. */
	cr_expect(ivm_text_is_safe(safe("\x1b]8;;http://x\x1b\\")));
}

Test(text_safe, broken_utf8_escaped)
{
	cr_expect_str_eq(safe("\xc0\xaf"), "\\xc0\\xaf");		/* overlong / */
	cr_expect_str_eq(safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");	/* surrogate */
	cr_expect_str_eq(safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
	cr_expect_str_eq(safe("\xe2\x82"), "\\xe2\\x82");		/* cut short */
	cr_expect_str_eq(safe("\xff\xfe"), "\\xff\\xfe");
	/* A bad lead byte does not swallow the good text after it. */
	cr_expect_str_eq(safe("\xe2" "abc"), "\\xe2" "abc");
}

Test(text_safe, truncation_keeps_whole_units)
{
	char out[8];

	ivm_text_safe(out, sizeof(out), "abcdefghij");
	cr_expect_str_eq(out, "abcdefg");
	ivm_text_safe(out, sizeof(out), "abcde\x1b");
	cr_expect_str_eq(out, "abcde");	/* no half "\x1b" */
	ivm_text_safe(out, sizeof(out), "abcde\xc3\xa9\xc3\xa9");
	cr_expect_str_eq(out, "abcde\xc3\xa9");
	ivm_text_safe(out, 1, "abc");
	cr_expect_str_eq(out, "");
	/* Not NUL-terminated input: len bounds it. */
	ivm_text_safe_n(out, sizeof(out), "xyz\x1b", 3);
	cr_expect_str_eq(out, "xyz");
}
