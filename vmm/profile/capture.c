// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/gfile.h"
#include "kernel/mm_maps.h"
#include "profile/capture.h"
#include "unwind/kunwind.h"
#include "unwind/uunwind.h"
#include "unwind/uunwind_dwarf.h"
#include "unwind/uunwind_exe.h"

/*
 * THREAD_SIZE of x86-64 without KASAN (16 KiB since 3.15).  The vmlinux
 * says it exactly: init_stack, the boot task's stack, is one THREAD_SIZE
 * object, so its symbol size is used when the symbol table has it.
 */
#define DEFAULT_THREAD_SIZE (16u * 1024)

#define MM_CACHE_SLOTS 256

/*
 * What an address space (mm_struct) runs, once looked up: its executable
 * as its memory shows it and the host copy for CFI.  Keyed by the mm and
 * its page-table root: exec makes a new mm, and a freed mm_struct reused
 * for another process would also need its pgd page to come back to it to
 * be taken for the old one.
 */
struct mm_binding {
	uint64_t mm, cr3;
	bool known;			/* exe was read */
	struct ivm_uexe exe;
	struct ivm_uexe_handle host;	/* slot -1: no host copy */
	const char *why;		/* static: why none */
	bool from_file;			/* headers read from the page cache */
};

struct ivm_capture_engine {
	struct ivm_guest *guest;
	/* The user objects captures met, numbered (uobjects.h). */
	struct ivm_uobjects *objects;
	/* Host copies of guest executables, by build-id. */
	struct ivm_uexe_cache *ubins;
	size_t nr_binaries;		/* given by --binary */
	bool has_symdir;
	/* mm_struct.saved_auxv (the ELF auxiliary vector); len 0: none. */
	uint32_t auxv_off, auxv_len;
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
	/*
	 * Page-table entries seen by earlier captures, kernel and user: a
	 * page's walk and data then take one round trip, not five.  Only
	 * ever a prediction that each read checks (x86_64_paging.h), so it
	 * is kept across captures.
	 */
	struct ivm_x86_64_walk_memo memo;
	/* The same for the target's user memory (its own page tables). */
	struct ivm_kmem_gmem umem;
	struct ivm_kmem_reader umem_reader;
	struct ivm_kmem_cache ucache;
	bool has_cpu_stacks;
	/*
	 * The files behind user memory (kernel/gfile.h): a page of the
	 * executable's headers that the process's page tables lack (a fork
	 * child's) is read from the file's page cache.  gfile NULL: the
	 * guest's BTF lacks what that needs, and such children stay unknown.
	 */
	struct ivm_gfile *gfile;
	struct ivm_mm_source mm_src;
	struct ivm_gfile_user fuser;
	/* ORC tables of the modules loaded when the engine was made. */
	struct ivm_kunwind_orc_range *module_orc;
	size_t nr_module_orc;
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

/* Best effort: without it only fork children lose their executable. */
static void gfile_init(struct ivm_capture_engine *e)
{
	struct ivm_gfile_config cfg;
	struct ivm_error *err;

	err = ivm_mm_source_init(&e->mm_src, e->guest->layout, e->guest->btf);
	if (!err)
		err = ivm_gfile_config_init(&cfg, e->guest->layout,
					    e->guest->btf);
	if (!err)
		err = ivm_gfile_create(&cfg, &e->gfile);
	if (err)
		e->gfile = NULL;
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
	err = ivm_uexe_cache_create(NULL, &e->ubins);
	if (!err)
		err = ivm_uobjects_create(&e->objects);
	if (err) {
		ivm_uexe_cache_destroy(e->ubins);
		free(e);
		return err;
	}
	/* From its vmlinux, or from guest memory when it has none. */
	err = ivm_guest_load_orc(guest, &e->orc, &e->kcfg.orc_slide);
	if (err) {
		ivm_uexe_cache_destroy(e->ubins);
		ivm_uobjects_destroy(e->objects);
		free(e);
		return ivm_error_wrap(err, "loading ORC tables");
	}
	e->kcfg.orc = e->orc;
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
	gfile_init(e);
	*ret = e;
	return NULL;
}

struct ivm_uobjects *ivm_capture_engine_objects(struct ivm_capture_engine *e)
{
	return e->objects;
}

struct ivm_error *ivm_capture_engine_add_binary(struct ivm_capture_engine *e,
						const char *path)
{
	struct ivm_error *err = ivm_uexe_cache_add(e->ubins, path);

	if (err)
		return err;
	e->nr_binaries++;
	memset(e->mm_cache, 0, sizeof(e->mm_cache));
	return NULL;
}

struct ivm_error *ivm_capture_engine_set_symdir(struct ivm_capture_engine *e,
						const char *dir)
{
	struct ivm_error *err = ivm_uexe_cache_set_dir(e->ubins, dir);

	if (err)
		return err;
	e->has_symdir = dir != NULL;
	memset(e->mm_cache, 0, sizeof(e->mm_cache));
	return NULL;
}

void ivm_capture_engine_destroy(struct ivm_capture_engine *e)
{
	size_t i;

	if (!e)
		return;
	ivm_uexe_cache_destroy(e->ubins);
	ivm_gfile_destroy(e->gfile);
	ivm_uobjects_destroy(e->objects);
	ivm_orc_destroy(e->orc);
	for (i = 0; i < e->nr_module_orc; i++)
		ivm_orc_destroy((struct ivm_orc_table *)e->module_orc[i].orc);
	free(e->module_orc);
	free(e);
}

/*
 * Copy the frames of st into pcs and what each is into flags; the
 * sample's part gets the count.
 */
static uint16_t take_frames(const struct ivm_stack *st, uint32_t first,
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
	if (stack_flags & IVM_STACK_TRUNCATED_NO_CFI)
		f |= IVM_STACK_TRUNC_NOCFI;
	if (stack_flags & IVM_STACK_FP_FALLBACK)
		f |= IVM_STACK_INEXACT;
	return f;
}

/*
 * The fixed-address executables given explicitly can still be recognized
 * without the auxiliary vector (a kernel whose BTF lacks saved_auxv, or a
 * vector the process rewrote): by their build-id note in the guest's copy
 * of their first page, where the linker puts the headers and the notes.
 */
static bool probe_explicit(struct ivm_capture_engine *e,
			   const struct ivm_kmem_reader *ureader,
			   struct mm_binding *slot)
{
	struct ivm_ubinary *b;
	size_t i;

	for (i = 0; (b = ivm_uexe_cache_explicit(e->ubins, i)); i++) {
		const struct ivm_ubinary_segment *seg = ivm_ubinary_exec(b, 0);
		uint64_t base = (seg->vaddr - seg->offset) & ~4095ull;
		struct ivm_uexe *x = &slot->exe;
		const uint8_t *id;
		struct ivm_error *err;
		size_t len, j;

		if (ivm_ubinary_is_dyn(b) ||
		    !ivm_ubinary_build_id(b, &id, &len))
			continue;
		err = ureader->read(ureader->ctx, base, e->probe_page,
				    sizeof(e->probe_page));
		if (err) {
			ivm_error_destroy(err);
			continue;
		}
		if (!memmem(e->probe_page, sizeof(e->probe_page), id, len))
			continue;
		memset(x, 0, sizeof(*x));
		x->header = base;
		memcpy(x->build_id, id, len);
		x->build_id_len = len;
		for (j = 0; j < ivm_ubinary_nr_exec(b); j++)
			x->exec[x->nr_exec++] = *ivm_ubinary_exec(b, j);
		slot->known = true;
		slot->why = NULL;
		return ivm_uexe_cache_find(e->ubins, x, &slot->host,
					   &slot->why) == NULL;
	}
	return false;
}

/*
 * The executable of the address space and its host copy, looked up once
 * per (mm, cr3).  A lookup that faulted (a page of the executable's
 * headers not present) is not remembered: the next capture tries again.
 */
static const struct mm_binding *binding_of(struct ivm_capture_engine *e,
					   uint64_t mm, uint64_t cr3,
					   const struct ivm_kmem_reader *ureader)
{
	struct mm_binding *slot = &e->mm_cache[(mm >> 6) % MM_CACHE_SLOTS];
	uint8_t auxv[IVM_UEXE_MAX_AUXV * 16];
	struct ivm_kmem_reader freader;
	struct ivm_error *err;
	bool retry = false;

	if (slot->mm == mm && slot->cr3 == cr3)
		return slot;
	/* Pages the page tables lack come from the files mapped there. */
	if (e->gfile) {
		e->fuser = (struct ivm_gfile_user){
			.g = e->gfile, .src = &e->mm_src, .mm = mm,
			.umem = ureader,
		};
		ivm_gfile_user_reader(&e->fuser, &freader);
		ureader = &freader;
	}
	memset(slot, 0, sizeof(*slot));
	slot->mm = mm;
	slot->cr3 = cr3;
	slot->host.slot = -1;
	slot->why = "the executable is unknown";
	err = e->auxv_len ? e->kmem_reader.read(e->kmem_reader.ctx,
						mm + e->auxv_off, auxv,
						e->auxv_len) :
			    ivm_error_create(IVM_ERROR_NOT_FOUND,
					     "no mm_struct.saved_auxv");
	if (!err)
		err = ivm_uexe_identify(ureader, auxv, e->auxv_len,
					e->umem.la57, &slot->exe);
	if (!err) {
		slot->known = true;
		slot->why = NULL;
		/* Only running out of memory fails here. */
		err = ivm_uexe_cache_find(e->ubins, &slot->exe, &slot->host,
					  &slot->why);
		if (err) {
			retry = true;
			slot->host.slot = -1;
		}
	} else {
		retry = err->code == IVM_ERROR_FAULT;
		if (probe_explicit(e, ureader, slot))
			retry = false;
	}
	ivm_error_destroy(err);
	slot->from_file = e->gfile && e->fuser.file_pages;
	if (retry)
		slot->mm = 0;
	return slot;
}

/* What the capture says of the executable, for `idlevm stack`. */
static void describe_exe(struct ivm_capture *cap, const struct mm_binding *b,
			 struct ivm_ubinary *host, const struct ivm_uobject *o)
{
	struct ivm_capture_exe *x = &cap->exe;

	x->known = b->known;
	x->from_page_cache = b->from_file;
	x->why = host ? NULL : b->why;
	x->host_path = host ? ivm_ubinary_path(host) : NULL;
	x->object = o ? o->id : 0;
	if (b->known)
		x->id = b->exe;
}

/*
 * The executable's bytes by file offset, read through the process's own
 * mapping of it: an offset in a PT_LOAD's file bytes is at bias plus its
 * link-time address.  Before the image's headers are parsed, only the
 * first page is known: it is where the auxiliary vector put the ELF
 * header.
 */
struct own_file {
	const struct ivm_kmem_reader *umem;
	const struct ivm_uelf *elf;	/* NULL: headers not parsed yet */
	uint64_t header, bias;
};

static struct ivm_error *own_file_read(void *ctx, uint64_t off, void *buf,
				       size_t len)
{
	const struct own_file *f = ctx;
	size_t i;

	if (!f->elf) {
		if (off >= 4096 || len > 4096 - off)
			return ivm_error_fault(off, "executable offset %#llx: headers first",
					       (unsigned long long)off);
		return f->umem->read(f->umem->ctx, f->header + off, buf, len);
	}
	for (i = 0; i < f->elf->nr_loads; i++) {
		const struct ivm_uelf_load *l = &f->elf->loads[i];

		if (off >= l->offset && off - l->offset <= l->filesz &&
		    len <= l->filesz - (off - l->offset))
			return f->umem->read(f->umem->ctx,
					     f->bias + l->vaddr +
					     (off - l->offset), buf, len);
	}
	/* Section headers and the like: in no segment, not in memory. */
	return ivm_error_fault(off, "executable offset %#llx is not loaded",
			       (unsigned long long)off);
}

/*
 * The object of the executable, with an image of the guest's bytes of it
 * (made on first use; a fault leaves it for a later capture).  NULL when
 * the table is full.
 */
static struct ivm_uobject *exe_object(struct ivm_capture_engine *e,
				      const struct mm_binding *b,
				      struct own_file *file)
{
	struct ivm_kmem_reader r = { own_file_read, file };
	struct ivm_uobject *o;
	struct ivm_uimage *im;
	struct ivm_error *err;
	const struct ivm_uelf *elf;

	o = ivm_uobjects_get(e->objects, b->exe.build_id,
			     b->exe.build_id_len, b->exe.dyn);
	if (!o || o->image)
		return o;
	file->elf = NULL;
	err = ivm_uimage_create(&r, &im);
	if (err) {
		ivm_error_destroy(err);
		return o;
	}
	elf = ivm_uimage_elf(im);
	/* The same file as the auxiliary vector's, or none of it. */
	if (elf->build_id_len != o->build_id_len ||
	    memcmp(elf->build_id, o->build_id, o->build_id_len)) {
		ivm_uimage_destroy(im);
		return o;
	}
	o->image = im;
	return o;
}

/*
 * Give the user frames of the sample their object (the executable: a
 * tagged, link-time pc) and note the names the guest's dynamic symbols
 * give them.  Frames outside it stay run-time addresses.
 */
static void tag_frames(struct ivm_capture_engine *e, struct ivm_capture *cap,
		       const struct mm_binding *b, struct ivm_uobject *o,
		       const struct ivm_kmem_reader *file)
{
	const struct ivm_uelf_syms *syms = NULL;
	const struct ivm_uelf *elf;
	uint16_t i;

	if (!o || !o->image)
		return;
	elf = ivm_uimage_elf(o->image);
	for (i = 0; i < cap->sample.nr_user; i++) {
		uint64_t pc = cap->user_addrs[i], vaddr = pc - b->exe.bias;
		uint64_t back = cap->user_flags[i] & IVM_PC_EXACT ? 0 : 1;
		const struct ivm_uelf_sym *sym;
		size_t k;

		for (k = 0; k < elf->nr_loads; k++)
			if ((elf->loads[k].flags & 1 /* PF_X */) &&
			    vaddr - elf->loads[k].vaddr < elf->loads[k].memsz)
				break;
		if (k == elf->nr_loads)
			continue;
		cap->user_pcs[i] = IVM_UPC(o->id, vaddr);
		if (!syms)
			syms = ivm_uimage_syms(o->image, file, b->exe.bias);
		sym = syms ? ivm_uelf_syms_find(syms, vaddr - back) : NULL;
		if (sym)
			ivm_uobjects_note_symbol(e->objects, o, sym->vaddr,
						 sym->size,
						 syms->strtab + sym->name);
	}
	for (i = 0; i < elf->nr_loads; i++)
		if (elf->loads[i].flags & 1 /* PF_X */)
			ivm_uobjects_note_map(e->objects, cap->sample.pid, o,
					      elf->loads[i].vaddr + b->exe.bias,
					      elf->loads[i].vaddr + b->exe.bias +
					      elf->loads[i].memsz,
					      elf->loads[i].offset,
					      b->exe.bias);
}

/* Unwind the user part from regs through the task's page tables. */
static void unwind_user(struct ivm_capture_engine *e,
			const struct ivm_guest_task *task,
			const struct ivm_x86_regs *uregs, struct ivm_capture *cap)
{
	struct ivm_umapping maps[IVM_UBINARY_MAX_EXEC];
	const struct mm_binding *b;
	struct ivm_kmem_reader ureader, file_reader;
	struct own_file file;
	struct ivm_uobject *o = NULL;
	struct ivm_ubinary *host;
	struct ivm_stack st;
	struct ivm_error *err;
	uint64_t cr3;
	size_t nr_maps = 0, i;

	err = ivm_kernel_task_user_cr3(e->guest->layout, task, &cr3);
	if (err) {
		ivm_error_destroy(err);
		cap->sample.stack_flags |= IVM_STACK_NO_USER;
		return;
	}
	e->umem.gmem = e->guest->gmem;
	e->umem.cr3 = cr3;
	e->umem.la57 = e->kmem.la57;
	e->umem.memo = &e->memo;
	ivm_kmem_reader_gmem(&e->umem, &e->umem_reader);
	ivm_kmem_cache_init(&e->ucache, &e->umem_reader, &ureader);
	ivm_stack_init(&st, cap->frames, IVM_SAMPLE_MAX_FRAMES);
	b = binding_of(e, task->mm, cr3, &ureader);
	host = ivm_uexe_cache_get(e->ubins, b->host);
	file = (struct own_file){ &ureader, NULL, b->exe.header, b->exe.bias };
	file_reader = (struct ivm_kmem_reader){ own_file_read, &file };
	if (b->known)
		o = exe_object(e, b, &file);
	if (o && o->image)
		file.elf = ivm_uimage_elf(o->image);
	if (host) {
		nr_maps = ivm_ubinary_mappings(host, b->exe.bias, maps,
					       IVM_UBINARY_MAX_EXEC);
	} else if (file.elf) {
		/* No host copy: the CFI the guest holds. */
		for (i = 0; i < file.elf->nr_loads &&
			    nr_maps < IVM_UBINARY_MAX_EXEC; i++) {
			const struct ivm_uelf_load *l = &file.elf->loads[i];

			if (!(l->flags & 1 /* PF_X */))
				continue;
			maps[nr_maps++] = (struct ivm_umapping){
				.start = l->vaddr + b->exe.bias,
				.end = l->vaddr + b->exe.bias + l->memsz,
				.bias = b->exe.bias, .image = o->image,
				.file = &file_reader };
		}
		cap->exe.guest_cfi = nr_maps > 0;
	}
	describe_exe(cap, b, host && nr_maps ? host : NULL, o);
	if (nr_maps)
		err = ivm_uunwind_dwarf(&ureader, uregs, e->umem.la57, maps,
					nr_maps, &st);
	else
		err = ivm_uunwind_fp(&ureader, uregs, e->umem.la57, &st);
	if (err) {
		ivm_error_destroy(err);
		cap->sample.stack_flags |= IVM_STACK_NO_USER;
		return;
	}
	cap->sample.nr_user = take_frames(&st, 0, cap->user_addrs,
					  cap->user_flags, IVM_FRAME_USER);
	memcpy(cap->user_pcs, cap->user_addrs,
	       cap->sample.nr_user * sizeof(cap->user_pcs[0]));
	cap->sample.stack_flags |= sample_flags(st.flags);
	tag_frames(e, cap, b, o, &file_reader);
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
	/* Runnable is a reason to discard only if the task can run. */
	bool runnable_ok = !regs && (flags & IVM_CAPTURE_F_HELD);
	struct ivm_guest_task after;
	struct ivm_stack_range ranges[IVM_KUNWIND_MAX_STACKS];
	size_t nr_ranges = 1;
	struct ivm_stack st;
	struct ivm_error *err;

	ivm_kmem_cache_invalidate(&e->kcache);
	memset(&cap->sample, 0, sizeof(cap->sample));
	memset(&cap->exe, 0, sizeof(cap->exe));
	cap->sample.kernel_pcs = cap->kernel_pcs;
	cap->sample.user_pcs = cap->user_pcs;
	cap->sample.kernel_flags = cap->kernel_flags;
	cap->sample.user_flags = cap->user_flags;
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
						    cap->kernel_flags,
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
	    (!regs && (after.on_cpu || (after.state == 0 && !runnable_ok)))) {
		cap->outcome = IVM_CAPTURE_DISCARDED_RAN;
		return NULL;
	}
	if (regs)
		cap->sample.stack_flags |= IVM_STACK_INEXACT;
	cap->outcome = IVM_CAPTURE_KEPT;
	return NULL;
}
