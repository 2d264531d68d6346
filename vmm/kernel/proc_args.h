/* SPDX-License-Identifier: MIT */
/*
 * proc_args: a guest process's command line, read from guest memory as
 * the guest's /proc/PID/cmdline gives it, and shown as ps(1) shows it.
 *
 * The kernel keeps where a process's arguments and environment lie in its
 * user memory (mm_struct arg_start, arg_end, env_start, env_end: the
 * strings exec copied to the top of its stack).  /proc/PID/cmdline reads
 * [arg_start, arg_end), except when the process overwrote the NUL that
 * ended its last argument: then it took the room for a title of its own
 * (setproctitle: nginx, php-fpm, sshd, postgres), which may run on into
 * the environment, and the kernel gives the bytes from arg_start up to the
 * first NUL, at most a page and never past env_end.  This module applies
 * the same rule.
 *
 * Hostile guest: the four pointers must be ordered user addresses, at most
 * the caller's cap is read, a fault truncates the result (and says so),
 * and what is shown is printable ASCII only.
 */
#ifndef IVM_PROC_ARGS_H
#define IVM_PROC_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/btf.h"

/* Bytes of a command line read at most (a setproctitle title: a page). */
#define IVM_PROC_ARGS_MAX 4096u

/* Offsets in struct mm_struct of the four pointers, from BTF. */
struct ivm_proc_args_offsets {
	uint32_t arg_start, arg_end, env_start, env_end;
};

/* IVM_ERROR_NOT_FOUND naming the member the kernel's BTF lacks. */
struct ivm_error *ivm_proc_args_offsets_from_btf(
	const struct ivm_btf *btf, struct ivm_proc_args_offsets *ret);

/* What a read found. */
struct ivm_proc_args {
	size_t len;		/* bytes in the caller's buffer */
	bool title;		/* the process wrote a title over its args */
	bool truncated;		/* over the cap, or a page was unreadable */
};

/*
 * Read the command line of the mm_struct at mm (through kmem, a kernel
 * reader) from its user memory (umem, through the process's page tables)
 * into buf, at most cap bytes (and IVM_PROC_ARGS_MAX): NUL-separated
 * arguments as /proc/PID/cmdline has them.  A process without one (a
 * kernel thread has no mm; a process still being set up has none yet)
 * gives len 0.  Fails with the reader's error when mm_struct cannot be
 * read, IVM_ERROR_PROTOCOL when its pointers are not ordered user
 * addresses; a fault in user memory only truncates.
 */
struct ivm_error *ivm_proc_args_read(const struct ivm_kmem_reader *kmem,
				     const struct ivm_proc_args_offsets *off,
				     uint64_t mm, const struct ivm_kmem_reader *umem,
				     int la57, char *buf, size_t cap,
				     struct ivm_proc_args *ret);

/*
 * The command line raw (len bytes) as ps -o args shows it, into out
 * (out_size > 0; always NUL-terminated, cut to fit): trailing NULs
 * dropped, the NULs and newlines between arguments shown as spaces, and
 * any other byte outside printable ASCII as '?'.  Returns the length.
 */
size_t ivm_proc_args_display(const char *raw, size_t len, char *out,
			     size_t out_size);

#endif /* IVM_PROC_ARGS_H */
