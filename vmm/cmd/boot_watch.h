/* SPDX-License-Identifier: MIT */
/*
 * boot_watch: whether the guest kernel a run profiles is still the boot
 * it opened, for a run that must never mix two boots in one file.
 *
 * A boot ends with a reset (a reboot, `virsh reset`, a kernel that
 * reboots after a panic: the next kernel may have another KASLR offset,
 * release, layout), a kernel panic, a shutdown, or QEMU going away
 * (destroyed, killed, crashed).  The watch learns it from the monitor's
 * events (QMP's RESET, GUEST_PANICKED, SHUTDOWN; under libvirt its reboot
 * and lifecycle events, named alike, and DOMAIN_STOPPED, _SAVED or
 * _MIGRATED when QEMU exited),
 * from the monitor closing, from the guest kernel's own panic_cpu
 * (set by panic() before anything else; a guest without a pvpanic device
 * sends no event when it panics, and one that does not reboot after a
 * panic sends nothing at all), and from the kernel itself: once a
 * second its linux_banner must still be where it was, and its jiffies_64
 * must not go back (a reboot whose event was lost, libvirtd being down
 * then, shows either as a moved banner or as jiffies that start again);
 * every 100 ms while the monitor says its libvirtd is away.
 *
 * Invariants:
 *  - what the watch saw only grows: a boot that ended never goes on;
 *  - the reason is the first end seen (a panic followed by the reset
 *    that reboots the guest is a panic), and it never changes after;
 *  - ivm_boot_watch_event() is safe on any thread (it runs on the event
 *    thread under libvirt), the others on the run's thread only.
 *
 * A guest that is paused (STOP) or whose libvirtd restarts has not
 * ended its boot: the watch does not count those as ends.
 */
#ifndef IVM_BOOT_WATCH_H
#define IVM_BOOT_WATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernel/guest.h"

/* What ended a boot, as bits (several may come, in any order). */
enum ivm_boot_end {
	IVM_BOOT_RESET = 1u << 0,	/* a new boot starts on the same QEMU */
	IVM_BOOT_PANIC = 1u << 1,	/* the kernel panicked */
	IVM_BOOT_SHUTDOWN = 1u << 2,	/* the guest is going down */
	IVM_BOOT_GONE = 1u << 3,	/* QEMU exited, the monitor closed */
	IVM_BOOT_CHANGED = 1u << 4,	/* the kernel is not the one opened */
	/*
	 * QEMU exited after saving the guest (`virsh save`) or migrating it
	 * away: the boot goes on elsewhere (a restore), in another QEMU
	 * whose memory and threads must be opened anew; seen with GONE.
	 */
	IVM_BOOT_SAVED = 1u << 5,
	IVM_BOOT_MIGRATED = 1u << 6,
};

/* Looks in a row that must find the kernel changed before it is said. */
#define IVM_BOOT_CHANGED_LOOKS 2

struct ivm_boot_watch {
	_Atomic unsigned int seen;	/* enum ivm_boot_end bits */
	_Atomic unsigned int first;	/* the first of them, 0 none */
	/* libvirt said QEMU stopped (and why): DOMAIN_STOPPED, _SAVED... */
	_Atomic bool stop_told;
	/* Run's thread only: */
	struct ivm_guest *guest;	/* attached to, or NULL */
	uint64_t panic_cpu;		/* its run-time address, 0 unknown */
	uint64_t banner, jiffies;	/* run-time addresses, 0 unknown */
	char banner_text[32];		/* its first bytes, as opened */
	uint64_t last_jiffies;
	unsigned int strikes;		/* looks in a row that found a change */
	uint64_t still_since_ns;	/* jiffies not moving since, 0 moving */
	uint64_t next_drain_ns, next_look_ns;
};

/* A fresh boot: nothing seen.  Fine on a zeroed struct, attached or not. */
void ivm_boot_watch_reset(struct ivm_boot_watch *w);

/*
 * Take one monitor event (its name, and data as QMP's or NULL): any
 * thread.  Events that do not end a boot are ignored.
 */
void ivm_boot_watch_event(struct ivm_boot_watch *w, const char *name);

/*
 * Watch guest's events (the monitor's event callback, which nothing else
 * uses) and its kernel's panic_cpu, from a fresh boot.  Detach before the
 * guest is closed.
 */
void ivm_boot_watch_attach(struct ivm_boot_watch *w, struct ivm_guest *guest);
void ivm_boot_watch_detach(struct ivm_boot_watch *w);

/*
 * What is due at now (CLOCK_MONOTONIC ns): the monitor's queued events
 * read (a plain socket's arrive only when read; at most every 100 ms) and
 * panic_cpu (at most once a second).  Cheap to call every loop.
 */
void ivm_boot_watch_poll(struct ivm_boot_watch *w, uint64_t now);

/*
 * One look at the kernel (what ivm_boot_watch_poll reads once a second):
 * the reads' error (NULL: read), whether the banner is the same, and
 * jiffies_64 as read.  IVM_BOOT_CHANGED_LOOKS looks in a row with the
 * banner gone or jiffies behind the last ones seen end the boot.  A read
 * that found QEMU gone (IVM_ERROR_GONE) is no changed kernel: the boot
 * ends GONE at once, so that libvirt's event, which may come seconds
 * later, can still say it was a save or a migration.  For tests on
 * recorded looks.
 */
void ivm_boot_watch_look(struct ivm_boot_watch *w, const struct ivm_error *err,
			 bool banner_same, uint64_t jiffies);

/*
 * While no event can come (libvirtd away) and the guest runs: whether
 * jiffies_64 moved since the last look, at now.  A reboot onto another
 * KASLR offset leaves the old boot's memory as it was, its banner in
 * place and its jiffies where they stopped: jiffies that do not move for
 * IVM_BOOT_STILL_NS end the boot (a guest whose every CPU sleeps that long
 * without a tick would be taken for rebooted; its same boot is opened
 * again).
 */
#define IVM_BOOT_STILL_NS 3000000000ull
void ivm_boot_watch_still(struct ivm_boot_watch *w, bool moved, uint64_t now);

/* Whether libvirt's event that QEMU stopped came (it says why). */
bool ivm_boot_watch_stop_told(const struct ivm_boot_watch *w);

/* The bits seen so far, and the first (0: the boot goes on). */
unsigned int ivm_boot_watch_seen(const struct ivm_boot_watch *w);
unsigned int ivm_boot_watch_first(const struct ivm_boot_watch *w);

/* Why a boot ended, in words, for one bit ("the guest rebooted", ...). */
const char *ivm_boot_end_reason(unsigned int end);

/*
 * Whether the machine is still there, with a new boot coming or under
 * way (a reset was seen and QEMU did not go away): the guest can be
 * opened again as it is.  False after a panic alone: the panicked kernel
 * is still in memory, and opening it would give the same boot again.
 */
bool ivm_boot_watch_new_boot(const struct ivm_boot_watch *w);

#endif /* IVM_BOOT_WATCH_H */
