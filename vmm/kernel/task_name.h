/* SPDX-License-Identifier: MIT */
/*
 * task_name: a task's name as the guest's /proc/PID/comm and ps show it,
 * which for kernel threads is more than task_struct.comm's 15 bytes:
 *  - a kernel thread made with a longer name keeps it whole in its
 *    struct kthread (full_name, Linux 5.17 and later): "rcu_tasks_kthread"
 *    where comm holds "rcu_tasks_kthre";
 *  - a workqueue worker (PF_WQ_WORKER) in a pool shows its comm, then '-'
 *    and what it last worked for (struct worker's desc:
 *    "kworker/0:1-events"), '+' instead of '-' while it works on it; a
 *    rescuer outside any pool, its comm.
 * The kernel's /proc caps the whole at 63 bytes; so does this.  struct
 * kthread is found as the kernel's to_kthread() finds it
 * (task_struct.worker_private, or set_child_tid before 5.17), the worker
 * as kthread_data() does (kthread->data).
 *
 * Hostile guest: every pointer is checked to be a kernel address, the
 * strings are read with a cap, and whatever cannot be read leaves the
 * plain comm.
 */
#ifndef IVM_TASK_NAME_H
#define IVM_TASK_NAME_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"
#include "kernel/btf.h"
#include "kernel/kernel_layout.h"

#define IVM_TASK_NAME_MAX 64	/* the kernel's tcomm[64], NUL included */

/* PF_WQ_WORKER, PF_KTHREAD of include/linux/sched.h. */
#define IVM_GUEST_PF_WQ_WORKER 0x00000020u

/* Offsets, from BTF; IVM_KOFF_NONE for what the kernel lacks. */
struct ivm_task_name_offsets {
	uint32_t task_kthread;		/* worker_private or set_child_tid */
	uint32_t kthread_full_name;	/* char * */
	uint32_t kthread_data;		/* void *: the worker */
	uint32_t worker_desc, worker_desc_size, worker_current_work;
	uint32_t worker_pool;
};

/* Never fails: a kernel without some of them gives plainer names. */
void ivm_task_name_offsets_from_btf(const struct ivm_btf *btf,
				    struct ivm_task_name_offsets *ret);

/*
 * The name of the task at task (its comm and PF_* flags already read)
 * into buf (size > 0, at most IVM_TASK_NAME_MAX used).  Returns buf.
 */
char *ivm_task_name(const struct ivm_kmem_reader *kmem, int la57,
		    const struct ivm_task_name_offsets *off, uint64_t task,
		    const char *comm, uint32_t flags, char *buf, size_t size);

#endif /* IVM_TASK_NAME_H */
