/* SPDX-License-Identifier: MIT */
/*
 * kallsyms_guest: the guest kernel's symbol table decoded from its own
 * compressed kallsyms tables (kernel/kallsyms.c, built by
 * scripts/kallsyms), for a guest whose vmlinux is not at hand.
 *
 * The tables, as Linux 4.6+ on x86-64 lays them out (base-relative):
 *  - kallsyms_num_syms: u32, the number of symbols;
 *  - kallsyms_names: one entry per symbol, in address order: a length
 *    byte (a second byte when its top bit is set, Linux 6.1+: length =
 *    (b0 & 0x7f) | b1 << 7) and that many token numbers;
 *  - kallsyms_token_table: 256 NUL-terminated strings, back to back, and
 *    kallsyms_token_index: 256 u16 offsets of each in the table; a name is
 *    the concatenation of its tokens, and its first character is the
 *    nm-style type letter;
 *  - kallsyms_offsets: num_syms s32, and kallsyms_relative_base: u64 (a
 *    run-time address).  With absolute per-CPU symbols (x86-64 SMP before
 *    6.15) an offset >= 0 is an absolute value (a per-CPU offset, not
 *    slid) and a negative one means relative_base - 1 - offset; otherwise
 *    every offset is unsigned and relative: relative_base + offset.  The
 *    form is told from the data: only the absolute form has negative
 *    offsets (a kernel image is far smaller than 2 GiB).
 * Their run-time addresses come from VMCOREINFO (vmm/kernel/vmcoreinfo.h), which
 * lists them since Linux 6.0 (and in some distribution 5.x kernels).
 *
 * Decoded symbols get link-time addresses, like those of a vmlinux or
 * System.map (vmm/kernel/ksyms.h): the KASLR slide is subtracted from the
 * relative ones, absolute (per-CPU) ones are kept.  kallsyms has no sizes
 * (0) and leaves some symbols out (its own tables among them).
 *
 * Hostile guest: every count is capped before anything is allocated
 * (IVM_KALLSYMS_MAX_SYMS, IVM_KALLSYMS_MAX_NAMES_BYTES), every length and
 * token offset is checked against its buffer, names are limited to
 * IVM_KSYMS_MAX_NAME printable characters after a letter; any violation
 * fails the whole decode with IVM_ERROR_PROTOCOL naming the symbol index.
 * The decode is two linear passes over the names: no loops to get caught
 * in.
 */
#ifndef IVM_KALLSYMS_GUEST_H
#define IVM_KALLSYMS_GUEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/gmem.h"
#include "kernel/ksyms.h"
#include "gmem/vmem.h"
#include "kernel/vmcoreinfo.h"

/* A 6.1 distribution kernel has ~90,000 kallsyms; allyesconfig ~300,000. */
#define IVM_KALLSYMS_MAX_SYMS (2u << 20)
/* Bytes of kallsyms_names read at most (a 6.1 cloud kernel: 1.1 MiB). */
#define IVM_KALLSYMS_MAX_NAMES_BYTES (64u << 20)
#define IVM_KALLSYMS_TOKEN_INDEX_BYTES 512u	/* 256 u16 */
/* Token table bytes read past the highest token offset. */
#define IVM_KALLSYMS_TOKEN_SLACK 1024u

/* The tables as bytes (little-endian), e.g. read out of guest memory. */
struct ivm_kallsyms_tables {
	uint32_t num_syms;
	const uint8_t *names;
	size_t names_len;
	const uint8_t *token_table;
	size_t token_table_len;
	const uint8_t *token_index;	/* IVM_KALLSYMS_TOKEN_INDEX_BYTES */
	size_t token_index_len;
	const uint8_t *offsets;		/* num_syms s32 */
	size_t offsets_len;
	uint64_t relative_base;		/* run-time */
};

/*
 * Decode every symbol of t into a symbol table with link-time addresses
 * (slide subtracted from relative ones; 0 for tables read from a vmlinux
 * file).  Fails with IVM_ERROR_PROTOCOL on any malformed entry, a count
 * above IVM_KALLSYMS_MAX_SYMS or names running past names_len.  The
 * caller owns *ret.
 */
struct ivm_error *ivm_kallsyms_decode(const struct ivm_kallsyms_tables *t,
				      uint64_t slide, struct ivm_ksyms **ret);

/* Run-time addresses of the tables. */
struct ivm_kallsyms_addrs {
	uint64_t num_syms;
	uint64_t names;
	uint64_t token_table;
	uint64_t token_index;
	uint64_t offsets;
	uint64_t relative_base;
};

/*
 * The VMCOREINFO SYMBOL()s ivm_kallsyms_addrs_from_vmcoreinfo() needs,
 * NULL-terminated (for ivm_vmcoreinfo_check and ivm_vmcoreinfo_find).
 */
extern const char *const ivm_kallsyms_vmcoreinfo_symbols[];

/*
 * Fill *ret from VMCOREINFO.  IVM_ERROR_NOT_FOUND naming the first missing
 * symbol (a kernel before 6.0 lists none of them; one without
 * CONFIG_KALLSYMS_BASE_RELATIVE has kallsyms_addresses instead and is not
 * supported).
 */
struct ivm_error *ivm_kallsyms_addrs_from_vmcoreinfo(
	const struct ivm_vmcoreinfo *vi, struct ivm_kallsyms_addrs *ret);

/*
 * Read the tables at addrs through mem and decode them (slide as for
 * ivm_kallsyms_decode).  kallsyms_names has no recorded length: it is read
 * in pieces until num_syms entries are complete, at most
 * IVM_KALLSYMS_MAX_NAMES_BYTES.  A read fault fails with the reader's
 * IVM_ERROR_FAULT, wrapped to say which table.  The caller owns *ret.
 */
struct ivm_error *ivm_kallsyms_read_guest(const struct ivm_kmem_reader *mem,
					  const struct ivm_kallsyms_addrs *addrs,
					  uint64_t slide,
					  struct ivm_ksyms **ret);

/*
 * A reader of the kernel image mapping alone, before the kernel's page
 * tables are known: va in [__START_KERNEL_map, +1 GiB) is at physical
 * va - __START_KERNEL_map + phys_base (the kernel's __pa_symbol()), with
 * phys_base from VMCOREINFO.  Other addresses fault.  gmem is borrowed.
 */
struct ivm_kmem_image {
	struct ivm_gmem *gmem;
	uint64_t phys_base;
};

void ivm_kmem_reader_image(struct ivm_kmem_image *image,
			   struct ivm_kmem_reader *ret);

#endif /* IVM_KALLSYMS_GUEST_H */
