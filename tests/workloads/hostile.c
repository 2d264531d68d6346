// SPDX-License-Identifier: MIT
/*
 * hostile — an unprivileged guest program that feeds a profiler on the
 * host everything a guest user controls, at once (issue 32, item 2;
 * tests/e2e/web01/t_70_hostile.sh).
 *
 *   hostile DIR SECONDS
 *   hostile --elf VARIANT FILE
 *
 * The second form only writes crafted executable VARIANT (0-2, below) to
 * FILE: seeds for the ELF and CFI fuzz targets (tests/fuzz/).
 *
 * DIR is a directory it may write to (it is emptied of what hostile made
 * on the way out); SECONDS 0 runs until SIGTERM.  It becomes the leader of
 * a process group of its own and starts one process per role:
 *
 *   elf     writes three crafted static ELF executables under DIR and runs
 *           them: tiny loops of 10 ms sleeps, each sleep at a pc whose
 *           .eh_frame entry is hostile (a DW_OP_skip that jumps to itself,
 *           an FDE whose CIE is itself, remembered states past any cap, a
 *           64-bit length of a terabyte, 8 KiB of instructions, a CFA that
 *           does not move or moves down, an expression that overflows any
 *           stack); one whose .eh_frame_hdr claims 16M entries, one whose
 *           table points the search at the table itself.  Their argv[0]
 *           is a title of control bytes.
 *   title   re-runs itself with 64 KiB of arguments made of control bytes
 *           (ESC, BEL, CSI sequences) and invalid UTF-8, and rewrites them
 *           in place every few ms (its /proc/PID/cmdline).
 *   names   four threads that rename themselves (prctl PR_SET_NAME, and
 *           /proc/self/task/TID/comm) with such bytes every 5 ms.
 *   deep    a thread that recurses 100,000 frames deep, then sleeps 10 ms
 *           at a time at the bottom (idle, with a 6 MiB stack).
 *   badregs threads whose stack pointer (0x1000, a kernel address, an
 *           unaligned unmapped one) or fs base (unmapped) is garbage while
 *           they sleep 10 ms at a time in raw system calls.
 *   maps    maps 4,000 one-page files (each starting with an ELF magic and
 *           garbage headers) and sleeps 10 ms at a time.
 *   forks   forks and reaps a child every 5 ms (up to 200 a second), each
 *           child renaming itself before it exits.
 *
 *   hostile: ready pid=<pid> pgid=<pgid>
 *
 * is printed (and flushed) once every role runs.  HOSTILE_SKIP (environment)
 * lists roles to leave out by their digit, 0 to 5 in the order above
 * ("5": no forks), to tell which one a change in idlevm's figures is due to.  At the end (SECONDS, or
 * SIGTERM) it kills its group, reaps it and removes what it made in DIR.
 * Needs no privilege.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TITLE_BYTES (64 * 1024)
#define TITLE_ARGS 16
#define DEEP_FRAMES 100000
#define MAP_FILES 4000
/*
 * How often each role wakes.  Every sleep is a switch to idle for the
 * profiler to capture; on a 2-vCPU guest under TCG, roles that woke every
 * ms (and forked every 3) took the guest from its server load (441 of
 * nginx's switches to idle in 15 s fell to 58), so the run without and
 * the run with it no longer compared the same load.
 */
#define NAP_MS 10
#define RENAME_MS 5
#define FORK_MS 5

static const char *dir;

static void die(const char *what)
{
	fprintf(stderr, "hostile: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)rnd_state;
}

/*
 * Fill buf with n bytes a terminal and a UTF-8 decoder dislike, and no
 * NUL: escape sequences that clear the screen and set the title, BEL,
 * C1 controls, DEL, lone continuation bytes, overlong forms and
 * surrogates, markup.
 */
static void hostile_bytes(char *buf, size_t n)
{
	static const char *const bits[] = {
		"\033[2J", "\033]0;pwned\007", "\007", "\033[31m", "\r", "\n",
		"\t", "\b", "\x7f", "\xc2\x9b", "\x9b" "6n", "\xff", "\xfe",
		"\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf8\x88",
		"<img src=x onerror=alert(1)>", "\"',;|", "%s%n", "\x1b" "P",
	};
	size_t i = 0;

	while (i < n) {
		const char *b = bits[rnd() % (sizeof(bits) / sizeof(bits[0]))];
		size_t len = strlen(b);

		if (len > n - i)
			len = n - i;
		memcpy(buf + i, b, len);
		i += len;
	}
}

static void rename_self(pid_t tid)
{
	char name[16], path[64];
	int fd;

	hostile_bytes(name, sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	prctl(PR_SET_NAME, name);
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		hostile_bytes(name, sizeof(name) - 1);
		if (write(fd, name, sizeof(name) - 1) < 0)
			(void)0;	/* the kernel may refuse: keep going */
		close(fd);
	}
}

/* ---- elf: crafted executables with hostile CFI ------------------------ */

#define EVIL_BASE 0x400000ull
#define EVIL_CODE 0x100u	/* entry, then one 16-byte block per FDE */
#define EVIL_TS 0x300u		/* struct timespec { 0, NAP_MS } */
#define EVIL_HDR 0x400u		/* .eh_frame_hdr */
#define EVIL_FRAME 0x800u	/* .eh_frame */
#define EVIL_MAX 0x8000u

struct evil {
	uint8_t b[EVIL_MAX];
	uint32_t len;		/* where the next .eh_frame entry goes */
};

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* A plain CIE: "zR", code 1, data -8, RA 16, pcrel sdata4; CFA rsp+8. */
static uint32_t evil_cie(struct evil *e)
{
	static const uint8_t body[] = {
		0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,
		0x0c, 7, 8, 0x90, 1, 0, 0, 0, 0, 0, 0,
	};
	uint32_t at = e->len;

	put32(e->b + at, sizeof(body));
	memcpy(e->b + at + 4, body, sizeof(body));
	e->len += 4 + sizeof(body);
	return at;
}

/*
 * An FDE for [pc, pc + 16) with instructions ins; cie_at is the CIE's
 * offset in the file, or (uint32_t)-1 for "this FDE itself".
 */
static uint32_t evil_fde(struct evil *e, uint32_t cie_at, uint32_t pc,
			 const uint8_t *ins, uint32_t n)
{
	uint32_t at = e->len, body = 4 + 4 + 4 + 1 + n;

	body = (body + 7) & ~7u;
	if (at + 4 + body > EVIL_MAX - 16)
		return at;
	memset(e->b + at, 0, 4 + body);
	put32(e->b + at, body);
	put32(e->b + at + 4, cie_at == (uint32_t)-1 ? 4 : at + 4 - cie_at);
	put32(e->b + at + 8, pc - (at + 8));	/* pcrel */
	put32(e->b + at + 12, 16);
	e->b[at + 16] = 0;			/* augmentation length */
	memcpy(e->b + at + 17, ins, n);
	e->len += 4 + body;
	return at;
}

/*
 * Build a crafted executable into e; variant 0 has a sound .eh_frame_hdr
 * over hostile FDEs, 1 a table that claims 16M entries, 2 a table whose
 * entries point at the table.  Returns the file size.
 */
static uint32_t evil_build(struct evil *e, int variant)
{
	static const uint8_t skip_loop[] = { 0x0f, 3, 0x2f, 0xfd, 0xff };
	static const uint8_t ra_loop[] = { 0x10, 16, 4, 0x31, 0x28, 0xfc, 0xff };
	static const uint8_t still[] = { 0x0c, 7, 0, 0x90, 0 };
	static const uint8_t down[] = { 0x12, 7, 8, 0x90, 1 };
	uint8_t ins[8192];
	uint32_t fdes[16], nr = 0, cie, i, code, size;
	uint8_t *h;

	memset(e, 0, sizeof(*e));
	/* ELF header */
	memcpy(e->b, "\177ELF\2\1\1", 7);
	e->b[16] = 2;				/* ET_EXEC */
	e->b[18] = 62;				/* EM_X86_64 */
	put32(e->b + 20, 1);
	put64(e->b + 24, EVIL_BASE + EVIL_CODE);
	put64(e->b + 32, 64);			/* phoff */
	e->b[52] = 64; e->b[54] = 56; e->b[56] = 3;	/* ehsize, phentsize, phnum */
	e->b[58] = 64;				/* shentsize; shnum 0 */

	e->len = EVIL_FRAME;
	cie = evil_cie(e);
	code = EVIL_CODE + 16;
	/* 0: DW_OP_skip back onto itself, as the CFA */
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, skip_loop, sizeof(skip_loop)); nr++;
	/* 1: lit1; bra -4 as the return address, forever */
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, ra_loop, sizeof(ra_loop)); nr++;
	/* 2: an FDE whose CIE is the FDE itself */
	fdes[nr] = evil_fde(e, (uint32_t)-1, code + 16 * nr, still, 0); nr++;
	/* 3: 40 remembered states */
	memset(ins, 0x0a, 40);
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, ins, 40); nr++;
	/* 4: a CFA that does not move, the return address at it */
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, still, sizeof(still)); nr++;
	/* 5: a CFA 64 bytes below the stack pointer */
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, down, sizeof(down)); nr++;
	/* 6: 8,000 bytes of def_cfa_offset, just under any sane cap */
	for (i = 0; i + 2 <= 8000; i += 2) {
		ins[i] = 0x0e;
		ins[i + 1] = 8;
	}
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, ins, 8000); nr++;
	/* 7: 600 pushes (lit0) then deref, as the CFA expression */
	ins[0] = 0x0f;
	ins[1] = 0x80 | (601 & 0x7f);
	ins[2] = 601 >> 7;
	memset(ins + 3, 0x30, 600);
	ins[603] = 0x06;
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, ins, 604); nr++;
	/* 8: a 64-bit length of a terabyte (0xffffffff escape) */
	fdes[nr] = e->len;
	put32(e->b + e->len, 0xffffffffu);
	put64(e->b + e->len + 4, 1ull << 40);
	put32(e->b + e->len + 12, e->len + 12 - cie);
	put32(e->b + e->len + 16, code + 16 * nr - (e->len + 16));
	put32(e->b + e->len + 20, 16);
	e->len += 32;
	nr++;
	/* 9: an augmentation length of 2^56 */
	fdes[nr] = evil_fde(e, cie, code + 16 * nr, still, 0);
	memcpy(e->b + fdes[nr] + 16, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
	nr++;
	put32(e->b + e->len, 0);		/* terminator */
	size = e->len + 4;

	/* code: lea ts(%rip),%r12, then blocks of sleep(NAP_MS) */
	i = EVIL_CODE;
	memcpy(e->b + i, "\x4c\x8d\x25", 3);
	put32(e->b + i + 3, EVIL_TS - (i + 7));
	memset(e->b + i + 7, 0x90, 9);
	for (i = 0; i < nr; i++) {
		uint8_t *c = e->b + code + 16 * i;

		memcpy(c, "\xb8\x23\0\0\0\x4c\x89\xe7\x31\xf6\x0f\x05\x90\x90\x90\x90", 16);
	}
	/* jmp back to the first block */
	e->b[code + 16 * nr] = 0xe9;
	put32(e->b + code + 16 * nr + 1, code - (code + 16 * nr + 5));
	put64(e->b + EVIL_TS + 8, NAP_MS * 1000000);

	/* .eh_frame_hdr: version 1, pcrel sdata4, udata4, datarel sdata4 */
	h = e->b + EVIL_HDR;
	h[0] = 1; h[1] = 0x1b; h[2] = 0x03; h[3] = 0x3b;
	put32(h + 4, EVIL_FRAME - (EVIL_HDR + 4));
	put32(h + 8, variant == 1 ? 0x00ffffffu : nr);
	for (i = 0; i < nr; i++) {
		put32(h + 12 + 8 * i, code + 16 * i - EVIL_HDR);
		put32(h + 16 + 8 * i, variant == 2 ? 12 + 8 * ((i + 1) % nr)
						: fdes[i] - EVIL_HDR);
	}

	/* program headers: one RX load of the file, EH_FRAME, GNU_STACK */
	h = e->b + 64;
	put32(h, 1); put32(h + 4, 5);
	put64(h + 16, EVIL_BASE); put64(h + 24, EVIL_BASE);
	put64(h + 32, size); put64(h + 40, size); put64(h + 48, 0x1000);
	h += 56;
	put32(h, 0x6474e550); put32(h + 4, 4);
	put64(h + 8, EVIL_HDR); put64(h + 16, EVIL_BASE + EVIL_HDR);
	put64(h + 24, EVIL_BASE + EVIL_HDR);
	put64(h + 32, 12 + 8 * nr); put64(h + 40, 12 + 8 * nr); put64(h + 48, 4);
	h += 56;
	put32(h, 0x6474e551); put32(h + 4, 6);
	return size;
}

static pid_t run_evil(int variant)
{
	static struct evil e;
	char path[4096], *argv[2], *title;
	uint32_t size;
	pid_t pid;
	int fd;

	size = evil_build(&e, variant);
	snprintf(path, sizeof(path), "%s/ivm-evil-%d", dir, variant);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (fd < 0 || write(fd, e.b, size) != (ssize_t)size || close(fd))
		die(path);
	title = malloc(TITLE_BYTES / 4 + 1);
	if (!title)
		die("malloc");
	hostile_bytes(title, TITLE_BYTES / 4);
	title[TITLE_BYTES / 4] = 0;
	argv[0] = title;
	argv[1] = NULL;
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		execv(path, argv);
		die(path);
	}
	free(title);
	return pid;
}

/* ---- title: 64 KiB of arguments, rewritten in place ------------------- */

static void role_title(int argc, char **argv)
{
	char *start = argv[2], *end = argv[argc - 1] + strlen(argv[argc - 1]);

	for (;;) {
		size_t at = rnd() % (size_t)(end - start), n = 1 + rnd() % 512;

		if (n > (size_t)(end - start) - at)
			n = (size_t)(end - start) - at;
		hostile_bytes(start + at, n);
		rename_self((pid_t)syscall(SYS_gettid));
		sleep_ms(RENAME_MS);
	}
}

static void exec_title(const char *self)
{
	char *argv[TITLE_ARGS + 3];
	int i;

	argv[0] = (char *)self;
	argv[1] = "title";
	for (i = 0; i < TITLE_ARGS; i++) {
		size_t n = TITLE_BYTES / TITLE_ARGS - 1;

		argv[2 + i] = malloc(n + 1);
		if (!argv[2 + i])
			die("malloc");
		hostile_bytes(argv[2 + i], n);
		argv[2 + i][n] = 0;
	}
	argv[2 + TITLE_ARGS] = NULL;
	execv("/proc/self/exe", argv);
	die("exec /proc/self/exe");
}

/* ---- names: threads renamed all the time ------------------------------ */

static void *renamer(void *arg)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	(void)arg;
	for (;;) {
		rename_self(tid);
		sleep_ms(RENAME_MS);
	}
	return NULL;
}

/* ---- deep: 100,000 frames, then idle at the bottom -------------------- */

static volatile int deep_stop;

static __attribute__((noinline)) unsigned long recurse(unsigned long n)
{
	volatile unsigned long here[2] = { n, n ^ 0x5a5a };

	if (!n) {
		while (!deep_stop)
			sleep_ms(NAP_MS);
		return 0;
	}
	return recurse(n - 1) + here[0] + here[1];
}

static void *deep(void *arg)
{
	(void)arg;
	return (void *)recurse(DEEP_FRAMES);
}

/* ---- badregs: garbage stack pointer or fs base while asleep ----------- */

static const struct timespec nap = { 0, NAP_MS * 1000000 };

/*
 * The end of an asm statement whose %0 is arg: nanosleep(&nap) in a
 * loop with the system call's registers only, never the stack or TLS.
 */
#define SLEEP_FOREVER(arg)						\
	"1:\n\t"							\
	"mov $35, %%eax\n\t"	/* nanosleep */				\
	"mov %1, %%rdi\n\t"						\
	"xor %%esi, %%esi\n\t"						\
	"syscall\n\t"							\
	"jmp 1b\n\t"							\
	: : "r"(arg), "r"(&nap)					\
	: "rax", "rdi", "rsi", "rcx", "r11", "memory"

/*
 * Sleep NAP_MS at a time forever with rsp (and rbp) set to sp: nothing
 * here touches the stack, the system call takes its argument in a
 * register.
 */
static void *bad_sp(void *sp)
{
	__asm__ volatile(
		"mov %0, %%rsp\n\t"
		"mov %0, %%rbp\n\t"
		SLEEP_FOREVER(sp));
	return NULL;
}

/* The same with the thread's fs base (its TLS) unmapped. */
static void *bad_fs(void *fs)
{
	__asm__ volatile(
		"mov $158, %%eax\n\t"		/* arch_prctl */
		"mov $0x1002, %%edi\n\t"	/* ARCH_SET_FS */
		"mov %0, %%rsi\n\t"
		"syscall\n\t"
		SLEEP_FOREVER(fs));
	return NULL;
}

/* ---- maps: thousands of mapped files ---------------------------------- */

static void role_maps(void)
{
	char path[4096], page[4096];
	int i, fd;

	snprintf(path, sizeof(path), "%s/maps", dir);
	if (mkdir(path, 0700) && errno != EEXIST)
		die(path);
	for (i = 0; i < MAP_FILES; i++) {
		void *p;

		hostile_bytes(page, sizeof(page));
		memcpy(page, "\177ELF\2\1\1", 7);
		snprintf(path, sizeof(path), "%s/maps/%d", dir, i);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, page, sizeof(page)) != sizeof(page))
			die(path);
		p = mmap(NULL, sizeof(page), PROT_READ | (i & 1 ? PROT_EXEC : 0),
			 MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			die("mmap");
		close(fd);
		(void)*(volatile char *)p;
	}
	for (;;)
		sleep_ms(NAP_MS);
}

/* ---- forks: hundreds of children a second ----------------------------- */

static void role_forks(void)
{
	for (;;) {
		pid_t pid = fork();

		if (!pid) {
			rename_self((pid_t)syscall(SYS_gettid));
			_exit(0);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
		sleep_ms(FORK_MS);
	}
}

/* ---- the group -------------------------------------------------------- */

static void role_names(void)
{
	pthread_t t;
	int i;

	for (i = 0; i < 4; i++)
		if (pthread_create(&t, NULL, renamer, NULL))
			die("pthread_create");
	renamer(NULL);
}

static void role_deep(void)
{
	pthread_attr_t a;
	pthread_t t;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 20);
	if (pthread_create(&t, &a, deep, NULL))
		die("pthread_create");
	for (;;)
		pause();
}

static void role_badregs(void)
{
	static void *const sps[] = {
		(void *)0x1000, (void *)0xffff888000000000ull,
		(void *)0x7ffffffff001ull,
	};
	pthread_t t;
	size_t i;

	for (i = 0; i < sizeof(sps) / sizeof(sps[0]); i++)
		if (pthread_create(&t, NULL, bad_sp, sps[i]))
			die("pthread_create");
	if (pthread_create(&t, NULL, bad_fs, (void *)0xdead0000000ull))
		die("pthread_create");
	for (;;)
		pause();
}

static void role_elf(void)
{
	int v;

	for (v = 0; v < 3; v++)
		run_evil(v);
	for (;;)
		pause();
}

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void cleanup(void)
{
	char path[4096];
	int i;

	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/ivm-evil-%d", dir, i);
		unlink(path);
	}
	for (i = 0; i < MAP_FILES; i++) {
		snprintf(path, sizeof(path), "%s/maps/%d", dir, i);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/maps", dir);
	rmdir(path);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_term };
	const char *self = argv[0];
	long seconds;
	pid_t tpid;
	int i;

	if (argc > 2 && !strcmp(argv[1], "title"))
		role_title(argc, argv);
	if (argc == 4 && !strcmp(argv[1], "--elf")) {
		static struct evil e;
		uint32_t size = evil_build(&e, atoi(argv[2]));
		FILE *f = fopen(argv[3], "wb");

		if (!f || fwrite(e.b, 1, size, f) != size || fclose(f))
			die(argv[3]);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: hostile DIR SECONDS\n");
		return 2;
	}
	dir = argv[1];
	seconds = strtol(argv[2], NULL, 10);
	/* A session leader (setsid) leads its group already. */
	if (getpgrp() != getpid() && setpgid(0, 0))
		die("setpgid");
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* The roles must not inherit our handler: the group's SIGTERM ends them. */
	signal(SIGCHLD, SIG_DFL);
	{
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		pid_t pids[6];
		void (*roles[])(void) = { role_elf, role_names, role_deep,
					  role_badregs, role_maps, role_forks };

		for (i = 0; i < 6; i++) {
			if (getenv("HOSTILE_SKIP") && strchr(getenv("HOSTILE_SKIP"), '0' + i))
				continue;
			pids[i] = fork();
			if (pids[i] < 0)
				die("fork");
			if (!pids[i]) {
				sigaction(SIGTERM, &dfl, NULL);
				sigaction(SIGINT, &dfl, NULL);
				rnd_state += (uint64_t)getpid() * 0x2545f4914f6cdd1dull;
				roles[i]();
				_exit(0);
			}
		}
		tpid = fork();
		if (tpid < 0)
			die("fork");
		if (!tpid) {
			sigaction(SIGTERM, &dfl, NULL);
			exec_title(self);
		}
	}
	printf("hostile: ready pid=%d pgid=%d\n", (int)getpid(), (int)getpgrp());
	fflush(stdout);
	for (i = 0; !stop && (!seconds || i < seconds * 10); i++)
		sleep_ms(100);
	signal(SIGTERM, SIG_IGN);
	kill(0, SIGTERM);
	/* Every role dies of SIGTERM; reap them before removing their files. */
	while (wait(NULL) > 0 || errno == EINTR)
		;
	cleanup();
	return 0;
}
