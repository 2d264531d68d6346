/* SPDX-License-Identifier: MIT */
/*
 * VMCOREINFO: the page of "KEY=VALUE\n" lines a Linux kernel keeps for
 * crash dump tools (kernel/crash_core.c), e.g.
 *
 *	OSRELEASE=6.1.0-56-cloud-amd64
 *	PAGESIZE=4096
 *	SYMBOL(kallsyms_names)=ffffffff8cf75590
 *	NUMBER(phys_base)=-2097152
 *	KERNELOFFSET=ae00000
 *
 * It is what lets idlevm read a guest kernel with no vmlinux at hand: the
 * run-time addresses of the compressed kallsyms tables
 * (vmm/kernel/kallsyms_guest.h), phys_base and the KASLR offset.  A core dumped
 * by QEMU carries it as an ELF note (ivm_gmem_core_vmcoreinfo); in a live
 * guest it sits at the start of a zeroed, page-aligned page
 * (vmcoreinfo_data), found by ivm_vmcoreinfo_find().
 *
 * SYMBOL() values are run-time addresses (the kernel prints them after
 * relocation), in hex; NUMBER() values are signed decimal; KERNELOFFSET is
 * hex.
 *
 * Hostile input: the text may be any bytes.  It ends at its first NUL or
 * at its length, at most IVM_VMCOREINFO_MAX_TEXT bytes; every line must be
 * KEY=VALUE of printable ASCII (a key without blanks, no line longer than
 * IVM_VMCOREINFO_MAX_LINE) or the whole text is refused, so a random page
 * that happens to start with "OSRELEASE=" does not pass.  Numbers that do
 * not parse are reported as errors naming the key, never as zero.
 */
#ifndef IVM_VMCOREINFO_H
#define IVM_VMCOREINFO_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/gmem.h"

struct ivm_vmcoreinfo;

/* The kernel's VMCOREINFO_BYTES is one page; a core note may be larger. */
#define IVM_VMCOREINFO_MAX_TEXT (64u << 10)
#define IVM_VMCOREINFO_MAX_LINE 512u
#define IVM_VMCOREINFO_MAX_ENTRIES 4096u

/*
 * Parse text (len bytes, or up to its first NUL).  Needs an OSRELEASE
 * line; IVM_ERROR_PROTOCOL when a line does not parse, naming its number.
 * The caller owns *ret.
 */
struct ivm_error *ivm_vmcoreinfo_parse(const char *text, size_t len,
				       struct ivm_vmcoreinfo **ret);

void ivm_vmcoreinfo_destroy(struct ivm_vmcoreinfo *vi);

/* OSRELEASE: the kernel release, as uname -r shows it. */
const char *ivm_vmcoreinfo_osrelease(const struct ivm_vmcoreinfo *vi);

/* The value of key ("PAGESIZE", "SYMBOL(_stext)"), or NULL if absent. */
const char *ivm_vmcoreinfo_get(const struct ivm_vmcoreinfo *vi,
			       const char *key);

/* Number of KEY=VALUE lines. */
size_t ivm_vmcoreinfo_count(const struct ivm_vmcoreinfo *vi);

/*
 * SYMBOL(name) as an address.  IVM_ERROR_NOT_FOUND naming it when absent,
 * IVM_ERROR_PROTOCOL when it is not 1..16 hex digits.
 */
struct ivm_error *ivm_vmcoreinfo_symbol(const struct ivm_vmcoreinfo *vi,
					const char *name, uint64_t *ret);

/* NUMBER(name), a signed decimal; errors as for ivm_vmcoreinfo_symbol. */
struct ivm_error *ivm_vmcoreinfo_number(const struct ivm_vmcoreinfo *vi,
					const char *name, int64_t *ret);

/* KERNELOFFSET (the KASLR slide); errors as for ivm_vmcoreinfo_symbol. */
struct ivm_error *ivm_vmcoreinfo_kerneloffset(const struct ivm_vmcoreinfo *vi,
					      uint64_t *ret);

/*
 * Check that vi describes an x86-64 kernel idlevm can read: OSRELEASE
 * equals release (when not NULL), KERNELOFFSET parses and is below the
 * 1 GiB kernel image area, NUMBER(phys_base) parses and is page aligned,
 * and every SYMBOL() given in symbols (NULL-terminated; may be NULL) is
 * present and lies in the kernel image mapping at or above
 * __START_KERNEL_map + KERNELOFFSET.  IVM_ERROR_PROTOCOL (or
 * IVM_ERROR_NOT_FOUND for a missing symbol) saying what does not hold.
 */
struct ivm_error *ivm_vmcoreinfo_check(const struct ivm_vmcoreinfo *vi,
				       const char *release,
				       const char *const *symbols);

/*
 * Find the kernel's VMCOREINFO page in guest physical memory: every 4 KiB
 * page of the first IVM_VMCOREINFO_SCAN_LIMIT bytes (holes skipped; read
 * in 2 MiB pieces) that starts with "OSRELEASE=" is parsed and checked
 * with ivm_vmcoreinfo_check(release, symbols); the first one that passes
 * wins.  IVM_ERROR_NOT_FOUND when none does (a kernel without
 * CONFIG_CRASH_CORE, or not Linux), saying how many candidates were
 * refused.  The caller owns *ret.
 */
#define IVM_VMCOREINFO_SCAN_LIMIT (64ull << 30)
struct ivm_error *ivm_vmcoreinfo_find(struct ivm_gmem *gmem,
				      const char *release,
				      const char *const *symbols,
				      struct ivm_vmcoreinfo **ret);

#endif /* IVM_VMCOREINFO_H */
