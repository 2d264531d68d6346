// SPDX-License-Identifier: MIT
/*
 * core-mutate: idlevm's commands over a real guest's core with the words
 * they read changed, one mutation at a time, under the ASan + UBSan build.
 * The fuzz targets (tests/fuzz/) take one parser each; this takes the whole
 * tool, from the first page walk to the last line printed.
 *
 *   core-mutate --idlevm BIN --core FILE --vmlinux FILE --pid N
 *               --workdir DIR [--seed S] [--count N] [--only I]
 *               [--timeout-ms MS] [--rss-mb MB] [--verbose]
 *
 * 1. Baseline: `info`, `ps`, `maps --pid N` and `stack --pid N` on the
 *    core, twice (their output must not change between runs), the first
 *    time with IVM_CORE_TRACE (vmm/gmem/gmem_core.c) naming the guest
 *    memory and vCPU notes each reads.
 * 2. Sites: every word of a small read (up to 64 bytes: a pointer chased,
 *    a field), the words of a big one (a task_struct, a page of stack, a
 *    kernel image block) that point at memory read (followed, most
 *    likely), its other pointer-, user-pointer- and count-like words, and
 *    the NUL-terminated strings of either.
 * 3. Mutation I of seed S (a function of S and I alone, so --only I
 *    replays it): one site, changed the way hostile memory would change
 *    it.  A pointer points to itself, to another object read, to another
 *    pointer's target, beyond guest RAM, at a user/kernel or canonical
 *    boundary, to list poison, or becomes 0 or all-ones; a count becomes
 *    0, huge or negative; a string loses its NUL or is filled with
 *    control bytes, escapes and format directives.
 * 4. Each command whose reads touch the site runs on the core patched
 *    through IVM_CORE_PATCH (the others read the same bytes as in the
 *    baseline, so their outcome is known), killed after the timeout
 *    (default 2 s, retried once: a hang is one that times out twice), its
 *    peak RSS taken from wait4() (bound default 512 MB; ASan's
 *    hard_rss_limit_mb stops it at twice that), its output files capped at
 *    64 MiB.
 *
 * Outcomes: identical, different output, clean error (a non-zero exit, the
 * last line on stderr starting "idlevm"), and the failures: crash (a signal, a
 * sanitizer report), hang, memory blow-up (RSS or output over the bound),
 * silent error (non-zero exit without an idlevm message), control bytes
 * in the output (the guest's strings must be escaped).  Prints a line per
 * failing mutation (with how to replay it), then the figures; exits 1 if
 * any mutation failed, 2 on a usage error or a baseline that does not
 * run.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SMALL_READ 64		/* bytes: a field or a pointer chased */
#define STRING_READ 8192	/* strings are looked for in reads this small */
#define MAX_STRINGS_PER_READ 64
#define MAX_PATCH 64		/* bytes changed by one mutation, at most */
#define OUTPUT_CAP (64 << 20)	/* RLIMIT_FSIZE of a command's output */
#define SANITIZER_EXIT 86	/* exit code of a sanitizer report */

enum cmd { CMD_INFO, CMD_PS, CMD_MAPS, CMD_STACK, NR_CMDS };
static const char *const cmd_names[NR_CMDS] = { "info", "ps", "maps", "stack" };

enum outcome {
	OUT_IDENTICAL, OUT_DIFFERENT, OUT_ERROR,
	OUT_CRASH, OUT_HANG, OUT_MEMORY, OUT_SILENT, OUT_CONTROL,
	NR_OUTCOMES
};
static const char *const outcome_names[NR_OUTCOMES] = {
	"identical", "different output", "clean error",
	"crash", "hang", "memory blow-up", "silent error", "control bytes",
};
#define FIRST_FAILURE OUT_CRASH

/* One read of a baseline command, from its IVM_CORE_TRACE file. */
struct read_rec {
	char space;		/* 'p'hysical, 'v'irtual, vCPU 'n'ote */
	uint64_t addr, off, len;
};

/*
 * A range some command read: per command, of the file; over all of them,
 * of guest physical memory.  Sorted and merged.
 */
struct span {
	uint64_t off, end;
};

struct site {
	char space;
	uint64_t addr, off;	/* guest address and file offset of byte 0 */
	unsigned int len;	/* word: 1, 2, 4, 8; string: bytes with its NUL */
	bool string;
};

struct site_list {
	struct site *v;
	size_t nr, cap;
};

struct run {
	enum outcome outcome;
	int status;
	long rss_kb;
	double seconds;
	char reason[160];	/* from stderr: see reason_line() */
};

struct harness {
	const char *idlevm, *core, *vmlinux, *workdir;
	unsigned long pid;
	uint64_t seed;
	unsigned long count;
	long only;
	int timeout_ms;
	long rss_mb;
	bool verbose;

	const uint8_t *data;	/* the core, read-only */
	size_t size;
	uint64_t page_offset_base;	/* from info; 0: unknown */

	struct span *spans[NR_CMDS];
	size_t nr_spans[NR_CMDS];
	struct site_list small, followed, big, strings;
	struct span *phys;	/* guest physical ranges read, merged */
	size_t nr_phys;
	uint64_t *targets;	/* values of the pointers followed */
	size_t nr_targets, cap_targets;
	uint64_t *objects;	/* physical addresses of reads, for "another object" */
	size_t nr_objects, cap_objects;
	unsigned long nr_reads, nr_pages;

	char *base_out[NR_CMDS], *base_err[NR_CMDS];
	size_t base_out_len[NR_CMDS], base_err_len[NR_CMDS];

	unsigned long outcomes[NR_CMDS][NR_OUTCOMES];
	unsigned long runs, retries, failed_mutations;
	long max_rss_kb;
	double max_seconds;
	const char *slowest_cmd;
	unsigned long slowest_index;
};

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "core-mutate: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void *xrealloc(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		die("out of memory");
	p = realloc(p, n && size ? n * size : 1);
	if (!p)
		die("out of memory");
	return p;
}

/* Append val to the growable array arr of nr elements, cap allocated. */
#define PUSH(arr, nr, cap, val)						\
	do {								\
		if ((nr) == (cap)) {					\
			(cap) = (cap) ? 2 * (cap) : 64;			\
			(arr) = xrealloc((arr), (cap), sizeof(*(arr)));	\
		}							\
		(arr)[(nr)++] = (val);					\
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- deterministic randomness: splitmix64 of (seed, index) ------------- */

static uint64_t splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t pick(uint64_t *rng, uint64_t n)
{
	return n ? splitmix(rng) % n : 0;
}

/* ---- files ------------------------------------------------------------ */

static char *path_in(const struct harness *h, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", h->workdir, name) < 0)
		die("out of memory");
	return p;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n = 0, cap = 0, got;

	if (!f)
		die("%s: %s", path, strerror(errno));
	do {
		if (cap - n < 65536) {
			cap = cap ? 2 * cap : 65536;
			buf = xrealloc(buf, cap + 1, 1);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* ---- running one command ----------------------------------------------- */

/* The command running, in a process group of its own (0: none). */
static volatile pid_t running;

/* Killed (the e2e runner's timeout, Ctrl-C): take the command along. */
static void on_signal(int sig)
{
	if (running > 0)
		kill(-running, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Run command cmd under the timeout, with IVM_CORE_TRACE=trace or
 * IVM_CORE_PATCH=patch (either may be NULL); its output goes to the
 * workdir's out and err.  Returns the wait status (-1: killed on timeout).
 */
static int spawn(struct harness *h, enum cmd cmd, const char *trace,
		 const char *patch, long *rss_kb, double *seconds)
{
	char pid[32], *out = path_in(h, "out"), *err = path_in(h, "err");
	char asan[128];
	const char *argv[12];
	struct rusage ru;
	struct pollfd pfd;
	int n = 0, status = 0, pidfd, ready;
	double t0 = now_s();
	sigset_t fatal, mask;
	pid_t child;

	snprintf(pid, sizeof(pid), "%lu", h->pid);
	/* A report ends the run with its own code, never that of an error. */
	snprintf(asan, sizeof(asan),
		 "exitcode=%d:hard_rss_limit_mb=%ld:color=never",
		 SANITIZER_EXIT, 2 * h->rss_mb);
	argv[n++] = h->idlevm;
	argv[n++] = cmd_names[cmd];
	argv[n++] = "--core";
	argv[n++] = h->core;
	argv[n++] = "--vmlinux";
	argv[n++] = h->vmlinux;
	if (cmd == CMD_MAPS || cmd == CMD_STACK) {
		argv[n++] = "--pid";
		argv[n++] = pid;
	}
	argv[n] = NULL;

	/* No kill between fork and running: the command would outlive us. */
	sigemptyset(&fatal);
	sigaddset(&fatal, SIGTERM);
	sigaddset(&fatal, SIGINT);
	sigaddset(&fatal, SIGHUP);
	sigprocmask(SIG_BLOCK, &fatal, &mask);
	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (!child) {
		struct rlimit fsize = { OUTPUT_CAP, OUTPUT_CAP };
		int o, e;

		setpgid(0, 0);
		sigprocmask(SIG_SETMASK, &mask, NULL);
		o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		setrlimit(RLIMIT_FSIZE, &fsize);
		unsetenv("IVM_CORE_TRACE");
		unsetenv("IVM_CORE_PATCH");
		if (trace)
			setenv("IVM_CORE_TRACE", trace, 1);
		if (patch)
			setenv("IVM_CORE_PATCH", patch, 1);
		setenv("ASAN_OPTIONS", asan, 1);
		setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1:exitcode=86", 1);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	setpgid(child, child);	/* before any kill of the group, either way */
	running = child;
	sigprocmask(SIG_SETMASK, &mask, NULL);
	pidfd = syscall(SYS_pidfd_open, child, 0);
	if (pidfd < 0)
		die("pidfd_open: %s", strerror(errno));
	pfd = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	do {
		int left = h->timeout_ms - (int)((now_s() - t0) * 1000);

		/* A negative timeout would be none at all. */
		ready = poll(&pfd, 1, left > 0 ? left : 0);
	} while (ready < 0 && errno == EINTR);
	close(pidfd);
	if (ready <= 0)
		kill(-child, SIGKILL);
	if (wait4(child, &status, 0, &ru) < 0)
		die("wait4: %s", strerror(errno));
	/* Whatever it left behind (a symbolizer of a report) goes too. */
	kill(-child, SIGKILL);
	running = 0;
	*seconds = now_s() - t0;
	*rss_kb = ru.ru_maxrss;
	free(out);
	free(err);
	return ready <= 0 ? -1 : status;
}

static bool has_control_bytes(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
			return true;
	}
	return false;
}

/*
 * The line of stderr that says what happened: a sanitizer's first, else
 * the last one (idlevm's error).
 */
static void reason_line(const char *s, size_t len, char *buf, size_t size)
{
	const char *p = strstr(s, "runtime error:");
	size_t end = len, start;

	if (!p)
		p = strstr(s, "ERROR: ");
	if (p) {
		start = p - s;
		end = start + strcspn(p, "\n");
	} else {
		while (end && s[end - 1] == '\n')
			end--;
	}
	start = end;
	while (start && s[start - 1] != '\n')
		start--;
	snprintf(buf, size, "%.*s", (int)(end - start), s + start);
}

static void classify(struct harness *h, enum cmd cmd, const char *patch,
		     struct run *r)
{
	char *outp, *errp, *out, *err;
	size_t out_len, err_len;

	r->status = spawn(h, cmd, NULL, patch, &r->rss_kb, &r->seconds);
	h->runs++;
	if (r->status == -1) {
		/* A loaded host, or a hang: a hang hangs again. */
		h->retries++;
		r->status = spawn(h, cmd, NULL, patch, &r->rss_kb, &r->seconds);
		h->runs++;
	}
	if (r->rss_kb > h->max_rss_kb)
		h->max_rss_kb = r->rss_kb;
	outp = path_in(h, "out");
	errp = path_in(h, "err");
	out = slurp(outp, &out_len);
	err = slurp(errp, &err_len);
	reason_line(err, err_len, r->reason, sizeof(r->reason));
	if (r->status == -1)
		r->outcome = OUT_HANG;
	else if (strstr(err, "hard rss limit exhausted") ||
		 (WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGXFSZ) ||
		 r->rss_kb > h->rss_mb * 1024)
		r->outcome = OUT_MEMORY;
	else if (WIFSIGNALED(r->status) ||
		 WEXITSTATUS(r->status) == SANITIZER_EXIT ||
		 strstr(err, "Sanitizer") || strstr(err, "runtime error:"))
		r->outcome = OUT_CRASH;
	else if (has_control_bytes(out, out_len) ||
		 has_control_bytes(err, err_len))
		r->outcome = OUT_CONTROL;
	else if (WEXITSTATUS(r->status) == 0)
		r->outcome = out_len == h->base_out_len[cmd] &&
			     err_len == h->base_err_len[cmd] &&
			     !memcmp(out, h->base_out[cmd], out_len) &&
			     !memcmp(err, h->base_err[cmd], err_len) ?
			     OUT_IDENTICAL : OUT_DIFFERENT;
	else if (!strncmp(r->reason, "idlevm", 6))
		r->outcome = OUT_ERROR;
	else
		r->outcome = OUT_SILENT;
	free(out);
	free(err);
	free(outp);
	free(errp);
}

/* ---- baseline: what each command reads --------------------------------- */

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Whether [off, off + len) meets one of the sorted, merged spans. */
static bool spans_meet(const struct span *s, size_t nr, uint64_t off,
		       uint64_t len)
{
	size_t lo = 0, hi = nr;

	/* The last span starting before off + len, if it ends after off. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s[mid].off < off + len)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && s[lo - 1].end > off;
}

static bool cmd_reads(const struct harness *h, enum cmd cmd, uint64_t off,
		      uint64_t len)
{
	return spans_meet(h->spans[cmd], h->nr_spans[cmd], off, len);
}

/* Sort and merge spans in place; returns how many are left. */
static size_t spans_merge(struct span *s, size_t nr)
{
	size_t i = 0, j;

	qsort(s, nr, sizeof(*s), span_cmp);
	for (j = 0; j < nr; j++) {
		if (i && s[j].off <= s[i - 1].end) {
			if (s[j].end > s[i - 1].end)
				s[i - 1].end = s[j].end;
		} else {
			s[i++] = s[j];
		}
	}
	return i;
}

static uint64_t load(const uint8_t *p, unsigned int len)
{
	uint64_t v = 0;

	while (len--)
		v = v << 8 | p[len];
	return v;
}

static bool is_kernel_pointer(uint64_t v)
{
	return v >= 0xffff800000000000ull && v != UINT64_MAX;
}

static void add_site(struct site_list *l, const struct read_rec *r,
		     uint64_t at, unsigned int len, bool string)
{
	struct site s = {
		.space = r->space, .addr = r->addr + at, .off = r->off + at,
		.len = len, .string = string,
	};

	PUSH(l->v, l->nr, l->cap, s);
}

/* NUL-terminated runs of at least 3 printable bytes, as sites. */
static void find_strings(struct harness *h, const struct read_rec *r)
{
	const uint8_t *p = h->data + r->off;
	uint64_t i = 0, start;
	int found = 0;

	while (i < r->len && found < MAX_STRINGS_PER_READ) {
		start = i;
		while (i < r->len && p[i] >= 0x20 && p[i] < 0x7f)
			i++;
		if (i < r->len && !p[i] && i - start >= 3 &&
		    i - start < MAX_PATCH) {
			add_site(&h->strings, r, start, i - start + 1, true);
			found++;
		}
		i++;
	}
}

/*
 * Whether v, read from the guest, points at memory some command read: then
 * it was most likely followed (a list link, a task's mm), and its value is
 * kept as a target for other pointers (a cycle, a jump to another list).
 */
static bool followed(struct harness *h, uint64_t v)
{
	if (!is_kernel_pointer(v) || !h->page_offset_base ||
	    v < h->page_offset_base ||
	    !spans_meet(h->phys, h->nr_phys, v - h->page_offset_base, 1))
		return false;
	PUSH(h->targets, h->nr_targets, h->cap_targets, v);
	return true;
}

static void add_read(struct harness *h, const struct read_rec *r)
{
	const uint8_t *p = h->data + r->off;
	uint64_t at;

	h->nr_reads++;
	if (r->space == 'p')
		PUSH(h->objects, h->nr_objects, h->cap_objects, r->addr);
	if (r->len <= STRING_READ && r->space != 'n')
		find_strings(h, r);
	/* A field or a pointer chased, or a vCPU's registers: every word. */
	if (r->len <= SMALL_READ || r->space == 'n') {
		for (at = 0; at < r->len;) {
			unsigned int w = r->len - at >= 8 ? 8 :
					 r->len - at >= 4 ? 4 :
					 r->len - at >= 2 ? 2 : 1;

			if (w == 8)
				followed(h, load(p + at, 8));
			add_site(&h->small, r, at, w, false);
			at += w;
		}
		return;
	}
	/* A structure or a page: the words that look like something. */
	for (at = (8 - r->addr % 8) % 8; at + 8 <= r->len; at += 8) {
		uint64_t v = load(p + at, 8);

		if (followed(h, v))
			add_site(&h->followed, r, at, 8, false);
		else if (is_kernel_pointer(v) ||
			 (v >= 0x400000 && v < 0x800000000000ull))
			add_site(&h->big, r, at, 8, false);
		else if (v && v < 0x10000)
			add_site(&h->big, r, at, 4, false);
	}
}

static int read_cmp(const void *a, const void *b)
{
	const struct read_rec *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	if (x->space != y->space)
		return x->space - y->space;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Read every baseline trace: per command the merged file ranges it read,
 * and over all commands the distinct reads, turned into sites.
 */
static void load_traces(struct harness *h)
{
	struct read_rec *all = NULL;
	size_t nr_all = 0, cap_all = 0, i;
	uint64_t *pages = NULL;
	size_t nr_pages = 0, cap_pages = 0, cap_phys = 0;
	int cmd;

	for (cmd = 0; cmd < NR_CMDS; cmd++) {
		char name[32], *path, *line = NULL;
		size_t cap = 0, nr = 0;
		struct span *s = NULL;
		size_t cap_s = 0;
		FILE *f;

		snprintf(name, sizeof(name), "trace.%s", cmd_names[cmd]);
		path = path_in(h, name);
		f = fopen(path, "re");
		if (!f)
			die("%s: %s", path, strerror(errno));
		while (getline(&line, &cap, f) > 0) {
			struct read_rec r;

			if (sscanf(line, "%c %" SCNx64 " %" SCNx64 " %" SCNx64,
				   &r.space, &r.addr, &r.off, &r.len) != 4 ||
			    r.off > h->size || r.len > h->size - r.off)
				die("%s: bad line: %s", path, line);
			PUSH(s, nr, cap_s, ((struct span){ r.off, r.off + r.len }));
			PUSH(all, nr_all, cap_all, r);
		}
		free(line);
		fclose(f);
		free(path);
		if (!nr)
			die("%s read no guest memory (IVM_CORE_TRACE unsupported?)",
			    cmd_names[cmd]);
		h->spans[cmd] = s;
		h->nr_spans[cmd] = spans_merge(s, nr);
	}
	for (i = 0; i < nr_all; i++) {
		if (all[i].space == 'p')
			PUSH(h->phys, h->nr_phys, cap_phys,
			     ((struct span){ all[i].addr,
					     all[i].addr + all[i].len }));
	}
	h->nr_phys = spans_merge(h->phys, h->nr_phys);
	qsort(all, nr_all, sizeof(*all), read_cmp);
	for (i = 0; i < nr_all; i++) {
		uint64_t pg;

		if (i && !read_cmp(&all[i], &all[i - 1]))
			continue;
		add_read(h, &all[i]);
		if (all[i].space != 'p')
			continue;
		for (pg = all[i].addr >> 12;
		     pg <= (all[i].addr + all[i].len - 1) >> 12; pg++)
			PUSH(pages, nr_pages, cap_pages, pg);
	}
	qsort(pages, nr_pages, sizeof(*pages), u64_cmp);
	for (i = 0; i < nr_pages; i++)
		h->nr_pages += !i || pages[i] != pages[i - 1];
	free(pages);
	free(all);
	if (!h->small.nr)
		die("no word to mutate in the traces");
}

static void baseline(struct harness *h)
{
	int cmd, round;

	for (round = 0; round < 2; round++) {
		for (cmd = 0; cmd < NR_CMDS; cmd++) {
			char name[32], *trace = NULL, *outp, *errp, *out, *err;
			size_t out_len, err_len;
			double secs;
			long rss;
			int status;

			if (!round) {
				snprintf(name, sizeof(name), "trace.%s",
					 cmd_names[cmd]);
				trace = path_in(h, name);
				unlink(trace);
			}
			status = spawn(h, cmd, trace, NULL, &rss, &secs);
			outp = path_in(h, "out");
			errp = path_in(h, "err");
			out = slurp(outp, &out_len);
			err = slurp(errp, &err_len);
			if (status == -1 || !WIFEXITED(status) ||
			    WEXITSTATUS(status))
				die("baseline %s failed (%s after %.2f s): %s",
				    cmd_names[cmd],
				    status == -1 ? "killed" : "non-zero exit",
				    secs, err);
			if (!round) {
				printf("core-mutate: baseline %-5s %.2f s, %ld MB\n",
				       cmd_names[cmd], secs, rss / 1024);
				h->base_out[cmd] = out;
				h->base_err[cmd] = err;
				h->base_out_len[cmd] = out_len;
				h->base_err_len[cmd] = err_len;
			} else {
				if (out_len != h->base_out_len[cmd] ||
				    err_len != h->base_err_len[cmd] ||
				    memcmp(out, h->base_out[cmd], out_len) ||
				    memcmp(err, h->base_err[cmd], err_len))
					die("%s printed something else when run again: its output cannot be compared",
					    cmd_names[cmd]);
				free(out);
				free(err);
			}
			free(trace);
			free(outp);
			free(errp);
		}
	}
	/* The direct map's base, to make a physical address a pointer. */
	{
		const char *p = strstr(h->base_out[CMD_INFO], "page_offset_base:");

		if (p)
			h->page_offset_base = strtoull(p + 17, NULL, 16);
	}
}

/* ---- mutations --------------------------------------------------------- */

/* The guest's kernel address of a site, or 0 when it cannot be known. */
static uint64_t kernel_address(const struct harness *h, char space,
			       uint64_t addr)
{
	if (space == 'v')
		return addr;
	if (space == 'p' && h->page_offset_base)
		return h->page_offset_base + addr;
	return 0;
}

static const uint64_t boundaries[] = {
	0x00007ffffffff000ull,	/* last user page */
	0x00007fffffffffffull,
	0x0000800000000000ull,	/* first non-canonical */
	0x7fffffffffffffffull,
	0x8000000000000000ull,
	0xffff800000000000ull,	/* first kernel address */
	0xfffffffffffff000ull,	/* last page */
	0xfffffffffffffff8ull,
	0xdead000000000100ull,	/* LIST_POISON1 */
	0xdead000000000122ull,	/* LIST_POISON2 */
};

static const uint64_t counts[] = {
	0, 1, 2, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x10000,
	0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ull,
	0x7fffffffffffffffull, 0x8000000000000000ull, UINT64_MAX,
	UINT64_MAX - 1,
};

/* A new value for a word; describes it in what. */
static uint64_t mutate_word(const struct harness *h, const struct site *s,
			    uint64_t v, uint64_t *rng, char *what, size_t size)
{
	uint64_t self = kernel_address(h, s->space, s->addr), n;

	switch (s->len == 8 ? pick(rng, 10) : 5 + pick(rng, 5)) {
	case 0:
		if (self) {
			snprintf(what, size, "pointer to itself");
			return self;
		}
		/* fall through */
	case 1:
		if (h->nr_objects && h->page_offset_base) {
			n = h->objects[pick(rng, h->nr_objects)];
			snprintf(what, size, "pointer to another object read (pa 0x%" PRIx64 ")", n);
			return h->page_offset_base + n;
		}
		/* fall through */
	case 2:
		if (h->nr_targets) {
			snprintf(what, size, "another pointer followed (a cycle?)");
			return h->targets[pick(rng, h->nr_targets)];
		}
		/* fall through */
	case 3:
		if (h->page_offset_base) {
			/* Past any RAM the demo guest has, inside the map. */
			n = (1 + pick(rng, 64)) << 30;
			snprintf(what, size, "pointer %" PRIu64 " GiB into the direct map, past RAM", n >> 30);
			return h->page_offset_base + n - 8 * pick(rng, 4);
		}
		/* fall through */
	case 4:
		n = boundaries[pick(rng, sizeof(boundaries) / sizeof(boundaries[0]))];
		snprintf(what, size, "boundary address 0x%" PRIx64, n);
		return n;
	case 5:
		n = counts[pick(rng, sizeof(counts) / sizeof(counts[0]))];
		snprintf(what, size, "count 0x%" PRIx64, n);
		return n;
	case 6:
		n = (int64_t)-1 - (int64_t)pick(rng, 16);
		snprintf(what, size, "negative %" PRId64, (int64_t)n);
		return n;
	case 7:
		n = pick(rng, 2) ? v * (2 + pick(rng, 4096)) : v << (1 + pick(rng, 31));
		snprintf(what, size, "scaled up");
		return n;
	case 8:
		n = pick(rng, 9) - 4;
		n = n ? v + n * (pick(rng, 2) ? 1 : 8) : v ^ 0x1000;
		snprintf(what, size, "nudged");
		return n;
	default:
		n = pick(rng, 8 * s->len);
		snprintf(what, size, "bit %" PRIu64 " flipped", n);
		return v ^ (1ull << n);
	}
}

static const char *const hostile_strings[] = {
	"\x1b[2J\x1b]0;owned\x07",
	"%s%s%n%x%p%s",
	"a\nb\rc\td",
	"\xff\xfe\xc3\x28\xe2\x82\xf0\x9f\x92",
	"../../../../etc/shadow",
	"\x7f\x1b\x9b",
};

/* New bytes for a string site (len bytes with its NUL); describes them. */
static void mutate_string(const struct site *s, uint8_t *b, uint64_t *rng,
			  char *what, size_t size)
{
	unsigned int i, k = pick(rng, 3);

	if (k == 0) {
		memset(b, 'A', s->len);
		snprintf(what, size, "string without its NUL");
	} else if (k == 1) {
		for (i = 0; i < s->len; i++)
			b[i] = 1 + pick(rng, 0x1f);
		snprintf(what, size, "string of control bytes, no NUL");
	} else {
		const char *t = hostile_strings[pick(rng, sizeof(hostile_strings) /
						     sizeof(hostile_strings[0]))];

		memset(b, 0, s->len);
		memcpy(b, t, strlen(t) < s->len - 1 ? strlen(t) : s->len - 1);
		snprintf(what, size, "hostile string");
	}
}

/*
 * Mutation index of the seed: the site (its file offset and length) and
 * new bytes.  A function of (seed, index) and the traces alone.
 */
static const struct site *make_mutation(const struct harness *h,
					unsigned long index, uint8_t *bytes,
					char *what, size_t size)
{
	uint64_t rng = h->seed ^ (index * 0xd1342543de82ef95ull), k;
	const struct site_list *l;
	const struct site *s;
	/* Fields first, then the pointers followed, strings, the rest. */
	const struct {
		const struct site_list *list;
		unsigned int weight;
	} classes[] = {
		{ &h->small, 35 }, { &h->followed, 30 }, { &h->strings, 20 },
		{ &h->big, 15 },
	};
	unsigned int c, total = 0;

	splitmix(&rng);
	for (c = 0; c < sizeof(classes) / sizeof(classes[0]); c++)
		total += classes[c].list->nr ? classes[c].weight : 0;
	k = pick(&rng, total);
	for (c = 0; !classes[c].list->nr || k >= classes[c].weight; c++)
		k -= classes[c].list->nr ? classes[c].weight : 0;
	l = classes[c].list;
	s = &l->v[pick(&rng, l->nr)];
	memcpy(bytes, h->data + s->off, s->len);
	if (s->string) {
		mutate_string(s, bytes, &rng, what, size);
	} else {
		uint64_t v = mutate_word(h, s, load(bytes, s->len), &rng,
					 what, size);
		unsigned int i;

		for (i = 0; i < s->len; i++)
			bytes[i] = v >> (8 * i);
	}
	/* Never a no-op. */
	if (!memcmp(bytes, h->data + s->off, s->len))
		bytes[0] ^= 1;
	return s;
}

static void write_patch(const struct harness *h, const char *path,
			unsigned long index, const struct site *s,
			const uint8_t *bytes, const char *what)
{
	FILE *f = fopen(path, "we");
	unsigned int i;

	if (!f)
		die("%s: %s", path, strerror(errno));
	fprintf(f, "# core-mutate seed %" PRIu64 " index %lu: %c 0x%" PRIx64 " (%u bytes): %s\n",
		h->seed, index, s->space, s->addr, s->len, what);
	fprintf(f, "%" PRIx64 " ", s->off);
	for (i = 0; i < s->len; i++)
		fprintf(f, "%02x", bytes[i]);
	fputc('\n', f);
	if (fclose(f))
		die("%s: %s", path, strerror(errno));
}

static void describe_site(const struct site *s, const uint8_t *old,
			  const uint8_t *new, char *buf, size_t size)
{
	if (s->string)
		snprintf(buf, size, "%s %c 0x%" PRIx64 " \"%.*s\"",
			 "string at", s->space, s->addr, (int)s->len - 1,
			 (const char *)old);
	else
		snprintf(buf, size, "%u-byte word at %c 0x%" PRIx64 ": 0x%" PRIx64 " -> 0x%" PRIx64,
			 s->len, s->space, s->addr, load(old, s->len),
			 load(new, s->len));
}

static void mutate_one(struct harness *h, unsigned long index)
{
	uint8_t bytes[MAX_PATCH];
	char what[128], site[192], *patch = path_in(h, "patch");
	const struct site *s;
	bool failed = false;
	int cmd;

	s = make_mutation(h, index, bytes, what, sizeof(what));
	describe_site(s, h->data + s->off, bytes, site, sizeof(site));
	write_patch(h, patch, index, s, bytes, what);
	for (cmd = 0; cmd < NR_CMDS; cmd++) {
		struct run r;

		if (!cmd_reads(h, cmd, s->off, s->len))
			continue;
		classify(h, cmd, patch, &r);
		h->outcomes[cmd][r.outcome]++;
		if (r.seconds > h->max_seconds) {
			h->max_seconds = r.seconds;
			h->slowest_cmd = cmd_names[cmd];
			h->slowest_index = index;
		}
		if (r.outcome >= FIRST_FAILURE) {
			failed = true;
			char how[32];

			if (r.status == -1)
				snprintf(how, sizeof(how), "killed");
			else if (WIFSIGNALED(r.status))
				snprintf(how, sizeof(how), "signal %d",
					 WTERMSIG(r.status));
			else
				snprintf(how, sizeof(how), "exit %d",
					 WEXITSTATUS(r.status));
			printf("FAIL mutation %lu (seed %" PRIu64 "): %s: %s, %s\n"
			       "     %s: %s after %.2f s, %ld MB: %s\n",
			       index, h->seed, outcome_names[r.outcome], site,
			       what, cmd_names[cmd], how, r.seconds,
			       r.rss_kb / 1024, r.reason);
		} else if (h->verbose) {
			printf("mutation %lu: %s: %s: %s (%s)%s%s\n", index,
			       cmd_names[cmd], outcome_names[r.outcome], site,
			       what, r.outcome == OUT_ERROR ? ": " : "",
			       r.outcome == OUT_ERROR ? r.reason : "");
		}
	}
	if (failed) {
		unsigned int i;

		h->failed_mutations++;
		printf("     replay: IVM_CORE_PATCH=FILE idlevm CMD --core ..., FILE holding the line \"%" PRIx64 " ",
		       s->off);
		for (i = 0; i < s->len; i++)
			printf("%02x", bytes[i]);
		printf("\" (or core-mutate --seed %" PRIu64 " --only %lu leaves it in WORKDIR/patch)\n",
		       h->seed, index);
	}
	free(patch);
}

/* ---- main -------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: core-mutate --idlevm BIN --core FILE --vmlinux FILE --pid N --workdir DIR\n"
		"                   [--seed S] [--count N] [--only I] [--timeout-ms MS]\n"
		"                   [--rss-mb MB] [--verbose]\n");
	exit(2);
}

static unsigned long long number(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		die("bad %s: %s", what, s);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "idlevm", required_argument, NULL, 'i' },
		{ "core", required_argument, NULL, 'c' },
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "pid", required_argument, NULL, 'p' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "seed", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "only", required_argument, NULL, 'o' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "rss-mb", required_argument, NULL, 'r' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct harness h = {
		.count = 300, .only = -1, .timeout_ms = 2000, .rss_mb = 512,
	};
	unsigned long i, runs_before;
	struct stat st;
	double t0, t1;
	int c, fd, cmd, o;
	bool have_pid = false;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i': h.idlevm = optarg; break;
		case 'c': h.core = optarg; break;
		case 'k': h.vmlinux = optarg; break;
		case 'p': h.pid = number(optarg, "pid"); have_pid = true; break;
		case 'w': h.workdir = optarg; break;
		case 's': h.seed = number(optarg, "seed"); break;
		case 'n': h.count = number(optarg, "count"); break;
		case 'o': h.only = number(optarg, "index"); break;
		case 't': h.timeout_ms = number(optarg, "timeout"); break;
		case 'r': h.rss_mb = number(optarg, "rss bound"); break;
		case 'v': h.verbose = true; break;
		default: usage();
		}
	}
	if (optind != argc || !h.idlevm || !h.core || !h.vmlinux ||
	    !h.workdir || !have_pid || h.timeout_ms <= 0 || h.rss_mb <= 0)
		usage();

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	fd = open(h.core, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !st.st_size)
		die("%s: %s", h.core, fd < 0 ? strerror(errno) : "empty");
	h.size = st.st_size;
	h.data = mmap(NULL, h.size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (h.data == MAP_FAILED)
		die("mapping %s: %s", h.core, strerror(errno));
	close(fd);

	t0 = now_s();
	baseline(&h);
	load_traces(&h);
	printf("core-mutate: %lu reads of %lu guest pages: %zu words of small reads, %zu pointers followed and %zu other words of big ones, %zu strings; page_offset_base 0x%" PRIx64 "\n",
	       h.nr_reads, h.nr_pages, h.small.nr, h.followed.nr, h.big.nr,
	       h.strings.nr, h.page_offset_base);
	fflush(stdout);
	runs_before = h.runs;
	t1 = now_s();
	if (h.only >= 0) {
		mutate_one(&h, h.only);
		h.count = 1;
	} else {
		for (i = 0; i < h.count; i++) {
			mutate_one(&h, i);
			fflush(stdout);
		}
	}
	t1 = now_s() - t1;

	printf("core-mutate: seed %" PRIu64 ": %lu mutations, %lu commands run (%lu timeouts retried) in %.1f s (%.1f s in all)\n",
	       h.seed, h.count, h.runs - runs_before, h.retries, t1,
	       now_s() - t0);
	printf("core-mutate: slowest command %.2f s (%s of mutation %lu; limit %.1f s), peak RSS %ld MB (bound %ld MB)\n",
	       h.max_seconds, h.slowest_cmd ? h.slowest_cmd : "none",
	       h.slowest_index, h.timeout_ms / 1000.0, h.max_rss_kb / 1024,
	       h.rss_mb);
	printf("%-22s", "outcome");
	for (cmd = 0; cmd < NR_CMDS; cmd++)
		printf(" %7s", cmd_names[cmd]);
	printf(" %7s\n", "all");
	for (o = 0; o < NR_OUTCOMES; o++) {
		unsigned long all = 0;

		printf("%-22s", outcome_names[o]);
		for (cmd = 0; cmd < NR_CMDS; cmd++) {
			printf(" %7lu", h.outcomes[cmd][o]);
			all += h.outcomes[cmd][o];
		}
		printf(" %7lu\n", all);
	}
	printf("core-mutate: %lu of %lu mutations failed\n", h.failed_mutations,
	       h.count);
	return h.failed_mutations ? 1 : 0;
}
