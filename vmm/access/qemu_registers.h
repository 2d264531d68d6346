/* SPDX-License-Identifier: MIT */
/*
 * Parser of QEMU's HMP `info registers` / `info registers -a` text for x86
 * guests (the format of QEMU 7.2's x86_cpu_dump_state: "CPU#N" headers,
 * "RAX=...", segment lines "CS =sel base limit flags", "HLT=1").
 *
 * The text comes from QEMU and is treated as hostile: it is parsed in place
 * with fixed-size fields (hex values of at most 16 digits, each known field
 * at most once per vCPU, at most IVM_QEMU_MAX_VCPUS vCPUs), nothing is
 * copied into unbounded buffers, unknown fields are skipped, and malformed
 * input fails with IVM_ERROR_PROTOCOL, never a crash.
 */
#ifndef IVM_QEMU_REGISTERS_H
#define IVM_QEMU_REGISTERS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/x86_64_regs.h"

/* Upper bound on vCPUs in one dump (QEMU's x86 maximum is lower). */
#define IVM_QEMU_MAX_VCPUS 4096

/* One vCPU's registers as QEMU printed them. */
struct ivm_qemu_cpu_regs {
	int cpu_index;		/* N of "CPU#N"; -1 when QEMU printed none */
	bool halted;		/* HLT=1: the vCPU sits in HLT, i.e. idle */
	bool long_mode;		/* 64-bit layout (RAX=, not EAX=) */
	int cpl;		/* privilege level 0..3 from CPL= (else the
				 * low bits of CS); -1 when unknown */
	/*
	 * regs.valid says which groups were complete.  QEMU 7.2 prints no
	 * KERNEL_GS_BASE, so IVM_X86_REGS_KERNEL_GS_BASE is never set here;
	 * gs_base is the GS base in effect (the per-CPU base in kernel mode,
	 * the user TLS base, usually 0, in user mode).  The 32-bit layout
	 * (EAX=...) fills the low registers but sets no GPRS bit.
	 */
	struct ivm_x86_regs regs;
};

struct ivm_qemu_registers {
	size_t nr;
	struct ivm_qemu_cpu_regs cpu[];	/* in QEMU's order */
};

/*
 * Parse len bytes of `info registers [-a]` output (NUL bytes end nothing:
 * the length rules).  On success *ret lists at least one vCPU, each with an
 * instruction pointer; the caller frees it with free().
 */
struct ivm_error *ivm_qemu_parse_registers(const char *text, size_t len,
					   struct ivm_qemu_registers **ret);

/* The entry for cpu_index, or NULL. */
const struct ivm_qemu_cpu_regs *
ivm_qemu_registers_find(const struct ivm_qemu_registers *regs, int cpu_index);

#endif /* IVM_QEMU_REGISTERS_H */
