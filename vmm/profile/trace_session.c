// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <traceevent/kbuffer.h>
#include <tracefs/tracefs.h>

#include "base/clock.h"
#include "profile/trace_session.h"

#define TRACEFS_MAGIC_NR 0x74726163	/* "trac", linux/magic.h */
#define MAX_TIDS 256
#define MAX_EVENTS 16
#define MAX_CPUS 1024
/* Per CPU and read: bounds how long one read can take. */
#define MAX_PAGES_PER_READ 256
/* Our events are well under this; a bigger record is not ours. */
#define MAX_RECORD 256
/*
 * An instance's ring buffer, over all host CPUs: per CPU this divided by
 * their number, but at least BUFFER_MIN_KB.  Its pages are the host
 * kernel's, taken when the instance is made: at 2 MiB a CPU, a 64-CPU
 * host gave each guest 384 MiB for its three sessions.  A session is
 * read every few milliseconds (its waits' timeout, the host's sides
 * every 50 ms), and 64 KiB holds some 1,300 records: a guest's threads
 * all on one CPU at 25,000 records a second.  Overflows are counted.
 */
#define BUFFER_TOTAL_KB 4096
#define BUFFER_MIN_KB 64
/*
 * Held sessions: records stamped this soon before a read began wait too.
 * A record is stamped when it is reserved and readable only once
 * committed, and a writer may stall in between (this host is itself a
 * guest): without the margin, about one run in 20 of the ASan build's
 * held_reads test had a record come a read late, behind newer ones.
 */
#define HOLD_MARGIN_NS 1000000ull
/*
 * A backlog (a loop held up, libvirtd away, the budget's stop) grows the
 * pending list and its arenas to hold it, up to the ring buffer's size
 * and twice that in doublings: a soak's heap kept 1.6 MB of them after
 * minute 10, and 6 MB more after libvirtd was away for five minutes.
 * Once a second, with nothing held, a buffer over four times the largest
 * read of that second is freed, to grow again when needed.
 */
#define TRIM_EVERY_NS 1000000000ull
#define PEND_MIN 1024u
#define ARENA_MIN 65536u

struct pending {
	uint64_t ts;
	uint32_t seq;		/* order of reading, for equal stamps */
	uint16_t cpu, size;
	uint32_t off;		/* into the arena */
};

/* Sessions this process made, for instance names of their own. */
static unsigned int sessions_made;

struct ivm_trace_session {
	struct tracefs_instance *instance;
	char *events[MAX_EVENTS];
	size_t nr_events;
	int nr_cpus;
	int *fds;		/* per CPU trace_pipe_raw, -1 when absent */
	/*
	 * An epoll instance over the CPUs' buffers: a waiter polls it alone
	 * (wait_fd), not a descriptor per host CPU, and a read asks it which
	 * buffers hold records (ready, by epoll_wait).  ppoll costs some
	 * 80 ns per descriptor here, epoll_wait the same for 2 or 1,024
	 * (tests/bench/bench_wakeup): with 16 guests on a 64-CPU host a
	 * poll of every buffer was about 80 us per wakeup.
	 */
	int epfd;
	struct pollfd wait_fd;
	struct epoll_event *evs;
	bool *ready;		/* per CPU, from the last poll_now() */
	size_t subbuf_size;
	void *page;
	struct kbuffer *kbuf;
	struct pending *pend;
	size_t nr_pend, cap_pend;
	uint8_t *arena;
	size_t arena_used, arena_cap;
	/*
	 * hold: records stamped at or after the read began wait for the
	 * next read (the first nr_held of pend, their bytes the first of
	 * the arena); spare is the arena they are moved through.
	 */
	bool hold;
	size_t nr_held;
	uint32_t seq;
	uint8_t *spare;
	size_t spare_cap;
	/* The largest read since the last trim, and when that was. */
	size_t peak_pend, peak_bytes;
	uint64_t trimmed_ns;
	uint64_t lost;
	/*
	 * Readiness is exact only with buffer_percent 0 (a poller is told
	 * of the first event); then a read reads only the buffers holding
	 * records, and none when the wait before it found nothing
	 * (wait_empty: ivm_trace_session_polled).
	 */
	bool poll_exact, wait_empty;
	/* Events read with these and never polled (add_quiet), or NULL. */
	struct ivm_trace_session *quiet;
};

bool ivm_tracefs_mounted(void)
{
	struct statfs sfs;

	return statfs(IVM_TRACEFS_DIR, &sfs) == 0 && sfs.f_type == TRACEFS_MAGIC_NR;
}

struct ivm_error *ivm_tracefs_ensure(bool *mounted)
{
	*mounted = false;
	if (ivm_tracefs_mounted())
		return NULL;
	if (mount("nodev", IVM_TRACEFS_DIR, "tracefs", 0, NULL) < 0)
		return ivm_error_os(errno, "mounting tracefs on %s", IVM_TRACEFS_DIR);
	*mounted = true;
	return NULL;
}

/*
 * Remove the instances of idlevm runs that died without cleaning up
 * (SIGKILL): each holds its ring buffers and a pid filter for threads
 * long gone.  Only "idlevm-PID" and "idlevm-PID-N" whose PID no longer
 * exists.
 */
static void remove_stale_instances(void)
{
	DIR *d = opendir(IVM_TRACEFS_DIR "/instances");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct tracefs_instance *inst;
		char *end;
		long pid;

		if (strncmp(e->d_name, "idlevm-", 7))
			continue;
		pid = strtol(e->d_name + 7, &end, 10);
		/* "idlevm-PID", or "idlevm-PID-N": a later session of PID. */
		if (*end == '-' && end[1] >= '0' && end[1] <= '9')
			strtol(end + 1, &end, 10);
		if (*end || pid <= 0 || pid > INT32_MAX ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		inst = tracefs_instance_alloc(NULL, e->d_name);
		if (inst) {
			tracefs_instance_destroy(inst);
			tracefs_instance_free(inst);
		}
	}
	closedir(d);
}

/* Split "system:event" in place. */
static struct ivm_error *split(char *spec, char **event)
{
	char *colon = strchr(spec, ':');

	if (!colon || colon == spec || !colon[1])
		return ivm_error_create(IVM_ERROR_INVALID,
					"bad trace event '%s' (want system:event)",
					spec);
	*colon = '\0';
	*event = colon + 1;
	return NULL;
}

/* The ring buffer's sub-buffer size (6.8+ makes it settable). */
static size_t subbuf_size(struct tracefs_instance *inst)
{
	long long kb;
	long page = sysconf(_SC_PAGESIZE);

	if (tracefs_instance_file_read_number(inst, "buffer_subbuf_size_kb",
					      &kb) == 0 &&
	    kb > 0 && kb <= 1024)
		return (size_t)kb * 1024;
	return page > 0 ? (size_t)page : 4096;
}

/* The host CPUs, each with a buffer of the instance's (at most MAX_CPUS). */
static int host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	return n <= 0 ? 1 : n > MAX_CPUS ? MAX_CPUS : (int)n;
}

static void set_buffer_size(const struct ivm_trace_session *s)
{
	long kb = BUFFER_TOTAL_KB / s->nr_cpus;
	char text[24];

	if (kb < BUFFER_MIN_KB)
		kb = BUFFER_MIN_KB;
	snprintf(text, sizeof(text), "%ld", kb);
	tracefs_instance_file_write(s->instance, "buffer_size_kb", text);
}

static struct ivm_error *open_cpus(struct ivm_trace_session *s)
{
	size_t n = (size_t)s->nr_cpus;
	int cpu, open_ok = 0;

	s->fds = calloc(n, sizeof(*s->fds));
	s->evs = calloc(n, sizeof(*s->evs));
	s->ready = calloc(n, sizeof(*s->ready));
	s->subbuf_size = subbuf_size(s->instance);
	s->page = malloc(s->subbuf_size);
	s->kbuf = kbuffer_alloc(sizeof(long) == 8 ? KBUFFER_LSIZE_8 :
				KBUFFER_LSIZE_4, KBUFFER_ENDIAN_LITTLE);
	if (!s->fds || !s->evs || !s->ready || !s->page || !s->kbuf)
		return &ivm_enomem;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return ivm_error_os(errno, "creating an epoll instance");
	s->wait_fd = (struct pollfd){ .fd = s->epfd, .events = POLLIN };
	for (cpu = 0; cpu < s->nr_cpus; cpu++) {
		char name[64], *path;

		snprintf(name, sizeof(name), "per_cpu/cpu%d/trace_pipe_raw", cpu);
		path = tracefs_instance_get_file(s->instance, name);
		s->fds[cpu] = path ? open(path, O_RDONLY | O_NONBLOCK |
						O_CLOEXEC) : -1;
		tracefs_put_tracing_file(path);
		if (s->fds[cpu] >= 0) {
			struct epoll_event ev = { .events = EPOLLIN,
						  .data.u32 = (uint32_t)cpu };

			if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->fds[cpu],
				      &ev))
				return ivm_error_os(errno,
						    "polling trace buffer %d",
						    cpu);
			open_ok++;
		}
	}
	if (!open_ok)
		return ivm_error_os(errno ? errno : ENOENT,
				    "opening the trace buffers of instance %s",
				    tracefs_instance_get_name(s->instance));
	return NULL;
}

struct ivm_error *ivm_trace_session_create(const char *const *events,
					   size_t nr_events, const pid_t *tids,
					   size_t nr_tids, unsigned int flags,
					   struct ivm_trace_session **ret)
{
	struct ivm_trace_session *s;
	struct ivm_error *err;
	char name[64], *pids = NULL;
	size_t i, len = 0;
	bool mounted;

	if (!nr_events || nr_events > MAX_EVENTS || !nr_tids ||
	    nr_tids > MAX_TIDS)
		return ivm_error_create(IVM_ERROR_INVALID,
					"trace session: 1..%d events and 1..%d threads",
					MAX_EVENTS, MAX_TIDS);
	s = calloc(1, sizeof(*s));
	pids = calloc(nr_tids, 12);
	if (!s || !pids) {
		free(s);
		free(pids);
		return &ivm_enomem;
	}
	s->epfd = -1;
	err = ivm_tracefs_ensure(&mounted);
	if (err)
		goto fail;
	for (i = 0; i < nr_events; i++) {
		char *event;

		s->events[i] = strdup(events[i]);
		if (!s->events[i]) {
			err = &ivm_enomem;
			goto fail;
		}
		s->nr_events++;
		err = split(s->events[i], &event);
		if (err)
			goto fail;
	}
	remove_stale_instances();
	/* One instance per session: several guests in one process. */
	if (sessions_made)
		snprintf(name, sizeof(name), "idlevm-%d-%u", (int)getpid(),
			 sessions_made);
	else
		snprintf(name, sizeof(name), "idlevm-%d", (int)getpid());
	sessions_made++;
	s->instance = tracefs_instance_create(name);
	if (!s->instance) {
		err = ivm_error_os(errno, "creating tracefs instance %s", name);
		goto fail;
	}
	tracefs_trace_off(s->instance);
	/*
	 * Monotonic stamps, a reader woken by the first event, and room for
	 * many reads' worth of a busy guest's switches.  Not fatal:
	 * an older kernel without buffer_percent wakes readers at half full
	 * (the loop's timeouts still read in time), one without the mono
	 * clock cannot be used.
	 */
	if (tracefs_instance_file_write(s->instance, "trace_clock", "mono") < 0) {
		err = ivm_error_os(errno, "setting the trace clock to mono");
		goto fail;
	}
	s->poll_exact = tracefs_instance_file_write(s->instance,
						    "buffer_percent", "0") > 0;
	s->nr_cpus = host_cpus();
	set_buffer_size(s);
	/* Before the pid list: a child of a thread listed is listed. */
	if ((flags & IVM_TRACE_FOLLOW_FORKS) &&
	    tracefs_option_enable(s->instance, TRACEFS_OPTION_EVENT_FORK) < 0) {
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "no event-fork option: cannot trace new threads");
		goto fail;
	}
	/* Trace only the chosen threads, before any event is on. */
	for (i = 0; i < nr_tids; i++)
		len += (size_t)sprintf(pids + len, "%s%d", i ? " " : "",
				       (int)tids[i]);
	if (tracefs_instance_file_write(s->instance, "set_event_pid", pids) < 0) {
		err = ivm_error_os(errno, "limiting tracing to the vCPU threads");
		goto fail;
	}
	for (i = 0; i < nr_events; i++) {
		const char *sys = s->events[i];
		const char *ev = sys + strlen(sys) + 1;

		if (tracefs_event_enable(s->instance, sys, ev) < 0) {
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "cannot enable trace event %s:%s",
					       sys, ev);
			goto fail;
		}
	}
	err = open_cpus(s);
	if (err)
		goto fail;
	tracefs_trace_on(s->instance);
	free(pids);
	*ret = s;
	return NULL;
fail:
	free(pids);
	ivm_trace_session_destroy(s);
	return err;
}

void ivm_trace_session_destroy(struct ivm_trace_session *s)
{
	size_t i;
	int cpu;

	if (!s)
		return;
	ivm_trace_session_destroy(s->quiet);
	for (cpu = 0; s->fds && cpu < s->nr_cpus; cpu++)
		if (s->fds[cpu] >= 0)
			close(s->fds[cpu]);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->instance) {
		tracefs_trace_off(s->instance);
		for (i = 0; i < s->nr_events; i++) {
			const char *sys = s->events[i];

			tracefs_event_disable(s->instance, sys,
					      sys + strlen(sys) + 1);
		}
		tracefs_instance_destroy(s->instance);
		tracefs_instance_free(s->instance);
	}
	for (i = 0; i < s->nr_events; i++)
		free(s->events[i]);
	if (s->kbuf)
		kbuffer_free(s->kbuf);
	free(s->fds);
	free(s->evs);
	free(s->ready);
	free(s->page);
	free(s->pend);
	free(s->arena);
	free(s->spare);
	free(s);
}

static bool has_event(const struct ivm_trace_session *s, const char *sys,
		      const char *event)
{
	size_t i;

	for (i = 0; i < s->nr_events; i++)
		if (!strcmp(s->events[i], sys) &&
		    !strcmp(s->events[i] + strlen(sys) + 1, event))
			return true;
	return false;
}

struct ivm_error *ivm_trace_session_add_quiet(struct ivm_trace_session *s,
					      const char *const *events,
					      size_t nr_events,
					      const pid_t *tids,
					      size_t nr_tids,
					      unsigned int flags)
{
	if (s->quiet)
		return ivm_error_create(IVM_ERROR_INVALID,
					"trace session: quiet events already added");
	return ivm_trace_session_create(events, nr_events, tids, nr_tids,
					flags, &s->quiet);
}

struct ivm_error *ivm_trace_session_filter(struct ivm_trace_session *s,
					   const char *event,
					   const char *filter)
{
	const char *colon = strchr(event, ':');
	char sys[64];

	if (!colon || (size_t)(colon - event) >= sizeof(sys))
		return ivm_error_create(IVM_ERROR_INVALID,
					"bad trace event '%s' (want system:event)",
					event);
	snprintf(sys, sizeof(sys), "%.*s", (int)(colon - event), event);
	if (s->quiet && has_event(s->quiet, sys, colon + 1))
		s = s->quiet;
	if (tracefs_event_file_write(s->instance, sys, colon + 1, "filter",
				     filter) < 0)
		return ivm_error_create(IVM_ERROR_INVALID,
					"the kernel refuses filter '%s' on %s",
					filter, event);
	return NULL;
}

uint64_t ivm_trace_session_lost(const struct ivm_trace_session *s)
{
	return s->lost;
}

static bool keep(struct ivm_trace_session *s, int cpu, uint32_t seq,
		 uint64_t ts, const void *data, int size)
{
	struct pending *p;

	if (size <= 0 || size > MAX_RECORD)
		return true;	/* not one of ours; skip */
	if (s->nr_pend == s->cap_pend) {
		size_t cap = s->cap_pend ? 2 * s->cap_pend : PEND_MIN;
		struct pending *n = realloc(s->pend, cap * sizeof(*n));

		if (!n)
			return false;
		s->pend = n;
		s->cap_pend = cap;
	}
	if (s->arena_used + (size_t)size > s->arena_cap) {
		size_t cap = s->arena_cap ? 2 * s->arena_cap : ARENA_MIN;
		uint8_t *n;

		while (cap < s->arena_used + (size_t)size)
			cap *= 2;
		n = realloc(s->arena, cap);
		if (!n)
			return false;
		s->arena = n;
		s->arena_cap = cap;
	}
	p = &s->pend[s->nr_pend++];
	p->ts = ts;
	p->seq = seq;
	p->cpu = (uint16_t)cpu;
	p->size = (uint16_t)size;
	p->off = (uint32_t)s->arena_used;
	memcpy(s->arena + s->arena_used, data, (size_t)size);
	s->arena_used += (size_t)size;
	return true;
}

/*
 * Drain one CPU's buffer, the session's own or its quiet instance's
 * (from), into the pending list, or only counted (!store: discarding).
 * To the end (EAGAIN): a page shorter than full is no sign that none
 * follows, as the rest of a page read before while its writer was on it
 * comes short too.  Returns the records counted.
 */
static size_t drain_cpu(struct ivm_trace_session *s,
			struct ivm_trace_session *from, int cpu, bool store)
{
	size_t counted = 0;
	int pages;

	for (pages = 0; pages < MAX_PAGES_PER_READ; pages++) {
		unsigned long long ts;
		ssize_t n = read(from->fds[cpu], from->page, from->subbuf_size);
		void *data;
		int missed;

		if (n <= 0)
			break;	/* EAGAIN: empty; anything else: next time */
		if (kbuffer_load_subbuffer(from->kbuf, from->page) < 0) {
			s->lost++;
			continue;
		}
		missed = kbuffer_missed_events(from->kbuf);
		if (missed)
			s->lost += missed > 0 ? (uint64_t)missed : 1;
		for (data = kbuffer_read_event(from->kbuf, &ts); data;
		     data = kbuffer_next_event(from->kbuf, &ts))
			if (!store)
				counted++;
			else if (!keep(s, cpu, s->seq++, ts, data,
				       kbuffer_event_size(from->kbuf)))
				s->lost++;
	}
	return counted;
}

/*
 * Which of s's CPU buffers hold records (s->ready), by its epoll instance
 * without waiting: one system call whatever the number of host CPUs, not
 * a read per CPU (64 of them, mostly finding nothing, on a 64-CPU host).
 * False when s's readiness is not exact: read them all.
 */
static bool poll_now(struct ivm_trace_session *s)
{
	int n, i;

	if (!s->poll_exact)
		return false;
	n = epoll_wait(s->epfd, s->evs, s->nr_cpus, 0);
	if (n < 0)
		return false;
	memset(s->ready, 0, (size_t)s->nr_cpus * sizeof(*s->ready));
	/* EPOLLERR, EPOLLHUP and the like too: let the read see. */
	for (i = 0; i < n; i++)
		if (s->evs[i].data.u32 < (uint32_t)s->nr_cpus)
			s->ready[s->evs[i].data.u32] = true;
	return true;
}

/*
 * The buffers of from (s or its quiet instance) into s's pending list, or
 * only counted (!store); returns the records counted.
 */
static size_t drain(struct ivm_trace_session *s,
		    struct ivm_trace_session *from, bool hints, bool store)
{
	size_t counted = 0;
	int cpu;

	for (cpu = 0; cpu < from->nr_cpus; cpu++)
		if (from->fds[cpu] >= 0 && (!hints || from->ready[cpu]))
			counted += drain_cpu(s, from, cpu, store);
	return counted;
}

/*
 * Both instances' buffers, s's skipped when a wait just found them empty
 * (wait_empty, which this uses up).
 */
static size_t drain_both(struct ivm_trace_session *s, bool store)
{
	size_t counted = 0;

	if (!s->wait_empty)
		counted += drain(s, s, poll_now(s), store);
	s->wait_empty = false;
	if (s->quiet)
		counted += drain(s, s->quiet, poll_now(s->quiet), store);
	return counted;
}

/*
 * See TRIM_EVERY_NS.  Only with nothing held: pend and arena are free.
 * Buffers at their first size (the usual case) cost no clock read.
 */
static void trim(struct ivm_trace_session *s)
{
	uint64_t now;

	if (s->cap_pend <= PEND_MIN && s->arena_cap <= ARENA_MIN &&
	    s->spare_cap <= ARENA_MIN)
		return;
	now = ivm_mono_ns();
	if (now - s->trimmed_ns < TRIM_EVERY_NS)
		return;
	if (s->cap_pend > PEND_MIN && s->cap_pend > 4 * s->peak_pend) {
		free(s->pend);
		s->pend = NULL;
		s->cap_pend = 0;
	}
	if (s->arena_cap > ARENA_MIN && s->arena_cap > 4 * s->peak_bytes) {
		free(s->arena);
		s->arena = NULL;
		s->arena_cap = 0;
	}
	if (s->spare_cap > ARENA_MIN && s->spare_cap > 4 * s->peak_bytes) {
		free(s->spare);
		s->spare = NULL;
		s->spare_cap = 0;
	}
	s->peak_pend = s->peak_bytes = 0;
	s->trimmed_ns = now;
}

size_t ivm_trace_session_memory(const struct ivm_trace_session *s)
{
	return s->cap_pend * sizeof(*s->pend) + s->arena_cap + s->spare_cap;
}

static int by_time(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Keep pend[from..nr_pend) for the next read: moved to the front, their
 * bytes packed at the arena's start (through spare: they are in stamp
 * order, not the arena's).  False when out of memory: nothing is held.
 */
static bool hold_rest(struct ivm_trace_session *s, size_t from)
{
	size_t i, bytes = 0;
	uint8_t *t;

	for (i = from; i < s->nr_pend; i++)
		bytes += s->pend[i].size;
	if (bytes > s->spare_cap) {
		t = realloc(s->spare, bytes);
		if (!t)
			return false;
		s->spare = t;
		s->spare_cap = bytes;
	}
	bytes = 0;
	for (i = from; i < s->nr_pend; i++) {
		struct pending *p = &s->pend[i];

		memcpy(s->spare + bytes, s->arena + p->off, p->size);
		p->off = (uint32_t)bytes;
		bytes += p->size;
		s->pend[i - from] = *p;
	}
	t = s->arena;
	s->arena = s->spare;
	s->spare = t;
	i = s->arena_cap;
	s->arena_cap = s->spare_cap;
	s->spare_cap = i;
	s->nr_held = s->nr_pend - from;
	return true;
}

struct ivm_error *ivm_trace_session_read(
	struct ivm_trace_session *s,
	int (*fn)(void *ctx, const void *data, size_t size, int cpu,
		  uint64_t ts),
	void *ctx)
{
	uint64_t upto = s->hold ? ivm_mono_ns() - HOLD_MARGIN_NS : UINT64_MAX;
	size_t i, bytes = 0;

	/* What the last read held waits at the front. */
	for (i = 0; i < s->nr_held; i++)
		bytes += s->pend[i].size;
	s->nr_pend = s->nr_held;
	s->arena_used = bytes;
	s->nr_held = 0;
	if (!s->nr_pend) {
		s->seq = 0;
		trim(s);
	}
	/*
	 * The buffers holding records, asked now.  Held, after upto was
	 * taken: a buffer found empty holds nothing stamped before upto but
	 * a record whose writer stalled past the margin, as sound as reading
	 * every buffer.  Not held, a wait that found none just before spares
	 * the asking: records after it are wanted only at the next read.
	 */
	drain_both(s, true);
	if (s->nr_pend > s->peak_pend)
		s->peak_pend = s->nr_pend;
	if (s->arena_used > s->peak_bytes)
		s->peak_bytes = s->arena_used;
	/* Each CPU's records are in order; merge them by stamp. */
	if (s->nr_pend)	/* pend is NULL until the first record */
		qsort(s->pend, s->nr_pend, sizeof(*s->pend), by_time);
	for (i = 0; i < s->nr_pend; i++) {
		const struct pending *p = &s->pend[i];

		/* Out of memory to hold them: handed over now. */
		if (p->ts >= upto && hold_rest(s, i))
			return NULL;
		if (fn(ctx, s->arena + p->off, p->size, p->cpu, p->ts)) {
			s->lost += s->nr_pend - i - 1;
			break;
		}
	}
	return NULL;
}

void ivm_trace_session_hold(struct ivm_trace_session *s, bool on)
{
	s->hold = on;
	/* A held read polls for itself: see the header. */
	s->wait_empty = false;
}

struct ivm_error *ivm_trace_session_enable(struct ivm_trace_session *s,
					   bool on)
{
	int r = on ? tracefs_trace_on(s->instance) :
		     tracefs_trace_off(s->instance);

	if (s->quiet && r >= 0) {
		struct ivm_error *err = ivm_trace_session_enable(s->quiet, on);

		if (err)
			return err;
	}

	if (r < 0)
		return ivm_error_os(errno, "turning tracing %s in %s",
				    on ? "on" : "off",
				    tracefs_instance_get_name(s->instance));
	return NULL;
}

/*
 * Counted page by page, not kept: a budget's unwatched stretch leaves
 * up to a ring buffer of records, which a read would first copy.
 */
size_t ivm_trace_session_discard(struct ivm_trace_session *s)
{
	size_t n = s->nr_held;

	s->nr_held = 0;
	s->nr_pend = 0;
	s->arena_used = 0;
	s->seq = 0;
	/* Everything there now, whatever a wait found before. */
	s->wait_empty = false;
	return n + drain_both(s, false);
}

void ivm_trace_session_polled(struct ivm_trace_session *s,
			      const struct pollfd *fds, size_t n)
{
	s->wait_empty = fds && s->poll_exact && !s->hold && n == 1 &&
			fds[0].fd == s->epfd && !fds[0].revents;
}

size_t ivm_trace_session_pollfds(const struct ivm_trace_session *s,
				 const struct pollfd **ret)
{
	*ret = &s->wait_fd;
	return 1;
}

struct ivm_error *ivm_trace_session_wait(struct ivm_trace_session *s,
					 uint64_t timeout_ns, bool *ret)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};
	int n = ppoll(&s->wait_fd, 1, &ts, NULL);

	*ret = n > 0;
	if (n >= 0)
		ivm_trace_session_polled(s, &s->wait_fd, 1);
	if (n < 0 && errno != EINTR)
		return ivm_error_os(errno, "waiting for trace events");
	return NULL;
}
