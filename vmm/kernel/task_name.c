// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/kernel_layout.h"
#include "kernel/task_name.h"

void ivm_task_name_offsets_from_btf(const struct ivm_btf *btf,
				    struct ivm_task_name_offsets *ret)
{
	struct ivm_error *err;

	memset(ret, 0xff, sizeof(*ret));	/* every one IVM_KOFF_NONE */
	err = ivm_btf_offset_opt(btf, "task_struct", "worker_private", 8,
				 &ret->task_kthread, NULL);
	if (!err && ret->task_kthread == IVM_KOFF_NONE)
		err = ivm_btf_offset_opt(btf, "task_struct", "set_child_tid",
					 8, &ret->task_kthread, NULL);
	if (!err)
		err = ivm_btf_offset_opt(btf, "kthread", "full_name", 8,
					 &ret->kthread_full_name, NULL);
	if (!err)
		err = ivm_btf_offset_opt(btf, "kthread", "data", 8,
					 &ret->kthread_data, NULL);
	if (!err)
		err = ivm_btf_offset_opt(btf, "worker", "desc", 0,
					 &ret->worker_desc,
					 &ret->worker_desc_size);
	if (!err)
		err = ivm_btf_offset_opt(btf, "worker", "current_work", 8,
					 &ret->worker_current_work, NULL);
	if (!err)
		err = ivm_btf_offset_opt(btf, "worker", "pool", 8,
					 &ret->worker_pool, NULL);
	/* A malformed member is as good as none. */
	if (err)
		memset(ret, 0xff, sizeof(*ret));
	ivm_error_destroy(err);
}

static bool read_ptr(const struct ivm_kmem_reader *kmem, int la57,
		     uint64_t va, uint64_t *ret)
{
	struct ivm_error *err;
	uint8_t p[8];

	err = ivm_kmem_read_kernel(kmem, la57, va, p, 8);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	*ret = ivm_le64(p);
	return ivm_kmem_is_kernel_address(*ret, la57);
}

/* A NUL-terminated string of at most size - 1 bytes at va into buf. */
static bool read_string(const struct ivm_kmem_reader *kmem, int la57,
			uint64_t va, char *buf, size_t size)
{
	struct ivm_error *err;
	size_t got;

	if (!ivm_kmem_is_kernel_address(va, la57))
		return false;
	err = ivm_kmem_read_upto(kmem, va, buf, size - 1, &got);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	buf[got] = '\0';
	return true;
}

char *ivm_task_name(const struct ivm_kmem_reader *kmem, int la57,
		    const struct ivm_task_name_offsets *off, uint64_t task,
		    const char *comm, uint32_t flags, char *buf, size_t size)
{
	char desc[IVM_TASK_NAME_MAX], full[IVM_TASK_NAME_MAX];
	uint64_t kthread, p, work;
	size_t n;

	if (size > IVM_TASK_NAME_MAX)
		size = IVM_TASK_NAME_MAX;
	snprintf(buf, size, "%s", comm);
	if (!(flags & IVM_GUEST_PF_KTHREAD) ||
	    off->task_kthread == IVM_KOFF_NONE ||
	    !read_ptr(kmem, la57, task + off->task_kthread, &kthread))
		return buf;
	if (flags & IVM_GUEST_PF_WQ_WORKER) {
		/* Its comm, then what it last worked for. */
		if (off->kthread_data == IVM_KOFF_NONE ||
		    off->worker_desc == IVM_KOFF_NONE ||
		    off->worker_current_work == IVM_KOFF_NONE ||
		    off->worker_pool == IVM_KOFF_NONE ||
		    !read_ptr(kmem, la57, kthread + off->kthread_data, &p) ||
		    !read_ptr(kmem, la57, p + off->worker_pool, &work))
			return buf;
		n = off->worker_desc_size < sizeof(desc) - 1 ?
		    off->worker_desc_size : sizeof(desc) - 1;
		if (n < 1 || !read_string(kmem, la57, p + off->worker_desc,
					  desc, n + 1))
			return buf;
		if (!desc[0])
			return buf;
		work = 0;
		if (!read_ptr(kmem, la57, p + off->worker_current_work,
			      &work))
			work = 0;
		n = strlen(buf);
		snprintf(buf + n, size - n, "%c%s", work ? '+' : '-', desc);
		return buf;
	}
	if (off->kthread_full_name != IVM_KOFF_NONE &&
	    read_ptr(kmem, la57, kthread + off->kthread_full_name, &p) &&
	    read_string(kmem, la57, p, full, sizeof(full)) && full[0])
		snprintf(buf, size, "%s", full);
	return buf;
}
