/* SPDX-License-Identifier: MIT */
/*
 * proc_info: which process a sample belongs to, beyond its pid — the
 * process's name (its main thread's comm, as ps -o comm shows it) and its
 * title (its command line as the guest's ps -o args shows it,
 * kernel/proc_args.h), so the workers of a pre-forking server ("nginx:
 * worker process", "php-fpm: pool www") can be told from their master and
 * grouped by name or role, and the threads of one program merged.
 *
 * Capture side: a small cache by address space, so a capture reads these
 * from guest memory at most every IVM_PROC_INFO_REFRESH_NS per process (a
 * title changes seldom, and every read lengthens the time a pinned target
 * is held).
 *
 * File side: a process is said once, as a META item "process" with the
 * value "PID<TAB>COMM<TAB>TITLE" (TITLE empty: none), before the first
 * sample that needs it, and again whenever its name or title changes; a
 * sample of process PID then belongs to the process last said for PID
 * before it in the file.  A table by pid does both jobs: the writer's
 * (has this been said?) and the reader's (what was said?).  It is
 * bounded: past IVM_PROC_INFO_MAX pids both start over (they insert the
 * same pids in the same order, one per META item).
 */
#ifndef IVM_PROC_INFO_H
#define IVM_PROC_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/assoc.h"
#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/btf.h"
#include "kernel/proc_args.h"
#include "profile/sample.h"

/* A title as samples carry it: at most this many bytes, shown as ps does. */
#define IVM_TITLE_MAX IVM_SAMPLE_MAX_STRING
#define IVM_PROC_INFO_REFRESH_NS 250000000ull	/* 250 ms */
#define IVM_PROC_INFO_CACHE_SLOTS 64
#define IVM_PROC_INFO_MAX 65536u

/* The META key. */
#define IVM_META_PROCESS "process"

/* A process's name and title; "" for unknown or none. */
struct ivm_proc_info {
	char comm[IVM_COMM_LEN];
	char title[IVM_TITLE_MAX + 1];
};

/* ---- capture side ---------------------------------------------------------- */

struct ivm_proc_info_slot {
	uint64_t mm, cr3, leader;	/* the address space; mm 0: empty */
	uint64_t read_ns;		/* host monotonic time of the read */
	struct ivm_proc_info info;
};

struct ivm_proc_info_cache {
	struct ivm_proc_args_offsets args;	/* mm_struct */
	uint32_t group_leader, comm, comm_size;	/* task_struct */
	/* By mm_struct, set-associative (base/assoc.h). */
	struct ivm_proc_info_slot slots[IVM_PROC_INFO_CACHE_SLOTS];
	uint64_t used[IVM_PROC_INFO_CACHE_SLOTS];
	struct ivm_assoc assoc;
	uint64_t reads, hits, failures;
};

/*
 * A cache for the guest kernel of btf; comm and comm_size are
 * task_struct.comm's offset and size (the kernel layout's).
 * IVM_ERROR_NOT_FOUND when the BTF lacks what it needs.
 */
struct ivm_error *ivm_proc_info_cache_init(struct ivm_proc_info_cache *c,
					   const struct ivm_btf *btf,
					   uint32_t comm, uint32_t comm_size);

/* The task a capture is about, as its task_struct says. */
struct ivm_proc_info_task {
	uint64_t addr;		/* task_struct */
	uint32_t pid, tgid;
	const char *comm;	/* its own comm */
	uint64_t mm, cr3;	/* its address space and page tables */
};

/*
 * Fill *ret for the process of t (a user task: mm set), as of at most
 * IVM_PROC_INFO_REFRESH_NS before now_ns: from the cache, else read
 * through kmem (kernel memory: the group leader's comm and the mm_struct)
 * and umem (its user memory: the command line).  What cannot be read is
 * left "" (and counted in failures) and not cached.
 */
void ivm_proc_info_cache_get(struct ivm_proc_info_cache *c,
			     const struct ivm_kmem_reader *kmem,
			     const struct ivm_kmem_reader *umem, int la57,
			     const struct ivm_proc_info_task *t,
			     uint64_t now_ns, struct ivm_proc_info *ret);

/* ---- file side ------------------------------------------------------------- */

struct ivm_proc_table;

struct ivm_error *ivm_proc_table_create(struct ivm_proc_table **ret);
void ivm_proc_table_destroy(struct ivm_proc_table *t);

/*
 * Make info the process of pid; true when that changed what the table
 * held for pid (the writer then says it).  Without memory nothing
 * changes (and false): the writer says it again next time.
 */
bool ivm_proc_table_set(struct ivm_proc_table *t, uint32_t pid,
			const struct ivm_proc_info *info);

/* Processes the table holds (at most IVM_PROC_INFO_MAX). */
size_t ivm_proc_table_count(const struct ivm_proc_table *t);

/* What the table holds for pid, or NULL.  Owned by the table. */
const struct ivm_proc_info *ivm_proc_table_get(const struct ivm_proc_table *t,
					       uint32_t pid);

struct ivm_profile_writer;

/*
 * The writer's step before a sample of process pid: if info is not what
 * was said last for pid, say it (a META item).  Errors of the writer.
 */
struct ivm_error *ivm_proc_table_announce(struct ivm_proc_table *t,
					  struct ivm_profile_writer *w,
					  uint32_t pid,
					  const struct ivm_proc_info *info);

/*
 * The META value of pid's info into buf (size bytes; cut to fit): tabs
 * and other control characters of comm and title become '?'.
 */
char *ivm_proc_info_format(uint32_t pid, const struct ivm_proc_info *info,
			   char *buf, size_t size);

/*
 * Parse a META "process" value (hostile) into *pid and *ret (cut to its
 * sizes).  IVM_ERROR_INVALID when it is not "PID<TAB>COMM<TAB>TITLE".
 */
struct ivm_error *ivm_proc_info_parse(const char *value, uint32_t *pid,
				      struct ivm_proc_info *ret);

#endif /* IVM_PROC_INFO_H */
