/* SPDX-License-Identifier: MIT */
/*
 * Error objects for the host tool.
 *
 * A function that can fail returns struct ivm_error *, NULL meaning success,
 * and hands its result back through an out-parameter named ret, placed last.
 * An error carries the data a caller needs to act or to explain: the errno of
 * a failed system call, the guest address of a memory fault, the class of a
 * QMP error.  The message is lowercase, says what failed first, and is meant
 * to be printed as is after "idlevm: ".
 *
 * Invariants:
 *  - ivm_error_destroy(NULL) is a no-op; destroying a static error (such as
 *    &ivm_enomem) is a no-op too, so callers never need to tell them apart.
 *  - Creating an error never fails: if memory runs out, &ivm_enomem is
 *    returned in its place.
 */
#ifndef IVM_ERROR_H
#define IVM_ERROR_H

#include <stdbool.h>
#include <stdint.h>

enum ivm_error_code {
	IVM_ERROR_OTHER,
	IVM_ERROR_NOMEM,
	IVM_ERROR_OS,		/* a system call failed; errnum is set */
	IVM_ERROR_INVALID,	/* bad input from the user */
	IVM_ERROR_NOT_FOUND,	/* domain, task, symbol... does not exist */
	IVM_ERROR_FAULT,	/* guest memory could not be read; address set */
	IVM_ERROR_PROTOCOL,	/* a peer (QEMU, helper, guest data) misbehaved */
	IVM_ERROR_TIMEOUT,
	IVM_ERROR_QMP,		/* QEMU answered with an error; qmp_class set */
	IVM_ERROR_LIBVIRT,
	IVM_ERROR_GONE,		/* the guest or its QEMU went away */
	IVM_ERROR_ELF,		/* libelf/libdw failure or corrupt debuginfo */
	IVM_ERROR_STOP,		/* not an error: iteration asked to stop */
};

struct ivm_error {
	enum ivm_error_code code;
	bool needs_free;
	int errnum;		/* IVM_ERROR_OS */
	uint64_t address;	/* IVM_ERROR_FAULT: guest address that failed */
	char *qmp_class;	/* IVM_ERROR_QMP: e.g. "GenericError" */
	char *message;
};

extern struct ivm_error ivm_enomem;
extern struct ivm_error ivm_stop;

struct ivm_error *ivm_error_create(enum ivm_error_code code, const char *fmt,
				   ...) __attribute__((format(printf, 2, 3)));
/* An OS error; the message gets ": strerror(errnum)" appended. */
struct ivm_error *ivm_error_os(int errnum, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A guest memory fault at address. */
struct ivm_error *ivm_error_fault(uint64_t address, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A QMP error reply; class and desc are copied. */
struct ivm_error *ivm_error_qmp(const char *qmp_class, const char *desc);
/*
 * Prefix the message of err with more context ("reading task 42: ..."),
 * returning err itself (or a replacement if err was static).
 */
struct ivm_error *ivm_error_wrap(struct ivm_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void ivm_error_destroy(struct ivm_error *err);

/* The message, never NULL. */
const char *ivm_error_string(const struct ivm_error *err);

/* Print "idlevm: <message>" to stderr and destroy err.  Returns 1. */
int ivm_error_report(struct ivm_error *err);

static inline void ivm_error_cleanup(struct ivm_error **errp)
{
	ivm_error_destroy(*errp);
}
#define _cleanup_error_ __attribute__((cleanup(ivm_error_cleanup)))

#endif /* IVM_ERROR_H */
