/* SPDX-License-Identifier: MIT */
/*
 * proc_maps: the mappings of a host process (QEMU), line by line from
 * /proc/PID/maps.  Finding guest RAM's file (gmem_mmap) and QEMU's private
 * heap (tcg_env) both walk them.
 *
 * Invariants: a line that does not parse as "lo-hi perms offset dev inode
 * [name]" with lo < hi is skipped, not reported; name is the rest of the
 * line without its leading blanks and newline ("" for an anonymous
 * mapping), cut at IVM_PROC_MAP_NAME_MAX - 1 bytes.
 */
#ifndef IVM_PROC_MAPS_H
#define IVM_PROC_MAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

#define IVM_PROC_MAP_NAME_MAX 256

struct ivm_proc_map {
	uint64_t lo, hi;	/* [lo, hi) in the process */
	uint64_t offset;	/* into the file */
	uint64_t inode;		/* 0: no file behind it */
	char perms[5];		/* "rw-p", "r-xs", ... */
	char name[IVM_PROC_MAP_NAME_MAX];
};

/*
 * Call fn(map, arg) for each mapping of pid, in address order, until fn
 * returns false.  IVM_ERROR_OS (errnum set: ENOENT when pid is gone) when
 * the maps file cannot be opened.
 */
struct ivm_error *ivm_proc_maps_each(pid_t pid,
				     bool (*fn)(const struct ivm_proc_map *map,
						void *arg),
				     void *arg);

#endif /* IVM_PROC_MAPS_H */
