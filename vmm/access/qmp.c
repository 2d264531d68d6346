// SPDX-License-Identifier: MIT
/*
 * QMP client over a QEMU monitor socket (qmp_socket.c) or libvirt's monitor
 * passthrough (qmp_libvirt.c): the events, the replies and the API common
 * to both transports.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "access/libvirt_domain.h"
#include "access/pause_guard.h"
#include "access/qmp_int.h"

/* Under libvirt without events, poll virDomainGetState at most this often. */
#define QMP_STATE_POLL_MS 100

int64_t qmp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- events and lifecycle ----------------------------------------------- */

void ivm_qmp_event_destroy(struct ivm_qmp_event *event)
{
	if (!event)
		return;
	free(event->name);
	json_object_put(event->data);
	free(event);
}

static struct qmp_shared *shared_create(void)
{
	struct qmp_shared *shared = calloc(1, sizeof(*shared));

	if (!shared)
		return NULL;
	pthread_mutex_init(&shared->lock, NULL);
	shared->refs = 1;
	atomic_init(&shared->lifecycle, IVM_QMP_UNKNOWN);
	atomic_init(&shared->resets, 0);
	return shared;
}

void qmp_shared_put(void *opaque)
{
	struct qmp_shared *shared = opaque;
	size_t i;
	int refs;

	if (!shared)
		return;
	pthread_mutex_lock(&shared->lock);
	refs = --shared->refs;
	pthread_mutex_unlock(&shared->lock);
	if (refs)
		return;
	for (i = 0; i < shared->count; i++)
		ivm_qmp_event_destroy(shared->events[(shared->head + i) %
						     IVM_QMP_MAX_EVENTS]);
	pthread_mutex_destroy(&shared->lock);
	free(shared);
}

void qmp_shared_get(struct qmp_shared *shared)
{
	pthread_mutex_lock(&shared->lock);
	shared->refs++;
	pthread_mutex_unlock(&shared->lock);
}

void qmp_set_lifecycle(struct qmp_shared *shared,
			  enum ivm_qmp_lifecycle state)
{
	/* GONE is final: a late event must not resurrect a dead monitor. */
	int old = atomic_load(&shared->lifecycle);

	while (old != IVM_QMP_GONE &&
	       !atomic_compare_exchange_weak(&shared->lifecycle, &old,
					     (int)state))
		;
}

/* Take ownership of event: update the lifecycle, call back, then queue it. */
void qmp_deliver_event(struct qmp_shared *shared,
			  struct ivm_qmp_event *event)
{
	if (!strcmp(event->name, "STOP"))
		qmp_set_lifecycle(shared, IVM_QMP_PAUSED);
	else if (!strcmp(event->name, "RESUME"))
		qmp_set_lifecycle(shared, IVM_QMP_RUNNING);
	else if (!strcmp(event->name, "SHUTDOWN"))
		qmp_set_lifecycle(shared, IVM_QMP_SHUTDOWN);
	else if (!strcmp(event->name, "RESET"))
		atomic_fetch_add(&shared->resets, 1);

	pthread_mutex_lock(&shared->lock);
	if (shared->fn)
		shared->fn(shared->fn_arg, event);
	if (shared->count == IVM_QMP_MAX_EVENTS) {
		ivm_qmp_event_destroy(shared->events[shared->head]);
		shared->head = (shared->head + 1) % IVM_QMP_MAX_EVENTS;
		shared->count--;
		shared->lost++;
	}
	shared->events[(shared->head + shared->count) % IVM_QMP_MAX_EVENTS] =
		event;
	shared->count++;
	pthread_mutex_unlock(&shared->lock);
}

static struct ivm_qmp_event *pop_event(struct qmp_shared *shared)
{
	struct ivm_qmp_event *event = NULL;

	pthread_mutex_lock(&shared->lock);
	if (shared->count) {
		event = shared->events[shared->head];
		shared->head = (shared->head + 1) % IVM_QMP_MAX_EVENTS;
		shared->count--;
	}
	pthread_mutex_unlock(&shared->lock);
	return event;
}

struct ivm_qmp_event *qmp_event_create(const char *name,
					  struct json_object *data)
{
	struct ivm_qmp_event *event = calloc(1, sizeof(*event));

	if (!event)
		return NULL;
	event->name = strdup(name);
	if (!event->name) {
		free(event);
		return NULL;
	}
	event->data = data ? json_object_get(data) : NULL;
	return event;
}

const char *ivm_qmp_lifecycle_name(enum ivm_qmp_lifecycle state)
{
	switch (state) {
	case IVM_QMP_UNKNOWN:
		return "unknown";
	case IVM_QMP_RUNNING:
		return "running";
	case IVM_QMP_PAUSED:
		return "paused";
	case IVM_QMP_SHUTDOWN:
		return "shutdown";
	case IVM_QMP_GONE:
		return "gone";
	}
	return "invalid";
}

/* ---- replies (both transports) -------------------------------------------- */

struct json_object *qmp_member(struct json_object *obj, const char *key,
				  enum json_type type)
{
	struct json_object *val;

	if (!json_object_object_get_ex(obj, key, &val) ||
	    !json_object_is_type(val, type))
		return NULL;
	return val;
}

/* Turn a reply object into the "return" member or an error. */
struct ivm_error *qmp_reply_result(struct ivm_qmp *qmp, const char *cmd,
				      struct json_object *reply,
				      struct json_object **ret)
{
	struct json_object *error, *value;

	error = qmp_member(reply, "error", json_type_object);
	if (error) {
		struct json_object *cls, *desc;

		cls = qmp_member(error, "class", json_type_string);
		desc = qmp_member(error, "desc", json_type_string);
		return ivm_error_qmp(cls ? json_object_get_string(cls) : NULL,
				     desc ? json_object_get_string(desc) : NULL);
	}
	if (!json_object_object_get_ex(reply, "return", &value))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: reply to '%s' has neither return nor error",
					qmp->name, cmd);
	if (ret)
		*ret = json_object_get(value);
	return NULL;
}

struct json_object *qmp_command_object(const char *cmd,
					  struct json_object *args, int64_t id)
{
	struct json_object *obj = json_object_new_object();

	if (!obj)
		return NULL;
	if (json_object_object_add(obj, "execute",
				   json_object_new_string(cmd)) < 0)
		goto fail;
	if (args && json_object_object_add(obj, "arguments",
					   json_object_get(args)) < 0)
		goto fail;
	if (id && json_object_object_add(obj, "id",
					 json_object_new_int64(id)) < 0)
		goto fail;
	return obj;
fail:
	json_object_put(obj);
	return NULL;
}

/* Parse one line (without its '\n') into a JSON object. */
struct ivm_error *qmp_parse_line(struct ivm_qmp *qmp, const char *line,
				    size_t len, struct json_object **ret)
{
	struct json_object *obj;
	size_t end;

	json_tokener_reset(qmp->tok);
	obj = json_tokener_parse_ex(qmp->tok, line, (int)len);
	if (!obj || json_tokener_get_error(qmp->tok) != json_tokener_success) {
		json_object_put(obj);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: invalid JSON from qemu", qmp->name);
	}
	for (end = json_tokener_get_parse_end(qmp->tok); end < len; end++) {
		if (!strchr(" \t\r", line[end])) {
			json_object_put(obj);
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"%s: trailing bytes after a JSON message",
						qmp->name);
		}
	}
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: QMP message is not a JSON object",
					qmp->name);
	}
	*ret = obj;
	return NULL;
}

struct ivm_qmp *qmp_alloc(enum qmp_transport transport,
				 const char *name)
{
	struct ivm_qmp *qmp = calloc(1, sizeof(*qmp));

	if (!qmp)
		return NULL;
	qmp->transport = transport;
	qmp->fd = -1;
	qmp->lifecycle_cb = qmp->reboot_cb = -1;
	qmp->timeout_ms = IVM_QMP_DEFAULT_TIMEOUT_MS;
	qmp->max_reply = IVM_QMP_DEFAULT_MAX_REPLY;
	qmp->name = strdup(name ? name : "qmp");
	qmp->shared = shared_create();
	if (!qmp->name || !qmp->shared) {
		free(qmp->name);
		qmp_shared_put(qmp->shared);
		free(qmp);
		return NULL;
	}
	return qmp;
}

void qmp_set_version(struct ivm_qmp *qmp, struct json_object *version)
{
	struct json_object *qemu, *v;

	qemu = version ? qmp_member(version, "qemu", json_type_object) : NULL;
	if (!qemu)
		return;
	v = qmp_member(qemu, "major", json_type_int);
	qmp->major = v ? json_object_get_int(v) : 0;
	v = qmp_member(qemu, "minor", json_type_int);
	qmp->minor = v ? json_object_get_int(v) : 0;
	v = qmp_member(qemu, "micro", json_type_int);
	qmp->micro = v ? json_object_get_int(v) : 0;
}

/* ---- common API ---------------------------------------------------------- */

void ivm_qmp_destroy(struct ivm_qmp *qmp)
{
	if (!qmp)
		return;
	/* Before the connection goes: the guardian may need the monitor. */
	ivm_pause_guard_destroy(qmp->guard);
	free(qmp->socket_path);
	if (qmp->transport == QMP_LIBVIRT) {
		qmp_libvirt_release(qmp);
		free(qmp->uri);
	}
	if (qmp->fd >= 0)
		close(qmp->fd);
	if (qmp->tok)
		json_tokener_free(qmp->tok);
	free(qmp->buf);
	free(qmp->name);
	qmp_shared_put(qmp->shared);
	free(qmp);
}

void ivm_qmp_set_timeout(struct ivm_qmp *qmp, int timeout_ms)
{
	if (timeout_ms > 0)
		qmp->timeout_ms = timeout_ms;
}

void ivm_qmp_set_max_reply(struct ivm_qmp *qmp, size_t max_reply)
{
	/* parse_line hands json-c an int length. */
	if (max_reply >= 4096 && max_reply <= (1u << 30))
		qmp->max_reply = max_reply;
}

const char *ivm_qmp_name(const struct ivm_qmp *qmp)
{
	return qmp->name;
}

bool ivm_qmp_is_libvirt(const struct ivm_qmp *qmp)
{
	return qmp->transport == QMP_LIBVIRT;
}

pid_t ivm_qmp_peer_pid(const struct ivm_qmp *qmp)
{
	return qmp->peer_pid;
}

void ivm_qmp_qemu_version(const struct ivm_qmp *qmp, int *major, int *minor,
			  int *micro)
{
	*major = qmp->major;
	*minor = qmp->minor;
	*micro = qmp->micro;
}

struct ivm_error *ivm_qmp_execute(struct ivm_qmp *qmp, const char *cmd,
				  struct json_object *args,
				  struct json_object **ret)
{
	if (ret)
		*ret = NULL;
	if (qmp->transport == QMP_LIBVIRT)
		return qmp_libvirt_execute(qmp, cmd, args, ret);
	return qmp_socket_execute(qmp, cmd, args, ret);
}

static struct ivm_error *hmp(struct ivm_qmp *qmp, int cpu_index,
			     const char *cmdline, char **ret)
{
	struct json_object *args, *out = NULL;
	struct ivm_error *err;
	const char *text;
	size_t len;
	char *copy;

	args = json_object_new_object();
	if (!args || json_object_object_add(args, "command-line",
					    json_object_new_string(cmdline)) < 0 ||
	    (cpu_index >= 0 &&
	     json_object_object_add(args, "cpu-index",
				    json_object_new_int(cpu_index)) < 0)) {
		json_object_put(args);
		return &ivm_enomem;
	}
	err = ivm_qmp_execute(qmp, "human-monitor-command", args, &out);
	json_object_put(args);
	if (err)
		return err;
	if (!json_object_is_type(out, json_type_string)) {
		json_object_put(out);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: HMP '%s' did not return text",
					qmp->name, cmdline);
	}
	text = json_object_get_string(out);
	len = (size_t)json_object_get_string_len(out);
	copy = malloc(len + 1);
	if (!copy) {
		json_object_put(out);
		return &ivm_enomem;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	json_object_put(out);
	*ret = copy;
	return NULL;
}

struct ivm_error *ivm_qmp_hmp(struct ivm_qmp *qmp, const char *cmdline,
			      char **ret)
{
	return hmp(qmp, -1, cmdline, ret);
}

struct ivm_error *ivm_qmp_hmp_cpu(struct ivm_qmp *qmp, int cpu_index,
				  const char *cmdline, char **ret)
{
	if (cpu_index < 0)
		return ivm_error_create(IVM_ERROR_INVALID,
					"invalid vCPU index %d", cpu_index);
	return hmp(qmp, cpu_index, cmdline, ret);
}

/*
 * Pause (run = false) or resume the vCPUs through whichever transport is
 * in use: libvirt must do it itself (passthrough of stop/cont would leave
 * its own idea of the domain state stale).
 */
/*
 * Before a pause: make sure someone resumes the guest should we die while
 * it is paused.  The guardian starts at the first pause of a connection.
 * A connection made over a bare fd (tests) names no way back to QEMU and
 * has none.
 */
static struct ivm_error *guard_arm(struct ivm_qmp *qmp)
{
	struct ivm_pause_target target = { 0 };
	char uuid[VIR_UUID_STRING_BUFLEN];
	struct ivm_error *err;

	if (!qmp->guard) {
		if (qmp->transport == QMP_LIBVIRT) {
			if (virDomainGetUUIDString(qmp->dom, uuid) < 0)
				return ivm_libvirt_error("virDomainGetUUIDString");
			target.libvirt_uri = qmp->uri;
			target.domain_uuid = uuid;
		} else if (qmp->socket_path) {
			target.qmp_path = qmp->socket_path;
		} else {
			return NULL;
		}
		err = ivm_pause_guard_start(&target, NULL, &qmp->guard);
		if (err)
			return ivm_error_wrap(err, "%s: not pausing the guest",
						qmp->name);
	}
	return ivm_pause_guard_arm(qmp->guard);
}

static struct ivm_error *set_running(struct ivm_qmp *qmp, bool run)
{
	struct ivm_error *err;

	if (!run && (err = guard_arm(qmp)))
		return err;
	if (qmp->transport == QMP_LIBVIRT)
		err = qmp_libvirt_run_state_change(qmp,
					       run ? virDomainResume :
						     virDomainSuspend,
					       run ? "virDomainResume" :
						     "virDomainSuspend");
	else
		err = qmp_socket_execute(qmp, run ? "cont" : "stop", NULL,
					 NULL);
	if (err) {
		/* A failed stop paused nothing; a failed cont stays armed. */
		if (!run && qmp->guard)
			ivm_pause_guard_disarm(qmp->guard);
		return err;
	}
	if (run && qmp->guard)
		ivm_pause_guard_disarm(qmp->guard);
	qmp_set_lifecycle(qmp->shared, run ? IVM_QMP_RUNNING : IVM_QMP_PAUSED);
	return NULL;
}

struct ivm_error *ivm_qmp_stop(struct ivm_qmp *qmp)
{
	return set_running(qmp, false);
}

struct ivm_error *ivm_qmp_cont(struct ivm_qmp *qmp)
{
	return set_running(qmp, true);
}

struct ivm_error *ivm_qmp_run_state(struct ivm_qmp *qmp, char *buf,
				    size_t len)
{
	struct json_object *status = NULL, *s;
	struct ivm_error *err;
	const char *name;
	size_t i;

	err = ivm_qmp_execute(qmp, "query-status", NULL, &status);
	if (err)
		return err;
	s = json_object_is_type(status, json_type_object) ?
		    qmp_member(status, "status", json_type_string) : NULL;
	if (!s) {
		json_object_put(status);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: query-status returned no status",
					qmp->name);
	}
	/* QEMU's word, kept to the characters its run states use. */
	name = json_object_get_string(s);
	for (i = 0; name[i] && i + 1 < len; i++)
		buf[i] = (name[i] >= 'a' && name[i] <= 'z') || name[i] == '-' ?
			 name[i] : '?';
	buf[i] = '\0';
	json_object_put(status);
	return NULL;
}

struct ivm_error *ivm_qmp_query_status(struct ivm_qmp *qmp,
				       enum ivm_qmp_lifecycle *ret)
{
	struct ivm_error *err;
	char name[32];

	if (qmp->transport == QMP_LIBVIRT) {
		err = qmp_libvirt_poll_state(qmp);
		if (err)
			return err;
		*ret = ivm_qmp_lifecycle_cached(qmp);
		return NULL;
	}
	err = ivm_qmp_run_state(qmp, name, sizeof(name));
	if (err)
		return err;
	if (!strcmp(name, "running"))
		qmp_set_lifecycle(qmp->shared, IVM_QMP_RUNNING);
	else if (!strcmp(name, "shutdown"))
		qmp_set_lifecycle(qmp->shared, IVM_QMP_SHUTDOWN);
	else
		qmp_set_lifecycle(qmp->shared, IVM_QMP_PAUSED);
	*ret = ivm_qmp_lifecycle_cached(qmp);
	return NULL;
}

enum ivm_qmp_lifecycle ivm_qmp_lifecycle(struct ivm_qmp *qmp)
{
	struct ivm_error *err = NULL;

	if (qmp->transport == QMP_SOCKET)
		err = qmp_socket_drain(qmp);
	else if (qmp->lifecycle_cb < 0 &&
		 qmp_now_ms() - qmp->last_state_poll_ms >= QMP_STATE_POLL_MS)
		err = qmp_libvirt_poll_state(qmp);
	else
		err = qmp_libvirt_keep_connected(qmp);
	if (err && err->code == IVM_ERROR_GONE)
		qmp_set_lifecycle(qmp->shared, IVM_QMP_GONE);
	ivm_error_destroy(err);
	return ivm_qmp_lifecycle_cached(qmp);
}

enum ivm_qmp_lifecycle ivm_qmp_lifecycle_cached(const struct ivm_qmp *qmp)
{
	return atomic_load(&qmp->shared->lifecycle);
}

int64_t ivm_qmp_libvirt_lost_ms(const struct ivm_qmp *qmp)
{
	return qmp->transport == QMP_LIBVIRT ? qmp->lost_ms : 0;
}

uint64_t ivm_qmp_reconnects(const struct ivm_qmp *qmp)
{
	return qmp->reconnects;
}

bool ivm_qmp_libvirt_events(const struct ivm_qmp *qmp)
{
	return qmp->lifecycle_cb >= 0;
}

uint64_t ivm_qmp_reset_count(const struct ivm_qmp *qmp)
{
	return atomic_load(&qmp->shared->resets);
}

struct ivm_error *ivm_qmp_next_event(struct ivm_qmp *qmp,
				     struct ivm_qmp_event **ret)
{
	struct ivm_error *err = NULL;

	if (qmp->transport == QMP_SOCKET)
		err = qmp_socket_drain(qmp);
	*ret = pop_event(qmp->shared);
	/*
	 * Queued events come first, even when the monitor has closed since;
	 * a garbage line is not fatal (the reader resynchronizes on '\n').
	 */
	if (*ret || !err || err->code == IVM_ERROR_PROTOCOL) {
		ivm_error_destroy(err);
		return NULL;
	}
	return err;
}

struct ivm_error *ivm_qmp_wait_event(struct ivm_qmp *qmp, int timeout_ms,
				     struct ivm_qmp_event **ret)
{
	int64_t deadline = qmp_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	struct json_object *msg;
	struct ivm_error *err;

	for (;;) {
		err = ivm_qmp_next_event(qmp, ret);
		if (err || *ret)
			return err;
		if (qmp_now_ms() >= deadline)
			return NULL;
		if (qmp->transport == QMP_LIBVIRT) {
			struct timespec ts = { 0, 10 * 1000000 };

			nanosleep(&ts, NULL);
			continue;
		}
		err = qmp_read_message(qmp, deadline, &msg);
		if (err && err->code == IVM_ERROR_TIMEOUT) {
			ivm_error_destroy(err);
			return NULL;
		}
		if (err)
			return err;
		qmp_dispatch(qmp, msg, 0);
	}
}

uint64_t ivm_qmp_events_lost(const struct ivm_qmp *qmp)
{
	uint64_t lost;

	pthread_mutex_lock(&qmp->shared->lock);
	lost = qmp->shared->lost;
	pthread_mutex_unlock(&qmp->shared->lock);
	return lost;
}

void ivm_qmp_set_event_callback(struct ivm_qmp *qmp, ivm_qmp_event_fn *fn,
				void *arg)
{
	pthread_mutex_lock(&qmp->shared->lock);
	qmp->shared->fn = fn;
	qmp->shared->fn_arg = arg;
	pthread_mutex_unlock(&qmp->shared->lock);
}
