/* SPDX-License-Identifier: MIT */
/*
 * trace_session: a private tracefs instance recording chosen tracepoints of
 * chosen host threads (libtracefs), read without blocking.
 *
 * The idle signal of hardware-KVM hosts: kvm:kvm_exit / kvm_vcpu_wakeup /
 * kvm_entry of the QEMU vCPU threads, decoded by vmm/profile/kvm_events.h.  An
 * instance of our own ("idlevm-PID") leaves the global trace buffer and
 * other tracers alone, and is removed when the session ends.  tracefs is
 * mounted at /sys/kernel/tracing first if it is not (root).
 */
#ifndef IVM_TRACE_SESSION_H
#define IVM_TRACE_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

struct tep_handle;
struct ivm_trace_session;

/*
 * Start recording events ("system:event", e.g. "kvm:kvm_exit") of the
 * threads tids (at most 256).  tep (borrowed, must outlive the session)
 * holds the events' formats; NULL loads them from tracefs.
 */
struct ivm_error *ivm_trace_session_create(const char *const *events,
					   size_t nr_events, const pid_t *tids,
					   size_t nr_tids,
					   struct ivm_trace_session **ret);

/* Stop recording and remove the instance.  NULL is fine. */
void ivm_trace_session_destroy(struct ivm_trace_session *s);

/* The formats of the session's events (owned by the session). */
struct tep_handle *ivm_trace_session_tep(struct ivm_trace_session *s);

/*
 * Hand every record recorded since the last read to fn: the raw event
 * (starting at common_type), its size, the CPU and the trace timestamp.
 * fn returns non-zero to stop early.  Does not block.
 */
struct ivm_error *ivm_trace_session_read(
	struct ivm_trace_session *s,
	int (*fn)(void *ctx, const void *data, size_t size, int cpu,
		  uint64_t ts),
	void *ctx);

#endif /* IVM_TRACE_SESSION_H */
