// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "profile/capture_int.h"

/*
 * THREAD_SIZE of x86-64 without KASAN (16 KiB since 3.15).  The vmlinux
 * says it exactly: init_stack, the boot task's stack, is one THREAD_SIZE
 * object, so its symbol size is used when the symbol table has it.
 */
#define DEFAULT_THREAD_SIZE (16u * 1024)

const char *ivm_capture_outcome_name(enum ivm_capture_outcome outcome)
{
	switch (outcome) {
	case IVM_CAPTURE_KEPT:
		return "kept";
	case IVM_CAPTURE_DISCARDED_RAN:
		return "discarded_ran";
	case IVM_CAPTURE_DISCARDED_RUNNABLE:
		return "discarded_runnable";
	case IVM_CAPTURE_FAILED:
		return "failed";
	default:
		return "?";
	}
}

/*
 * IRQ and exception stacks, for tasks caught running in an interrupt.
 * Without them such stacks end at the IRQ stack, marked; so a kernel whose
 * BTF lacks the types only loses those frames.
 */
static void cpu_stacks_init(struct ivm_capture_engine *e)
{
	const struct ivm_ksym *irq, *cea;
	struct ivm_error *err;

	irq = ivm_ksyms_find(e->guest->ksyms, "hardirq_stack_ptr");
	cea = ivm_ksyms_find(e->guest->ksyms, "cea_exception_stacks");
	err = ivm_cpu_stacks_layout_from_btf(e->guest->btf,
					     irq ? irq->addr : 0,
					     cea ? cea->addr : 0,
					     &e->cpu_stacks);
	e->has_cpu_stacks = !err;
	ivm_error_destroy(err);
}

/*
 * Modules have ORC tables of their own (struct module's arch part), read
 * here from guest memory, so stacks through module code (filesystems and
 * drivers are modules on distribution kernels) unwind as exactly as the
 * kernel's own.  Best effort: without them such a stack ends at the
 * module frame, marked.  Modules loaded later are not covered.
 */
static void module_orc_init(struct ivm_capture_engine *e)
{
	enum ivm_orc_format fmt = ivm_orc_format_for_release(e->guest->release);
	const struct ivm_kmodules *mods;
	struct ivm_error *err;
	size_t i;

	err = ivm_guest_modules(e->guest, &mods);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	e->module_orc = calloc(mods->nr ? mods->nr : 1,
			       sizeof(*e->module_orc));
	for (i = 0; e->module_orc && i < mods->nr; i++) {
		const struct ivm_kmodule *m = &mods->mods[i];
		struct ivm_orc_table *t;

		if (!m->num_orcs || !m->base || !m->size)
			continue;
		err = ivm_orc_load_guest(&e->kmem_reader, m->orc_unwind_ip,
					 m->orc_unwind_ip + 4ull * m->num_orcs,
					 m->orc_unwind, fmt, &t);
		if (err) {
			ivm_error_destroy(err);
			continue;
		}
		e->module_orc[e->nr_module_orc++] =
			(struct ivm_kunwind_orc_range){
				m->base, m->base + m->size, t };
	}
	e->kcfg.extra_orc = e->module_orc;
	e->kcfg.nr_extra_orc = e->nr_module_orc;
}

/*
 * Where the kernel keeps each process's ELF auxiliary vector: AT_PHDR
 * there finds its executable in its memory (uunwind_exe.h).  Without it,
 * only the --binary executables of fixed address are recognized.
 */
static void auxv_init(struct ivm_capture_engine *e)
{
	struct ivm_btf_member m;
	struct ivm_error *err;

	err = ivm_btf_member_find(e->guest->btf, "mm_struct", "saved_auxv",
				  &m);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	if (m.size < 16 || m.offset > UINT32_MAX)
		return;
	e->auxv_off = (uint32_t)m.offset;
	e->auxv_len = (uint32_t)(m.size < IVM_UEXE_MAX_AUXV * 16 ?
				 m.size : IVM_UEXE_MAX_AUXV * 16) & ~15u;
}

/*
 * The guest's VMAs and its files' bytes (kernel/mm_maps.h, gfile.h): the
 * shared libraries of every process, and the pages a fork child never
 * touched.  Without them (a kernel whose BTF lacks what they read) only
 * the executable is known, by its auxiliary vector.
 */
static void maps_init(struct ivm_capture_engine *e)
{
	struct ivm_gfile_config cfg;
	struct ivm_error *err;

	err = ivm_mm_source_init(&e->mm_src, e->guest->layout, e->guest->btf);
	if (!err)
		err = ivm_gfile_config_init(&cfg, e->guest->layout,
					    e->guest->btf);
	if (!err)
		err = ivm_gfile_create(&cfg, &e->gfile);
	if (!err && !(e->files = calloc(MAX_FILES, sizeof(*e->files))))
		err = &ivm_enomem;
	e->has_maps = !err;
	ivm_error_destroy(err);
}

/* Best effort: without it samples carry no process name or title. */
static void procs_init(struct ivm_capture_engine *e)
{
	const struct ivm_kernel_offsets *off =
		ivm_kernel_layout_offsets(e->guest->layout);
	struct ivm_error *err;

	e->procs = malloc(sizeof(*e->procs));
	if (!e->procs)
		return;
	err = ivm_proc_info_cache_init(e->procs, e->guest->btf,
				       off->task_comm, off->task_comm_size);
	if (err) {
		ivm_error_destroy(err);
		free(e->procs);
		e->procs = NULL;
	}
}

struct ivm_error *ivm_capture_engine_create(struct ivm_guest *guest,
					    struct ivm_capture_engine **ret)
{
	const struct ivm_kernel_offsets *off;
	struct ivm_capture_engine *e;
	const struct ivm_ksym *sym;
	struct ivm_error *err;

	if (!guest->layout)
		return ivm_error_create(IVM_ERROR_INVALID,
					"capture needs the guest kernel layout");
	off = ivm_kernel_layout_offsets(guest->layout);
	if (off->inactive_task_frame_size == IVM_KOFF_NONE ||
	    off->inactive_task_frame_bp == IVM_KOFF_NONE ||
	    off->inactive_task_frame_ret_addr == IVM_KOFF_NONE)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"the guest kernel's BTF has no struct inactive_task_frame");
	e = calloc(1, sizeof(*e));
	if (!e)
		return &ivm_enomem;
	e->guest = guest;
	e->has_on_cpu = off->task_on_cpu != IVM_KOFF_NONE;
	err = ivm_uexe_cache_create(NULL, &e->ubins);
	if (!err)
		err = ivm_uobjects_create(&e->objects);
	if (err) {
		ivm_uexe_cache_destroy(e->ubins);
		free(e);
		return err;
	}
	/* From its vmlinux, or from guest memory when it has none. */
	err = ivm_guest_orc(guest, &e->kcfg.orc, &e->kcfg.orc_slide);
	if (err) {
		ivm_uexe_cache_destroy(e->ubins);
		ivm_uobjects_destroy(e->objects);
		free(e);
		return ivm_error_wrap(err, "loading ORC tables");
	}
	sym = ivm_ksyms_find(guest->ksyms, "ret_from_fork");
	if (sym)
		e->kcfg.ret_from_fork = sym->addr +
					ivm_kernel_layout_slide(guest->layout);
	e->switch_frame.size = off->inactive_task_frame_size;
	e->switch_frame.bp = off->inactive_task_frame_bp;
	e->switch_frame.ret_addr = off->inactive_task_frame_ret_addr;
	sym = ivm_ksyms_find(guest->ksyms, "init_stack");
	e->thread_size = sym && sym->size >= 4096 && sym->size <= (1u << 20) &&
			 !(sym->size & (sym->size - 1)) ?
			 sym->size : DEFAULT_THREAD_SIZE;
	e->kmem.gmem = guest->gmem;
	e->kmem.cr3 = ivm_kernel_layout_cr3(guest->layout);
	e->kmem.la57 = ivm_kernel_layout_la57(guest->layout);
	e->kmem.memo = &e->memo;
	ivm_kmem_reader_gmem(&e->kmem, &e->kmem_reader);
	ivm_kmem_cache_init_gmem(&e->kcache, &e->kmem, &e->kreader);
	cpu_stacks_init(e);
	module_orc_init(e);
	auxv_init(e);
	maps_init(e);
	procs_init(e);
	*ret = e;
	return NULL;
}

struct ivm_error *ivm_capture_engine_set_labels(struct ivm_capture_engine *e,
						const struct ivm_label_spec *specs,
						size_t n)
{
	struct ivm_labels_guest g = {
		.mm_src = &e->mm_src, .gfile = e->gfile, .la57 = e->kmem.la57,
	};
	struct ivm_labels *l = NULL;
	struct ivm_error *err;

	if (n) {
		err = ivm_labels_create(specs, n, &g, &l);
		if (err)
			return err;
	}
	ivm_labels_destroy(e->labels);
	e->labels = l;
	return NULL;
}

struct ivm_labels *ivm_capture_engine_labels(struct ivm_capture_engine *e)
{
	return e->labels;
}

void ivm_capture_engine_destroy(struct ivm_capture_engine *e)
{
	size_t i;

	if (!e)
		return;
	ivm_uexe_cache_destroy(e->ubins);
	ivm_labels_destroy(e->labels);
	ivm_uobjects_destroy(e->objects);
	for (i = 0; i < MM_CACHE_SLOTS; i++)
		capture_free_code_maps(&e->mm_cache[i]);
	ivm_gfile_destroy(e->gfile);
	free(e->procs);
	free(e->files);
	for (i = 0; i < e->nr_module_orc; i++)
		ivm_orc_destroy((struct ivm_orc_table *)e->module_orc[i].orc);
	free(e->module_orc);
	for (i = 0; i < e->nr_readaheads; i++)
		free(e->readaheads[i].path);
	free(e);
}

/*
 * Copy the frames of st into pcs and what each is into flags; the
 * sample's part gets the count.
 */
uint16_t capture_take_frames(const struct ivm_stack *st, uint32_t first,
			     uint64_t *pcs, uint8_t *flags, uint32_t want_flag)
{
	uint32_t i;
	uint16_t n = 0;

	for (i = first; i < st->nr && n < IVM_SAMPLE_MAX_FRAMES; i++) {
		const struct ivm_frame *f = &st->frames[i];

		if (!(f->flags & want_flag))
			continue;
		flags[n] = (f->flags & IVM_FRAME_REGS ? IVM_PC_EXACT : 0) |
			   (f->flags & IVM_FRAME_INEXACT ? IVM_PC_INEXACT : 0);
		pcs[n++] = f->pc;
	}
	return n;
}

uint32_t capture_sample_flags(uint32_t stack_flags)
{
	uint32_t f = 0;

	if (stack_flags & IVM_STACK_TRUNCATED_FAULT)
		f |= IVM_STACK_TRUNC_FAULT;
	if (stack_flags & IVM_STACK_TRUNCATED_CAP)
		f |= IVM_STACK_TRUNC_CAP;
	if (stack_flags & IVM_STACK_TRUNCATED_LOOP)
		f |= IVM_STACK_TRUNC_LOOP;
	if (stack_flags & (IVM_STACK_TRUNCATED_BAD_ORC |
			   IVM_STACK_TRUNCATED_BOUNDS))
		f |= IVM_STACK_TRUNC_BADINFO;
	if (stack_flags & IVM_STACK_TRUNCATED_NO_CFI)
		f |= IVM_STACK_TRUNC_NOCFI;
	if (stack_flags & IVM_STACK_FP_FALLBACK)
		f |= IVM_STACK_INEXACT;
	return f;
}

/*
 * The unwind will read the task's stack from sp up to its top (where the
 * user pt_regs are): fetch those pages in one batch rather than page by
 * page as the unwinder reaches them.  An sp outside the stack (in user
 * mode, on an IRQ stack, or a lie) fetches nothing.
 */
static void prefetch_task_stack(struct ivm_capture_engine *e,
				const struct ivm_stack_range *stack,
				uint64_t sp)
{
	if (sp < stack->lo || sp >= stack->hi)
		return;
	ivm_kmem_cache_prefetch(&e->kcache, sp, stack->hi - sp);
}

struct ivm_error *ivm_capture_task(struct ivm_capture_engine *e,
				   uint64_t task_addr,
				   const struct ivm_x86_regs *regs, int cpl,
				   int cpu, struct ivm_capture *cap)
{
	return ivm_capture_task_flags(e, task_addr, regs, cpl, cpu, 0, cap);
}

struct ivm_error *ivm_capture_task_flags(struct ivm_capture_engine *e,
					 uint64_t task_addr,
					 const struct ivm_x86_regs *regs,
					 int cpl, int cpu, unsigned int flags,
					 struct ivm_capture *cap)
{
	/*
	 * A task that is runnable but not on a CPU (woken, waiting in a run
	 * queue; or preempted) sits at its saved switch frame until it is
	 * switched in, and being switched in sets on_cpu before its stack
	 * changes, being switched out again moves a switch count before
	 * on_cpu drops.  So when neither read sees on_cpu and the counts
	 * held, it did not run in between and the stack read is its own:
	 * being runnable is no reason to discard.  Measured on lockstorm:
	 * 2 of 719 blocked-frame captures discarded, against 12 of 281 when
	 * runnable targets were dropped, and fewer than pinning them behind
	 * the helper's holder got (pinning under TCG comes milliseconds
	 * late, see capture_pin.h).  Without on_cpu (a kernel built without
	 * SMP) a running task looks runnable, and only a hold of its CPU
	 * (IVM_CAPTURE_F_HELD) or the caller's own check
	 * (IVM_CAPTURE_F_RUNNABLE) says it is not running.
	 */
	bool runnable_ok = !regs &&
			   (e->has_on_cpu ||
			    (flags & (IVM_CAPTURE_F_HELD | IVM_CAPTURE_F_RUNNABLE)));
	struct ivm_guest_task after;
	struct ivm_stack_range ranges[IVM_KUNWIND_MAX_STACKS];
	size_t nr_ranges = 1;
	struct ivm_stack st;
	struct ivm_error *err;
	struct mm_seen *seen;

	ivm_kmem_cache_invalidate(&e->kcache);
	e->user_task = 0;
	memset(&cap->process, 0, sizeof(cap->process));
	memset(&cap->sample, 0, sizeof(cap->sample));
	memset(&cap->exe, 0, sizeof(cap->exe));
	cap->sample.kernel_pcs = cap->kernel_pcs;
	cap->sample.user_pcs = cap->user_pcs;
	cap->sample.kernel_flags = cap->kernel_flags;
	cap->sample.user_flags = cap->user_flags;
	seen = &e->mm_seen[ivm_hash_u64(task_addr) % IVM_CAPTURE_MM_SEEN];
	e->user_pgd_mm = 0;
	err = ivm_kernel_read_task_pgd(e->guest->layout, task_addr,
				       seen->task == task_addr ? seen->mm : 0,
				       &cap->task, &e->user_pgd);
	if (err) {
		ivm_error_destroy(err);
		cap->outcome = IVM_CAPTURE_FAILED;
		return NULL;
	}
	if (e->user_pgd)
		e->user_pgd_mm = cap->task.mm;
	seen->task = task_addr;
	seen->mm = cap->task.mm;
	cap->sample.pid = (uint32_t)cap->task.tgid;
	cap->sample.tid = (uint32_t)cap->task.pid;
	memcpy(cap->sample.comm, cap->task.comm, IVM_COMM_LEN - 1);
	cap->sample.comm[IVM_COMM_LEN - 1] = '\0';

	/*
	 * A sleeping task's saved frame is only its stack while it sleeps;
	 * a runnable one may be switched in at any moment.  One still on a
	 * CPU has no saved frame yet, whatever its state says: a task going
	 * to sleep sets its state and bumps nvcsw before it saves thread.sp,
	 * so the counters alone would take its previous frame for current.
	 * Holding its vCPU does not help there.
	 */
	if (!regs && (cap->task.on_cpu ||
		      (cap->task.state == 0 && !runnable_ok))) {
		cap->outcome = IVM_CAPTURE_DISCARDED_RUNNABLE;
		return NULL;
	}

	ranges[0].lo = cap->task.stack;
	ranges[0].hi = cap->task.stack + e->thread_size;
	ranges[0].kind = IVM_STACK_RANGE_TASK;
	if (regs && cpu >= 0 && e->has_cpu_stacks)
		nr_ranges += ivm_kunwind_cpu_stacks(
			&e->cpu_stacks, &e->kreader,
			ivm_kernel_layout_per_cpu_offset(e->guest->layout,
							 (unsigned int)cpu),
			ranges + 1, IVM_KUNWIND_MAX_STACKS - 1);
	prefetch_task_stack(e, &ranges[0], regs ? regs->rsp :
						    cap->task.thread_sp);
	ivm_stack_init(&st, cap->frames, IVM_SAMPLE_MAX_FRAMES);
	if (regs && cpl == 3) {
		/* Running in user mode: there is no kernel part. */
		capture_unwind_user(e, &cap->task, regs, cap);
	} else {
		if (regs)
			err = ivm_kunwind_regs(&e->kcfg, &e->kreader, ranges,
					       nr_ranges, regs, &st);
		else
			err = ivm_kunwind_blocked(&e->kcfg, &e->kreader, ranges,
						  1, cap->task.thread_sp,
						  &e->switch_frame, &st);
		if (err)
			return err;
		cap->sample.nr_kernel = capture_take_frames(&st, 0,
							    cap->kernel_pcs,
							    cap->kernel_flags,
							    IVM_FRAME_KERNEL);
		cap->sample.stack_flags |= capture_sample_flags(st.flags);
		if (st.flags & IVM_STACK_REACHED_USER) {
			struct ivm_x86_regs uregs = st.user_regs;

			capture_unwind_user(e, &cap->task, &uregs, cap);
		} else if (cap->task.mm) {
			cap->sample.stack_flags |= IVM_STACK_NO_USER;
		}
	}
	capture_read_context(e, cap);

	err = ivm_kernel_read_task(e->guest->layout, task_addr, &after);
	if (err) {
		ivm_error_destroy(err);
		cap->outcome = IVM_CAPTURE_FAILED;
		return NULL;
	}
	if (after.nvcsw != cap->task.nvcsw || after.nivcsw != cap->task.nivcsw ||
	    after.pid != cap->task.pid ||
	    (!regs && (after.on_cpu || (after.state == 0 && !runnable_ok)))) {
		cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		return NULL;
	}
	if (regs)
		cap->sample.stack_flags |= IVM_STACK_INEXACT;
	cap->outcome = IVM_CAPTURE_KEPT;
	return NULL;
}
