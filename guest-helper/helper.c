// SPDX-License-Identifier: MIT
/*
 * idlevm-helper: the in-guest half of idlevm.  Runs as root, serves the
 * virtio-serial port org.idlevm.helper.0 and does only what the host cannot
 * do from outside: pin a thread to a CPU, hold a CPU, and tell what the guest
 * kernel and a process look like.  See proto.h for the wire format.
 *
 * One thread serves the port; holders are threads of their own.  Every pin
 * and hold ends on its lease, on host disconnect and on exit, and pins are
 * journaled so the next helper restores what a killed one left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "helper.h"

/*
 * Link-time address of _text on x86-64: __START_KERNEL_map
 * (0xffffffff80000000) plus the default CONFIG_PHYSICAL_START (16 MiB).
 * KASLR slides the kernel by multiples of CONFIG_PHYSICAL_ALIGN from there,
 * so the running _text minus this is the slide.  A kernel built with another
 * PHYSICAL_START would need the host to correct with its vmlinux's _text.
 */
#define LINK_TIME_TEXT 0xffffffff81000000ull

/* How long a reply may wait for the port to drain before it is dropped. */
#define WRITE_TIMEOUT_MS 1000
/* A frame still partial this long after its first bytes is abandoned
 * (see idlevm_decoder_abandon). */
#define STALE_PARTIAL_MS 250
/* How often to look again for a port that is missing or closed by the
 * host, when no SIGIO tells us sooner. */
#define RETRY_MS 500

enum port_state {
	PORT_CLOSED,		/* not open: discover and open it */
	PORT_WAIT_HOST,		/* open, host side not connected */
	PORT_CONNECTED,
};

struct helper {
	const char *port_arg;	/* --port, or NULL to discover */
	char port_path[256];
	int port_fd;
	bool port_is_socket;
	enum port_state state;
	bool logged_missing;
	int sig_fd, timer_fd;
	bool quit;

	struct helper_pins pins;
	struct helper_holds *holds;

	bool kaslr_probed, kaslr_known;
	uint64_t kaslr_offset;

	struct idlevm_decoder dec;
	uint64_t partial_since_ns;	/* 0: no partial frame buffered */
	/* When the last request arrived: a lease ended by a host that went
	 * away is logged with the time since, an upper bound of how long the
	 * guest stayed pinned after the host died (tests measure it). */
	uint64_t last_request_ns;
	char errtext[128];	/* set by dispatch for a clearer ERROR text */
	uint8_t out[IVM_PROTO_MAX_FRAME];
};

/* ---- the port -------------------------------------------------------- */

/* /dev/vportNpM of the port named IVM_PROTO_PORT_NAME. */
static bool discover_port(char *path, size_t len)
{
	DIR *dir = opendir("/sys/class/virtio-ports");
	struct dirent *de;
	bool found = false;

	if (!dir)
		return false;
	while (!found && (de = readdir(dir))) {
		char name_path[300], name[64];
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(name_path, sizeof(name_path),
			 "/sys/class/virtio-ports/%s/name", de->d_name);
		fd = open(name_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n <= 0)
			continue;
		name[n] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (!strcmp(name, IVM_PROTO_PORT_NAME) &&
		    (size_t)snprintf(path, len, "/dev/%s", de->d_name) < len)
			found = true;
	}
	closedir(dir);
	return found;
}

/* Open the port (or, for tests, connect to a unix socket at --port). */
static int port_open(struct helper *h)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (h->port_arg) {
		snprintf(h->port_path, sizeof(h->port_path), "%s", h->port_arg);
	} else if (!discover_port(h->port_path, sizeof(h->port_path))) {
		if (!h->logged_missing)
			helper_log("no virtio port named %s yet; waiting",
				   IVM_PROTO_PORT_NAME);
		h->logged_missing = true;
		return -ENOENT;
	}
	if (stat(h->port_path, &st) < 0) {
		if (!h->logged_missing)
			helper_log("%s: %s; waiting", h->port_path,
				   strerror(errno));
		h->logged_missing = true;
		return -errno;
	}
	if (S_ISSOCK(st.st_mode)) {
		if (strlen(h->port_path) >= sizeof(sun.sun_path))
			return -ENAMETOOLONG;
		strcpy(sun.sun_path, h->port_path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			int r = -errno;

			if (!h->logged_missing)
				helper_log("connect %s: %s; retrying",
					   h->port_path, strerror(-r));
			h->logged_missing = true;
			close(fd);
			return r;
		}
	} else {
		fd = open(h->port_path, O_RDWR | O_NONBLOCK | O_CLOEXEC |
			  O_NOCTTY);
		if (fd < 0)
			return -errno;
		/* virtio_console raises SIGIO when the host opens or closes
		 * its side: it wakes us instead of a polling loop. */
		if (fcntl(fd, F_SETOWN, getpid()) < 0 ||
		    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) < 0)
			helper_log("no SIGIO on %s: %s; polling every %d ms",
				   h->port_path, strerror(errno), RETRY_MS);
	}
	h->port_fd = fd;
	h->port_is_socket = S_ISSOCK(st.st_mode);
	h->state = PORT_WAIT_HOST;
	h->logged_missing = false;
	helper_log("serving %s", h->port_path);
	return 0;
}

/* End every lease: the host that asked for them is gone. */
static double ms_since_request(const struct helper *h)
{
	if (!h->last_request_ns)
		return -1;
	return (double)(helper_now_ns() - h->last_request_ns) / 1e6;
}

static void end_leases(struct helper *h, const char *why)
{
	unsigned int pins = helper_pins_release_all(&h->pins);
	unsigned int holds = helper_holds_release_all(h->holds);

	if (pins || holds)
		helper_log("%s: ended %u pin(s) and %u hold(s), %.1f ms after the last request",
			   why, pins, holds, ms_since_request(h));
}

static void host_gone(struct helper *h, int err)
{
	if (h->state == PORT_CONNECTED)
		helper_log("host disconnected");
	end_leases(h, "host disconnected");
	/* A half frame from the old session must not swallow the first
	 * request of the next one. */
	idlevm_decoder_reset(&h->dec);
	h->partial_since_ns = 0;
	if (err) {
		helper_log("%s: %s; reopening", h->port_path, strerror(err));
		close(h->port_fd);
		h->port_fd = -1;
		h->state = PORT_CLOSED;
	} else {
		h->state = PORT_WAIT_HOST;
	}
}

/*
 * A virtio port whose host side is closed polls readable with POLLHUP and
 * reads 0, again and again: so while the host is away we do not poll the
 * port at all, and look at it again on SIGIO or every RETRY_MS.
 */
static void check_host(struct helper *h)
{
	struct pollfd pfd = { .fd = h->port_fd, .events = POLLIN };

	if (poll(&pfd, 1, 0) < 0)
		return;
	if (pfd.revents & (POLLERR | POLLNVAL)) {
		host_gone(h, EIO);
		return;
	}
	if (pfd.revents & POLLHUP) {
		/* A unix socket that hung up stays hung up: reconnect. */
		if (h->port_is_socket)
			host_gone(h, ECONNRESET);
		return;
	}
	helper_log("host connected");
	h->state = PORT_CONNECTED;
}

static void send_frame(struct helper *h, size_t len)
{
	uint64_t deadline = helper_now_ns() + WRITE_TIMEOUT_MS * 1000000ull;
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(h->port_fd, h->out + done, len - done);
		struct pollfd pfd = { .fd = h->port_fd, .events = POLLOUT };
		uint64_t now;

		if (n > 0) {
			done += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			helper_log("write: %s; reply dropped", strerror(errno));
			return;
		}
		now = helper_now_ns();
		if (now >= deadline ||
		    poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1) < 0 ||
		    (pfd.revents & (POLLHUP | POLLERR))) {
			helper_log("port not writable; reply dropped");
			return;
		}
	}
}

/* ---- requests -------------------------------------------------------- */

static void reply_error(struct helper *h, uint32_t id, int errnum,
			const char *text)
{
	struct idlevm_writer w;
	size_t len;

	idlevm_frame_begin(&w, h->out, sizeof(h->out), IVM_MSG_ERROR,
			   IVM_PROTO_F_REPLY, id);
	idlevm_encode_error(&w, errnum, text ? text : strerror(errnum));
	len = idlevm_frame_finish(&w);
	if (len)
		send_frame(h, len);
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

static void handle_hello(struct helper *h, struct idlevm_writer *w)
{
	struct idlevm_hello_rep rep = { .version = IVM_PROTO_VERSION };
	struct utsname uts;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (!h->kaslr_probed)
		probe_kaslr(h);
	if (uname(&uts) < 0)
		strcpy(uts.release, "unknown");
	rep.caps = IVM_CAP_PING | IVM_CAP_PIN | IVM_CAP_HOLD | IVM_CAP_MAPS |
		   (h->pins.journal ? IVM_CAP_JOURNAL : 0);
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

/* Decode, act, and encode the reply into w; 0 or a negative errno. */
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
	} req;
	struct idlevm_lease_rep lease = { 0 };
	bool expired;
	int r;

	switch (fr->hdr.type) {
	case IVM_MSG_HELLO:
		if (!idlevm_decode_hello_req(p, len, &req.hello))
			return -EBADMSG;
		handle_hello(h, w);
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
		r = helper_pin(&h->pins, req.pin.tid, req.pin.cpu,
			       req.pin.lease_ms, helper_now_ns(), &rep.lease_ms,
			       &rep.prev_cpu);
		if (r < 0)
			return r;
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
	struct idlevm_writer w;
	char text[128];
	size_t len;
	int r;

	if (fr->hdr.flags & IVM_PROTO_F_REPLY) {
		helper_log("ignoring a %s reply from the host (id %u)",
			   idlevm_msg_type_name(fr->hdr.type), fr->hdr.id);
		return;
	}
	if ((fr->hdr.type == IVM_MSG_PIN || fr->hdr.type == IVM_MSG_HOLD) &&
	    host_hung_up(h)) {
		helper_log("host gone: dropping a %s request (id %u)",
			   idlevm_msg_type_name(fr->hdr.type), fr->hdr.id);
		return;
	}
	h->last_request_ns = helper_now_ns();
	idlevm_frame_begin(&w, h->out, sizeof(h->out), fr->hdr.type,
			   IVM_PROTO_F_REPLY, fr->hdr.id);
	h->errtext[0] = '\0';
	r = dispatch(h, fr, &w);
	if (r == -EBADMSG) {
		snprintf(text, sizeof(text), "malformed %s request",
			 idlevm_msg_type_name(fr->hdr.type));
		helper_log("%s (id %u, %u bytes)", text, fr->hdr.id,
			   fr->hdr.length);
		reply_error(h, fr->hdr.id, EBADMSG, text);
		return;
	}
	if (r == -EOPNOTSUPP) {
		snprintf(text, sizeof(text), "unknown message type %u",
			 fr->hdr.type);
		reply_error(h, fr->hdr.id, EOPNOTSUPP, text);
		return;
	}
	if (r < 0) {
		if (h->errtext[0])
			snprintf(text, sizeof(text), "%s", h->errtext);
		else
			snprintf(text, sizeof(text), "%s: %s",
				 idlevm_msg_type_name(fr->hdr.type),
				 strerror(-r));
		reply_error(h, fr->hdr.id, -r, text);
		return;
	}
	len = idlevm_frame_finish(&w);
	if (!len) {
		reply_error(h, fr->hdr.id, EMSGSIZE, "reply too large");
		return;
	}
	send_frame(h, len);
}

static void drain_frames(struct helper *h)
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
				reply_error(h, fr.hdr.id, EPROTONOSUPPORT,
					    text);
			break;
		}
	}
}

static void read_port(struct helper *h)
{
	for (;;) {
		ssize_t n = read(h->port_fd, idlevm_decoder_tail(&h->dec),
				 idlevm_decoder_space(&h->dec));

		if (n > 0) {
			idlevm_decoder_commit(&h->dec, n);
			drain_frames(h);
			continue;
		}
		if (n == 0) {
			/* virtio: the host closed its side, it may come
			 * back on the same port.  A socket at EOF is done:
			 * connect anew. */
			host_gone(h, h->port_is_socket ? ECONNRESET : 0);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			host_gone(h, errno);
		return;
	}
}

/* ---- the loop -------------------------------------------------------- */

static void arm_timer(struct helper *h)
{
	uint64_t next = helper_pins_next_deadline(&h->pins);
	uint64_t holds = helper_holds_next_deadline(h->holds);
	struct itimerspec its = { 0 };

	if (holds < next)
		next = holds;
	if (next != UINT64_MAX) {
		/* Absolute CLOCK_MONOTONIC; 0 would disarm, so at least 1. */
		its.it_value.tv_sec = next / 1000000000u;
		its.it_value.tv_nsec = next % 1000000000u;
		if (!next)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(h->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void handle_signals(struct helper *h)
{
	struct signalfd_siginfo si;

	while (read(h->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT ||
		    si.ssi_signo == SIGQUIT) {
			helper_log("signal %u: exiting", si.ssi_signo);
			h->quit = true;
		}
		/* SIGIO only wakes us; SIGHUP is ignored. */
	}
}

static void expire_leases(struct helper *h)
{
	uint64_t ticks;
	unsigned int pins, holds;

	if (read(h->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return;
	pins = helper_pins_expire(&h->pins, helper_now_ns());
	holds = helper_holds_expire(h->holds);
	if (pins || holds)
		helper_log("lease ran out: ended %u pin(s) and %u hold(s), %.1f ms after the last request",
			   pins, holds, ms_since_request(h));
}

static int run(struct helper *h)
{
	while (!h->quit) {
		struct pollfd fds[3] = {
			{ .fd = h->sig_fd, .events = POLLIN },
			{ .fd = h->timer_fd, .events = POLLIN },
			{ .fd = h->port_fd, .events = POLLIN },
		};
		nfds_t nfds;
		int r, timeout;

		if (h->state == PORT_CLOSED)
			port_open(h);
		if (h->state == PORT_WAIT_HOST)
			check_host(h);
		fds[2].fd = h->port_fd;
		nfds = h->state == PORT_CONNECTED ? 3 : 2;
		timeout = nfds == 3 ? -1 : RETRY_MS;
		if (nfds == 3 && h->partial_since_ns) {
			uint64_t due = h->partial_since_ns +
				       STALE_PARTIAL_MS * 1000000ull;
			uint64_t now = helper_now_ns();

			timeout = now >= due ? 0 :
				  (int)((due - now) / 1000000) + 1;
		}
		arm_timer(h);
		r = poll(fds, nfds, timeout);
		if (r < 0 && errno != EINTR) {
			helper_log("poll: %s", strerror(errno));
			return 1;
		}
		if (fds[0].revents)
			handle_signals(h);
		if (fds[1].revents)
			expire_leases(h);
		if (nfds == 3 && fds[2].revents & POLLIN)
			read_port(h);
		else if (nfds == 3 && fds[2].revents)
			host_gone(h, fds[2].revents & POLLHUP ? 0 : EIO);
		if (h->state == PORT_CONNECTED && h->partial_since_ns &&
		    helper_now_ns() - h->partial_since_ns >=
			    STALE_PARTIAL_MS * 1000000ull) {
			size_t n = idlevm_decoder_abandon(&h->dec);

			helper_log("abandoned a partial frame (%zu bytes) after %d ms",
				   n, STALE_PARTIAL_MS);
			h->partial_since_ns = 0;
			drain_frames(h);
		}
	}
	end_leases(h, "exiting");
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: idlevm-helper [--port PATH] [--journal PATH]\n"
		"  --port PATH     virtio port device (default: the port named\n"
		"                  " IVM_PROTO_PORT_NAME "), or a unix socket\n"
		"  --journal PATH  original affinities of pinned threads\n"
		"                  (default " HELPER_JOURNAL_DEFAULT ")\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "journal", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* The decoder and the reply buffer are 128 KiB: not on the stack. */
	static struct helper h = { .port_fd = -1 };
	const char *journal = HELPER_JOURNAL_DEFAULT;
	unsigned int gone, bad;
	sigset_t mask;
	long ncpus;
	int c, r;

	while ((c = getopt_long(argc, argv, "p:j:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			h.port_arg = optarg;
			break;
		case 'j':
			journal = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGQUIT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGIO);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	h.sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	h.timer_fd = timerfd_create(CLOCK_MONOTONIC,
				    TFD_NONBLOCK | TFD_CLOEXEC);
	if (h.sig_fd < 0 || h.timer_fd < 0) {
		helper_log("signalfd/timerfd: %s", strerror(errno));
		return 1;
	}

	/* Whatever a previous helper left pinned goes back first. */
	r = helper_journal_replay(journal, &gone, &bad);
	if (r < 0)
		helper_log("journal %s: %s", journal, strerror(-r));
	else if (r || gone || bad)
		helper_log("journal %s: restored %d thread(s), %u gone, "
			   "%u bad line(s)", journal, r, gone, bad);
	helper_pins_init(&h.pins, journal);
	ncpus = sysconf(_SC_NPROCESSORS_CONF);
	if (helper_holds_create(ncpus > 0 ? (unsigned int)ncpus : 1,
				&h.holds) < 0) {
		helper_log("out of memory");
		return 1;
	}
	idlevm_decoder_init(&h.dec);
	/* The host waits on us with a vCPU often idle and the guest busy:
	 * a request should not queue behind the workload's time slices.
	 * Nice, not real-time: the loop must never starve the guest. */
	if (setpriority(PRIO_PROCESS, 0, -10) < 0)
		helper_log("setpriority: %s", strerror(errno));
	helper_log("version %s, protocol %u, pid %d", HELPER_VERSION,
		   IVM_PROTO_VERSION, (int)getpid());

	r = run(&h);
	helper_holds_destroy(h.holds);
	helper_pins_deinit(&h.pins);
	return r;
}
