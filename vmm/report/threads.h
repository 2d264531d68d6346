/* SPDX-License-Identifier: MIT */
/*
 * The threads report (idlevm report -f threads): one line per guest thread
 * over the run, from the profile's THREAD records (profile --switch-every):
 * tid, pid, comm, voluntary and involuntary context switches, run-queue
 * wait, CPU time and switch samples, sorted by any column.
 *
 * A thread is its tid and start_time (a tid reused by a later thread is
 * another line); the last record of a thread in the file wins, so a file
 * cut short shows the totals as of its last flush.  Records are hostile
 * file data: counter ids the report does not know are skipped, comm is
 * printed with anything but printable ASCII (and spaces) replaced.
 */
#ifndef IVM_REPORT_THREADS_H
#define IVM_REPORT_THREADS_H

#include <stdbool.h>
#include <stdio.h>

#include "base/error.h"
#include "profile/profile_file.h"

enum ivm_threads_sort {
	IVM_THREADS_BY_SWITCHES,	/* voluntary + involuntary (default) */
	IVM_THREADS_BY_TID,
	IVM_THREADS_BY_PID,
	IVM_THREADS_BY_COMM,
	IVM_THREADS_BY_VOLUNTARY,
	IVM_THREADS_BY_INVOLUNTARY,
	IVM_THREADS_BY_RUN_DELAY,
	IVM_THREADS_BY_CPU,
	IVM_THREADS_BY_SAMPLES,
};

/*
 * The sort of column name ("tid", "pid", "comm", "voluntary",
 * "involuntary", "switches", "run_delay", "cpu", "samples"); false for
 * anything else.
 */
bool ivm_threads_sort_parse(const char *name, enum ivm_threads_sort *ret);

/* Column names for a usage or error message. */
#define IVM_THREADS_SORT_NAMES \
	"tid, pid, comm, voluntary, involuntary, switches, run_delay, cpu, samples"

struct ivm_threads;

struct ivm_error *ivm_threads_create(struct ivm_threads **ret);
void ivm_threads_destroy(struct ivm_threads *t);

/* One THREAD record (read from a file; copied). */
struct ivm_error *ivm_threads_add(struct ivm_threads *t,
				  const struct ivm_thread_record *r);

/* Threads known (distinct tid and start_time). */
size_t ivm_threads_nr(const struct ivm_threads *t);

/*
 * The table, a header line then one line per thread (the first max; 0:
 * all): numeric columns sorted biggest first, tid and pid smallest first,
 * comm alphabetically; ties by tid.  Times in milliseconds.  A last line
 * sums the columns over every thread.
 */
void ivm_threads_print(const struct ivm_threads *t, enum ivm_threads_sort sort,
		       size_t max, FILE *out);

#endif /* IVM_REPORT_THREADS_H */
