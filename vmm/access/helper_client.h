/* SPDX-License-Identifier: MIT */
/*
 * Host side of the guest helper protocol (guest-helper/proto.h): a
 * connection to idlevm-helper through the unix socket QEMU puts behind the
 * virtio-serial port org.idlevm.helper.0 (libvirt's channel source path, or
 * helper.sock of images/run-guest).
 *
 * Every byte from the helper is hostile: replies are decoded with the shared
 * bounded decoder, garbage is skipped and counted, replies to other ids are
 * dropped, and every request has a timeout, so a missing, dead or mad helper
 * gives an error, never a hang or a crash.
 *
 * QEMU's unix chardev in server mode serves one client at a time: while one
 * idlevm is connected, a second one's connect() succeeds (the kernel queues
 * it) but QEMU only accepts it after the first has left, so its requests
 * time out meanwhile.  The timeout error says so.
 *
 * Not thread-safe: one connection per thread.
 */
#ifndef IVM_HELPER_CLIENT_H
#define IVM_HELPER_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "proto.h"

#define IVM_HELPER_TIMEOUT_MS 2000

struct ivm_helper;

/*
 * Connect to the helper's socket at path.  Only connects: the helper is not
 * known to answer until a request does.  IVM_ERROR_NOT_FOUND when nothing is
 * at path, IVM_ERROR_GONE when nothing listens there.
 */
struct ivm_error *ivm_helper_connect_path(const char *path,
					  struct ivm_helper **ret);
void ivm_helper_destroy(struct ivm_helper *helper);

/*
 * How a request waits for its reply: wait(ctx, fd, deadline_ns) returns
 * 1 once fd is readable, 0 at deadline (CLOCK_MONOTONIC), -1 with errno
 * on failure (EINTR is retried).  NULL: poll() on fd.  A caller that runs
 * several guests in one thread serves the others there meanwhile.
 */
typedef int (*ivm_helper_wait_fn)(void *ctx, int fd, uint64_t deadline_ns);
void ivm_helper_set_wait(struct ivm_helper *helper, ivm_helper_wait_fn wait,
			 void *ctx);

/* Per-request timeout in ms (default IVM_HELPER_TIMEOUT_MS). */
void ivm_helper_set_timeout(struct ivm_helper *helper, int timeout_ms);

/* Bytes of garbage skipped and stale replies dropped since connect. */
uint64_t ivm_helper_skipped_bytes(const struct ivm_helper *helper);
uint64_t ivm_helper_stale_replies(const struct ivm_helper *helper);

struct ivm_helper_hello {
	unsigned int protocol;	/* the version both speak, used from now on */
	uint32_t caps;		/* IVM_CAP_* */
	unsigned int ncpus;
	bool kaslr_known;
	uint64_t kaslr_offset;
	unsigned int pid;
	char kernel_release[IVM_PROTO_MAX_TEXT + 1];
	char helper_version[IVM_PROTO_MAX_TEXT + 1];
};

/*
 * Requests go out in protocol version 1 until HELLO has found the highest
 * version both sides speak (proto.h), and in that version after it.
 *
 * Errors of every request: IVM_ERROR_TIMEOUT (no reply in time),
 * IVM_ERROR_GONE (connection closed), IVM_ERROR_PROTOCOL (garbage, a reply
 * that does not decode, another protocol version), IVM_ERROR_OS with errnum
 * set when the helper answered with an ERROR (the helper's text is the
 * message).
 */
struct ivm_error *ivm_helper_hello(struct ivm_helper *helper,
				   struct ivm_helper_hello *ret);
/*
 * Whether err is the helper's own ERROR answer (it refused the request:
 * errnum is its errno) rather than a failure of the connection.
 */
bool ivm_helper_error_is_answer(const struct ivm_error *err);

/* One PING; the round trip in ns. */
struct ivm_error *ivm_helper_ping(struct ivm_helper *helper, uint64_t *ret);

struct ivm_helper_pin {
	uint32_t lease_ms;	/* granted */
	uint32_t prev_cpu;	/* UINT32_MAX when unknown */
};

/* Pin guest thread tid to cpu for lease_ms (0: helper's default). */
struct ivm_error *ivm_helper_pin(struct ivm_helper *helper, int tid,
				 unsigned int cpu, unsigned int lease_ms,
				 struct ivm_helper_pin *ret);
/* Restore tid's affinity; ret: how long it was pinned (ns).  An errnum of
 * ENOENT means the pin was gone already (lease ran out). */
struct ivm_error *ivm_helper_unpin(struct ivm_helper *helper, int tid,
				   uint64_t *ret);
/* Occupy cpu with the helper's holder for lease_ms; ret: granted ms. */
struct ivm_error *ivm_helper_hold(struct ivm_helper *helper, unsigned int cpu,
				  unsigned int lease_ms, uint32_t *ret);

struct ivm_helper_lease {
	uint64_t held_ns;
	bool expired;		/* the lease had run out before RELEASE */
};

struct ivm_error *ivm_helper_release(struct ivm_helper *helper,
				     unsigned int cpu,
				     struct ivm_helper_lease *ret);

/*
 * Pipelined pairs: both requests go out in one write and the helper, which
 * serves requests in order, carries out the second after the first has taken
 * effect; one round trip instead of two.  Both replies are awaited.
 *
 * The returned error is about the connection (timeout, gone, garbage): then
 * what the helper did is unknown and the caller must assume the worst (the
 * leases bound it).  A request the helper refused is not an error of the
 * call: its errno is in *_errnum (0: done), the other may still have been
 * done.
 */
struct ivm_helper_hold_pin {
	int hold_errnum;
	uint32_t hold_lease_ms;		/* granted, when hold_errnum == 0 */
	int pin_errnum;
	struct ivm_helper_pin pin;	/* when pin_errnum == 0 */
};

/* HOLD cpu for hold_ms, then PIN tid to the same cpu for pin_ms. */
struct ivm_error *ivm_helper_hold_pin(struct ivm_helper *helper,
				      unsigned int cpu, unsigned int hold_ms,
				      int tid, unsigned int pin_ms,
				      struct ivm_helper_hold_pin *ret);

struct ivm_helper_unpin_release {
	int unpin_errnum;	/* ENOENT: the pin's lease had run out */
	uint64_t pinned_ns;
	int release_errnum;	/* ENOENT: the hold's lease had run out */
	uint64_t held_ns;
	bool hold_expired;
};

/* UNPIN tid (skipped when tid < 0), then RELEASE cpu. */
struct ivm_error *ivm_helper_unpin_release(struct ivm_helper *helper,
					   int tid, unsigned int cpu,
					   struct ivm_helper_unpin_release *ret);

/* The protocol version requests go out in (1 until HELLO). */
unsigned int ivm_helper_protocol(const struct ivm_helper *helper);

/*
 * HOLD_PIN (protocol 2, IVM_CAP_HOLD_PIN): hold cpu and pin tid to it
 * (tid <= 0: hold only) for lease_us from the moment both are in place; the
 * helper ends both by itself, so nothing follows.  One round trip.  The
 * reply comes once the hold is in place; a refused pin is pin_errnum (the
 * hold is in place all the same).  Refusals of the whole request (cpu held
 * or out of range, tid unknown or above the holder's real-time priority:
 * EPERM) are the helper's ERROR answer (ivm_helper_error_is_answer).
 */
struct ivm_helper_held {
	uint32_t lease_us;	/* granted, from the moment of the reply */
	bool pinned;
	int pin_errnum;		/* why not pinned, when asked */
	uint32_t prev_cpu;	/* where tid last ran, or UINT32_MAX */
	uint32_t holder_tid;	/* the holder thread's guest tid */
};

struct ivm_error *ivm_helper_hold_pin_lease(struct ivm_helper *helper,
					    unsigned int cpu, int tid,
					    unsigned int lease_us,
					    struct ivm_helper_held *ret);

/* STATS (protocol 2, IVM_CAP_STATS): the helper's counters since we
 * connected, names checked by the decoder ([a-z0-9_]). */
struct ivm_helper_stats {
	unsigned int nr;
	struct {
		char name[IVM_PROTO_MAX_STAT_NAME + 1];
		uint64_t value;
	} stat[IVM_PROTO_MAX_STATS];
};

struct ivm_error *ivm_helper_stats(struct ivm_helper *helper,
				   struct ivm_helper_stats *ret);
/* The value of counter name in stats, or false when it is not there. */
bool ivm_helper_stats_get(const struct ivm_helper_stats *stats,
			  const char *name, uint64_t *ret);

/*
 * Every mapping of guest process pid, page after page, each passed to fn
 * (entry and its strings valid during the call only).  fn returns NULL to go
 * on, &ivm_stop to stop (not an error), or an error that is passed up.
 */
typedef struct ivm_error *(*ivm_helper_map_fn)(
	const struct idlevm_map_entry *entry, void *arg);
struct ivm_error *ivm_helper_maps(struct ivm_helper *helper, int pid,
				  ivm_helper_map_fn fn, void *arg);

/*
 * Have the helper read [offset, offset + length) of the file at path, as
 * guest process pid sees it, which must be inode number inode, into the
 * guest's page cache (proto.h IVM_MSG_READAHEAD); ret: bytes read.  The
 * helper answers when it has read them: on a slow guest disk that can
 * take longer than a pin, so give it its own timeout.
 */
struct ivm_error *ivm_helper_readahead(struct ivm_helper *helper, int pid,
				       const char *path, uint64_t inode,
				       uint64_t offset, uint64_t length,
				       uint64_t *ret);

#endif /* IVM_HELPER_CLIENT_H */
