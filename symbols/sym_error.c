// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sym_error.h"

struct ivm_sym_error ivm_sym_enomem = {
	.code = IVM_SYM_ERROR_NOMEM,
	.message = "out of memory",
};

static struct ivm_sym_error *error_vcreate(enum ivm_sym_error_code code,
					   int errnum, const char *fmt,
					   va_list ap)
{
	struct ivm_sym_error *err = calloc(1, sizeof(*err));
	char *msg, *full;

	if (!err)
		return &ivm_sym_enomem;
	if (vasprintf(&msg, fmt, ap) < 0) {
		free(err);
		return &ivm_sym_enomem;
	}
	if (code == IVM_SYM_ERROR_OS) {
		if (asprintf(&full, "%s: %s", msg, strerror(errnum)) < 0) {
			free(msg);
			free(err);
			return &ivm_sym_enomem;
		}
		free(msg);
		msg = full;
	}
	err->code = code;
	err->errnum = errnum;
	err->message = msg;
	return err;
}

struct ivm_sym_error *ivm_sym_error_create(enum ivm_sym_error_code code,
					   const char *fmt, ...)
{
	struct ivm_sym_error *err;
	va_list ap;

	va_start(ap, fmt);
	err = error_vcreate(code, 0, fmt, ap);
	va_end(ap);
	return err;
}

struct ivm_sym_error *ivm_sym_error_os(int errnum, const char *fmt, ...)
{
	struct ivm_sym_error *err;
	va_list ap;

	va_start(ap, fmt);
	err = error_vcreate(IVM_SYM_ERROR_OS, errnum, fmt, ap);
	va_end(ap);
	return err;
}

const char *ivm_sym_error_string(const struct ivm_sym_error *err)
{
	return err ? err->message : "success";
}

void ivm_sym_error_destroy(struct ivm_sym_error *err)
{
	if (!err || err == &ivm_sym_enomem)
		return;
	free(err->message);
	free(err);
}
