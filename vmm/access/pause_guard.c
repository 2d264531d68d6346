// SPDX-License-Identifier: MIT
/* A guardian that resumes a guest its paused parent left behind: see
 * pause_guard.h. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "access/pause_guard.h"
#include "access/qmp.h"
#include "base/caps.h"
#include "base/spawn.h"

/* The guardian's end of the socket pair in its own process. */
#define GUARD_FD 3
/* How long the guardian keeps trying to reach the guest (libvirtd may be
 * restarting, QEMU may not have noticed the old QMP client is gone). */
#define GUARD_RETRY_S 30
/*
 * How long a guest seen running is watched after an armed parent died: the
 * stop it sent just before dying may still be on its way.  libvirtd carries
 * out a suspend whose client is gone, and QEMU a "stop" it finds in the
 * socket's buffer, after the guardian's first look (e2e t_86 caught a guest
 * paused for good that way).  A loaded host delays such a request by
 * seconds.
 */
#define GUARD_SETTLE_S 10

/* What one look at the guest found. */
enum guard_look {
	GUARD_UNREACHED = -1,	/* retry */
	GUARD_RUNNING = 0,	/* or paused by someone else's rules */
	GUARD_RESUMED = 1,
	GUARD_GONE = 2,		/* no such guest any more */
};

struct ivm_pause_guard {
	int fd;			/* our end; -1 once the guardian is gone */
	pid_t pid;
	bool armed;
};

/*
 * What the guardian keeps, from its start (spawn.h) and again in its main.
 * Resuming needs no capability through libvirt (its socket is root's, and
 * it knows root by the connection's credentials); a QMP socket may be
 * another user's, which the parent reached with CAP_DAC_OVERRIDE.  Nothing
 * else: the guardian outlives a profile and must not hold CAP_SYS_PTRACE
 * or CAP_SYS_ADMIN meanwhile.
 */
static uint64_t guard_caps(const char *qmp_path)
{
	return qmp_path ? IVM_CAP_BIT(IVM_CAP_DAC_OVERRIDE) : 0;
}

struct ivm_error *ivm_pause_guard_start(const struct ivm_pause_target *target,
					const char *path,
					struct ivm_pause_guard **ret)
{
	struct ivm_spawn opts;
	struct ivm_pause_guard *g;
	struct ivm_error *err;
	const char *argv[10];
	char fdarg[16];
	int sv[2], n = 0;
	pid_t pid;

	if (!target || (!target->domain_uuid == !target->qmp_path))
		return ivm_error_create(IVM_ERROR_INVALID,
					"pause guard: name a libvirt domain or a QMP socket");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return ivm_error_os(errno, "pause guard: socketpair");
	snprintf(fdarg, sizeof(fdarg), "%d", GUARD_FD);
	argv[n++] = "idlevm";
	argv[n++] = "__pause-guard";
	argv[n++] = "--fd";
	argv[n++] = fdarg;
	if (target->qmp_path) {
		argv[n++] = "--qmp";
		argv[n++] = target->qmp_path;
	} else {
		argv[n++] = "--uuid";
		argv[n++] = target->domain_uuid;
		if (target->libvirt_uri) {
			argv[n++] = "--connect";
			argv[n++] = target->libvirt_uri;
		}
	}
	argv[n] = NULL;

	/*
	 * Its own session, default signal mask, nothing of ours but its end
	 * of the pair and stderr: a guardian must outlive whatever kills us.
	 * It keeps what its main keeps (guard_caps), from the start.
	 */
	opts = (struct ivm_spawn){
		.caps = guard_caps(target->qmp_path),
		.new_session = true, .empty_sigmask = true, .null_stdio = true,
		.pass_fd = sv[1], .pass_as = GUARD_FD,
	};
	err = ivm_spawn(path ? path : "/proc/self/exe", (char *const *)argv,
			&opts, &pid);
	close(sv[1]);
	if (err) {
		close(sv[0]);
		return ivm_error_wrap(err, "pause guard");
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		close(sv[0]);
		return &ivm_enomem;
	}
	g->fd = sv[0];
	g->pid = pid;
	*ret = g;
	return NULL;
}

static bool say(struct ivm_pause_guard *g, char word)
{
	ssize_t n;

	if (g->fd < 0)
		return false;
	do
		n = send(g->fd, &word, 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1;
}

struct ivm_error *ivm_pause_guard_arm(struct ivm_pause_guard *g)
{
	if (!say(g, 'A'))
		return ivm_error_create(IVM_ERROR_GONE,
					"pause guard (pid %d) is gone: not pausing a guest nobody would resume",
					(int)g->pid);
	g->armed = true;
	return NULL;
}

int ivm_pause_guard_pid(const struct ivm_pause_guard *g)
{
	return (int)g->pid;
}

void ivm_pause_guard_disarm(struct ivm_pause_guard *g)
{
	if (g->armed && say(g, 'D'))
		g->armed = false;
}

void ivm_pause_guard_destroy(struct ivm_pause_guard *g)
{
	if (!g)
		return;
	/*
	 * End of file is the guardian's cue; an unarmed one exits at once.
	 * An armed one goes on to resume the guest: do not wait for that,
	 * it is in a session of its own and init reaps it.
	 */
	if (g->fd >= 0)
		close(g->fd);
	waitpid(g->pid, NULL, WNOHANG);
	free(g);
}

/* ---- the guardian ------------------------------------------------------ */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Our own messages say what failed; libvirt's would repeat each retry. */
static void quiet_libvirt(void *ctx, virErrorPtr error)
{
}

static enum guard_look resume_libvirt(const char *uri, const char *uuid,
				      const char **why)
{
	virConnectPtr conn = virConnectOpen(uri);
	enum guard_look rc = GUARD_UNREACHED;
	virDomainPtr dom;
	int state = 0, reason = 0;

	if (!conn) {
		*why = "cannot connect to libvirt";
		return GUARD_UNREACHED;
	}
	dom = virDomainLookupByUUIDString(conn, uuid);
	if (!dom) {
		virConnectClose(conn);
		return GUARD_GONE;
	}
	if (virDomainGetState(dom, &state, &reason, 0) < 0) {
		*why = "cannot read the domain's state";
	} else if (state != VIR_DOMAIN_PAUSED ||
		   reason != VIR_DOMAIN_PAUSED_USER) {
		rc = GUARD_RUNNING;
	} else if (virDomainResume(dom) < 0) {
		*why = "virDomainResume failed";
	} else {
		rc = GUARD_RESUMED;
	}
	virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

static enum guard_look resume_qmp(const char *path, const char **why)
{
	enum guard_look rc = GUARD_UNREACHED;
	struct json_object *status = NULL, *s;
	struct ivm_error *err;
	struct ivm_qmp *qmp;

	err = ivm_qmp_connect_socket(path, &qmp);
	if (err) {
		/* No socket any more: QEMU is gone, nothing to resume. */
		if (err->code == IVM_ERROR_OS &&
		    (err->errnum == ENOENT || err->errnum == ECONNREFUSED))
			rc = GUARD_GONE;
		*why = "cannot connect to QEMU's QMP socket";
		ivm_error_destroy(err);
		return rc;
	}
	err = ivm_qmp_execute(qmp, "query-status", NULL, &status);
	if (!err && json_object_object_get_ex(status, "status", &s) &&
	    json_object_is_type(s, json_type_string)) {
		/* Only the state a "stop" leaves: not a migration, not S3. */
		if (strcmp(json_object_get_string(s), "paused")) {
			rc = GUARD_RUNNING;
		} else if (!(err = ivm_qmp_cont(qmp))) {
			rc = GUARD_RESUMED;
		} else {
			*why = "cont failed";
		}
	} else {
		*why = "query-status failed";
	}
	json_object_put(status);
	ivm_error_destroy(err);
	ivm_qmp_destroy(qmp);
	return rc;
}

int ivm_pause_guard_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "fd", required_argument, NULL, 'f' },
		{ "uuid", required_argument, NULL, 'u' },
		{ "connect", required_argument, NULL, 'c' },
		{ "qmp", required_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	const char *uuid = NULL, *uri = NULL, *qmp_path = NULL;
	const char *what, *why = NULL;
	struct ivm_error *err;
	int fd = -1, c, waited, running;
	enum guard_look rc = GUARD_UNREACHED;
	char word, last = 'D';
	ssize_t n;

	/* Whatever reaches the parent's terminal or group is not for us. */
	virSetErrorFunc(NULL, quiet_libvirt);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			fd = atoi(optarg);
			break;
		case 'u':
			uuid = optarg;
			break;
		case 'c':
			uri = optarg;
			break;
		case 'q':
			qmp_path = optarg;
			break;
		default:
			return 2;
		}
	}
	if (fd < 0 || !uuid == !qmp_path) {
		fprintf(stderr, "idlevm __pause-guard: internal command of idlevm\n");
		return 2;
	}
	err = ivm_caps_limit(guard_caps(qmp_path));
	if (err) {
		fprintf(stderr, "idlevm pause guard: %s\n", err->message);
		ivm_error_destroy(err);
	}
	for (;;) {
		n = read(fd, &word, 1);
		if (n == 1) {
			if (word == 'A' || word == 'D')
				last = word;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;		/* end of file (or the pair broke): the parent is done */
	}
	if (last != 'A')
		return 0;
	what = qmp_path ? qmp_path : uuid;
	/*
	 * Look every 100 ms until the guest is resumed or gone, or has been
	 * seen running through the settle time, or could not be reached for
	 * the retry time.
	 */
	for (waited = 0, running = 0; waited <= GUARD_RETRY_S * 10; waited++) {
		rc = qmp_path ? resume_qmp(qmp_path, &why) :
				resume_libvirt(uri, uuid, &why);
		if (rc == GUARD_RESUMED || rc == GUARD_GONE)
			break;
		if (rc == GUARD_RUNNING && ++running > GUARD_SETTLE_S * 10)
			break;
		sleep_ms(100);
	}
	if (rc == GUARD_RESUMED)
		fprintf(stderr, "idlevm pause guard: resumed guest %s, left paused by an idlevm that ended while it had it paused\n",
			what);
	else if (rc < 0)
		fprintf(stderr, "idlevm pause guard: could not resume guest %s (%s): resume it by hand (virsh resume)\n",
			what, why ? why : "?");
	return rc < 0 ? 1 : 0;
}
