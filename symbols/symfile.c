// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarf_lines.h"
#include "symfile.h"
#include "symfile_int.h"
#include "sysmap.h"

#define MAX_UNSIZED_SYMBOL	(1u << 20)	/* last symbol of a map */
#define BANNER_PREFIX		"Linux version "

/* Returned when even an unknown location cannot be allocated. */
static const struct ivm_sym_location unknown_location = {
	.source = IVM_SYM_SOURCE_NONE,
};

/*
 * Room for one more element in a growing array: returns the array, moved
 * if it had to grow, or NULL (the old array still valid and owned by the
 * caller) when memory or size_t runs out.
 */
void *symfile_grow(void *array, size_t *cap, size_t nr, size_t elem,
		   size_t first)
{
	size_t ncap;
	void *n;

	if (nr < *cap)
		return array;
	ncap = *cap ? *cap * 2 : first;
	if (ncap < *cap || ncap > SIZE_MAX / elem)
		return NULL;
	n = realloc(array, ncap * elem);
	if (n)
		*cap = ncap;
	return n;
}

/* ---- symbol table ------------------------------------------------------ */

static int symbol_cmp(const void *a, const void *b)
{
	const struct symbol *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

static const struct text_section *text_of(const struct ivm_symfile *f,
					  uint64_t addr)
{
	size_t i;

	for (i = 0; i < f->nr_texts; i++)
		if (addr >= f->texts[i].lo && addr < f->texts[i].hi)
			return &f->texts[i];
	return NULL;
}

/* See symfile_int.h. */
void symfile_symbols_finish(struct ivm_symfile *f)
{
	uint64_t covered = 0;	/* end of the sized symbols seen so far */
	size_t i, n = 0;

	if (!f->nr_symbols)
		return;
	qsort(f->symbols, f->nr_symbols, sizeof(*f->symbols), symbol_cmp);
	for (i = 0; i < f->nr_symbols; i++) {
		const struct symbol *s = &f->symbols[i];

		if (n && f->symbols[n - 1].addr == s->addr)
			continue;
		/*
		 * An unsized label inside a sized symbol (an assembly inner
		 * label such as entry_SYSCALL_64_after_hwframe) does not
		 * split it: the address is named after the symbol that
		 * holds it, as eu-addr2line and perf do.
		 */
		if (!s->size && s->addr < covered)
			continue;
		if (s->size && s->addr + s->size > covered &&
		    s->addr + s->size > s->addr)
			covered = s->addr + s->size;
		f->symbols[n++] = *s;
	}
	f->nr_symbols = n;
	for (i = 0; i < n; i++) {
		struct symbol *s = &f->symbols[i];

		const struct text_section *t = text_of(f, s->addr);
		uint64_t end;

		if (s->size)
			continue;
		if (i + 1 < n)
			s->size = f->symbols[i + 1].addr - s->addr;
		else if (f->text_hi > s->addr)
			s->size = f->text_hi - s->addr;
		else
			s->size = MAX_UNSIZED_SYMBOL;
		/*
		 * An unsized label never reaches past its section: the data
		 * between two text sections is nobody's code.
		 */
		end = t ? t->hi : 0;
		if (end && s->size > end - s->addr)
			s->size = end - s->addr;
	}
}

static const struct symbol *symbols_find(const struct ivm_symfile *f,
					 uint64_t addr)
{
	size_t lo = 0, hi = f->nr_symbols;
	const struct symbol *s;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->symbols[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &f->symbols[lo - 1];
	/* Past the end of a sized symbol is padding or an unnamed stub. */
	if (addr - s->addr >= s->size)
		return NULL;
	return s;
}

bool symfile_symbols_push(struct ivm_symfile *f, size_t *cap,
			  const struct symbol *s)
{
	if (!GROW(f->symbols, cap, f->nr_symbols, 1024))
		return false;
	f->symbols[f->nr_symbols++] = *s;
	return true;
}

/* ---- ELF --------------------------------------------------------------- */

struct ivm_sym_error *symfile_elf_error(const char *path, const char *what)
{
	return ivm_sym_error_create(IVM_SYM_ERROR_FORMAT, "%s: %s: %s", path,
				    what, elf_errmsg(-1));
}

/*
 * libelf maps the file and trusts section headers: a truncated file would
 * have sections past its end, which we refuse up front with a clear error
 * rather than let a read fault later.
 */
static struct ivm_sym_error *check_sections(struct ivm_symfile *f,
					    uint64_t file_size,
					    bool relocatable)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(f->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return symfile_elf_error(f->path,
						 "reading a section header");
		if (sh.sh_type == SHT_NOBITS)
			continue;
		if (sh.sh_offset > file_size ||
		    sh.sh_size > file_size - sh.sh_offset)
			return ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
				"%s: section %zu lies past the end of the file (%" PRIu64
				" bytes): truncated?", f->path, elf_ndxscn(scn),
				file_size);
		if ((sh.sh_flags & SHF_ALLOC) && (sh.sh_flags & SHF_EXECINSTR) &&
		    sh.sh_size && !relocatable) {
			uint64_t end = sh.sh_addr + sh.sh_size;

			struct text_section *nt;

			if (end < sh.sh_addr)
				continue;
			nt = realloc(f->texts, (f->nr_texts + 1) * sizeof(*nt));
			if (!nt)
				return &ivm_sym_enomem;
			f->texts = nt;
			f->texts[f->nr_texts++] = (struct text_section){
				sh.sh_addr, end };
			if (!f->text_hi || sh.sh_addr < f->text_lo)
				f->text_lo = sh.sh_addr;
			if (end > f->text_hi)
				f->text_hi = end;
		}
	}
	return NULL;
}

static void read_build_id(struct ivm_symfile *f)
{
	Elf_Scn *scn = NULL;
	size_t i;

	while ((scn = elf_nextscn(f->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		/* gelf_getnote bounds each note by the section data. */
		while ((next = gelf_getnote(data, off, &nh, &name_off,
					    &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)data->d_buf + name_off, "GNU", 4) &&
			    nh.n_descsz && nh.n_descsz <= IVM_SYM_BUILD_ID_MAX) {
				const uint8_t *id = (const uint8_t *)
					data->d_buf + desc_off;

				for (i = 0; i < nh.n_descsz; i++)
					snprintf(f->build_id_hex + 2 * i, 3,
						 "%02x", id[i]);
				return;
			}
			off = next;
		}
	}
}

/* The release in the bytes of linux_banner, which lives in .rodata. */
static void read_banner(struct ivm_symfile *f, uint64_t addr)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(f->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		const char *p;
		size_t off, avail, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    addr < sh.sh_addr || addr - sh.sh_addr >= sh.sh_size)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			return;
		off = addr - sh.sh_addr;
		if (off >= data->d_size)
			return;
		p = (const char *)data->d_buf + off;
		avail = data->d_size - off;
		if (avail < sizeof(BANNER_PREFIX) ||
		    memcmp(p, BANNER_PREFIX, sizeof(BANNER_PREFIX) - 1))
			return;
		p += sizeof(BANNER_PREFIX) - 1;
		avail -= sizeof(BANNER_PREFIX) - 1;
		for (n = 0; n < avail && n < 128 && isgraph((unsigned char)p[n]);
		     n++)
			;
		if (n && n < avail)
			f->release = strndup(p, n);
		return;
	}
}

static struct ivm_sym_error *read_symtab(struct ivm_symfile *f)
{
	Elf_Scn *scn = NULL, *symscn = NULL;
	GElf_Shdr sh;
	Elf_Data *data;
	size_t cap = 0, i, nr, nsec = 0;
	uint64_t banner = 0;
	bool *exec = NULL;

	if (elf_getshdrnum(f->elf, &nsec))
		return symfile_elf_error(f->path, "counting sections");
	exec = calloc(nsec ? nsec : 1, sizeof(*exec));
	if (!exec)
		return &ivm_sym_enomem;
	while ((scn = elf_nextscn(f->elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (elf_ndxscn(scn) < nsec)
			exec[elf_ndxscn(scn)] = (sh.sh_flags & SHF_EXECINSTR) &&
						(sh.sh_flags & SHF_ALLOC);
		if (sh.sh_type == SHT_SYMTAB ||
		    (sh.sh_type == SHT_DYNSYM && !symscn))
			symscn = scn;
	}
	if (!symscn) {
		free(exec);
		return NULL;
	}
	gelf_getshdr(symscn, &sh);
	data = elf_getdata(symscn, NULL);
	if (!data || !sh.sh_entsize) {
		free(exec);
		return symfile_elf_error(f->path, "reading the symbol table");
	}
	nr = data->d_size / gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT);
	for (i = 0; i < nr; i++) {
		GElf_Sym sym;
		struct symbol s;
		const char *name;
		int type;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		name = elf_strptr(f->elf, sh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (!banner && !strcmp(name, "linux_banner"))
			banner = sym.st_value;
		if (type != STT_FUNC && type != STT_NOTYPE &&
		    type != STT_GNU_IFUNC)
			continue;
		if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= nsec ||
		    !exec[sym.st_shndx])
			continue;
		if (name[0] == '$' || !strncmp(name, ".L", 2))
			continue;
		s.addr = sym.st_value;
		s.size = sym.st_size;
		s.name = name;
		s.rank = (type == STT_FUNC ? 4 : 0) + (s.size ? 2 : 0) +
			 (GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 1 : 0);
		if (!symfile_symbols_push(f, &cap, &s)) {
			free(exec);
			return &ivm_sym_enomem;
		}
	}
	free(exec);
	symfile_symbols_finish(f);
	if (banner)
		read_banner(f, banner);
	return NULL;
}

static struct ivm_symfile *symfile_new(const char *path)
{
	struct ivm_symfile *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fd = -1;
	f->path = strdup(path);
	if (!f->path) {
		free(f);
		return NULL;
	}
	return f;
}

/*
 * Open path as an ELF file whose headers and section table are sane (see
 * check_sections); *type gets its e_type.
 */
struct ivm_sym_error *symfile_open_checked(const char *path,
					   uint16_t *type,
					   struct ivm_symfile **ret)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *f;
	struct stat st;
	GElf_Ehdr eh;
	size_t shstrndx, nsec;

	elf_version(EV_CURRENT);
	f = symfile_new(path);
	if (!f)
		return &ivm_sym_enomem;
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0) {
		err = ivm_sym_error_os(errno, "opening %s", path);
		goto fail;
	}
	if (fstat(f->fd, &st)) {
		err = ivm_sym_error_os(errno, "stat %s", path);
		goto fail;
	}
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	if (!f->elf) {
		err = symfile_elf_error(path, "not readable as ELF");
		goto fail;
	}
	if (elf_kind(f->elf) != ELF_K_ELF || !gelf_getehdr(f->elf, &eh)) {
		err = ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
					   "%s: not an ELF file", path);
		goto fail;
	}
	/*
	 * A section table past the end of the file (a truncated download, a
	 * corrupt header) would read as an ELF without sections: say so.
	 */
	nsec = eh.e_shnum ? eh.e_shnum : eh.e_shoff ? 1 : 0;
	if (eh.e_shoff > (uint64_t)st.st_size ||
	    (uint64_t)nsec * eh.e_shentsize >
	    (uint64_t)st.st_size - eh.e_shoff) {
		err = ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
			"%s: section table lies past the end of the file (%" PRIu64
			" bytes): truncated or corrupt", path,
			(uint64_t)st.st_size);
		goto fail;
	}
	if (elf_getshdrstrndx(f->elf, &shstrndx)) {
		err = symfile_elf_error(path, "no section table (truncated?)");
		goto fail;
	}
	err = check_sections(f, (uint64_t)st.st_size, eh.e_type == ET_REL);
	if (err)
		goto fail;
	read_build_id(f);
	*type = eh.e_type;
	*ret = f;
	return NULL;
fail:
	ivm_symfile_destroy(f);
	return err;
}

static void find_dwarf_sections(struct ivm_symfile *f);

struct ivm_sym_error *ivm_symfile_open_elf(const char *path,
					   struct ivm_symfile **ret)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *f;
	uint16_t type;

	err = symfile_open_checked(path, &type, &f);
	if (err)
		return err;
	if (type == ET_REL) {
		/* Its addresses mean nothing until its sections are placed. */
		ivm_symfile_destroy(f);
		return ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
			"%s: a relocatable object (a kernel module?): open it with its section addresses",
			path);
	}
	err = read_symtab(f);
	if (err) {
		ivm_symfile_destroy(f);
		return err;
	}
	/*
	 * Missing DWARF is normal (a stripped binary); broken DWARF is
	 * treated the same way: the symbol table still answers.
	 */
	f->dwarf = dwarf_begin_elf(f->elf, DWARF_C_READ, NULL);
	if (f->dwarf)
		find_dwarf_sections(f);
	*ret = f;
	return NULL;
}

/*
 * The line-table sections as they are in the file, for dwarf_lines.c;
 * none when compressed (libdw inflates those) or absent, and never for a
 * module (libdwfl relocates its copy of them).
 */
static void find_dwarf_sections(struct ivm_symfile *f)
{
	static const char *const names[] = {
		".debug_line", ".debug_line_str", ".debug_str",
	};
	const uint8_t *data[3] = { NULL };
	size_t size[3] = { 0 }, shstrndx, i;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(f->elf, &shstrndx))
		return;
	while ((scn = elf_nextscn(f->elf, scn))) {
		const char *name;
		Elf_Data *d;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(f->elf, shstrndx, sh.sh_name);
		for (i = 0; name && i < 3; i++) {
			if (strcmp(name, names[i]))
				continue;
			if (sh.sh_flags & SHF_COMPRESSED)
				return;
			d = elf_getdata(scn, NULL);
			if (d && d->d_buf) {
				data[i] = d->d_buf;
				size[i] = d->d_size;
			}
		}
	}
	f->dwarf_sections = (struct ivm_dwarf_sections){
		.line = data[0], .line_size = size[0],
		.line_str = data[1], .line_str_size = size[1],
		.str = data[2], .str_size = size[2],
	};
}

/* ---- System.map -------------------------------------------------------- */

struct ivm_sym_error *ivm_symfile_system_map_from_memory(
	const char *name, const char *buf, size_t len,
	struct ivm_symfile **ret)
{
	struct ivm_symfile *f = symfile_new(name);
	size_t cap = 0, pos = 0;

	if (!f)
		return &ivm_sym_enomem;
	f->map_text = malloc(len + 1);
	if (!f->map_text) {
		ivm_symfile_destroy(f);
		return &ivm_sym_enomem;
	}
	memcpy(f->map_text, buf, len);
	f->map_text[len] = '\0';
	for (;;) {
		struct ivm_sysmap_line line;
		struct symbol s = { 0 };
		enum ivm_sysmap_next next = ivm_sysmap_next(f->map_text, len,
							    &pos, &line);
		char *sym;

		if (next == IVM_SYSMAP_END)
			break;
		/* Only the kernel image's own text symbols name frames. */
		if (next != IVM_SYSMAP_LINE || line.module ||
		    (line.type != 't' && line.type != 'T'))
			continue;
		sym = f->map_text + (line.name - f->map_text);
		sym[line.name_len] = '\0';
		s.addr = line.addr;
		s.name = sym;
		s.rank = line.type == 'T';
		if (!symfile_symbols_push(f, &cap, &s)) {
			ivm_symfile_destroy(f);
			return &ivm_sym_enomem;
		}
		if (!strcmp(sym, "_etext"))
			f->text_hi = s.addr;
	}
	if (!f->nr_symbols) {
		ivm_symfile_destroy(f);
		return ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
					    "%s: no text symbols: not a System.map",
					    name);
	}
	symfile_symbols_finish(f);
	*ret = f;
	return NULL;
}

struct ivm_sym_error *ivm_symfile_open_system_map(const char *path,
						  struct ivm_symfile **ret)
{
	struct ivm_sym_error *err;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	FILE *fp = fopen(path, "re");

	if (!fp)
		return ivm_sym_error_os(errno, "opening %s", path);
	for (;;) {
		size_t n;

		if (len == cap) {
			char *nbuf;

			cap = cap ? cap * 2 : 1 << 20;
			/* A System.map is a few MB; refuse a runaway file. */
			if (cap > (512u << 20) || !(nbuf = realloc(buf, cap))) {
				free(buf);
				fclose(fp);
				return cap > (512u << 20) ?
					ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
						"%s: too large for a System.map",
						path) : &ivm_sym_enomem;
			}
			buf = nbuf;
		}
		n = fread(buf + len, 1, cap - len, fp);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(fp)) {
		err = ivm_sym_error_os(errno ? errno : EIO, "reading %s", path);
		free(buf);
		fclose(fp);
		return err;
	}
	fclose(fp);
	err = ivm_symfile_system_map_from_memory(path, buf, len, ret);
	free(buf);
	return err;
}

void ivm_symfile_destroy(struct ivm_symfile *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->cache_size; i++)
		free(f->cache[i].loc);
	free(f->cache);
	symfile_dwarf_free(f);
	ivm_symfile_destroy(f->debug);
	if (f->dwarf && !f->dwarf_borrowed)
		dwarf_end(f->dwarf);
	/* After dwarf: libdw leaves an alt it was given to its owner. */
	ivm_symfile_destroy(f->alt);
	if (f->dwfl)
		dwfl_end(f->dwfl);
	for (i = 0; i < f->nr_mod_sections; i++)
		free((char *)f->mod_sections[i].name);
	free(f->mod_sections);
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	free(f->symbols);
	free(f->texts);
	free(f->map_text);
	free(f->release);
	free(f->path);
	free(f);
}

const char *ivm_symfile_path(const struct ivm_symfile *f)
{
	return f->path;
}

const char *ivm_symfile_missing_alt(struct ivm_symfile *f, const char **path)
{
	const void *id;
	const char *name;
	ssize_t n, i;

	if (!f->dwarf || f->dwarf_borrowed || f->alt)
		return NULL;
	n = dwelf_dwarf_gnu_debugaltlink(f->dwarf, &name, &id);
	if (n <= 0 || n > IVM_SYM_BUILD_ID_MAX)
		return NULL;
	/* libdw's own search: next to the file, /usr/lib/debug/.build-id. */
	if (dwarf_getalt(f->dwarf))
		return NULL;
	for (i = 0; i < n; i++)
		snprintf(f->alt_hex + 2 * i, 3, "%02x",
			 ((const uint8_t *)id)[i]);
	if (path)
		*path = name;
	return f->alt_hex;
}

struct ivm_sym_error *ivm_symfile_set_alt(struct ivm_symfile *f,
					  const char *path)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *alt;
	const char *want = ivm_symfile_missing_alt(f, NULL);
	uint16_t type;

	if (!want)
		return ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
			"%s: needs no supplementary DWARF file", f->path);
	/* dwz writes it as ET_REL; only its DWARF is used, never placed. */
	err = symfile_open_checked(path, &type, &alt);
	if (err)
		return err;
	alt->dwarf = dwarf_begin_elf(alt->elf, DWARF_C_READ, NULL);
	if (!alt->dwarf || strcmp(alt->build_id_hex, want)) {
		err = ivm_sym_error_create(IVM_SYM_ERROR_MISMATCH,
			"%s: not the supplementary DWARF of %s (build-id %s, want %s)",
			path, f->path, alt->build_id_hex, want);
		ivm_symfile_destroy(alt);
		return err;
	}
	dwarf_setalt(f->dwarf, alt->dwarf);
	f->alt = alt;
	return NULL;
}

bool ivm_symfile_has_dwarf(const struct ivm_symfile *f)
{
	return f->dwarf || (f->debug && f->debug->dwarf);
}

size_t ivm_symfile_nr_symbols(const struct ivm_symfile *f)
{
	return f->nr_symbols;
}

void ivm_symfile_set_debug(struct ivm_symfile *f, struct ivm_symfile *debug)
{
	ivm_symfile_destroy(f->debug);
	f->debug = debug;
}

const char *ivm_symfile_build_id_hex(const struct ivm_symfile *f)
{
	return f->build_id_hex;
}

const char *ivm_symfile_kernel_release(const struct ivm_symfile *f)
{
	return f->release;
}

void ivm_symfile_text_range(const struct ivm_symfile *f, uint64_t *lo,
			    uint64_t *hi)
{
	*lo = f->text_lo;
	*hi = f->text_hi;
}

bool ivm_symfile_exec_segment(const struct ivm_symfile *f, uint64_t *vaddr,
			      uint64_t *memsz, uint64_t *offset)
{
	size_t i, n;

	if (!f->elf || elf_getphdrnum(f->elf, &n))
		return false;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		/*
		 * A separate .debug file keeps the program headers but not
		 * the code, and its offsets are its own: only a segment
		 * whose bytes are in the file says where the code is.
		 */
		if (!gelf_getphdr(f->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || !ph.p_filesz || !ph.p_memsz)
			continue;
		*vaddr = ph.p_vaddr;
		*memsz = ph.p_memsz;
		*offset = ph.p_offset;
		return true;
	}
	return false;
}

bool ivm_symfile_in_text(const struct ivm_symfile *f, uint64_t addr)
{
	if (f->nr_texts)
		return text_of(f, addr);
	/* A System.map: from its first text symbol to _etext, if known. */
	if (!f->nr_symbols || addr < f->symbols[0].addr)
		return false;
	return !f->text_hi || addr < f->text_hi;
}

void ivm_symfile_cache_stats(const struct ivm_symfile *f, uint64_t *hits,
			     uint64_t *misses)
{
	*hits = f->hits;
	*misses = f->misses;
}

/* ---- lookup and cache -------------------------------------------------- */

static bool cache_grow(struct ivm_symfile *f)
{
	size_t nsize = f->cache_size ? f->cache_size * 2 : 1024, i;
	struct cache_slot *n = calloc(nsize, sizeof(*n));

	if (!n)
		return false;
	for (i = 0; i < f->cache_size; i++) {
		size_t j;

		if (!f->cache[i].loc)
			continue;
		for (j = hash_addr(f->cache[i].addr) & (nsize - 1); n[j].loc;
		     j = (j + 1) & (nsize - 1))
			;
		n[j] = f->cache[i];
	}
	free(f->cache);
	f->cache = n;
	f->cache_size = nsize;
	return true;
}

static struct ivm_sym_location *resolve(struct ivm_symfile *f, uint64_t addr)
{
	struct ivm_sym_frame frames[IVM_SYM_MAX_INLINE];
	struct ivm_symfile *dw = f->dwarf ? f : f->debug;
	const struct symbol *sym = symbols_find(f, addr);
	struct ivm_sym_location *loc;
	unsigned int n = 0;

	if (!sym && f->debug)
		sym = symbols_find(f->debug, addr);
	memset(frames, 0, sizeof(frames));
	if (dw && dw->dwarf)
		n = symfile_dwarf_frames(dw, addr, frames);
	/* An unnamed outer DWARF function takes the symbol's name. */
	if (n && !frames[n - 1].function && sym)
		frames[n - 1].function = sym->name;
	if (!n && sym) {
		frames[0].function = sym->name;
		n = 1;
	}
	loc = calloc(1, sizeof(*loc) + n * sizeof(loc->frames[0]));
	if (!loc)
		return NULL;
	loc->nr_frames = n;
	loc->source = !n ? IVM_SYM_SOURCE_NONE :
		      frames[0].file || n > 1 ? IVM_SYM_SOURCE_DWARF :
		      IVM_SYM_SOURCE_SYMTAB;
	loc->offset = sym ? addr - sym->addr : 0;
	memcpy(loc->frames, frames, n * sizeof(frames[0]));
	return loc;
}

const struct ivm_sym_location *ivm_symfile_lookup(struct ivm_symfile *f,
						  uint64_t addr)
{
	struct ivm_sym_location *loc;
	size_t i;

	if (f->cache_size) {
		for (i = hash_addr(addr) & (f->cache_size - 1); f->cache[i].loc;
		     i = (i + 1) & (f->cache_size - 1))
			if (f->cache[i].addr == addr) {
				f->hits++;
				return f->cache[i].loc;
			}
	}
	f->misses++;
	loc = resolve(f, addr);
	if (!loc)
		return &unknown_location;
	if ((f->cache_used + 1) * 2 > f->cache_size && !cache_grow(f)) {
		free(loc);
		return &unknown_location;
	}
	for (i = hash_addr(addr) & (f->cache_size - 1); f->cache[i].loc;
	     i = (i + 1) & (f->cache_size - 1))
		;
	f->cache[i].addr = addr;
	f->cache[i].loc = loc;
	f->cache_used++;
	return loc;
}
