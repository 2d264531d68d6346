/* SPDX-License-Identifier: MIT */
/*
 * pause_guard: a guest that idlevm pauses is resumed even when idlevm dies
 * while it is paused.
 *
 * idlevm pauses guests for a few milliseconds at a time (finding QEMU's
 * TCG register state, `idlevm regs`, `--capture stop`).  A pause is a
 * promise to resume, and a process killed between stop and cont (SIGKILL,
 * an OOM kill, a crash) breaks it: the guest, maybe a production one, stays
 * frozen until someone notices.  So before its first pause a process starts
 * a guardian: idlevm itself, executed again as `idlevm __pause-guard`, in a
 * session of its own (a Ctrl-C or a kill of idlevm's process group does not
 * reach it), holding one end of a socket pair.  Around each pause the
 * parent writes 'A' (armed: about to pause) and 'D' (resumed).  When the
 * socket reaches end of file, however the parent ended, the guardian looks
 * at the last word: armed means the parent died with the guest paused, and
 * the guardian resumes it through a connection of its own (libvirt: the
 * same URI and the domain's UUID; plain QEMU: the QMP socket, free once the
 * parent's connection closed), if it is paused, then exits.  A guest seen
 * running is watched for a few seconds more: the stop the parent sent just
 * before it died may still be carried out after that.  It never resumes a
 * guest that was not paused, and an unarmed guardian just exits.
 */
#ifndef IVM_PAUSE_GUARD_H
#define IVM_PAUSE_GUARD_H

#include <stdbool.h>

#include "base/error.h"

/* What to resume: exactly one of a libvirt domain and a QMP socket. */
struct ivm_pause_target {
	const char *libvirt_uri;	/* NULL: libvirt's default */
	const char *domain_uuid;	/* libvirt domain UUID (string) */
	const char *qmp_path;		/* plain QEMU QMP socket */
};

struct ivm_pause_guard;

/*
 * Start the guardian of target.  The strings are copied.  The guardian is
 * the program at path (NULL: this process's own executable,
 * /proc/self/exe), run with the hidden command __pause-guard.  The caller
 * owns *ret.
 */
struct ivm_error *ivm_pause_guard_start(const struct ivm_pause_target *target,
					const char *path,
					struct ivm_pause_guard **ret);

/*
 * About to pause: after this returns NULL, the guest is resumed if this
 * process dies before ivm_pause_guard_disarm().  An error (the guardian is
 * gone) means no such promise: the caller should not pause.
 */
struct ivm_error *ivm_pause_guard_arm(struct ivm_pause_guard *guard);

/* The guardian's process id (for messages and tests). */
int ivm_pause_guard_pid(const struct ivm_pause_guard *guard);

/* The guest runs again (or is gone): nothing to do on exit. */
void ivm_pause_guard_disarm(struct ivm_pause_guard *guard);

/*
 * End the guardian.  If it is still armed (the resume failed), it tries
 * the resume itself before it exits.  NULL is a no-op.
 */
void ivm_pause_guard_destroy(struct ivm_pause_guard *guard);

/*
 * The guardian's main (idlevm __pause-guard --fd N (--uuid U [--connect
 * URI] | --qmp PATH)): waits for end of file on fd N and resumes the
 * guest if the last word was 'A'.  Exit status 0, or 1 when a resume was
 * needed and failed (said on stderr).
 */
int ivm_pause_guard_main(int argc, char **argv);

#endif /* IVM_PAUSE_GUARD_H */
