/* SPDX-License-Identifier: MIT */
/*
 * trace_fields: where a tracepoint's fields lie in its raw records, taken
 * from the running kernel's format files (libtraceevent), and bounds-checked
 * reads of them.  Shared by the decoders of host tracepoints
 * (vmm/profile/kvm_events.h, vmm/profile/sched_events.h).
 *
 * Offsets are never assumed: a record is host kernel data, but a short or
 * garbled one (a lost-events page, a format that changed) must cost the
 * record, never a read outside it.
 */
#ifndef IVM_TRACE_FIELDS_H
#define IVM_TRACE_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct tep_handle;
struct tep_event;

struct ivm_trace_field {
	int offset, size;
};

/*
 * Parse one format text (NUL-terminated) of system:name into tep and find
 * its event.  IVM_ERROR_INVALID when text is NULL, does not parse, or is
 * the format of another event.
 */
struct ivm_error *ivm_trace_format_parse(struct tep_handle *tep,
					 const char *text, const char *system,
					 const char *name,
					 struct tep_event **ret);

/*
 * Field name of event, at most max_size bytes.  IVM_ERROR_INVALID naming
 * the event when it has no such field or the field is larger.
 */
struct ivm_error *ivm_trace_field_find(struct tep_event *event,
				       const char *name, int max_size,
				       struct ivm_trace_field *ret);

/* Little-endian unsigned value of f in data[0..size); false past the end. */
bool ivm_trace_field_get(const void *data, size_t size,
			 struct ivm_trace_field f, uint64_t *ret);

/*
 * A fixed-size char array field (a comm) into out[0..out_size), always
 * NUL-terminated; false past the end of the record.
 */
bool ivm_trace_field_str(const void *data, size_t size,
			 struct ivm_trace_field f, char *out, size_t out_size);

/* The event type (common_type) of a raw record; false when too short. */
bool ivm_trace_record_type(const void *data, size_t size, int *ret);

/*
 * The format text of system/name under tracefs (NULL: /sys/kernel/tracing),
 * malloc'd, NUL-terminated.  IVM_ERROR_OS when it cannot be read.
 */
struct ivm_error *ivm_trace_format_read(const char *tracefs,
					const char *system, const char *name,
					char **ret);

#endif /* IVM_TRACE_FIELDS_H */
