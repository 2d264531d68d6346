/* SPDX-License-Identifier: MIT */
/*
 * caps: this process's Linux capabilities, read and given up.
 *
 * idlevm runs as root, or as root with a reduced capability set (README,
 * "What idlevm needs").  The processes it starts for one job (the pause
 * guardian, a continuous run's pprof children) keep only what that job
 * needs: ivm_caps_limit_raw() before their execve (spawn.h), and
 * ivm_caps_limit() again at the start of their main.  A set is a bit mask
 * of capability numbers (linux/capability.h), bit N for capability N.
 */
#ifndef IVM_CAPS_H
#define IVM_CAPS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

/* The capabilities idlevm names (numbers of linux/capability.h). */
#define IVM_CAP_DAC_OVERRIDE	1
#define IVM_CAP_SETPCAP		8
#define IVM_CAP_SYS_PTRACE	19
#define IVM_CAP_SYS_ADMIN	21
#define IVM_CAP_SYS_NICE	23

#define IVM_CAP_BIT(cap)	(1ULL << (cap))

/*
 * The set of process pid (0: this one) that /proc/PID/status names key
 * ("CapEff", "CapPrm", "CapBnd", ...).  False when it cannot be read.
 */
bool ivm_caps_read(int pid, const char *key, uint64_t *ret);

/* Whether this process has cap in its effective set. */
bool ivm_caps_effective(unsigned int cap);

/*
 * Keep only the capabilities in keep, for good: the ambient and
 * inheritable sets are emptied, the permitted and effective sets become
 * keep (less what the process did not have), every other capability
 * leaves the bounding set when the process may drop it (CAP_SETPCAP; a
 * bounding set that stays wider grants nothing, see next), and
 * no_new_privs is set, so no later execve, even of a root program, gives
 * one back.  An error names the step
 * that failed; the process then holds no more than before.
 */
struct ivm_error *ivm_caps_limit(uint64_t keep);

/*
 * The same with nothing but system calls, for a child between fork and
 * execve (spawn.h): 0, or an errno with *step the (static) name of the
 * step that failed.
 */
int ivm_caps_limit_raw(uint64_t keep, const char **step);

#endif /* IVM_CAPS_H */
