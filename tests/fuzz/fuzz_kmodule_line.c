// SPDX-License-Identifier: MIT
/*
 * Fuzz target: module records from a profile file's metadata (untrusted:
 * the file may be corrupt or forged).  The input is lines: the first a
 * module line, the rest module_sections lines.  What parses is formatted
 * again and parsed back; the round trip must give the same module.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kmodules.h"

static void check_round_trip(const struct ivm_kmodule *m)
{
	struct ivm_kmodule again;
	char *line = ivm_kmodule_format(m), **secs;
	size_t nr, i;

	if (!line)
		return;
	if (ivm_kmodule_parse(line, &again))
		abort();
	secs = ivm_kmodule_format_sections(m, &nr);
	for (i = 0; secs && i < nr; i++) {
		if (strlen(secs[i]) > IVM_KMODULE_LINE_MAX ||
		    ivm_kmodule_parse_sections(secs[i], &again, 1))
			abort();
		free(secs[i]);
	}
	if (strcmp(m->name, again.name) || m->base != again.base ||
	    m->size != again.size || strcmp(m->build_id, again.build_id))
		abort();
	/*
	 * Every parsed section is printable again and fits a line (names
	 * under 64 bytes), so all come back, in order.
	 */
	if (again.nr_sections != m->nr_sections)
		abort();
	for (i = 0; i < again.nr_sections; i++)
		if (strcmp(again.sections[i].name, m->sections[i].name) ||
		    again.sections[i].addr != m->sections[i].addr)
			abort();
	ivm_kmodule_release(&again);
	free(secs);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_kmodule m;
	struct ivm_error *err;
	char *text, *line, *save = NULL;

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	line = strtok_r(text, "\n", &save);
	if (!line) {
		free(text);
		return 0;
	}
	err = ivm_kmodule_parse(line, &m);
	if (err) {
		ivm_error_destroy(err);
		free(text);
		return 0;
	}
	while ((line = strtok_r(NULL, "\n", &save)))
		ivm_error_destroy(ivm_kmodule_parse_sections(line, &m, 1));
	if (m.nr_sections)
		check_round_trip(&m);
	ivm_kmodule_release(&m);
	free(text);
	return 0;
}
