/* SPDX-License-Identifier: MIT */
/*
 * Raw tracepoint records recorded on a real host, kept as unit-test
 * fixtures (and the event format files they go with): one per line, "TS HEXBYTES" (CLOCK_MONOTONIC ns, then the
 * record from common_type), as the recorders write them
 * (tests/unit/test_sched_events.c, tests/tools/kvm-records.c).
 */
#ifndef IVM_TEST_TRACE_RECORDS_H
#define IVM_TEST_TRACE_RECORDS_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct recorded {
	uint64_t ts;
	size_t size;
	uint8_t data[256];
};

/* Read at most max records of path into out; how many. */
static inline size_t read_records(const char *path, struct recorded *out,
				  size_t max)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	size_t n = 0;

	cr_assert_not_null(f, "%s", path);
	while (n < max && fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		struct recorded *r = &out[n];

		r->ts = strtoull(p, &end, 10);
		p = end;
		while (*p == ' ')
			p++;
		r->size = 0;
		while (p[0] && p[1] && p[0] != '\n' && r->size < sizeof(r->data)) {
			unsigned int b;

			cr_assert_eq(sscanf(p, "%2x", &b), 1);
			r->data[r->size++] = (uint8_t)b;
			p += 2;
		}
		n++;
	}
	fclose(f);
	return n;
}

/* The format file dir/NAME.format of a fixture, malloc'd, NUL-terminated. */
static inline char *read_format(const char *dir, const char *name)
{
	char path[128];
	FILE *f;
	char *buf = calloc(1, 65536);
	size_t n;

	cr_assert_not_null(buf);
	snprintf(path, sizeof(path), "%s%s.format", dir, name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

#endif /* IVM_TEST_TRACE_RECORDS_H */
