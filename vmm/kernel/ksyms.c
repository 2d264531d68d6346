// SPDX-License-Identifier: MIT
/*
 * Kernel symbol tables: one array of symbols sorted by address, and an index
 * sorted by name.  Names live in one arena (a copy of the System.map text or
 * of the ELF string table) so a 200 000-symbol vmlinux costs three
 * allocations, not 200 000.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "sysmap.h"

_Static_assert(IVM_KSYMS_MAX_NAME == IVM_SYSMAP_MAX_NAME,
	       "one name cap for System.map and kallsyms");

struct ivm_ksyms {
	struct ivm_ksym *syms;		/* sorted by address, then name */
	size_t nr;
	uint32_t *by_name;		/* indices into syms, sorted by name */
	char *arena;			/* backing store of every name */
	size_t malformed;
};

void ivm_ksyms_destroy(struct ivm_ksyms *ksyms)
{
	if (!ksyms)
		return;
	free(ksyms->syms);
	free(ksyms->by_name);
	free(ksyms->arena);
	free(ksyms);
}

size_t ivm_ksyms_count(const struct ivm_ksyms *ksyms)
{
	return ksyms->nr;
}

size_t ivm_ksyms_malformed(const struct ivm_ksyms *ksyms)
{
	return ksyms->malformed;
}

static bool is_global(char type)
{
	return isupper((unsigned char)type);
}

static int cmp_addr(const void *a, const void *b)
{
	const struct ivm_ksym *x = a, *y = b;
	int c;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Globals first among aliases, so symbolize prefers them. */
	if (is_global(x->type) != is_global(y->type))
		return is_global(x->type) ? -1 : 1;
	c = strcmp(x->name, y->name);
	return c;
}

/* qsort_r is a GNU extension; the context is the symbol array. */
static int cmp_name(const void *a, const void *b, void *ctx)
{
	const struct ivm_ksym *syms = ctx;
	const struct ivm_ksym *x = &syms[*(const uint32_t *)a];
	const struct ivm_ksym *y = &syms[*(const uint32_t *)b];
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (is_global(x->type) != is_global(y->type))
		return is_global(x->type) ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Sort and index; takes ownership of syms and arena even on failure. */
static struct ivm_error *ksyms_finish(struct ivm_ksym *syms, size_t nr,
				      char *arena, size_t malformed,
				      const char *what, struct ivm_ksyms **ret)
{
	struct ivm_ksyms *ksyms;
	size_t i;

	if (nr == 0) {
		free(syms);
		free(arena);
		return ivm_error_create(IVM_ERROR_ELF, "%s: no symbols", what);
	}
	ksyms = calloc(1, sizeof(*ksyms));
	if (!ksyms) {
		free(syms);
		free(arena);
		return &ivm_enomem;
	}
	ksyms->syms = syms;
	ksyms->nr = nr;
	ksyms->arena = arena;
	ksyms->malformed = malformed;
	qsort(syms, nr, sizeof(*syms), cmp_addr);
	ksyms->by_name = calloc(nr, sizeof(*ksyms->by_name));
	if (!ksyms->by_name) {
		ivm_ksyms_destroy(ksyms);
		return &ivm_enomem;
	}
	for (i = 0; i < nr; i++)
		ksyms->by_name[i] = (uint32_t)i;
	qsort_r(ksyms->by_name, nr, sizeof(*ksyms->by_name), cmp_name, syms);
	*ret = ksyms;
	return NULL;
}

struct ivm_error *ivm_ksyms_adopt(struct ivm_ksym *syms, size_t nr,
				  char *arena, const char *what,
				  struct ivm_ksyms **ret)
{
	if (nr > IVM_KSYMS_MAX_SYMS) {
		free(syms);
		free(arena);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: more than %u symbols", what,
					IVM_KSYMS_MAX_SYMS);
	}
	return ksyms_finish(syms, nr, arena, 0, what, ret);
}

/* ---- System.map ----------------------------------------------------- */

struct ivm_error *ivm_ksyms_parse_system_map(const char *text, size_t len,
					     struct ivm_ksyms **ret)
{
	struct ivm_ksym *syms = NULL;
	size_t nr = 0, cap = 0, malformed = 0, pos = 0;
	char *arena;

	if (len > IVM_KSYMS_MAX_TEXT)
		return ivm_error_create(IVM_ERROR_INVALID,
					"System.map of %zu bytes exceeds the %u byte cap",
					len, IVM_KSYMS_MAX_TEXT);
	arena = malloc(len + 1);
	if (!arena)
		return &ivm_enomem;
	memcpy(arena, text, len);
	arena[len] = '\0';
	for (;;) {
		struct ivm_sysmap_line line;
		struct ivm_ksym sym;
		enum ivm_sysmap_next next = ivm_sysmap_next(arena, len, &pos,
							    &line);

		if (next == IVM_SYSMAP_END)
			break;
		if (next == IVM_SYSMAP_MALFORMED) {
			malformed++;
			continue;
		}
		/* The name ends at a blank or tab of the arena's own copy. */
		arena[line.name - arena + line.name_len] = '\0';
		sym = (struct ivm_ksym){ .name = line.name, .addr = line.addr,
					 .type = line.type };
		if (nr == IVM_KSYMS_MAX_SYMS) {
			free(syms);
			free(arena);
			return ivm_error_create(IVM_ERROR_INVALID,
						"System.map has more than %u symbols",
						IVM_KSYMS_MAX_SYMS);
		}
		if (nr == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			struct ivm_ksym *n = reallocarray(syms, ncap,
							  sizeof(*syms));

			if (!n) {
				free(syms);
				free(arena);
				return &ivm_enomem;
			}
			syms = n;
			cap = ncap;
		}
		syms[nr++] = sym;
	}
	return ksyms_finish(syms, nr, arena, malformed, "System.map", ret);
}

struct ivm_error *ivm_ksyms_load_system_map(const char *path,
					    struct ivm_ksyms **ret)
{
	struct ivm_error *err;
	struct stat st;
	char *buf;
	size_t len = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "opening %s", path);
	if (fstat(fd, &st) < 0) {
		err = ivm_error_os(errno, "stat %s", path);
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > IVM_KSYMS_MAX_TEXT) {
		close(fd);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: not a regular file of at most %u bytes",
					path, IVM_KSYMS_MAX_TEXT);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return &ivm_enomem;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = ivm_error_os(errno, "reading %s", path);
			free(buf);
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	err = ivm_ksyms_parse_system_map(buf, len, ret);
	free(buf);
	if (err)
		return ivm_error_wrap(err, "%s", path);
	return NULL;
}

/* ---- ELF .symtab ------------------------------------------------------ */

static char elf_sym_type(Elf *elf, const GElf_Sym *sym)
{
	char type = 'T';

	if (sym->st_shndx == SHN_ABS) {
		type = 'A';
	} else {
		GElf_Shdr shdr;
		Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);

		if (scn && gelf_getshdr(scn, &shdr)) {
			if (shdr.sh_flags & SHF_EXECINSTR)
				type = 'T';
			else if (shdr.sh_type == SHT_NOBITS)
				type = 'B';
			else if (shdr.sh_flags & SHF_WRITE)
				type = 'D';
			else
				type = 'R';
		}
	}
	if (GELF_ST_BIND(sym->st_info) == STB_WEAK)
		return type == 'T' ? 'W' : 'V';
	if (GELF_ST_BIND(sym->st_info) == STB_LOCAL)
		return (char)tolower((unsigned char)type);
	return type;
}

static struct ivm_error *elf_read_symtab(Elf *elf, const char *path,
					 struct ivm_ksyms **ret)
{
	Elf_Scn *scn = NULL, *symtab = NULL;
	Elf_Data *data, *strdata;
	struct ivm_ksym *syms;
	GElf_Shdr shdr, strshdr;
	size_t i, nsyms, nr = 0;
	char *arena;

	/* .symtab; a stripped binary still has its dynamic symbols. */
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &shdr))
			continue;
		if (shdr.sh_type == SHT_SYMTAB) {
			symtab = scn;
			break;
		}
		if (shdr.sh_type == SHT_DYNSYM && !symtab)
			symtab = scn;
	}
	if (!symtab || !gelf_getshdr(symtab, &shdr))
		return ivm_error_create(IVM_ERROR_ELF, "%s: no symbol table",
					path);
	data = elf_getdata(symtab, NULL);
	scn = elf_getscn(elf, shdr.sh_link);
	if (!data || !scn || !gelf_getshdr(scn, &strshdr) ||
	    strshdr.sh_type != SHT_STRTAB)
		return ivm_error_create(IVM_ERROR_ELF, "%s: bad .symtab: %s",
					path, elf_errmsg(-1));
	strdata = elf_getdata(scn, NULL);
	if (!strdata || !strdata->d_buf || strdata->d_size == 0 ||
	    !shdr.sh_entsize)
		return ivm_error_create(IVM_ERROR_ELF, "%s: bad string table",
					path);
	nsyms = data->d_size / shdr.sh_entsize;
	if (nsyms > IVM_KSYMS_MAX_SYMS)
		return ivm_error_create(IVM_ERROR_ELF,
					"%s: more than %u symbols", path,
					IVM_KSYMS_MAX_SYMS);
	/* A private, NUL-terminated copy: names point into it. */
	arena = malloc(strdata->d_size + 1);
	syms = calloc(nsyms ? nsyms : 1, sizeof(*syms));
	if (!arena || !syms) {
		free(arena);
		free(syms);
		return &ivm_enomem;
	}
	memcpy(arena, strdata->d_buf, strdata->d_size);
	arena[strdata->d_size] = '\0';
	for (i = 1; i < nsyms; i++) {
		GElf_Sym sym;
		int type;

		if (!gelf_getsym(data, (int)i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type == STT_FILE || type == STT_SECTION ||
		    sym.st_shndx == SHN_UNDEF || sym.st_name == 0 ||
		    sym.st_name >= strdata->d_size)
			continue;
		syms[nr].name = arena + sym.st_name;
		if (strlen(syms[nr].name) > IVM_KSYMS_MAX_NAME)
			continue;
		syms[nr].addr = sym.st_value;
		syms[nr].size = sym.st_size;
		syms[nr].type = elf_sym_type(elf, &sym);
		nr++;
	}
	return ksyms_finish(syms, nr, arena, 0, path, ret);
}

struct ivm_error *ivm_ksyms_load_elf(const char *path, struct ivm_ksyms **ret)
{
	struct ivm_error *err;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return ivm_error_create(IVM_ERROR_ELF, "libelf: %s",
					elf_errmsg(-1));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "opening %s", path);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = ivm_error_create(IVM_ERROR_ELF, "%s: not an ELF file: %s",
				       path, elf_errmsg(-1));
	} else {
		err = elf_read_symtab(elf, path, ret);
	}
	elf_end(elf);
	close(fd);
	return err;
}

/* ---- lookups ----------------------------------------------------------- */

const struct ivm_ksym *ivm_ksyms_at(const struct ivm_ksyms *ksyms, size_t i)
{
	return i < ksyms->nr ? &ksyms->syms[i] : NULL;
}

const struct ivm_ksym *ivm_ksyms_find(const struct ivm_ksyms *ksyms,
				      const char *name)
{
	size_t lo = 0, hi = ksyms->nr;

	/* Lower bound: the first (global-preferred) symbol of that name. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ksyms->syms[ksyms->by_name[mid]].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < ksyms->nr && !strcmp(ksyms->syms[ksyms->by_name[lo]].name,
				      name))
		return &ksyms->syms[ksyms->by_name[lo]];
	return NULL;
}

struct ivm_error *ivm_ksyms_lookup(const struct ivm_ksyms *ksyms,
				   const char *name, uint64_t *ret)
{
	const struct ivm_ksym *sym = ivm_ksyms_find(ksyms, name);

	if (!sym)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"kernel symbol %s not found", name);
	*ret = sym->addr;
	return NULL;
}

const struct ivm_ksym *ivm_ksyms_symbolize(const struct ivm_ksyms *ksyms,
					   uint64_t addr, uint64_t *offset)
{
	size_t lo = 0, hi = ksyms->nr;
	const struct ivm_ksym *sym;
	uint64_t sym_addr;

	/* Upper bound: first symbol above addr; the answer precedes it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ksyms->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	/* Among aliases at that address, the first sorts global-first. */
	sym_addr = ksyms->syms[lo - 1].addr;
	while (lo > 1 && ksyms->syms[lo - 2].addr == sym_addr)
		lo--;
	sym = &ksyms->syms[lo - 1];
	if (offset)
		*offset = addr - sym->addr;
	return sym;
}
