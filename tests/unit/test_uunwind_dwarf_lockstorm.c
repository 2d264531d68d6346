// SPDX-License-Identifier: MIT
/*
 * The DWARF CFI user unwinder on the demo workload's real stacks: the
 * static guest binaries build/guest/lockstorm-{fp,nofp} run natively here,
 * one worker thread is stopped again and again with PTRACE_INTERRUPT (the
 * registers PTRACE_GETREGS gives a thread blocked in a syscall are its user
 * registers at the syscall, exactly what the guest kernel's pt_regs gives
 * idlevm), and its stack is unwound over process_vm_readv with the binary's
 * CFI, then checked against the call chains tests/workloads/lockstorm.c
 * promises:
 *
 *   __lll_lock_wait <- pthread_mutex_lock <- wait_for_lock <- worker_main
 *       <- start_thread <- clone3                                 (futex)
 *   read <- read_request <- worker_main <- start_thread ...       (read)
 *   clock_nanosleep <- throttle <- worker_main <- start_thread ... (sleep)
 *
 * The frame-pointer unwinder runs on the same registers; what it loses is
 * logged (criterion --verbose).  The workload is started by the test and
 * killed in every case (SIGKILL at the end, PR_SET_PDEATHSIG should the
 * test die, --seconds as a last bound).
 *
 * Where the worker is when it is stopped is up to the scheduler, so every
 * assertion holds for any sample: one caught running anywhere in the
 * binary (worker_main itself included) must still reach start_thread, and
 * only a worker stopped inside one of its three blocking syscalls must show
 * that path.  How many samples it takes is no assertion either: the test
 * samples until each path has been seen (they are most of the workload's
 * time by design), under the test's timeout as a hang guard.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "unwind/uunwind.h"
#include "unwind/uunwind_dwarf.h"
#include "unwind/uunwind_exe.h"

#include "live_workload.h"

#define MAX_FRAMES 64

static const struct ivm_kmem_reader reader = {
	live_workload_read, NULL
};

TestSuite(uunwind_dwarf_ls, .fini = live_workload_stop);

/* Start bin with 2 workers; return the tid of its first worker. */
static pid_t start_workload(const char *bin)
{
	char *const argv[] = { (char *)bin, "--threads", "2", "--seconds",
			       "600", "--report-interval", "0", NULL };
	char buf[8192];
	size_t len = 0;

	cr_assert_eq(live_workload_start(argv), 0, "%s: %s", bin,
		     strerror(errno));
	/* "lockstorm: start tid=N comm=ls-worker-0 role=worker" */
	for (;;) {
		struct pollfd pfd = { workload_out, POLLIN, 0 };
		const char *line;
		ssize_t n;

		cr_assert_eq(poll(&pfd, 1, -1), 1, "%s: no worker started",
			     bin);
		n = read(workload_out, buf + len, sizeof(buf) - 1 - len);
		cr_assert_gt(n, 0, "%s exited early", bin);
		len += (size_t)n;
		buf[len] = 0;
		line = strstr(buf, "comm=ls-worker-0 role=worker");
		if (line) {
			while (line > buf && line[-1] != '\n')
				line--;
			int tid = 0;

			cr_assert_eq(sscanf(line, "lockstorm: start tid=%d",
					    &tid), 1);
			return tid;
		}
		cr_assert_lt(len, sizeof(buf) - 1);
	}
}

static void regs_from_user(const struct user_regs_struct *u,
			   struct ivm_x86_regs *r)
{
	memset(r, 0, sizeof(*r));
	r->valid = IVM_X86_REGS_GPRS;
	r->rax = u->rax;
	r->rbx = u->rbx;
	r->rcx = u->rcx;
	r->rdx = u->rdx;
	r->rsi = u->rsi;
	r->rdi = u->rdi;
	r->rbp = u->rbp;
	r->rsp = u->rsp;
	r->r8 = u->r8;
	r->r9 = u->r9;
	r->r10 = u->r10;
	r->r11 = u->r11;
	r->r12 = u->r12;
	r->r13 = u->r13;
	r->r14 = u->r14;
	r->r15 = u->r15;
	r->rip = u->rip;
	r->rflags = u->eflags;
}

/* Load bias of the running workload: 0 but for the static-pie build. */
static uint64_t bias;

static const char *name_of(const struct ivm_ksyms *syms,
			   const struct ivm_frame *f)
{
	const struct ivm_ksym *sym;

	sym = ivm_ksyms_symbolize(syms, f->pc - bias -
				  (f->flags & IVM_FRAME_REGS ? 0 : 1), NULL);
	return sym ? sym->name : "?";
}

static void chain(const struct ivm_ksyms *syms, const struct ivm_stack *st,
		  char *out, size_t size)
{
	size_t len = 0;

	out[0] = 0;
	for (uint32_t i = 0; i < st->nr && len < size; i++)
		len += (size_t)snprintf(out + len, size - len, "%s%s%s",
					i ? " <- " : "",
					name_of(syms, &st->frames[i]),
					st->frames[i].flags & IVM_FRAME_INEXACT ?
					"(fp)" : "");
	if (len < size)
		snprintf(out + len, size - len, " [flags %#x]", st->flags);
}

static int find(const struct ivm_ksyms *syms, const struct ivm_stack *st,
		const char *name)
{
	for (uint32_t i = 0; i < st->nr; i++)
		if (!strcmp(name_of(syms, &st->frames[i]), name))
			return (int)i;
	return -1;
}

static bool name_has(const struct ivm_ksyms *syms, const struct ivm_stack *st,
		     int i, const char *part)
{
	return i >= 0 && (uint32_t)i < st->nr &&
	       strstr(name_of(syms, &st->frames[i]), part);
}

static struct ivm_umapping maps[IVM_UBINARY_MAX_EXEC];
static size_t nr_maps;

static bool in_maps(uint64_t pc)
{
	for (size_t i = 0; i < nr_maps; i++)
		if (pc >= maps[i].start && pc < maps[i].end)
			return true;
	return false;
}

enum { SYSCALL_READ = 0, SYSCALL_FUTEX = 202, SYSCALL_CLOCK_NANOSLEEP = 230 };

struct tally {
	unsigned int samples, lock, read, sleep, running, elsewhere, fp_lost;
	bool logged_lock;
};

/*
 * Check one sample.  Every stack must reach worker_main <- start_thread
 * and end cleanly (worker_main may be the leaf: a worker caught running in
 * it); a thread blocked in one of the three syscalls must show its whole
 * path.
 */
static void check_sample(const struct ivm_ksyms *syms,
			 const struct user_regs_struct *u,
			 const struct ivm_stack *st,
			 const struct ivm_stack *fp, struct tally *t)
{
	int wm = find(syms, st, "worker_main");
	char text[1024], fptext[1024];
	long sc = (long)u->orig_rax;

	chain(syms, st, text, sizeof(text));
	chain(syms, fp, fptext, sizeof(fptext));
	t->samples++;
	/*
	 * A worker caught running inside the vDSO (clock_gettime) has a leaf
	 * outside the binary: no CFI for it here, a frame-pointer guess at
	 * best.  Rare and not this test's subject.
	 */
	if (!in_maps(st->frames[0].pc)) {
		t->elsewhere++;
		return;
	}
	cr_assert_geq(wm, 0, "no worker_main: %s", text);
	cr_assert(name_has(syms, st, wm + 1, "start_thread"), "%s", text);
	cr_assert_eq(st->flags, 0, "%s", text);
	for (uint32_t i = 0; i < st->nr; i++)
		cr_assert_not(st->frames[i].flags & IVM_FRAME_INEXACT, "%s",
			      text);

	if (sc == SYSCALL_FUTEX && name_has(syms, st, wm - 1,
					    "wait_for_lock") &&
	    name_has(syms, st, wm - 2, "pthread_mutex_unlock")) {
		/* caught in the brief FUTEX_WAKE of the unlock */
		cr_assert(name_has(syms, st, 0, "lll_lock_wake"), "%s", text);
		t->running++;
	} else if (sc == SYSCALL_FUTEX && name_has(syms, st, wm - 1,
						   "wait_for_lock")) {
		cr_assert(name_has(syms, st, wm - 2, "pthread_mutex_lock"),
			  "%s", text);
		cr_assert(name_has(syms, st, 0, "lll_lock_wait"), "%s", text);
		t->lock++;
		if (find(syms, fp, "wait_for_lock") < 0 ||
		    find(syms, fp, "pthread_mutex_lock") < 0)
			t->fp_lost++;
		if (!t->logged_lock) {
			cr_log_info("dwarf: %s", text);
			cr_log_info("fp:    %s", fptext);
			t->logged_lock = true;
		}
	} else if (sc == SYSCALL_READ) {
		cr_assert(name_has(syms, st, wm - 1, "read_request"), "%s",
			  text);
		cr_assert(name_has(syms, st, wm - 2, "read"), "%s", text);
		t->read++;
	} else if (sc == SYSCALL_CLOCK_NANOSLEEP) {
		cr_assert(name_has(syms, st, wm - 1, "throttle"), "%s", text);
		cr_assert(name_has(syms, st, wm - 2, "nanosleep"), "%s", text);
		t->sleep++;
	} else {
		t->running++;
	}
}

/*
 * Where the workload's executable is, as idlevm finds it in a guest: its
 * auxiliary vector (here /proc/PID/auxv, in a guest mm->saved_auxv) and
 * its memory give the ELF header, the build-id and the load bias, which
 * must agree with the host file and with the kernel's own account in
 * /proc/PID/maps.
 */
static void locate_workload(const char *bin, struct ivm_ubinary *b)
{
	uint8_t auxv[IVM_UEXE_MAX_AUXV * 16];
	char path[64], line[4608], real[4096];
	struct ivm_uexe x;
	struct ivm_error *err;
	bool seen = false;
	ssize_t n;
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)workload);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	n = read(fd, auxv, sizeof(auxv));
	close(fd);
	cr_assert_gt(n, 0);
	err = ivm_uexe_identify(&reader, auxv, (size_t)n, 0, &x);
	cr_assert_null(err, "%s: %s", bin, ivm_error_string(err));
	err = ivm_uexe_check(&x, b);
	cr_assert_null(err, "%s: %s", bin, ivm_error_string(err));
	cr_assert_eq(x.dyn, ivm_ubinary_is_dyn(b));
	bias = x.bias;
	/* The kernel's view: the mapping of file offset 0. */
	cr_assert_not_null(realpath(bin, real));
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)workload);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, off;
		char file[4096] = "";

		if (sscanf(line, "%llx-%*x %*s %llx %*s %*s %4095s", &start,
			   &off, file) == 3 && off == 0 &&
		    !strcmp(file, real)) {
			cr_assert_eq(start, x.header, "%s", line);
			seen = true;
			break;
		}
	}
	fclose(f);
	cr_assert(seen, "no mapping of %s at offset 0", real);
	if (!x.dyn)
		cr_assert_eq(bias, 0);
	else
		cr_assert_neq(bias, 0, "a PIE loaded at its link address?");
	nr_maps = ivm_ubinary_mappings(b, bias, maps, IVM_UBINARY_MAX_EXEC);
	cr_assert_geq(nr_maps, 1);
}

static const char *guest_bin(const char *name)
{
	static char path[4096];
	const char *dir = getenv("IVM_GUEST_DIR");

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/guest",
		 name);
	return path;
}

static void sample_workload(const char *bin)
{
	struct ivm_frame frames[MAX_FRAMES], fp_frames[MAX_FRAMES];
	struct ivm_ubinary *b;
	struct ivm_ksyms *syms;
	struct tally t = { 0 };
	pid_t tid;

	if (access(bin, X_OK))
		cr_skip_test("%s absent: make %s", bin, bin);
	cr_assert_null(ivm_ubinary_open(bin, &b));
	cr_assert_null(ivm_ksyms_load_elf(bin, &syms));

	tid = start_workload(bin);
	locate_workload(bin, b);
	cr_assert_eq(ptrace(PTRACE_SEIZE, tid, 0, 0), 0, "seize %d: %s", tid,
		     strerror(errno));
	for (;;) {
		struct user_regs_struct u;
		struct ivm_x86_regs regs;
		struct ivm_stack st, fp;
		int status;

		cr_assert_eq(ptrace(PTRACE_INTERRUPT, tid, 0, 0), 0);
		cr_assert_eq(waitpid(tid, &status, __WALL), tid);
		cr_assert(WIFSTOPPED(status), "status %#x", status);
		cr_assert_eq(ptrace(PTRACE_GETREGS, tid, 0, &u), 0);
		regs_from_user(&u, &regs);

		ivm_stack_init(&st, frames, MAX_FRAMES);
		cr_assert_null(ivm_uunwind_dwarf(&reader, &regs, 0, maps,
						 nr_maps, &st));
		ivm_stack_init(&fp, fp_frames, MAX_FRAMES);
		cr_assert_null(ivm_uunwind_fp(&reader, &regs, 0, &fp));
		check_sample(syms, &u, &st, &fp, &t);

		cr_assert_eq(ptrace(PTRACE_CONT, tid, 0, 0), 0);
		if (t.samples >= 150 && t.lock >= 3 && t.read >= 1 &&
		    t.sleep >= 1)
			break;
		usleep(1000 + (t.samples * 997) % 3000);
	}
	cr_log_info("%s: %u samples: %u lock, %u read, %u sleep, %u running, "
		    "%u outside the binary; frame pointers lost lock-path "
		    "frames in %u of %u", bin, t.samples, t.lock, t.read,
		    t.sleep, t.running, t.elsewhere, t.fp_lost, t.lock);
	live_workload_stop();
	ivm_ksyms_destroy(syms);
	ivm_ubinary_destroy(b);
}

Test(uunwind_dwarf_ls, nofp_build, .timeout = 120)
{
	sample_workload(guest_bin("lockstorm-nofp"));
}

Test(uunwind_dwarf_ls, fp_build, .timeout = 120)
{
	sample_workload(guest_bin("lockstorm-fp"));
}

/* The static-pie build: loaded at a random bias, found from its memory. */
Test(uunwind_dwarf_ls, static_pie_build, .timeout = 120)
{
	sample_workload(guest_bin("lockstorm-pie"));
}
