/* SPDX-License-Identifier: MIT */
/*
 * BTF: the guest kernel's own type information, for struct layouts.
 *
 * Loaded with libbpf from a vmlinux ELF (.BTF section), a raw BTF file such
 * as /sys/kernel/btf/vmlinux, or a blob read from guest memory.  Answers
 * "offset and size of member path X in struct S", walking through anonymous
 * structs/unions and named sub-structs ("thread.sp"), the size of a struct
 * and the value of an enumerator.  No offset is ever hard-coded: everything
 * a later stage needs is gathered once into struct ivm_kernel_offsets.
 *
 * Hostile input: a blob from guest memory is capped at IVM_BTF_MAX_SIZE
 * before libbpf sees it; libbpf checks the header and the type records; on
 * top of that every type id is looked up with bounds checks, every walk
 * (typedef chains, anonymous nesting, array sizes) is bounded and
 * overflow-checked, so a malformed blob gives an error, never a crash or an
 * endless loop.
 */
#ifndef IVM_BTF_H
#define IVM_BTF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct ivm_btf;

/* Largest BTF blob accepted from guest memory (a 6.x vmlinux has ~6 MiB). */
#define IVM_BTF_MAX_SIZE (64u << 20)

/*
 * Load BTF from path: an ELF file with a .BTF section (vmlinux) or a raw
 * BTF file (/sys/kernel/btf/vmlinux).  An ELF file without .BTF falls back
 * to ivm_btf_load_dwarf().  The caller owns *ret.
 */
struct ivm_error *ivm_btf_load_file(const char *path, struct ivm_btf **ret);

/*
 * Build BTF for the structs idlevm needs (task_struct, mm_struct,
 * signal_struct, list_head, pt_regs, inactive_task_frame, pcpu_hot, rq)
 * from the DWARF of an ELF file, for a vmlinux built without BTF.  Slower
 * than BTF (it scans every compilation unit when an optional struct is
 * missing).  The caller owns *ret.
 */
struct ivm_error *ivm_btf_load_dwarf(const char *path, struct ivm_btf **ret);

/*
 * Load BTF from a raw blob (e.g. the .BTF section read out of guest memory).
 * data is copied; size must be at most IVM_BTF_MAX_SIZE.  The caller owns
 * *ret.
 */
struct ivm_error *ivm_btf_load_blob(const void *data, size_t size,
				    struct ivm_btf **ret);

void ivm_btf_destroy(struct ivm_btf *btf);

/* Where a member lives inside its outermost struct. */
struct ivm_btf_member {
	uint64_t offset;	/* bytes from the start of the outer struct */
	uint64_t size;		/* bytes (sizeof the member's type) */
	uint32_t type_id;	/* BTF id of the member's type (unresolved) */
};

/*
 * Find member path (dot-separated, e.g. "thread.sp", "cpu", "pid") in the
 * struct or union named type_name.  Members of anonymous structs/unions are
 * found as if they were direct members (as in C).  Fails with
 * IVM_ERROR_NOT_FOUND naming the missing component when a name does not
 * exist, and IVM_ERROR_INVALID for a bitfield (no byte offset) or a
 * component that is not a struct/union.
 */
struct ivm_error *ivm_btf_member_find(const struct ivm_btf *btf,
				      const char *type_name, const char *path,
				      struct ivm_btf_member *ret);

/* sizeof(struct/union type_name). */
struct ivm_error *ivm_btf_type_size(const struct ivm_btf *btf,
				    const char *type_name, uint64_t *ret);

/*
 * Value of enumerator name.  enum_name restricts the search to the enum of
 * that name; NULL searches every enum (first match wins).
 */
struct ivm_error *ivm_btf_enum_value(const struct ivm_btf *btf,
				     const char *enum_name, const char *name,
				     int64_t *ret);

/* Sentinel of an optional member the kernel does not have. */
#define IVM_KOFF_NONE UINT32_MAX

/*
 * Offset of member path of type_name as a reader of want bytes of it
 * (0: any size) needs it: offset and size below IVM_KOFF_NONE
 * (IVM_ERROR_PROTOCOL otherwise, or for another size), errors of
 * ivm_btf_member_find() else.  *ret_size (may be NULL) gets its size.
 */
struct ivm_error *ivm_btf_offset(const struct ivm_btf *btf,
				 const char *type_name, const char *path,
				 uint32_t want, uint32_t *ret_off,
				 uint32_t *ret_size);

/*
 * The same for an optional member: *ret_off = IVM_KOFF_NONE (and size 0)
 * with no error when it, or its struct, is absent.
 */
struct ivm_error *ivm_btf_offset_opt(const struct ivm_btf *btf,
				     const char *type_name, const char *path,
				     uint32_t want, uint32_t *ret_off,
				     uint32_t *ret_size);

/*
 * Many members at once: for each spec, the uint32_t at byte field of out
 * gets the offset of spec->path in struct spec->type (ivm_btf_offset with
 * spec->want), or IVM_KOFF_NONE when an optional one is absent.  Fails
 * at the first required member missing, naming it.
 */
struct ivm_btf_field_spec {
	const char *type, *path;
	uint32_t want;		/* bytes read of it; 0: any size */
	size_t field;		/* offsetof() the uint32_t in out */
	bool optional;
};

struct ivm_error *ivm_btf_offsets_find(const struct ivm_btf *btf,
				       const struct ivm_btf_field_spec *spec,
				       size_t n, void *out);

/* sizeof(struct name), checked to be non-zero and below IVM_KOFF_NONE. */
struct ivm_error *ivm_btf_struct_size(const struct ivm_btf *btf,
				      const char *name, uint32_t *ret);

/*
 * Everything later stages (dispatch monitor, capture, unwinder) need about
 * the guest kernel's structures, found once.  Offsets are in bytes from the
 * start of the named struct; members marked optional are IVM_KOFF_NONE when
 * the kernel lacks them.
 */
struct ivm_kernel_offsets {
	uint32_t task_struct_size;
	/* struct task_struct */
	uint32_t task_tasks;		/* list_head of the process list */
	uint32_t task_pid;
	uint32_t task_tgid;
	uint32_t task_comm;
	uint32_t task_comm_size;	/* TASK_COMM_LEN */
	uint32_t task_state;		/* __state (6.x) or state (older) */
	uint32_t task_state_size;	/* 4 for __state, 8 for long state */
	uint32_t task_flags;		/* PF_* */
	uint32_t task_cpu;		/* thread_info.cpu (5.16+) or cpu */
	uint32_t task_on_cpu;		/* optional (CONFIG_SMP) */
	uint32_t task_stack;
	uint32_t task_mm;
	uint32_t task_active_mm;	/* optional */
	uint32_t task_nvcsw;
	uint32_t task_nivcsw;
	uint32_t task_signal;
	uint32_t task_thread_node;	/* optional: with signal_thread_head */
	uint32_t task_thread_group;	/* optional: removed in 6.7 */
	uint32_t task_thread_sp;	/* thread.sp: inactive_task_frame */
	uint32_t task_thread_fsbase;	/* optional */
	/* struct mm_struct */
	uint32_t mm_pgd;
	/* struct signal_struct */
	uint32_t signal_thread_head;	/* optional: with task_thread_node */
	/* struct list_head */
	uint32_t list_head_next;
	/* struct pt_regs */
	uint32_t pt_regs_size;
	uint32_t pt_regs_ip, pt_regs_sp, pt_regs_bp;
	uint32_t pt_regs_cs;		/* read 2 bytes: u16 since FRED (6.9) */
	uint32_t pt_regs_flags, pt_regs_orig_ax;
	uint32_t pt_regs_ss;		/* read 2 bytes, like cs */
	/* struct inactive_task_frame (what thread.sp points to); optional */
	uint32_t inactive_task_frame_size;
	uint32_t inactive_task_frame_bp;
	uint32_t inactive_task_frame_ret_addr;
	/*
	 * struct pcpu_hot (6.2..6.14): when current_task is not a per-CPU
	 * variable of its own, it is this member of the pcpu_hot per-CPU
	 * variable.  Optional.
	 */
	uint32_t pcpu_hot_current_task;
	/* struct rq: idle task of a runqueue (optional, fallback) */
	uint32_t rq_idle;
	uint32_t rq_nr_switches;	/* optional: context switches on the CPU */
	/*
	 * optional: the task the CPU's scheduler switched to, set with
	 * nr_switches and before the switch itself (`current` after it).
	 */
	uint32_t rq_curr;
	/* optional: sched_entity.exec_start, stamped when a task stops */
	uint32_t task_se_exec_start;
	/* optional: sched_entity.nr_migrations, raised as a task changes CPU */
	uint32_t task_se_nr_migrations;
	/* optional (CONFIG_SCHED_INFO): rq clock when last switched in */
	uint32_t task_sched_info_last_arrival;
	/* optional (CONFIG_SCHED_INFO): how many times switched in */
	uint32_t task_sched_info_pcount;
	/* optional: the run queue's clock, what last_arrival is stamped with */
	uint32_t rq_clock;
	/*
	 * optional (SMP): the run queue's clock when its CPU last went idle
	 * (set as it picks no task; 0 once a task is woken onto it).
	 */
	uint32_t rq_idle_stamp;
	/*
	 * optional (CONFIG_SCHEDSTATS): the run queue's count of switch-ins,
	 * raised with each arriving task's sched_info.pcount.
	 */
	uint32_t rq_sched_info_pcount;
};

/*
 * Fill *ret from btf.  Fails with IVM_ERROR_NOT_FOUND naming the first
 * required member that is missing ("task_struct.pid not found").
 */
struct ivm_error *ivm_kernel_offsets_from_btf(const struct ivm_btf *btf,
					      struct ivm_kernel_offsets *ret);

/* One member as read: its offset (IVM_KOFF_NONE: absent) and size. */
struct ivm_kernel_field {
	uint32_t off, size;
};

/*
 * The bytes [*lo, *hi) that cover every present field of f[0..n), for
 * reading them all at once; *lo = UINT32_MAX, *hi = 0 and false when none
 * is present.  Offsets from ivm_kernel_offsets_from_btf keep off + size
 * below IVM_KOFF_NONE, so nothing wraps.
 */
bool ivm_kernel_fields_span(const struct ivm_kernel_field *f, size_t n,
			    uint32_t *lo, uint32_t *hi);

#endif /* IVM_BTF_H */
