/* SPDX-License-Identifier: MIT */
/*
 * QMP client: the QEMU machine protocol, over one of two transports.
 *
 *  - socket: QEMU's own QMP unix socket (`-qmp unix:PATH,server=on`), or
 *    any connected stream fd that speaks QMP (unit tests use a socketpair).
 *    The client reads the greeting, negotiates capabilities, tags every
 *    command with an integer "id", matches replies by id and queues the
 *    asynchronous events that arrive in between.
 *  - libvirt: virDomainQemuMonitorCommand() passthrough on a domain libvirt
 *    manages.  libvirt owns the monitor, so only queries are passed through
 *    (query-*, qom-get/qom-list, and the read-only HMP commands info, gpa2hva,
 *    gva2gpa, x, xp); anything that changes the domain's state (stop, cont,
 *    quit, system_reset, dump-guest-memory, ...) is refused with
 *    IVM_ERROR_INVALID: it has to go through libvirt's own API, see
 *    ivm_qmp_stop()/ivm_qmp_cont().  (dump-guest-memory passed through
 *    libvirt 9.0 crashed libvirtd when the dump's completion event arrived.)
 *
 * Everything QEMU sends is hostile input: a message is at most
 * ivm_qmp_set_max_reply() bytes (16 MiB by default; a bigger one is
 * discarded and the request fails with IVM_ERROR_PROTOCOL, the connection
 * stays usable), JSON nesting is bounded, every request has a timeout
 * (ivm_qmp_set_timeout(), 10 s by default), replies with unknown ids are
 * dropped, and a peer that is not QEMU is refused at connect time.
 *
 * Errors: a QMP error reply is IVM_ERROR_QMP with the error class; QEMU
 * closing the monitor (or the libvirt domain going away) is IVM_ERROR_GONE;
 * a peer that breaks the protocol is IVM_ERROR_PROTOCOL; no reply in time is
 * IVM_ERROR_TIMEOUT.
 *
 * Threads: one thread at a time may use a struct ivm_qmp, except
 * ivm_qmp_lifecycle_cached() and ivm_qmp_reset_count(), which any thread may
 * call at any time.
 */
#ifndef IVM_QMP_H
#define IVM_QMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "base/error.h"

struct ivm_qmp;
struct ivm_libvirt_domain;

/* Default cap on the size of one message from QEMU. */
#define IVM_QMP_DEFAULT_MAX_REPLY (16u << 20)
/* Default timeout of one request, and of the greeting, in milliseconds. */
#define IVM_QMP_DEFAULT_TIMEOUT_MS 10000
/*
 * How long ivm_qmp_connect_socket() waits for QEMU's greeting.  QEMU greets
 * at once, unless another client holds its monitor (it serves one at a time).
 */
#define IVM_QMP_GREETING_TIMEOUT_MS 5000
/* Queued events beyond this are dropped (oldest first) and counted. */
#define IVM_QMP_MAX_EVENTS 1024

/* The run state of the guest as the client last saw it. */
enum ivm_qmp_lifecycle {
	IVM_QMP_UNKNOWN,	/* no event and no query-status seen yet */
	IVM_QMP_RUNNING,	/* RESUME event, or status "running" */
	IVM_QMP_PAUSED,		/* STOP event, or any other live status */
	IVM_QMP_SHUTDOWN,	/* SHUTDOWN event: the guest is going down */
	IVM_QMP_GONE,		/* the monitor closed / the domain is gone */
};

/* An asynchronous QMP event. */
struct ivm_qmp_event {
	char *name;			/* e.g. "STOP" */
	struct json_object *data;	/* the "data" member, or NULL */
	int64_t seconds;		/* QEMU's timestamp, 0 if absent */
	int64_t microseconds;
};

void ivm_qmp_event_destroy(struct ivm_qmp_event *event);

/*
 * Connect to QEMU's QMP unix socket at path, read the greeting and
 * negotiate capabilities.  A peer that sends no greeting within
 * IVM_QMP_GREETING_TIMEOUT_MS, or something other than a QMP greeting,
 * fails with IVM_ERROR_PROTOCOL ("PATH: not a QMP socket (...)").
 */
struct ivm_error *ivm_qmp_connect_socket(const char *path,
					 struct ivm_qmp **ret);

/*
 * The same over an already connected stream socket fd, which the client
 * takes over (it is closed on failure too).  name is used in messages.
 * timeout_ms bounds the greeting and negotiation (<= 0: the default).
 */
struct ivm_error *ivm_qmp_connect_fd(int fd, const char *name, int timeout_ms,
				     struct ivm_qmp **ret);

/*
 * Use libvirt's monitor passthrough on dom, which must stay open for the
 * life of the client.  Lifecycle tracking uses libvirt domain events when
 * an event loop runs (call ivm_qmp_libvirt_event_loop_start() before
 * ivm_libvirt_domain_open()), else polls virDomainGetState().
 */
struct ivm_error *ivm_qmp_connect_libvirt(struct ivm_libvirt_domain *dom,
					  struct ivm_qmp **ret);

/*
 * Register libvirt's default event loop implementation and run it on a
 * background thread, once per process.  libvirt requires this to happen
 * before the connection is opened (virConnectOpen), so a program that wants
 * lifecycle events under libvirt calls it first thing.  Idempotent.
 */
struct ivm_error *ivm_qmp_libvirt_event_loop_start(void);

void ivm_qmp_destroy(struct ivm_qmp *qmp);

/* Per-request timeout in milliseconds (> 0). */
void ivm_qmp_set_timeout(struct ivm_qmp *qmp, int timeout_ms);
/* Cap on the size of one message from QEMU, in bytes (>= 4096). */
void ivm_qmp_set_max_reply(struct ivm_qmp *qmp, size_t max_reply);

/* What the client is connected to: the socket path or the domain name. */
const char *ivm_qmp_name(const struct ivm_qmp *qmp);
bool ivm_qmp_is_libvirt(const struct ivm_qmp *qmp);

/*
 * The pid of the peer of a socket connection (SO_PEERCRED), or 0 (libvirt,
 * or a peer in another pid namespace).  Usually QEMU itself, but a proxy in
 * between would be reported instead: ivm_qemu_pid() cross-checks it.
 */
pid_t ivm_qmp_peer_pid(const struct ivm_qmp *qmp);

/* QEMU's version from the greeting (socket) or query-version (libvirt). */
void ivm_qmp_qemu_version(const struct ivm_qmp *qmp, int *major, int *minor,
			  int *micro);

/*
 * Execute the QMP command cmd with args (may be NULL; borrowed, not
 * consumed).  On success *ret is the "return" member of the reply, owned
 * by the caller (json_object_put); ret may be NULL to discard it.  Events
 * that arrive meanwhile are queued.
 */
struct ivm_error *ivm_qmp_execute(struct ivm_qmp *qmp, const char *cmd,
				  struct json_object *args,
				  struct json_object **ret);

/*
 * Run a human monitor (HMP) command line, e.g. "info registers -a", and
 * return its output, NUL-terminated, owned by the caller (free).  An HMP
 * command reports most failures as output text, not as an error.
 */
struct ivm_error *ivm_qmp_hmp(struct ivm_qmp *qmp, const char *cmdline,
			      char **ret);

/*
 * The same with the implicit CPU of HMP set to cpu_index for this one
 * command (human-monitor-command's "cpu-index"; no monitor state changes).
 */
struct ivm_error *ivm_qmp_hmp_cpu(struct ivm_qmp *qmp, int cpu_index,
				  const char *cmdline, char **ret);

/*
 * Pause / resume the guest's vCPUs: QMP stop/cont on a socket, libvirt's
 * virDomainSuspend/virDomainResume under libvirt.  The lifecycle state is
 * updated when this returns successfully.
 */
struct ivm_error *ivm_qmp_stop(struct ivm_qmp *qmp);
struct ivm_error *ivm_qmp_cont(struct ivm_qmp *qmp);

/*
 * QEMU's own word for its run state (query-status's "status": "running",
 * "paused", "internal-error" when KVM could not go on running the guest,
 * ...) into buf, through either transport.
 */
struct ivm_error *ivm_qmp_run_state(struct ivm_qmp *qmp, char *buf,
				    size_t len);

/*
 * Ask QEMU for its run state (query-status, or virDomainGetState under
 * libvirt), update the lifecycle state and return it.
 */
struct ivm_error *ivm_qmp_query_status(struct ivm_qmp *qmp,
				       enum ivm_qmp_lifecycle *ret);

/*
 * The lifecycle state, kept up to date cheaply: on a socket this reads what
 * has already arrived without blocking (one poll()); under libvirt it is
 * the state events reported, or a virDomainGetState() at most every 100 ms
 * when no event loop runs.  A broken connection reads as IVM_QMP_GONE.
 */
enum ivm_qmp_lifecycle ivm_qmp_lifecycle(struct ivm_qmp *qmp);

/* The last known state, without any I/O; safe from any thread. */
enum ivm_qmp_lifecycle ivm_qmp_lifecycle_cached(const struct ivm_qmp *qmp);

/*
 * Under libvirt, libvirtd may go away (restarted) while QEMU runs on: the
 * connection closes and no event comes.  ivm_qmp_lifecycle() finds it
 * closed and opens it again (at most once a second), its events registered
 * again and the state read anew.  Since when (CLOCK_MONOTONIC ms) it is
 * found closed, 0 while it is up (always on a socket), and how many times it
 * was opened again.  The client's thread only.
 */
int64_t ivm_qmp_libvirt_lost_ms(const struct ivm_qmp *qmp);
uint64_t ivm_qmp_reconnects(const struct ivm_qmp *qmp);
/*
 * Under libvirt, the path of the unix socket of the domain's virtio
 * channel named channel_name, read from its XML through the client's
 * connection (the one opened again after a restart of libvirtd: fails while
 * it is away); IVM_ERROR_NOT_FOUND when it has none.  The caller frees
 * *ret.  The client's thread only.
 */
struct ivm_error *ivm_qmp_libvirt_channel_path(struct ivm_qmp *qmp,
					       const char *channel_name,
					       char **ret);
/* Whether libvirt's events are registered (else its state is polled). */
bool ivm_qmp_libvirt_events(const struct ivm_qmp *qmp);

/* How many RESET events (guest reboots) were seen; safe from any thread. */
uint64_t ivm_qmp_reset_count(const struct ivm_qmp *qmp);

const char *ivm_qmp_lifecycle_name(enum ivm_qmp_lifecycle state);

/*
 * The oldest queued event, or *ret = NULL when none is queued.  On a socket
 * it first reads what has arrived, without blocking.  Fails with
 * IVM_ERROR_GONE only once the queue is empty and the monitor is closed.
 * The caller owns *ret (ivm_qmp_event_destroy).
 */
struct ivm_error *ivm_qmp_next_event(struct ivm_qmp *qmp,
				     struct ivm_qmp_event **ret);

/*
 * Wait up to timeout_ms for an event.  *ret = NULL on timeout.
 *
 * Under libvirt, events come from libvirt's lifecycle and reboot events
 * (only while ivm_qmp_libvirt_event_loop_start() runs), named like their
 * QMP counterparts: STOP, RESUME, SHUTDOWN, RESET, GUEST_PANICKED, plus
 * DOMAIN_STOPPED when QEMU has exited (DOMAIN_SAVED after `virsh save`,
 * DOMAIN_MIGRATED after a migration away); data holds "libvirt-event" and
 * "libvirt-detail".
 */
struct ivm_error *ivm_qmp_wait_event(struct ivm_qmp *qmp, int timeout_ms,
				     struct ivm_qmp_event **ret);

/*
 * The name a libvirt lifecycle event (VIR_DOMAIN_EVENT_*, its detail) is
 * given, as above, or NULL for one that is not passed on.
 */
const char *ivm_qmp_libvirt_event_name(int event, int detail);

/* Events dropped because the queue was full. */
uint64_t ivm_qmp_events_lost(const struct ivm_qmp *qmp);

/*
 * Called for every event as it is read, before it is queued, on the thread
 * that reads it (under libvirt: the event loop thread), with the event queue
 * locked: it must be quick and must not call back into the client.  The
 * event is borrowed for the call.  NULL removes the callback.
 */
typedef void ivm_qmp_event_fn(void *arg, const struct ivm_qmp_event *event);
void ivm_qmp_set_event_callback(struct ivm_qmp *qmp, ivm_qmp_event_fn *fn,
				void *arg);

#endif /* IVM_QMP_H */
