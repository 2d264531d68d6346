/* SPDX-License-Identifier: MIT */
/*
 * Internals of the guest helper daemon, split so the lease and journal logic
 * can run (and be unit-tested) on any Linux host against its own threads.
 *
 * Nothing here talks to the port: helper.c owns the event loop and the
 * port, helper_requests.c the protocol's requests (helper_daemon.h);
 * helper_pin.c pins threads and journals their original
 * affinities; helper_hold.c runs the holder threads; helper_maps.c reads
 * /proc/PID/maps and build-ids.  Functions return 0 or a negative errno.
 */
#ifndef IDLEVM_HELPER_H
#define IDLEVM_HELPER_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define HELPER_JOURNAL_DEFAULT "/run/idlevm-helper.journal"

/* At most this many threads pinned at once; one per vCPU is the use. */
#define HELPER_MAX_PINS 64

void helper_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t helper_now_ns(void);

/* A lease asked for in ms (0: default) clamped to [1, IVM_PROTO_LEASE_MAX_MS]. */
uint32_t helper_lease_ms(uint32_t asked);

/*
 * The start time (field 22 of /proc/TID/stat, clock ticks since boot) and
 * last CPU (field 39) of a thread.  The start time tells a thread from a
 * later one that reused its tid.
 */
int helper_task_stat(pid_t tid, uint64_t *starttime, uint32_t *last_cpu);

/*
 * Whether thread tid can be held behind a holder: 0, or -EPERM (with its
 * policy and priority in *policy, *prio) when it runs at a real-time
 * priority above the holders' (or SCHED_DEADLINE): such a thread preempts
 * the holder on the CPU it is pinned to, so pinning it would only move it.
 * Other errors: -ESRCH and the like from sched_getscheduler.
 */
int helper_task_holdable(pid_t tid, int *policy, int *prio);

/* ---- pins and the journal (helper_pin.c) ----------------------------- */

struct helper_pin {
	pid_t tid;
	uint64_t starttime;
	uint32_t cpu;
	uint64_t pinned_ns;
	uint64_t deadline_ns;	/* UINT64_MAX for a holder's pin */
	/* HOLD_PIN: the CPU's holder makes and ends this pin; the table only
	 * journals it, and drops it once that holder is done. */
	bool by_holder;
	cpu_set_t orig;		/* affinity before the first PIN */
};

/*
 * The pins in force.  Invariant: every pin whose affinity we changed is in
 * the journal file before the change is made, and leaves it only after the
 * original mask is back, so a helper killed at any point leaves a journal
 * from which the next one restores every thread it touched.
 */
struct helper_pins {
	char *journal;		/* path; NULL: no journal (tests) */
	unsigned int count;
	struct helper_pin pin[HELPER_MAX_PINS];
};

void helper_pins_init(struct helper_pins *pins, const char *journal);
/* Frees the journal path; pins in force stay as they are. */
void helper_pins_deinit(struct helper_pins *pins);

/*
 * Pin tid to cpu for lease_ms from now.  A second PIN of a pinned thread
 * moves it and renews the lease but keeps the original mask.  On success
 * *granted is the lease and *prev_cpu the CPU the thread last ran on.
 */
int helper_pin(struct helper_pins *pins, pid_t tid, uint32_t cpu,
	       uint32_t lease_ms, uint64_t now_ns, uint32_t *granted,
	       uint32_t *prev_cpu);
/*
 * Restore tid's original affinity.  -ENOENT when it is not pinned (its
 * lease may have run out: *expired tells nothing then).  A thread that has
 * exited, or whose tid now names another thread, is simply forgotten.
 */
int helper_unpin(struct helper_pins *pins, pid_t tid, uint64_t now_ns,
		 uint64_t *held_ns);
/*
 * Put pin->orig back on pin->tid, unless the thread is gone or its tid now
 * names a younger thread (pin->starttime differs).
 */
void helper_pin_restore(const struct helper_pin *pin);
/*
 * Journal a pin of tid to cpu that the holder of cpu will make and end
 * (HOLD_PIN), first dropping the holder pins of the CPUs in done (their
 * holders have restored them): one journal write for both.  -EBUSY when
 * tid is pinned already.  *starttime and *orig are what the holder needs to
 * restore tid; *prev_cpu as for helper_pin.
 */
int helper_pins_journal_held(struct helper_pins *pins, pid_t tid,
			     uint32_t cpu, uint64_t now_ns,
			     const cpu_set_t *done, uint64_t *starttime,
			     cpu_set_t *orig, uint32_t *prev_cpu);
/* Drop the holder pins of the CPUs in done from the table and journal. */
void helper_pins_forget_held(struct helper_pins *pins, const cpu_set_t *done);
/* End the pins whose lease ran out by now_ns; returns how many.  Holder
 * pins have no lease here. */
unsigned int helper_pins_expire(struct helper_pins *pins, uint64_t now_ns);
/* End every pin, holder pins included (host disconnect, exit, after the
 * holders were stopped); returns how many. */
unsigned int helper_pins_release_all(struct helper_pins *pins);
/* The earliest lease deadline, or UINT64_MAX when nothing is pinned. */
uint64_t helper_pins_next_deadline(const struct helper_pins *pins);

/*
 * Restore the threads a previous helper left pinned, from the journal at
 * path, then empty it.  Lines that do not parse are skipped and counted in
 * *bad; threads gone or reused are counted in *gone.  Returns the number
 * restored, or a negative errno when the journal cannot be read (a missing
 * journal is 0: nothing to do).
 */
int helper_journal_replay(const char *path, unsigned int *gone,
			  unsigned int *bad);

/* ---- holder threads (helper_hold.c) ---------------------------------- */

/*
 * Real-time priority of holders: SCHED_FIFO 49, just under the default 50
 * of threaded interrupt handlers, so the held vCPU still serves its device
 * interrupts while no normal task (the pinned target) can run on it.
 *
 * The ceiling: a thread above 49 (an interrupt thread, a real-time
 * application) still runs on a held CPU, preempting the holder.  It cannot
 * let a pinned normal or lower real-time target run (the holder resumes
 * first), but a target that is itself above 49 would run at once: such
 * targets are not pinned (helper_task_holdable), and the host reads them
 * validated by their switch counts alone.
 */
#define HELPER_HOLD_PRIO 49

/*
 * A HOLD_PIN for the holder of cpu.  The holder answers through the reply
 * hook (helper_holds_create) from its own CPU, so the loop never waits for
 * it: the hook runs on the holder thread, concurrently with the loop.
 */
struct helper_hold_pin {
	uint32_t cpu;
	pid_t tid;		/* <= 0: hold only */
	uint64_t starttime;	/* of tid, from helper_pins_journal_held */
	cpu_set_t orig;		/* tid's affinity to restore */
	uint64_t lease_ns;	/* from the moment the pin is in place */
	uint64_t asked_ns;	/* when the request arrived */
	uint32_t prev_cpu;	/* where tid last ran (for the reply) */
	/* For the hook: the request to answer, and the host session it came
	 * in (a reply to a session that ended is not sent). */
	uint32_t id;
	uint16_t version;
	uint64_t session;
};

/* A holder that gets its CPU this long after the request does nothing and
 * says ETIMEDOUT: the host, whose per-request timeout is longer, may still
 * be waiting, but the moment it asked about has long passed. */
#define HELPER_HOLD_START_MAX_NS (100 * 1000000ull)

struct helper_hold_pin_result {
	int errnum;		/* the hold failed (ETIMEDOUT, EINVAL): no pin */
	int pin_errnum;		/* the pin failed (hold in place), or 0 */
	bool pinned;
	uint32_t holder_tid;
	uint64_t lease_ns;
};

typedef void (*helper_hold_reply_fn)(void *ctx,
				     const struct helper_hold_pin *req,
				     const struct helper_hold_pin_result *res);

/*
 * What the holders did since they were created; helper_holds_counters
 * sums them over the CPUs (each holder updates its own).
 */
struct helper_hold_counters {
	uint64_t holds;		/* times a holder took its CPU */
	uint64_t hold_ns;	/* time holders spun: what the guest paid */
	uint64_t pins;		/* HOLD_PIN pins made */
	uint64_t pin_ns;	/* time those threads stayed pinned */
	uint64_t lease_ends;	/* HOLD_PINs ended by their own lease */
	uint64_t late;		/* holders that got their CPU too late */
};

struct helper_holds;

/* reply (with ctx) answers HOLD_PIN requests; NULL when none are made. */
int helper_holds_create(unsigned int ncpus, helper_hold_reply_fn reply,
			void *ctx, struct helper_holds **ret);
void helper_holds_destroy(struct helper_holds *holds);
void helper_holds_counters(const struct helper_holds *holds,
			   struct helper_hold_counters *ret);
/*
 * Start a holder on cpu spinning for at most lease_ms; returns once it runs
 * there (or fails: -EBUSY when cpu is already held, -EINVAL for a CPU out
 * of range, -ETIMEDOUT when it did not get the CPU within its lease).
 */
int helper_hold(struct helper_holds *holds, uint32_t cpu, uint32_t lease_ms,
		uint32_t *granted);
/*
 * Hand req to the holder of req->cpu and return at once: the holder pins,
 * replies through the hook, spins for the lease and restores by itself.
 * -EBUSY when the CPU is held, -EINVAL for a CPU out of range; otherwise
 * the hook answers, exactly once, unless the hold is stopped first
 * (release_all: the host went away).
 */
int helper_hold_pin(struct helper_holds *holds,
		    const struct helper_hold_pin *req);
/* How many CPUs the holds cover (0 .. ncpus - 1). */
unsigned int helper_holds_ncpus(const struct helper_holds *holds);
/* The CPUs whose holder is not in a hold (done or never asked). */
void helper_holds_idle(const struct helper_holds *holds, cpu_set_t *ret);
/* Stop the holder of cpu; -ENOENT when none.  *expired: it had ended. */
int helper_release(struct helper_holds *holds, uint32_t cpu,
		   uint64_t *held_ns, bool *expired);
/* Reap holders whose lease ran out; returns how many. */
unsigned int helper_holds_expire(struct helper_holds *holds);
unsigned int helper_holds_release_all(struct helper_holds *holds);
uint64_t helper_holds_next_deadline(const struct helper_holds *holds);

/* ---- MAPS (helper_maps.c) -------------------------------------------- */

/*
 * Encode a MAPS reply payload for pid, entries from first on, into w (after
 * idlevm_frame_begin), as many as fit in one frame.
 */
int helper_maps_encode(struct idlevm_writer *w, pid_t pid, uint32_t first);

/* The GNU build-id of the ELF file open at fd; 0 when it has none. */
int helper_read_build_id(int fd, uint8_t *id, unsigned int max);

/* ---- READAHEAD (helper_readahead.c) ----------------------------------- */

/*
 * Read [offset, offset + length) of path (path_len bytes, absolute) as
 * process pid sees it into the page cache; *ret gets the bytes read
 * (fewer at the end of the file).  -ESTALE when the file there is not a
 * regular file of inode number inode; other negative errnos as open and
 * pread give them.
 */
int helper_readahead(pid_t pid, const char *path, size_t path_len,
		     uint64_t inode, uint64_t offset, uint64_t length,
		     uint64_t *ret);

#endif /* IDLEVM_HELPER_H */
