// SPDX-License-Identifier: MIT
/*
 * The pause guardian (vmm/access/pause_guard.h): a process that pauses a
 * guest and dies leaves it to the guardian, which resumes it; one that
 * resumed it, or a guest that runs, is left alone.  The guest is a small
 * QMP server on a unix socket (greeting, qmp_capabilities, query-status,
 * stop, cont), the guardian the real idlevm binary next to this test
 * binary, and the dying process a fork of this one.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "access/pause_guard.h"
#include "base/caps.h"

struct mini_qemu {
	char dir[64], path[128];
	int listen_fd;
	pthread_t thread;
	pthread_mutex_t lock;
	bool paused;
	int connections, queries, conts;
	bool stop;
};

static void reply(int fd, struct json_object *id, const char *ret)
{
	char buf[512];
	int n;

	n = snprintf(buf, sizeof(buf), "{\"return\": %s, \"id\": %s}\r\n", ret,
		     id ? json_object_to_json_string(id) : "null");
	(void)!write(fd, buf, (size_t)n);
}

static void serve(struct mini_qemu *q, int fd)
{
	static const char greeting[] =
		"{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 7}, \"package\": \"\"}, \"capabilities\": [\"oob\"]}}\r\n";
	struct json_tokener *tok = json_tokener_new();
	char buf[4096];
	ssize_t n;

	(void)!write(fd, greeting, sizeof(greeting) - 1);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		ssize_t off = 0;

		while (off < n) {
			struct json_object *cmd, *exe, *id = NULL;
			const char *name;

			cmd = json_tokener_parse_ex(tok, buf + off, (int)(n - off));
			off += json_tokener_get_parse_end(tok);
			if (!cmd)
				break;
			json_object_object_get_ex(cmd, "id", &id);
			name = json_object_object_get_ex(cmd, "execute", &exe) ?
				       json_object_get_string(exe) : "";
			pthread_mutex_lock(&q->lock);
			if (!strcmp(name, "query-status")) {
				q->queries++;
				reply(fd, id, q->paused ?
					"{\"status\": \"paused\", \"singlestep\": false, \"running\": false}" :
					"{\"status\": \"running\", \"singlestep\": false, \"running\": true}");
			} else if (!strcmp(name, "cont")) {
				q->conts++;
				q->paused = false;
				reply(fd, id, "{}");
			} else if (!strcmp(name, "stop")) {
				q->paused = true;
				reply(fd, id, "{}");
			} else {
				reply(fd, id, "{}");
			}
			pthread_mutex_unlock(&q->lock);
			json_object_put(cmd);
		}
	}
	json_tokener_free(tok);
}

static void *mini_qemu_main(void *arg)
{
	struct mini_qemu *q = arg;

	for (;;) {
		int fd = accept(q->listen_fd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return NULL;	/* listen socket shut down */
		}
		pthread_mutex_lock(&q->lock);
		q->connections++;
		pthread_mutex_unlock(&q->lock);
		serve(q, fd);	/* QEMU serves one QMP client at a time too */
		close(fd);
	}
}

/*
 * The running mini QEMU's directory, for the suite's fini: a failed
 * assertion ends the test before its mini_qemu_stop.
 */
static char qemu_dir[64];

static void mini_qemu_remove(void)
{
	char path[128];

	if (!qemu_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/qmp.sock", qemu_dir);
	unlink(path);
	rmdir(qemu_dir);
	qemu_dir[0] = '\0';
}

TestSuite(pause_guard, .fini = mini_qemu_remove);

static void mini_qemu_start(struct mini_qemu *q, bool paused)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };

	memset(q, 0, sizeof(*q));
	strcpy(q->dir, "/tmp/ivm-pause-guard.XXXXXX");
	cr_assert_not_null(mkdtemp(q->dir));
	strcpy(qemu_dir, q->dir);
	snprintf(q->path, sizeof(q->path), "%s/qmp.sock", q->dir);
	q->paused = paused;
	pthread_mutex_init(&q->lock, NULL);
	q->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(q->listen_fd >= 0);
	strcpy(addr.sun_path, q->path);
	cr_assert(bind(q->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	cr_assert(listen(q->listen_fd, 4) == 0);
	cr_assert(pthread_create(&q->thread, NULL, mini_qemu_main, q) == 0);
}

static void mini_qemu_stop(struct mini_qemu *q)
{
	shutdown(q->listen_fd, SHUT_RDWR);
	close(q->listen_fd);
	pthread_join(q->thread, NULL);
	mini_qemu_remove();
}

static int counter(struct mini_qemu *q, int *field)
{
	int v;

	pthread_mutex_lock(&q->lock);
	v = *field;
	pthread_mutex_unlock(&q->lock);
	return v;
}

/* The idlevm binary of this build: ../idlevm from build/tests/. */
static void idlevm_path(char *buf, size_t len)
{
	char exe[PATH_MAX - 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	cr_assert(n > 0);
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	cr_assert_not_null(slash);
	*slash = '\0';
	slash = strrchr(exe, '/');
	cr_assert_not_null(slash);
	*slash = '\0';
	snprintf(buf, len, "%s/idlevm", exe);
	cr_assert(access(buf, X_OK) == 0,
		  "%s missing: the guardian is idlevm itself (make all)", buf);
}

/* Whether process pid has ended (gone, or a zombie not reaped yet). */
static bool ended(int pid)
{
	char path[64], state = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = 0;
	fclose(f);
	return state == 'Z' || state == 'X';
}

enum how_it_ends { DIE_ARMED, EXIT_DISARMED };

/*
 * A process that starts a guardian for q, arms it (as before a pause) and
 * then dies by SIGKILL, or disarms it and exits.  Returns the guardian's
 * pid.
 */
static int parent_that(struct mini_qemu *q, enum how_it_ends how)
{
	struct ivm_pause_target target = { .qmp_path = q->path };
	char path[PATH_MAX];
	int pipefd[2], gpid = 0;
	pid_t child;

	idlevm_path(path, sizeof(path));
	cr_assert(pipe(pipefd) == 0);
	child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		struct ivm_pause_guard *g;
		struct ivm_error *err;

		close(pipefd[0]);
		err = ivm_pause_guard_start(&target, path, &g);
		if (err)
			_exit(3);
		if (ivm_pause_guard_arm(g))
			_exit(4);
		gpid = ivm_pause_guard_pid(g);
		if (how == EXIT_DISARMED)
			ivm_pause_guard_disarm(g);
		(void)!write(pipefd[1], &gpid, sizeof(gpid));
		if (how == DIE_ARMED)
			kill(getpid(), SIGKILL);
		ivm_pause_guard_destroy(g);
		_exit(0);
	}
	close(pipefd[1]);
	cr_assert(read(pipefd[0], &gpid, sizeof(gpid)) == sizeof(gpid),
		  "the parent could not start and arm a guardian");
	close(pipefd[0]);
	waitpid(child, NULL, 0);
	return gpid;
}

/* Wait (bounded, generously: a loaded host) for the guardian to end. */
static void wait_ended(int gpid)
{
	int i;

	for (i = 0; i < 600 && !ended(gpid); i++)
		usleep(50000);
	cr_assert(ended(gpid), "guardian %d still running after 30 s", gpid);
}

Test(pause_guard, a_parent_killed_while_the_guest_is_paused_leaves_it_resumed)
{
	struct mini_qemu q;
	int gpid;

	mini_qemu_start(&q, true);
	gpid = parent_that(&q, DIE_ARMED);
	wait_ended(gpid);
	cr_expect_eq(counter(&q, &q.conts), 1, "cont sent %d times",
		     counter(&q, &q.conts));
	cr_expect_not(q.paused);
	mini_qemu_stop(&q);
}

Test(pause_guard, a_parent_that_resumed_leaves_the_guest_alone)
{
	struct mini_qemu q;
	int gpid;

	mini_qemu_start(&q, true);
	gpid = parent_that(&q, EXIT_DISARMED);
	wait_ended(gpid);
	cr_expect_eq(counter(&q, &q.connections), 0,
		     "an unarmed guardian connected to QEMU");
	cr_expect(q.paused, "the guardian resumed a guest it was not asked to");
	mini_qemu_stop(&q);
}

Test(pause_guard, a_running_guest_is_not_sent_cont)
{
	struct mini_qemu q;
	int gpid;

	/* Armed, but the guest runs (someone else resumed it): look only. */
	mini_qemu_start(&q, false);
	gpid = parent_that(&q, DIE_ARMED);
	wait_ended(gpid);
	cr_expect_geq(counter(&q, &q.queries), 1);
	cr_expect_eq(counter(&q, &q.conts), 0);
	cr_expect_not(q.paused);
	mini_qemu_stop(&q);
}

Test(pause_guard, a_stop_carried_out_after_the_parent_died_is_undone)
{
	struct mini_qemu q;
	int gpid, i;

	/*
	 * The parent died with its stop still on its way (in libvirtd, or
	 * in QEMU's socket buffer): the guardian's first look finds the
	 * guest running, and the stop lands after that.
	 */
	mini_qemu_start(&q, false);
	gpid = parent_that(&q, DIE_ARMED);
	for (i = 0; i < 600 && counter(&q, &q.queries) < 1; i++)
		usleep(50000);
	cr_assert_geq(counter(&q, &q.queries), 1, "the guardian never looked");
	pthread_mutex_lock(&q.lock);
	q.paused = true;
	pthread_mutex_unlock(&q.lock);
	wait_ended(gpid);
	cr_expect_eq(counter(&q, &q.conts), 1, "cont sent %d times",
		     counter(&q, &q.conts));
	cr_expect_not(q.paused, "the late stop was left in place");
	mini_qemu_stop(&q);
}

Test(pause_guard, keeps_only_what_a_resume_needs)
{
	uint64_t had, nnp = 0, eff = ~0ULL, bnd = ~0ULL, inh = ~0ULL;
	uint64_t want;
	struct ivm_pause_guard *g;
	struct ivm_error *err;
	struct mini_qemu q;
	char path[PATH_MAX];
	int gpid, i;

	/*
	 * A guardian of a QMP socket keeps CAP_DAC_OVERRIDE (the socket may
	 * be another user's) and nothing else, from the moment it has read
	 * its arguments; it is idlevm executed again, so root's exec gave it
	 * all this test process had first.
	 */
	cr_assert(ivm_caps_read(0, "CapPrm", &had));
	want = had & IVM_CAP_BIT(IVM_CAP_DAC_OVERRIDE);
	mini_qemu_start(&q, false);
	idlevm_path(path, sizeof(path));
	err = ivm_pause_guard_start(&(struct ivm_pause_target){ .qmp_path = q.path },
				    path, &g);
	cr_assert_null(err, "%s", err ? err->message : "");
	gpid = ivm_pause_guard_pid(g);
	for (i = 0; i < 600 && nnp != 1; i++) {
		usleep(50000);
		if (!ivm_caps_read(gpid, "NoNewPrivs", &nnp))
			nnp = 0;
	}
	cr_expect(ivm_caps_read(gpid, "CapEff", &eff) &&
		  ivm_caps_read(gpid, "CapBnd", &bnd) &&
		  ivm_caps_read(gpid, "CapInh", &inh));
	ivm_pause_guard_destroy(g);
	mini_qemu_stop(&q);
	cr_assert_eq(nnp, 1, "the guardian did not limit itself within 30 s");
	cr_expect_eq(eff, want, "guardian CapEff %#llx, not %#llx",
		     (unsigned long long)eff, (unsigned long long)want);
	cr_expect_eq(inh, 0);
	if (had & IVM_CAP_BIT(IVM_CAP_SETPCAP))
		cr_expect_eq(bnd, want, "guardian CapBnd %#llx, not %#llx",
			     (unsigned long long)bnd, (unsigned long long)want);
}

Test(pause_guard, refuses_an_unnamed_target)
{
	struct ivm_pause_target none = { 0 };
	struct ivm_pause_guard *g = NULL;
	struct ivm_error *err = ivm_pause_guard_start(&none, NULL, &g);

	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	ivm_pause_guard_destroy(NULL);
}
