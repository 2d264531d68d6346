// SPDX-License-Identifier: MIT
/*
 * The user part of a capture (capture.h): what the target's address space
 * runs, its user stack, and what the sample says of its process.
 */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "profile/capture_int.h"
#include "unwind/uunwind.h"
#include "unwind/uunwind_dwarf.h"

/* Code mappings kept per address space (php-fpm maps about 60). */
#define MAX_CODE_MAPS 512
/*
 * Re-read an address space's mappings at most this often when a pc lies
 * in none of them (a dlopen since, a process caught as it starts).
 */
#define MAPS_REFRESH_NS 200000000ull

/*
 * The user objects' images are held to their bound in bytes every this
 * many user unwinds (uobjects.h), between two: the sum walks them all.
 */
#define IMAGE_BOUND_EVERY 16

/*
 * The user stack is read from rsp's page through this many pages in one
 * batch before the unwind, not page by page as frames reach them: on web01
 * a user unwind missed the page cache 2.2 times (1-5; php-fpm deepest),
 * and with four pages fetched ahead 0.3 times, 0.8 fewer reads of guest
 * memory a sample.  Pages not mapped are left out of the batch.
 */
#define USTACK_PREFETCH_PAGES 4

/* Look every address space up again (the host copies changed). */
static void forget_bindings(struct ivm_capture_engine *e)
{
	size_t i;

	for (i = 0; i < MM_CACHE_SLOTS; i++)
		capture_free_code_maps(&e->mm_cache[i]);
	memset(e->mm_cache, 0, sizeof(e->mm_cache));
}

struct ivm_uobjects *ivm_capture_engine_objects(struct ivm_capture_engine *e)
{
	return e->objects;
}

const struct ivm_capture_user_stats *
ivm_capture_engine_user_stats(const struct ivm_capture_engine *e)
{
	return &e->ustats;
}

/* Count how one user stack ended: st's truncation reason, if any. */
static void count_user_end(struct ivm_capture_user_stats *us, uint32_t flags)
{
	us->unwinds++;
	if (flags & IVM_STACK_TRUNCATED_FAULT)
		us->fault++;
	else if (flags & IVM_STACK_TRUNCATED_CAP)
		us->cap++;
	else if (flags & IVM_STACK_TRUNCATED_LOOP)
		us->loop++;
	else if (flags & (IVM_STACK_TRUNCATED_BAD_ORC |
			  IVM_STACK_TRUNCATED_BOUNDS))
		us->bad_cfi++;
	else if (flags & IVM_STACK_TRUNCATED_NO_CFI)
		us->no_cfi++;
}

struct ivm_error *ivm_capture_engine_add_binary(struct ivm_capture_engine *e,
						const char *path)
{
	struct ivm_error *err = ivm_uexe_cache_add(e->ubins, path);

	if (err)
		return err;
	e->nr_binaries++;
	forget_bindings(e);
	return NULL;
}

struct ivm_error *ivm_capture_engine_set_symdir(struct ivm_capture_engine *e,
						const char *dir)
{
	struct ivm_error *err = ivm_uexe_cache_set_dir(e->ubins, dir);

	if (err)
		return err;
	e->has_symdir = dir != NULL;
	forget_bindings(e);
	return NULL;
}

void capture_free_code_maps(struct mm_binding *b)
{
	ivm_mm_maps_destroy(b->vmas);
	free(b->code);
	b->vmas = NULL;
	b->code = NULL;
	b->nr_code = 0;
	b->maps_ns = 0;
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
static struct mm_binding *binding_of(struct ivm_capture_engine *e,
					   uint64_t mm, uint64_t cr3,
					   const struct ivm_kmem_reader *ureader)
{
	struct mm_binding *slot = &e->mm_cache[ivm_assoc_pick(
		&e->mm_assoc, e->mm_cache, sizeof(e->mm_cache[0]),
		offsetof(struct mm_binding, mm), MM_CACHE_SLOTS, e->mm_used,
		mm)];
	uint8_t auxv[IVM_UEXE_MAX_AUXV * 16];
	struct ivm_error *err;
	bool retry = false;

	if (slot->mm == mm && slot->cr3 == cr3)
		return slot;
	capture_free_code_maps(slot);
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
	/* The reader fell back to the files: a fork child's executable. */
	slot->from_file = e->has_maps && e->fuser.file_pages;
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

	o = ivm_uobjects_get(e->objects, b->exe.build_id,
			     b->exe.build_id_len, b->exe.dyn, NULL);
	if (!o)
		return NULL;
	/* The same file as the auxiliary vector's, or none of it. */
	file->elf = NULL;
	ivm_uobjects_image(e->objects, o, &r);
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

/* ---- the code mappings of an address space ------------------------------ */

/*
 * The object of guest file f, whose bytes r reads: known by the file's
 * identity once looked at; else its headers are read (uimage) and it is
 * numbered by build-id.  NULL for a file that is no ELF object with a
 * build-id, or whose headers the guest does not hold (tried again later).
 */
static struct ivm_uobject *file_object(struct ivm_capture_engine *e,
				       const struct ivm_vma *vma,
				       const struct ivm_kmem_reader *r)
{
	const struct ivm_guest_file *f = &vma->file;
	struct file_object *fo = NULL;
	struct ivm_uobject *o;
	struct ivm_uimage *im;
	const struct ivm_uelf *elf;
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < e->nr_files; i++) {
		fo = &e->files[i];
		if (fo->inode == f->inode && fo->ino == f->ino &&
		    fo->dev == f->dev && fo->generation == f->generation) {
			/* Its image may have been dropped (the bound). */
			if (fo->obj)
				ivm_uobjects_image(e->objects, fo->obj, r);
			return fo->obj;
		}
	}
	err = ivm_uimage_create(r, &im);
	if (err) {
		bool absent = err->code == IVM_ERROR_FAULT;

		ivm_error_destroy(err);
		if (absent)
			return NULL;
		im = NULL;
	}
	o = NULL;
	elf = im ? ivm_uimage_elf(im) : NULL;
	if (elf && elf->build_id_len)
		o = ivm_uobjects_get(e->objects, elf->build_id,
				     elf->build_id_len, elf->type == ET_DYN,
				     vma->path &&
				     vma->path_state == IVM_VMA_PATH_FULL ?
				     vma->path : NULL);
	if (o)
		ivm_uobjects_adopt(e->objects, o, im);
	else
		ivm_uimage_destroy(im);
	if (e->nr_files < MAX_FILES) {
		fo = &e->files[e->nr_files++];
		*fo = (struct file_object){ f->inode, f->ino, f->dev,
					    f->generation, o };
	}
	return o;
}

/*
 * The vDSO, which the kernel maps into every process (a special mapping,
 * no file): its ELF image is its memory, linked at 0, so an offset in the
 * image is an offset from the mapping's start, read through the process's
 * page tables (all of it is mapped at exec).  Its CFI and .dynsym then
 * unwind and name a task caught in it, as for a library.
 */
#define VDSO_NAME "[vdso]"
#define VDSO_MAX (64u * 1024)

static struct ivm_error *vdso_read(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	const struct code_map *c = ctx;
	const struct ivm_kmem_reader *umem = c->space->umem;

	if (off > c->end - c->start || len > c->end - c->start - off)
		return ivm_error_fault(off, "past the vDSO's end");
	return umem->read(umem->ctx, c->start + off, buf, len);
}

static bool is_vdso(const struct ivm_vma *v)
{
	return !ivm_vma_is_file(v) && v->name && !strcmp(v->name, VDSO_NAME) &&
	       (v->prot & IVM_VMA_EXEC) && v->end - v->start <= VDSO_MAX;
}

/* Its object, by build-id (every process maps the same one). */
static struct ivm_uobject *vdso_object(struct ivm_capture_engine *e,
				       const struct ivm_kmem_reader *r)
{
	struct ivm_uimage *im;
	const struct ivm_uelf *elf;
	struct ivm_uobject *o = NULL;
	struct ivm_error *err;

	if (e->vdso) {
		ivm_uobjects_image(e->objects, e->vdso, r);
		return e->vdso;
	}
	err = ivm_uimage_create(r, &im);
	if (err) {
		ivm_error_destroy(err);
		return NULL;
	}
	elf = ivm_uimage_elf(im);
	if (elf->build_id_len)
		o = ivm_uobjects_get(e->objects, elf->build_id,
				     elf->build_id_len, elf->type == ET_DYN,
				     VDSO_NAME);
	if (o)
		ivm_uobjects_adopt(e->objects, o, im);
	else
		ivm_uimage_destroy(im);
	e->vdso = o;
	return o;
}

/* Whether v maps a file's code (the vDSO is looked at first, apart). */
static bool is_code(const struct ivm_vma *v)
{
	return is_vdso(v) || (ivm_vma_is_file(v) && (v->prot & IVM_VMA_EXEC));
}

/*
 * Read the VMAs of the binding's address space and make a code map of
 * each executable file mapping.  A failed read leaves the maps empty: the
 * executable is still known by its auxiliary vector.
 */
static void read_code_maps(struct ivm_capture_engine *e, struct mm_binding *b,
			   uint64_t mm, const struct ivm_kmem_reader *umem)
{
	struct ivm_error *err;
	size_t i, n, nr;

	capture_free_code_maps(b);
	b->maps_ns = ivm_mono_ns();
	err = ivm_mm_maps_read(&e->mm_src, mm, 0, &b->vmas);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	n = ivm_mm_maps_count(b->vmas);
	/*
	 * Room for the code mappings alone: a binding is kept while its slot
	 * is (256 of them), and php-fpm's hundreds of mappings have a few
	 * dozen that hold code.
	 */
	for (i = 0, nr = 0; i < n; i++)
		nr += is_code(ivm_mm_maps_get(b->vmas, i));
	b->code = calloc(nr < MAX_CODE_MAPS ? (nr ? nr : 1) : MAX_CODE_MAPS,
			 sizeof(*b->code));
	if (!b->code)
		return;
	b->space.maps = b->vmas;
	b->space.umem = umem;
	for (i = 0; i < n && b->nr_code < MAX_CODE_MAPS; i++) {
		const struct ivm_vma *v = ivm_mm_maps_get(b->vmas, i);
		struct code_map *c = &b->code[b->nr_code];

		if (is_vdso(v)) {
			*c = (struct code_map){ .start = v->start,
						.end = v->end,
						.space = &b->space };
			c->reader = (struct ivm_kmem_reader){ vdso_read, c };
			c->obj = vdso_object(e, &c->reader);
			if (!c->obj || !c->obj->image ||
			    !ivm_uelf_bias(ivm_uimage_elf(c->obj->image),
					   c->start, 0, &c->bias))
				continue;
			b->nr_code++;
			continue;
		}
		if (!is_code(v))
			continue;
		c->start = v->start;
		c->end = v->end;
		c->pgoff = v->pgoff;
		c->file = v->file;
		c->gf = (struct ivm_gfile_file){ .g = e->gfile,
						 .file = &c->file,
						 .own = &b->space };
		ivm_gfile_file_reader(&c->gf, &c->reader);
		c->obj = file_object(e, v, &c->reader);
		if (!c->obj || !c->obj->image ||
		    !ivm_uelf_bias(ivm_uimage_elf(c->obj->image), c->start,
				   c->pgoff, &c->bias))
			continue;
		b->nr_code++;
	}
}

void ivm_capture_engine_age_maps(struct ivm_capture_engine *e, uint64_t now)
{
	size_t i;

	if (!e->maps_aged_ns) {
		e->maps_aged_ns = now;
		return;
	}
	if (now - e->maps_aged_ns < IVM_CAPTURE_MAPS_IDLE_NS)
		return;
	/* A slot's stamp is its last pick: a capture in that process. */
	for (i = 0; i < MM_CACHE_SLOTS; i++) {
		struct mm_binding *b = &e->mm_cache[i];

		if ((b->vmas || b->code) &&
		    e->mm_used[i] <= e->maps_aged_tick) {
			capture_free_code_maps(b);
			e->maps_dropped++;
		}
	}
	e->maps_aged_tick = e->mm_assoc.tick;
	e->maps_aged_ns = now;
}

void ivm_capture_engine_maps_stats(const struct ivm_capture_engine *e,
				   struct ivm_capture_maps_stats *ret)
{
	size_t i;

	memset(ret, 0, sizeof(*ret));
	for (i = 0; i < MM_CACHE_SLOTS; i++) {
		const struct mm_binding *b = &e->mm_cache[i];

		if (!b->vmas)
			continue;
		ret->spaces++;
		ret->bytes += ivm_mm_maps_memory(b->vmas) +
			      b->nr_code * sizeof(*b->code);
	}
	ret->dropped = e->maps_dropped;
}

static struct code_map *code_map_at(struct mm_binding *b, uint64_t pc)
{
	size_t i;

	for (i = 0; i < b->nr_code; i++)
		if (pc >= b->code[i].start && pc < b->code[i].end)
			return &b->code[i];
	return NULL;
}

/*
 * The code maps of b, read on first use and again when the pc the unwind
 * starts at is in none of them, at most every MAPS_REFRESH_NS.
 */
static void ensure_code_maps(struct ivm_capture_engine *e,
			     struct mm_binding *b, uint64_t mm, uint64_t pc,
			     const struct ivm_kmem_reader *umem)
{
	if (!e->has_maps)
		return;
	b->space.umem = umem;
	if (b->maps_ns && (code_map_at(b, pc) ||
			   ivm_mono_ns() - b->maps_ns < MAPS_REFRESH_NS))
		return;
	read_code_maps(e, b, mm, umem);
}

/*
 * Tag the user frames that fall in a code map with its object and
 * link-time address, note the names the guest's dynamic symbols give
 * them and where this process has each object.
 */
static void tag_code_frames(struct ivm_capture_engine *e,
			    struct ivm_capture *cap, struct mm_binding *b)
{
	uint16_t i;

	for (i = 0; i < cap->sample.nr_user; i++) {
		uint64_t pc = cap->user_addrs[i];
		uint64_t back = cap->user_flags[i] & IVM_PC_EXACT ? 0 : 1;
		struct code_map *c = code_map_at(b, pc - back);
		const struct ivm_uelf_syms *syms;
		const struct ivm_uelf_sym *sym;

		if (!c)
			continue;
		cap->user_pcs[i] = IVM_UPC(c->obj->id, pc - c->bias);
		ivm_uobjects_note_map(e->objects, cap->sample.pid, c->obj,
				      c->start, c->end, c->pgoff, c->bias);
		syms = c->obj->image ? ivm_uimage_syms(c->obj->image,
						       &c->reader, c->bias) :
				       NULL;
		sym = syms ? ivm_uelf_syms_find(syms, pc - c->bias - back) :
			     NULL;
		if (sym)
			ivm_uobjects_note_symbol(e->objects, c->obj, sym->vaddr,
						 sym->size,
						 syms->strtab + sym->name);
	}
}

/*
 * The objects of b whose CFI rows faulted (the guest did not hold their
 * bytes) get a range to have the guest read: from .eh_frame_hdr to the
 * end of its segment (.eh_frame follows it there), once a run.  The
 * rows faulted in some process; what is asked is the file as this one
 * maps it.
 */
static void want_readaheads(struct ivm_capture_engine *e,
			    const struct ivm_guest_task *task,
			    struct mm_binding *b)
{
	size_t i, k;

	for (i = 0; i < b->nr_code; i++) {
		struct code_map *c = &b->code[i];
		struct ivm_capture_readahead *ra;
		const struct ivm_uelf *elf;
		uint64_t in;

		/* Files only: the vDSO is all in memory. */
		if (c->obj->readahead || !c->obj->path || c->space ||
		    !c->obj->image || !ivm_uimage_faults(c->obj->image))
			continue;
		elf = ivm_uimage_elf(c->obj->image);
		for (k = 0; k < elf->nr_loads; k++)
			if (elf->eh.vaddr - elf->loads[k].vaddr <
			    elf->loads[k].filesz)
				break;
		if (!elf->eh.vaddr || k == elf->nr_loads) {
			c->obj->readahead = true;	/* nothing to ask */
			continue;
		}
		if (e->nr_readaheads == IVM_CAPTURE_MAX_READAHEADS)
			return;
		in = elf->eh.vaddr - elf->loads[k].vaddr;
		ra = &e->readaheads[e->nr_readaheads];
		*ra = (struct ivm_capture_readahead){
			.pid = task->tgid, .path = strdup(c->obj->path),
			.inode = c->file.ino,
			.offset = elf->loads[k].offset + in,
			.length = elf->loads[k].filesz - in,
		};
		if (!ra->path)
			return;
		if (ra->length > IVM_CAPTURE_READAHEAD_MAX)
			ra->length = IVM_CAPTURE_READAHEAD_MAX;
		e->nr_readaheads++;
		c->obj->readahead = true;
	}
}

bool ivm_capture_engine_take_readahead(struct ivm_capture_engine *e,
				       struct ivm_capture_readahead *ret)
{
	if (!e->nr_readaheads)
		return false;
	*ret = e->readaheads[--e->nr_readaheads];
	return true;
}

/*
 * A cached reader of the task's user memory (its own page tables) into
 * *ret, made once per capture (e->user_task says for which task).  False
 * for a task without user memory.
 */
static bool user_reader(struct ivm_capture_engine *e,
			const struct ivm_guest_task *task,
			struct ivm_kmem_reader *ret)
{
	struct ivm_error *err;
	uint64_t cr3;

	if (e->user_task == task->addr) {
		*ret = e->ucache_reader;
		return true;
	}
	/* Its pgd came with the task when the capture's guess held. */
	if (e->user_pgd_mm && e->user_pgd_mm == task->mm)
		err = ivm_kernel_user_cr3_of_pgd(e->guest->layout, task,
						 e->user_pgd, &cr3);
	else
		err = ivm_kernel_task_user_cr3(e->guest->layout, task, &cr3);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	e->umem.gmem = e->guest->gmem;
	e->umem.cr3 = cr3;
	e->umem.la57 = e->kmem.la57;
	e->umem.memo = &e->memo;
	ivm_kmem_cache_init_gmem(&e->ucache, &e->umem, &e->ucache_reader);
	e->user_task = task->addr;
	*ret = e->ucache_reader;
	return true;
}

/* Unwind the user part from regs through the task's page tables. */
void capture_unwind_user(struct ivm_capture_engine *e,
			 const struct ivm_guest_task *task,
			 const struct ivm_x86_regs *uregs,
			 struct ivm_capture *cap)
{
	struct ivm_umapping maps[MAX_CODE_MAPS];
	struct mm_binding *b;
	struct ivm_kmem_reader ureader, pt_reader, file_reader;
	struct own_file file;
	struct ivm_uobject *o = NULL;
	struct ivm_ubinary *host;
	struct ivm_stack st;
	struct ivm_error *err;
	uint64_t cr3;
	size_t nr_maps = 0, i;

	if (!user_reader(e, task, &pt_reader)) {
		e->ustats.no_reader++;
		cap->sample.stack_flags |= IVM_STACK_NO_USER;
		return;
	}
	/* Before any image is looked at: the bound may free some. */
	if (!(e->unwinds++ % IMAGE_BOUND_EVERY))
		ivm_uobjects_bound(e->objects, IVM_UOBJECTS_IMAGE_BYTES);
	cr3 = e->umem.cr3;
	ureader = pt_reader;
	if (e->has_maps) {
		/*
		 * Pages the page tables lack (a fork child's untouched
		 * executable pages) read as the file's, from the page cache.
		 */
		e->fuser = (struct ivm_gfile_user){ .g = e->gfile,
						    .src = &e->mm_src,
						    .mm = task->mm,
						    .umem = &pt_reader };
		ivm_gfile_user_reader(&e->fuser, &ureader);
	}
	ivm_stack_init(&st, cap->frames, IVM_SAMPLE_MAX_FRAMES);
	b = binding_of(e, task->mm, cr3, &ureader);
	ensure_code_maps(e, b, task->mm, uregs->rip, &pt_reader);
	host = ivm_uexe_cache_get(e->ubins, b->host);
	file = (struct own_file){ &ureader, NULL, b->exe.header, b->exe.bias };
	file_reader = (struct ivm_kmem_reader){ own_file_read, &file };
	if (host) {
		/* The host copy of the executable: its CFI, as before. */
		nr_maps = ivm_ubinary_mappings(host, b->exe.bias, maps,
					       IVM_UBINARY_MAX_EXEC);
	}
	if (b->nr_code) {
		/*
		 * The images of this process's objects, made again if the
		 * bound dropped them; only their headers are read now.
		 */
		for (i = 0; i < b->nr_code; i++)
			ivm_uobjects_image(e->objects, b->code[i].obj,
					   &b->code[i].reader);
		/* Every other code mapping by the CFI the guest holds. */
		for (i = 0; i < b->nr_code && nr_maps < MAX_CODE_MAPS; i++) {
			struct code_map *c = &b->code[i];
			size_t k;

			if (!c->obj->image)	/* its headers not held now */
				continue;
			for (k = 0; host && k < nr_maps; k++)
				if (maps[k].binary && c->start < maps[k].end &&
				    maps[k].start < c->end)
					break;
			if (host && k < nr_maps)
				continue;
			maps[nr_maps++] = (struct ivm_umapping){
				.start = c->start, .end = c->end,
				.bias = c->bias, .image = c->obj->image,
				.file = &c->reader,
				.file_sources = c->space ? NULL :
						&c->gf.sources };
			if (b->known && c->obj->build_id_len ==
			    b->exe.build_id_len &&
			    !memcmp(c->obj->build_id, b->exe.build_id,
				    b->exe.build_id_len)) {
				o = c->obj;
				cap->exe.guest_cfi = !host;
			}
		}
	} else if (b->known) {
		/* No VMAs: the executable alone, by its auxiliary vector. */
		o = exe_object(e, b, &file);
		if (o && o->image)
			file.elf = ivm_uimage_elf(o->image);
		for (i = 0; !host && file.elf && i < file.elf->nr_loads &&
			    nr_maps < IVM_UBINARY_MAX_EXEC; i++) {
			const struct ivm_uelf_load *l = &file.elf->loads[i];

			if (!(l->flags & 1 /* PF_X */))
				continue;
			maps[nr_maps++] = (struct ivm_umapping){
				.start = l->vaddr + b->exe.bias,
				.end = l->vaddr + b->exe.bias + l->memsz,
				.bias = b->exe.bias, .image = o->image,
				.file = &file_reader };
			cap->exe.guest_cfi = true;
		}
	}
	describe_exe(cap, b, host, o);
	ivm_kmem_cache_prefetch(&e->ucache, uregs->rsp,
				USTACK_PREFETCH_PAGES * 4096ull -
				(uregs->rsp & 4095));
	if (nr_maps)
		err = ivm_uunwind_dwarf(&ureader, uregs, e->umem.la57, maps,
					nr_maps, &st);
	else
		err = ivm_uunwind_fp(&ureader, uregs, e->umem.la57, &st);
	if (err) {
		/* The unwinder refused what it read: counted, not kept. */
		e->ustats.errors++;
		ivm_error_destroy(err);
		cap->sample.stack_flags |= IVM_STACK_NO_USER;
		return;
	}
	count_user_end(&e->ustats, st.flags);
	cap->sample.nr_user = capture_take_frames(&st, 0, cap->user_addrs,
						  cap->user_flags,
						  IVM_FRAME_USER);
	memcpy(cap->user_pcs, cap->user_addrs,
	       cap->sample.nr_user * sizeof(cap->user_pcs[0]));
	cap->sample.stack_flags |= capture_sample_flags(st.flags);
	if (b->nr_code) {
		tag_code_frames(e, cap, b);
		want_readaheads(e, task, b);
	} else
		tag_frames(e, cap, b, o, &file_reader);
}

/*
 * What the sample says of the task beyond its stack, read while the task
 * is held as its stack is: its process's name and title.
 */
void capture_read_context(struct ivm_capture_engine *e,
			  struct ivm_capture *cap)
{
	struct ivm_proc_info_task t = {
		.addr = cap->task.addr, .pid = (uint32_t)cap->task.pid,
		.tgid = (uint32_t)cap->task.tgid, .comm = cap->task.comm,
		.mm = cap->task.mm,
	};
	struct ivm_kmem_reader ureader;
	const struct mm_binding *b;
	uint64_t now = ivm_mono_ns();
	size_t nr = 0;

	if (!cap->task.mm || !user_reader(e, &cap->task, &ureader))
		return;
	t.cr3 = e->umem.cr3;
	if (e->procs)
		ivm_proc_info_cache_get(e->procs, &e->kmem_reader, &ureader,
					e->umem.la57, &t, now, &cap->process);
	if (!e->labels)
		return;
	/* The executable, as the user unwind found it (or would have). */
	b = binding_of(e, cap->task.mm, t.cr3, &ureader);
	{
		struct ivm_ubinary *host = ivm_uexe_cache_get(e->ubins, b->host);
		struct ivm_label_target lt = {
			.pid = t.tgid, .tid = t.pid, .mm = t.mm, .cr3 = t.cr3,
			.fsbase = cap->task.fsbase,
			.exe = b->known ? &b->exe : NULL,
			.host_path = host ? ivm_ubinary_path(host) : NULL,
			.umem = &ureader,
		};

		ivm_labels_read(e->labels, &lt, now,
				cap->labels + cap->sample.nr_labels, &nr);
	}
	if (nr) {
		cap->sample.nr_labels += (uint16_t)nr;
		cap->sample.labels = cap->labels;
	}
}
