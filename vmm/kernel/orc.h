/* SPDX-License-Identifier: MIT */
/*
 * ORC: the guest kernel's own unwind tables (x86-64).
 *
 * objtool emits two parallel arrays into vmlinux: .orc_unwind_ip, 32-bit
 * offsets each relative to its own address (ip = &ip_table[i] + ip_table[i]),
 * and .orc_unwind, one 6-byte entry per ip saying how to find the caller's
 * stack pointer (and frame pointer) from the current ones.  An entry covers
 * the addresses from its ip up to the next entry's ip.
 *
 * A table is loaded from either source through one byte-buffer loader:
 *  - a vmlinux ELF file (ivm_orc_load_elf): ips are link-time addresses,
 *    so the caller subtracts the KASLR slide before a lookup;
 *  - the two arrays read out of guest memory between the symbols
 *    __start_orc_unwind_ip, __stop_orc_unwind_ip and __start_orc_unwind
 *    (ivm_orc_load_buffer with the runtime address of the ip array): ips
 *    are then runtime addresses already.
 * The loader decodes every entry into struct ivm_orc_entry (a normalized
 * form independent of the kernel's bitfield layout) and sorts by ip once,
 * so lookups are a binary search.
 *
 * The entry bitfields changed twice upstream.  Format versions (our names):
 *  - V1: Linux 4.14 .. 6.2, e.g. Debian's 6.1: byte 5 bits 0-1 type
 *    (0 CALL, 1 REGS, 2 REGS_PARTIAL), bit 2 end.  sp_reg UNDEFINED with
 *    end set is the end of the stack; without it, no information.
 *  - V2: Linux 6.3: as V1 plus a signal bit (bit 2), end moves to bit 3.
 *  - V3: Linux 6.4+: bits 0-2 type (0 UNDEFINED, 1 END_OF_STACK, 2 CALL,
 *    3 REGS, 4 REGS_PARTIAL), bit 3 signal.  These kernels also carry an
 *    .orc_header section (a hash of the format), which selects V3 when
 *    loading from ELF with IVM_ORC_FORMAT_AUTO.
 *
 * Hostile input: sizes are checked against each other and capped
 * (IVM_ORC_MAX_ENTRIES) before anything is allocated; ip arithmetic is
 * 64-bit modular exactly as the kernel's, so any bytes give some table and
 * never a crash.  Garbage entries decode to whatever they say; the unwinder
 * validates what it does with them.
 */
#ifndef IVM_ORC_H
#define IVM_ORC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"

/* A 6.1 vmlinux has about 370,000 entries. */
#define IVM_ORC_MAX_ENTRIES (16u << 20)

enum ivm_orc_format {
	IVM_ORC_FORMAT_AUTO,	/* ELF: V3 with .orc_header, else V1 */
	IVM_ORC_FORMAT_V1,
	IVM_ORC_FORMAT_V2,
	IVM_ORC_FORMAT_V3,
};

/* Normalized entry type. */
enum ivm_orc_type {
	IVM_ORC_TYPE_UNDEFINED,		/* no unwind information here */
	IVM_ORC_TYPE_END_OF_STACK,	/* clean end (kernel thread top, entry) */
	IVM_ORC_TYPE_CALL,		/* return address at prev_sp - 8 */
	IVM_ORC_TYPE_REGS,		/* full pt_regs at prev_sp */
	IVM_ORC_TYPE_REGS_PARTIAL,	/* iret frame (pt_regs from ip) at prev_sp */
};

/* Base registers, numbered as the kernel numbers them (all versions). */
enum ivm_orc_reg {
	IVM_ORC_REG_UNDEFINED = 0,
	IVM_ORC_REG_PREV_SP = 1,
	IVM_ORC_REG_DX = 2,
	IVM_ORC_REG_DI = 3,
	IVM_ORC_REG_BP = 4,
	IVM_ORC_REG_SP = 5,
	IVM_ORC_REG_R10 = 6,
	IVM_ORC_REG_R13 = 7,
	IVM_ORC_REG_BP_INDIRECT = 8,
	IVM_ORC_REG_SP_INDIRECT = 9,
};

struct ivm_orc_entry {
	int16_t sp_offset;
	int16_t bp_offset;
	uint8_t sp_reg;		/* enum ivm_orc_reg, 0..15 */
	uint8_t bp_reg;		/* enum ivm_orc_reg, 0..15 */
	uint8_t type;		/* enum ivm_orc_type */
	/*
	 * The frame is a signal-like frame: the next pc looked up from it is
	 * exact, not a return address.  V1 has no bit for it: false.
	 */
	bool signal;
};

struct ivm_orc_table;

/*
 * Decode the raw 6-byte entry at raw (little endian) in format fmt (not
 * AUTO).  Unknown type values decode to IVM_ORC_TYPE_UNDEFINED.
 */
void ivm_orc_decode(const uint8_t raw[6], enum ivm_orc_format fmt,
		    struct ivm_orc_entry *ret);

/*
 * Build a table from the raw arrays: ip_buf/ip_len is the .orc_unwind_ip
 * array as it sits at address ip_addr, orc_buf/orc_len the .orc_unwind
 * array.  Both are copied (decoded), not kept.  ip_len must be a multiple
 * of 4, orc_len of 6, and they must describe the same number (>= 1, <=
 * IVM_ORC_MAX_ENTRIES) of entries; otherwise IVM_ERROR_ELF.  fmt AUTO
 * means V1 here (no header to tell).  The caller owns *ret.
 */
struct ivm_error *ivm_orc_load_buffer(const void *ip_buf, size_t ip_len,
				      uint64_t ip_addr, const void *orc_buf,
				      size_t orc_len, enum ivm_orc_format fmt,
				      struct ivm_orc_table **ret);

/*
 * Load the table of the vmlinux ELF file at path (64-bit little-endian
 * x86-64; sections .orc_unwind_ip and .orc_unwind, optional .orc_header).
 * ips are link-time addresses.  A missing, truncated or inconsistent
 * section gives IVM_ERROR_ELF naming it; an unreadable file IVM_ERROR_OS.
 * The file is mapped while loading and closed before returning.  The
 * caller owns *ret.
 */
struct ivm_error *ivm_orc_load_elf(const char *path, enum ivm_orc_format fmt,
				   struct ivm_orc_table **ret);

void ivm_orc_destroy(struct ivm_orc_table *table);

/* Number of entries (terminator entries included). */
size_t ivm_orc_nr_entries(const struct ivm_orc_table *table);

/* The format the table was decoded with (never AUTO). */
enum ivm_orc_format ivm_orc_table_format(const struct ivm_orc_table *table);

/* Lowest and highest ip in the table. */
void ivm_orc_ip_range(const struct ivm_orc_table *table, uint64_t *lo,
		      uint64_t *hi);

/*
 * Entry i in ip order (i < ivm_orc_nr_entries); its ip in *ip.  Returns
 * false if i is out of range.
 */
bool ivm_orc_entry_at(const struct ivm_orc_table *table, size_t i,
		      uint64_t *ip, struct ivm_orc_entry *ret);

/*
 * Find the entry covering ip: the one with the greatest ip <= ip.  ip is in
 * the table's address space (link-time for ELF tables).  Returns false if
 * ip lies below the first entry or above the last one (the last entry is
 * objtool's terminator at the end of the text, so nothing past it is
 * covered).  *start (optional) gets the entry's own ip.
 */
bool ivm_orc_lookup(const struct ivm_orc_table *table, uint64_t ip,
		    struct ivm_orc_entry *ret, uint64_t *start);

/*
 * The ORC format of a kernel release string ("6.1.0-56-cloud-amd64"):
 * V1 before 6.3, V2 for 6.3, V3 from 6.4.  AUTO if the string does not
 * start with "MAJOR.MINOR".
 */
enum ivm_orc_format ivm_orc_format_for_release(const char *release);

/*
 * Load the guest kernel's ORC table from guest memory, for a guest whose
 * vmlinux is not at hand: ip_start/ip_stop/orc_start are the runtime
 * addresses of __start_orc_unwind_ip, __stop_orc_unwind_ip and
 * __start_orc_unwind (kallsyms, or System.map plus the KASLR slide).  The
 * table's ips are runtime addresses (use orc_slide 0).  The ip range must
 * hold a whole number of entries, at most IVM_ORC_MAX_ENTRIES; otherwise
 * IVM_ERROR_INVALID.  A read fault is returned as the IVM_ERROR_FAULT
 * error of the reader.  fmt as for ivm_orc_load_buffer (AUTO means V1:
 * pass ivm_orc_format_for_release() of the guest's release).
 */
struct ivm_error *ivm_orc_load_guest(const struct ivm_kmem_reader *mem,
				     uint64_t ip_start, uint64_t ip_stop,
				     uint64_t orc_start,
				     enum ivm_orc_format fmt,
				     struct ivm_orc_table **ret);


#endif /* IVM_ORC_H */
