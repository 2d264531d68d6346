/* SPDX-License-Identifier: MIT */
/*
 * Errors of the symbols/ library.  symbols/ stands alone (it does not
 * include vmm/), so it has its own small error object in the same shape:
 * a function that can fail returns a struct ivm_sym_error *, NULL meaning
 * success, and its result through an out-parameter named ret, placed last.
 *
 * The caller owns a returned error and frees it with
 * ivm_sym_error_destroy(); the static ivm_sym_enomem is never freed (destroy
 * knows it).  Messages are lowercase, say what failed first, and never
 * contain a newline.
 */
#ifndef IVM_SYM_ERROR_H
#define IVM_SYM_ERROR_H

enum ivm_sym_error_code {
	IVM_SYM_ERROR_NOMEM = 1,
	IVM_SYM_ERROR_OS,	/* a system call failed; errnum says why */
	IVM_SYM_ERROR_FORMAT,	/* not an ELF / corrupt or truncated file */
	IVM_SYM_ERROR_NOT_FOUND,	/* no such symbol file */
	IVM_SYM_ERROR_MISMATCH,	/* debuginfo of another build */
};

struct ivm_sym_error {
	enum ivm_sym_error_code code;
	int errnum;		/* IVM_SYM_ERROR_OS: the errno */
	char *message;
};

extern struct ivm_sym_error ivm_sym_enomem;

/* A new error with a printf-style message; &ivm_sym_enomem if none fits. */
struct ivm_sym_error *ivm_sym_error_create(enum ivm_sym_error_code code,
					   const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* An OS error: the message gets ": strerror(errnum)" appended. */
struct ivm_sym_error *ivm_sym_error_os(int errnum, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

const char *ivm_sym_error_string(const struct ivm_sym_error *err);

/* Free err; NULL and &ivm_sym_enomem are no-ops. */
void ivm_sym_error_destroy(struct ivm_sym_error *err);

#endif /* IVM_SYM_ERROR_H */
