/* SPDX-License-Identifier: MIT */
/*
 * task_sched: a guest thread's scheduler accounting, as the profiler reads
 * it for hundreds of threads at a time: its context switches (nvcsw
 * voluntary, nivcsw involuntary), its time runnable on a run queue waiting
 * for a CPU (sched_info.run_delay; CONFIG_SCHED_INFO), its time on a CPU
 * (se.sum_exec_runtime), whether it is on a CPU now (on_cpu, __state), and
 * which thread it is (pid, tgid, start_time).  The same values the guest's
 * /proc/PID/task/TID/status (voluntary_ctxt_switches,
 * nonvoluntary_ctxt_switches) and schedstat (run time, run delay) show.
 *
 * The fields are scattered over kilobytes of task_struct.  What a batched
 * read costs here is mostly per piece (about half a microsecond each
 * through process_vm_readv, measured with bench_switch on a 6.1 guest),
 * while copying a few kilobytes more costs less than one: so fields less
 * than IVM_TASK_SCHED_GAP apart share a piece, and on Linux 6.1 the whole
 * 2.7 KiB from __state to start_time is one.  A caller reads the pieces of
 * many threads in one batch (ivm_gmem_read_phys_many) into one buffer per
 * thread, layout->bytes long, and decodes it.
 *
 * Hostile guest: decoding takes the bytes at the layout's offsets, nothing
 * more; what they say is checked by whoever uses them (a pid that changed
 * means another thread, counts that go back mean nothing moved).
 */
#ifndef IVM_TASK_SCHED_H
#define IVM_TASK_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "kernel/btf.h"

#define IVM_TASK_SCHED_GAP		2048
#define IVM_TASK_SCHED_MAX_PIECES	10
#define IVM_TASK_SCHED_MAX_BYTES	4096

/* A piece of task_struct read per thread: [off, off + len). */
struct ivm_task_sched_piece {
	uint32_t off, len;
};

/*
 * Where to read and where each field lands in the pieces read one after
 * the other (IVM_KOFF_NONE: the kernel does not have it).
 */
struct ivm_task_sched_layout {
	struct ivm_task_sched_piece pieces[IVM_TASK_SCHED_MAX_PIECES];
	size_t nr_pieces;
	uint32_t bytes;			/* sum of the pieces' lengths */
	uint32_t end;			/* past the last byte read, from the task */
	uint32_t pid, tgid, state, state_size, on_cpu, nvcsw, nivcsw;
	uint32_t run_delay, sum_exec_runtime, start_time;
};

/*
 * The layout for the kernel of btf and koff.  IVM_ERROR_NOT_FOUND when it
 * lacks se.sum_exec_runtime; run_delay, start_time and on_cpu are optional.
 */
struct ivm_error *ivm_task_sched_layout_init(const struct ivm_btf *btf,
					     const struct ivm_kernel_offsets *koff,
					     struct ivm_task_sched_layout *ret);

/* What one read of a thread says. */
struct ivm_task_sched {
	int32_t pid, tgid;
	uint64_t state;		/* 0: runnable (or running) */
	bool on_cpu_known, on_cpu;
	uint64_t nvcsw, nivcsw;
	bool run_delay_known;
	uint64_t run_delay;	/* ns */
	uint64_t sum_exec_runtime;	/* ns */
	bool start_time_known;
	uint64_t start_time;	/* ns since boot */
};

/* Decode bytes (layout->bytes of them, the pieces in order) into *ret. */
void ivm_task_sched_decode(const struct ivm_task_sched_layout *layout,
			   const uint8_t *bytes, struct ivm_task_sched *ret);

#endif /* IVM_TASK_SCHED_H */
