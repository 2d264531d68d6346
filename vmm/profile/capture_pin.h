/* SPDX-License-Identifier: MIT */
/*
 * Pin capture: the method's key step.  While the host reads a sleeping
 * guest thread's stack, the in-guest helper occupies the vCPU that went
 * idle with its real-time holder thread and pins the thread to that vCPU,
 * so the thread cannot run anywhere; then it restores the thread's
 * affinity and releases the vCPU.
 *
 * With a helper of protocol 2 (IVM_CAP_HOLD_PIN), one request per capture:
 *
 *   HOLD_PIN(c, T, lease)   one round trip; the reply comes once both are
 *                           in place, and the helper ends both by itself
 *                           `lease` later (sized to the read: ~1 ms)
 *   ivm_capture_task(T)     the optimistic read, its validation kept
 *   current(c) == holder?   from guest memory: the lease outlasted the read
 *
 * With an older helper (protocol 1), the pipelined pairs:
 *
 *   HOLD(c) + PIN(T, c)     one write, one round trip (pipelined)
 *   ivm_capture_task(T)     the optimistic read, its validation kept
 *   UNPIN(T) + RELEASE(c)   one write, one round trip
 *
 * Why the first: what a pin costs the guest is the time its target (a
 * thread just woken, in the rescue policy) waits behind the holder, and
 * the vCPU time the holder spins.  With the pairs that is two round trips
 * (milliseconds each under TCG) plus the read; with HOLD_PIN it is the
 * lease, and nothing in the guest wakes to end it.
 *
 * The read is made with IVM_CAPTURE_F_HELD when the hold and the pin were
 * granted.  Where the kernel has task_struct.on_cpu that changes nothing:
 * the read's own checks keep a runnable target that did not run (see
 * capture.h), and the pin only makes it less likely to run during the
 * read.  So pinning is about yield, not consistency, and under TCG its
 * round trip (milliseconds) is far longer than the read (tens of
 * microseconds): it is opt-in (--capture pin), optimistic the default.
 *
 * A pin makes discards rare, not impossible: the target may run between
 * the idle transition and the pin (the round trips are milliseconds under
 * TCG: hold+pin 5-8 ms, unpin+release 4-5 ms measured on the e2e guest,
 * against some 30 us for the host's read).  If it was running when the pin
 * came, the pin preempted it: its involuntary switch count moved between a
 * read of the task made before the pin and the capture, and the sample is
 * discarded (its stack is where we preempted it, not a path to idle).
 *
 * Policies (ivm_pin_capture_set_policy): IVM_PIN_RESCUE reads unpinned
 * first and pins only when that read is discarded and the target is found
 * woken but not yet running (the one case a pin helps); IVM_PIN_ALWAYS
 * pins every target not running, as the method is written.  Measured on
 * lockstorm (15 s, TCG on a shared host): blocked-frame discards optimistic
 * 0-3%, rescue 1-2% (with no pin needed at all), always 7-13% with the
 * holders spinning 13-23% of a vCPU and on-CPU samples cut five-fold (the
 * sampler waits on round trips).
 *
 * Everything the helper says is hostile and every request has a timeout
 * (helper_client.h).  A helper that stops answering, or whose connection
 * fails, suspends pin capture: it degrades to optimistic captures, counted
 * (failed) and explained (ivm_pin_capture_degraded), and connects again
 * once a helper answers a new HELLO (a killed helper restarted in the
 * guest; tried after 1 s, then backing off to 30 s; counted: reconnects).
 * The
 * helper's leases and its host-disconnect handling restore whatever was left
 * pinned or held, so a killed idlevm never leaves the guest pinned.
 */
#ifndef IVM_CAPTURE_PIN_H
#define IVM_CAPTURE_PIN_H

#include <stdbool.h>
#include <stdint.h>

#include "profile/capture.h"
#include "profile/profile_file.h"
#include "kernel/guest.h"
#include "access/helper_client.h"

/*
 * Lease of each pin, in microseconds.  With HOLD_PIN (protocol 2) the
 * whole hold: the target waits behind the holder that long, so it is sized
 * to the reply's way back to the host plus the read (see the README for
 * the figures).  With protocol 1 the PIN's lease in whole milliseconds (at
 * least IVM_PIN_LEASE_V1_MIN_MS; a HOLD gets half), the longest a killed
 * idlevm can leave a thread pinned if the helper also missed the
 * disconnect.
 */
#define IVM_PIN_LEASE_DEFAULT_US	1000
#define IVM_PIN_LEASE_V1_MIN_MS		80
/* Per-request timeout while profiling: a stalled helper must not stall the
 * sampler for the helper client's default 2 s. */
#define IVM_PIN_TIMEOUT_DEFAULT_MS	500
/* HOLD_PIN requests in a row without an answer before pin capture gives
 * up on the helper (one is only late: its lease bounds it in the guest). */
#define IVM_PIN_TIMEOUTS_TO_DEGRADE	3

struct ivm_pin_stats {
	uint64_t ok;		/* held and pinned during the read */
	uint64_t hold_only;	/* one-vCPU guest: holding is enough */
	uint64_t skipped;	/* target unreadable, idle, running or paused: no pin */
	uint64_t unneeded;	/* IVM_PIN_RESCUE: the unpinned read held */
	uint64_t running;	/* IVM_PIN_RESCUE: discarded, target running */
	uint64_t reread;	/* IVM_PIN_RESCUE: discarded, asleep again:
				 * read again unpinned */
	uint64_t refused;	/* helper refused the hold or the pin */
	uint64_t ran_before_pin;/* switch counts moved before the pin held */
	uint64_t lease_expired;	/* a lease ran out before the restore */
	uint64_t timed_out;	/* HOLD_PIN unanswered in time (read unpinned) */
	uint64_t failed;	/* helper connection failed: degraded */
	uint64_t unpinned;	/* captures made without pin after degrading */
	uint64_t reconnects;	/* the helper answered again after failing */
	uint64_t down_ns;	/* time without it, until it answered again */
	uint64_t pin_ns;	/* total time in HOLD+PIN round trips */
	uint64_t restore_ns;	/* total time in UNPIN+RELEASE round trips */
	/* What was asked of the helper (its own count: ivm_pin_capture_footprint). */
	uint64_t requests;	/* requests sent while profiling */
	uint64_t holds;		/* holds granted */
	uint64_t pins;		/* pins granted */
	uint64_t lease_us;	/* leases granted (protocol 2), in total */
	uint64_t refused_rt;	/* target above the holder's priority */
	/* READAHEADs of CFI the guest lacked (ivm_pin_capture_readahead). */
	uint64_t readaheads, readahead_failed, readahead_bytes;
	uint64_t readahead_ns;	/* total time they took */
};

struct ivm_pin_capture;

/*
 * The host path of guest's helper socket: socket_path when not NULL, else
 * the domain's helper channel (libvirt), else helper.sock beside qmp_path
 * (images/run-guest).  The caller frees *ret.
 */
struct ivm_error *ivm_pin_helper_socket(struct ivm_guest *guest,
					const char *socket_path,
					const char *qmp_path, char **ret);

/*
 * Connect to guest's helper (guest borrowed, must outlive the session) and
 * say HELLO, each request bounded by timeout_ms from then on.  The socket
 * is socket_path when not NULL, else the domain's helper channel (libvirt),
 * else helper.sock beside qmp_path (images/run-guest).  A helper that does
 * not answer, answers garbage or cannot pin and hold is an error whose
 * message says why (the caller degrades to optimistic with it).  lease_us
 * 0 means IVM_PIN_LEASE_DEFAULT_US; the policy starts as IVM_PIN_ALWAYS.
 */
struct ivm_error *ivm_pin_capture_create(struct ivm_guest *guest,
					 const char *socket_path,
					 const char *qmp_path, int timeout_ms,
					 unsigned int lease_us,
					 struct ivm_pin_capture **ret);
void ivm_pin_capture_destroy(struct ivm_pin_capture *pc);

enum ivm_pin_policy {
	/* Every to-idle capture is pinned: the method as written. */
	IVM_PIN_ALWAYS,
	/*
	 * Read unpinned first and pin only when that read is discarded
	 * (the target was found woken): a woken target still waiting for a
	 * CPU is pinned behind the holder and read at the stack it blocked
	 * with.  Cheaper, and where the host read is far shorter than a
	 * helper round trip, fewer discards.
	 */
	IVM_PIN_RESCUE,
};

void ivm_pin_capture_set_policy(struct ivm_pin_capture *pc,
				enum ivm_pin_policy policy);

/*
 * How the helper's round trips wait for replies (helper_client.h): a loop
 * running several guests serves the others meanwhile.
 */
void ivm_pin_capture_set_wait(struct ivm_pin_capture *pc,
			      ivm_helper_wait_fn wait, void *ctx);

/*
 * While paused, captures make no round trip to the helper: unpinned reads
 * only (counted skipped).  A loop running several guests pauses the
 * others' pins while one guest waits for its helper, so that their steps
 * are short and that guest's reply is taken before its leases run out.
 */
void ivm_pin_capture_pause(struct ivm_pin_capture *pc, bool paused);

/* The helper's guest pid (its holder threads belong to it), from HELLO. */
uint32_t ivm_pin_capture_helper_pid(const struct ivm_pin_capture *pc);

/*
 * The helper's own count of what it did for this session (requests, its
 * loop's wakeups, pins, holds, hold_ns: the vCPU time its holders spun...),
 * asked once, at the end of a profile.  IVM_ERROR_INVALID when the helper
 * is older than protocol 2 or pin capture has degraded (no helper).
 */
struct ivm_error *ivm_pin_capture_footprint(struct ivm_pin_capture *pc,
					    struct ivm_helper_stats *ret);

/*
 * At the end of a profile: the helper's footprint (as above) into w's
 * metadata, one "helper_NAME" item per counter, or "helper_footprint_error"
 * saying why there is none; *ret gets the counters (nr 0 when none).
 * w NULL (no file left to write to) only fills *ret.  Returns only
 * errors of the file.
 */
struct ivm_error *ivm_pin_capture_record_footprint(struct ivm_pin_capture *pc,
						   struct ivm_profile_writer *w,
						   struct ivm_helper_stats *ret);

/*
 * Why pin capture stopped (a one-line message), or NULL while it works
 * (again: stats' reconnects counts the helper's returns).
 */
const char *ivm_pin_capture_degraded(const struct ivm_pin_capture *pc);

const struct ivm_pin_stats *
ivm_pin_capture_stats(const struct ivm_pin_capture *pc);

/*
 * Capture the sleeping task at task_addr, which last ran on the vCPU that
 * is guest CPU cpu and went idle, holding cpu and pinning the task to it
 * for the read.  Falls back to a plain ivm_capture_task (counted) when the
 * task is not asleep, the helper refuses, or pin capture has degraded.
 * Errors as ivm_capture_task: caller mistakes only.
 */
struct ivm_error *ivm_pin_capture_task(struct ivm_pin_capture *pc,
				       struct ivm_capture_engine *engine,
				       uint64_t task_addr, int cpu,
				       struct ivm_capture *cap);

/*
 * Have the helper read what the engine's captures wanted and guest memory
 * lacked (capture.h ivm_capture_engine_take_readahead): every range waiting,
 * each in one round trip bounded by IVM_PIN_READAHEAD_TIMEOUT_MS (a cold
 * read from the guest's disk takes longer than a pin).  Counted in the
 * stats; a helper without READAHEAD is not asked, a refusal is counted, a
 * failed connection degrades pin capture as any request's does.  Call it
 * between captures: the helper serves one request at a time.
 */
#define IVM_PIN_READAHEAD_TIMEOUT_MS 10000
void ivm_pin_capture_readahead(struct ivm_pin_capture *pc,
			       struct ivm_capture_engine *engine);

#endif /* IVM_CAPTURE_PIN_H */
