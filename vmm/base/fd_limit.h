/* SPDX-License-Identifier: MIT */
/*
 * fd_limit: room for the descriptors a profile of many guests holds.
 *
 * A guest's trace sessions open a buffer per host CPU each (the idle
 * signal's, its quiet wakeups', the host's side, with --disk the disk's):
 * some 200 descriptors a guest on a 64-CPU host, where a shell's soft
 * limit is usually 1,024.  The hard limit is the administrator's word;
 * the soft one is ours to raise up to it (idlevm waits with ppoll and
 * epoll, never select, so descriptors past FD_SETSIZE are fine).
 */
#ifndef IVM_FD_LIMIT_H
#define IVM_FD_LIMIT_H

#include <stdint.h>

/*
 * Raise this process's soft RLIMIT_NOFILE to its hard limit; the soft
 * limit in force after it (raised or not), 0 if it cannot be read.
 */
uint64_t ivm_fd_limit_raise(void);

#endif /* IVM_FD_LIMIT_H */
