// SPDX-License-Identifier: MIT
/*
 * Giving up capabilities (vmm/base/caps.h): a process that keeps one
 * capability holds that one and no other, in every set, and an execve
 * (of a program root would get every capability for) gives none back.
 * The process is a fork of this one; what it holds is read from its
 * /proc/PID/status, as the e2e test reads the guardian's.  A program
 * started by ivm_spawn (base/spawn.h) holds only what it was left from
 * its first instruction: cat reads its own status there.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "base/caps.h"
#include "base/spawn.h"

struct held {
	uint64_t eff, prm, inh, bnd, amb, nnp;
};

/* The sets of /proc/self/status as a child of cat prints them on fd. */
static void parse(FILE *f, struct held *h)
{
	char line[256];

	memset(h, 0xff, sizeof(*h));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "CapEff: %llx", &v) == 1)
			h->eff = v;
		else if (sscanf(line, "CapPrm: %llx", &v) == 1)
			h->prm = v;
		else if (sscanf(line, "CapInh: %llx", &v) == 1)
			h->inh = v;
		else if (sscanf(line, "CapBnd: %llx", &v) == 1)
			h->bnd = v;
		else if (sscanf(line, "CapAmb: %llx", &v) == 1)
			h->amb = v;
		else if (sscanf(line, "NoNewPrivs: %llu", &v) == 1)
			h->nnp = v;
	}
}

/* The sets child pid printed on the pipe fds, and its clean exit. */
static void read_child(pid_t pid, int fds[2], struct held *h)
{
	int status;
	FILE *f;

	close(fds[1]);
	f = fdopen(fds[0], "r");
	cr_assert_not_null(f);
	parse(f, h);
	fclose(f);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the child failed (status %#x)", status);
}

/*
 * What a child holds after ivm_caps_limit(keep), then (exec) after it
 * ran /bin/cat on its own status, or (no exec) as it reads it itself.
 */
static void held_after_limit(uint64_t keep, bool exec, struct held *h)
{
	int fds[2];
	pid_t pid;
	FILE *f;

	cr_assert(pipe(fds) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct ivm_error *err = ivm_caps_limit(keep);

		close(fds[0]);
		if (err)
			_exit(3);
		dup2(fds[1], 1);
		if (exec) {
			execl("/bin/cat", "cat", "/proc/self/status", (char *)NULL);
			_exit(4);
		}
		f = fopen("/proc/self/status", "r");
		if (!f)
			_exit(5);
		{
			char buf[4096];
			size_t n;

			while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
				(void)!write(1, buf, n);
		}
		_exit(0);
	}
	read_child(pid, fds, h);
}

static void expect_only(const struct held *h, uint64_t keep)
{
	uint64_t had = 0, setpcap = 0;

	cr_assert(ivm_caps_read(0, "CapPrm", &had));
	keep &= had;
	cr_expect_eq(h->eff, keep, "CapEff %#llx, not %#llx",
		     (unsigned long long)h->eff, (unsigned long long)keep);
	cr_expect_eq(h->prm, keep, "CapPrm %#llx", (unsigned long long)h->prm);
	cr_expect_eq(h->inh, 0, "CapInh %#llx", (unsigned long long)h->inh);
	cr_expect_eq(h->amb, 0, "CapAmb %#llx", (unsigned long long)h->amb);
	cr_expect_eq(h->nnp, 1, "no_new_privs not set");
	/* The bounding set shrinks only when this process may shrink it. */
	setpcap = had & IVM_CAP_BIT(IVM_CAP_SETPCAP);
	if (setpcap)
		cr_expect_eq(h->bnd, keep, "CapBnd %#llx, not %#llx",
			     (unsigned long long)h->bnd,
			     (unsigned long long)keep);
}

Test(caps, a_child_keeps_only_what_it_was_left)
{
	uint64_t keep = IVM_CAP_BIT(IVM_CAP_DAC_OVERRIDE);
	struct held h;

	held_after_limit(keep, false, &h);
	expect_only(&h, keep);
}

Test(caps, an_exec_after_the_limit_gives_nothing_back)
{
	struct held h;

	/* cat run as root would hold every capability of the bounding set. */
	held_after_limit(0, true, &h);
	expect_only(&h, 0);
	held_after_limit(IVM_CAP_BIT(IVM_CAP_SYS_PTRACE), true, &h);
	/* Across an exec the kept ones are gone too (no inheritable set),
	 * unless root's exec gives them back from the bounding set. */
	cr_expect_eq(h.eff & ~IVM_CAP_BIT(IVM_CAP_SYS_PTRACE), 0,
		     "CapEff %#llx after exec", (unsigned long long)h.eff);
	cr_expect_eq(h.nnp, 1);
}

Test(caps, reads_this_process_sets)
{
	uint64_t eff, bnd;

	cr_assert(ivm_caps_read(0, "CapEff", &eff));
	cr_assert(ivm_caps_read(getpid(), "CapBnd", &bnd));
	cr_expect_eq(eff & ~bnd, 0, "an effective capability outside the bounding set");
	cr_expect_not(ivm_caps_read(0, "NoSuchSet", &eff));
	cr_expect_eq(ivm_caps_effective(IVM_CAP_SYS_PTRACE),
		     !!(eff & IVM_CAP_BIT(IVM_CAP_SYS_PTRACE)));
}

/* What /bin/cat started by ivm_spawn, keeping keep, finds it holds. */
static void held_by_spawned(uint64_t keep, struct held *h)
{
	char *argv[] = { "cat", "/proc/self/status", NULL };
	struct ivm_spawn opts = { .caps = keep, .pass_as = 1 };
	struct ivm_error *err;
	int fds[2];
	pid_t pid;

	cr_assert(pipe(fds) == 0);
	opts.pass_fd = fds[1];
	err = ivm_spawn("/bin/cat", argv, &opts, &pid);
	cr_assert_null(err, "%s", err ? err->message : "");
	read_child(pid, fds, h);
}

Test(spawn, the_program_holds_only_what_it_was_left_from_its_start)
{
	struct held h;

	/* As root, an execve left to itself grants the bounding set. */
	held_by_spawned(0, &h);
	expect_only(&h, 0);
	held_by_spawned(IVM_CAP_BIT(IVM_CAP_DAC_OVERRIDE), &h);
	expect_only(&h, IVM_CAP_BIT(IVM_CAP_DAC_OVERRIDE));
}

Test(spawn, a_failed_exec_is_an_error_naming_it)
{
	char *argv[] = { "none", NULL };
	struct ivm_spawn opts = { .pass_fd = -1 };
	struct ivm_error *err;
	pid_t pid = 0;

	err = ivm_spawn("/nonexistent/idlevm", argv, &opts, &pid);
	cr_assert_not_null(err);
	cr_expect(strstr(err->message, "execve"), "%s", err->message);
	cr_expect(strstr(err->message, "/nonexistent/idlevm"), "%s",
		  err->message);
	cr_expect_eq(pid, 0);
	/* The child is reaped: none is left to wait for. */
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1);
	ivm_error_destroy(err);
}
