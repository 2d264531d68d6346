// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "profile/disk_syscalls.h"
#include "profile/trace_fields.h"

/* x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
static const struct {
	int64_t nr;
	enum ivm_disk_kind kind;
} syscalls[] = {
	{ 17, IVM_DISK_READ },		/* pread64 */
	{ 295, IVM_DISK_READ },		/* preadv */
	{ 327, IVM_DISK_READ },		/* preadv2 */
	{ 18, IVM_DISK_WRITE },		/* pwrite64 */
	{ 296, IVM_DISK_WRITE },	/* pwritev */
	{ 328, IVM_DISK_WRITE },	/* pwritev2 */
	{ 74, IVM_DISK_FLUSH },		/* fsync */
	{ 75, IVM_DISK_FLUSH },		/* fdatasync */
	{ 285, IVM_DISK_OTHER },	/* fallocate */
	{ 209, IVM_DISK_ASYNC },	/* io_submit */
	{ 426, IVM_DISK_ASYNC },	/* io_uring_enter */
};

struct ivm_disk_syscalls {
	struct tep_handle *tep;
	int enter_id, exit_id;
	struct ivm_trace_field enter_pid, enter_nr, exit_pid, exit_nr, ret;
};

bool ivm_disk_syscall_kind(int64_t nr, enum ivm_disk_kind *ret)
{
	size_t i;

	for (i = 0; i < sizeof(syscalls) / sizeof(syscalls[0]); i++) {
		if (syscalls[i].nr == nr) {
			*ret = syscalls[i].kind;
			return true;
		}
	}
	return false;
}

const char *ivm_disk_kind_name(enum ivm_disk_kind kind)
{
	static const char *const names[IVM_DISK_NR_KINDS] = {
		"read", "write", "flush", "other", "async",
	};

	return (unsigned int)kind < IVM_DISK_NR_KINDS ? names[kind] : "?";
}

const char *ivm_disk_syscall_filter(void)
{
	return "id == 17 || id == 295 || id == 327 || id == 18 || "
	       "id == 296 || id == 328 || id == 74 || id == 75 || "
	       "id == 285 || id == 209 || id == 426";
}

static struct ivm_error *parse_one(struct ivm_disk_syscalls *ds,
				   const char *text, const char *name,
				   int *id, struct ivm_trace_field *pid,
				   struct ivm_trace_field *nr,
				   struct ivm_trace_field *ret)
{
	struct tep_event *e;
	struct ivm_error *err;

	err = ivm_trace_format_parse(ds->tep, text, "raw_syscalls", name, &e);
	if (!err)
		err = ivm_trace_field_find(e, "common_pid", 4, pid);
	if (!err)
		err = ivm_trace_field_find(e, "id", 8, nr);
	if (!err && ret)
		err = ivm_trace_field_find(e, "ret", 8, ret);
	if (!err)
		*id = e->id;
	return err;
}

struct ivm_error *ivm_disk_syscalls_parse(const char *enter_format,
					  const char *exit_format,
					  struct ivm_disk_syscalls **ret)
{
	struct ivm_disk_syscalls *ds = calloc(1, sizeof(*ds));
	struct ivm_error *err;

	if (!ds)
		return &ivm_enomem;
	ds->tep = tep_alloc();
	if (!ds->tep) {
		free(ds);
		return &ivm_enomem;
	}
	err = parse_one(ds, enter_format, "sys_enter", &ds->enter_id,
			&ds->enter_pid, &ds->enter_nr, NULL);
	if (!err)
		err = parse_one(ds, exit_format, "sys_exit", &ds->exit_id,
				&ds->exit_pid, &ds->exit_nr, &ds->ret);
	if (err) {
		ivm_disk_syscalls_destroy(ds);
		return err;
	}
	*ret = ds;
	return NULL;
}

struct ivm_error *ivm_disk_syscalls_load(const char *tracefs,
					 struct ivm_disk_syscalls **ret)
{
	char *enter = NULL, *exit = NULL;
	struct ivm_error *err;

	err = ivm_trace_format_read(tracefs, "raw_syscalls", "sys_enter",
				    &enter);
	if (!err)
		err = ivm_trace_format_read(tracefs, "raw_syscalls", "sys_exit",
					    &exit);
	if (!err)
		err = ivm_disk_syscalls_parse(enter, exit, ret);
	free(enter);
	free(exit);
	return err;
}

void ivm_disk_syscalls_destroy(struct ivm_disk_syscalls *ds)
{
	if (!ds)
		return;
	tep_free(ds->tep);
	free(ds);
}

/* A field's value, sign-extended from its size. */
static bool get_signed(const void *data, size_t size,
		       struct ivm_trace_field f, int64_t *ret)
{
	uint64_t v;

	if (!ivm_trace_field_get(data, size, f, &v))
		return false;
	if (f.size < 8 && (v >> (8 * f.size - 1)) & 1)
		v |= ~0ull << (8 * f.size);
	*ret = (int64_t)v;
	return true;
}

struct ivm_error *ivm_disk_syscalls_decode(const struct ivm_disk_syscalls *ds,
					   const void *data, size_t size,
					   struct ivm_disk_syscall *ret)
{
	int64_t tid;
	int type;

	memset(ret, 0, sizeof(*ret));
	if (!ivm_trace_record_type(data, size, &type))
		goto short_record;
	if (type == ds->enter_id) {
		if (!get_signed(data, size, ds->enter_pid, &tid) ||
		    !get_signed(data, size, ds->enter_nr, &ret->nr))
			goto short_record;
	} else if (type == ds->exit_id) {
		if (!get_signed(data, size, ds->exit_pid, &tid) ||
		    !get_signed(data, size, ds->exit_nr, &ret->nr) ||
		    !get_signed(data, size, ds->ret, &ret->ret))
			goto short_record;
		ret->exit = true;
	} else {
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"trace record of event %d is not a syscall",
					type);
	}
	ret->tid = (int32_t)tid;
	return NULL;
short_record:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"trace record too short for its fields (%zu bytes)",
				size);
}
