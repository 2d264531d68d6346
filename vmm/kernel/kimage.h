/* SPDX-License-Identifier: MIT */
/*
 * kimage: the guest kernel image as a file a symbol server knows: its GNU
 * build-id, read from the kernel's own ELF notes in guest memory
 * (__start_notes..__stop_notes, the vmlinux's .notes section), and where
 * its text runs (_stext.._etext, run-time addresses).  A profile records
 * both, so that whoever holds the debug files (a pprof backend, a
 * debuginfod server) can symbolize its kernel frames later, even when the
 * host that recorded it had no vmlinux.
 *
 * Hostile guest: the notes are read bounded (IVM_KIMAGE_MAX_NOTES bytes),
 * every note's sizes are checked against what is left, and an unreadable
 * or malformed area just leaves the build-id empty.
 */
#ifndef IVM_KIMAGE_H
#define IVM_KIMAGE_H

#include <stdint.h>

#include "base/error.h"
#include "kernel/kernel_layout.h"

/* A kernel's .notes is a few hundred bytes (Xen, GNU, Linux notes). */
#define IVM_KIMAGE_MAX_NOTES	4096
/* Longest build-id kept: 20 bytes (SHA-1, what ld --build-id writes). */
#define IVM_BUILD_ID_HEX_LEN	41

struct ivm_kimage {
	char build_id[IVM_BUILD_ID_HEX_LEN];	/* hex; "" when unknown */
	uint64_t text_start, text_end;	/* run-time; 0, 0 when unknown */
};

/*
 * Read what layout's kernel says about itself into *ret.  Cannot fail:
 * what is unreadable stays empty.
 */
void ivm_kimage_read(const struct ivm_kernel_layout *layout,
		     struct ivm_kimage *ret);

/*
 * The GNU build-id (NT_GNU_BUILD_ID, name "GNU") among the ELF notes in
 * [notes, notes + len), in lower-case hex, into hex; "" when none, when it
 * is longer than 20 bytes or when a note is malformed.  For bytes read
 * from a guest (the kernel's .notes, a module's .note.gnu.build-id).
 */
void ivm_notes_build_id(const uint8_t *notes, size_t len,
			char hex[IVM_BUILD_ID_HEX_LEN]);

#endif /* IVM_KIMAGE_H */
