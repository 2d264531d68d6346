// SPDX-License-Identifier: MIT
/*
 * Host side of the helper protocol: requests with ids and deadlines, replies
 * decoded by the shared codec.  See helper_client.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "access/helper_client.h"

/* Garbage tolerated while waiting for one reply: a few frames' worth of
 * noise is survivable; a helper spewing more is broken. */
#define MAX_GARBAGE_PER_REQUEST (4 * IVM_PROTO_MAX_FRAME)

struct ivm_helper {
	int fd;
	char *path;
	int timeout_ms;
	uint16_t version;	/* of the frames we send */
	uint32_t next_id;
	uint64_t stale_replies;
	struct idlevm_decoder dec;
	uint8_t out[IVM_PROTO_MAX_FRAME];
	ivm_helper_wait_fn wait;	/* NULL: poll() */
	void *wait_ctx;
};

/* Milliseconds left until deadline, rounded up, 0 when past. */
static int ms_left(uint64_t deadline)
{
	uint64_t now = ivm_mono_ns();

	if (now >= deadline)
		return 0;
	return (int)((deadline - now + 999999) / 1000000);
}

struct ivm_error *ivm_helper_connect_path(const char *path,
					  struct ivm_helper **ret)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct ivm_helper *helper;
	int fd, err;

	if (strlen(path) >= sizeof(sun.sun_path))
		return ivm_error_create(IVM_ERROR_INVALID,
					"helper socket path too long: %s",
					path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ivm_error_os(errno, "socket");
	/* A unix connect does not block on the peer's accept: it completes
	 * or fails at once (EAGAIN only when the backlog is full). */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		err = errno;
		close(fd);
		if (err == ENOENT)
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"no helper socket at %s", path);
		if (err == ECONNREFUSED)
			return ivm_error_create(IVM_ERROR_GONE,
						"nothing listens on helper socket %s (is the guest running?)",
						path);
		return ivm_error_os(err, "connecting to helper socket %s",
				    path);
	}
	helper = calloc(1, sizeof(*helper));
	if (!helper || !(helper->path = strdup(path))) {
		free(helper);
		close(fd);
		return &ivm_enomem;
	}
	helper->fd = fd;
	helper->timeout_ms = IVM_HELPER_TIMEOUT_MS;
	/* Every helper reads version 1; HELLO says whether more. */
	helper->version = IVM_PROTO_VERSION_MIN;
	/* Ids start at a random point so replies meant for an earlier
	 * client of the same channel are unlikely to match ours. */
	helper->next_id = (uint32_t)ivm_mono_ns() ^ (uint32_t)getpid() << 16;
	idlevm_decoder_init(&helper->dec);
	*ret = helper;
	return NULL;
}

void ivm_helper_destroy(struct ivm_helper *helper)
{
	if (!helper)
		return;
	close(helper->fd);
	free(helper->path);
	free(helper);
}

void ivm_helper_set_wait(struct ivm_helper *helper, ivm_helper_wait_fn wait,
			 void *ctx)
{
	helper->wait = wait;
	helper->wait_ctx = ctx;
}

void ivm_helper_set_timeout(struct ivm_helper *helper, int timeout_ms)
{
	helper->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
}

uint64_t ivm_helper_skipped_bytes(const struct ivm_helper *helper)
{
	return helper->dec.total_skipped;
}

uint64_t ivm_helper_stale_replies(const struct ivm_helper *helper)
{
	return helper->stale_replies;
}

static struct ivm_error *timeout_error(struct ivm_helper *helper,
				       uint16_t type, uint64_t garbage)
{
	if (garbage)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"helper sent %llu bytes of garbage and no %s reply within %d ms",
					(unsigned long long)garbage,
					idlevm_msg_type_name(type),
					helper->timeout_ms);
	return ivm_error_create(IVM_ERROR_TIMEOUT,
				"helper not answering on %s: no %s reply within %d ms (helper not running in the guest, or another client holds the channel)",
				helper->path, idlevm_msg_type_name(type),
				helper->timeout_ms);
}

static struct ivm_error *send_all(struct ivm_helper *helper, size_t len,
				  uint16_t type, uint64_t deadline)
{
	size_t done = 0;

	while (done < len) {
		struct pollfd pfd = { .fd = helper->fd, .events = POLLOUT };
		ssize_t n = send(helper->fd, helper->out + done, len - done,
				 MSG_NOSIGNAL);
		int r;

		if (n > 0) {
			done += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EPIPE)
			return ivm_error_create(IVM_ERROR_GONE,
						"helper connection %s closed",
						helper->path);
		if (n < 0 && errno != EAGAIN)
			return ivm_error_os(errno, "sending to helper");
		r = poll(&pfd, 1, ms_left(deadline));
		if (r < 0 && errno != EINTR)
			return ivm_error_os(errno, "poll");
		if (r == 0)
			return timeout_error(helper, type, 0);
	}
	return NULL;
}

/*
 * The error a helper answered with.  Its text is the helper's own; printed
 * bounded and as a string the decoder checked for NULs.
 */
static struct ivm_error *helper_error(const struct idlevm_frame *fr)
{
	struct idlevm_error_msg msg;
	struct ivm_error *err;

	if (!idlevm_decode_error(fr->payload, fr->hdr.length, &msg))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"malformed error reply from helper");
	err = ivm_error_create(IVM_ERROR_OS, "helper: %.*s",
			       (int)msg.text.len, msg.text.ptr);
	if (err->needs_free)
		err->errnum = msg.errnum;
	return err;
}

/*
 * Wait until deadline for the reply to request id (of type).  *ret points
 * into the decoder and is valid until the next request or wait.
 */
static struct ivm_error *wait_reply(struct ivm_helper *helper, uint16_t type,
				    uint32_t id, uint64_t deadline,
				    struct idlevm_frame *ret)
{
	uint64_t garbage = 0;

	for (;;) {
		struct pollfd pfd = { .fd = helper->fd, .events = POLLIN };
		enum idlevm_decode_event ev;
		ssize_t n;
		int r;

		ev = idlevm_decoder_next(&helper->dec, ret);
		switch (ev) {
		case IVM_PROTO_EV_FRAME:
			if (!(ret->hdr.flags & IVM_PROTO_F_REPLY) ||
			    ret->hdr.id != id) {
				/* A late reply to a request that timed out,
				 * or a request from the guest: not ours. */
				helper->stale_replies++;
				continue;
			}
			if (ret->hdr.type == IVM_MSG_ERROR)
				return helper_error(ret);
			if (ret->hdr.type != type)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"helper answered a %s request with a %s reply",
							idlevm_msg_type_name(type),
							idlevm_msg_type_name(ret->hdr.type));
			return NULL;
		case IVM_PROTO_EV_SKIPPED:
			garbage += helper->dec.skipped;
			if (garbage > MAX_GARBAGE_PER_REQUEST)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"helper sent over %llu bytes of garbage (%s)",
							(unsigned long long)garbage,
							idlevm_skip_reason_name(helper->dec.skip_reason));
			continue;
		case IVM_PROTO_EV_BAD_VERSION:
			if (ret->hdr.id != id)
				continue;
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"helper speaks protocol version %u, idlevm speaks %u",
						ret->hdr.version,
						IVM_PROTO_VERSION);
		case IVM_PROTO_EV_NEED_MORE:
			break;
		}

		if (helper->wait)
			r = helper->wait(helper->wait_ctx, helper->fd, deadline);
		else
			r = poll(&pfd, 1, ms_left(deadline));
		if (r < 0 && errno != EINTR)
			return ivm_error_os(errno, "poll");
		if (r == 0) {
			size_t partial = idlevm_decoder_pending(&helper->dec);

			/* A helper killed mid-reply left half a frame: drop
			 * it, or it would swallow the next helper's replies
			 * (see idlevm_decoder_abandon). */
			if (partial)
				idlevm_decoder_abandon(&helper->dec);
			return timeout_error(helper, type, garbage + partial);
		}
		if (r < 0)
			continue;
		n = read(helper->fd, idlevm_decoder_tail(&helper->dec),
			 idlevm_decoder_space(&helper->dec));
		if (n == 0)
			return ivm_error_create(IVM_ERROR_GONE,
						"helper connection %s closed by QEMU (guest gone?)",
						helper->path);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return ivm_error_os(errno, "reading from helper");
		if (n > 0)
			idlevm_decoder_commit(&helper->dec, n);
	}
}

/*
 * Send the request encoded in helper->out (type, after idlevm_frame_begin
 * by the caller) and wait for its reply.  *ret points into the decoder and
 * is valid until the next request.
 */
static struct ivm_error *transact(struct ivm_helper *helper,
				  struct idlevm_writer *w, uint16_t type,
				  uint32_t id, struct idlevm_frame *ret)
{
	uint64_t deadline = ivm_mono_ns() + (uint64_t)helper->timeout_ms * 1000000u;
	struct ivm_error *err;
	size_t len = idlevm_frame_finish(w);

	if (!len)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s request too large",
					idlevm_msg_type_name(type));
	err = send_all(helper, len, type, deadline);
	if (err)
		return err;
	return wait_reply(helper, type, id, deadline, ret);
}

static uint32_t begin(struct ivm_helper *helper, struct idlevm_writer *w,
		      uint16_t type)
{
	uint32_t id = ++helper->next_id;

	idlevm_frame_begin_version(w, helper->out, sizeof(helper->out),
				   helper->version, type, 0, id);
	return id;
}

unsigned int ivm_helper_protocol(const struct ivm_helper *helper)
{
	return helper->version;
}

static struct ivm_error *malformed(uint16_t type)
{
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"malformed %s reply from helper",
				idlevm_msg_type_name(type));
}

/* A decoded string into a fixed buffer, NUL-ended; the decoder has bounded
 * it by IVM_PROTO_MAX_TEXT. */
static void copy_str(char *dst, size_t cap, const struct idlevm_str *s)
{
	size_t n = s->len < cap - 1 ? s->len : cap - 1;

	memcpy(dst, s->ptr, n);
	dst[n] = '\0';
}

struct ivm_error *ivm_helper_hello(struct ivm_helper *helper,
				   struct ivm_helper_hello *ret)
{
	struct idlevm_hello_req req = {
		.max_version = IVM_PROTO_VERSION,
		.caps = IVM_CAP_PING | IVM_CAP_PIN | IVM_CAP_HOLD |
			IVM_CAP_MAPS,
	};
	struct idlevm_hello_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	/* In the oldest version: whatever the helper speaks, it reads this,
	 * and answers with the highest version both speak. */
	helper->version = IVM_PROTO_VERSION_MIN;
	id = begin(helper, &w, IVM_MSG_HELLO);
	idlevm_encode_hello_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_HELLO, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_hello_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_HELLO);
	if (rep.version > IVM_PROTO_VERSION)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"helper chose protocol version %u, idlevm speaks up to %u",
					rep.version, IVM_PROTO_VERSION);
	helper->version = rep.version;
	memset(ret, 0, sizeof(*ret));
	ret->protocol = rep.version;
	ret->caps = rep.caps;
	ret->ncpus = rep.ncpus;
	ret->kaslr_known = rep.flags & IVM_HELLO_F_KASLR_KNOWN;
	ret->kaslr_offset = rep.kaslr_offset;
	ret->pid = rep.pid;
	copy_str(ret->kernel_release, sizeof(ret->kernel_release),
		 &rep.kernel_release);
	copy_str(ret->helper_version, sizeof(ret->helper_version),
		 &rep.helper_version);
	return NULL;
}

struct ivm_error *ivm_helper_ping(struct ivm_helper *helper, uint64_t *ret)
{
	struct idlevm_ping req = { 0 }, rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint64_t start;
	uint32_t id;

	id = begin(helper, &w, IVM_MSG_PING);
	start = ivm_mono_ns();
	req.cookie = start ^ ((uint64_t)id << 32);
	idlevm_encode_ping(&w, &req);
	err = transact(helper, &w, IVM_MSG_PING, id, &fr);
	if (err)
		return err;
	*ret = ivm_mono_ns() - start;
	if (!idlevm_decode_ping(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_PING);
	if (rep.cookie != req.cookie || rep.data_len)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"helper echoed a wrong ping cookie");
	return NULL;
}

struct ivm_error *ivm_helper_pin(struct ivm_helper *helper, int tid,
				 unsigned int cpu, unsigned int lease_ms,
				 struct ivm_helper_pin *ret)
{
	struct idlevm_pin_req req = {
		.tid = tid, .cpu = cpu, .lease_ms = lease_ms,
	};
	struct idlevm_pin_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	id = begin(helper, &w, IVM_MSG_PIN);
	idlevm_encode_pin_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_PIN, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_pin_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_PIN);
	ret->lease_ms = rep.lease_ms;
	ret->prev_cpu = rep.prev_cpu;
	return NULL;
}

struct ivm_error *ivm_helper_unpin(struct ivm_helper *helper, int tid,
				   uint64_t *ret)
{
	struct idlevm_unpin_req req = { .tid = tid };
	struct idlevm_lease_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	id = begin(helper, &w, IVM_MSG_UNPIN);
	idlevm_encode_unpin_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_UNPIN, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_lease_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_UNPIN);
	*ret = rep.held_ns;
	return NULL;
}

struct ivm_error *ivm_helper_hold(struct ivm_helper *helper, unsigned int cpu,
				  unsigned int lease_ms, uint32_t *ret)
{
	struct idlevm_hold_req req = { .cpu = cpu, .lease_ms = lease_ms };
	struct idlevm_hold_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	id = begin(helper, &w, IVM_MSG_HOLD);
	idlevm_encode_hold_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_HOLD, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_hold_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_HOLD);
	*ret = rep.lease_ms;
	return NULL;
}

struct ivm_error *ivm_helper_release(struct ivm_helper *helper,
				     unsigned int cpu,
				     struct ivm_helper_lease *ret)
{
	struct idlevm_release_req req = { .cpu = cpu };
	struct idlevm_lease_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	id = begin(helper, &w, IVM_MSG_RELEASE);
	idlevm_encode_release_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_RELEASE, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_lease_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_RELEASE);
	ret->held_ns = rep.held_ns;
	ret->expired = rep.flags & IVM_LEASE_F_EXPIRED;
	return NULL;
}

/* A request of type goes only to a helper whose version has it. */
static struct ivm_error *need_version(const struct ivm_helper *helper,
				      uint16_t type)
{
	if (helper->version >= idlevm_msg_type_since(type))
		return NULL;
	return ivm_error_create(IVM_ERROR_INVALID,
				"the helper speaks protocol %u: no %s",
				helper->version, idlevm_msg_type_name(type));
}

struct ivm_error *ivm_helper_hold_pin_lease(struct ivm_helper *helper,
					    unsigned int cpu, int tid,
					    unsigned int lease_us,
					    struct ivm_helper_held *ret)
{
	struct idlevm_hold_pin_req req = {
		.cpu = cpu, .tid = tid > 0 ? tid : 0, .lease_us = lease_us,
	};
	struct idlevm_hold_pin_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	err = need_version(helper, IVM_MSG_HOLD_PIN);
	if (err)
		return err;
	id = begin(helper, &w, IVM_MSG_HOLD_PIN);
	idlevm_encode_hold_pin_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_HOLD_PIN, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_hold_pin_rep(fr.payload, fr.hdr.length, &rep) ||
	    (req.tid == 0 && (rep.flags & IVM_HOLD_PIN_F_PINNED)))
		return malformed(IVM_MSG_HOLD_PIN);
	ret->lease_us = rep.lease_us;
	ret->pinned = rep.flags & IVM_HOLD_PIN_F_PINNED;
	ret->pin_errnum = rep.pin_errnum;
	ret->prev_cpu = rep.prev_cpu;
	ret->holder_tid = rep.holder_tid;
	return NULL;
}

struct ivm_error *ivm_helper_stats(struct ivm_helper *helper,
				   struct ivm_helper_stats *ret)
{
	struct idlevm_stats_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id, i;

	err = need_version(helper, IVM_MSG_STATS);
	if (err)
		return err;
	id = begin(helper, &w, IVM_MSG_STATS);
	err = transact(helper, &w, IVM_MSG_STATS, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_stats_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_STATS);
	memset(ret, 0, sizeof(*ret));
	for (i = 0; i < rep.count; i++) {
		copy_str(ret->stat[i].name, sizeof(ret->stat[i].name),
			 &rep.stat[i].name);
		ret->stat[i].value = rep.stat[i].value;
	}
	ret->nr = rep.count;
	return NULL;
}

bool ivm_helper_stats_get(const struct ivm_helper_stats *stats,
			  const char *name, uint64_t *ret)
{
	unsigned int i;

	for (i = 0; i < stats->nr; i++)
		if (!strcmp(stats->stat[i].name, name)) {
			*ret = stats->stat[i].value;
			return true;
		}
	return false;
}

struct ivm_error *ivm_helper_readahead(struct ivm_helper *helper, int pid,
				       const char *path, uint64_t inode,
				       uint64_t offset, uint64_t length,
				       uint64_t *ret)
{
	struct idlevm_readahead_req req = {
		.pid = pid, .inode = inode, .offset = offset, .length = length,
		.path = { path, (uint16_t)strnlen(path, IVM_PROTO_MAX_PATH + 1) },
	};
	struct idlevm_readahead_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	struct ivm_error *err;
	uint32_t id;

	if (pid <= 0 || path[0] != '/' || !length ||
	    length > IVM_READAHEAD_MAX_LEN ||
	    strnlen(path, IVM_PROTO_MAX_PATH + 1) > IVM_PROTO_MAX_PATH)
		return ivm_error_create(IVM_ERROR_INVALID,
					"readahead: bad request (pid %d, %llu bytes of %.64s)",
					pid, (unsigned long long)length, path);
	id = begin(helper, &w, IVM_MSG_READAHEAD);
	idlevm_encode_readahead_req(&w, &req);
	err = transact(helper, &w, IVM_MSG_READAHEAD, id, &fr);
	if (err)
		return err;
	if (!idlevm_decode_readahead_rep(fr.payload, fr.hdr.length, &rep) ||
	    rep.bytes > length)
		return malformed(IVM_MSG_READAHEAD);
	*ret = rep.bytes;
	return NULL;
}

/* Pages of one process's maps; a hostile helper could page forever. */
#define MAX_MAPS_PAGES 1024

struct ivm_error *ivm_helper_maps(struct ivm_helper *helper, int pid,
				  ivm_helper_map_fn fn, void *arg)
{
	struct idlevm_maps_req req = { .pid = pid, .first = 0 };
	unsigned int page;

	for (page = 0; page < MAX_MAPS_PAGES; page++) {
		struct idlevm_map_entry entry;
		struct idlevm_maps_rep rep;
		struct idlevm_writer w;
		struct idlevm_frame fr;
		struct ivm_error *err;
		uint32_t id;
		int r;

		id = begin(helper, &w, IVM_MSG_MAPS);
		idlevm_encode_maps_req(&w, &req);
		err = transact(helper, &w, IVM_MSG_MAPS, id, &fr);
		if (err)
			return err;
		if (!idlevm_decode_maps_rep(fr.payload, fr.hdr.length, &rep) ||
		    rep.first != req.first)
			return malformed(IVM_MSG_MAPS);
		while ((r = idlevm_maps_rep_next(&rep, &entry)) > 0) {
			err = fn(&entry, arg);
			if (err == &ivm_stop)
				return NULL;
			if (err)
				return err;
		}
		if (r < 0)
			return malformed(IVM_MSG_MAPS);
		if (!(rep.flags & IVM_MAPS_F_MORE))
			return NULL;
		/* More must mean progress, or a helper could loop us. */
		if (!rep.count || rep.count > UINT32_MAX - req.first)
			return malformed(IVM_MSG_MAPS);
		req.first += rep.count;
	}
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"helper sent over %d pages of maps for pid %d",
				MAX_MAPS_PAGES, pid);
}

/* ---- pipelined pairs ------------------------------------------------- */

/*
 * The helper serves one request at a time, in the order they arrive, and a
 * HOLD is answered only once its holder runs on the CPU.  So a pair of
 * requests written in one send() is carried out in order, the second after
 * the first has taken effect, for the cost of one round trip instead of two.
 * Each request still gets its own reply; both are awaited, so no reply is
 * left behind to be dropped as stale by the next request.
 */

/* The errno of a helper ERROR reply (helper_error() made it: IVM_ERROR_OS
 * with the helper's errno and text), or -1 with *err set for anything else
 * (the connection failed, the reply does not decode). */
bool ivm_helper_error_is_answer(const struct ivm_error *err)
{
	return err && err->code == IVM_ERROR_OS && err->errnum > 0 &&
	       !strncmp(ivm_error_string(err), "helper: ", 8);
}

static int answer_errnum(struct ivm_error *e, struct ivm_error **err)
{
	int errnum;

	if (ivm_helper_error_is_answer(e)) {
		errnum = e->errnum;
		ivm_error_destroy(e);
		return errnum;
	}
	*err = e;
	return -1;
}

/* Encode the second frame of a pair after the first (len1 bytes). */
static void begin_second(struct ivm_helper *helper, struct idlevm_writer *w,
			 size_t len1, uint16_t type, uint32_t *id)
{
	*id = ++helper->next_id;
	idlevm_frame_begin_version(w, helper->out + len1,
				   sizeof(helper->out) - len1,
				   helper->version, type, 0, *id);
}

static struct ivm_error *send_pair(struct ivm_helper *helper, size_t len1,
				   struct idlevm_writer *w2, uint16_t type,
				   uint64_t deadline)
{
	size_t len2 = idlevm_frame_finish(w2);

	if (!len1 || !len2)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s request pair too large",
					idlevm_msg_type_name(type));
	return send_all(helper, len1 + len2, type, deadline);
}

struct ivm_error *ivm_helper_hold_pin(struct ivm_helper *helper,
				      unsigned int cpu, unsigned int hold_ms,
				      int tid, unsigned int pin_ms,
				      struct ivm_helper_hold_pin *ret)
{
	struct idlevm_hold_req hreq = { .cpu = cpu, .lease_ms = hold_ms };
	struct idlevm_pin_req preq = { .tid = tid, .cpu = cpu,
				       .lease_ms = pin_ms };
	uint64_t deadline = ivm_mono_ns() + (uint64_t)helper->timeout_ms * 1000000u;
	struct idlevm_hold_rep hrep;
	struct idlevm_pin_rep prep;
	struct idlevm_writer w1, w2;
	struct idlevm_frame fr;
	struct ivm_error *err = NULL, *e;
	uint32_t id1, id2;
	size_t len1;

	memset(ret, 0, sizeof(*ret));
	id1 = begin(helper, &w1, IVM_MSG_HOLD);
	idlevm_encode_hold_req(&w1, &hreq);
	len1 = idlevm_frame_finish(&w1);
	begin_second(helper, &w2, len1, IVM_MSG_PIN, &id2);
	idlevm_encode_pin_req(&w2, &preq);
	err = send_pair(helper, len1, &w2, IVM_MSG_HOLD, deadline);
	if (err)
		return err;

	e = wait_reply(helper, IVM_MSG_HOLD, id1, deadline, &fr);
	if (e) {
		ret->hold_errnum = answer_errnum(e, &err);
		if (err)
			return err;
	} else if (!idlevm_decode_hold_rep(fr.payload, fr.hdr.length,
					   &hrep)) {
		return malformed(IVM_MSG_HOLD);
	} else {
		ret->hold_lease_ms = hrep.lease_ms;
	}
	e = wait_reply(helper, IVM_MSG_PIN, id2, deadline, &fr);
	if (e) {
		ret->pin_errnum = answer_errnum(e, &err);
		return err;
	}
	if (!idlevm_decode_pin_rep(fr.payload, fr.hdr.length, &prep))
		return malformed(IVM_MSG_PIN);
	ret->pin.lease_ms = prep.lease_ms;
	ret->pin.prev_cpu = prep.prev_cpu;
	return NULL;
}

struct ivm_error *ivm_helper_unpin_release(struct ivm_helper *helper,
					   int tid, unsigned int cpu,
					   struct ivm_helper_unpin_release *ret)
{
	struct idlevm_unpin_req ureq = { .tid = tid };
	struct idlevm_release_req rreq = { .cpu = cpu };
	uint64_t deadline = ivm_mono_ns() + (uint64_t)helper->timeout_ms * 1000000u;
	struct idlevm_lease_rep rep;
	struct idlevm_writer w1, w2;
	struct idlevm_frame fr;
	struct ivm_error *err = NULL, *e;
	uint32_t id1 = 0, id2;
	size_t len1 = 0, len2;

	memset(ret, 0, sizeof(*ret));
	/* tid < 0: release only (nothing was pinned). */
	if (tid >= 0) {
		id1 = begin(helper, &w1, IVM_MSG_UNPIN);
		idlevm_encode_unpin_req(&w1, &ureq);
		len1 = idlevm_frame_finish(&w1);
		if (!len1)
			return ivm_error_create(IVM_ERROR_INVALID,
						"unpin request too large");
	}
	begin_second(helper, &w2, len1, IVM_MSG_RELEASE, &id2);
	idlevm_encode_release_req(&w2, &rreq);
	len2 = idlevm_frame_finish(&w2);
	if (!len2)
		return ivm_error_create(IVM_ERROR_INVALID,
					"release request too large");
	err = send_all(helper, len1 + len2, IVM_MSG_RELEASE, deadline);
	if (err)
		return err;

	if (tid >= 0) {
		e = wait_reply(helper, IVM_MSG_UNPIN, id1, deadline, &fr);
		if (e) {
			ret->unpin_errnum = answer_errnum(e, &err);
			if (err)
				return err;
		} else if (!idlevm_decode_lease_rep(fr.payload, fr.hdr.length,
						    &rep)) {
			return malformed(IVM_MSG_UNPIN);
		} else {
			ret->pinned_ns = rep.held_ns;
		}
	}
	e = wait_reply(helper, IVM_MSG_RELEASE, id2, deadline, &fr);
	if (e) {
		ret->release_errnum = answer_errnum(e, &err);
		return err;
	}
	if (!idlevm_decode_lease_rep(fr.payload, fr.hdr.length, &rep))
		return malformed(IVM_MSG_RELEASE);
	ret->held_ns = rep.held_ns;
	ret->hold_expired = rep.flags & IVM_LEASE_F_EXPIRED;
	return NULL;
}
