// SPDX-License-Identifier: MIT
/*
 * The QMP client's socket transport (qmp.h): QEMU's own monitor socket, or
 * any connected stream fd that speaks QMP.
 *
 * QEMU frames every QMP message as one line: JSON never needs a raw newline
 * (strings escape it), and QEMU ends each message with "\r\n".  So the socket
 * transport splits the stream on '\n' before it parses anything, which lets
 * it bound a message's size without trusting the JSON, and resynchronize
 * after an oversized or malformed message instead of dropping the link.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "access/qmp_int.h"

/* The greeting is small; a peer that sends more without a newline is not QEMU. */
#define QMP_GREETING_MAX (64u << 10)
/* Longest event name we keep (QEMU's are under 40 characters). */
#define QMP_EVENT_NAME_MAX 128
#define QMP_READ_CHUNK (64u << 10)

static bool blank(const char *p, size_t len)
{
	while (len--) {
		if (!strchr(" \t\r", *p++))
			return false;
	}
	return true;
}

/* Take the first complete line out of the buffer, if there is one. */
static struct ivm_error *take_line(struct ivm_qmp *qmp, bool *found,
				   struct json_object **ret)
{
	struct ivm_error *err = NULL;
	char *nl;
	size_t n;

	*found = false;
	*ret = NULL;
	while (!*found) {
		/* buf is NULL until the first read. */
		nl = qmp->len > qmp->scanned ?
			     memchr(qmp->buf + qmp->scanned, '\n',
				    qmp->len - qmp->scanned) : NULL;
		if (!nl) {
			qmp->scanned = qmp->len;
			if (qmp->discarding)
				qmp->len = qmp->scanned = 0;
			return NULL;
		}
		n = (size_t)(nl - qmp->buf);
		if (qmp->discarding) {
			/* The tail of an oversized message: already reported. */
			qmp->discarding = false;
		} else if (n > qmp->max_reply) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "%s: qemu sent a message larger than %zu bytes",
					       qmp->name, qmp->max_reply);
			*found = true;
		} else if (!blank(qmp->buf, n)) {
			err = qmp_parse_line(qmp, qmp->buf, n, ret);
			*found = true;
		}
		memmove(qmp->buf, nl + 1, qmp->len - n - 1);
		qmp->len -= n + 1;
		qmp->scanned = 0;
	}
	return err;
}

/*
 * Read the next message.  deadline_ms < 0 means do not block: *ret is NULL
 * when no complete message has arrived yet.
 */
struct ivm_error *qmp_read_message(struct ivm_qmp *qmp, int64_t deadline_ms,
				   struct json_object **ret)
{
	struct ivm_error *err;
	bool found;

	*ret = NULL;
	for (;;) {
		struct pollfd pfd = { .fd = qmp->fd, .events = POLLIN };
		ssize_t r;
		int wait_ms = 0;

		err = take_line(qmp, &found, ret);
		if (err || found)
			return err;
		if (qmp->len > qmp->max_reply) {
			/*
			 * No newline within the cap: drop what we hold and skip
			 * to the end of this message; the caller learns now.
			 */
			qmp->discarding = true;
			qmp->len = qmp->scanned = 0;
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"%s: qemu sent a message larger than %zu bytes",
						qmp->name, qmp->max_reply);
		}
		if (qmp->eof) {
			qmp_set_lifecycle(qmp->shared, IVM_QMP_GONE);
			if (qmp->len && !qmp->discarding)
				return ivm_error_create(IVM_ERROR_GONE,
							"%s: qemu closed the monitor in the middle of a message",
							qmp->name);
			return ivm_error_create(IVM_ERROR_GONE,
						"%s: qemu closed the monitor",
						qmp->name);
		}
		if (deadline_ms >= 0) {
			int64_t left = deadline_ms - qmp_now_ms();

			if (left <= 0)
				return ivm_error_create(IVM_ERROR_TIMEOUT,
							"%s: no answer from qemu in time",
							qmp->name);
			wait_ms = left > 60000 ? 60000 : (int)left;
		}
		r = poll(&pfd, 1, wait_ms);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return ivm_error_os(errno, "%s: poll", qmp->name);
		}
		if (r == 0) {
			if (deadline_ms < 0)
				return NULL;
			continue;
		}
		if (qmp->cap - qmp->len < QMP_READ_CHUNK) {
			size_t ncap = qmp->cap ? qmp->cap : QMP_READ_CHUNK;
			char *nbuf;

			while (ncap - qmp->len < QMP_READ_CHUNK)
				ncap *= 2;
			nbuf = realloc(qmp->buf, ncap);
			if (!nbuf)
				return &ivm_enomem;
			qmp->buf = nbuf;
			qmp->cap = ncap;
		}
		r = recv(qmp->fd, qmp->buf + qmp->len, QMP_READ_CHUNK,
			 MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ECONNRESET) {
				qmp->eof = true;
				continue;
			}
			return ivm_error_os(errno, "%s: reading the monitor",
					    qmp->name);
		}
		if (r == 0)
			qmp->eof = true;
		qmp->len += (size_t)r;
	}
}

static struct ivm_error *send_all(struct ivm_qmp *qmp, const char *p,
				  size_t len, int64_t deadline_ms)
{
	while (len) {
		struct pollfd pfd = { .fd = qmp->fd, .events = POLLOUT };
		int64_t left;
		ssize_t r;

		r = send(qmp->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			qmp->eof = true;
			qmp_set_lifecycle(qmp->shared, IVM_QMP_GONE);
			return ivm_error_create(IVM_ERROR_GONE,
						"%s: qemu closed the monitor",
						qmp->name);
		}
		if (r < 0 && errno != EAGAIN)
			return ivm_error_os(errno, "%s: writing the monitor",
					    qmp->name);
		left = deadline_ms - qmp_now_ms();
		if (left <= 0)
			return ivm_error_create(IVM_ERROR_TIMEOUT,
						"%s: qemu does not read its monitor",
						qmp->name);
		if (poll(&pfd, 1, left > 60000 ? 60000 : (int)left) < 0 &&
		    errno != EINTR)
			return ivm_error_os(errno, "%s: poll", qmp->name);
	}
	return NULL;
}

/* An event message, or NULL if it is malformed (then it is dropped). */
static struct ivm_qmp_event *parse_event(struct json_object *msg)
{
	struct json_object *name, *data, *ts, *v;
	struct ivm_qmp_event *event;

	name = qmp_member(msg, "event", json_type_string);
	if (!name || json_object_get_string_len(name) > QMP_EVENT_NAME_MAX ||
	    strlen(json_object_get_string(name)) !=
		    (size_t)json_object_get_string_len(name))
		return NULL;
	data = qmp_member(msg, "data", json_type_object);
	event = qmp_event_create(json_object_get_string(name), data);
	if (!event)
		return NULL;
	ts = qmp_member(msg, "timestamp", json_type_object);
	if (ts) {
		v = qmp_member(ts, "seconds", json_type_int);
		event->seconds = v ? json_object_get_int64(v) : 0;
		v = qmp_member(ts, "microseconds", json_type_int);
		event->microseconds = v ? json_object_get_int64(v) : 0;
	}
	return event;
}

/*
 * Handle one message while waiting for the reply with id want_id; returns
 * true (and hands the message over) when it is that reply.
 */
bool qmp_dispatch(struct ivm_qmp *qmp, struct json_object *msg,
		  int64_t want_id)
{
	struct json_object *id;

	if (json_object_object_get_ex(msg, "event", NULL)) {
		struct ivm_qmp_event *event = parse_event(msg);

		if (event)
			qmp_deliver_event(qmp->shared, event);
		json_object_put(msg);
		return false;
	}
	if (json_object_object_get_ex(msg, "return", NULL) ||
	    json_object_object_get_ex(msg, "error", NULL)) {
		id = qmp_member(msg, "id", json_type_int);
		if (id && json_object_get_int64(id) == want_id && want_id > 0)
			return true;
		/*
		 * QEMU cannot echo the id of a command it could not parse, so
		 * an error without id belongs to the command in flight.
		 */
		if (!json_object_object_get_ex(msg, "id", NULL) &&
		    json_object_object_get_ex(msg, "error", NULL) &&
		    want_id > 0)
			return true;
	}
	qmp->stray++;
	json_object_put(msg);
	return false;
}

struct ivm_error *qmp_socket_execute(struct ivm_qmp *qmp, const char *cmd,
				     struct json_object *args,
				     struct json_object **ret)
{
	struct json_object *obj, *msg;
	struct ivm_error *err;
	int64_t deadline, id;
	const char *text;
	size_t text_len;
	char *line;

	if (qmp->eof) {
		qmp_set_lifecycle(qmp->shared, IVM_QMP_GONE);
		return ivm_error_create(IVM_ERROR_GONE,
					"%s: qemu closed the monitor", qmp->name);
	}
	deadline = qmp_now_ms() + qmp->timeout_ms;
	id = ++qmp->next_id;
	obj = qmp_command_object(cmd, args, id);
	if (!obj)
		return &ivm_enomem;
	text = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN,
						 &text_len);
	line = text ? malloc(text_len + 2) : NULL;
	if (!line) {
		json_object_put(obj);
		return &ivm_enomem;
	}
	memcpy(line, text, text_len);
	line[text_len] = '\n';
	json_object_put(obj);
	err = send_all(qmp, line, text_len + 1, deadline);
	free(line);
	if (err)
		return ivm_error_wrap(err, "sending '%s'", cmd);

	for (;;) {
		err = qmp_read_message(qmp, deadline, &msg);
		if (err)
			return ivm_error_wrap(err, "waiting for the reply to '%s'",
					      cmd);
		if (qmp_dispatch(qmp, msg, id))
			break;
	}
	err = qmp_reply_result(qmp, cmd, msg, ret);
	json_object_put(msg);
	return err;
}

/* Read whatever has arrived without blocking, queueing events. */
struct ivm_error *qmp_socket_drain(struct ivm_qmp *qmp)
{
	struct json_object *msg;
	struct ivm_error *err;

	for (;;) {
		err = qmp_read_message(qmp, -1, &msg);
		if (err)
			return err;
		if (!msg)
			return NULL;
		qmp_dispatch(qmp, msg, 0);
	}
}

static struct ivm_error *socket_handshake(struct ivm_qmp *qmp, int timeout_ms)
{
	struct json_object *msg = NULL, *greeting;
	struct ivm_error *err;
	size_t max_reply = qmp->max_reply;
	int saved_timeout = qmp->timeout_ms;

	qmp->max_reply = QMP_GREETING_MAX;
	err = qmp_read_message(qmp, qmp_now_ms() + timeout_ms, &msg);
	qmp->max_reply = max_reply;
	if (err) {
		const char *why;

		switch (err->code) {
		case IVM_ERROR_TIMEOUT:
			why = "no greeting in time; or another client holds the monitor";
			break;
		case IVM_ERROR_GONE:
			why = "closed before any greeting";
			break;
		case IVM_ERROR_PROTOCOL:
			why = "the greeting is not QMP JSON";
			break;
		default:
			return err;
		}
		ivm_error_destroy(err);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: not a QMP socket (%s)", qmp->name,
					why);
	}
	greeting = qmp_member(msg, "QMP", json_type_object);
	if (!greeting) {
		json_object_put(msg);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: not a QMP socket (no QMP greeting)",
					qmp->name);
	}
	qmp_set_version(qmp, qmp_member(greeting, "version",
					json_type_object));
	json_object_put(msg);

	qmp->timeout_ms = timeout_ms;
	err = qmp_socket_execute(qmp, "qmp_capabilities", NULL, NULL);
	qmp->timeout_ms = saved_timeout;
	if (err)
		return ivm_error_wrap(err, "%s: negotiating QMP capabilities",
				      qmp->name);
	return NULL;
}

struct ivm_error *ivm_qmp_connect_fd(int fd, const char *name, int timeout_ms,
				     struct ivm_qmp **ret)
{
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	struct ucred cred;
	socklen_t cred_len = sizeof(cred);

	qmp = qmp_alloc(QMP_SOCKET, name);
	if (!qmp) {
		close(fd);
		return &ivm_enomem;
	}
	qmp->fd = fd;
	qmp->tok = json_tokener_new_ex(QMP_JSON_DEPTH);
	if (!qmp->tok) {
		ivm_qmp_destroy(qmp);
		return &ivm_enomem;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 &&
	    cred_len == sizeof(cred))
		qmp->peer_pid = cred.pid;
	err = socket_handshake(qmp, timeout_ms > 0 ? timeout_ms :
						     IVM_QMP_DEFAULT_TIMEOUT_MS);
	if (err) {
		ivm_qmp_destroy(qmp);
		return err;
	}
	*ret = qmp;
	return NULL;
}

struct ivm_error *ivm_qmp_connect_socket(const char *path,
					 struct ivm_qmp **ret)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct ivm_error *err;
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path))
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: socket path too long", path);
	memcpy(addr.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ivm_error_os(errno, "socket");
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int errnum = errno;

		close(fd);
		return ivm_error_os(errnum, "%s: connect", path);
	}
	err = ivm_qmp_connect_fd(fd, path, IVM_QMP_GREETING_TIMEOUT_MS, ret);
	if (err)
		return err;
	(*ret)->socket_path = strdup(path);
	if (!(*ret)->socket_path) {
		ivm_qmp_destroy(*ret);
		return &ivm_enomem;
	}
	return NULL;
}

