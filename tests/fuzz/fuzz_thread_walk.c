// SPDX-License-Identifier: MIT
/*
 * A hostile guest's task lists and scheduler counters, as the switch
 * sampler reads them: the thread walker (a few threads a call, sweep after
 * sweep), each thread's counters decoded (task_sched.h) and fed to the
 * switch table with samples and records taken, all from guest memory the
 * fuzzer owns.
 *
 * Input: a flags byte (bit 0: the thread_group ring of older kernels,
 * else thread_node lists; bits 1-3: threads per call - 1; bits 4-7: max
 * threads per sweep / 16, 0 for the default), then kernel memory mapped
 * at FUZZ_BASE, whose first bytes are init_task.  The offsets are Debian
 * 6.1's (checked against its BTF by the unit tests' layout).
 *
 * What comes back must be sane: at most the budget per call, comm
 * NUL-terminated, no idle task (pid 0), the table's counts consistent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_image.h"
#include "kernel/task_sched.h"
#include "kernel/thread_walk.h"
#include "profile/switch_table.h"

#define FUZZ_BASE 0xffff888000000000ull
#define FUZZ_MAX_IMAGE (1u << 20)
#define FUZZ_CALLS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Debian 6.1.0-56-cloud-amd64's task_struct. */
static void offsets_6_1(struct ivm_thread_walk_offsets *o, bool thread_group)
{
	*o = (struct ivm_thread_walk_offsets){
		.tasks = 0x890, .pid = 0x970, .tgid = 0x974, .comm = 0xba0,
		.comm_size = 16, .mm = 0x8e0, .signal = 0xc00,
		.thread_node = thread_group ? IVM_KOFF_NONE : 0xa30,
		.signal_thread_head = thread_group ? IVM_KOFF_NONE : 0x10,
		.thread_group = 0xa20, .start_time = 0xad8,
		.list_next = 0, .list_prev = 8,
	};
}

static void sched_layout_6_1(struct ivm_task_sched_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->pieces[0] = (struct ivm_task_sched_piece){ 0x18, 0xae0 - 0x18 };
	l->nr_pieces = 1;
	l->bytes = 0xae0 - 0x18;
	l->end = 0xae0;
	l->state = 0;
	l->state_size = 4;
	l->on_cpu = 0x34 - 0x18;
	l->sum_exec_runtime = 0xc8 - 0x18;
	l->run_delay = 0x878 - 0x18;
	l->pid = 0x970 - 0x18;
	l->tgid = 0x974 - 0x18;
	l->nvcsw = 0xac8 - 0x18;
	l->nivcsw = 0xad0 - 0x18;
	l->start_time = 0xad8 - 0x18;
}

/* A thread's counters from the image, as the sampler reads them. */
static bool read_sched(struct fuzz_image *im,
		       const struct ivm_task_sched_layout *l, uint64_t task,
		       struct ivm_task_sched *ret)
{
	uint8_t buf[IVM_TASK_SCHED_MAX_BYTES];
	uint8_t *p = buf;
	size_t k;

	for (k = 0; k < l->nr_pieces; k++) {
		struct ivm_error *err;

		if (task + l->pieces[k].off < task)
			return false;
		err = im->reader.read(im->reader.ctx, task + l->pieces[k].off,
				      p, l->pieces[k].len);
		if (err) {
			ivm_error_destroy(err);
			return false;
		}
		p += l->pieces[k].len;
	}
	ivm_task_sched_decode(l, buf, ret);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_thread_walk_config cfg = { .init_task = FUZZ_BASE };
	struct ivm_walked_thread out[8];
	struct ivm_counter c[IVM_COUNTER_NR_IDS];
	struct ivm_task_sched_layout sl;
	struct ivm_switch_table *table;
	struct ivm_thread_walk *w;
	struct ivm_thread_record rec;
	struct fuzz_image im;
	uint64_t sweep = 1;
	size_t budget, call, i;

	if (size < 1 || size - 1 > FUZZ_MAX_IMAGE)
		return 0;
	offsets_6_1(&cfg.off, data[0] & 1);
	budget = (size_t)((data[0] >> 1) & 7) + 1;
	cfg.max_tasks = (size_t)(data[0] >> 4) * 16;
	sched_layout_6_1(&sl);
	if (!fuzz_image_init(&im, FUZZ_BASE, data + 1, size - 1))
		return 0;
	if (ivm_thread_walk_create(&cfg, &im.reader, &w)) {
		fuzz_image_fini(&im);
		return 0;
	}
	if (ivm_switch_table_create(1 + data[0] % 7, 64, &table)) {
		ivm_thread_walk_destroy(w);
		fuzz_image_fini(&im);
		return 0;
	}
	for (call = 0; call < FUZZ_CALLS; call++) {
		enum ivm_thread_sweep how;
		size_t nr;

		ivm_thread_walk_step(w, out, budget, &nr, &how);
		if (nr > budget)
			abort();
		for (i = 0; i < nr; i++) {
			struct ivm_task_sched ts;
			long idx;
			bool added;

			if (!out[i].pid ||
			    strnlen(out[i].comm, sizeof(out[i].comm)) ==
			    sizeof(out[i].comm))
				abort();
			if (ivm_switch_table_meet(table, &out[i], sweep,
						  sweep > 1, &idx, &added))
				continue;
			if (idx < 0)
				continue;
			if (!read_sched(&im, &sl, out[i].task, &ts)) {
				ivm_switch_table_lost(table, (size_t)idx);
				continue;
			}
			ivm_switch_table_update(table, (size_t)idx, &ts, call);
			if (ivm_switch_table_get(table, (size_t)idx)->due &&
			    ivm_switch_table_sampled(table, (size_t)idx, c) >
			    IVM_COUNTER_NR_IDS - 1)
				abort();
		}
		if (how == IVM_SWEEP_COMPLETE)
			ivm_switch_table_sweep_done(table, sweep);
		if (how != IVM_SWEEP_GOING) {
			for (i = 0; i < ivm_switch_table_nr(table); i++) {
				if (!ivm_switch_table_get(table, i)->read)
					continue;
				ivm_switch_table_record(table, i, false, c,
							&rec);
				if (rec.nr_counters > IVM_COUNTER_NR_IDS - 1 ||
				    rec.last_ns < rec.first_ns)
					abort();
			}
			ivm_switch_table_compact(table);
			sweep++;
		}
		if (ivm_switch_table_watched(table) >
		    ivm_switch_table_nr(table))
			abort();
	}
	ivm_switch_table_destroy(table);
	ivm_thread_walk_destroy(w);
	fuzz_image_fini(&im);
	return 0;
}
