/* SPDX-License-Identifier: MIT */
/*
 * capture: read one guest task's call stack, consistent or discarded.
 *
 * A target is read in three steps: its task_struct (switch counts, state,
 * stack, saved switch frame), then its kernel stack by ORC and its user
 * stack (by DWARF CFI when the host has its executable, else by frame
 * pointers) from the user registers the kernel stack ends with, then its
 * task_struct again.  If the task ran in between (a switch
 * count moved, or it was on a CPU at either read), what was read may mix
 * two stacks: the sample is discarded and counted, never kept.  A task
 * runnable but not on a CPU (woken, still waiting) has not run and is
 * kept; only a kernel without task_struct.on_cpu makes runnable a reason
 * to discard.  That is
 * the "optimistic" capture; the helper's pinning (the method's key step)
 * and QMP stop/cont wrap the same read to make discards rare or impossible.
 *
 * A target current on a vCPU is read from that vCPU's registers instead;
 * its stack moves while it runs, so such a sample is consistent only when
 * the vCPU was stopped (capture mode "stop") and is otherwise kept marked
 * IVM_STACK_INEXACT when its switch counts held.
 */
#ifndef IVM_CAPTURE_H
#define IVM_CAPTURE_H

#include <stdint.h>

#include "kernel/guest.h"
#include "kernel/orc.h"
#include "profile/sample.h"
#include "profile/labels.h"
#include "profile/proc_info.h"
#include "profile/uobjects.h"
#include "unwind/unwind.h"
#include "unwind/uunwind_exe.h"

enum ivm_capture_outcome {
	IVM_CAPTURE_KEPT,
	IVM_CAPTURE_DISCARDED_RAN,	/* the target ran during the read */
	/* on a CPU (or, without on_cpu, runnable): no stable stack */
	IVM_CAPTURE_DISCARDED_RUNNABLE,
	IVM_CAPTURE_FAILED,		/* its task_struct was unreadable */
	IVM_CAPTURE_NR_OUTCOMES,
};

const char *ivm_capture_outcome_name(enum ivm_capture_outcome outcome);

struct ivm_capture_engine;

/*
 * Prepare captures on guest (borrowed; must outlive the engine): loads the
 * ORC tables of its vmlinux and resolves what every unwind needs.
 */
struct ivm_error *ivm_capture_engine_create(struct ivm_guest *guest,
					    struct ivm_capture_engine **ret);
void ivm_capture_engine_destroy(struct ivm_capture_engine *engine);

/*
 * Use the host copy of a guest executable at path for DWARF CFI unwinding
 * of the processes that run it; other processes keep frame pointers.  A
 * process's executable is found from its ELF auxiliary vector and memory
 * (build-id and load bias, uunwind_exe.h), so a PIE works as well as a
 * fixed-address executable.
 */
struct ivm_error *ivm_capture_engine_add_binary(struct ivm_capture_engine *engine,
						const char *path);

/*
 * Also look for each process's executable by its build-id in the symbol
 * directory dir (dir/.build-id/xx/rest, else rest.debug when that has CFI).
 * Files are opened on first use and kept (a bounded number); a build-id
 * without a usable file is remembered as such.  NULL turns it off.
 * IVM_ERROR_OS or IVM_ERROR_INVALID when dir is not a directory.
 */
struct ivm_error *ivm_capture_engine_set_symdir(struct ivm_capture_engine *engine,
						const char *dir);

/*
 * Read the labels specs (n <= IVM_LABELS_MAX, copied) at every capture of
 * a user task (profile/labels.h).
 */
struct ivm_error *ivm_capture_engine_set_labels(struct ivm_capture_engine *engine,
						const struct ivm_label_spec *specs,
						size_t n);

/* The label reader, or NULL when none was set: for its counts. */
struct ivm_labels *ivm_capture_engine_labels(struct ivm_capture_engine *engine);

/*
 * The user objects the engine's captures met (uobjects.h): their numbers
 * tag the samples' user pcs, and the profile writes what the table says
 * about them.  Owned by the engine.
 */
struct ivm_uobjects *ivm_capture_engine_objects(struct ivm_capture_engine *e);

/*
 * How the user stacks of the engine's captures ended: a guest's process
 * controls its registers, stack and CFI, so a stack cut short is counted
 * by why, as the profile's user_stack_* counts.  Each unwind that ran is
 * in unwinds and in at most one reason (the first of fault, cap, loop,
 * bad_cfi, no_cfi its flags hold; none: a whole stack).  errors are
 * unwinds that returned an error (no user frames kept), no_reader those
 * whose address space could not be read at all (a task without page
 * tables, or a garbage cr3): neither is in unwinds.
 */
struct ivm_capture_user_stats {
	uint64_t unwinds;
	uint64_t fault;		/* unreadable stack or CFI (unmapped sp...) */
	uint64_t cap;		/* frame cap reached (deep recursion) */
	uint64_t loop;		/* the stack pointer did not move up */
	uint64_t bad_cfi;	/* CFI refused: cyclic, oversized, unknown */
	uint64_t no_cfi;	/* CFI the guest did not hold */
	uint64_t errors;
	uint64_t no_reader;
};

const struct ivm_capture_user_stats *
ivm_capture_engine_user_stats(const struct ivm_capture_engine *e);

/*
 * The mappings of the address spaces captures met: each holds its VMAs
 * (their paths included) and code maps from its first user unwind on, so
 * that unwinds through it read nothing twice.  Processes come and go (a
 * shell's children, a load generator's rounds, php-fpm's respawned
 * workers); kept until their slot was taken, the mappings of gone ones
 * filled all 256 slots over an hour or two (+3 MiB in the 2-hour soak).
 * So they are kept while used: a call at least IVM_CAPTURE_MAPS_IDLE_NS
 * after the last forgets those of the address spaces no capture used
 * meanwhile (read again if one does later); calls in between do nothing.
 */
#define IVM_CAPTURE_MAPS_IDLE_NS (60 * 1000000000ull)
void ivm_capture_engine_age_maps(struct ivm_capture_engine *e, uint64_t now);

struct ivm_capture_maps_stats {
	size_t spaces;		/* address spaces holding their mappings */
	size_t bytes;		/* what those hold */
	uint64_t dropped;	/* mappings forgotten unused, so far */
};

void ivm_capture_engine_maps_stats(const struct ivm_capture_engine *e,
				   struct ivm_capture_maps_stats *ret);

/*
 * A range of a guest file that unwinding needed and guest memory did not
 * hold: the CFI (.eh_frame_hdr to the end of its segment, which holds
 * .eh_frame) of an object some of whose rows faulted.  Read by the
 * guest (the helper's READAHEAD), it is in the page cache for the next
 * captures.  path is as process pid sees it; inode its number.
 */
struct ivm_capture_readahead {
	int pid;
	char *path;		/* owned by whoever took it: free() */
	uint64_t inode, offset, length;
};

/*
 * Take the next range captures wanted read (each object once a run),
 * into *ret: false when none is waiting.  At most
 * IVM_CAPTURE_MAX_READAHEADS wait; the rest are asked again later.
 */
#define IVM_CAPTURE_MAX_READAHEADS 16
/* The longest range asked (a library's CFI is a few hundred KiB). */
#define IVM_CAPTURE_READAHEAD_MAX (8u << 20)
bool ivm_capture_engine_take_readahead(struct ivm_capture_engine *e,
				       struct ivm_capture_readahead *ret);

/*
 * Labels of profiles written before user pcs were tagged by object: a
 * report still reads them (the executable's build-id, and a PIE's bias).
 */
#define IVM_LABEL_USER_BUILD_ID "user_build_id"
#define IVM_LABEL_USER_BIAS "user_bias"

/* The process's executable as a capture saw it. */
struct ivm_capture_exe {
	bool known;		/* identified from guest memory: id is set */
	struct ivm_uexe id;
	/*
	 * The host copy whose CFI unwound the user part, or NULL; the
	 * engine's string, valid until its next capture.
	 */
	const char *host_path;
	const char *why;	/* static: why no host copy, or NULL */
	/*
	 * Its headers came from the file's page cache, not the process's
	 * page tables (a fork child that never touched them).
	 */
	bool from_page_cache;
	/* Its CFI came from the guest's own bytes of it (no host copy). */
	bool guest_cfi;
	uint32_t object;	/* its number in the engine's objects, or 0 */
};

/* One capture's result: the sample points into this struct. */
struct ivm_capture {
	enum ivm_capture_outcome outcome;
	struct ivm_sample sample;
	struct ivm_guest_task task;
	uint64_t kernel_pcs[IVM_SAMPLE_MAX_FRAMES];
	uint64_t user_pcs[IVM_SAMPLE_MAX_FRAMES];
	uint8_t kernel_flags[IVM_SAMPLE_MAX_FRAMES];
	uint8_t user_flags[IVM_SAMPLE_MAX_FRAMES];
	/* The user pcs as run-time addresses (user_pcs may be tagged). */
	uint64_t user_addrs[IVM_SAMPLE_MAX_FRAMES];
	struct ivm_frame frames[IVM_SAMPLE_MAX_FRAMES];
	/* Set when the user part was unwound. */
	struct ivm_capture_exe exe;
	/* The --label values (sample.labels points here). */
	struct ivm_label labels[IVM_LABELS_MAX];
	/*
	 * The task's process: its name and command line as the guest's ps
	 * shows them (profile/proc_info.h); "" when unknown or none (kernel
	 * threads).
	 */
	struct ivm_proc_info process;
};

/*
 * Capture the task at task_addr.  regs, when not NULL, are the registers
 * of the vCPU the task is current on (cpl its privilege level, cpu the
 * guest CPU it runs as, -1 if unknown); NULL for a task that is not
 * running.  The sample's kind, vcpu and time are the
 * caller's to fill.  Returns an error only for caller mistakes; a hostile
 * or changing guest shows in cap->outcome and the stack flags.
 */
struct ivm_error *ivm_capture_task(struct ivm_capture_engine *engine,
				   uint64_t task_addr,
				   const struct ivm_x86_regs *regs, int cpl,
				   int cpu, struct ivm_capture *cap);

/*
 * The task cannot be switched in during the read: the guest helper pinned
 * it to a CPU its real-time holder occupies (capture_pin.h).  A runnable
 * task then still sits at its saved switch frame, even on a kernel without
 * task_struct.on_cpu, where runnable is otherwise a reason to discard; a
 * move of its switch counts still is.
 */
#define IVM_CAPTURE_F_HELD	0x1u

/*
 * The caller takes a runnable task where it is: one preempted (or woken
 * and not yet running) sits at the saved frame of its switch until it is
 * switched in, and being switched in shows in on_cpu at the second read,
 * or in its switch counts if it ran and left again.  Only for a kernel
 * with task_struct.on_cpu (the switch sampler checks); every capture does
 * the same by itself on such a kernel, so the flag only says it.
 */
#define IVM_CAPTURE_F_RUNNABLE	0x2u

/*
 * A kept stack read from live registers that ended without unwind
 * information may owe its cut to them: a running vCPU's registers read
 * from QEMU's memory under TCG, while it runs, may hold an instruction
 * pointer that lags the stack pointer (QEMU writes it back only between
 * translated blocks), and the unwind then stops at a "return address"
 * that is no code.  Its readers read such a target again.
 */
static inline bool ivm_capture_live_cut(const struct ivm_capture *cap)
{
	return cap->outcome == IVM_CAPTURE_KEPT &&
	       (cap->sample.stack_flags & IVM_STACK_TRUNC_BADINFO);
}

/* ivm_capture_task with IVM_CAPTURE_F_* flags (for a task not running). */
struct ivm_error *ivm_capture_task_flags(struct ivm_capture_engine *engine,
					 uint64_t task_addr,
					 const struct ivm_x86_regs *regs,
					 int cpl, int cpu, unsigned int flags,
					 struct ivm_capture *cap);

#endif /* IVM_CAPTURE_H */
