/* SPDX-License-Identifier: MIT */
/*
 * The register state of one x86-64 vCPU, as far as idlevm needs it.
 *
 * Filled from several sources that each know a different subset: the
 * NT_PRSTATUS and "QEMU" notes of a dump-guest-memory core (vmm/gmem/gmem.h),
 * and QEMU's HMP `info registers` output (vmm/access/qemu_discovery.h).  A plain
 * struct with a bitmask saying which groups of fields are valid; a field
 * outside the valid groups is zero and must not be used.
 */
#ifndef IVM_X86_64_REGS_H
#define IVM_X86_64_REGS_H

#include <stdint.h>

enum {
	/* rax..r15, rip, rsp, rbp, rflags */
	IVM_X86_REGS_GPRS = 1u << 0,
	/* cs, ss, ds, es, fs, gs selectors */
	IVM_X86_REGS_SEGMENTS = 1u << 1,
	/* fs_base, gs_base (the GS base in effect, not the swapped one) */
	IVM_X86_REGS_FS_GS_BASE = 1u << 2,
	/* kernel_gs_base: the MSR SWAPGS exchanges gs_base with */
	IVM_X86_REGS_KERNEL_GS_BASE = 1u << 3,
	/* cr0, cr2, cr3, cr4 */
	IVM_X86_REGS_CRS = 1u << 4,
	/* efer */
	IVM_X86_REGS_EFER = 1u << 5,
};

/* CR4.LA57: 5-level paging is enabled. */
#define IVM_X86_CR4_LA57 (1ull << 12)
/* EFER.LMA: long mode is active. */
#define IVM_X86_EFER_LMA (1ull << 10)

struct ivm_x86_regs {
	uint32_t valid;		/* IVM_X86_REGS_* */

	uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rip, rflags;

	uint16_t cs, ss, ds, es, fs, gs;

	uint64_t fs_base, gs_base, kernel_gs_base;

	uint64_t cr0, cr2, cr3, cr4;
	uint64_t efer;
};

#endif /* IVM_X86_64_REGS_H */
