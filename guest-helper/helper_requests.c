// SPDX-License-Identifier: MIT
/*
 * The helper's requests: a frame read from the port, decoded, carried out
 * and answered (HOLD_PIN's answer comes from its holder thread).  A
 * malformed or unknown request gets an ERROR reply, never a crash: the
 * bytes come from the host, which the guest need not trust either.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "helper_daemon.h"

/*
 * Link-time address of _text on x86-64: __START_KERNEL_map
 * (0xffffffff80000000) plus the default CONFIG_PHYSICAL_START (16 MiB).
 * KASLR slides the kernel by multiples of CONFIG_PHYSICAL_ALIGN from there,
 * so the running _text minus this is the slide.  A kernel built with another
 * PHYSICAL_START would need the host to correct with its vmlinux's _text.
 */
#define LINK_TIME_TEXT 0xffffffff81000000ull

static void reply_error(struct helper *h, uint16_t version, uint32_t id,
			int errnum, const char *text)
{
	struct idlevm_writer w;
	size_t len;

	idlevm_frame_begin_version(&w, h->out, sizeof(h->out), version,
				   IVM_MSG_ERROR, IVM_PROTO_F_REPLY, id);
	idlevm_encode_error(&w, errnum, text ? text : strerror(errnum));
	len = idlevm_frame_finish(&w);
	if (len)
		helper_send_frame(h, len);
}

static void probe_kaslr(struct helper *h)
{
	char line[256];
	FILE *f;
	int i;

	h->kaslr_probed = true;
	f = fopen("/proc/kallsyms", "re");
	if (!f)
		return;
	/* _text comes early (after the per-CPU symbols); bound the scan
	 * all the same. */
	for (i = 0; i < 200000 && fgets(line, sizeof(line), f); i++) {
		unsigned long long addr;
		char type, name[64];

		if (sscanf(line, "%llx %c %63s", &addr, &type, name) != 3 ||
		    strcmp(name, "_text"))
			continue;
		/* With kptr_restrict the addresses read as zero. */
		if (addr >= LINK_TIME_TEXT) {
			h->kaslr_known = true;
			h->kaslr_offset = addr - LINK_TIME_TEXT;
		}
		break;
	}
	fclose(f);
}

static void handle_hello(struct helper *h, const struct idlevm_hello_req *req,
			 struct idlevm_writer *w)
{
	struct idlevm_hello_rep rep = { .version = IVM_PROTO_VERSION };
	struct utsname uts;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (!h->kaslr_probed)
		probe_kaslr(h);
	if (uname(&uts) < 0)
		strcpy(uts.release, "unknown");
	/* The highest version both speak: the host uses it from now on. */
	if (req->max_version < rep.version)
		rep.version = req->max_version;
	rep.caps = IVM_CAP_PING | IVM_CAP_PIN | IVM_CAP_HOLD | IVM_CAP_MAPS |
		   IVM_CAP_READAHEAD |
		   (h->pins.journal ? IVM_CAP_JOURNAL : 0);
	if (rep.version >= 2)
		rep.caps |= IVM_CAP_HOLD_PIN | IVM_CAP_STATS;
	rep.ncpus = ncpus > 0 ? (uint32_t)ncpus : 1;
	rep.flags = h->kaslr_known ? IVM_HELLO_F_KASLR_KNOWN : 0;
	rep.kaslr_offset = h->kaslr_offset;
	rep.pid = (uint32_t)getpid();
	rep.kernel_release.ptr = uts.release;
	rep.kernel_release.len = strlen(uts.release);
	rep.helper_version.ptr = HELPER_VERSION;
	rep.helper_version.len = strlen(HELPER_VERSION);
	idlevm_encode_hello_rep(w, &rep);
}

/* A pin would be pointless: the target runs above the holder. */
static int refuse_rt(struct helper *h, pid_t tid)
{
	int policy, prio, r = helper_task_holdable(tid, &policy, &prio);

	if (r == -EPERM) {
		h->count.refused_rt++;
		snprintf(h->errtext, sizeof(h->errtext),
			 "tid %d runs at real-time priority %d (policy %d), above the holder's %d: not pinned",
			 (int)tid, prio, policy, HELPER_HOLD_PRIO);
	}
	return r == -ESRCH ? 0 : r;	/* gone: the pin says so */
}

/* Unjournal the pins of HOLD_PINs whose holder is done (and restored). */
static void forget_done_holds(struct helper *h)
{
	cpu_set_t idle;

	helper_holds_idle(h->holds, &idle);
	helper_pins_forget_held(&h->pins, &idle);
}

void helper_reply_hold_pin(void *ctx, const struct helper_hold_pin *req,
			  const struct helper_hold_pin_result *res)
{
	struct helper *h = ctx;
	struct idlevm_hold_pin_rep rep;
	struct idlevm_writer w;
	uint8_t buf[IVM_PROTO_HEADER_SIZE + 64];
	size_t len;

	if (res->errnum) {
		idlevm_frame_begin_version(&w, buf, sizeof(buf), req->version,
					   IVM_MSG_ERROR, IVM_PROTO_F_REPLY,
					   req->id);
		idlevm_encode_error(&w, res->errnum,
				    res->errnum == ETIMEDOUT ?
				    "hold_pin: the holder got its CPU too late" :
				    "hold_pin: the holder is not on its CPU");
	} else {
		memset(&rep, 0, sizeof(rep));
		rep.lease_us = (uint32_t)(res->lease_ns / 1000);
		rep.flags = res->pinned ? IVM_HOLD_PIN_F_PINNED : 0;
		rep.pin_errnum = res->pin_errnum;
		rep.prev_cpu = req->prev_cpu;
		rep.holder_tid = res->holder_tid;
		idlevm_frame_begin_version(&w, buf, sizeof(buf), req->version,
					   IVM_MSG_HOLD_PIN, IVM_PROTO_F_REPLY,
					   req->id);
		idlevm_encode_hold_pin_rep(&w, &rep);
	}
	len = idlevm_frame_finish(&w);
	pthread_mutex_lock(&h->port_lock);
	if (len && h->session == req->session && h->state == PORT_CONNECTED)
		helper_write_frame(h, buf, len);
	pthread_mutex_unlock(&h->port_lock);
}

/* HOLD_PIN: journal the pin, hand it to the holder; it answers. */
static int handle_hold_pin(struct helper *h, const struct idlevm_frame *fr,
			   const struct idlevm_hold_pin_req *m)
{
	struct helper_hold_pin req;
	cpu_set_t idle;
	uint64_t lease_us = m->lease_us ? m->lease_us :
				IVM_PROTO_HOLD_PIN_LEASE_DEFAULT_US;
	int r;

	if (lease_us > IVM_PROTO_HOLD_PIN_LEASE_MAX_US)
		lease_us = IVM_PROTO_HOLD_PIN_LEASE_MAX_US;
	memset(&req, 0, sizeof(req));
	req.cpu = m->cpu;
	req.tid = m->tid > 0 ? m->tid : 0;
	req.lease_ns = lease_us * 1000;
	req.asked_ns = helper_now_ns();
	req.prev_cpu = UINT32_MAX;
	req.id = fr->hdr.id;
	req.version = fr->hdr.version;
	req.session = h->session;
	/* A held CPU, or one out of range: say so before journaling. */
	if (m->cpu >= helper_holds_ncpus(h->holds))
		return -EINVAL;
	helper_holds_idle(h->holds, &idle);
	if (!CPU_ISSET(m->cpu, &idle))
		return -EBUSY;
	if (req.tid) {
		r = refuse_rt(h, req.tid);
		if (r < 0)
			return r;
		r = helper_pins_journal_held(&h->pins, req.tid, req.cpu,
					     req.asked_ns, &idle,
					     &req.starttime, &req.orig,
					     &req.prev_cpu);
		if (r < 0)
			return r;
	} else {
		helper_pins_forget_held(&h->pins, &idle);
	}
	r = helper_hold_pin(h->holds, &req);
	if (r < 0 && req.tid) {
		/* No holder will make or end that pin: unjournal it. */
		CPU_ZERO(&idle);
		CPU_SET(req.cpu, &idle);
		helper_pins_forget_held(&h->pins, &idle);
	}
	return r < 0 ? r : 1;
}

static void handle_stats(struct helper *h, struct idlevm_writer *w)
{
	struct helper_counters now, *b = &h->base;
	struct idlevm_stats_rep rep;
	size_t i;

	helper_counters_now(h, &now);
	{
		const struct {
			const char *name;
			uint64_t value;
		} c[] = {
			{ "requests", now.requests - b->requests },
			{ "wakeups", now.wakeups - b->wakeups },
			{ "pins", now.pins - b->pins },
			{ "refused_rt", now.refused_rt - b->refused_rt },
			{ "holds", now.holds.holds - b->holds.holds },
			{ "hold_ns", now.holds.hold_ns - b->holds.hold_ns },
			{ "held_pins", now.holds.pins - b->holds.pins },
			{ "held_pin_ns", now.holds.pin_ns - b->holds.pin_ns },
			{ "lease_ends",
			  now.holds.lease_ends - b->holds.lease_ends },
			{ "late_holds", now.holds.late - b->holds.late },
		};

		memset(&rep, 0, sizeof(rep));
		for (i = 0; i < sizeof(c) / sizeof(c[0]) &&
			    i < IVM_PROTO_MAX_STATS; i++) {
			rep.stat[i].name.ptr = c[i].name;
			rep.stat[i].name.len = (uint16_t)strlen(c[i].name);
			rep.stat[i].value = c[i].value;
		}
		rep.count = (uint32_t)i;
	}
	idlevm_encode_stats_rep(w, &rep);
}

/*
 * Decode, act, and encode the reply into w: 0, 1 when the reply is someone
 * else's to send (a holder's), or a negative errno.
 */
static int dispatch(struct helper *h, const struct idlevm_frame *fr,
		    struct idlevm_writer *w)
{
	const uint8_t *p = fr->payload;
	size_t len = fr->hdr.length;
	union {
		struct idlevm_hello_req hello;
		struct idlevm_ping ping;
		struct idlevm_pin_req pin;
		struct idlevm_unpin_req unpin;
		struct idlevm_hold_req hold;
		struct idlevm_release_req release;
		struct idlevm_maps_req maps;
		struct idlevm_hold_pin_req hold_pin;
		struct idlevm_readahead_req readahead;
	} req;
	struct idlevm_lease_rep lease = { 0 };
	bool expired;
	int r;

	/* A type its frame's version does not have is unknown to it. */
	if (idlevm_msg_type_since(fr->hdr.type) > fr->hdr.version)
		return -EOPNOTSUPP;
	switch (fr->hdr.type) {
	case IVM_MSG_HELLO:
		if (!idlevm_decode_hello_req(p, len, &req.hello))
			return -EBADMSG;
		handle_hello(h, &req.hello, w);
		return 0;
	case IVM_MSG_PING:
		if (!idlevm_decode_ping(p, len, &req.ping))
			return -EBADMSG;
		idlevm_encode_ping(w, &req.ping);
		return 0;
	case IVM_MSG_PIN: {
		struct idlevm_pin_rep rep;

		if (!idlevm_decode_pin_req(p, len, &req.pin))
			return -EBADMSG;
		r = refuse_rt(h, req.pin.tid);
		if (r < 0)
			return r;
		forget_done_holds(h);
		r = helper_pin(&h->pins, req.pin.tid, req.pin.cpu,
			       req.pin.lease_ms, helper_now_ns(), &rep.lease_ms,
			       &rep.prev_cpu);
		if (r < 0)
			return r;
		h->count.pins++;
		idlevm_encode_pin_rep(w, &rep);
		return 0;
	}
	case IVM_MSG_UNPIN:
		if (!idlevm_decode_unpin_req(p, len, &req.unpin))
			return -EBADMSG;
		r = helper_unpin(&h->pins, req.unpin.tid, helper_now_ns(),
				 &lease.held_ns);
		if (r == -ENOENT)
			snprintf(h->errtext, sizeof(h->errtext),
				 "unpin: tid %d is not pinned (its lease may have run out)",
				 (int)req.unpin.tid);
		if (r < 0)
			return r;
		idlevm_encode_lease_rep(w, &lease);
		return 0;
	case IVM_MSG_HOLD: {
		struct idlevm_hold_rep rep;

		if (!idlevm_decode_hold_req(p, len, &req.hold))
			return -EBADMSG;
		r = helper_hold(h->holds, req.hold.cpu, req.hold.lease_ms,
				&rep.lease_ms);
		if (r < 0)
			return r;
		idlevm_encode_hold_rep(w, &rep);
		return 0;
	}
	case IVM_MSG_RELEASE:
		if (!idlevm_decode_release_req(p, len, &req.release))
			return -EBADMSG;
		r = helper_release(h->holds, req.release.cpu, &lease.held_ns,
				   &expired);
		if (r == -ENOENT)
			snprintf(h->errtext, sizeof(h->errtext),
				 "release: cpu %u is not held", req.release.cpu);
		if (r < 0)
			return r;
		lease.flags = expired ? IVM_LEASE_F_EXPIRED : 0;
		idlevm_encode_lease_rep(w, &lease);
		return 0;
	case IVM_MSG_MAPS:
		if (!idlevm_decode_maps_req(p, len, &req.maps))
			return -EBADMSG;
		return helper_maps_encode(w, req.maps.pid, req.maps.first);
	case IVM_MSG_HOLD_PIN:
		if (!idlevm_decode_hold_pin_req(p, len, &req.hold_pin))
			return -EBADMSG;
		return handle_hold_pin(h, fr, &req.hold_pin);
	case IVM_MSG_STATS:
		if (!idlevm_decode_stats_req(p, len))
			return -EBADMSG;
		handle_stats(h, w);
		return 0;
	case IVM_MSG_READAHEAD: {
		struct idlevm_readahead_rep rep;

		if (!idlevm_decode_readahead_req(p, len, &req.readahead))
			return -EBADMSG;
		r = helper_readahead(req.readahead.pid, req.readahead.path.ptr,
				     req.readahead.path.len,
				     req.readahead.inode,
				     req.readahead.offset,
				     req.readahead.length, &rep.bytes);
		if (r == -ESTALE)
			snprintf(h->errtext, sizeof(h->errtext),
				 "readahead: %.*s of pid %d is not inode %llu",
				 (int)req.readahead.path.len,
				 req.readahead.path.ptr,
				 (int)req.readahead.pid,
				 (unsigned long long)req.readahead.inode);
		if (r < 0)
			return r;
		idlevm_encode_readahead_rep(w, &rep);
		return 0;
	}
	}
	return -EOPNOTSUPP;
}

/*
 * Whether the host side of the port hung up.  Asked before a PIN or HOLD:
 * a host killed after writing a pipelined HOLD+PIN would otherwise get its
 * PIN carried out after it died (the loop was busy waiting for the holder),
 * pinning a thread for nobody until the disconnect is noticed.
 */
static bool host_hung_up(const struct helper *h)
{
	struct pollfd pfd = { .fd = h->port_fd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0 &&
	       (pfd.revents & (POLLHUP | POLLERR | POLLNVAL));
}

static void handle_frame(struct helper *h, const struct idlevm_frame *fr)
{
	uint16_t version = fr->hdr.version;
	struct idlevm_writer w;
	char text[128];
	size_t len;
	int r;

	if (fr->hdr.flags & IVM_PROTO_F_REPLY) {
		helper_log("ignoring a %s reply from the host (id %u)",
			   idlevm_msg_type_name(fr->hdr.type), fr->hdr.id);
		return;
	}
	if ((fr->hdr.type == IVM_MSG_PIN || fr->hdr.type == IVM_MSG_HOLD ||
	     fr->hdr.type == IVM_MSG_HOLD_PIN) && host_hung_up(h)) {
		helper_log("host gone: dropping a %s request (id %u)",
			   idlevm_msg_type_name(fr->hdr.type), fr->hdr.id);
		return;
	}
	h->last_request_ns = helper_now_ns();
	h->count.requests++;
	/* Replies go in the request's version: the host may be older. */
	idlevm_frame_begin_version(&w, h->out, sizeof(h->out), version,
				   fr->hdr.type, IVM_PROTO_F_REPLY, fr->hdr.id);
	h->errtext[0] = '\0';
	r = dispatch(h, fr, &w);
	if (r == 1)
		return;	/* the holder answers */
	if (r == -EBADMSG) {
		snprintf(text, sizeof(text), "malformed %s request",
			 idlevm_msg_type_name(fr->hdr.type));
		helper_log("%s (id %u, %u bytes)", text, fr->hdr.id,
			   fr->hdr.length);
		reply_error(h, version, fr->hdr.id, EBADMSG, text);
		return;
	}
	if (r == -EOPNOTSUPP) {
		snprintf(text, sizeof(text), "unknown message type %u",
			 fr->hdr.type);
		reply_error(h, version, fr->hdr.id, EOPNOTSUPP, text);
		return;
	}
	if (r < 0) {
		if (h->errtext[0])
			snprintf(text, sizeof(text), "%s", h->errtext);
		else
			snprintf(text, sizeof(text), "%s: %s",
				 idlevm_msg_type_name(fr->hdr.type),
				 strerror(-r));
		reply_error(h, version, fr->hdr.id, -r, text);
		return;
	}
	len = idlevm_frame_finish(&w);
	if (!len) {
		reply_error(h, version, fr->hdr.id, EMSGSIZE, "reply too large");
		return;
	}
	helper_send_frame(h, len);
}

void helper_drain_frames(struct helper *h)
{
	struct idlevm_frame fr;
	char text[128];

	for (;;) {
		enum idlevm_decode_event ev = idlevm_decoder_next(&h->dec, &fr);

		if (ev != IVM_PROTO_EV_NEED_MORE)
			h->partial_since_ns = 0;
		switch (ev) {
		case IVM_PROTO_EV_NEED_MORE:
			if (idlevm_decoder_pending(&h->dec) &&
			    !h->partial_since_ns)
				h->partial_since_ns = helper_now_ns();
			return;
		case IVM_PROTO_EV_FRAME:
			handle_frame(h, &fr);
			break;
		case IVM_PROTO_EV_SKIPPED:
			helper_log("skipped %zu bytes from the host: %s",
				   h->dec.skipped,
				   idlevm_skip_reason_name(h->dec.skip_reason));
			break;
		case IVM_PROTO_EV_BAD_VERSION:
			snprintf(text, sizeof(text),
				 "protocol version %u not supported (helper speaks %u)",
				 fr.hdr.version, IVM_PROTO_VERSION);
			helper_log("%s", text);
			if (!(fr.hdr.flags & IVM_PROTO_F_REPLY))
				reply_error(h, IVM_PROTO_VERSION, fr.hdr.id,
					    EPROTONOSUPPORT, text);
			break;
		}
	}
}
