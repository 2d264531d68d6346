// SPDX-License-Identifier: MIT
/*
 * idlevm-helper: the in-guest half of idlevm.  Runs as root, serves the
 * virtio-serial port org.idlevm.helper.0 and does only what the host cannot
 * do from outside: pin a thread to a CPU, hold a CPU, and tell what the guest
 * kernel and a process look like.  See proto.h for the wire format.
 *
 * One thread serves the port; holders are threads of their own, and answer
 * their HOLD_PIN requests themselves (under the port's lock).  Every pin
 * and hold ends on its lease, on host disconnect and on exit, and pins are
 * journaled so the next helper restores what a killed one left.
 *
 * Nothing here wakes up unless asked: with the host away the loop sleeps
 * until virtio_console's SIGIO says it came (a long safety-net retry
 * aside), with the host there until a request comes, and a HOLD_PIN's end
 * needs no timer (its holder ends it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
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
#include <unistd.h>

#include "helper_daemon.h"

/* How long a reply may wait for the port to drain before it is dropped. */
#define WRITE_TIMEOUT_MS 1000
/* A frame still partial this long after its first bytes is abandoned
 * (see idlevm_decoder_abandon). */
#define STALE_PARTIAL_MS 250
/* How often to look again for a port that is missing or closed by the
 * host, when no SIGIO tells us sooner. */
#define RETRY_MS 500
/* The same with SIGIO armed: only a safety net, so a guest nobody watches
 * sees the helper wake once a minute at most. */
#define RETRY_SIGIO_MS 60000

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
		h->sigio = fcntl(fd, F_SETOWN, getpid()) == 0 &&
			   fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) == 0;
		if (!h->sigio)
			helper_log("no SIGIO on %s: %s; polling every %d ms",
				   h->port_path, strerror(errno), RETRY_MS);
	}
	pthread_mutex_lock(&h->port_lock);
	h->port_fd = fd;
	h->port_is_socket = S_ISSOCK(st.st_mode);
	h->state = PORT_WAIT_HOST;
	pthread_mutex_unlock(&h->port_lock);
	h->logged_missing = false;
	helper_log("serving %s", h->port_path);
	return 0;
}

static double ms_since_request(const struct helper *h)
{
	if (!h->last_request_ns)
		return -1;
	return (double)(helper_now_ns() - h->last_request_ns) / 1e6;
}

/* End every lease: the host that asked for them is gone. */
static void end_leases(struct helper *h, const char *why)
{
	unsigned int pins, holds;
	cpu_set_t idle;

	/* Pins whose holder ended them already are no pins ended here. */
	helper_holds_idle(h->holds, &idle);
	helper_pins_forget_held(&h->pins, &idle);
	/* Holders first: each restores its own pin as it stops. */
	holds = helper_holds_release_all(h->holds);
	pins = helper_pins_release_all(&h->pins);

	if (pins || holds)
		helper_log("%s: ended %u pin(s) and %u hold(s), %.1f ms after the last request",
			   why, pins, holds, ms_since_request(h));
}

void helper_host_gone(struct helper *h, int err)
{
	if (h->state == PORT_CONNECTED)
		helper_log("host disconnected");
	end_leases(h, "host disconnected");
	/* A half frame from the old session must not swallow the first
	 * request of the next one. */
	idlevm_decoder_reset(&h->dec);
	h->partial_since_ns = 0;
	pthread_mutex_lock(&h->port_lock);
	h->session++;
	if (err) {
		helper_log("%s: %s; reopening", h->port_path, strerror(err));
		close(h->port_fd);
		h->port_fd = -1;
		h->state = PORT_CLOSED;
	} else {
		h->state = PORT_WAIT_HOST;
	}
	pthread_mutex_unlock(&h->port_lock);
}

void helper_counters_now(struct helper *h, struct helper_counters *ret)
{
	*ret = h->count;
	helper_holds_counters(h->holds, &ret->holds);
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
		helper_host_gone(h, EIO);
		return;
	}
	if (pfd.revents & POLLHUP) {
		/* A unix socket that hung up stays hung up: reconnect. */
		if (h->port_is_socket)
			helper_host_gone(h, ECONNRESET);
		return;
	}
	helper_log("host connected");
	/* STATS tells this host about its own session only. */
	helper_counters_now(h, &h->base);
	pthread_mutex_lock(&h->port_lock);
	h->state = PORT_CONNECTED;
	pthread_mutex_unlock(&h->port_lock);
}

void helper_write_frame(struct helper *h, const uint8_t *buf, size_t len)
{
	uint64_t deadline = helper_now_ns() + WRITE_TIMEOUT_MS * 1000000ull;
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(h->port_fd, buf + done, len - done);
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

void helper_send_frame(struct helper *h, size_t len)
{
	pthread_mutex_lock(&h->port_lock);
	helper_write_frame(h, h->out, len);
	pthread_mutex_unlock(&h->port_lock);
}

static void read_port(struct helper *h)
{
	for (;;) {
		ssize_t n = read(h->port_fd, idlevm_decoder_tail(&h->dec),
				 idlevm_decoder_space(&h->dec));

		if (n > 0) {
			idlevm_decoder_commit(&h->dec, n);
			helper_drain_frames(h);
			continue;
		}
		if (n == 0) {
			/* virtio: the host closed its side, it may come
			 * back on the same port.  A socket at EOF is done:
			 * connect anew. */
			helper_host_gone(h, h->port_is_socket ? ECONNRESET : 0);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			helper_host_gone(h, errno);
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
		/* Waiting for the host: SIGIO says when it comes. */
		timeout = nfds == 3 ? -1 :
			  h->state == PORT_WAIT_HOST && h->sigio ?
			  RETRY_SIGIO_MS : RETRY_MS;
		if (nfds == 3 && h->partial_since_ns) {
			uint64_t due = h->partial_since_ns +
				       STALE_PARTIAL_MS * 1000000ull;
			uint64_t now = helper_now_ns();

			timeout = now >= due ? 0 :
				  (int)((due - now) / 1000000) + 1;
		}
		arm_timer(h);
		r = poll(fds, nfds, timeout);
		h->count.wakeups++;
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
			helper_host_gone(h, fds[2].revents & POLLHUP ? 0 : EIO);
		if (h->state == PORT_CONNECTED && h->partial_since_ns &&
		    helper_now_ns() - h->partial_since_ns >=
			    STALE_PARTIAL_MS * 1000000ull) {
			size_t n = idlevm_decoder_abandon(&h->dec);

			helper_log("abandoned a partial frame (%zu bytes) after %d ms",
				   n, STALE_PARTIAL_MS);
			h->partial_since_ns = 0;
			helper_drain_frames(h);
		}
	}
	end_leases(h, "exiting");
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: idlevm-helper [--port PATH] [--journal PATH]\n"
		"       idlevm-helper --version\n"
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
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	/* The decoder and the reply buffer are 128 KiB: not on the stack. */
	static struct helper h = { .port_fd = -1,
				   .port_lock = PTHREAD_MUTEX_INITIALIZER };
	const char *journal = HELPER_JOURNAL_DEFAULT;
	unsigned int gone, bad;
	sigset_t mask;
	long ncpus;
	int c, r;

	while ((c = getopt_long(argc, argv, "p:j:hV", opts, NULL)) != -1) {
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
		case 'V':
			printf("idlevm-helper %s (git %s), protocol %u\n",
			       HELPER_VERSION, IVM_GIT_REV, IVM_PROTO_VERSION);
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
				helper_reply_hold_pin, &h, &h.holds) < 0) {
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
