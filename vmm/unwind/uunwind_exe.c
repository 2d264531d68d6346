// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/bytes.h"
#include "unwind/uelf.h"
#include "unwind/uunwind_exe.h"

#define PAGE_SIZE_4K 4096ull
#define PAGE_MASK_4K (~(PAGE_SIZE_4K - 1))

/* ---- the executable in guest memory ------------------------------------- */

static bool user_addr(uint64_t va, uint64_t len, int la57)
{
	uint64_t max = la57 ? IVM_USER_ADDR_MAX_LA57 : IVM_USER_ADDR_MAX;

	return va >= PAGE_SIZE_4K && len <= max && va <= max - len;
}

_Static_assert(IVM_UBINARY_MAX_BUILD_ID >= IVM_UELF_MAX_BUILD_ID,
	       "a build-id uelf accepts fits struct ivm_uexe");

struct auxv_info {
	uint64_t phdr, phent, phnum;
};

static void parse_auxv(const uint8_t *auxv, size_t len, struct auxv_info *a)
{
	size_t i, n = len / 16;

	memset(a, 0, sizeof(*a));
	if (n > IVM_UEXE_MAX_AUXV)
		n = IVM_UEXE_MAX_AUXV;
	for (i = 0; i < n; i++) {
		uint64_t type = ivm_le64(auxv + 16 * i);
		uint64_t val = ivm_le64(auxv + 16 * i + 8);

		if (type == AT_NULL)
			break;
		if (type == AT_PHDR)
			a->phdr = val;
		else if (type == AT_PHENT)
			a->phent = val;
		else if (type == AT_PHNUM)
			a->phnum = val;
	}
}

struct ivm_error *ivm_uexe_identify(const struct ivm_kmem_reader *umem,
				    const uint8_t *auxv, size_t auxv_len,
				    int la57, struct ivm_uexe *ret)
{
	uint8_t ehdr[sizeof(Elf64_Ehdr)];
	uint8_t phdrs[IVM_UEXE_MAX_PHNUM * sizeof(Elf64_Phdr)];
	uint8_t notes[IVM_UEXE_MAX_NOTES];
	struct auxv_info a;
	struct ivm_uelf elf;
	struct ivm_error *err;
	uint64_t hdr, phoff, base = UINT64_MAX, phdr_vaddr = UINT64_MAX;
	uint16_t type;
	size_t i;

	if (!umem || !auxv || !ret)
		return ivm_error_create(IVM_ERROR_INVALID,
					"executable: bad arguments");
	memset(ret, 0, sizeof(*ret));
	parse_auxv(auxv, auxv_len, &a);
	if (!a.phdr || !a.phnum)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no AT_PHDR in the auxiliary vector");
	if ((a.phent && a.phent != sizeof(Elf64_Phdr)) ||
	    a.phnum > IVM_UEXE_MAX_PHNUM ||
	    !user_addr(a.phdr, a.phnum * sizeof(Elf64_Phdr), la57))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"auxiliary vector: %llu program headers of %llu bytes at %#llx",
					(unsigned long long)a.phnum,
					(unsigned long long)a.phent,
					(unsigned long long)a.phdr);
	/*
	 * File offset 0 starts a page-aligned mapping and the program
	 * headers follow the ELF header within the first page in every
	 * linker's layout; e_phoff must then say exactly where they are.
	 */
	hdr = a.phdr & PAGE_MASK_4K;
	err = umem->read(umem->ctx, hdr, ehdr, sizeof(ehdr));
	if (err)
		return err;
	phoff = ivm_le64(ehdr + offsetof(Elf64_Ehdr, e_phoff));
	type = (uint16_t)ivm_le_load(ehdr + offsetof(Elf64_Ehdr, e_type), 2);
	if (memcmp(ehdr, ELFMAG, SELFMAG) || ehdr[EI_CLASS] != ELFCLASS64 ||
	    ehdr[EI_DATA] != ELFDATA2LSB ||
	    ivm_le_load(ehdr + offsetof(Elf64_Ehdr, e_machine), 2) !=
	    EM_X86_64 || (type != ET_EXEC && type != ET_DYN) ||
	    phoff != a.phdr - hdr ||
	    ivm_le_load(ehdr + offsetof(Elf64_Ehdr, e_phnum), 2) != a.phnum ||
	    ivm_le_load(ehdr + offsetof(Elf64_Ehdr, e_phentsize), 2) !=
	    sizeof(Elf64_Phdr))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"no x86-64 executable ELF header matching AT_PHDR %#llx at %#llx",
					(unsigned long long)a.phdr,
					(unsigned long long)hdr);
	ret->header = hdr;
	ret->dyn = type == ET_DYN;
	err = umem->read(umem->ctx, a.phdr, phdrs,
			 a.phnum * sizeof(Elf64_Phdr));
	if (err)
		return err;
	err = ivm_uelf_parse_phdrs(phdrs, a.phnum, &elf, &phdr_vaddr);
	if (err)
		return err;
	for (i = 0; i < elf.nr_loads; i++) {
		const struct ivm_uelf_load *l = &elf.loads[i];

		/* The segment that maps file offset 0 places the header. */
		if ((l->offset & PAGE_MASK_4K) == 0 && base == UINT64_MAX)
			base = l->vaddr & PAGE_MASK_4K;
		if (!(l->flags & PF_X))
			continue;
		if (ret->nr_exec == IVM_UBINARY_MAX_EXEC)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"more than %d executable segments",
						IVM_UBINARY_MAX_EXEC);
		ret->exec[ret->nr_exec++] = (struct ivm_ubinary_segment){
			l->vaddr, l->memsz, l->offset };
	}
	if (base == UINT64_MAX || !ret->nr_exec)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"guest program headers: no code, or nothing maps the ELF header");
	/* Unsigned wrap is the arithmetic of a bias. */
	ret->bias = hdr - base;
	if (!ret->dyn && ret->bias)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"a fixed-address executable whose header is %#llx off its link address",
					(unsigned long long)ret->bias);
	if (phdr_vaddr != UINT64_MAX && ret->bias + phdr_vaddr != a.phdr)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"PT_PHDR %#llx at bias %#llx is not AT_PHDR %#llx",
					(unsigned long long)phdr_vaddr,
					(unsigned long long)ret->bias,
					(unsigned long long)a.phdr);
	for (i = 0; i < a.phnum; i++) {
		const uint8_t *p = phdrs + i * sizeof(Elf64_Phdr);
		uint64_t va, len, filesz = ivm_le64(p + 32);

		if (ivm_le32(p) != PT_NOTE || !filesz)
			continue;
		len = filesz < sizeof(notes) ? filesz : sizeof(notes);
		va = ivm_le64(p + 16) + ret->bias;
		if (!user_addr(va, len, la57))
			continue;
		err = umem->read(umem->ctx, va, notes, len);
		if (err) {
			ivm_error_destroy(err);
			continue;
		}
		ret->build_id_len = ivm_uelf_find_build_id(notes, len,
							    ret->build_id);
		if (ret->build_id_len)
			return NULL;
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"the executable at %#llx has no build-id note",
				(unsigned long long)hdr);
}

struct ivm_error *ivm_uexe_file_build_id(const struct ivm_kmem_reader *file,
					 uint8_t id[IVM_UBINARY_MAX_BUILD_ID],
					 size_t *len)
{
	struct ivm_error *err;
	struct ivm_uelf elf;

	/* One parser of ELF headers and notes: uelf's. */
	err = ivm_uelf_parse(file, &elf);
	if (err && err->code == IVM_ERROR_PROTOCOL) {
		struct ivm_error *nf = ivm_error_create(IVM_ERROR_NOT_FOUND,
							"no ELF file with program headers: %s",
							ivm_error_string(err));

		ivm_error_destroy(err);
		return nf;
	}
	if (err)
		return err;
	if (!elf.build_id_len && elf.build_id_fault != UINT64_MAX)
		return ivm_error_fault(elf.build_id_fault,
				       "the ELF file's notes at offset %#llx are not held",
				       (unsigned long long)elf.build_id_fault);
	if (!elf.build_id_len)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"the ELF file has no build-id note");
	memcpy(id, elf.build_id, elf.build_id_len);
	*len = elf.build_id_len;
	return NULL;
}

struct ivm_error *ivm_uexe_check(const struct ivm_uexe *x,
				 const struct ivm_ubinary *b)
{
	const uint8_t *id;
	struct ivm_error *err;
	uint64_t bias;
	size_t len, i, j;

	if (!ivm_ubinary_build_id(b, &id, &len) || len != x->build_id_len ||
	    memcmp(id, x->build_id, len))
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: another build-id",
					ivm_ubinary_path(b));
	if (ivm_ubinary_is_dyn(b) != x->dyn)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: the guest runs it as %s",
					ivm_ubinary_path(b),
					x->dyn ? "ET_DYN" : "ET_EXEC");
	if (ivm_ubinary_nr_exec(b) != x->nr_exec)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: %zu executable segments, the guest's copy %zu",
					ivm_ubinary_path(b),
					ivm_ubinary_nr_exec(b), x->nr_exec);
	for (i = 0; i < x->nr_exec; i++) {
		const struct ivm_ubinary_segment *s = ivm_ubinary_exec(b, i);

		for (j = 0; j < x->nr_exec; j++)
			if (x->exec[j].vaddr == s->vaddr &&
			    x->exec[j].memsz == s->memsz &&
			    x->exec[j].offset == s->offset)
				break;
		if (j == x->nr_exec)
			return ivm_error_create(IVM_ERROR_INVALID,
						"%s: code segment at %#llx is not the guest's",
						ivm_ubinary_path(b),
						(unsigned long long)s->vaddr);
	}
	err = ivm_ubinary_bias(b, x->header, 0, &bias);
	if (err)
		return err;
	if (bias != x->bias)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: its headers give bias %#llx, the guest %#llx",
					ivm_ubinary_path(b),
					(unsigned long long)bias,
					(unsigned long long)x->bias);
	return NULL;
}

char *ivm_build_id_hex(const uint8_t *id, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[2 * len] = '\0';
	return out;
}

char *ivm_uexe_symdir_path(const char *dir, const uint8_t *id, size_t len,
			   bool debug)
{
	char hex[2 * IVM_UBINARY_MAX_BUILD_ID + 1];
	char *path;

	if (!dir || len < 2 || len > IVM_UBINARY_MAX_BUILD_ID)
		return NULL;
	ivm_build_id_hex(id, len, hex);
	if (asprintf(&path, "%s/.build-id/%.2s/%s%s", dir, hex, hex + 2,
		     debug ? ".debug" : "") < 0)
		return NULL;
	return path;
}

/* ---- host binaries by build-id ------------------------------------------ */

struct cache_entry {
	struct ivm_ubinary *ubin;	/* NULL: free */
	uint32_t generation;		/* bumped when the slot is reused */
	uint64_t last_use;
};

struct miss {
	uint8_t len;
	uint8_t id[IVM_UBINARY_MAX_BUILD_ID];
};

/* Slots: explicit binaries first, then the symdir's. */
#define NR_SLOTS (IVM_UEXE_CACHE_EXPLICIT + IVM_UEXE_CACHE_SYMDIR)

struct ivm_uexe_cache {
	char *dir;
	struct cache_entry slots[NR_SLOTS];
	size_t nr_explicit;
	struct miss misses[IVM_UEXE_CACHE_MISSES];
	size_t nr_misses, next_miss;
	uint64_t tick;
	struct ivm_uexe_cache_stats stats;
};

struct ivm_error *ivm_uexe_cache_set_dir(struct ivm_uexe_cache *c,
					 const char *dir)
{
	struct stat st;
	char *copy = NULL;

	if (dir) {
		if (stat(dir, &st))
			return ivm_error_os(errno, "symbol directory %s", dir);
		if (!S_ISDIR(st.st_mode))
			return ivm_error_create(IVM_ERROR_INVALID,
						"symbol directory %s: not a directory",
						dir);
		copy = strdup(dir);
		if (!copy)
			return &ivm_enomem;
	}
	free(c->dir);
	c->dir = copy;
	c->nr_misses = 0;
	c->next_miss = 0;
	return NULL;
}

struct ivm_error *ivm_uexe_cache_create(const char *dir,
					struct ivm_uexe_cache **ret)
{
	struct ivm_uexe_cache *c = calloc(1, sizeof(*c));
	struct ivm_error *err;

	if (!c)
		return &ivm_enomem;
	err = ivm_uexe_cache_set_dir(c, dir);
	if (err) {
		free(c);
		return err;
	}
	*ret = c;
	return NULL;
}

void ivm_uexe_cache_destroy(struct ivm_uexe_cache *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < NR_SLOTS; i++)
		ivm_ubinary_destroy(c->slots[i].ubin);
	free(c->dir);
	free(c);
}

struct ivm_error *ivm_uexe_cache_add(struct ivm_uexe_cache *c,
				     const char *path)
{
	struct ivm_ubinary *b;
	struct ivm_error *err;
	const uint8_t *id;
	size_t len;

	if (c->nr_explicit == IVM_UEXE_CACHE_EXPLICIT)
		return ivm_error_create(IVM_ERROR_INVALID, "at most %d binaries",
					IVM_UEXE_CACHE_EXPLICIT);
	err = ivm_ubinary_open(path, &b);
	if (err)
		return err;
	if (!ivm_ubinary_build_id(b, &id, &len) || len < 8) {
		ivm_ubinary_destroy(b);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: no build-id: cannot tell whether the guest runs it",
					path);
	}
	c->slots[c->nr_explicit++].ubin = b;
	return NULL;
}

struct ivm_ubinary *ivm_uexe_cache_explicit(const struct ivm_uexe_cache *c,
					    size_t i)
{
	return i < c->nr_explicit ? c->slots[i].ubin : NULL;
}

static bool same_id(const struct ivm_ubinary *b, const struct ivm_uexe *x)
{
	const uint8_t *id;
	size_t len;

	return b && ivm_ubinary_build_id(b, &id, &len) &&
	       len == x->build_id_len && !memcmp(id, x->build_id, len);
}

static struct ivm_uexe_handle handle_of(struct ivm_uexe_cache *c, size_t i)
{
	c->slots[i].last_use = ++c->tick;
	return (struct ivm_uexe_handle){ (int)i, c->slots[i].generation };
}

static void remember_miss(struct ivm_uexe_cache *c, const struct ivm_uexe *x)
{
	struct miss *m = &c->misses[c->next_miss];

	m->len = (uint8_t)x->build_id_len;
	memcpy(m->id, x->build_id, x->build_id_len);
	c->next_miss = (c->next_miss + 1) % IVM_UEXE_CACHE_MISSES;
	if (c->nr_misses < IVM_UEXE_CACHE_MISSES)
		c->nr_misses++;
}

/* Open dir's file for x (the executable, or its .debug) if it fits x. */
static struct ivm_ubinary *open_symdir_file(struct ivm_uexe_cache *c,
					    const struct ivm_uexe *x,
					    bool debug, const char **why)
{
	struct ivm_ubinary *b = NULL;
	struct ivm_error *err;
	char *path = ivm_uexe_symdir_path(c->dir, x->build_id,
					  x->build_id_len, debug);

	if (!path)
		return NULL;
	err = ivm_ubinary_open(path, &b);
	free(path);
	if (err) {
		/* A missing file is the common case; say why otherwise. */
		if (err->code != IVM_ERROR_OS || err->errnum != ENOENT)
			*why = err->code == IVM_ERROR_INVALID ?
			       "the symdir file has no usable CFI" :
			       "the symdir file is not readable ELF";
		ivm_error_destroy(err);
		return NULL;
	}
	c->stats.opened++;
	err = ivm_uexe_check(x, b);
	if (err) {
		*why = "the symdir file does not match the guest's executable";
		ivm_error_destroy(err);
		ivm_ubinary_destroy(b);
		return NULL;
	}
	return b;
}

struct ivm_error *ivm_uexe_cache_find(struct ivm_uexe_cache *c,
				      const struct ivm_uexe *x,
				      struct ivm_uexe_handle *ret,
				      const char **why)
{
	const char *dummy;
	struct ivm_ubinary *b = NULL;
	size_t i, victim = IVM_UEXE_CACHE_EXPLICIT;
	struct ivm_error *err;

	if (!why)
		why = &dummy;
	*why = NULL;
	ret->slot = -1;
	ret->generation = 0;
	if (!x->build_id_len) {
		*why = "the executable has no build-id";
		return NULL;
	}
	for (i = 0; i < NR_SLOTS; i++) {
		if (!same_id(c->slots[i].ubin, x))
			continue;
		err = ivm_uexe_check(x, c->slots[i].ubin);
		if (err) {
			*why = "a binary with its build-id does not match the guest's copy";
			ivm_error_destroy(err);
			return NULL;
		}
		*ret = handle_of(c, i);
		return NULL;
	}
	for (i = 0; i < c->nr_misses; i++)
		if (c->misses[i].len == x->build_id_len &&
		    !memcmp(c->misses[i].id, x->build_id, x->build_id_len)) {
			c->stats.miss_hits++;
			*why = "no host file with its build-id (remembered)";
			return NULL;
		}
	if (!c->dir) {
		*why = "no host file with its build-id (no --symdir)";
		return NULL;
	}
	b = open_symdir_file(c, x, false, why);
	if (!b)
		b = open_symdir_file(c, x, true, why);
	if (!b) {
		if (!*why)
			*why = "no file with its build-id in the symdir";
		remember_miss(c, x);
		return NULL;
	}
	/* A free slot, else the least recently used one. */
	for (i = IVM_UEXE_CACHE_EXPLICIT; i < NR_SLOTS; i++) {
		if (!c->slots[i].ubin) {
			victim = i;
			break;
		}
		if (c->slots[i].last_use < c->slots[victim].last_use)
			victim = i;
	}
	if (c->slots[victim].ubin) {
		ivm_ubinary_destroy(c->slots[victim].ubin);
		c->stats.evicted++;
	}
	c->slots[victim].ubin = b;
	c->slots[victim].generation++;
	*ret = handle_of(c, victim);
	return NULL;
}

struct ivm_ubinary *ivm_uexe_cache_get(struct ivm_uexe_cache *c,
				       struct ivm_uexe_handle h)
{
	if (h.slot < 0 || h.slot >= NR_SLOTS ||
	    c->slots[h.slot].generation != h.generation)
		return NULL;
	c->slots[h.slot].last_use = ++c->tick;
	return c->slots[h.slot].ubin;
}

void ivm_uexe_cache_stats(const struct ivm_uexe_cache *c,
			  struct ivm_uexe_cache_stats *ret)
{
	*ret = c->stats;
}
