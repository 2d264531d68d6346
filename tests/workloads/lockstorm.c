// SPDX-License-Identifier: MIT
/*
 * lockstorm — demo guest workload with a designed, known idle profile.
 *
 * idlevm samples the guest stack of the thread that ran last before a vCPU
 * halted (to-idle) and of the first that ran after it woke (from-idle).  This
 * program gives it something to find: N worker threads that alternate short
 * bursts of CPU work with blocking in exactly one of three distinctive paths,
 * and that measure for themselves how long they spent in each, so a profile
 * can be checked against ground truth.
 *
 * Call chains.  Every function named below is a STACK_FRAME: a real, unique,
 * uncloned frame, and every call to it or from it into libc is a real
 * `call`, never a jump; tests/workloads/check-frames verifies this on the
 * built binaries.
 *
 *   worker_main -> compute_batch            CPU work, a hash over a buffer
 *   worker_main -> wait_for_lock -> pthread_mutex_lock -> __lll_lock_wait
 *       futex(FUTEX_WAIT_PRIVATE); kernel: futex_wait -> futex_wait_queue
 *   worker_main -> read_request -> read
 *       kernel: ksys_read -> vfs_read -> pipe_read
 *   worker_main -> throttle -> clock_nanosleep(CLOCK_MONOTONIC, relative)
 *       kernel: common_nsleep -> hrtimer_nanosleep -> do_nanosleep
 * each kernel chain ending in schedule -> __schedule (Linux 6.1).
 *
 * Helper threads, which sleep in ppoll (kernel: do_sys_poll ->
 * schedule_hrtimeout_range) or rt_sigtimedwait, and so are told apart from
 * the workers' paths by their user frames and their comm:
 *
 *   ls-holder    holds two mutexes per worker and lets the worker have one
 *                at the deadline the worker set: a lock wait of chosen length.
 *   ls-dispatch  writes the worker's reply pipe at the deadline it set.
 *   lockstorm    the main thread: reports, signals.
 *
 * Timing design.  Each iteration a worker runs compute_batch(), then blocks
 * once.  Every block, whatever its path, lasts a duration drawn uniformly
 * from --block-ms MIN:MAX (default 2:10 ms, mean 6): the worker computes the
 * deadline and a timer enforces it (a timerfd that the worker arms and
 * ls-holder or ls-dispatch waits on, or the nanosleep itself), so the length
 * of a block never depends on how fast anything computes.  The path is
 * chosen by a deficit scheduler over the worker's own *measured* blocking
 * time: the path furthest below its share of --ratio (default 60:30:10) goes
 * next.  So the time split converges to the ratio in every worker whatever
 * the delays, and because the three paths draw from one duration
 * distribution, the number of blocking events splits in the same ratio too
 * (as idle-transition counts should).
 *
 * compute_batch() is calibrated at start to take --compute-us of CPU time
 * (default 1000 us) on *this* CPU, so under emulation (QEMU TCG, 10-50x
 * slower) a batch still takes about 1 ms instead of 10-50: the duty cycle,
 * about 1 ms on CPU per ~7 ms iteration, is the same native and emulated,
 * and 4 workers need ~0.6 of a CPU, so 2 vCPUs go idle often.
 *
 * Who wakes an idle CPU: for a lock wait, ls-holder (its timerfd fired),
 * which then wakes the worker; for a read, ls-dispatch; for a throttle, the
 * worker itself.  The thread that runs last before a CPU idles is mostly a
 * worker entering one of its three paths.
 *
 * Request classes.  Each iteration also serves a request of one of three
 * classes, browse, search and checkout, drawn at random in the ratio
 * --classes (default 50:30:20), independent of the blocking path.  The
 * worker keeps the class of the request in hand in __thread variables for
 * the whole iteration, its block included (ls_request_class: 1, 2, 3, 0
 * outside requests; ls_request_class_name: the class's name, "none"
 * outside requests), as applications keep a business category, and
 * counts its blocks per class: what a profile grouped by that variable
 * must find.
 *
 * Output (stdout, line-buffered, key=value):
 *   lockstorm: config pid=.. threads=.. ratio=.. ...        once
 *   lockstorm: start tid=<tid> comm=<name> role=<role>      once per thread
 *   lockstorm: t=<s> wait_for_lock_ms=<n> read_request_ms=<n> throttle_ms=<n>
 *              compute_ms=<n> iterations=<n> [counts...]
 *              browse_n=<n> search_n=<n> checkout_n=<n>       every report
 *   lockstorm: tid=<tid> comm=<name> (same fields)           per worker
 * Reports every --report-interval seconds (0: off), on SIGUSR1 and at exit
 * (end of --seconds, SIGTERM or SIGINT); the last report is followed by
 * "lockstorm: exit".
 *
 * How it starts, for unwinders: --fork 1 runs everything in a fork child
 * (no exec; the parent waits in waitpid), as a pre-forking server's
 * workers run; --from-signal 1 runs it from a SIGUSR2 handler of the main
 * thread (its stack then holds the kernel's signal frame and glibc's
 * __restore_rt between the handler and main).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/*
 * A function that must stay a real frame of its own in every stack: never
 * inlined, cloned (.isra/.constprop) or folded with another (GCC's noipa);
 * clang has no noipa, but does not clone these external functions at -O2,
 * and can be told to make no tail calls from them.
 */
#if defined(__clang__)
#define STACK_FRAME __attribute__((noinline, disable_tail_calls))
#else
#define STACK_FRAME __attribute__((noipa))
#endif

#define MAX_WORKERS 64
#define COMPUTE_BUF_WORDS 512	/* 4 KiB: stays in L1, cost is pure CPU */
#define NSEC_PER_SEC 1000000000ull
#define NSEC_PER_MSEC 1000000ull

/* The three blocking paths, in --ratio order. */
enum path { PATH_LOCK, PATH_READ, PATH_THROTTLE, NR_PATHS };

/* The request classes, in --classes order; ls_request_class is one more. */
enum request_class { CLASS_BROWSE, CLASS_SEARCH, CLASS_CHECKOUT, NR_CLASSES };
static const char *const class_names[NR_CLASSES] = {
	"browse", "search", "checkout",
};

/*
 * The request in hand, per thread: what `idlevm profile --label
 * class=tls:ls_request_class_name:str` reads.  Global and used, so the
 * symbols stay in the binary under these names.
 */
__thread unsigned int ls_request_class;
__thread const char *ls_request_class_name = "none";

/*
 * Per-worker figures.  Written only by the worker, read by the main thread
 * for reports: every field goes through relaxed atomics so a report never
 * sees a torn value, and no lock is taken on the workers' hot path.
 */
struct worker_stats {
	uint64_t block_ns[NR_PATHS];
	uint64_t block_count[NR_PATHS];
	uint64_t compute_ns;
	uint64_t iterations;
	uint64_t lock_skips;	/* lock due, mutex not held: stays 0 */
	uint64_t class_count[NR_CLASSES];	/* blocks per request class */
};

struct worker {
	unsigned int index;
	pid_t tid;
	char comm[16];
	uint64_t rng;
	uint64_t class_rng;	/* request classes: a stream of their own */
	uint64_t checksum;
	uint32_t buf[COMPUTE_BUF_WORDS];
	/*
	 * Lock path: two mutexes used in turn.  The holder owns lock[k]
	 * while armed[k] is set; when it lets the worker have lock[k] it
	 * first takes back lock[k ^ 1], which the worker let go of an
	 * iteration ago, so the next lock wait always finds its mutex held.
	 * holder_has[] is the holder's own bookkeeping, touched by it alone.
	 */
	pthread_mutex_t lock[2];
	int armed[2];
	unsigned int lock_turn;	/* the mutex the worker uses next */
	bool holder_has[2];
	/* Read path: the dispatcher writes one byte here at the deadline. */
	int reply_pipe[2];
	struct worker_stats stats;
} __attribute__((aligned(64)));

/*
 * The event loop of ls-holder and ls-dispatch.  Each worker has one timerfd
 * in each loop and arms it itself with the absolute deadline of its next
 * block: asking costs the worker one syscall that wakes nobody, and the
 * loop's thread wakes exactly when a deadline passes, so the only wakeups
 * in the program are the ones the design is about.
 */
struct timer_loop {
	const char *comm;
	const char *role;
	int timer_fd[MAX_WORKERS];
	int quit_pipe[2];
	void (*init)(void);			/* in the loop's thread */
	void (*fire)(struct worker *w);		/* at the worker's deadline */
	pthread_t thread;
};

static struct {
	unsigned int nr_workers;
	double seconds;			/* 0: forever */
	double report_interval;		/* 0: off */
	unsigned int ratio[NR_PATHS];
	unsigned int ratio_sum;
	uint64_t block_min_ns, block_max_ns;
	unsigned int compute_us;
	uint64_t compute_rounds;	/* calibrated */
	unsigned int classes[NR_CLASSES];
	unsigned int classes_sum;
} cfg = {
	.classes = { 50, 30, 20 },
	.nr_workers = 4,
	.report_interval = 5,
	.ratio = { 60, 30, 10 },
	.block_min_ns = 2 * NSEC_PER_MSEC,
	.block_max_ns = 10 * NSEC_PER_MSEC,
	.compute_us = 1000,
};

static struct worker *workers;
static struct timer_loop holder, dispatcher;
static pthread_barrier_t loops_ready;
static int stopping;
static uint64_t start_ns;

static void die(const char *what)
{
	fprintf(stderr, "lockstorm: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_err(const char *what, int err)
{
	errno = err;
	die(what);
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void ns_to_timespec(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / NSEC_PER_SEC);
	ts->tv_nsec = (long)(ns % NSEC_PER_SEC);
}

static uint64_t load64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Only the owning worker writes, so load + store is not a lost update. */
static void add64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, load64(p) + v, __ATOMIC_RELAXED);
}

static uint64_t xorshift64(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

static void name_thread(const char *comm, const char *role)
{
	/* PR_SET_NAME rather than pthread_setname_np(), which may go through
	 * /proc/self/task/N/comm: the guest's /proc is not guaranteed. */
	prctl(PR_SET_NAME, comm, 0, 0, 0);
	printf("lockstorm: start tid=%d comm=%s role=%s\n", gettid(), comm,
	       role);
}

/* The worker asks `loop` to act on its behalf at `deadline_ns`. */
static void arm_timer(struct timer_loop *loop, const struct worker *w,
		      uint64_t deadline_ns)
{
	struct itimerspec its = { 0 };

	/* CLOCK_MONOTONIC is never 0 here, and a zero it_value would disarm. */
	ns_to_timespec(deadline_ns ? deadline_ns : 1, &its.it_value);
	if (timerfd_settime(loop->timer_fd[w->index], TFD_TIMER_ABSTIME, &its,
			    NULL) < 0)
		die("timerfd_settime");
}

/*
 * The workers' four functions.  STACK_FRAME keeps each one a real function
 * under its own name (no inlining, no .isra/.constprop clones, no
 * identical-code folding), and each one does work after its last call so that call cannot
 * become a tail jump: the caller's frame is on the stack whenever the callee
 * runs or sleeps.
 */

/*
 * `rounds` passes of a multiply-xorshift hash over the worker's buffer, fed
 * back into the buffer so no pass can be skipped or hoisted.
 *
 * The four hash lanes live in a stack array that escapes into an empty asm.
 * That is what gives this leaf a stack frame: GCC 12 sets up no %rbp in a
 * leaf function that uses no stack, even with -fno-omit-frame-pointer
 * -mno-omit-leaf-frame-pointer, and a frame-pointer unwinder would then lose
 * worker_main from every sample taken here.
 */
STACK_FRAME uint64_t compute_batch(struct worker *w, uint64_t rounds)
{
	uint64_t lane[4] = {
		w->checksum, 0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull,
		0x94d049bb133111ebull,
	};

	for (uint64_t r = 0; r < rounds; r++) {
		for (unsigned int i = 0; i < COMPUTE_BUF_WORDS; i++) {
			uint64_t h = lane[i & 3] ^ w->buf[i];

			h *= 0xff51afd7ed558ccdull;
			h ^= h >> 29;
			lane[i & 3] = h;
			w->buf[i] = (uint32_t)h;
		}
	}
	asm volatile("" : : "r"(lane) : "memory");
	return lane[0] ^ lane[1] ^ lane[2] ^ lane[3];
}

/* Blocks in pthread_mutex_lock until ls-holder lets go at `deadline_ns`.
 * Returns the time spent inside pthread_mutex_lock. */
STACK_FRAME uint64_t wait_for_lock(struct worker *w,
					      uint64_t deadline_ns)
{
	unsigned int k = w->lock_turn;
	uint64_t t0, t1;
	int err;

	arm_timer(&holder, w, deadline_ns);
	t0 = now_ns();
	err = pthread_mutex_lock(&w->lock[k]);
	t1 = now_ns();
	if (err)
		die_err("pthread_mutex_lock", err);
	pthread_mutex_unlock(&w->lock[k]);
	/* Only now: the holder reads lock_turn to know which mutex to free. */
	__atomic_store_n(&w->lock_turn, k ^ 1, __ATOMIC_RELEASE);
	return t1 - t0;
}

/* Blocks in read() on the worker's reply pipe until ls-dispatch answers at
 * `deadline_ns`.  Returns the time spent inside read(). */
STACK_FRAME uint64_t read_request(struct worker *w,
					     uint64_t deadline_ns)
{
	uint64_t t0, t1;
	ssize_t n;
	char reply;

	arm_timer(&dispatcher, w, deadline_ns);
	t0 = now_ns();
	do
		n = read(w->reply_pipe[0], &reply, 1);
	while (n < 0 && errno == EINTR);
	t1 = now_ns();
	if (n != 1)
		die("read reply");
	return t1 - t0;
}

/* Sleeps until `deadline_ns`.  Relative clock_nanosleep, not TIMER_ABSTIME,
 * so the kernel path is the plain hrtimer_nanosleep one.  Returns the time
 * spent inside clock_nanosleep. */
STACK_FRAME uint64_t throttle(uint64_t deadline_ns)
{
	struct timespec ts;
	uint64_t t0, t1;
	int err;

	t0 = now_ns();
	ns_to_timespec(deadline_ns > t0 ? deadline_ns - t0 : 0, &ts);
	err = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	t1 = now_ns();
	if (err && err != EINTR)
		die_err("clock_nanosleep", err);
	return t1 - t0;
}

/*
 * Among the enabled paths from `first` on, the one furthest below its share
 * of the worker's measured blocking time: the largest
 * ratio[p] * total - block_ns[p] * ratio_sum.  NR_PATHS if none is enabled.
 */
static enum path most_behind(const struct worker_stats *s, enum path first)
{
	uint64_t total = 0;
	enum path best = NR_PATHS;
	__int128 best_deficit = 0;

	for (int p = 0; p < NR_PATHS; p++)
		total += s->block_ns[p];
	for (enum path p = first; p < NR_PATHS; p++) {
		__int128 deficit;

		if (!cfg.ratio[p])
			continue;
		deficit = (__int128)cfg.ratio[p] * total -
			  (__int128)s->block_ns[p] * cfg.ratio_sum;
		if (best == NR_PATHS || deficit > best_deficit) {
			best = p;
			best_deficit = deficit;
		}
	}
	return best;
}

/*
 * The deficit scheduler.  Should the lock path be due while its mutex is not
 * held (it would not block: cannot happen once the holder has taken every
 * mutex, which main waits for), the next path in deficit order goes instead,
 * or a throttle if the lock path is the only one, and lock_skips counts it.
 */
static enum path choose_path(struct worker *w)
{
	enum path p = most_behind(&w->stats, PATH_LOCK);

	if (p != PATH_LOCK ||
	    __atomic_load_n(&w->armed[w->lock_turn], __ATOMIC_ACQUIRE))
		return p;
	add64(&w->stats.lock_skips, 1);
	p = most_behind(&w->stats, PATH_LOCK + 1);
	return p == NR_PATHS ? PATH_THROTTLE : p;
}

/* A class at random in the ratio --classes, on the worker's own stream. */
static enum request_class choose_class(struct worker *w)
{
	uint64_t x = xorshift64(&w->class_rng) % cfg.classes_sum;
	int c;

	for (c = 0; c < NR_CLASSES - 1; c++) {
		if (x < cfg.classes[c])
			break;
		x -= cfg.classes[c];
	}
	return (enum request_class)c;
}

STACK_FRAME void *worker_main(void *arg)
{
	struct worker *w = arg;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELAXED);
	name_thread(w->comm, "worker");
	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		uint64_t t0, t1, span, deadline, blocked;
		enum request_class c;
		enum path p;

		c = choose_class(w);
		ls_request_class = c + 1;
		ls_request_class_name = class_names[c];
		t0 = now_ns();
		w->checksum = compute_batch(w, cfg.compute_rounds);
		t1 = now_ns();
		add64(&w->stats.compute_ns, t1 - t0);

		span = cfg.block_max_ns - cfg.block_min_ns;
		deadline = t1 + cfg.block_min_ns +
			   (span ? xorshift64(&w->rng) % (span + 1) : 0);
		p = choose_path(w);
		switch (p) {
		case PATH_LOCK:
			blocked = wait_for_lock(w, deadline);
			break;
		case PATH_READ:
			blocked = read_request(w, deadline);
			break;
		default:
			blocked = throttle(deadline);
			break;
		}
		add64(&w->stats.block_ns[p], blocked);
		add64(&w->stats.block_count[p], 1);
		add64(&w->stats.class_count[c], 1);
		add64(&w->stats.iterations, 1);
		/* Between requests. */
		ls_request_class = 0;
		ls_request_class_name = "none";
	}
	return NULL;
}

/* ls-holder, before any worker starts: take every mutex. */
static void holder_init(void)
{
	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		struct worker *w = &workers[i];

		for (unsigned int k = 0; k < 2; k++) {
			int err = pthread_mutex_lock(&w->lock[k]);

			if (err)
				die_err("holder pthread_mutex_lock", err);
			w->holder_has[k] = true;
			__atomic_store_n(&w->armed[k], 1, __ATOMIC_RELEASE);
		}
	}
}

/*
 * ls-holder, at the worker's deadline: let it have the mutex it waits on.
 * First take back the other one, which the worker unlocked before it armed
 * this deadline and will not touch before it has this one: uncontended.
 */
static void holder_fire(struct worker *w)
{
	unsigned int k = __atomic_load_n(&w->lock_turn, __ATOMIC_ACQUIRE);
	unsigned int other = k ^ 1;

	if (!w->holder_has[other]) {
		int err = pthread_mutex_lock(&w->lock[other]);

		if (err)
			die_err("holder pthread_mutex_lock", err);
		w->holder_has[other] = true;
		__atomic_store_n(&w->armed[other], 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&w->armed[k], 0, __ATOMIC_RELEASE);
	w->holder_has[k] = false;
	pthread_mutex_unlock(&w->lock[k]);
}

/* ls-dispatch, at the worker's deadline: answer its request. */
static void dispatcher_fire(struct worker *w)
{
	char reply = 'r';

	if (write(w->reply_pipe[1], &reply, 1) != 1)
		die("write reply");
}

/*
 * Sleeps in ppoll until a worker's deadline passes (or main says quit) and
 * runs `fire` for it.  A deadline already past when armed fires at once: a
 * late loop shortens a block, and the worker's own measurement says so.
 * Each worker has at most one deadline outstanding in each loop, since it
 * blocks until that deadline is served.
 */
static void *timer_loop_main(void *arg)
{
	struct timer_loop *loop = arg;
	struct pollfd pfd[MAX_WORKERS + 1];
	unsigned int n = cfg.nr_workers;

	name_thread(loop->comm, loop->role);
	if (loop->init)
		loop->init();
	pthread_barrier_wait(&loops_ready);

	pfd[0] = (struct pollfd){ .fd = loop->quit_pipe[0], .events = POLLIN };
	for (unsigned int i = 0; i < n; i++)
		pfd[i + 1] = (struct pollfd){
			.fd = loop->timer_fd[i], .events = POLLIN,
		};
	for (;;) {
		if (ppoll(pfd, n + 1, NULL, NULL) < 0) {
			if (errno == EINTR)
				continue;
			die("ppoll");
		}
		if (pfd[0].revents)
			return NULL;
		for (unsigned int i = 0; i < n; i++) {
			uint64_t expirations;

			if (!(pfd[i + 1].revents & POLLIN))
				continue;
			/* Non-blocking: a timer re-armed after it fired but
			 * before this read is simply not due yet. */
			if (read(loop->timer_fd[i], &expirations,
				 sizeof(expirations)) == sizeof(expirations))
				loop->fire(&workers[i]);
		}
	}
}

static void timer_loop_start(struct timer_loop *loop)
{
	int err;

	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		loop->timer_fd[i] = timerfd_create(CLOCK_MONOTONIC,
						   TFD_NONBLOCK | TFD_CLOEXEC);
		if (loop->timer_fd[i] < 0)
			die("timerfd_create");
	}
	if (pipe2(loop->quit_pipe, O_CLOEXEC) < 0)
		die("pipe");
	err = pthread_create(&loop->thread, NULL, timer_loop_main, loop);
	if (err)
		die_err("pthread_create", err);
}

/* After the workers are gone: no deadline is outstanding any more. */
static void timer_loop_stop(struct timer_loop *loop)
{
	char quit = 'q';

	if (write(loop->quit_pipe[1], &quit, 1) != 1)
		die("write quit");
	pthread_join(loop->thread, NULL);
}

static void print_fields(const struct worker_stats *s)
{
	printf(" wait_for_lock_ms=%llu read_request_ms=%llu throttle_ms=%llu"
	       " compute_ms=%llu iterations=%llu"
	       " wait_for_lock_n=%llu read_request_n=%llu throttle_n=%llu"
	       " lock_skips=%llu browse_n=%llu search_n=%llu checkout_n=%llu\n",
	       (unsigned long long)(s->block_ns[PATH_LOCK] / NSEC_PER_MSEC),
	       (unsigned long long)(s->block_ns[PATH_READ] / NSEC_PER_MSEC),
	       (unsigned long long)(s->block_ns[PATH_THROTTLE] / NSEC_PER_MSEC),
	       (unsigned long long)(s->compute_ns / NSEC_PER_MSEC),
	       (unsigned long long)s->iterations,
	       (unsigned long long)s->block_count[PATH_LOCK],
	       (unsigned long long)s->block_count[PATH_READ],
	       (unsigned long long)s->block_count[PATH_THROTTLE],
	       (unsigned long long)s->lock_skips,
	       (unsigned long long)s->class_count[CLASS_BROWSE],
	       (unsigned long long)s->class_count[CLASS_SEARCH],
	       (unsigned long long)s->class_count[CLASS_CHECKOUT]);
}

static void snapshot(const struct worker *w, struct worker_stats *out)
{
	const struct worker_stats *s = &w->stats;

	for (int p = 0; p < NR_PATHS; p++) {
		out->block_ns[p] = load64(&s->block_ns[p]);
		out->block_count[p] = load64(&s->block_count[p]);
	}
	out->compute_ns = load64(&s->compute_ns);
	out->iterations = load64(&s->iterations);
	out->lock_skips = load64(&s->lock_skips);
	for (int c = 0; c < NR_CLASSES; c++)
		out->class_count[c] = load64(&s->class_count[c]);
}

static void report(void)
{
	struct worker_stats total = { 0 }, per[MAX_WORKERS];

	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		snapshot(&workers[i], &per[i]);
		for (int p = 0; p < NR_PATHS; p++) {
			total.block_ns[p] += per[i].block_ns[p];
			total.block_count[p] += per[i].block_count[p];
		}
		total.compute_ns += per[i].compute_ns;
		total.iterations += per[i].iterations;
		total.lock_skips += per[i].lock_skips;
		for (int c = 0; c < NR_CLASSES; c++)
			total.class_count[c] += per[i].class_count[c];
	}
	flockfile(stdout);
	printf("lockstorm: t=%.3f",
	       (double)(now_ns() - start_ns) / NSEC_PER_SEC);
	print_fields(&total);
	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		printf("lockstorm: tid=%d comm=%s",
		       __atomic_load_n(&workers[i].tid, __ATOMIC_RELAXED),
		       workers[i].comm);
		print_fields(&per[i]);
	}
	funlockfile(stdout);
}

/*
 * The time compute_batch() takes for `rounds`, in CPU time of this thread so
 * that being preempted during calibration does not shrink the batch.  The
 * minimum of a few runs: noise only ever adds time.
 */
static uint64_t time_rounds(struct worker *w, uint64_t rounds)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), dt;

		w->checksum = compute_batch(w, rounds);
		dt = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
		if (dt < best)
			best = dt;
	}
	return best ? best : 1;
}

/* Rounds per batch so a batch costs cfg.compute_us of CPU on this machine,
 * native or emulated alike. */
static uint64_t calibrate(struct worker *w)
{
	uint64_t target = (uint64_t)cfg.compute_us * 1000, rounds = 1, dt;

	if (!target)
		return 0;
	/* Grow until a measurement is long enough to trust (>= 1/4 target or
	 * 200 us), then scale linearly: the loop's cost is linear in rounds. */
	for (;;) {
		dt = time_rounds(w, rounds);
		if (dt >= target / 4 || dt >= 200000 || rounds >= (1ull << 40))
			break;
		rounds *= 2;
	}
	rounds = (uint64_t)((double)rounds * (double)target / (double)dt + 0.5);
	return rounds ? rounds : 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: lockstorm [--threads N] [--seconds S] [--ratio L:R:T]\n"
		"                 [--report-interval S] [--compute-us US]\n"
		"                 [--block-ms MIN:MAX] [--classes B:S:C] [--fork 1]\n"
		"                 [--from-signal 1]\n"
		"  --threads N          worker threads (1..%d, default 4)\n"
		"  --seconds S          run time, 0 = until SIGTERM/SIGINT (default 0)\n"
		"  --ratio L:R:T        blocking-time split between wait_for_lock,\n"
		"                       read_request and throttle (default 60:30:10)\n"
		"  --report-interval S  seconds between reports, 0 = off (default 5)\n"
		"  --compute-us US      CPU time of one compute_batch (default 1000)\n"
		"  --block-ms MIN:MAX   duration of one block, uniform (default 2:10)\n"
		"  --classes B:S:C      request classes browse, search, checkout,\n"
		"                       drawn at random in this ratio (default 50:30:20)\n"
		"  --fork 1             run in a fork child; the parent waits for it\n"
		"  --from-signal 1      run from a signal handler of the main thread\n"
		"SIGUSR1 prints a report; SIGTERM/SIGINT print a final one and exit.\n",
		MAX_WORKERS);
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *ret)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*ret = v;
	return true;
}

static bool parse_seconds(const char *s, double *ret)
{
	char *end;
	double v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= 0) || v > 1e9)
		return false;
	*ret = v;
	return true;
}

/* "a:b[:c]" of unsigned integers into `out` (n entries). */
static bool parse_tuple(const char *s, unsigned long max, unsigned long *out,
			int n)
{
	char buf[64], *tok, *save = NULL;
	int i = 0;

	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ":", &save); tok;
	     tok = strtok_r(NULL, ":", &save)) {
		if (i == n || !parse_uint(tok, max, &out[i++]))
			return false;
	}
	return i == n;
}

static bool start_forked, start_from_signal;

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		unsigned long v, t[3];
		bool ok;

		if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!val) {
			fprintf(stderr, "lockstorm: %s needs a value\n", opt);
			usage(stderr);
			exit(2);
		}
		i++;
		if (!strcmp(opt, "--threads")) {
			ok = parse_uint(val, MAX_WORKERS, &v) && v > 0;
			cfg.nr_workers = v;
		} else if (!strcmp(opt, "--seconds")) {
			ok = parse_seconds(val, &cfg.seconds);
		} else if (!strcmp(opt, "--report-interval")) {
			ok = parse_seconds(val, &cfg.report_interval);
		} else if (!strcmp(opt, "--compute-us")) {
			ok = parse_uint(val, 10000000, &v);
			cfg.compute_us = v;
		} else if (!strcmp(opt, "--ratio")) {
			ok = parse_tuple(val, 1000000, t, 3) &&
			     t[0] + t[1] + t[2] > 0;
			for (int p = 0; ok && p < NR_PATHS; p++)
				cfg.ratio[p] = t[p];
		} else if (!strcmp(opt, "--block-ms")) {
			ok = parse_tuple(val, 60000, t, 2) && t[0] <= t[1] &&
			     t[1] > 0;
			cfg.block_min_ns = ok ? t[0] * NSEC_PER_MSEC : 0;
			cfg.block_max_ns = ok ? t[1] * NSEC_PER_MSEC : 0;
		} else if (!strcmp(opt, "--fork")) {
			ok = parse_uint(val, 1, &v);
			start_forked = v;
		} else if (!strcmp(opt, "--from-signal")) {
			ok = parse_uint(val, 1, &v);
			start_from_signal = v;
		} else if (!strcmp(opt, "--classes")) {
			ok = parse_tuple(val, 1000000, t, 3) &&
			     t[0] + t[1] + t[2] > 0;
			for (int c = 0; ok && c < NR_CLASSES; c++)
				cfg.classes[c] = t[c];
		} else {
			fprintf(stderr, "lockstorm: unknown option %s\n", opt);
			usage(stderr);
			exit(2);
		}
		if (!ok) {
			fprintf(stderr, "lockstorm: bad value for %s: %s\n",
				opt, val);
			usage(stderr);
			exit(2);
		}
	}
	cfg.ratio_sum = cfg.ratio[0] + cfg.ratio[1] + cfg.ratio[2];
	cfg.classes_sum = cfg.classes[0] + cfg.classes[1] + cfg.classes[2];
}

static void setup_workers(void)
{
	workers = aligned_alloc(64, sizeof(*workers) * cfg.nr_workers);
	if (!workers)
		die("aligned_alloc");
	memset(workers, 0, sizeof(*workers) * cfg.nr_workers);
	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		struct worker *w = &workers[i];

		w->index = i;
		/* i < MAX_WORKERS: the modulo only tells the compiler the
		 * name fits the kernel's 16-byte comm. */
		snprintf(w->comm, sizeof(w->comm), "ls-worker-%u",
			 i % MAX_WORKERS);
		/* Deterministic per worker, never 0 (xorshift's fixed point). */
		w->rng = 0x243f6a8885a308d3ull * (i + 1);
		w->class_rng = 0x13198a2e03707344ull * (i + 1);
		for (unsigned int j = 0; j < COMPUTE_BUF_WORDS; j++)
			w->buf[j] = (uint32_t)xorshift64(&w->rng);
		pthread_mutex_init(&w->lock[0], NULL);
		pthread_mutex_init(&w->lock[1], NULL);
		if (pipe2(w->reply_pipe, O_CLOEXEC) < 0)
			die("pipe");
	}
}

/* Everything after the arguments: from main, a fork child or a handler. */
STACK_FRAME static int run_lockstorm(void)
{
	pthread_t threads[MAX_WORKERS];
	sigset_t sigs;
	uint64_t next_report, interval_ns, end_ns = 0, checksum = 0;
	int err;

	/* Signals are taken synchronously by the main thread (sigtimedwait),
	 * so block them before any thread exists: every thread inherits it. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	setup_workers();
	cfg.compute_rounds = calibrate(&workers[0]);
	printf("lockstorm: config pid=%d threads=%u ratio=%u:%u:%u"
	       " classes=%u:%u:%u"
	       " block_ms=%llu:%llu compute_us=%u compute_rounds=%llu"
	       " seconds=%g report_interval=%g\n",
	       getpid(), cfg.nr_workers, cfg.ratio[0], cfg.ratio[1],
	       cfg.ratio[2], cfg.classes[0], cfg.classes[1], cfg.classes[2],
	       (unsigned long long)(cfg.block_min_ns / NSEC_PER_MSEC),
	       (unsigned long long)(cfg.block_max_ns / NSEC_PER_MSEC),
	       cfg.compute_us, (unsigned long long)cfg.compute_rounds,
	       cfg.seconds, cfg.report_interval);
	name_thread("lockstorm", "main");

	holder = (struct timer_loop){
		.comm = "ls-holder", .role = "holder",
		.init = holder_init, .fire = holder_fire,
	};
	dispatcher = (struct timer_loop){
		.comm = "ls-dispatch", .role = "dispatch",
		.fire = dispatcher_fire,
	};
	/* Workers start once the holder holds every mutex. */
	pthread_barrier_init(&loops_ready, NULL, 3);
	timer_loop_start(&holder);
	timer_loop_start(&dispatcher);
	pthread_barrier_wait(&loops_ready);

	start_ns = now_ns();
	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		err = pthread_create(&threads[i], NULL, worker_main,
				     &workers[i]);
		if (err)
			die_err("pthread_create", err);
	}

	if (cfg.seconds > 0)
		end_ns = start_ns + (uint64_t)(cfg.seconds * NSEC_PER_SEC);
	/* At least 1 ms: a zero step would never move past `now`. */
	interval_ns = (uint64_t)(cfg.report_interval * NSEC_PER_SEC);
	if (interval_ns < NSEC_PER_MSEC)
		interval_ns = NSEC_PER_MSEC;
	next_report = cfg.report_interval > 0 ? start_ns + interval_ns : 0;
	for (;;) {
		uint64_t now = now_ns(), wake = 0;
		struct timespec ts;
		int sig;

		if (end_ns && now >= end_ns)
			break;
		if (next_report && now >= next_report) {
			report();
			/* Skip missed slots rather than burst after a stall. */
			while (next_report <= now)
				next_report += interval_ns;
		}
		if (end_ns)
			wake = end_ns;
		if (next_report && (!wake || next_report < wake))
			wake = next_report;
		if (wake)
			ns_to_timespec(wake - now, &ts);
		if (wake)
			sig = sigtimedwait(&sigs, NULL, &ts);
		else
			sig = sigwaitinfo(&sigs, NULL);
		if (sig == SIGUSR1)
			report();
		else if (sig == SIGTERM || sig == SIGINT)
			break;
	}

	/* Workers finish their current block (at most block_max), which needs
	 * the holder and dispatcher still running; stop those last. */
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < cfg.nr_workers; i++) {
		pthread_join(threads[i], NULL);
		checksum ^= workers[i].checksum;
	}
	timer_loop_stop(&holder);
	timer_loop_stop(&dispatcher);
	report();
	printf("lockstorm: exit checksum=%016llx\n",
	       (unsigned long long)checksum);
	return 0;
}

STACK_FRAME static void run_from_signal(int sig)
{
	(void)sig;
	/* Not async-signal-safe, and meant so: the stack is what matters. */
	exit(run_lockstorm());
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv);
	if (start_forked) {
		pid_t child = fork();
		int status;

		if (child < 0)
			die("fork");
		if (child > 0) {
			while (waitpid(child, &status, 0) < 0 && errno == EINTR)
				;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
		}
	}
	if (start_from_signal) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = run_from_signal;
		if (sigaction(SIGUSR2, &sa, NULL) < 0)
			die("sigaction");
		raise(SIGUSR2);
		return 1;	/* the handler exits */
	}
	return run_lockstorm();
}
