/* SPDX-License-Identifier: MIT */
/*
 * disk_syscalls: decoding the host's raw_syscalls:sys_enter / sys_exit
 * records of QEMU's threads, for the host side of the guest's disk
 * requests (disk_service.h).
 *
 * With QEMU's default aio=threads, a virtio-blk request is served by a
 * thread-pool worker ("worker" with libvirt's debug-threads) that calls
 * preadv/pwritev (pread64/pwrite64 for one buffer), fdatasync for a flush
 * and fallocate for a discard or zeroes, on the image file; with an
 * iothread only the submitting thread changes.  Each call is one piece of
 * the request's host service, from its enter record to its exit record.
 * aio=io_uring and aio=native submit instead (io_uring_enter, io_submit)
 * and the kernel serves the request without a syscall of QEMU's to time:
 * those are decoded as IVM_DISK_ASYNC so a run can say it did not time
 * them.
 *
 * The syscall numbers are x86-64's (the host idlevm runs on).  Field
 * offsets come from the running kernel's format files (libtraceevent);
 * every field read is checked to lie inside the record.
 */
#ifndef IVM_DISK_SYSCALLS_H
#define IVM_DISK_SYSCALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum ivm_disk_kind {
	IVM_DISK_READ,		/* pread64, preadv, preadv2 */
	IVM_DISK_WRITE,		/* pwrite64, pwritev, pwritev2 */
	IVM_DISK_FLUSH,		/* fdatasync, fsync */
	IVM_DISK_OTHER,		/* fallocate: discard, write zeroes */
	IVM_DISK_ASYNC,		/* io_uring_enter, io_submit: not timed */
	IVM_DISK_NR_KINDS,
};

/* The kind of syscall number nr; false when it is none of these. */
bool ivm_disk_syscall_kind(int64_t nr, enum ivm_disk_kind *ret);

/* "read", "write", "flush", "other", "async". */
const char *ivm_disk_kind_name(enum ivm_disk_kind kind);

/*
 * The kernel filter that keeps only these syscalls ("id == 17 || ..."),
 * for both events; a static string.
 */
const char *ivm_disk_syscall_filter(void);

struct ivm_disk_syscall {
	bool exit;		/* sys_exit, else sys_enter */
	int32_t tid;		/* common_pid: the QEMU thread */
	int64_t nr;		/* the syscall number */
	int64_t ret;		/* exit: its result (negative: -errno) */
};

struct ivm_disk_syscalls;

/*
 * Parse the format texts (NUL-terminated) of raw_syscalls:sys_enter and
 * sys_exit.  IVM_ERROR_INVALID naming the event whose format lacks a field
 * idlevm reads.
 */
struct ivm_error *ivm_disk_syscalls_parse(const char *enter_format,
					  const char *exit_format,
					  struct ivm_disk_syscalls **ret);

/* The same from a tracefs mount (NULL: /sys/kernel/tracing). */
struct ivm_error *ivm_disk_syscalls_load(const char *tracefs,
					 struct ivm_disk_syscalls **ret);

void ivm_disk_syscalls_destroy(struct ivm_disk_syscalls *ds);

/*
 * Decode one raw record (starting at common_type).  IVM_ERROR_NOT_FOUND
 * for a record of another event; IVM_ERROR_PROTOCOL for one too short for
 * its fields.
 */
struct ivm_error *ivm_disk_syscalls_decode(const struct ivm_disk_syscalls *ds,
					   const void *data, size_t size,
					   struct ivm_disk_syscall *ret);

#endif /* IVM_DISK_SYSCALLS_H */
