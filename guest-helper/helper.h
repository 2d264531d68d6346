/* SPDX-License-Identifier: MIT */
/*
 * Internals of the guest helper daemon, split so the lease and journal logic
 * can run (and be unit-tested) on any Linux host against its own threads.
 *
 * Nothing here talks to the port: helper.c owns the event loop and the
 * protocol; helper_pin.c pins threads and journals their original
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

/* ---- pins and the journal (helper_pin.c) ----------------------------- */

struct helper_pin {
	pid_t tid;
	uint64_t starttime;
	uint32_t cpu;
	uint64_t pinned_ns;
	uint64_t deadline_ns;
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
/* End the pins whose lease ran out by now_ns; returns how many. */
unsigned int helper_pins_expire(struct helper_pins *pins, uint64_t now_ns);
/* End every pin (host disconnect, exit); returns how many. */
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
 */
#define HELPER_HOLD_PRIO 49

struct helper_holds;

int helper_holds_create(unsigned int ncpus, struct helper_holds **ret);
void helper_holds_destroy(struct helper_holds *holds);
/*
 * Start a holder on cpu spinning for at most lease_ms; returns once it runs
 * there (or fails: -EBUSY when cpu is already held, -EINVAL for a CPU out
 * of range, -ETIMEDOUT when it did not get the CPU within its lease).
 */
int helper_hold(struct helper_holds *holds, uint32_t cpu, uint32_t lease_ms,
		uint32_t *granted);
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
