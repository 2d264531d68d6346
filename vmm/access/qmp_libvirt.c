// SPDX-License-Identifier: MIT
/*
 * QMP through libvirt's monitor passthrough (virDomainQemuMonitorCommand),
 * limited to queries, with libvirt's lifecycle and reboot events, and the
 * connection to libvirtd kept: opened again when libvirtd restarts.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "access/libvirt_domain.h"
#include "access/qmp_int.h"

/* A connection to libvirtd found dead is opened again at most this often. */
#define QMP_RECONNECT_MS 1000

static atomic_bool libvirt_event_loop_running;

/*
 * Commands passed through libvirt: queries only.  libvirt tracks the
 * domain's state from the monitor; a stop, cont or dump behind its back
 * desynchronizes it (and dump-guest-memory crashed libvirtd 9.0).
 */
static const char *const libvirt_qmp_allowed[] = {
	"qom-get", "qom-list", "qmp_capabilities",
};
static const char *const libvirt_hmp_allowed[] = {
	"info", "gpa2hva", "gva2gpa", "x", "xp",
};

static struct ivm_error *libvirt_refuse(struct ivm_qmp *qmp, const char *cmd)
{
	const char *hint = "only queries are passed through libvirt";

	if (!strcmp(cmd, "stop") || !strcmp(cmd, "cont"))
		hint = "use ivm_qmp_stop/ivm_qmp_cont (virDomainSuspend/virDomainResume)";
	else if (!strcmp(cmd, "dump-guest-memory"))
		hint = "use virDomainCoreDumpWithFormat; passing it through crashed libvirtd 9.0";
	else if (!strcmp(cmd, "quit") || !strcmp(cmd, "system_reset") ||
		 !strcmp(cmd, "system_powerdown"))
		hint = "use virDomainDestroy/virDomainReset/virDomainShutdown";
	return ivm_error_create(IVM_ERROR_INVALID,
				"%s: refusing to pass '%s' through libvirt's monitor passthrough: libvirt manages this domain; %s",
				qmp->name, cmd, hint);
}

static struct ivm_error *libvirt_check_allowed(struct ivm_qmp *qmp,
					       const char *cmd,
					       struct json_object *args)
{
	struct json_object *line;
	const char *p;
	size_t i, n;

	if (!strncmp(cmd, "query-", 6))
		return NULL;
	for (i = 0; i < sizeof(libvirt_qmp_allowed) / sizeof(*libvirt_qmp_allowed); i++) {
		if (!strcmp(cmd, libvirt_qmp_allowed[i]))
			return NULL;
	}
	if (strcmp(cmd, "human-monitor-command"))
		return libvirt_refuse(qmp, cmd);
	line = args ? qmp_member(args, "command-line", json_type_string) : NULL;
	if (!line)
		return libvirt_refuse(qmp, cmd);
	p = json_object_get_string(line);
	p += strspn(p, " \t");
	n = strcspn(p, " \t");
	for (i = 0; i < sizeof(libvirt_hmp_allowed) / sizeof(*libvirt_hmp_allowed); i++) {
		if (strlen(libvirt_hmp_allowed[i]) == n &&
		    !strncmp(p, libvirt_hmp_allowed[i], n))
			return NULL;
	}
	return ivm_error_create(IVM_ERROR_INVALID,
				"%s: refusing to pass HMP '%.*s' through libvirt's monitor passthrough: only read-only commands are allowed",
				qmp->name, (int)(n > 64 ? 64 : n), p);
}

static void lifecycle_from_libvirt_state(struct ivm_qmp *qmp, int state)
{
	switch (state) {
	case VIR_DOMAIN_RUNNING:
	case VIR_DOMAIN_BLOCKED:
		qmp_set_lifecycle(qmp->shared, IVM_QMP_RUNNING);
		break;
	case VIR_DOMAIN_PAUSED:
	case VIR_DOMAIN_PMSUSPENDED:
	case VIR_DOMAIN_CRASHED:	/* QEMU still there, vCPUs stopped */
		qmp_set_lifecycle(qmp->shared, IVM_QMP_PAUSED);
		break;
	case VIR_DOMAIN_SHUTDOWN:
		qmp_set_lifecycle(qmp->shared, IVM_QMP_SHUTDOWN);
		break;
	case VIR_DOMAIN_SHUTOFF:
		qmp_set_lifecycle(qmp->shared, IVM_QMP_GONE);
		break;
	default:
		break;
	}
}

const char *ivm_qmp_libvirt_event_name(int event, int detail)
{
	switch (event) {
	case VIR_DOMAIN_EVENT_SUSPENDED:
		return "STOP";	/* a migration's or a save's pause too */
	case VIR_DOMAIN_EVENT_RESUMED:
	case VIR_DOMAIN_EVENT_STARTED:
		return "RESUME";
	case VIR_DOMAIN_EVENT_SHUTDOWN:
		return "SHUTDOWN";
	case VIR_DOMAIN_EVENT_STOPPED:
		/* QEMU has exited (not a QMP event: QEMU cannot say it). */
		if (detail == VIR_DOMAIN_EVENT_STOPPED_SAVED)
			return "DOMAIN_SAVED";
		if (detail == VIR_DOMAIN_EVENT_STOPPED_MIGRATED)
			return "DOMAIN_MIGRATED";
		return "DOMAIN_STOPPED";
	case VIR_DOMAIN_EVENT_CRASHED:
		return "GUEST_PANICKED";
	default:
		return NULL;
	}
}

static int libvirt_lifecycle_cb(virConnectPtr conn, virDomainPtr dom,
				int event, int detail, void *opaque)
{
	const char *name = ivm_qmp_libvirt_event_name(event, detail);
	struct qmp_shared *shared = opaque;
	struct ivm_qmp_event *ev;
	int state = event == VIR_DOMAIN_EVENT_STOPPED ? IVM_QMP_GONE : -1;

	if (!name)
		return 0;
	ev = qmp_event_create(name, NULL);
	if (ev) {
		ev->data = json_object_new_object();
		json_object_object_add(ev->data, "libvirt-event",
				       json_object_new_int(event));
		json_object_object_add(ev->data, "libvirt-detail",
				       json_object_new_int(detail));
		qmp_deliver_event(shared, ev);
	}
	if (state >= 0)
		qmp_set_lifecycle(shared, state);
	else if (event == VIR_DOMAIN_EVENT_CRASHED)
		qmp_set_lifecycle(shared, IVM_QMP_PAUSED);
	return 0;
}

static int libvirt_reboot_cb(virConnectPtr conn, virDomainPtr dom,
			     void *opaque)
{
	struct ivm_qmp_event *ev = qmp_event_create("RESET", NULL);

	if (ev)
		qmp_deliver_event(opaque, ev);
	return 0;
}

static void libvirt_register_events(struct ivm_qmp *qmp)
{
	if (!atomic_load(&libvirt_event_loop_running))
		return;
	qmp_shared_get(qmp->shared);
	qmp->lifecycle_cb = virConnectDomainEventRegisterAny(
		qmp->conn, qmp->dom, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
		VIR_DOMAIN_EVENT_CALLBACK(libvirt_lifecycle_cb), qmp->shared,
		qmp_shared_put);
	/*
	 * On failure the reference stays taken: whether libvirt calls freecb
	 * for a failed registration is not documented, and a leaked
	 * reference costs a few bytes where a double put would be a
	 * use-after-free.
	 */
	if (qmp->lifecycle_cb < 0) {
		virResetLastError();
		return;
	}
	qmp_shared_get(qmp->shared);
	qmp->reboot_cb = virConnectDomainEventRegisterAny(
		qmp->conn, qmp->dom, VIR_DOMAIN_EVENT_ID_REBOOT,
		VIR_DOMAIN_EVENT_CALLBACK(libvirt_reboot_cb), qmp->shared,
		qmp_shared_put);
	if (qmp->reboot_cb < 0)
		virResetLastError();
}

void qmp_libvirt_release(struct ivm_qmp *qmp)
{
	if (qmp->lifecycle_cb >= 0)
		virConnectDomainEventDeregisterAny(qmp->conn, qmp->lifecycle_cb);
	if (qmp->reboot_cb >= 0)
		virConnectDomainEventDeregisterAny(qmp->conn, qmp->reboot_cb);
	qmp->lifecycle_cb = qmp->reboot_cb = -1;
	if (qmp->dom)
		virDomainFree(qmp->dom);
	if (qmp->conn)
		virConnectClose(qmp->conn);
	qmp->dom = NULL;
	qmp->conn = NULL;
	virResetLastError();
}

/*
 * libvirtd may restart under us (QEMU keeps running, the new libvirtd
 * reattaches to it).  When our connection has died, open a new one to the
 * same URI and find the domain again by UUID.
 */
static bool libvirt_reconnect(struct ivm_qmp *qmp)
{
	virConnectPtr conn;
	virDomainPtr dom;

	if (!qmp->conn || virConnectIsAlive(qmp->conn) == 1)
		return false;
	if (!qmp->lost_ms)
		qmp->lost_ms = qmp_now_ms() ? qmp_now_ms() : 1;
	conn = virConnectOpen(qmp->uri);
	if (!conn)
		return false;
	dom = virDomainLookupByUUID(conn, qmp->uuid);
	if (!dom) {
		virConnectClose(conn);
		return false;
	}
	qmp_libvirt_release(qmp);
	qmp->conn = conn;
	qmp->dom = dom;
	libvirt_register_events(qmp);
	qmp->reconnects++;
	qmp->lost_ms = 0;
	return true;
}


/*
 * With events registered nothing calls libvirt while the guest runs, so a
 * libvirtd that went away (its connection closed: a local check, no round
 * trip) would leave the client deaf for good.  Open it again at most every
 * QMP_RECONNECT_MS (a refused connect is quick; one to a libvirtd still
 * starting waits until it serves), then read the state once: what happened
 * meanwhile sent no event (a pause, QEMU gone).
 */
struct ivm_error *qmp_libvirt_keep_connected(struct ivm_qmp *qmp)
{
	int64_t now = qmp_now_ms();

	if (qmp->lifecycle_cb < 0 || virConnectIsAlive(qmp->conn) == 1)
		return NULL;
	if (now < qmp->next_reconnect_ms)
		return NULL;
	qmp->next_reconnect_ms = now + QMP_RECONNECT_MS;
	if (!libvirt_reconnect(qmp)) {
		virResetLastError();
		return NULL;
	}
	return qmp_libvirt_poll_state(qmp);
}

static bool libvirt_error_is_gone(virErrorPtr e)
{
	if (!e)
		return false;
	return e->code == VIR_ERR_NO_DOMAIN ||
	       (e->code == VIR_ERR_OPERATION_INVALID &&
		e->message && strstr(e->message, "not running"));
}

static struct ivm_error *domain_gone(struct ivm_qmp *qmp)
{
	qmp_set_lifecycle(qmp->shared, IVM_QMP_GONE);
	return ivm_error_create(IVM_ERROR_GONE,
				"%s: the domain is not running any more",
				qmp->name);
}

/*
 * The error of a failed libvirt call.  saved is the error as the call left
 * it (any later libvirt call, even virConnectIsAlive, resets the thread's
 * last error); it is consumed.
 */
static struct ivm_error *libvirt_error(struct ivm_qmp *qmp, virErrorPtr saved,
				       const char *what)
{
	struct ivm_error *err;

	if (libvirt_error_is_gone(saved) ||
	    ivm_qmp_lifecycle_cached(qmp) == IVM_QMP_GONE) {
		virFreeError(saved);
		virResetLastError();
		return domain_gone(qmp);
	}
	err = ivm_error_create(IVM_ERROR_LIBVIRT, "%s: %s: %s", qmp->name,
			       what, saved && saved->message ? saved->message :
			       "unknown libvirt error");
	virFreeError(saved);
	virResetLastError();
	return err;
}

/*
 * After a failed call: the saved error, or NULL when the connection had
 * died and a new one was opened, so the call is worth one retry.
 */
static virErrorPtr libvirt_failed(struct ivm_qmp *qmp, bool *retry)
{
	virErrorPtr saved = virSaveLastError();

	*retry = !libvirt_error_is_gone(saved) && libvirt_reconnect(qmp);
	if (*retry) {
		virFreeError(saved);
		return NULL;
	}
	return saved;
}

struct ivm_error *qmp_libvirt_execute(struct ivm_qmp *qmp, const char *cmd,
					 struct json_object *args,
					 struct json_object **ret)
{
	struct json_object *obj, *reply = NULL;
	virErrorPtr saved = NULL;
	struct ivm_error *err;
	char *result = NULL;
	const char *text;
	size_t result_len;
	bool retry;
	int r;

	err = libvirt_check_allowed(qmp, cmd, args);
	if (err)
		return err;
	obj = qmp_command_object(cmd, args, 0);
	if (!obj)
		return &ivm_enomem;
	if (ivm_qmp_lifecycle_cached(qmp) == IVM_QMP_GONE) {
		json_object_put(obj);
		return domain_gone(qmp);
	}
	text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	r = virDomainQemuMonitorCommand(qmp->dom, text, &result, 0);
	if (r < 0) {
		saved = libvirt_failed(qmp, &retry);
		if (retry)
			r = virDomainQemuMonitorCommand(qmp->dom, text,
							&result, 0);
		if (r < 0 && !saved)
			saved = virSaveLastError();
	}
	json_object_put(obj);
	if (r < 0)
		return libvirt_error(qmp, saved, cmd);
	virFreeError(saved);
	if (!result)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: libvirt returned no reply to '%s'",
					qmp->name, cmd);
	result_len = strlen(result);
	if (result_len > qmp->max_reply) {
		free(result);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: qemu sent a message larger than %zu bytes",
					qmp->name, qmp->max_reply);
	}
	err = qmp_parse_line(qmp, result, result_len, &reply);
	free(result);
	if (err)
		return ivm_error_wrap(err, "reply to '%s'", cmd);
	err = qmp_reply_result(qmp, cmd, reply, ret);
	json_object_put(reply);
	return err;
}

static void *libvirt_event_loop(void *arg)
{
	for (;;) {
		if (virEventRunDefaultImpl() < 0) {
			struct timespec ts = { 0, 100 * 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

struct ivm_error *ivm_qmp_libvirt_event_loop_start(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct ivm_error *err = NULL;
	pthread_attr_t attr;
	pthread_t thread;
	int r;

	pthread_mutex_lock(&lock);
	if (atomic_load(&libvirt_event_loop_running))
		goto out;
	if (virEventRegisterDefaultImpl() < 0) {
		err = ivm_libvirt_error("registering libvirt's event loop");
		goto out;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&thread, &attr, libvirt_event_loop, NULL);
	pthread_attr_destroy(&attr);
	if (r) {
		err = ivm_error_os(r, "starting libvirt's event loop thread");
		goto out;
	}
	atomic_store(&libvirt_event_loop_running, true);
out:
	pthread_mutex_unlock(&lock);
	return err;
}

struct ivm_error *qmp_libvirt_poll_state(struct ivm_qmp *qmp)
{
	virErrorPtr saved = NULL;
	int state, reason, r;
	bool retry;

	r = virDomainGetState(qmp->dom, &state, &reason, 0);
	if (r < 0) {
		saved = libvirt_failed(qmp, &retry);
		if (retry)
			r = virDomainGetState(qmp->dom, &state, &reason, 0);
		if (r < 0 && !saved)
			saved = virSaveLastError();
	}
	if (r < 0)
		return libvirt_error(qmp, saved, "virDomainGetState");
	virFreeError(saved);
	lifecycle_from_libvirt_state(qmp, state);
	qmp->last_state_poll_ms = qmp_now_ms();
	return NULL;
}

struct ivm_error *ivm_qmp_connect_libvirt(struct ivm_libvirt_domain *ldom,
					  struct ivm_qmp **ret)
{
	struct json_object *version = NULL;
	struct ivm_error *err;
	struct ivm_qmp *qmp;

	qmp = qmp_alloc(QMP_LIBVIRT, ivm_libvirt_domain_name(ldom));
	if (!qmp)
		return &ivm_enomem;
	qmp->tok = json_tokener_new_ex(QMP_JSON_DEPTH);
	if (!qmp->tok) {
		ivm_qmp_destroy(qmp);
		return &ivm_enomem;
	}
	qmp->conn = ivm_libvirt_domain_conn(ldom);
	qmp->dom = ivm_libvirt_domain_ptr(ldom);
	if (!qmp->conn || !qmp->dom) {
		qmp->conn = NULL;
		qmp->dom = NULL;
		ivm_qmp_destroy(qmp);
		return ivm_error_create(IVM_ERROR_INVALID,
					"libvirt domain is not open");
	}
	/* Our own references: reconnecting replaces them, never B's. */
	virConnectRef(qmp->conn);
	virDomainRef(qmp->dom);
	qmp->uri = virConnectGetURI(qmp->conn);
	if (!qmp->uri || virDomainGetUUID(qmp->dom, qmp->uuid) < 0) {
		err = ivm_libvirt_error("identifying the domain");
		ivm_qmp_destroy(qmp);
		return err;
	}
	err = qmp_libvirt_execute(qmp, "query-version", NULL, &version);
	if (err) {
		ivm_qmp_destroy(qmp);
		return ivm_error_wrap(err, "talking to qemu through libvirt");
	}
	qmp_set_version(qmp, version);
	json_object_put(version);
	libvirt_register_events(qmp);
	err = qmp_libvirt_poll_state(qmp);
	if (err) {
		ivm_qmp_destroy(qmp);
		return err;
	}
	*ret = qmp;
	return NULL;
}


struct ivm_error *ivm_qmp_libvirt_channel_path(struct ivm_qmp *qmp,
					       const char *channel_name,
					       char **ret)
{
	if (qmp->transport != QMP_LIBVIRT)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: not a libvirt domain", qmp->name);
	return ivm_libvirt_channel_path(qmp->dom, qmp->name, channel_name, ret);
}

struct ivm_error *qmp_libvirt_run_state_change(struct ivm_qmp *qmp,
						  int (*fn)(virDomainPtr),
						  const char *what)
{
	virErrorPtr saved = NULL;
	bool retry;
	int r;

	r = fn(qmp->dom);
	if (r < 0) {
		saved = libvirt_failed(qmp, &retry);
		if (retry)
			r = fn(qmp->dom);
		if (r < 0 && !saved)
			saved = virSaveLastError();
	}
	if (r < 0)
		return libvirt_error(qmp, saved, what);
	virFreeError(saved);
	return NULL;
}
