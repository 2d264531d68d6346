// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "kunwind.h"
#include "uunwind.h"
#include "uunwind_dwarf.h"

/*
 * THREAD_SIZE of x86-64 without KASAN (16 KiB since 3.15).  The vmlinux
 * says it exactly: init_stack, the boot task's stack, is one THREAD_SIZE
 * object, so its symbol size is used when the symbol table has it.
 */
#define DEFAULT_THREAD_SIZE (16u * 1024)

/* A guest binary whose copy is on the host, for DWARF CFI unwinding. */
struct host_binary {
	struct ivm_ubinary *ubin;
	const uint8_t *build_id;
	size_t build_id_len;
	uint64_t base;		/* where its headers are mapped (bias 0) */
	struct ivm_umapping maps[IVM_UBINARY_MAX_EXEC];
	size_t nr_maps;
};

#define MAX_BINARIES 16
#define MM_CACHE_SLOTS 256

/* Which host binary an address space (mm_struct) runs, once looked up. */
struct mm_binding {
	uint64_t mm;
	int binary;		/* index in binaries, -1 for none */
};

struct ivm_capture_engine {
	struct ivm_guest *guest;
	struct host_binary binaries[MAX_BINARIES];
	size_t nr_binaries;
	struct mm_binding mm_cache[MM_CACHE_SLOTS];
	uint8_t probe_page[4096];	/* a guest binary's first page */
	struct ivm_orc_table *orc;
	struct ivm_kunwind_config kcfg;
	struct ivm_switch_frame_layout switch_frame;
	uint64_t thread_size;
	struct ivm_kmem_gmem kmem;
	struct ivm_kmem_reader kmem_reader;	/* uncached */
	/*
	 * An unwind reads the same few stack pages many times, 8 bytes at a
	 * time; the cache turns those into one page walk and read per page.
	 * It is emptied before every capture: guest memory changes.
	 */
	struct ivm_kmem_cache kcache;
	struct ivm_kmem_reader kreader;
	/* The same for the target's user memory (its own page tables). */
	struct ivm_kmem_gmem umem;
	struct ivm_kmem_reader umem_reader;
	struct ivm_kmem_cache ucache;
	bool has_cpu_stacks;
	struct ivm_cpu_stacks_layout cpu_stacks;
};

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
	err = ivm_orc_load_elf(guest->vmlinux, IVM_ORC_FORMAT_AUTO, &e->orc);
	if (err) {
		free(e);
		return ivm_error_wrap(err, "loading ORC tables");
	}
	e->kcfg.orc = e->orc;
	e->kcfg.orc_slide = ivm_kernel_layout_slide(guest->layout);
	sym = ivm_ksyms_find(guest->ksyms, "ret_from_fork");
	if (sym)
		e->kcfg.ret_from_fork = sym->addr + e->kcfg.orc_slide;
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
	ivm_kmem_reader_gmem(&e->kmem, &e->kmem_reader);
	ivm_kmem_cache_init(&e->kcache, &e->kmem_reader, &e->kreader);
	cpu_stacks_init(e);
	*ret = e;
	return NULL;
}

struct ivm_error *ivm_capture_engine_add_binary(struct ivm_capture_engine *e,
						const char *path)
{
	struct host_binary *hb;
	const struct ivm_ubinary_segment *seg;
	struct ivm_error *err;

	if (e->nr_binaries == MAX_BINARIES)
		return ivm_error_create(IVM_ERROR_INVALID,
					"at most %d binaries", MAX_BINARIES);
	hb = &e->binaries[e->nr_binaries];
	memset(hb, 0, sizeof(*hb));
	err = ivm_ubinary_open(path, &hb->ubin);
	if (err)
		return err;
	/*
	 * Position-independent code needs its load address from the guest's
	 * mappings (the helper's MAPS); only fixed-address executables can
	 * be placed without it.
	 */
	if (ivm_ubinary_is_dyn(hb->ubin)) {
		ivm_ubinary_destroy(hb->ubin);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: position-independent binaries are not supported yet (need the guest's mappings)",
					path);
	}
	if (!ivm_ubinary_build_id(hb->ubin, &hb->build_id,
				  &hb->build_id_len) ||
	    hb->build_id_len < 8 || !ivm_ubinary_nr_exec(hb->ubin)) {
		ivm_ubinary_destroy(hb->ubin);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: no build-id: cannot tell whether the guest runs it",
					path);
	}
	seg = ivm_ubinary_exec(hb->ubin, 0);
	hb->base = (seg->vaddr - seg->offset) & ~4095ull;
	hb->nr_maps = ivm_ubinary_mappings(hb->ubin, 0, hb->maps,
					   IVM_UBINARY_MAX_EXEC);
	e->nr_binaries++;
	return NULL;
}

void ivm_capture_engine_destroy(struct ivm_capture_engine *e)
{
	size_t i;

	if (!e)
		return;
	for (i = 0; i < e->nr_binaries; i++)
		ivm_ubinary_destroy(e->binaries[i].ubin);
	ivm_orc_destroy(e->orc);
	free(e);
}

/* Copy the frames of st into pcs; the sample's part gets the count. */
static uint16_t take_frames(const struct ivm_stack *st, uint32_t first,
			    uint64_t *pcs, uint32_t want_flag)
{
	uint32_t i;
	uint16_t n = 0;

	for (i = first; i < st->nr && n < IVM_SAMPLE_MAX_FRAMES; i++)
		if (st->frames[i].flags & want_flag)
			pcs[n++] = st->frames[i].pc;
	return n;
}

static uint32_t sample_flags(uint32_t stack_flags)
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
	if (stack_flags & IVM_STACK_FP_FALLBACK)
		f |= IVM_STACK_INEXACT;
	return f;
}

/*
 * The host binary the address space runs, or NULL: a binary matches when
 * its build-id note is found in the guest's own copy of its first page
 * (where the linker puts the ELF headers and the notes).  Remembered per
 * mm_struct; a recycled mm address that now runs something else can only
 * make a match fail, since the page is read each time the cache misses.
 */
static struct host_binary *binary_of(struct ivm_capture_engine *e,
				     uint64_t mm,
				     const struct ivm_kmem_reader *ureader)
{
	struct mm_binding *slot = &e->mm_cache[(mm >> 6) % MM_CACHE_SLOTS];
	uint8_t *page = e->probe_page;
	size_t i;

	if (!e->nr_binaries)
		return NULL;
	if (slot->mm == mm)
		return slot->binary >= 0 ? &e->binaries[slot->binary] : NULL;
	slot->mm = mm;
	slot->binary = -1;
	for (i = 0; i < e->nr_binaries; i++) {
		struct host_binary *hb = &e->binaries[i];
		struct ivm_error *err;

		err = ureader->read(ureader->ctx, hb->base, page,
				    sizeof(e->probe_page));
		if (err) {
			ivm_error_destroy(err);
			continue;
		}
		if (memmem(page, sizeof(e->probe_page), hb->build_id,
			   hb->build_id_len)) {
			slot->binary = (int)i;
			return hb;
		}
	}
	return NULL;
}

/* Unwind the user part from regs through the task's page tables. */
static void unwind_user(struct ivm_capture_engine *e,
			const struct ivm_guest_task *task,
			const struct ivm_x86_regs *uregs, struct ivm_capture *cap)
{
	struct ivm_kmem_reader ureader;
	struct host_binary *hb;
	struct ivm_stack st;
	struct ivm_error *err;
	uint64_t cr3;

	err = ivm_kernel_task_user_cr3(e->guest->layout, task, &cr3);
	if (err) {
		ivm_error_destroy(err);
		cap->sample.stack_flags |= IVM_STACK_NO_USER;
		return;
	}
	e->umem.gmem = e->guest->gmem;
	e->umem.cr3 = cr3;
	e->umem.la57 = e->kmem.la57;
	ivm_kmem_reader_gmem(&e->umem, &e->umem_reader);
	ivm_kmem_cache_init(&e->ucache, &e->umem_reader, &ureader);
	ivm_stack_init(&st, cap->frames, IVM_SAMPLE_MAX_FRAMES);
	hb = binary_of(e, task->mm, &ureader);
	if (hb)
		err = ivm_uunwind_dwarf(&ureader, uregs, e->umem.la57, hb->maps,
					hb->nr_maps, &st);
	else
		err = ivm_uunwind_fp(&ureader, uregs, e->umem.la57, &st);
	if (err) {
		ivm_error_destroy(err);
		cap->sample.stack_flags |= IVM_STACK_NO_USER;
		return;
	}
	cap->sample.nr_user = take_frames(&st, 0, cap->user_pcs,
					  IVM_FRAME_USER);
	cap->sample.stack_flags |= sample_flags(st.flags);
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
	/* Runnable is a reason to discard only if the task can run. */
	bool runnable_ok = !regs && (flags & IVM_CAPTURE_F_HELD);
	struct ivm_guest_task after;
	struct ivm_stack_range ranges[IVM_KUNWIND_MAX_STACKS];
	size_t nr_ranges = 1;
	struct ivm_stack st;
	struct ivm_error *err;

	ivm_kmem_cache_invalidate(&e->kcache);
	memset(&cap->sample, 0, sizeof(cap->sample));
	cap->sample.kernel_pcs = cap->kernel_pcs;
	cap->sample.user_pcs = cap->user_pcs;
	err = ivm_kernel_read_task(e->guest->layout, task_addr, &cap->task);
	if (err) {
		ivm_error_destroy(err);
		cap->outcome = IVM_CAPTURE_FAILED;
		return NULL;
	}
	cap->sample.pid = (uint32_t)cap->task.tgid;
	cap->sample.tid = (uint32_t)cap->task.pid;
	memcpy(cap->sample.comm, cap->task.comm, IVM_COMM_LEN - 1);
	cap->sample.comm[IVM_COMM_LEN - 1] = '\0';

	/*
	 * A sleeping task's saved frame is only its stack while it sleeps;
	 * a runnable one may be switched in at any moment.
	 */
	if (!regs && cap->task.state == 0 && !runnable_ok) {
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
	ivm_stack_init(&st, cap->frames, IVM_SAMPLE_MAX_FRAMES);
	if (regs && cpl == 3) {
		/* Running in user mode: there is no kernel part. */
		unwind_user(e, &cap->task, regs, cap);
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
		cap->sample.nr_kernel = take_frames(&st, 0, cap->kernel_pcs,
						    IVM_FRAME_KERNEL);
		cap->sample.stack_flags |= sample_flags(st.flags);
		if (st.flags & IVM_STACK_REACHED_USER) {
			struct ivm_x86_regs uregs = st.user_regs;

			unwind_user(e, &cap->task, &uregs, cap);
		} else if (cap->task.mm) {
			cap->sample.stack_flags |= IVM_STACK_NO_USER;
		}
	}

	err = ivm_kernel_read_task(e->guest->layout, task_addr, &after);
	if (err) {
		ivm_error_destroy(err);
		cap->outcome = IVM_CAPTURE_FAILED;
		return NULL;
	}
	if (after.nvcsw != cap->task.nvcsw || after.nivcsw != cap->task.nivcsw ||
	    after.pid != cap->task.pid ||
	    (!regs && after.state == 0 && !runnable_ok)) {
		cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		return NULL;
	}
	if (regs)
		cap->sample.stack_flags |= IVM_STACK_INEXACT;
	cap->outcome = IVM_CAPTURE_KEPT;
	return NULL;
}
