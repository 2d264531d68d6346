/* SPDX-License-Identifier: MIT */
/*
 * why_idle: where a guest's vCPU time went that was not guest code, the
 * text report's opening block.  Both layers side by side:
 *
 *   guest idle      the vCPU halted (idle periods, both ends known), split
 *                   by what woke it: a device (I/O), an IPI (a task woken
 *                   on another vCPU), a timer (a sleep ended); under
 *                   "device", how long the host's storage (QEMU's I/O
 *                   calls, disk_service.h) was busy in those periods;
 *   host steal      its thread runnable on the host and waiting for a host
 *                   CPU (after a wakeup: the host's wake delay), with the
 *                   host tasks that ran meanwhile, and the kernel's own
 *                   run_delay of the thread beside it;
 *   host sleep      its thread asleep on the host outside guest idle
 *                   (QEMU's lock, I/O done in the vCPU thread);
 *   the rest        running guest code (and what nothing saw);
 *   host storage    QEMU's I/O calls over the run: count and time by
 *                   kind, a histogram of their lengths, and its I/O
 *                   threads' waits for a host CPU between the calls.
 *
 * And the guest threads whose to-idle stacks began the most idle time.
 * Everything comes from the profile: the idle-period records, the last
 * STATS/END record (host_sched.h's and disk_service.h's stats) and the
 * call tree's time values.
 */
#ifndef IVM_WHY_IDLE_H
#define IVM_WHY_IDLE_H

#include <stdio.h>

#include "report/calltree.h"
#include "report/idle_summary.h"

void ivm_why_idle_print(const struct ivm_idle_summary *s,
			const struct ivm_calltree *tree, FILE *out);

#endif /* IVM_WHY_IDLE_H */
