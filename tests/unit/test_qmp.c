// SPDX-License-Identifier: MIT
/*
 * QMP client over a socketpair, against a fake QEMU replaying exchanges
 * recorded from a real QEMU 7.2 (tests/unit/transcripts/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "access/qemu_discovery.h"
#include "access/qmp.h"
#include "test_qmp_fake.h"
#include "tmp_files.h"

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A fake that greets or answers gets this long: a hang guard, no more. */
#define FAKE_GREETS_WITHIN_MS 30000

static struct ivm_qmp *connect_fake(struct fake_qemu *fake, int fd)
{
	struct ivm_qmp *qmp = NULL;
	struct ivm_error *err;

	fake_start(fake);
	/* Long enough for a loaded machine to schedule the fake. */
	err = ivm_qmp_connect_fd(fd, "fake", FAKE_GREETS_WITHIN_MS, &qmp);
	cr_assert_null(err, "connect: %s", ivm_error_string(err));
	return qmp;
}

static void finish(struct fake_qemu *fake, struct ivm_qmp *qmp)
{
	ivm_qmp_destroy(qmp);
	fake_join(fake);
	cr_expect_eq(fake->unexpected, 0, "%d commands not in the transcript",
		     fake->unexpected);
}

static int events_seen;

static void count_event(void *arg, const struct ivm_qmp_event *event)
{
	(void)arg;
	(void)event;
	events_seen++;
}

Test(qmp, session_replay)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct json_object *ret = NULL, *v;
	struct ivm_qmp_event *event;
	struct ivm_error *err;
	enum ivm_qmp_lifecycle state;
	int major, minor, micro, fd;
	char *text = NULL;

	fake_init(&fake, "session.json", &fd);
	qmp = connect_fake(&fake, fd);
	ivm_qmp_qemu_version(qmp, &major, &minor, &micro);
	cr_expect(major == 7 && minor == 2 && micro == 22);
	cr_expect_eq(ivm_qmp_peer_pid(qmp), getpid());
	cr_expect_eq(ivm_qmp_lifecycle_cached(qmp), IVM_QMP_UNKNOWN);
	ivm_qmp_set_event_callback(qmp, count_event, NULL);
	events_seen = 0;

	err = ivm_qmp_execute(qmp, "query-version", NULL, &ret);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert(json_object_object_get_ex(ret, "package", &v));
	cr_expect_str_eq(json_object_get_string(v),
			 "Debian 1:7.2+dfsg-7+deb12u18+b3");
	json_object_put(ret);

	err = ivm_qmp_query_status(qmp, &state);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(state, IVM_QMP_RUNNING);

	/* A QMP error reply carries its class. */
	err = ivm_qmp_execute(qmp, "no-such-command", NULL, &ret);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_QMP);
	cr_expect_str_eq(err->qmp_class, "CommandNotFound");
	cr_expect(strstr(ivm_error_string(err), "has not been found"));
	cr_expect_null(ret);
	ivm_error_destroy(err);

	err = ivm_qmp_hmp_cpu(qmp, 7, "info registers", &text);
	cr_assert_not_null(err);
	cr_expect_str_eq(err->qmp_class, "GenericError");
	ivm_error_destroy(err);

	/* HMP failures are text; gpa2hva's become NOT_FOUND when parsed. */
	err = ivm_qmp_hmp(qmp, "gpa2hva 0xb0000000", &text);
	cr_assert_null(err, "%s", ivm_error_string(err));
	uint64_t hva;
	err = ivm_qemu_parse_gpa2hva(text, 0xb0000000, NULL, &hva);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	cr_expect(strstr(ivm_error_string(err), "is not RAM"));
	ivm_error_destroy(err);
	free(text);

	/* stop: the STOP event arrives before the reply, and is queued. */
	err = ivm_qmp_stop(qmp);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(ivm_qmp_lifecycle(qmp), IVM_QMP_PAUSED);
	err = ivm_qmp_query_status(qmp, &state);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(state, IVM_QMP_PAUSED);
	err = ivm_qmp_cont(qmp);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(ivm_qmp_lifecycle(qmp), IVM_QMP_RUNNING);

	err = ivm_qmp_next_event(qmp, &event);
	cr_assert_null(err);
	cr_assert_not_null(event);
	cr_expect_str_eq(event->name, "STOP");
	cr_expect_eq(event->seconds, 1795317530);
	cr_expect_eq(event->microseconds, 535980);
	ivm_qmp_event_destroy(event);
	err = ivm_qmp_next_event(qmp, &event);
	cr_assert_null(err);
	cr_assert_not_null(event);
	cr_expect_str_eq(event->name, "RESUME");
	ivm_qmp_event_destroy(event);
	err = ivm_qmp_next_event(qmp, &event);
	cr_assert_null(err);
	cr_expect_null(event);
	cr_expect_eq(events_seen, 2);
	cr_expect_eq(ivm_qmp_events_lost(qmp), 0);
	finish(&fake, qmp);
}

Test(qmp, discovery_replay)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_qemu_vcpus *vcpus = NULL;
	struct ivm_qemu_ram *ram = NULL;
	struct ivm_qemu_registers *regs = NULL;
	struct ivm_qemu_cpu_regs one;
	struct ivm_error *err;
	pid_t pid;
	int fd;

	fake_init(&fake, "session.json", &fd);
	qmp = connect_fake(&fake, fd);

	err = ivm_qemu_vcpus(qmp, &vcpus);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(vcpus->nr, 2);
	cr_expect(vcpus->vcpu[0].index == 0 && vcpus->vcpu[0].tid == 6239);
	cr_expect(vcpus->vcpu[1].index == 1 && vcpus->vcpu[1].tid == 6240);

	/*
	 * The socketpair's peer is this test process, which has no thread
	 * 6239: the pid check must refuse it rather than trust the peer.
	 */
	err = ivm_qemu_pid(qmp, vcpus, NULL, &pid);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "is not a thread of pid"));
	ivm_error_destroy(err);

	err = ivm_qemu_registers_all(qmp, &regs);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(regs->nr, 2);
	cr_expect(regs->cpu[0].halted && regs->cpu[1].halted);
	cr_expect_eq(regs->cpu[0].regs.rip, 0xffffffffa2617a0bull);
	cr_expect_eq(regs->cpu[1].regs.gs_base, 0xffff8a4e8f900000ull);
	free(regs);

	err = ivm_qemu_registers(qmp, 1, &one);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(one.cpu_index, 1);
	cr_expect_eq(one.regs.rcx, 0xffff8a4e8f923688ull);
	cr_expect_eq(one.regs.cr3, 0x2908000);

	err = ivm_qemu_ram_regions(qmp, &ram);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(ram->nr, 5);
	cr_expect(ram->region[0].gpa == 0 && ram->region[0].size == 0xa0000 &&
		  ram->region[0].hva == 0x7f8a77e00000ull);
	cr_expect(ram->region[1].gpa == 0xcb000 &&
		  ram->region[1].size == 0x3000 &&
		  ram->region[1].hva == 0x7f8a77ecb000ull);
	cr_expect(ram->region[2].gpa == 0xe8000 &&
		  ram->region[2].size == 0x8000);
	cr_expect(ram->region[3].gpa == 0x100000 &&
		  ram->region[3].size == 0xff00000 &&
		  ram->region[3].hva == 0x7f8a77f00000ull);
	cr_expect(ram->region[4].gpa == 0xfd000000 &&
		  ram->region[4].size == 0x1000000 &&
		  ram->region[4].hva == 0x7f8a76c00000ull);
	free(ram);
	free(vcpus);
	finish(&fake, qmp);
}

static void make_dirs(const char *root, int tid)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%d", root, (int)getpid());
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%d/task", root, (int)getpid());
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%d/task/%d", root, (int)getpid(), tid);
	cr_assert(mkdir(path, 0700) == 0, "%s", path);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char proc_root[] = "/tmp/ivm-e-proc-XXXXXX";

static void remove_proc_root(void)
{
	IVM_TMP_REMOVE_TREE(proc_root);
}

Test(qmp, pid_from_proc, .fini = remove_proc_root)
{
	char *root = proc_root, path[512];
	struct ivm_qemu_vcpus *vcpus;
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	pid_t pid = 0;
	FILE *f;
	int fd;

	/* A /proc look-alike where our pid owns "CPU n/TCG" threads. */
	cr_assert(mkdtemp(root));
	vcpus = malloc(sizeof(*vcpus) + 2 * sizeof(vcpus->vcpu[0]));
	vcpus->nr = 2;
	for (int i = 0; i < 2; i++) {
		vcpus->vcpu[i].index = i;
		vcpus->vcpu[i].tid = 6239 + i;
		make_dirs(root, 6239 + i);
		snprintf(path, sizeof(path), "%s/%d/task/%d/comm", root,
			 (int)getpid(), 6239 + i);
		f = fopen(path, "w");
		cr_assert(f, "%s", path);
		fprintf(f, "CPU %d/TCG\n", i);
		fclose(f);
	}
	fake_init(&fake, "session.json", &fd);
	qmp = connect_fake(&fake, fd);
	err = ivm_qemu_pid(qmp, vcpus, root, &pid);
	cr_expect_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(pid, getpid());
	ivm_error_destroy(err);

	/* KVM's vCPU threads, as libvirt's debug-threads names them. */
	snprintf(path, sizeof(path), "%s/%d/task/6239/comm", root,
		 (int)getpid());
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fprintf(f, "CPU 0/KVM\n");
	fclose(f);
	err = ivm_qemu_pid(qmp, vcpus, root, &pid);
	cr_expect_null(err, "%s", ivm_error_string(err));
	ivm_error_destroy(err);

	/*
	 * Plain QEMU without debug-threads: every thread has the process's
	 * name (as recorded from qemu-system-x86_64 -accel kvm here), and
	 * the executable says it is QEMU.
	 */
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fprintf(f, "qemu-system-x86\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/%d/exe", root, (int)getpid());
	cr_assert_eq(symlink("/usr/bin/qemu-system-x86_64", path), 0, "%s", path);
	err = ivm_qemu_pid(qmp, vcpus, root, &pid);
	cr_expect_null(err, "%s", ivm_error_string(err));
	ivm_error_destroy(err);
	cr_assert_eq(unlink(path), 0);

	/* Without QEMU's thread names nor a qemu executable: refused. */
	snprintf(path, sizeof(path), "%s/%d/task/6239/comm", root,
		 (int)getpid());
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fprintf(f, "bash\n");
	fclose(f);
	err = ivm_qemu_pid(qmp, vcpus, root, &pid);
	cr_assert_not_null(err);
	cr_expect(strstr(ivm_error_string(err), "does not look like qemu"));
	ivm_error_destroy(err);

	free(vcpus);
	finish(&fake, qmp);
}

Test(qmp, reset_shutdown_eof)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_qmp_event *event;
	struct ivm_error *err;
	int fd, n = 0;

	fake_init(&fake, "reset-quit.json", &fd);
	qmp = connect_fake(&fake, fd);
	err = ivm_qmp_execute(qmp, "system_reset", NULL, NULL);
	cr_assert_null(err, "%s", ivm_error_string(err));
	err = ivm_qmp_execute(qmp, "quit", NULL, NULL);
	cr_assert_null(err, "%s", ivm_error_string(err));
	/* All three RESETs (two sent after the reply) were read by now. */
	cr_expect_eq(ivm_qmp_reset_count(qmp), 3);
	cr_expect_eq(ivm_qmp_lifecycle_cached(qmp), IVM_QMP_SHUTDOWN);

	/*
	 * The monitor closes after quit (the fake closes right after the
	 * reply; give it time, as long as a loaded machine needs): GONE, but
	 * queued events come first.
	 */
	for (int i = 0; i < 3000 && ivm_qmp_lifecycle(qmp) != IVM_QMP_GONE; i++)
		usleep(10000);
	cr_expect_eq(ivm_qmp_lifecycle(qmp), IVM_QMP_GONE);
	for (;;) {
		err = ivm_qmp_next_event(qmp, &event);
		if (err)
			break;
		cr_assert_not_null(event);
		n++;
		if (n == 4)
			cr_expect_str_eq(event->name, "SHUTDOWN");
		ivm_qmp_event_destroy(event);
	}
	cr_expect_eq(n, 4);
	cr_expect_eq(err->code, IVM_ERROR_GONE);
	ivm_error_destroy(err);

	err = ivm_qmp_execute(qmp, "query-status", NULL, NULL);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_GONE);
	cr_expect(strstr(ivm_error_string(err), "qemu closed the monitor"));
	ivm_error_destroy(err);
	finish(&fake, qmp);
}

Test(qmp, timeout_then_stale_reply_dropped)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct json_object *ret = NULL, *v;
	struct ivm_error *err;
	int64_t t0, dt;
	int fd;

	/* The fake holds its reply until the client has timed out, so the
	 * timeout fires whatever the load; only its lower bound is timing. */
	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_HOLD;
	fake.fault_cmd = "query-status";
	qmp = connect_fake(&fake, fd);
	ivm_qmp_set_timeout(qmp, 150);
	t0 = mono_ms();
	err = ivm_qmp_execute(qmp, "query-status", NULL, &ret);
	dt = mono_ms() - t0;
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_TIMEOUT);
	cr_expect(dt >= 140, "timed out after %lld ms", (long long)dt);
	ivm_error_destroy(err);
	fake_release(&fake);

	/* The late status reply carries the old id and must be skipped. */
	ivm_qmp_set_timeout(qmp, IVM_QMP_DEFAULT_TIMEOUT_MS);
	err = ivm_qmp_execute(qmp, "query-version", NULL, &ret);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect(json_object_object_get_ex(ret, "qemu", &v));
	json_object_put(ret);
	finish(&fake, qmp);
}

Test(qmp, oversized_reply_refused_link_survives)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	enum ivm_qmp_lifecycle state;
	char *text = NULL;
	int fd;

	fake_init(&fake, "session.json", &fd);
	qmp = connect_fake(&fake, fd);
	/* The recorded `info mtree -f` reply is about 15 KiB. */
	ivm_qmp_set_max_reply(qmp, 4096);
	err = ivm_qmp_hmp(qmp, "info mtree -f", &text);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "larger than 4096 bytes"));
	ivm_error_destroy(err);
	err = ivm_qmp_query_status(qmp, &state);
	cr_expect_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(state, IVM_QMP_RUNNING);
	ivm_error_destroy(err);
	finish(&fake, qmp);
}

Test(qmp, endless_line_discarded)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	enum ivm_qmp_lifecycle state;
	size_t n = 300000;
	char *raw = malloc(n);
	int fd;

	/* 300 KB without a newline: dropped as it streams in. */
	memset(raw, 'x', n - 2);
	memcpy(raw + n - 2, "\r\n", 2);
	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_RAW;
	fake.fault_cmd = "query-version";
	fake.raw = raw;
	fake.raw_len = n;
	qmp = connect_fake(&fake, fd);
	ivm_qmp_set_max_reply(qmp, 8192);
	err = ivm_qmp_execute(qmp, "query-version", NULL, NULL);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_qmp_query_status(qmp, &state);
	cr_expect_null(err, "%s", ivm_error_string(err));
	ivm_error_destroy(err);
	finish(&fake, qmp);
	free(raw);
}

Test(qmp, garbage_json_reply)
{
	static const char raw[] = "{\"return\": {\"status\": \"running\",\r\n";
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	int fd;

	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_RAW;
	fake.fault_cmd = "query-status";
	fake.raw = raw;
	fake.raw_len = sizeof(raw) - 1;
	qmp = connect_fake(&fake, fd);
	err = ivm_qmp_execute(qmp, "query-status", NULL, NULL);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "invalid JSON"));
	ivm_error_destroy(err);
	/* One bad line does not poison the connection. */
	err = ivm_qmp_execute(qmp, "query-version", NULL, NULL);
	cr_expect_null(err, "%s", ivm_error_string(err));
	ivm_error_destroy(err);
	finish(&fake, qmp);
}

Test(qmp, peer_closes_mid_reply)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	char *text = NULL;
	int fd;

	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_CLOSE_MID;
	fake.fault_cmd = "info registers -a";
	qmp = connect_fake(&fake, fd);
	err = ivm_qmp_hmp(qmp, "info registers -a", &text);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_GONE);
	cr_expect(strstr(ivm_error_string(err), "in the middle of a message"));
	ivm_error_destroy(err);
	cr_expect_eq(ivm_qmp_lifecycle(qmp), IVM_QMP_GONE);
	finish(&fake, qmp);
}

static struct ivm_error *connect_bad_peer(const char *greeting, bool silent,
					  int timeout_ms)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp = NULL;
	struct ivm_error *err;
	int fd;

	fake_init(&fake, "session.json", &fd);
	fake.greeting = greeting;
	fake.no_greeting = silent;
	fake_start(&fake);
	err = ivm_qmp_connect_fd(fd, "/run/not-qemu.sock", timeout_ms, &qmp);
	cr_expect_null(qmp);
	fake_join(&fake);
	return err;
}

Test(qmp, not_qmp_peers)
{
	static const char *const banners[] = {
		"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
		"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n",
		"{\"hello\": \"world\"}\r\n",
		"[1, 2, 3]\r\n",
		"{\"QMP\": 1}\r\n",
		"\x01\x02\x03\xff\xfe\n",
	};
	struct ivm_error *err;
	int64_t t0, dt;
	size_t i;

	for (i = 0; i < sizeof(banners) / sizeof(*banners); i++) {
		err = connect_bad_peer(banners[i], false,
				       FAKE_GREETS_WITHIN_MS);
		cr_assert_not_null(err, "banner %zu accepted", i);
		cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
		cr_expect(strstr(ivm_error_string(err),
				 "/run/not-qemu.sock: not a QMP socket"),
			  "banner %zu: %s", i, ivm_error_string(err));
		ivm_error_destroy(err);
	}

	/* Silence: refused after the greeting timeout. */
	t0 = mono_ms();
	err = connect_bad_peer(NULL, true, 200);
	dt = mono_ms() - t0;
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "no greeting"), "%s",
		  ivm_error_string(err));
	cr_expect(dt >= 190, "refused after %lld ms", (long long)dt);
	ivm_error_destroy(err);
}

Test(qmp, closed_before_greeting)
{
	struct ivm_qmp *qmp = NULL;
	struct ivm_error *err;
	int sv[2];

	cr_assert(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	close(sv[0]);
	err = ivm_qmp_connect_fd(sv[1], "gone.sock", 1000, &qmp);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "closed before any greeting"));
	ivm_error_destroy(err);
}

Test(qmp, connect_socket_errors)
{
	struct ivm_qmp *qmp = NULL;
	struct ivm_error *err;
	char long_path[200];

	err = ivm_qmp_connect_socket("/nonexistent/ivm-e-none.sock", &qmp);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_OS);
	cr_expect(strstr(ivm_error_string(err), "/nonexistent/ivm-e-none.sock"));
	ivm_error_destroy(err);
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	err = ivm_qmp_connect_socket(long_path, &qmp);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
}

Test(qmp, event_queue_bounded)
{
	static const char stop[] = "{\"timestamp\": {\"seconds\": 1795317530, \"microseconds\": 535980}, \"event\": \"STOP\"}\r\n";
	static const char reply[] = "{\"return\": {}}\r\n";
	size_t n = IVM_QMP_MAX_EVENTS + 10, i, len = 0;
	char *raw = malloc(n * sizeof(stop) + sizeof(reply));
	struct ivm_qmp_event *event;
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	int fd;

	for (i = 0; i < n; i++) {
		memcpy(raw + len, stop, sizeof(stop) - 1);
		len += sizeof(stop) - 1;
	}
	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_RAW;
	fake.fault_cmd = "query-version";
	fake.raw = raw;
	fake.raw_len = len;
	fake.raw_then_reply = true;
	qmp = connect_fake(&fake, fd);
	/* The events come before the reply: all read while waiting for it,
	 * the queue's overflow counted. */
	err = ivm_qmp_execute(qmp, "query-version", NULL, NULL);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(ivm_qmp_events_lost(qmp), 10);
	for (i = 0; ; i++) {
		err = ivm_qmp_next_event(qmp, &event);
		cr_assert_null(err);
		if (!event)
			break;
		ivm_qmp_event_destroy(event);
	}
	cr_expect_eq(i, IVM_QMP_MAX_EVENTS);
	cr_expect_eq(ivm_qmp_lifecycle(qmp), IVM_QMP_PAUSED);
	finish(&fake, qmp);
	free(raw);
}

Test(qmp, wait_event_times_out)
{
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_qmp_event *event = (void *)1;
	struct ivm_error *err;
	int64_t t0;
	int fd;

	fake_init(&fake, "session.json", &fd);
	qmp = connect_fake(&fake, fd);
	t0 = mono_ms();
	err = ivm_qmp_wait_event(qmp, 100, &event);
	cr_expect_null(err);
	cr_expect_null(event);
	cr_expect(mono_ms() - t0 >= 95);
	finish(&fake, qmp);
}

Test(qmp, idless_error_and_odd_replies)
{
	/* What QEMU answers to a line it cannot parse: an error without id. */
	static const char idless[] = "{\"error\": {\"class\": \"GenericError\", \"desc\": \"JSON parse error, invalid keyword 'x'\"}}\r\n";
	/* A reply for another id, then a number where HMP text belongs. */
	static const char odd[] = "{\"return\": \"stale\", \"id\": 999}\r\n{\"return\": 42, \"id\": 3}\r\n";
	struct fake_qemu fake;
	struct ivm_qmp *qmp;
	struct ivm_error *err;
	char *text = NULL;
	int fd;

	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_RAW;
	fake.fault_cmd = "query-version";
	fake.raw = idless;
	fake.raw_len = sizeof(idless) - 1;
	qmp = connect_fake(&fake, fd);
	err = ivm_qmp_execute(qmp, "query-version", NULL, NULL);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_QMP);
	cr_expect(strstr(ivm_error_string(err), "JSON parse error"));
	ivm_error_destroy(err);
	finish(&fake, qmp);

	fake_init(&fake, "session.json", &fd);
	fake.fault = FAKE_FAULT_RAW;
	fake.fault_cmd = "info registers -a";
	fake.raw = odd;
	fake.raw_len = sizeof(odd) - 1;
	qmp = connect_fake(&fake, fd);
	/* ids: 1 capabilities, 2 query-status, 3 this HMP command */
	err = ivm_qmp_execute(qmp, "query-status", NULL, NULL);
	cr_assert_null(err, "%s", ivm_error_string(err));
	err = ivm_qmp_hmp(qmp, "info registers -a", &text);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	cr_expect(strstr(ivm_error_string(err), "did not return text"));
	cr_expect_null(text);
	ivm_error_destroy(err);
	finish(&fake, qmp);
}
