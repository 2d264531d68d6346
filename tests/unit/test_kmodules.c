// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kmodules.h"

static void free_lines(char **lines, size_t nr)
{
	while (nr--)
		free(lines[nr]);
	free(lines);
}

Test(kmodules, format_parse_round_trip)
{
	struct ivm_kmodule_section secs[] = {
		{ ".text", 0xffffffffc0322000ull },
		{ "bad name", 0x1 },		/* left out */
		{ ".data", 0xffffffffc032a060ull },
	};
	struct ivm_kmodule m = {
		.name = "virtio_console", .base = 0xffffffffc0322000ull,
		.size = 40960, .nr_sections = 3, .sections = secs,
	}, back;
	char *line, **lines;
	size_t nr, i;

	strcpy(m.build_id, "2a4768ab9c201b9aa409616706c4aafd0defc4be");
	line = ivm_kmodule_format(&m);
	cr_assert(line);
	cr_assert_str_eq(line, "virtio_console 0xffffffffc0322000 0xa000 "
			 "2a4768ab9c201b9aa409616706c4aafd0defc4be");
	lines = ivm_kmodule_format_sections(&m, &nr);
	cr_assert(lines);
	cr_assert_eq(nr, 1);
	cr_assert_str_eq(lines[0], "virtio_console .text=0xffffffffc0322000,"
			 ".data=0xffffffffc032a060");
	cr_assert_null(ivm_kmodule_parse(line, &back));
	cr_assert_str_eq(back.name, "virtio_console");
	cr_assert_eq(back.base, m.base);
	cr_assert_eq(back.size, 40960);
	cr_assert_str_eq(back.build_id, m.build_id);
	cr_assert_eq(back.nr_sections, 0);
	for (i = 0; i < nr; i++)
		cr_assert_null(ivm_kmodule_parse_sections(lines[i], &back, 1));
	cr_assert_eq(back.nr_sections, 2);
	cr_assert_str_eq(back.sections[1].name, ".data");
	cr_assert_eq(back.sections[1].addr, 0xffffffffc032a060ull);
	ivm_kmodule_release(&back);
	free_lines(lines, nr);
	free(line);
}

/* Many sections: split over lines that each fit a profile string. */
Test(kmodules, sections_split_to_fit)
{
	struct ivm_kmodule_section secs[40];
	struct ivm_kmodule m = { .name = "ext4", .nr_sections = 40,
				 .sections = secs }, back;
	char **lines, *line;
	size_t nr, i;

	for (i = 0; i < 40; i++) {
		snprintf(secs[i].name, sizeof(secs[i].name), ".text.part%zu", i);
		secs[i].addr = 0xffffffffc1000000ull + i * 0x100;
	}
	lines = ivm_kmodule_format_sections(&m, &nr);
	cr_assert(lines);
	cr_assert_gt(nr, 3);
	line = ivm_kmodule_format(&m);
	cr_assert_null(ivm_kmodule_parse(line, &back));
	for (i = 0; i < nr; i++) {
		cr_assert_leq(strlen(lines[i]), IVM_KMODULE_LINE_MAX);
		cr_assert_null(ivm_kmodule_parse_sections(lines[i], &back, 1));
	}
	cr_assert_eq(back.nr_sections, 40);
	for (i = 0; i < 40; i++) {
		cr_assert_str_eq(back.sections[i].name, secs[i].name);
		cr_assert_eq(back.sections[i].addr, secs[i].addr);
	}
	ivm_kmodule_release(&back);
	free_lines(lines, nr);
	free(line);
}

Test(kmodules, no_build_id)
{
	struct ivm_kmodule m;

	cr_assert_null(ivm_kmodule_parse("m 0x10 0x20 -", &m));
	cr_assert_str_eq(m.build_id, "");
	cr_assert_eq(m.nr_sections, 0);
	cr_assert_eq(m.size, 0x20);
}

Test(kmodules, malformed_lines_are_refused)
{
	static const char *const bad[] = {
		"", " ", "m", "m 0x1", "m 0x1 0x2", "m 10 0x2 -",
		"m 0x1 0x2 abc", "m 0xg 0x2 -", "m 0x1 0x12345678901234567 -",
		"../etc 0x1 0x2 -", "a/b 0x1 0x2 -", "m 0x1 0x2 - extra",
		"m 0x1 0x2 2A4768AB9C201B9AA409616706C4AAFD0DEFC4BE",
	};
	static const char *const bad_sections[] = {
		"", "m", "m .text", "m =0x1", "m a=1", "m a=0x1,,b=0x2",
		"m a=0x1 extra", "other .text=0x1", "../m a=0x1",
	};
	struct ivm_kmodule m;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ivm_error *err = ivm_kmodule_parse(bad[i], &m);

		cr_assert_not_null(err, "accepted '%s'", bad[i]);
		cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
		ivm_error_destroy(err);
	}
	cr_assert_null(ivm_kmodule_parse("m 0x1 0x2 -", &m));
	for (i = 0; i < sizeof(bad_sections) / sizeof(bad_sections[0]); i++) {
		struct ivm_error *err = ivm_kmodule_parse_sections(
			bad_sections[i], &m, 1);

		cr_assert_not_null(err, "accepted '%s'", bad_sections[i]);
		cr_assert_eq(err->code, IVM_ERROR_PROTOCOL);
		cr_assert_eq(m.nr_sections, 0, "'%s' appended",
			     bad_sections[i]);
		ivm_error_destroy(err);
	}
	ivm_kmodule_release(&m);
}

Test(kmodules, section_cap)
{
	size_t n = IVM_KMODULE_MAX_SECTIONS + 1, i;
	char *line = malloc(32 + n * 16), *p = line;
	struct ivm_kmodule m;
	struct ivm_error *err;

	cr_assert_null(ivm_kmodule_parse("m 0x1 0x2 -", &m));
	p += sprintf(p, "m ");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%ss=0x%zx", i ? "," : "", i + 1);
	err = ivm_kmodule_parse_sections(line, &m, 1);
	cr_assert_not_null(err);
	cr_assert_eq(m.nr_sections, 0);
	ivm_error_destroy(err);
	ivm_kmodule_release(&m);
	free(line);
}
