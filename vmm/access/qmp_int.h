/* SPDX-License-Identifier: MIT */
/*
 * What the QMP client's files share (qmp.c: events, replies and the
 * common API; qmp_socket.c: the socket transport; qmp_libvirt.c:
 * libvirt's monitor passthrough, its events and its connection).  Not for
 * other callers: qmp.h is the interface.
 */
#ifndef IVM_QMP_INT_H
#define IVM_QMP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <json-c/json.h>
#include <libvirt/libvirt.h>

#include "access/pause_guard.h"
#include "access/qmp.h"

/* json-c's default nesting limit is 32; QMP replies are shallow. */
#define QMP_JSON_DEPTH 64

enum qmp_transport {
	QMP_SOCKET,
	QMP_LIBVIRT,
};

/*
 * What libvirt's event loop thread shares with the client: the event queue
 * and the lifecycle state.  Reference counted, because libvirt may still run
 * a callback while the client deregisters it; the last reference frees it.
 */
struct qmp_shared {
	pthread_mutex_t lock;
	int refs;				/* lock */
	struct ivm_qmp_event *events[IVM_QMP_MAX_EVENTS]; /* ring, lock */
	size_t head, count;			/* lock */
	uint64_t lost;				/* lock */
	ivm_qmp_event_fn *fn;			/* lock */
	void *fn_arg;				/* lock */
	_Atomic int lifecycle;
	_Atomic uint64_t resets;
};

struct ivm_qmp {
	enum qmp_transport transport;
	char *name;
	int timeout_ms;
	size_t max_reply;
	int major, minor, micro;
	struct qmp_shared *shared;

	/* Resumes the guest if we die while it is paused (pause_guard.h). */
	struct ivm_pause_guard *guard;

	/* socket transport */
	char *socket_path;	/* NULL when connected through a given fd */
	int fd;
	pid_t peer_pid;
	char *buf;		/* bytes received, not yet consumed */
	size_t len, cap;
	size_t scanned;		/* buf[0..scanned) holds no '\n' */
	bool discarding;	/* skipping the rest of an oversized message */
	bool eof;
	int64_t next_id;
	uint64_t stray;		/* replies nobody waited for */
	struct json_tokener *tok;

	/* libvirt transport */
	virConnectPtr conn;
	virDomainPtr dom;
	char *uri;
	unsigned char uuid[VIR_UUID_BUFLEN];
	int lifecycle_cb, reboot_cb;	/* -1: not registered */
	int64_t last_state_poll_ms;
	/* libvirtd went away (restarted): since when, the next try, how often back. */
	int64_t lost_ms, next_reconnect_ms;
	uint64_t reconnects;
};

/* qmp.c */
int64_t qmp_now_ms(void);
void qmp_shared_get(struct qmp_shared *shared);
void qmp_shared_put(void *opaque);	/* libvirt's free callback too */
void qmp_set_lifecycle(struct qmp_shared *shared,
		       enum ivm_qmp_lifecycle state);
void qmp_deliver_event(struct qmp_shared *shared,
		       struct ivm_qmp_event *event);
struct ivm_qmp_event *qmp_event_create(const char *name,
				       struct json_object *data);
struct json_object *qmp_member(struct json_object *obj, const char *key,
			       enum json_type type);
struct json_object *qmp_command_object(const char *cmd,
				       struct json_object *args, int64_t id);
struct ivm_error *qmp_parse_line(struct ivm_qmp *qmp, const char *line,
				 size_t len, struct json_object **ret);
struct ivm_error *qmp_reply_result(struct ivm_qmp *qmp, const char *cmd,
				   struct json_object *reply,
				   struct json_object **ret);
struct ivm_qmp *qmp_alloc(enum qmp_transport transport, const char *name);
/* QEMU's version from a query-version reply ({"qemu": {"major": ...}}). */
void qmp_set_version(struct ivm_qmp *qmp, struct json_object *version);

/* qmp_socket.c */
/*
 * Read the next message.  deadline_ms < 0 means do not block: *ret is NULL
 * when no complete message has arrived yet.
 */
struct ivm_error *qmp_read_message(struct ivm_qmp *qmp, int64_t deadline_ms,
				   struct json_object **ret);
/*
 * Handle one message while waiting for the reply with id want_id; returns
 * true (and hands the message over) when it is that reply.
 */
bool qmp_dispatch(struct ivm_qmp *qmp, struct json_object *msg,
		  int64_t want_id);
struct ivm_error *qmp_socket_execute(struct ivm_qmp *qmp, const char *cmd,
				     struct json_object *args,
				     struct json_object **ret);
/* Read whatever has arrived without blocking, queueing events. */
struct ivm_error *qmp_socket_drain(struct ivm_qmp *qmp);

/* qmp_libvirt.c */
struct ivm_error *qmp_libvirt_execute(struct ivm_qmp *qmp, const char *cmd,
				      struct json_object *args,
				      struct json_object **ret);
/* Read the domain's state (the lifecycle without events). */
struct ivm_error *qmp_libvirt_poll_state(struct ivm_qmp *qmp);
/* A libvirtd that went away: connect again, at most every second. */
struct ivm_error *qmp_libvirt_keep_connected(struct ivm_qmp *qmp);
struct ivm_error *qmp_libvirt_run_state_change(struct ivm_qmp *qmp,
					       int (*fn)(virDomainPtr),
					       const char *what);
void qmp_libvirt_release(struct ivm_qmp *qmp);

#endif /* IVM_QMP_INT_H */
