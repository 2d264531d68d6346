/* SPDX-License-Identifier: MIT */
/*
 * The sample record: one captured guest call stack and what it is about.
 *
 * Every technique of the profiler lands here: idle transitions (to-idle,
 * from-idle), on-CPU ticks, context-switch sampling (every Nth switch of a
 * thread, its counters' deltas as sample counters), and later business
 * categories and pre/post VM-exit records.  Room for those is kept from the
 * start: free-form labels (key/value strings, e.g. "category") and counter
 * values (id/value pairs) travel with every sample and through the profile
 * file, so adding a dimension never changes the file format.
 *
 * Frames are raw guest addresses as unwound, leaf first.  Kernel addresses
 * are runtime (KASLR-slid) addresses; the slide is recorded once in the
 * profile's metadata and removed at symbolization time, offline.
 */
#ifndef IVM_SAMPLE_H
#define IVM_SAMPLE_H

#include <stdint.h>

enum ivm_sample_kind {
	IVM_SAMPLE_TO_IDLE,	/* last task that ran before the vCPU halted */
	IVM_SAMPLE_FROM_IDLE,	/* first task dispatched after it woke */
	IVM_SAMPLE_ON_CPU,	/* task running at a tick */
	/*
	 * A thread whose count of context switches crossed a multiple of
	 * --switch-every: where it blocked (or was preempted), with the
	 * deltas of its IVM_COUNTER_* since its previous switch sample.
	 */
	IVM_SAMPLE_SWITCH,
	IVM_SAMPLE_NR_KINDS,
};

/*
 * Counter ids of sample counters and per-thread records: the guest
 * scheduler's own per-task accounting (task_struct nvcsw, nivcsw,
 * sched_info.run_delay, se.sum_exec_runtime).  Ids are file format: never
 * renumbered; readers skip ids they do not know.
 */
enum ivm_counter_id {
	IVM_COUNTER_NVCSW = 1,		/* voluntary context switches */
	IVM_COUNTER_NIVCSW = 2,		/* involuntary (preempted) */
	IVM_COUNTER_RUN_DELAY_NS = 3,	/* runnable, waiting for a CPU */
	IVM_COUNTER_CPU_NS = 4,		/* on a CPU */
	/*
	 * A to-idle sample's weight in time: how long the idle period it
	 * began lasted (both its ends known).
	 */
	IVM_COUNTER_IDLE_NS = 5,
	/*
	 * A from-idle sample's: how long the host took to run the vCPU's
	 * thread after the wakeup that ended the idle period (host_sched.h).
	 */
	IVM_COUNTER_HOST_WAKE_NS = 6,
	IVM_COUNTER_NR_IDS,		/* one past the last id */
};

/*
 * "nvcsw", "nivcsw", "run_delay_ns", "cpu_ns", "idle_ns", "host_wake_ns";
 * NULL for other ids.
 */
const char *ivm_counter_name(uint32_t id);

/* Why a stack ended early; a truncated stack is kept and marked. */
enum {
	IVM_STACK_TRUNC_FAULT	= 1 << 0,  /* unreadable guest memory */
	IVM_STACK_TRUNC_CAP	= 1 << 1,  /* frame cap reached */
	IVM_STACK_TRUNC_LOOP	= 1 << 2,  /* stack pointer did not move up */
	IVM_STACK_TRUNC_BADINFO	= 1 << 3,  /* no/garbage unwind info */
	IVM_STACK_INEXACT	= 1 << 4,  /* frame-pointer fallback used */
	IVM_STACK_NO_USER	= 1 << 5,  /* user part not unwound */
	IVM_STACK_TRUNC_NOCFI	= 1 << 6,  /* CFI not in guest memory */
	/*
	 * Read after the task ran again: a to-idle sample of an idle period
	 * rebuilt without its start (replay.h), whose stack is where the
	 * task blocked next, not where it blocked then.
	 */
	IVM_STACK_LATER		= 1 << 7,
};

/*
 * What a frame's pc is (a byte per frame, in kernel_flags and user_flags):
 * without IVM_PC_EXACT a return address, whose call is the instruction
 * before it (symbolize pc - 1); with it an interrupted pc taken from a
 * register set (the leaf of a running task, the frame after an interrupt,
 * exception or signal entry), symbolized at pc itself.
 */
enum {
	IVM_PC_EXACT	= 1 << 0,
	IVM_PC_INEXACT	= 1 << 1,  /* found by the frame-pointer fallback */
};

/*
 * A user pc in a known object (profile/uobjects.h) is recorded as that
 * object's number in bits 48-63 and its link-time address below: user
 * addresses never set those bits, so an untagged pc is the run-time
 * address itself.
 */
#define IVM_UPC_TAG_SHIFT	48
#define IVM_UPC(id, vaddr)	((uint64_t)(id) << IVM_UPC_TAG_SHIFT | \
				 ((uint64_t)(vaddr) & \
				  ((UINT64_C(1) << IVM_UPC_TAG_SHIFT) - 1)))
#define IVM_UPC_ID(pc)		((uint32_t)((uint64_t)(pc) >> IVM_UPC_TAG_SHIFT))
#define IVM_UPC_VADDR(pc)	((uint64_t)(pc) & \
				 ((UINT64_C(1) << IVM_UPC_TAG_SHIFT) - 1))

/* Caps enforced by the writer and by the reader (hostile files). */
#define IVM_SAMPLE_MAX_FRAMES	256	/* per part (kernel, user) */
#define IVM_SAMPLE_MAX_LABELS	16
#define IVM_SAMPLE_MAX_COUNTERS	16
#define IVM_SAMPLE_MAX_STRING	255	/* label key or value, bytes */
#define IVM_COMM_LEN		16	/* TASK_COMM_LEN, NUL included */

struct ivm_label {
	const char *key;
	const char *value;
};

struct ivm_counter {
	uint32_t id;
	uint64_t value;
};

/*
 * A sample.  Pointers are borrowed: the producer owns the arrays for as long
 * as it needs them, the profile writer copies what it writes, and a sample
 * returned by the profile reader points into the reader's buffers and is
 * valid until the next record is read.  comm is always NUL-terminated.
 */
struct ivm_sample {
	uint64_t time_ns;	/* CLOCK_MONOTONIC on the host */
	uint32_t vcpu;
	enum ivm_sample_kind kind;
	uint32_t stack_flags;	/* IVM_STACK_* */
	uint32_t pid;		/* guest tgid */
	uint32_t tid;		/* guest pid of the thread */
	char comm[IVM_COMM_LEN];
	uint16_t nr_kernel;
	uint16_t nr_user;
	uint16_t nr_labels;
	uint16_t nr_counters;
	const uint64_t *kernel_pcs;	/* leaf first */
	const uint64_t *user_pcs;	/* leaf first */
	/* IVM_PC_* per frame, or NULL: every frame a return address. */
	const uint8_t *kernel_flags;
	const uint8_t *user_flags;
	const struct ivm_label *labels;
	const struct ivm_counter *counters;
};

/* "to_idle", "from_idle", "on_cpu", "switch"; "?" for anything else. */
const char *ivm_sample_kind_name(enum ivm_sample_kind kind);

#endif /* IVM_SAMPLE_H */
