/* SPDX-License-Identifier: MIT */
/*
 * spawn: start a program (in practice this very binary, on one of its
 * internal commands) as a child that holds only the capabilities it is
 * left, from its first instruction.
 *
 * posix_spawn cannot do that: the capabilities are given up between fork
 * and execve, and an execve by root would otherwise grant the whole
 * bounding set back (which only CAP_SETPCAP may shrink).  With
 * no_new_privs set and the permitted set cut first, the kernel grants an
 * exec no capability its caller did not hold (caps.h), so the child
 * starts with no more than caps, whatever runs it and however briefly.
 *
 * The child runs nothing but system calls between fork and execve (this
 * process may have threads).  Its signal handlers are reset to the
 * default there; its signal mask is the caller's unless said.  An execve
 * that fails is reported by ivm_spawn's error, the child gone.
 */
#ifndef IVM_SPAWN_H
#define IVM_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

struct ivm_spawn {
	uint64_t caps;		/* kept (caps.h IVM_CAP_BIT set); others go */
	bool new_session;	/* setsid(): outlives our process group */
	bool new_group;		/* a process group of its own */
	bool normal_priority;	/* SCHED_OTHER, whatever the caller runs at */
	bool empty_sigmask;	/* no signal blocked */
	bool null_stdio;	/* stdin and stdout on /dev/null */
	int pass_fd;		/* -1: none; else given to the child as pass_as */
	int pass_as;		/* every descriptor above it is closed */
};

/*
 * Start path with argv and this process's environment as opts say; *ret
 * its pid.  An error names the step (fork, or what the child failed at,
 * with its errno).
 */
struct ivm_error *ivm_spawn(const char *path, char *const argv[],
			    const struct ivm_spawn *opts, pid_t *ret);

#endif /* IVM_SPAWN_H */
