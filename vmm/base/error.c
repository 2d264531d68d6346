// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

struct ivm_error ivm_enomem = {
	.code = IVM_ERROR_NOMEM,
	.message = "cannot allocate memory",
};

struct ivm_error ivm_stop = {
	.code = IVM_ERROR_STOP,
	.message = "stop",
};

static struct ivm_error *error_vcreate(enum ivm_error_code code,
				       const char *fmt, va_list ap)
{
	struct ivm_error *err = calloc(1, sizeof(*err));

	if (!err)
		return &ivm_enomem;
	if (vasprintf(&err->message, fmt, ap) < 0) {
		free(err);
		return &ivm_enomem;
	}
	err->code = code;
	err->needs_free = true;
	return err;
}

struct ivm_error *ivm_error_create(enum ivm_error_code code, const char *fmt,
				   ...)
{
	struct ivm_error *err;
	va_list ap;

	va_start(ap, fmt);
	err = error_vcreate(code, fmt, ap);
	va_end(ap);
	return err;
}

struct ivm_error *ivm_error_os(int errnum, const char *fmt, ...)
{
	struct ivm_error *err;
	char *full;
	va_list ap;

	va_start(ap, fmt);
	err = error_vcreate(IVM_ERROR_OS, fmt, ap);
	va_end(ap);
	if (!err->needs_free)
		return err;
	err->errnum = errnum;
	if (asprintf(&full, "%s: %s", err->message, strerror(errnum)) >= 0) {
		free(err->message);
		err->message = full;
	}
	return err;
}

struct ivm_error *ivm_error_fault(uint64_t address, const char *fmt, ...)
{
	struct ivm_error *err;
	va_list ap;

	va_start(ap, fmt);
	err = error_vcreate(IVM_ERROR_FAULT, fmt, ap);
	va_end(ap);
	if (err->needs_free)
		err->address = address;
	return err;
}

struct ivm_error *ivm_error_qmp(const char *qmp_class, const char *desc)
{
	struct ivm_error *err;

	err = ivm_error_create(IVM_ERROR_QMP, "qemu: %s", desc ? desc : "error");
	if (!err->needs_free)
		return err;
	err->qmp_class = strdup(qmp_class ? qmp_class : "GenericError");
	if (!err->qmp_class) {
		ivm_error_destroy(err);
		return &ivm_enomem;
	}
	return err;
}

struct ivm_error *ivm_error_wrap(struct ivm_error *err, const char *fmt, ...)
{
	char *prefix, *full;
	va_list ap;
	int r;

	if (!err || !err->needs_free)
		return err;
	va_start(ap, fmt);
	r = vasprintf(&prefix, fmt, ap);
	va_end(ap);
	if (r < 0)
		return err;
	if (asprintf(&full, "%s: %s", prefix, err->message) >= 0) {
		free(err->message);
		err->message = full;
	}
	free(prefix);
	return err;
}

void ivm_error_destroy(struct ivm_error *err)
{
	if (!err || !err->needs_free)
		return;
	free(err->qmp_class);
	free(err->message);
	free(err);
}

const char *ivm_error_string(const struct ivm_error *err)
{
	if (!err)
		return "success";
	return err->message ? err->message : "unknown error";
}

int ivm_error_report(struct ivm_error *err)
{
	fprintf(stderr, "idlevm: %s\n", ivm_error_string(err));
	ivm_error_destroy(err);
	return 1;
}
