// SPDX-License-Identifier: MIT
/*
 * The host client's pipelined pairs (HOLD+PIN, UNPIN+RELEASE) against a
 * scripted fake helper on a unix socket: both requests go out before any
 * reply, refusals come back per request, and a helper that goes quiet,
 * hangs up or answers out of order gives an error, never a hang.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "access/helper_client.h"
#include "proto.h"

enum fake_script {
	FAKE_OK,		/* answer every request */
	FAKE_REFUSE_FIRST,	/* ERROR EBUSY to the first, answer the second */
	FAKE_REFUSE_SECOND,	/* answer the first, ERROR ESRCH to the second */
	FAKE_REFUSE_ALL,	/* ERROR EACCES to every request */
	FAKE_SILENT,		/* read, never answer */
	FAKE_HANG_UP,		/* read, close */
	FAKE_SWAPPED,		/* answer the second before the first */
	FAKE_SERIAL,		/* answer each request as it comes, as a
				 * helper speaking up to `speaks` would */
};

struct fake {
	char dir[64], path[128];
	int listen_fd;
	pthread_t thread;
	enum fake_script script;
	int nexpect;		/* frames to read before answering */
	uint16_t speaks;	/* FAKE_SERIAL: its protocol version */
	/* What it saw. */
	uint16_t types[4];
	uint16_t versions[4];
	uint32_t ids[4];
	uint8_t payload[4][64];
	size_t lens[4];
	int nseen;
};

static struct idlevm_decoder dec;

static void reply(int fd, const struct fake *f, int i, int errnum)
{
	static uint8_t buf[IVM_PROTO_MAX_FRAME];
	struct idlevm_writer w;
	size_t len;

	if (errnum) {
		idlevm_frame_begin(&w, buf, sizeof(buf), IVM_MSG_ERROR,
				   IVM_PROTO_F_REPLY, f->ids[i]);
		idlevm_encode_error(&w, errnum, "refused by the fake");
	} else {
		idlevm_frame_begin(&w, buf, sizeof(buf), f->types[i],
				   IVM_PROTO_F_REPLY, f->ids[i]);
		if (f->types[i] == IVM_MSG_HOLD) {
			struct idlevm_hold_rep r = { .lease_ms = 77 };

			idlevm_encode_hold_rep(&w, &r);
		} else if (f->types[i] == IVM_MSG_HELLO) {
			struct idlevm_hello_rep r = {
				.version = f->speaks, .ncpus = 2, .pid = 99,
				.caps = IVM_CAP_PIN | IVM_CAP_HOLD |
					(f->speaks >= 2 ? IVM_CAP_HOLD_PIN |
					 IVM_CAP_STATS : 0),
			};

			idlevm_encode_hello_rep(&w, &r);
		} else if (f->types[i] == IVM_MSG_HOLD_PIN) {
			struct idlevm_hold_pin_rep r = {
				.lease_us = 500, .flags = IVM_HOLD_PIN_F_PINNED,
				.prev_cpu = 0, .holder_tid = 123,
			};

			idlevm_encode_hold_pin_rep(&w, &r);
		} else if (f->types[i] == IVM_MSG_STATS) {
			struct idlevm_stats_rep r = { .count = 2 };

			r.stat[0].name = (struct idlevm_str){ "holds", 5 };
			r.stat[0].value = 3;
			r.stat[1].name = (struct idlevm_str){ "hold_ns", 7 };
			r.stat[1].value = 4500000;
			idlevm_encode_stats_rep(&w, &r);
		} else if (f->types[i] == IVM_MSG_READAHEAD) {
			struct idlevm_readahead_rep r = { .bytes = 8192 };

			idlevm_encode_readahead_rep(&w, &r);
		} else if (f->types[i] == IVM_MSG_PIN) {
			struct idlevm_pin_rep r = { .lease_ms = 66,
						    .prev_cpu = 1 };

			idlevm_encode_pin_rep(&w, &r);
		} else {
			struct idlevm_lease_rep r = {
				.held_ns = f->types[i] == IVM_MSG_UNPIN ? 1000 : 2000,
				.flags = f->types[i] == IVM_MSG_RELEASE ?
					 IVM_LEASE_F_EXPIRED : 0,
			};

			idlevm_encode_lease_rep(&w, &r);
		}
	}
	len = idlevm_frame_finish(&w);
	cr_assert(len);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->listen_fd, NULL, NULL);
	struct idlevm_frame fr;

	if (fd < 0)
		return NULL;
	idlevm_decoder_init(&dec);
	/* Read every expected request before answering any: the client
	 * must have sent them all without waiting (FAKE_SERIAL answers
	 * each as it comes). */
	while (f->nseen < f->nexpect) {
		ssize_t n = read(fd, idlevm_decoder_tail(&dec),
				 idlevm_decoder_space(&dec));

		if (n <= 0)
			break;
		idlevm_decoder_commit(&dec, n);
		while (f->nseen < f->nexpect &&
		       idlevm_decoder_next(&dec, &fr) == IVM_PROTO_EV_FRAME) {
			f->types[f->nseen] = fr.hdr.type;
			f->versions[f->nseen] = fr.hdr.version;
			f->ids[f->nseen] = fr.hdr.id;
			f->lens[f->nseen] = fr.hdr.length < 64 ? fr.hdr.length : 64;
			memcpy(f->payload[f->nseen], fr.payload,
			       f->lens[f->nseen]);
			f->nseen++;
			if (f->script == FAKE_SERIAL)
				reply(fd, f, f->nseen - 1,
				      f->types[f->nseen - 1] == IVM_MSG_HOLD_PIN &&
				      f->speaks < 2 ? EOPNOTSUPP : 0);
		}
	}
	switch (f->script) {
	case FAKE_SERIAL:
		break;
	case FAKE_OK:
		for (int i = 0; i < f->nseen; i++)
			reply(fd, f, i, 0);
		break;
	case FAKE_REFUSE_FIRST:
		reply(fd, f, 0, EBUSY);
		reply(fd, f, 1, 0);
		break;
	case FAKE_REFUSE_SECOND:
		reply(fd, f, 0, 0);
		reply(fd, f, 1, ESRCH);
		break;
	case FAKE_REFUSE_ALL:
		for (int i = 0; i < f->nseen; i++)
			reply(fd, f, i, EACCES);
		break;
	case FAKE_SWAPPED:
		reply(fd, f, 1, 0);
		reply(fd, f, 0, 0);
		break;
	case FAKE_SILENT: {
		/* Silent until the client gives up and closes: its timeout
		 * fires whatever the machine's load, never a late reply. */
		char c;

		while (read(fd, &c, 1) > 0)
			;
		break;
	}
	case FAKE_HANG_UP:
		break;
	}
	usleep(50000);
	close(fd);
	return NULL;
}

/*
 * The running fake's directory, for the suite's fini: a failed assertion
 * ends the test before its fake_stop.
 */
static char fake_dir[64];

static void fake_remove(void)
{
	char path[128];

	if (!fake_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/helper.sock", fake_dir);
	unlink(path);
	rmdir(fake_dir);
	fake_dir[0] = '\0';
}

TestSuite(helper_client, .fini = fake_remove);

static void fake_start(struct fake *f, enum fake_script script, int nexpect)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(f, 0, sizeof(*f));
	f->script = script;
	f->nexpect = nexpect;
	snprintf(f->dir, sizeof(f->dir), "/tmp/ivm-test-helper.XXXXXX");
	cr_assert(mkdtemp(f->dir));
	strcpy(fake_dir, f->dir);
	snprintf(f->path, sizeof(f->path), "%s/helper.sock", f->dir);
	cr_assert_lt(strlen(f->path), sizeof(sun.sun_path));
	memcpy(sun.sun_path, f->path, strlen(f->path) + 1);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_geq(f->listen_fd, 0);
	cr_assert_eq(bind(f->listen_fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(f->listen_fd, 1), 0);
	cr_assert_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->listen_fd);
	fake_remove();
}

/*
 * A fake that answers is given all the time a loaded machine may need to
 * schedule it (the timeout only guards against a hang); the one that stays
 * silent gets a short one, which must then fire.
 */
#define FAKE_ANSWERS_WITHIN_MS	30000
#define FAKE_SILENT_TIMEOUT_MS	150

static struct ivm_helper *connect_fake(const struct fake *f)
{
	struct ivm_helper *h;

	cr_assert_null(ivm_helper_connect_path(f->path, &h));
	ivm_helper_set_timeout(h, f->script == FAKE_SILENT ?
			       FAKE_SILENT_TIMEOUT_MS : FAKE_ANSWERS_WITHIN_MS);
	return h;
}

Test(helper_client, hold_pin_goes_out_as_one_pipelined_pair)
{
	struct ivm_helper_hold_pin hp;
	struct idlevm_hold_req hreq;
	struct idlevm_pin_req preq;
	struct ivm_helper *h;
	struct fake f;

	fake_start(&f, FAKE_OK, 2);
	h = connect_fake(&f);
	cr_assert_null(ivm_helper_hold_pin(h, 1, 80, 4242, 90, &hp));
	ivm_helper_destroy(h);
	fake_stop(&f);

	cr_assert_eq(f.nseen, 2);
	cr_assert_eq(f.types[0], IVM_MSG_HOLD);
	cr_assert_eq(f.types[1], IVM_MSG_PIN);
	cr_assert(idlevm_decode_hold_req(f.payload[0], f.lens[0], &hreq));
	cr_assert(idlevm_decode_pin_req(f.payload[1], f.lens[1], &preq));
	cr_assert_eq(hreq.cpu, 1);
	cr_assert_eq(hreq.lease_ms, 80);
	cr_assert_eq(preq.tid, 4242);
	cr_assert_eq(preq.cpu, 1);
	cr_assert_eq(preq.lease_ms, 90);
	cr_assert_eq(hp.hold_errnum, 0);
	cr_assert_eq(hp.hold_lease_ms, 77);
	cr_assert_eq(hp.pin_errnum, 0);
	cr_assert_eq(hp.pin.lease_ms, 66);
	cr_assert_eq(hp.pin.prev_cpu, 1);
}

Test(helper_client, refusals_are_per_request)
{
	struct ivm_helper_hold_pin hp;
	struct ivm_helper *h;
	struct fake f;

	fake_start(&f, FAKE_REFUSE_FIRST, 2);
	h = connect_fake(&f);
	cr_assert_null(ivm_helper_hold_pin(h, 0, 0, 7, 0, &hp));
	cr_assert_eq(hp.hold_errnum, EBUSY);
	cr_assert_eq(hp.pin_errnum, 0);
	ivm_helper_destroy(h);
	fake_stop(&f);

	fake_start(&f, FAKE_REFUSE_SECOND, 2);
	h = connect_fake(&f);
	cr_assert_null(ivm_helper_hold_pin(h, 0, 0, 7, 0, &hp));
	cr_assert_eq(hp.hold_errnum, 0);
	cr_assert_eq(hp.pin_errnum, ESRCH);
	ivm_helper_destroy(h);
	fake_stop(&f);
}

Test(helper_client, unpin_release_pair_and_release_only)
{
	struct ivm_helper_unpin_release rel;
	struct ivm_helper *h;
	struct fake f;

	fake_start(&f, FAKE_OK, 2);
	h = connect_fake(&f);
	cr_assert_null(ivm_helper_unpin_release(h, 9, 1, &rel));
	ivm_helper_destroy(h);
	fake_stop(&f);
	cr_assert_eq(f.types[0], IVM_MSG_UNPIN);
	cr_assert_eq(f.types[1], IVM_MSG_RELEASE);
	cr_assert_eq(rel.unpin_errnum, 0);
	cr_assert_eq(rel.pinned_ns, 1000);
	cr_assert_eq(rel.release_errnum, 0);
	cr_assert_eq(rel.held_ns, 2000);
	cr_assert(rel.hold_expired);

	/* tid < 0: nothing was pinned, RELEASE alone goes out. */
	fake_start(&f, FAKE_OK, 1);
	h = connect_fake(&f);
	cr_assert_null(ivm_helper_unpin_release(h, -1, 1, &rel));
	ivm_helper_destroy(h);
	fake_stop(&f);
	cr_assert_eq(f.nseen, 1);
	cr_assert_eq(f.types[0], IVM_MSG_RELEASE);
}

Test(helper_client, silent_hung_up_or_reordering_helper_is_an_error)
{
	struct ivm_helper_hold_pin hp;
	struct ivm_error *err;
	struct ivm_helper *h;
	struct fake f;

	fake_start(&f, FAKE_SILENT, 2);
	h = connect_fake(&f);
	err = ivm_helper_hold_pin(h, 0, 0, 7, 0, &hp);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_TIMEOUT);
	ivm_error_destroy(err);
	ivm_helper_destroy(h);
	fake_stop(&f);

	fake_start(&f, FAKE_HANG_UP, 2);
	h = connect_fake(&f);
	err = ivm_helper_hold_pin(h, 0, 0, 7, 0, &hp);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_GONE);
	ivm_error_destroy(err);
	ivm_helper_destroy(h);
	fake_stop(&f);

	/* Replies are in request order from a real helper; swapped ones
	 * leave the first reply's wait to drop the second as stale. */
	fake_start(&f, FAKE_SWAPPED, 2);
	h = connect_fake(&f);
	err = ivm_helper_hold_pin(h, 0, 0, 7, 0, &hp);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	cr_assert_geq(ivm_helper_stale_replies(h), 1);
	ivm_helper_destroy(h);
	fake_stop(&f);
}

Test(helper_client, hello_settles_the_version_then_hold_pin_and_stats)
{
	struct idlevm_hold_pin_req req;
	struct ivm_helper_hello hello;
	struct ivm_helper_stats st;
	struct ivm_helper_held held;
	struct ivm_helper *h;
	struct fake f;
	uint64_t v;

	fake_start(&f, FAKE_SERIAL, 3);
	f.speaks = 2;
	h = connect_fake(&f);
	cr_assert_eq(ivm_helper_protocol(h), 1);
	cr_assert_null(ivm_helper_hello(h, &hello));
	cr_assert_eq(hello.protocol, 2);
	cr_assert_eq(ivm_helper_protocol(h), 2);
	cr_assert_null(ivm_helper_hold_pin_lease(h, 1, 4242, 500, &held));
	cr_assert(held.pinned);
	cr_assert_eq(held.lease_us, 500);
	cr_assert_eq(held.holder_tid, 123);
	cr_assert_null(ivm_helper_stats(h, &st));
	cr_assert_eq(st.nr, 2);
	cr_assert(ivm_helper_stats_get(&st, "hold_ns", &v));
	cr_assert_eq(v, 4500000);
	cr_assert_not(ivm_helper_stats_get(&st, "pins", &v));
	ivm_helper_destroy(h);
	fake_stop(&f);
	/* HELLO in version 1, whatever the client speaks; then 2. */
	cr_assert_eq(f.types[0], IVM_MSG_HELLO);
	cr_assert_eq(f.versions[0], 1);
	cr_assert_eq(f.types[1], IVM_MSG_HOLD_PIN);
	cr_assert_eq(f.versions[1], 2);
	cr_assert(idlevm_decode_hold_pin_req(f.payload[1], f.lens[1], &req));
	cr_assert_eq(req.cpu, 1);
	cr_assert_eq(req.tid, 4242);
	cr_assert_eq(req.lease_us, 500);
	cr_assert_eq(f.types[2], IVM_MSG_STATS);
}

Test(helper_client, an_old_helper_keeps_version_1_and_gets_no_hold_pin)
{
	struct ivm_helper_hello hello;
	struct ivm_helper_held held;
	struct ivm_helper_stats st;
	struct ivm_error *err;
	struct ivm_helper *h;
	struct fake f;

	fake_start(&f, FAKE_SERIAL, 1);
	f.speaks = 1;
	h = connect_fake(&f);
	cr_assert_null(ivm_helper_hello(h, &hello));
	cr_assert_eq(hello.protocol, 1);
	cr_assert_eq(ivm_helper_protocol(h), 1);
	/* Never sent: the helper would not know it. */
	err = ivm_helper_hold_pin_lease(h, 1, 4242, 500, &held);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_helper_stats(h, &st);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	ivm_helper_destroy(h);
	fake_stop(&f);
	cr_assert_eq(f.nseen, 1);
}

/*
 * A caller's wait (several guests in one thread): every reply is waited
 * for through it, and what it reports (readable, or the deadline) is what
 * the request sees.
 */
struct counted_wait {
	int calls;
	bool say_timeout;
};

static int counted_wait(void *ctx, int fd, uint64_t deadline_ns)
{
	struct counted_wait *cw = ctx;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	cw->calls++;
	if (cw->say_timeout)
		return 0;
	return poll(&pfd, 1, 2000) > 0 ? 1 : 0;
}

Test(helper_client, replies_wait_through_the_callers_wait)
{
	struct counted_wait cw = { 0 };
	struct ivm_helper_hold_pin hp;
	struct ivm_helper *h;
	struct ivm_error *err;
	struct fake f;

	fake_start(&f, FAKE_OK, 2);
	h = connect_fake(&f);
	ivm_helper_set_wait(h, counted_wait, &cw);
	cr_assert_null(ivm_helper_hold_pin(h, 1, 80, 4242, 90, &hp));
	cr_assert_geq(cw.calls, 1, "the reply was not waited for through it");
	cr_assert_eq(hp.pin_errnum, 0);
	ivm_helper_destroy(h);
	fake_stop(&f);

	fake_start(&f, FAKE_SILENT, 2);
	h = connect_fake(&f);
	cw = (struct counted_wait){ .say_timeout = true };
	ivm_helper_set_wait(h, counted_wait, &cw);
	err = ivm_helper_hold_pin(h, 1, 80, 4242, 90, &hp);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_TIMEOUT, "%s", ivm_error_string(err));
	ivm_error_destroy(err);
	ivm_helper_destroy(h);
	fake_stop(&f);
}

Test(helper_client, readahead_request_reply_and_refusal)
{
	struct idlevm_readahead_req req;
	struct ivm_error *err;
	struct ivm_helper *h;
	struct fake f;
	uint64_t got = 0;

	fake_start(&f, FAKE_OK, 1);
	h = connect_fake(&f);
	/* Bad requests never leave the host. */
	err = ivm_helper_readahead(h, 42, "lib/x.so", 7, 0, 4096, &got);
	cr_assert(err && err->code == IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_helper_readahead(h, 42, "/lib/x.so", 7, 0,
				   IVM_READAHEAD_MAX_LEN + 1ull, &got);
	cr_assert(err && err->code == IVM_ERROR_INVALID);
	ivm_error_destroy(err);
	err = ivm_helper_readahead(h, 42, "/usr/lib/x.so", 7, 0x1000, 0x4000,
				   &got);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_assert_eq(got, 8192);
	cr_assert_eq(f.types[0], IVM_MSG_READAHEAD);
	cr_assert(idlevm_decode_readahead_req(f.payload[0], f.lens[0], &req));
	cr_assert(req.pid == 42 && req.inode == 7 && req.offset == 0x1000 &&
		  req.length == 0x4000 && req.path.len == 13 &&
		  !memcmp(req.path.ptr, "/usr/lib/x.so", 13));
	ivm_helper_destroy(h);
	fake_stop(&f);

	/* More bytes than asked for: a helper not to be believed. */
	fake_start(&f, FAKE_OK, 1);
	h = connect_fake(&f);
	err = ivm_helper_readahead(h, 42, "/usr/lib/x.so", 7, 0, 4096, &got);
	cr_assert(err && err->code == IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	ivm_helper_destroy(h);
	fake_stop(&f);

	/* A refusal is the helper's answer, not a broken connection. */
	fake_start(&f, FAKE_REFUSE_ALL, 1);
	h = connect_fake(&f);
	err = ivm_helper_readahead(h, 42, "/usr/lib/x.so", 7, 0, 8192, &got);
	cr_assert_not_null(err);
	cr_assert(ivm_helper_error_is_answer(err));
	cr_assert_eq(err->errnum, EACCES);
	ivm_error_destroy(err);
	ivm_helper_destroy(h);
	fake_stop(&f);
}
