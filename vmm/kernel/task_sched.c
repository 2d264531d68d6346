// SPDX-License-Identifier: MIT
/* A thread's scheduler accounting in a few pieces; see task_sched.h. */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/task_sched.h"

/* The offsets found in BTF beyond struct ivm_kernel_offsets. */
struct sched_offsets {
	uint32_t sum_exec_runtime, run_delay, start_time;
};

struct field {
	uint32_t off, size;
	uint32_t *where;	/* the layout member told where it landed */
};

static int by_offset(const void *a, const void *b)
{
	const struct field *x = a, *y = b;

	return (x->off > y->off) - (x->off < y->off);
}

struct ivm_error *ivm_task_sched_layout_init(const struct ivm_btf *btf,
					     const struct ivm_kernel_offsets *koff,
					     struct ivm_task_sched_layout *ret)
{
	const struct ivm_btf_field_spec spec[] = {
		{ "task_struct", "se.sum_exec_runtime", 8,
		  offsetof(struct sched_offsets, sum_exec_runtime), false },
		{ "task_struct", "sched_info.run_delay", 8,
		  offsetof(struct sched_offsets, run_delay), true },
		{ "task_struct", "start_time", 8,
		  offsetof(struct sched_offsets, start_time), true },
	};
	struct ivm_task_sched_layout l;
	struct sched_offsets so;
	struct field f[10];
	struct ivm_error *err;
	size_t n = 0, i;
	uint32_t pos = 0;

	err = ivm_btf_offsets_find(btf, spec, sizeof(spec) / sizeof(spec[0]),
				   &so);
	if (err)
		return err;
	memset(&l, 0, sizeof(l));
	l.pid = l.tgid = l.state = l.on_cpu = l.nvcsw = l.nivcsw =
		l.run_delay = l.sum_exec_runtime = l.start_time = IVM_KOFF_NONE;
	l.state_size = koff->task_state_size;
	if (l.state_size != 4 && l.state_size != 8)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task_struct state of %u bytes",
					l.state_size);
#define ADD(o, sz, member)						\
	do {								\
		if ((o) != IVM_KOFF_NONE)				\
			f[n++] = (struct field){ (o), (sz), &l.member };	\
	} while (0)
	ADD(koff->task_pid, 4, pid);
	ADD(koff->task_tgid, 4, tgid);
	ADD(koff->task_state, l.state_size, state);
	ADD(koff->task_on_cpu, 4, on_cpu);
	ADD(koff->task_nvcsw, 8, nvcsw);
	ADD(koff->task_nivcsw, 8, nivcsw);
	ADD(so.run_delay, 8, run_delay);
	ADD(so.sum_exec_runtime, 8, sum_exec_runtime);
	ADD(so.start_time, 8, start_time);
#undef ADD
	qsort(f, n, sizeof(f[0]), by_offset);
	/* Offsets from BTF stay below IVM_KOFF_NONE with their size. */
	for (i = 0; i < n; i++) {
		struct ivm_task_sched_piece *p = l.nr_pieces ?
			&l.pieces[l.nr_pieces - 1] : NULL;
		uint32_t end = f[i].off + f[i].size;

		if (p && f[i].off < p->off + p->len + IVM_TASK_SCHED_GAP) {
			if (end > p->off + p->len)
				p->len = end - p->off;
		} else {
			if (l.nr_pieces == IVM_TASK_SCHED_MAX_PIECES)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"task_struct: scheduler fields in too many places");
			l.pieces[l.nr_pieces++] = (struct ivm_task_sched_piece){
				f[i].off, f[i].size };
		}
	}
	/* Where each field lands once the pieces are read back to back. */
	for (i = 0; i < l.nr_pieces; i++) {
		size_t k;

		for (k = 0; k < n; k++)
			if (f[k].off >= l.pieces[i].off &&
			    f[k].off < l.pieces[i].off + l.pieces[i].len)
				*f[k].where = pos + (f[k].off - l.pieces[i].off);
		pos += l.pieces[i].len;
		if (pos > IVM_TASK_SCHED_MAX_BYTES)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"task_struct: scheduler fields span %u bytes",
						pos);
		l.end = l.pieces[i].off + l.pieces[i].len;
	}
	l.bytes = pos;
	*ret = l;
	return NULL;
}

void ivm_task_sched_decode(const struct ivm_task_sched_layout *l,
			   const uint8_t *b, struct ivm_task_sched *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->pid = (int32_t)ivm_le32(b + l->pid);
	ret->tgid = (int32_t)ivm_le32(b + l->tgid);
	ret->state = ivm_le_load(b + l->state, l->state_size);
	ret->nvcsw = ivm_le64(b + l->nvcsw);
	ret->nivcsw = ivm_le64(b + l->nivcsw);
	ret->sum_exec_runtime = ivm_le64(b + l->sum_exec_runtime);
	if (l->on_cpu != IVM_KOFF_NONE) {
		ret->on_cpu_known = true;
		ret->on_cpu = ivm_le32(b + l->on_cpu) != 0;
	}
	if (l->run_delay != IVM_KOFF_NONE) {
		ret->run_delay_known = true;
		ret->run_delay = ivm_le64(b + l->run_delay);
	}
	if (l->start_time != IVM_KOFF_NONE) {
		ret->start_time_known = true;
		ret->start_time = ivm_le64(b + l->start_time);
	}
}
