// SPDX-License-Identifier: MIT
/*
 * Pin capture: HOLD + PIN around ivm_capture_task.  See capture_pin.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "profile/capture_pin.h"
#include "kernel/kernel_layout.h"
#include "access/libvirt_domain.h"

struct ivm_pin_capture {
	struct ivm_guest *guest;
	struct ivm_helper *helper;	/* NULL once degraded */
	unsigned int lease_ms;		/* of a PIN */
	unsigned int hold_lease_ms;	/* of a HOLD */
	enum ivm_pin_policy policy;
	bool paused;			/* no round trips for now */
	uint32_t helper_pid;
	uint32_t helper_caps;		/* IVM_CAP_* from HELLO */
	int timeout_ms;			/* of every request but READAHEAD */
	unsigned int guest_cpus;
	struct ivm_pin_stats stats;
	char degraded[256];
};

/* The helper socket of guest: explicit, libvirt channel, or run-guest's
 * helper.sock beside qmp.sock. */
static struct ivm_error *socket_of(struct ivm_guest *guest,
				   const char *socket_path,
				   const char *qmp_path, char **ret)
{
	const char *slash;
	size_t dir;

	if (socket_path) {
		*ret = strdup(socket_path);
		return *ret ? NULL : &ivm_enomem;
	}
	if (guest->dom)
		return ivm_libvirt_domain_channel_path(guest->dom,
						       IVM_PROTO_PORT_NAME,
						       ret);
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

struct ivm_error *ivm_pin_capture_create(struct ivm_guest *guest,
					 const char *socket_path,
					 const char *qmp_path, int timeout_ms,
					 unsigned int lease_ms,
					 struct ivm_pin_capture **ret)
{
	struct ivm_helper_hello hello;
	struct ivm_pin_capture *pc;
	struct ivm_helper *helper;
	struct ivm_error *err;
	char *path;

	err = socket_of(guest, socket_path, qmp_path, &path);
	if (err)
		return err;
	err = ivm_helper_connect_path(path, &helper);
	free(path);
	if (err)
		return err;
	ivm_helper_set_timeout(helper, timeout_ms);
	err = ivm_helper_hello(helper, &hello);
	if (!err && (hello.caps & (IVM_CAP_PIN | IVM_CAP_HOLD)) !=
		    (IVM_CAP_PIN | IVM_CAP_HOLD))
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "the helper cannot pin and hold");
	if (err) {
		ivm_helper_destroy(helper);
		return err;
	}
	pc = calloc(1, sizeof(*pc));
	if (!pc) {
		ivm_helper_destroy(helper);
		return &ivm_enomem;
	}
	pc->guest = guest;
	pc->helper = helper;
	pc->lease_ms = lease_ms ? lease_ms : IVM_PIN_LEASE_DEFAULT_MS;
	/*
	 * The hold gets half the pin's lease.  While the holder spins, the
	 * guest's per-CPU work on that CPU waits, and virtio_console hands the
	 * host's disconnect to the helper through such work when its
	 * interrupt lands on the held CPU: seen on the e2e guest, a killed
	 * host's pin was then ended only after the hold's lease ran out.  A
	 * shorter hold bounds that; the read it covers takes milliseconds.
	 */
	pc->hold_lease_ms = pc->lease_ms / 2 ? pc->lease_ms / 2 : 1;
	pc->helper_pid = hello.pid;
	pc->helper_caps = hello.caps;
	pc->timeout_ms = timeout_ms;
	/* The helper's count of online CPUs is hostile: it only chooses
	 * between hold-only and hold+pin, both safe. */
	pc->guest_cpus = hello.ncpus;
	*ret = pc;
	return NULL;
}

void ivm_pin_capture_destroy(struct ivm_pin_capture *pc)
{
	if (!pc)
		return;
	/* Closing the channel ends every lease in the guest at once. */
	ivm_helper_destroy(pc->helper);
	free(pc);
}

void ivm_pin_capture_set_wait(struct ivm_pin_capture *pc,
			      ivm_helper_wait_fn wait, void *ctx)
{
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
		 "pin capture off, optimistic from now on: %s",
		 ivm_error_string(err));
	ivm_error_destroy(err);
	ivm_helper_destroy(pc->helper);
	pc->helper = NULL;
	pc->stats.failed++;
}

struct ivm_error *ivm_pin_capture_task(struct ivm_pin_capture *pc,
				       struct ivm_capture_engine *engine,
				       uint64_t task_addr, int cpu,
				       struct ivm_capture *cap)
{
	struct ivm_helper_unpin_release rel;
	struct ivm_helper_hold_pin hp;
	struct ivm_guest_task before;
	struct ivm_error *err, *cerr;
	bool hold_only, pinned, held;
	uint64_t t0;
	int tid;

	if (!pc->helper || cpu < 0) {
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
		before = cap->task;
		if (before.is_idle || before.pid <= 0)
			return NULL;
		if (pc->paused) {
			pc->stats.skipped++;	/* the discarded read stands */
			return NULL;
		}
	} else {
		err = ivm_kernel_read_task(pc->guest->layout, task_addr,
					   &before);
		if (err || before.is_idle || before.pid <= 0) {
			ivm_error_destroy(err);
			pc->stats.skipped++;
			return ivm_capture_task(engine, task_addr, NULL, -1,
						cpu, cap);
		}
	}
	tid = before.pid;

	/*
	 * One guest CPU: holding it is enough, the task has nowhere else to
	 * run; the pin (a no-op) is saved.  Otherwise HOLD then PIN in one
	 * round trip: the holder first, so the task, once pinned, finds the
	 * CPU taken by a SCHED_FIFO thread it cannot preempt.  (Pinning first
	 * would let it run on the idle CPU until the holder arrives.)
	 */
	hold_only = pc->guest_cpus == 1;
	t0 = ivm_mono_ns();
	if (hold_only) {
		uint32_t granted;

		memset(&hp, 0, sizeof(hp));
		err = ivm_helper_hold(pc->helper, (unsigned int)cpu,
				      pc->hold_lease_ms, &granted);
		if (ivm_helper_error_is_answer(err)) {
			hp.hold_errnum = err->errnum;
			ivm_error_destroy(err);
			err = NULL;
		}
		hp.pin_errnum = EOPNOTSUPP;	/* not asked */
	} else {
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
	    cap->task.nivcsw != before.nivcsw) {
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

_Static_assert(IVM_CAPTURE_READAHEAD_MAX <= IVM_READAHEAD_MAX_LEN,
	       "a capture's readahead fits the protocol's bound");

void ivm_pin_capture_readahead(struct ivm_pin_capture *pc,
			       struct ivm_capture_engine *engine)
{
	struct ivm_capture_readahead ra;

	while (ivm_capture_engine_take_readahead(engine, &ra)) {
		struct ivm_error *err;
		uint64_t bytes = 0, t0;

		if (!pc->helper || !(pc->helper_caps & IVM_CAP_READAHEAD)) {
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
