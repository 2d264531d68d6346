/* SPDX-License-Identifier: MIT */
/*
 * mappings: the ELF files a report's frames are in (the guest kernel,
 * each of its modules, each user executable and shared library), each
 * with its build-id, file name and where its code is, in the shape of
 * pprof's Mapping table.  A profile that says which binary and which file
 * offset each frame's address is can be symbolized later by whoever holds
 * the debug files (a pprof backend, `go tool pprof` with
 * PPROF_BINARY_PATH), also the frames the report itself could not name.
 *
 * Address spaces, as the call tree keys frames (report.h):
 *  - kernel frames are run-time (KASLR-slid) addresses.  The kernel's
 *    mapping spans _stext.._etext as the guest ran it, file offset 0: the
 *    "[kernel.kallsyms]" convention of perf and pprof (the slide is start
 *    minus the vmlinux's _stext).  A module's spans its core memory from
 *    where its .text was loaded, offset 0: a .ko is relocatable, its
 *    addresses are offsets into .text;
 *  - user frames of a known object are link-time addresses tagged with
 *    that object (IVM_REPORT_USER_TAG), so one mapping serves every process
 *    that ran it: its executable segment at its link-time address, with
 *    that segment's file offset, so that file offset = address - start +
 *    offset, as pprof defines it.  When the segment is not known the
 *    mapping takes pprof's form for addresses that are already the file's
 *    own: start 0, limit ~0, offset 0.
 *
 * Not thread-safe.  Everything returned is owned by the table.
 */
#ifndef IVM_MAPPINGS_H
#define IVM_MAPPINGS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "report/calltree.h"

/* Most mappings a table keeps: a kernel, its modules, user objects. */
#define IVM_MAPPINGS_MAX	8192

/* Kinds, in the order a pprof file lists them (its first is "main"). */
enum ivm_mapping_kind {
	IVM_MAPPING_USER,
	IVM_MAPPING_KERNEL,
	IVM_MAPPING_MODULE,
};

struct ivm_mapping {
	uint32_t id;			/* 1.., in the order added */
	enum ivm_mapping_kind kind;
	uint64_t start, limit, offset;	/* pprof's memory_start, _limit, file_offset */
	const char *file;		/* never NULL; "" when unknown */
	const char *build_id;		/* lower-case hex; never NULL, "" unknown */
	/*
	 * Which frames are in it: kernel frames (kernel and modules) with an
	 * address in [lo, hi); user frames tagged tag with an address (tag
	 * removed) in [lo, hi).
	 */
	uint32_t tag;
	uint64_t lo, hi;
};

struct ivm_mappings;

/* An empty table; NULL for no memory. */
struct ivm_mappings *ivm_mappings_create(void);
void ivm_mappings_destroy(struct ivm_mappings *m);

/*
 * Add a copy of *desc (its id is assigned; file and build_id are copied,
 * NULL taken as "").  IVM_ERROR_INVALID for an empty range (lo >= hi) or a
 * full table; kernel ranges may not overlap one another (the first added
 * wins a lookup), and the kernel's own mapping is looked up after every
 * module's.
 */
struct ivm_error *ivm_mappings_add(struct ivm_mappings *m,
				   const struct ivm_mapping *desc);

/* The mapping a frame of type (IVM_NODE_USER, IVM_NODE_KERNEL) is in, or NULL. */
const struct ivm_mapping *ivm_mappings_find(const struct ivm_mappings *m,
					    enum ivm_node_type type,
					    uint64_t pc);

size_t ivm_mappings_count(const struct ivm_mappings *m);

/* Mapping i (< count) in the order added. */
const struct ivm_mapping *ivm_mappings_at(const struct ivm_mappings *m,
					  size_t i);

#endif /* IVM_MAPPINGS_H */
