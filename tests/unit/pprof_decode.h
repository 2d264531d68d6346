/* SPDX-License-Identifier: MIT */
/* A pprof file's samples as text, for the unit tests (protoc decodes). */
#ifndef IVM_TEST_PPROF_DECODE_H
#define IVM_TEST_PPROF_DECODE_H
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Decode a pprof file with protoc and return, for each sample, its labels
 * as "key=value key=value ..." (string ids resolved) and its to_idle
 * value, one line per sample: "N key=value ...".
 */
static inline char *pprof_samples(const char *path)
{
	char cmd[512], line[1024], *strings[512] = { 0 }, *out = NULL;
	size_t nr_strings = 0, len = 0, i;
	long keys[64], strs[64], vals[3];
	int nk = 0, nv = 0, in_sample = 0, in_label = 0;
	FILE *p, *o;
	long k = -1, v = -1;

	snprintf(cmd, sizeof(cmd),
		 "gunzip -c %s | protoc --decode perftools.profiles.Profile "
		 "-I vmm/report vmm/report/report_pprof.proto", path);
	/* First the string table, then the samples. */
	p = popen(cmd, "r");
	cr_assert(p);
	while (fgets(line, sizeof(line), p)) {
		char *q;

		if (strncmp(line, "string_table: \"", 15) || nr_strings == 512)
			continue;
		q = strrchr(line, '"');
		*q = '\0';
		strings[nr_strings++] = strdup(line + 15);
	}
	cr_assert_eq(pclose(p), 0);
	o = open_memstream(&out, &len);
	p = popen(cmd, "r");
	cr_assert(p);
	while (fgets(line, sizeof(line), p)) {
		if (!strncmp(line, "sample {", 8)) {
			in_sample = 1;
			nk = nv = 0;
		} else if (in_sample && !strncmp(line, "  label {", 9)) {
			in_label = 1;
			k = v = -1;
		} else if (in_label && sscanf(line, "    key: %ld", &k) == 1) {
		} else if (in_label && sscanf(line, "    str: %ld", &v) == 1) {
		} else if (in_label && !strncmp(line, "  }", 3)) {
			in_label = 0;
			if (v >= 0 && nk < 64) {
				keys[nk] = k;
				strs[nk++] = v;
			}
		} else if (in_sample && nv < 3 &&
			   sscanf(line, "  value: %ld", &vals[nv]) == 1) {
			nv++;
		} else if (in_sample && !strncmp(line, "}", 1)) {
			in_sample = 0;
			fprintf(o, "%ld", vals[0]);
			for (i = 0; i < (size_t)nk; i++)
				fprintf(o, " %s=%s",
					(size_t)keys[i] < nr_strings ?
					strings[keys[i]] : "?",
					(size_t)strs[i] < nr_strings ?
					strings[strs[i]] : "?");
			fputc('\n', o);
		}
	}
	cr_assert_eq(pclose(p), 0);
	fclose(o);
	for (i = 0; i < nr_strings; i++)
		free(strings[i]);
	return out;
}

#endif /* IVM_TEST_PPROF_DECODE_H */
