/* SPDX-License-Identifier: MIT */
/*
 * vCPU registers read straight from QEMU's TCG CPU state.
 *
 * Why: under TCG, HMP `info registers` only prints the registers QEMU keeps
 * in each vCPU's CPUX86State ("env") in its own memory; it does not stop or
 * synchronise the vCPU.  Asking through the monitor is what costs the guest:
 * any human-monitor-command holds QEMU's big lock long enough to stall the
 * vCPU at its next interrupt, measured at 8-13 % of a spinning guest at
 * 99 calls a second (query-status at the same rate: 0.4 %).  Reading env
 * with process_vm_readv gives the same values at no cost to the guest.
 *
 * How env is found, once per attach, without QEMU's debuginfo:
 *  1. With the guest running, one `info registers -a` gives CR0 and CR4,
 *     which stay put while the guest runs; QEMU's private writable memory
 *     (guest RAM excluded: the guest writes there) is scanned for the pair
 *     cr[0], cr[1] == 0, ..., cr[4] as env lays them out (anchors).
 *  2. With the guest paused (a few ms), a second `info registers -a` is
 *     exact; each anchor's neighbourhood is checked for the rest of env:
 *     regs[16] and eip contiguous (RAX RCX RDX RBX RSP RBP RSI RDI R8-R15 RIP,
 *     QEMU's order), six SegmentCaches (ES CS SS DS FS GS: selector, base,
 *     limit, flags; 24 bytes) with the right selectors and FS/GS bases, and
 *     CR2, CR3 beside CR0 and CR4.
 *  Exactly one location per vCPU must match, at the same offsets for every
 *  vCPU, or nothing is used.
 *
 * Invariants: only TCG (under KVM env is stale until QEMU synchronises it);
 * values read are as racy as `info registers` is under TCG (a vCPU writes
 * env back at translation-block exits), so they are treated like any other
 * guest-controlled value, and the caller checks that the task it samples is
 * still current.  Nothing here is ever written to QEMU.
 */
#ifndef IVM_TCG_ENV_H
#define IVM_TCG_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "access/qemu_registers.h"
#include "access/qmp.h"

/* Where, from the start of env.regs, the fields sit (same for all vCPUs). */
struct ivm_tcg_env_layout {
	size_t seg_off;		/* segs[0] (ES) */
	size_t cr_off;		/* cr[0] */
};

/* Bytes of env read per sample: regs through cr[4]. */
static inline size_t ivm_tcg_env_span(const struct ivm_tcg_env_layout *l)
{
	return l->cr_off + 5 * 8;
}

/* Search windows, from regs[0]: env of QEMU 7.2 has segs at 184, cr at 424. */
#define IVM_TCG_ENV_MAX_SEG_OFF 1024
#define IVM_TCG_ENV_MAX_CR_OFF 2048

/*
 * Step 1: call found(addr, arg) for each 8-aligned address in buf (which
 * holds len bytes of QEMU memory from host address base) where cr[0] and
 * cr[4] of an env with these values could start.  Returns false if found
 * returned false (stop), else true.
 */
bool ivm_tcg_env_anchors(const uint8_t *buf, size_t len, uint64_t base,
			 uint64_t cr0, uint64_t cr4,
			 bool (*found)(uint64_t addr, void *arg), void *arg);

/*
 * Step 2 for one anchor: win holds len bytes of QEMU memory from host address
 * base, and the anchor (cr[0]) is at host address anchor.  If r (an exact
 * dump of one vCPU) matches an env there, return true with the host address
 * of its regs[0] in *regs_addr and the offsets in *layout.
 */
bool ivm_tcg_env_verify(const uint8_t *win, size_t len, uint64_t base,
			uint64_t anchor, const struct ivm_qemu_cpu_regs *r,
			uint64_t *regs_addr, struct ivm_tcg_env_layout *layout);

/*
 * Turn ivm_tcg_env_span() bytes read at regs[0] into registers: GPRS,
 * SEGMENTS, FS_GS_BASE and CRS valid; cpl from CS; halted unknown (false).
 */
void ivm_tcg_env_decode(const uint8_t *span,
			const struct ivm_tcg_env_layout *layout,
			struct ivm_qemu_cpu_regs *out);

struct ivm_tcg_env;

/*
 * Find every vCPU's env in the QEMU process pid, whose monitor is qmp, as
 * above.  Pauses the guest once, briefly, and resumes it in every case (if
 * it was running).  IVM_ERROR_NOT_FOUND when the layout is not recognised.
 */
struct ivm_error *ivm_tcg_env_locate(pid_t pid, struct ivm_qmp *qmp,
				     struct ivm_tcg_env **ret);
void ivm_tcg_env_destroy(struct ivm_tcg_env *env);

/* How long step 2 kept the guest paused, in ns (for messages). */
uint64_t ivm_tcg_env_pause_ns(const struct ivm_tcg_env *env);

/*
 * The registers of vCPU cpu_index now: one process_vm_readv.  GONE when
 * QEMU exited, NOT_FOUND for a vCPU that was not located.
 */
struct ivm_error *ivm_tcg_env_read(const struct ivm_tcg_env *env,
				   int cpu_index,
				   struct ivm_qemu_cpu_regs *ret);

#endif /* IVM_TCG_ENV_H */
