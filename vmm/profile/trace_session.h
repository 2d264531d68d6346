/* SPDX-License-Identifier: MIT */
/*
 * trace_session: a private tracefs instance recording chosen tracepoints of
 * chosen host threads, read without blocking, waited on cheaply.
 *
 * The idle signal: sched:sched_switch / sched_waking / sched_wakeup of the
 * QEMU vCPU threads (vmm/profile/sched_events.h), and on hardware KVM also
 * kvm:kvm_exit / kvm_vcpu_wakeup (vmm/profile/kvm_events.h).  An instance of
 * our own ("idlevm-PID", "idlevm-PID-N" for the next sessions of the same
 * process: several guests) leaves the global trace buffer and other
 * tracers alone, and is removed when the session ends (instances of idlevm
 * runs killed before they could remove theirs go at the next start).
 * tracefs is mounted at
 * /sys/kernel/tracing first if it is not (root): ivm_tracefs_ensure().
 *
 * Timestamps are CLOCK_MONOTONIC nanoseconds (the instance's trace_clock is
 * set to "mono"), comparable with ivm_mono_ns().  The instance wakes a
 * waiting reader as soon as any CPU buffer holds an event (buffer_percent
 * 0), so ivm_trace_session_wait() returns within the scheduler's latency of
 * an event, and costs nothing while none come.
 *
 * Lost events (a CPU buffer that overflowed between two reads) are counted,
 * never hidden: ivm_trace_session_lost().
 */
#ifndef IVM_TRACE_SESSION_H
#define IVM_TRACE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <sys/types.h>

#include "base/error.h"

struct ivm_trace_session;

#define IVM_TRACEFS_DIR "/sys/kernel/tracing"

/* Whether tracefs is mounted at IVM_TRACEFS_DIR. */
bool ivm_tracefs_mounted(void);

/*
 * Mount tracefs at /sys/kernel/tracing unless it is there (root only);
 * *mounted says whether this call did.  Call it before reading any event
 * format: on a fresh host nothing has mounted it yet.
 */
struct ivm_error *ivm_tracefs_ensure(bool *mounted);

/*
 * Follow the threads' children too: a thread or process that one of them
 * creates is traced from its start and dropped when it exits (the
 * instance's event-fork option), for threads that come and go such as
 * QEMU's thread-pool workers.
 */
#define IVM_TRACE_FOLLOW_FORKS	0x1

/*
 * Start recording events ("system:event", e.g. "sched:sched_switch") of
 * the threads tids (at most 256), with IVM_TRACE_* flags.  An event the
 * kernel lacks fails with IVM_ERROR_NOT_FOUND naming it; no tracefs with
 * IVM_ERROR_OS; a kernel without event-fork, when asked for it, with
 * IVM_ERROR_NOT_FOUND.
 */
struct ivm_error *ivm_trace_session_create(const char *const *events,
					   size_t nr_events, const pid_t *tids,
					   size_t nr_tids, unsigned int flags,
					   struct ivm_trace_session **ret);

/*
 * Record event ("system:event", one of the session's) only when filter
 * holds (the kernel's event filter syntax, e.g. "prev_state & 3"), so the
 * reader is not woken for the others.  IVM_ERROR_INVALID when the kernel
 * refuses the filter.
 */
struct ivm_error *ivm_trace_session_filter(struct ivm_trace_session *s,
					   const char *event,
					   const char *filter);

/*
 * Also record events (of the threads tids, with IVM_TRACE_* flags) that
 * must not wake a waiter: in an instance of their own, never polled, read
 * with s's (ivm_trace_session_read hands both over as one stream in stamp
 * order, their losses counted as s's).  For events needed in order with
 * the others but not at once: a vCPU thread's wakeup, whose sleep that
 * follows wakes the loop anyway.  ivm_trace_session_filter() on s reaches
 * them; enable, discard and destroy cover them.  At most once per session.
 * The order is as across s's own CPUs: exact when s is held; if not, a
 * record of s written while the read is under way, after its buffer was
 * drained, comes in the next read, after quiet records drained later.
 */
struct ivm_error *ivm_trace_session_add_quiet(struct ivm_trace_session *s,
					      const char *const *events,
					      size_t nr_events,
					      const pid_t *tids,
					      size_t nr_tids,
					      unsigned int flags);

/* Stop recording and remove the instance.  NULL is fine. */
void ivm_trace_session_destroy(struct ivm_trace_session *s);

/*
 * Hand every record recorded since the last read to fn, oldest first
 * across CPUs: the raw event (starting at common_type), its size, the host
 * CPU and the timestamp (CLOCK_MONOTONIC ns).  fn returns non-zero to stop
 * early (the rest of that read is dropped and counted lost).  Does not
 * block.
 */
struct ivm_error *ivm_trace_session_read(
	struct ivm_trace_session *s,
	int (*fn)(void *ctx, const void *data, size_t size, int cpu,
		  uint64_t ts),
	void *ctx);

/*
 * Hold back, from each read on, the records stamped at or after the read
 * began, or within a millisecond before (a record still being written):
 * they wait for the next read, handed over in order with its own.
 * A read drains the CPU buffers one after another, so without this a
 * record written on a CPU already drained, stamped before records of a
 * CPU drained after it, comes in the next read, after them: a thread's
 * wakeup after its switch-in.  Held, a record is late by one read but
 * never out of order (but for one whose writer stalled a millisecond
 * between stamping and writing it, or beyond a read's bound of pages per
 * CPU).  For sessions whose
 * order matters more than their latency; off, records are handed over
 * at once.  A held read reads the buffers a poll finds holding records
 * once its bound is taken (not the wait's: a buffer found empty then may
 * since hold records stamped before the read), and discarding drops what
 * it holds.  Turn it off before a run's last read.
 */
void ivm_trace_session_hold(struct ivm_trace_session *s, bool on);

/*
 * Sleep until a CPU buffer holds an event or timeout_ns passed (0: just
 * look); a signal ends the sleep early.  *ret says whether events wait.
 */
struct ivm_error *ivm_trace_session_wait(struct ivm_trace_session *s,
					 uint64_t timeout_ns, bool *ret);

/*
 * The descriptors ivm_trace_session_wait() polls (POLLIN: events wait),
 * for a caller that waits on several sessions at once.  Borrowed.  One:
 * an epoll instance over the session's host CPU buffers, so that a wait
 * on many guests' sessions costs one descriptor each, not one per guest
 * and host CPU (ppoll's cost grows with its descriptors).
 */
size_t ivm_trace_session_pollfds(const struct ivm_trace_session *s,
				 const struct pollfd **ret);

/*
 * What a wait on the session's descriptors found: fds are the n
 * descriptors ivm_trace_session_pollfds() gave, in its order, with the
 * revents of a poll() that returned (0 or more, not an error).  When it
 * found nothing, the next ivm_trace_session_read() reads none of the
 * session's own buffers, once.  An event recorded after the poll is read
 * by a later read, never lost: the buffer stays readable and the next
 * poll returns at once.  Any read reads only the CPU buffers its epoll
 * instance says hold records (an empty buffer read is a system call that
 * returns EAGAIN).  Without exact readiness (a kernel that refused
 * buffer_percent 0 wakes pollers only at half full), or with fds not the
 * session's, nothing is skipped.  fds NULL forgets a hint not used (a
 * step that read nothing).
 */
void ivm_trace_session_polled(struct ivm_trace_session *s,
			      const struct pollfd *fds, size_t n);

/*
 * Stop or restart recording (the instance's tracing_on), keeping the
 * session: records already in the buffers stay until read or discarded.
 */
struct ivm_error *ivm_trace_session_enable(struct ivm_trace_session *s,
					   bool on);

/* Read and drop every record waiting (not counted lost); how many. */
size_t ivm_trace_session_discard(struct ivm_trace_session *s);

/*
 * Bytes of the records' buffers a read fills (its pending list and
 * arenas): as large as the largest backlog read, freed within a second
 * or two of reads that need a quarter of them.
 */
size_t ivm_trace_session_memory(const struct ivm_trace_session *s);

/* Events the kernel dropped (buffer full) or that read had to drop. */
uint64_t ivm_trace_session_lost(const struct ivm_trace_session *s);

#endif /* IVM_TRACE_SESSION_H */
