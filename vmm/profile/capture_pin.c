// SPDX-License-Identifier: MIT
/*
 * Pin capture: HOLD + PIN around ivm_capture_task.  See capture_pin.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "profile/capture_pin.h"
#include "kernel/kernel_layout.h"
#include "access/qmp.h"

/* Holder threads' task_struct addresses remembered, by guest CPU. */
#define HOLDER_CACHE 64

struct ivm_pin_capture {
	struct ivm_guest *guest;
	struct ivm_helper *helper;	/* NULL once degraded */
	unsigned int protocol;		/* 2: HOLD_PIN */
	unsigned int lease_us;		/* of a HOLD_PIN */
	unsigned int lease_ms;		/* of a PIN (protocol 1) */
	unsigned int hold_lease_ms;	/* of a HOLD (protocol 1) */
	struct {
		uint32_t tid;
		uint64_t task;
	} holder[HOLDER_CACHE];
	enum ivm_pin_policy policy;
	bool paused;			/* no round trips for now */
	uint32_t helper_pid;
	uint32_t helper_caps;		/* IVM_CAP_* from HELLO */
	int timeout_ms;			/* of every request but READAHEAD */
	unsigned int guest_cpus;
	unsigned int timeouts_in_row;	/* HOLD_PIN requests unanswered */
	bool has_on_cpu;		/* the guest's task_struct.on_cpu */
	struct ivm_pin_stats stats;
	char degraded[256];
	/* To connect again once degraded: where, how replies wait, when. */
	char *socket_path;
	ivm_helper_wait_fn wait;
	void *wait_ctx;
	uint64_t down_ns;		/* when it degraded */
	uint64_t retry_ns, retry_at_ns;
};

/* The first try to connect again after a failure, and the longest wait. */
#define RETRY_FIRST_NS 1000000000ull
#define RETRY_MAX_NS 30000000000ull

struct ivm_error *ivm_pin_helper_socket(struct ivm_guest *guest,
					const char *socket_path,
					const char *qmp_path, char **ret)
{
	const char *slash;
	size_t dir;

	if (socket_path) {
		*ret = strdup(socket_path);
		return *ret ? NULL : &ivm_enomem;
	}
	if (guest->qmp && ivm_qmp_is_libvirt(guest->qmp))
		return ivm_qmp_libvirt_channel_path(guest->qmp,
						    IVM_PROTO_PORT_NAME, ret);
	if (!qmp_path)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no helper socket known for this guest");
	slash = strrchr(qmp_path, '/');
	dir = slash ? (size_t)(slash - qmp_path) + 1 : 0;
	*ret = malloc(dir + sizeof("helper.sock"));
	if (!*ret)
		return &ivm_enomem;
	memcpy(*ret, qmp_path, dir);
	memcpy(*ret + dir, "helper.sock", sizeof("helper.sock"));
	return NULL;
}

/*
 * Connect to the helper at path and say HELLO, each request bounded by
 * timeout_ms: a helper that does not answer, answers garbage or cannot
 * pin and hold is an error saying why.
 */
static struct ivm_error *helper_open(const char *path, int timeout_ms,
				     struct ivm_helper **ret,
				     struct ivm_helper_hello *hello)
{
	struct ivm_helper *helper;
	struct ivm_error *err;

	err = ivm_helper_connect_path(path, &helper);
	if (err)
		return err;
	ivm_helper_set_timeout(helper, timeout_ms);
	err = ivm_helper_hello(helper, hello);
	if (!err && (hello->caps & (IVM_CAP_PIN | IVM_CAP_HOLD)) !=
		    (IVM_CAP_PIN | IVM_CAP_HOLD))
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "the helper cannot pin and hold");
	if (err) {
		ivm_helper_destroy(helper);
		return err;
	}
	*ret = helper;
	return NULL;
}

/* What HELLO said of the helper: its pid, protocol and CPUs. */
static void take_hello(struct ivm_pin_capture *pc,
		       const struct ivm_helper_hello *hello)
{
	pc->protocol = hello->protocol;
	if (pc->protocol < 2 || !(hello->caps & IVM_CAP_HOLD_PIN))
		pc->protocol = 1;
	pc->helper_pid = hello->pid;
	pc->helper_caps = hello->caps;
	/* The helper's count of online CPUs is hostile: it only chooses
	 * between hold-only and hold+pin, both safe. */
	pc->guest_cpus = hello->ncpus;
	/* Another helper has other holder threads. */
	memset(pc->holder, 0, sizeof(pc->holder));
}

struct ivm_error *ivm_pin_capture_create(struct ivm_guest *guest,
					 const char *socket_path,
					 const char *qmp_path, int timeout_ms,
					 unsigned int lease_us,
					 struct ivm_pin_capture **ret)
{
	struct ivm_helper_hello hello;
	struct ivm_pin_capture *pc;
	struct ivm_helper *helper;
	struct ivm_error *err;
	char *path;

	err = ivm_pin_helper_socket(guest, socket_path, qmp_path, &path);
	if (err)
		return err;
	err = helper_open(path, timeout_ms, &helper, &hello);
	if (err) {
		free(path);
		return err;
	}
	pc = calloc(1, sizeof(*pc));
	if (!pc) {
		free(path);
		ivm_helper_destroy(helper);
		return &ivm_enomem;
	}
	pc->guest = guest;
	pc->helper = helper;
	pc->socket_path = path;
	pc->has_on_cpu = ivm_kernel_layout_offsets(guest->layout)->task_on_cpu !=
			 IVM_KOFF_NONE;
	take_hello(pc, &hello);
	pc->lease_us = lease_us ? lease_us : IVM_PIN_LEASE_DEFAULT_US;
	if (pc->lease_us > IVM_PROTO_HOLD_PIN_LEASE_MAX_US)
		pc->lease_us = IVM_PROTO_HOLD_PIN_LEASE_MAX_US;
	/* Protocol 1: whole milliseconds, and never below what the pairs'
	 * two round trips need. */
	pc->lease_ms = (pc->lease_us + 999) / 1000;
	if (pc->lease_ms < IVM_PIN_LEASE_V1_MIN_MS)
		pc->lease_ms = IVM_PIN_LEASE_V1_MIN_MS;
	/*
	 * The hold gets half the pin's lease.  While the holder spins, the
	 * guest's per-CPU work on that CPU waits, and virtio_console hands the
	 * host's disconnect to the helper through such work when its
	 * interrupt lands on the held CPU: seen on the e2e guest, a killed
	 * host's pin was then ended only after the hold's lease ran out.  A
	 * shorter hold bounds that; the read it covers takes milliseconds.
	 */
	pc->hold_lease_ms = pc->lease_ms / 2 ? pc->lease_ms / 2 : 1;
	pc->timeout_ms = timeout_ms;
	*ret = pc;
	return NULL;
}

void ivm_pin_capture_destroy(struct ivm_pin_capture *pc)
{
	if (!pc)
		return;
	/* Closing the channel ends every lease in the guest at once. */
	ivm_helper_destroy(pc->helper);
	free(pc->socket_path);
	free(pc);
}

void ivm_pin_capture_set_wait(struct ivm_pin_capture *pc,
			      ivm_helper_wait_fn wait, void *ctx)
{
	pc->wait = wait;
	pc->wait_ctx = ctx;
	if (pc->helper)
		ivm_helper_set_wait(pc->helper, wait, ctx);
}

void ivm_pin_capture_pause(struct ivm_pin_capture *pc, bool paused)
{
	pc->paused = paused;
}

void ivm_pin_capture_set_policy(struct ivm_pin_capture *pc,
				enum ivm_pin_policy policy)
{
	pc->policy = policy;
}

uint32_t ivm_pin_capture_helper_pid(const struct ivm_pin_capture *pc)
{
	return pc->helper_pid;
}

struct ivm_error *ivm_pin_capture_footprint(struct ivm_pin_capture *pc,
					    struct ivm_helper_stats *ret)
{
	if (!pc->helper)
		return ivm_error_create(IVM_ERROR_INVALID,
					"no helper: %s", pc->degraded);
	if (pc->protocol < 2)
		return ivm_error_create(IVM_ERROR_INVALID,
					"the helper speaks protocol 1: it does not count");
	return ivm_helper_stats(pc->helper, ret);
}

const char *ivm_pin_capture_degraded(const struct ivm_pin_capture *pc)
{
	return pc->degraded[0] ? pc->degraded : NULL;
}

const struct ivm_pin_stats *
ivm_pin_capture_stats(const struct ivm_pin_capture *pc)
{
	return &pc->stats;
}

/*
 * The connection failed: we no longer know what the helper holds or pins.
 * Closing the channel makes the helper end every lease (host disconnect),
 * and the leases bound it anyway; go on without pins.
 */
static void degrade(struct ivm_pin_capture *pc, struct ivm_error *err)
{
	snprintf(pc->degraded, sizeof(pc->degraded),
		 "pin capture off, optimistic until the helper answers again (tried after 1 s, then up to every %llu s): %s",
		 RETRY_MAX_NS / 1000000000ull, ivm_error_string(err));
	ivm_error_destroy(err);
	ivm_helper_destroy(pc->helper);
	pc->helper = NULL;
	pc->stats.failed++;
	pc->down_ns = ivm_mono_ns();
	pc->retry_ns = RETRY_FIRST_NS;
	pc->retry_at_ns = pc->down_ns + pc->retry_ns;
}

/*
 * Whether the helper can be asked: connected, or connected again now.  A
 * helper killed in the guest is restarted there (its supervisor, systemd's
 * Restart=) and opens its port again: a new HELLO finds it.  Until then a
 * try costs a HELLO's timeout at most, so the tries back off, from
 * RETRY_FIRST_NS to RETRY_MAX_NS apart; none while paused (another guest
 * waits for its own helper).
 */
static bool helper_ready(struct ivm_pin_capture *pc)
{
	struct ivm_helper_hello hello;
	struct ivm_helper *helper;
	struct ivm_error *err;
	uint64_t now;

	if (pc->helper)
		return true;
	now = ivm_mono_ns();
	if (pc->paused || !pc->socket_path || now < pc->retry_at_ns)
		return false;
	err = helper_open(pc->socket_path, pc->timeout_ms, &helper, &hello);
	if (err) {
		ivm_error_destroy(err);
		pc->retry_ns = pc->retry_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS :
			       pc->retry_ns * 2;
		pc->retry_at_ns = ivm_mono_ns() + pc->retry_ns;
		return false;
	}
	pc->helper = helper;
	if (pc->wait)
		ivm_helper_set_wait(helper, pc->wait, pc->wait_ctx);
	take_hello(pc, &hello);
	pc->timeouts_in_row = 0;
	pc->degraded[0] = '\0';
	pc->stats.reconnects++;
	pc->stats.down_ns += ivm_mono_ns() - pc->down_ns;
	return true;
}

struct ivm_error *ivm_pin_capture_record_footprint(struct ivm_pin_capture *pc,
						   struct ivm_profile_writer *w,
						   struct ivm_helper_stats *ret)
{
	struct ivm_error *err, *werr = NULL;
	char key[16 + IVM_PROTO_MAX_STAT_NAME], value[24];
	unsigned int i;

	memset(ret, 0, sizeof(*ret));
	err = ivm_pin_capture_footprint(pc, ret);
	if (!w) {
		ivm_error_destroy(err);
		return NULL;
	}
	if (err) {
		werr = ivm_profile_write_meta(w, "helper_footprint_error",
					      ivm_error_string(err));
		ivm_error_destroy(err);
		return werr;
	}
	/* Names are [a-z0-9_] (the decoder checked): fine as keys. */
	for (i = 0; i < ret->nr && !werr; i++) {
		snprintf(key, sizeof(key), "helper_%s", ret->stat[i].name);
		snprintf(value, sizeof(value), "%" PRIu64, ret->stat[i].value);
		werr = ivm_profile_write_meta(w, key, value);
	}
	return werr;
}

/*
 * Whether the holder of cpu (guest tid holder_tid) is still current there:
 * then it has held cpu since the reply, and a target pinned to cpu cannot
 * have run.  Its task_struct address is remembered per CPU, so this is one
 * read of cpu's `current` in the common case.  false also when unknown.
 */
static bool holder_current(struct ivm_pin_capture *pc, int cpu,
			   uint32_t holder_tid)
{
	struct ivm_guest_task t;
	struct ivm_error *err;
	uint64_t cur;

	err = ivm_kernel_current_task(pc->guest->layout, (unsigned int)cpu,
				      NULL, &cur);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	if (cpu < HOLDER_CACHE && pc->holder[cpu].tid == holder_tid &&
	    pc->holder[cpu].task == cur)
		return true;
	err = ivm_kernel_read_task(pc->guest->layout, cur, &t);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	if (t.pid <= 0 || (uint32_t)t.pid != holder_tid ||
	    (uint32_t)t.tgid != pc->helper_pid)
		return false;
	if (cpu < HOLDER_CACHE) {
		pc->holder[cpu].tid = holder_tid;
		pc->holder[cpu].task = cur;
	}
	return true;
}

/*
 * Protocol 2: one HOLD_PIN, the read, and from guest memory whether the
 * holder outlasted the read.  Nothing to restore: the helper does.
 */
static struct ivm_error *capture_hold_pin(struct ivm_pin_capture *pc,
					  struct ivm_capture_engine *engine,
					  uint64_t task_addr, int cpu,
					  const struct ivm_guest_task *before,
					  bool hold_only,
					  struct ivm_capture *cap)
{
	struct ivm_helper_held held;
	struct ivm_error *err;
	bool ok;
	uint64_t t0 = ivm_mono_ns();

	pc->stats.requests++;
	err = ivm_helper_hold_pin_lease(pc->helper, (unsigned int)cpu,
					hold_only ? 0 : before->pid,
					pc->lease_us, &held);
	if (ivm_helper_error_is_answer(err)) {
		pc->timeouts_in_row = 0;
		/*
		 * Refused whole (the CPU still held, the thread gone, or
		 * above the holder's real-time priority): nothing is in
		 * place, read it as optimistic does.
		 */
		if (err->errnum == EPERM)
			pc->stats.refused_rt++;
		pc->stats.refused++;
		ivm_error_destroy(err);
		return ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
	}
	if (err && err->code == IVM_ERROR_TIMEOUT &&
	    ++pc->timeouts_in_row < IVM_PIN_TIMEOUTS_TO_DEGRADE) {
		/*
		 * A slow answer (the host's scheduler can keep a TCG vCPU
		 * off its core for that long): whatever the helper did ends
		 * with its lease, and its late reply will be dropped as
		 * stale.  Only a helper that keeps not answering is given up.
		 */
		pc->stats.timed_out++;
		ivm_error_destroy(err);
		return ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
	}
	if (err) {
		/* A dead helper: the lease ends it in the guest whatever
		 * happened; degrading closes the channel. */
		degrade(pc, err);
		pc->stats.unpinned++;
		return ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
	}
	pc->timeouts_in_row = 0;
	pc->stats.pin_ns += ivm_mono_ns() - t0;
	pc->stats.holds++;
	pc->stats.pins += held.pinned;
	pc->stats.lease_us += held.lease_us;
	ok = held.pinned || hold_only;
	if (!ok)
		pc->stats.refused++;	/* e.g. ESRCH: the thread exited */
	err = ivm_capture_task_flags(engine, task_addr, NULL, -1, cpu,
				     ok ? IVM_CAPTURE_F_HELD : 0, cap);
	if (err)
		return err;
	if (cap->outcome == IVM_CAPTURE_KEPT &&
	    cap->task.nivcsw != before->nivcsw) {
		cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		pc->stats.ran_before_pin++;
	}
	if (!ok)
		return NULL;
	/*
	 * Whether the lease outlasted the read (counted: it sizes the
	 * lease).  The read's own checks do not need it where the kernel
	 * has task_struct.on_cpu; without it, a runnable target was kept only
	 * because it was held, and one switched in after the lease (not yet
	 * out) moves no count: then the sample goes.
	 */
	if (!holder_current(pc, cpu, held.holder_tid)) {
		pc->stats.lease_expired++;
		if (!pc->has_on_cpu && cap->task.state == 0 &&
		    cap->outcome == IVM_CAPTURE_KEPT)
			cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		return NULL;
	}
	if (hold_only)
		pc->stats.hold_only++;
	else
		pc->stats.ok++;
	return NULL;
}

/* Protocol 1: HOLD+PIN, the read, UNPIN+RELEASE (two round trips). */
static struct ivm_error *capture_pairs(struct ivm_pin_capture *pc,
				       struct ivm_capture_engine *engine,
				       uint64_t task_addr, int cpu,
				       const struct ivm_guest_task *before,
				       bool hold_only,
				       struct ivm_capture *cap)
{
	struct ivm_helper_unpin_release rel;
	struct ivm_helper_hold_pin hp;
	struct ivm_error *err, *cerr;
	bool pinned, held;
	int tid = before->pid;
	uint64_t t0;

	/*
	 * HOLD then PIN in one round trip: the holder first, so the task,
	 * once pinned, finds the CPU taken by a SCHED_FIFO thread it cannot
	 * preempt.  (Pinning first would let it run on the idle CPU until the
	 * holder arrives.)  On one guest CPU the pin (a no-op) is saved.
	 */
	t0 = ivm_mono_ns();
	if (hold_only) {
		uint32_t granted;

		memset(&hp, 0, sizeof(hp));
		pc->stats.requests++;
		err = ivm_helper_hold(pc->helper, (unsigned int)cpu,
				      pc->hold_lease_ms, &granted);
		if (ivm_helper_error_is_answer(err)) {
			hp.hold_errnum = err->errnum;
			ivm_error_destroy(err);
			err = NULL;
		}
		hp.pin_errnum = EOPNOTSUPP;	/* not asked */
	} else {
		pc->stats.requests += 2;
		err = ivm_helper_hold_pin(pc->helper, (unsigned int)cpu,
					  pc->hold_lease_ms, tid, pc->lease_ms,
					  &hp);
	}
	if (err) {
		/*
		 * A timeout (a HOLD can take long under a loaded TCG host)
		 * or a dead helper: the hold and pin may or may not be in
		 * place, and a late reply may still come.  Degrading closes
		 * the channel, which ends both in the guest.
		 */
		degrade(pc, err);
		pc->stats.unpinned++;
		return ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
	}
	pc->stats.pin_ns += ivm_mono_ns() - t0;
	pinned = !hp.pin_errnum;
	pc->stats.holds += !hp.hold_errnum;
	pc->stats.pins += pinned;
	if (hp.pin_errnum == EPERM)
		pc->stats.refused_rt++;
	if (hp.hold_errnum || (!hold_only && !pinned))
		pc->stats.refused++;	/* e.g. ESRCH: the thread exited */

	/*
	 * The read.  The validation inside still applies: the task may have
	 * run before the pin took it (the round trip above), a refused pin
	 * leaves it free, and a lease may run out during a slow read.
	 */
	held = !hp.hold_errnum && (pinned || hold_only);
	err = ivm_capture_task_flags(engine, task_addr, NULL, -1, cpu,
				     held ? IVM_CAPTURE_F_HELD : 0, cap);
	if (!err && cap->outcome == IVM_CAPTURE_KEPT &&
	    cap->task.nivcsw != before->nivcsw) {
		cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		pc->stats.ran_before_pin++;
	}

	/* Restore, in one round trip; whatever was not granted is skipped. */
	cerr = NULL;
	t0 = ivm_mono_ns();
	if (!hp.hold_errnum || pinned) {
		if (hp.hold_errnum) {
			/* Pinned, not held: unpin only. */
			uint64_t ns;

			pc->stats.requests++;
			cerr = ivm_helper_unpin(pc->helper, tid, &ns);
			if (ivm_helper_error_is_answer(cerr)) {
				/* ENOENT: the lease ran out; ESRCH: the
				 * thread exited.  Nothing left pinned. */
				if (cerr->errnum == ENOENT)
					pc->stats.lease_expired++;
				ivm_error_destroy(cerr);
				cerr = NULL;
			}
		} else {
			pc->stats.requests += pinned ? 2 : 1;
			cerr = ivm_helper_unpin_release(pc->helper,
							pinned ? tid : -1,
							(unsigned int)cpu,
							&rel);
			if (!cerr && (rel.unpin_errnum == ENOENT ||
				      rel.release_errnum == ENOENT ||
				      rel.hold_expired)) {
				pc->stats.lease_expired++;
				/*
				 * The read assumed the task could not run;
				 * once a lease ran out it could, and one
				 * switched in (not yet out) moves no count.
				 */
				if (held && cap->outcome == IVM_CAPTURE_KEPT)
					cap->outcome =
						IVM_CAPTURE_DISCARDED_RAN;
			}
		}
	}
	pc->stats.restore_ns += ivm_mono_ns() - t0;
	if (cerr) {
		/* Whether the leases held through the read is unknown. */
		if (held && cap->outcome == IVM_CAPTURE_KEPT)
			cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		degrade(pc, cerr);
	} else if (!hp.hold_errnum && hold_only) {
		pc->stats.hold_only++;
	} else if (!hp.hold_errnum && pinned) {
		pc->stats.ok++;
	}
	return err;
}

struct ivm_error *ivm_pin_capture_task(struct ivm_pin_capture *pc,
				       struct ivm_capture_engine *engine,
				       uint64_t task_addr, int cpu,
				       struct ivm_capture *cap)
{
	struct ivm_guest_task before;
	struct ivm_error *err;
	bool hold_only;

	if (cpu < 0 || !helper_ready(pc)) {
		pc->stats.unpinned++;
		return ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
	}
	if (pc->paused && pc->policy != IVM_PIN_RESCUE) {
		pc->stats.skipped++;
		return ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
	}
	/*
	 * Before any round trip: the task and its involuntary switch count.
	 * A task already runnable is pinned too: woken but still waiting in a
	 * run queue, it has not left the stack it blocked with, and once
	 * pinned behind the holder it cannot (optimistic capture has to drop
	 * it).  If it was running instead, the pin migrates it: that is an
	 * involuntary switch, and its stack is then where we preempted it,
	 * not a path to idle; so a move of nivcsw from here to the read
	 * discards.  (A move of nvcsw means it blocked again on its own: the
	 * stack is still a consistent blocking stack of the same thread, as
	 * an optimistic read a moment later would have found.)
	 */
	if (pc->policy == IVM_PIN_RESCUE) {
		/*
		 * The unpinned read first (tens of microseconds, against a
		 * round trip of milliseconds to the helper under TCG, during
		 * which a target may wake and run): when its validation
		 * holds, the sample is consistent and no pin is needed.  Its
		 * first read of the task is the baseline.
		 */
		err = ivm_capture_task(engine, task_addr, NULL, -1, cpu, cap);
		if (err || cap->outcome == IVM_CAPTURE_KEPT ||
		    cap->outcome == IVM_CAPTURE_FAILED) {
			pc->stats.unneeded++;
			return err;
		}
		if (pc->paused) {
			pc->stats.skipped++;	/* the discarded read stands */
			return NULL;
		}
		/*
		 * Discarded: the target woke or ran.  Where is it now?  A pin
		 * helps only a target woken and still waiting for a CPU: it
		 * keeps the stack it blocked with, and the pin keeps it there
		 * for the read.  One that runs would only be preempted and
		 * migrated by the pin, its stack lost anyway; one asleep again
		 * blocked anew, and a second unpinned read takes that stack as
		 * consistently as a pinned one, for nothing.
		 */
		err = ivm_kernel_read_task(pc->guest->layout, task_addr,
					   &before);
		if (err) {
			ivm_error_destroy(err);
			return NULL;
		}
		if (before.is_idle || before.pid <= 0)
			return NULL;
		if (before.on_cpu) {
			pc->stats.running++;
			return NULL;
		}
		if (before.state != 0) {
			pc->stats.reread++;
			return ivm_capture_task(engine, task_addr, NULL, -1,
						cpu, cap);
		}
	} else {
		err = ivm_kernel_read_task(pc->guest->layout, task_addr,
					   &before);
		if (err || before.is_idle || before.pid <= 0 ||
		    before.on_cpu) {
			/* Unreadable, idle, or running: a pin would only
			 * preempt and migrate a running target. */
			ivm_error_destroy(err);
			pc->stats.skipped++;
			return ivm_capture_task(engine, task_addr, NULL, -1,
						cpu, cap);
		}
	}
	/* One guest CPU: holding it is enough, the task has nowhere else
	 * to run. */
	hold_only = pc->guest_cpus == 1;
	if (pc->protocol >= 2)
		return capture_hold_pin(pc, engine, task_addr, cpu, &before,
					hold_only, cap);
	return capture_pairs(pc, engine, task_addr, cpu, &before, hold_only,
			     cap);
}

_Static_assert(IVM_CAPTURE_READAHEAD_MAX <= IVM_READAHEAD_MAX_LEN,
	       "a capture's readahead fits the protocol's bound");

void ivm_pin_capture_readahead(struct ivm_pin_capture *pc,
			       struct ivm_capture_engine *engine)
{
	struct ivm_capture_readahead ra;

	while (ivm_capture_engine_take_readahead(engine, &ra)) {
		struct ivm_error *err;
		uint64_t bytes = 0, t0;

		if (!helper_ready(pc) ||
		    !(pc->helper_caps & IVM_CAP_READAHEAD)) {
			free(ra.path);
			continue;
		}
		t0 = ivm_mono_ns();
		ivm_helper_set_timeout(pc->helper,
				       IVM_PIN_READAHEAD_TIMEOUT_MS);
		err = ivm_helper_readahead(pc->helper, ra.pid, ra.path,
					   ra.inode, ra.offset, ra.length,
					   &bytes);
		ivm_helper_set_timeout(pc->helper, pc->timeout_ms);
		pc->stats.readahead_ns += ivm_mono_ns() - t0;
		free(ra.path);
		if (!err) {
			pc->stats.readaheads++;
			pc->stats.readahead_bytes += bytes;
		} else if (ivm_helper_error_is_answer(err) ||
			   err->code == IVM_ERROR_INVALID) {
			/*
			 * Gone, replaced, unreadable, or a request never
			 * sent (a path the protocol cannot carry): the
			 * unwind goes on, and so does pinning.
			 */
			pc->stats.readahead_failed++;
			ivm_error_destroy(err);
		} else {
			pc->stats.readahead_failed++;
			degrade(pc, err);
		}
	}
}
