// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "profile/trace_fields.h"

/* Format files are a few KiB; anything longer is not one. */
#define MAX_FORMAT 65536

struct ivm_error *ivm_trace_format_parse(struct tep_handle *tep,
					 const char *text, const char *system,
					 const char *name,
					 struct tep_event **ret)
{
	if (!text)
		return ivm_error_create(IVM_ERROR_INVALID, "no format for %s:%s",
					system, name);
	if (tep_parse_event(tep, text, strlen(text), system))
		return ivm_error_create(IVM_ERROR_INVALID,
					"cannot parse the format of %s:%s",
					system, name);
	*ret = tep_find_event_by_name(tep, system, name);
	if (!*ret)
		return ivm_error_create(IVM_ERROR_INVALID,
					"format text is not %s:%s", system, name);
	return NULL;
}

struct ivm_error *ivm_trace_field_find(struct tep_event *event,
				       const char *name, int max_size,
				       struct ivm_trace_field *ret)
{
	struct tep_format_field *f = tep_find_any_field(event, name);

	if (!f || f->offset < 0 || f->size <= 0 || f->size > max_size)
		return ivm_error_create(IVM_ERROR_INVALID,
					"trace event %s has no usable field %s",
					event->name, name);
	ret->offset = f->offset;
	ret->size = f->size;
	return NULL;
}

bool ivm_trace_field_get(const void *data, size_t size,
			 struct ivm_trace_field f, uint64_t *ret)
{
	const uint8_t *p = data;
	uint64_t v = 0;
	int i;

	if (f.offset < 0 || f.size <= 0 || f.size > 8 ||
	    (size_t)f.offset + (size_t)f.size > size)
		return false;
	for (i = f.size - 1; i >= 0; i--)
		v = (v << 8) | p[f.offset + i];
	*ret = v;
	return true;
}

bool ivm_trace_field_str(const void *data, size_t size,
			 struct ivm_trace_field f, char *out, size_t out_size)
{
	size_t n;

	if (!out_size || f.offset < 0 || f.size <= 0 ||
	    (size_t)f.offset + (size_t)f.size > size)
		return false;
	n = (size_t)f.size < out_size - 1 ? (size_t)f.size : out_size - 1;
	memcpy(out, (const uint8_t *)data + f.offset, n);
	out[n] = '\0';
	return true;
}

bool ivm_trace_record_type(const void *data, size_t size, int *ret)
{
	const uint8_t *p = data;

	if (size < 2)
		return false;
	*ret = (int)((unsigned int)p[0] | (unsigned int)p[1] << 8);
	return true;
}

struct ivm_error *ivm_trace_format_read(const char *tracefs,
					const char *system, const char *name,
					char **ret)
{
	char path[256];
	FILE *f;
	char *buf;
	size_t n;

	snprintf(path, sizeof(path), "%s/events/%s/%s/format",
		 tracefs ? tracefs : "/sys/kernel/tracing", system, name);
	f = fopen(path, "re");
	if (!f)
		return ivm_error_os(errno, "reading %s", path);
	buf = calloc(1, MAX_FORMAT + 1);
	if (!buf) {
		fclose(f);
		return &ivm_enomem;
	}
	n = fread(buf, 1, MAX_FORMAT, f);
	buf[n] = '\0';
	fclose(f);
	*ret = buf;
	return NULL;
}
