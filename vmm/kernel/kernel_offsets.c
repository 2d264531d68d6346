// SPDX-License-Identifier: MIT
/*
 * Offsets of kernel struct members by path (btf.h), checked against the
 * size a reader needs, and struct ivm_kernel_offsets: every one a later
 * stage needs, gathered once from the guest kernel's BTF.
 */
#include <string.h>

#include "kernel/btf.h"

static struct ivm_error *offset_get(const struct ivm_btf *btf,
				    const char *type_name, const char *path,
				    uint32_t *ret_off, uint32_t *ret_size)
{
	struct ivm_btf_member m;
	struct ivm_error *err;

	err = ivm_btf_member_find(btf, type_name, path, &m);
	if (err)
		return err;
	/* Kernel structs are far below 4 GiB; anything else is corrupt. */
	if (m.offset >= IVM_KOFF_NONE || m.size >= IVM_KOFF_NONE ||
	    m.offset + m.size >= IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s.%s: implausible offset %llu size %llu",
					type_name, path,
					(unsigned long long)m.offset,
					(unsigned long long)m.size);
	*ret_off = (uint32_t)m.offset;
	if (ret_size)
		*ret_size = (uint32_t)m.size;
	return NULL;
}

/* The member must have the size idlevm reads it with. */
static struct ivm_error *size_check(const char *type_name, const char *path,
				    uint32_t size, uint32_t want)
{
	if (size == want)
		return NULL;
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"%s.%s: size %u, expected %u", type_name, path,
				size, want);
}

struct ivm_error *ivm_btf_offset(const struct ivm_btf *btf,
				 const char *type_name, const char *path,
				 uint32_t want, uint32_t *ret_off,
				 uint32_t *ret_size)
{
	uint32_t size;
	struct ivm_error *err = offset_get(btf, type_name, path, ret_off,
					   &size);

	if (!err && want)
		err = size_check(type_name, path, size, want);
	if (!err && ret_size)
		*ret_size = size;
	return err;
}

struct ivm_error *ivm_btf_offset_opt(const struct ivm_btf *btf,
				     const char *type_name, const char *path,
				     uint32_t want, uint32_t *ret_off,
				     uint32_t *ret_size)
{
	struct ivm_error *err = ivm_btf_offset(btf, type_name, path, want,
					       ret_off, ret_size);

	if (err && err->code == IVM_ERROR_NOT_FOUND) {
		ivm_error_destroy(err);
		*ret_off = IVM_KOFF_NONE;
		if (ret_size)
			*ret_size = 0;
		return NULL;
	}
	return err;
}

struct ivm_error *ivm_btf_offsets_find(const struct ivm_btf *btf,
				       const struct ivm_btf_field_spec *spec,
				       size_t n, void *out)
{
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t *field = (uint32_t *)((char *)out + spec[i].field);

		err = spec[i].optional ?
		      ivm_btf_offset_opt(btf, spec[i].type, spec[i].path,
					 spec[i].want, field, NULL) :
		      ivm_btf_offset(btf, spec[i].type, spec[i].path,
				     spec[i].want, field, NULL);
		if (err)
			return err;
	}
	return NULL;
}

/*
 * A required member of the given size: its absence is an error naming it.
 * Sizes are those of the C types (pid_t, unsigned long, pointers,
 * list_head) on x86-64, which no kernel version changed.
 */
#define REQ(type, path, field, want)                                          \
	do {                                                                  \
		err = ivm_btf_offset(btf, type, path, want, &o.field, NULL);  \
		if (err)                                                      \
			return err;                                           \
	} while (0)

/* An optional member: IVM_KOFF_NONE when absent, other errors fail. */
#define OPT(type, path, field, want)                                          \
	do {                                                                  \
		err = ivm_btf_offset_opt(btf, type, path, want, &o.field,     \
					 NULL);                               \
		if (err)                                                      \
			return err;                                           \
	} while (0)

struct ivm_error *ivm_btf_struct_size(const struct ivm_btf *btf,
				      const char *name, uint32_t *ret)
{
	struct ivm_error *err;
	uint64_t size;

	err = ivm_btf_type_size(btf, name, &size);
	if (err)
		return err;
	if (size == 0 || size >= IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct %s: implausible size %llu",
					name, (unsigned long long)size);
	*ret = (uint32_t)size;
	return NULL;
}

struct ivm_error *ivm_kernel_offsets_from_btf(const struct ivm_btf *btf,
					      struct ivm_kernel_offsets *ret)
{
	struct ivm_kernel_offsets o;
	struct ivm_error *err;
	uint32_t cpu_size = 0;

	memset(&o, 0, sizeof(o));
	err = ivm_btf_struct_size(btf, "task_struct", &o.task_struct_size);
	if (err)
		return err;
	REQ("task_struct", "tasks", task_tasks, 16);
	REQ("task_struct", "pid", task_pid, 4);
	REQ("task_struct", "tgid", task_tgid, 4);
	err = offset_get(btf, "task_struct", "comm", &o.task_comm,
			 &o.task_comm_size);
	if (err)
		return err;
	if (o.task_comm_size == 0 || o.task_comm_size > 256)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task_struct.comm: implausible size %u",
					o.task_comm_size);
	/* 5.14 renamed the long "state" to the unsigned int "__state". */
	err = ivm_btf_offset_opt(btf, "task_struct", "__state", 0,
				 &o.task_state, &o.task_state_size);
	if (!err && o.task_state == IVM_KOFF_NONE)
		err = offset_get(btf, "task_struct", "state", &o.task_state,
				 &o.task_state_size);
	if (err)
		return err;
	if (o.task_state_size != 4 && o.task_state_size != 8)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task_struct state: unexpected size %u",
					o.task_state_size);
	REQ("task_struct", "flags", task_flags, 4);
	/*
	 * With CONFIG_THREAD_INFO_IN_TASK (x86-64 since 4.9) the CPU was a
	 * member of task_struct until 5.15; 5.16 moved it back into
	 * thread_info (the first member of task_struct).
	 */
	err = ivm_btf_offset_opt(btf, "task_struct", "cpu", 0, &o.task_cpu,
				 &cpu_size);
	if (!err && o.task_cpu == IVM_KOFF_NONE)
		err = offset_get(btf, "task_struct", "thread_info.cpu",
				 &o.task_cpu, &cpu_size);
	if (!err)
		err = size_check("task_struct", "cpu", cpu_size, 4);
	if (err)
		return err;
	/*
	 * on_cpu is 1 from the moment a task is picked until the next task
	 * has finished switching in (finish_task), so it covers the window
	 * where nvcsw has been bumped but thread.sp not yet saved.
	 */
	OPT("task_struct", "on_cpu", task_on_cpu, 4);
	REQ("task_struct", "stack", task_stack, 8);
	REQ("task_struct", "mm", task_mm, 8);
	OPT("task_struct", "active_mm", task_active_mm, 8);
	REQ("task_struct", "nvcsw", task_nvcsw, 8);
	REQ("task_struct", "nivcsw", task_nivcsw, 8);
	REQ("task_struct", "signal", task_signal, 8);
	OPT("task_struct", "thread_node", task_thread_node, 16);
	OPT("task_struct", "thread_group", task_thread_group, 16);
	REQ("task_struct", "thread.sp", task_thread_sp, 8);
	OPT("task_struct", "thread.fsbase", task_thread_fsbase, 8);
	REQ("mm_struct", "pgd", mm_pgd, 8);
	OPT("signal_struct", "thread_head", signal_thread_head, 16);
	if (o.task_thread_node == IVM_KOFF_NONE ||
	    o.signal_thread_head == IVM_KOFF_NONE) {
		o.task_thread_node = IVM_KOFF_NONE;
		o.signal_thread_head = IVM_KOFF_NONE;
		if (o.task_thread_group == IVM_KOFF_NONE)
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"task_struct: neither thread_node with signal_struct.thread_head nor thread_group found");
	}
	REQ("list_head", "next", list_head_next, 8);
	err = ivm_btf_struct_size(btf, "pt_regs", &o.pt_regs_size);
	if (err)
		return err;
	REQ("pt_regs", "ip", pt_regs_ip, 8);
	REQ("pt_regs", "sp", pt_regs_sp, 8);
	REQ("pt_regs", "bp", pt_regs_bp, 8);
	/*
	 * cs and ss are 8-byte slots, but since FRED (6.9) the member is a
	 * u16 in a union with the full slot: read the low 16 bits only.
	 */
	err = offset_get(btf, "pt_regs", "cs", &o.pt_regs_cs, NULL);
	if (err)
		return err;
	REQ("pt_regs", "flags", pt_regs_flags, 8);
	err = offset_get(btf, "pt_regs", "ss", &o.pt_regs_ss, NULL);
	if (err)
		return err;
	REQ("pt_regs", "orig_ax", pt_regs_orig_ax, 8);
	err = ivm_btf_struct_size(btf, "inactive_task_frame",
			  &o.inactive_task_frame_size);
	if (err && err->code == IVM_ERROR_NOT_FOUND) {
		ivm_error_destroy(err);
		err = NULL;
		o.inactive_task_frame_size = IVM_KOFF_NONE;
		o.inactive_task_frame_bp = IVM_KOFF_NONE;
		o.inactive_task_frame_ret_addr = IVM_KOFF_NONE;
	} else if (err) {
		return err;
	} else {
		REQ("inactive_task_frame", "bp", inactive_task_frame_bp, 8);
		REQ("inactive_task_frame", "ret_addr",
		    inactive_task_frame_ret_addr, 8);
	}
	/* offset_opt also treats a missing struct as an absent member. */
	OPT("pcpu_hot", "current_task", pcpu_hot_current_task, 8);
	OPT("rq", "idle", rq_idle, 8);
	OPT("rq", "nr_switches", rq_nr_switches, 8);
	OPT("rq", "curr", rq_curr, 8);
	OPT("task_struct", "se.exec_start", task_se_exec_start, 8);
	OPT("task_struct", "se.nr_migrations", task_se_nr_migrations, 8);
	OPT("task_struct", "sched_info.last_arrival",
	    task_sched_info_last_arrival, 8);
	OPT("task_struct", "sched_info.pcount", task_sched_info_pcount, 8);
	OPT("rq", "clock", rq_clock, 8);
	OPT("rq", "idle_stamp", rq_idle_stamp, 8);
	OPT("rq", "rq_sched_info.pcount", rq_sched_info_pcount, 8);
	*ret = o;
	return NULL;
}

bool ivm_kernel_fields_span(const struct ivm_kernel_field *f, size_t n,
			    uint32_t *lo, uint32_t *hi)
{
	size_t i;

	*lo = UINT32_MAX;
	*hi = 0;
	for (i = 0; i < n; i++) {
		if (f[i].off == IVM_KOFF_NONE)
			continue;
		if (f[i].off < *lo)
			*lo = f[i].off;
		if (f[i].off + f[i].size > *hi)
			*hi = f[i].off + f[i].size;
	}
	return *hi != 0;
}
