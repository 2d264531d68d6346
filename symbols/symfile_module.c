// SPDX-License-Identifier: MIT
/*
 * A guest kernel module's symbols: its .ko (with or without debuginfo)
 * placed where the guest loaded its sections, by libdwfl, which also
 * relocates its DWARF.
 */
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symfile.h"
#include "symfile_int.h"

/*
 * A module's sections are where the guest put them, except .init.*: the
 * kernel frees those once the module is initialised and reuses the memory
 * (two modules here showed the same .init.text address), so an address
 * there is never named after them.
 */
static bool section_loaded(const struct ivm_symfile *f, const char *name,
			   uint64_t *addr)
{
	size_t i;

	if (!name || !strncmp(name, ".init", 5))
		return false;
	for (i = 0; i < f->nr_mod_sections; i++)
		if (!strcmp(f->mod_sections[i].name, name)) {
			*addr = f->mod_sections[i].addr;
			return true;
		}
	return false;
}

static int module_find_elf(Dwfl_Module *mod, void **userdata,
			   const char *modname, Dwarf_Addr base,
			   char **file_name, Elf **elfp)
{
	struct ivm_symfile *f = *userdata;
	int fd;

	/*
	 * A private mapping of its own: libdwfl relocates the DWARF in
	 * place, in memory.
	 */
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	*elfp = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	*file_name = strdup(f->path);
	if (!*elfp || !*file_name) {
		elf_end(*elfp);
		*elfp = NULL;
		free(*file_name);
		*file_name = NULL;
		close(fd);
		return -1;
	}
	return fd;
}

static int module_no_debuginfo(Dwfl_Module *mod, void **userdata,
			       const char *modname, Dwarf_Addr base,
			       const char *file_name, const char *debuglink,
			       GElf_Word crc, char **debuginfo_file_name)
{
	return -1;	/* the .ko given is the debug file */
}

static int module_section_address(Dwfl_Module *mod, void **userdata,
				  const char *modname, Dwarf_Addr base,
				  const char *secname, GElf_Word shndx,
				  const GElf_Shdr *shdr, Dwarf_Addr *addr)
{
	uint64_t a;

	*addr = section_loaded(*userdata, secname, &a) ? a : (Dwarf_Addr)-1;
	return 0;
}

static const Dwfl_Callbacks module_callbacks = {
	.find_elf = module_find_elf,
	.find_debuginfo = module_no_debuginfo,
	.section_address = module_section_address,
};

/*
 * The placed executable sections of the module: its text, for
 * ivm_symfile_in_text() and the range reported to libdwfl.
 */
static struct ivm_sym_error *module_texts(struct ivm_symfile *f)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(f->elf, &shstrndx))
		return symfile_elf_error(f->path, "no section names");
	while ((scn = elf_nextscn(f->elf, scn))) {
		struct text_section *nt;
		const char *name;
		uint64_t addr, end;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) ||
		    !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size)
			continue;
		name = elf_strptr(f->elf, shstrndx, sh.sh_name);
		if (!section_loaded(f, name, &addr))
			continue;
		end = addr + sh.sh_size;
		if (end < addr)
			continue;
		nt = realloc(f->texts, (f->nr_texts + 1) * sizeof(*nt));
		if (!nt)
			return &ivm_sym_enomem;
		f->texts = nt;
		f->texts[f->nr_texts++] = (struct text_section){ addr, end };
		if (!f->text_hi || addr < f->text_lo)
			f->text_lo = addr;
		if (end > f->text_hi)
			f->text_hi = end;
	}
	if (!f->nr_texts)
		return ivm_sym_error_create(IVM_SYM_ERROR_NOT_FOUND,
			"%s: none of its code sections has a load address",
			f->path);
	return NULL;
}

/* The symbols of a module, at the addresses libdwfl placed them. */
static struct ivm_sym_error *module_symbols(struct ivm_symfile *f,
					    Dwfl_Module *mod)
{
	size_t cap = 0, shstrndx;
	int i, n = dwfl_module_getsymtab(mod);

	if (n < 0 || elf_getshdrstrndx(f->elf, &shstrndx))
		return NULL;	/* no symbol table: DWARF alone */
	for (i = 1; i < n; i++) {
		struct symbol s;
		const char *name, *sec;
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		GElf_Shdr sh;
		Elf *elf;
		Dwarf_Addr bias;
		uint64_t sec_addr;
		int type;

		name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx,
					       &elf, &bias);
		if (!name || !*name || name[0] == '$' ||
		    !strncmp(name, ".L", 2))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_NOTYPE &&
		    type != STT_GNU_IFUNC)
			continue;
		/* Only in a placed code section: never .init.text's 0. */
		if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE ||
		    !gelf_getshdr(elf_getscn(f->elf, shndx), &sh) ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		sec = elf_strptr(f->elf, shstrndx, sh.sh_name);
		if (!section_loaded(f, sec, &sec_addr) ||
		    sym.st_value > sh.sh_size ||
		    addr != sec_addr + sym.st_value)
			continue;
		s.addr = addr;
		s.size = sym.st_size;
		s.name = name;
		s.rank = (type == STT_FUNC ? 4 : 0) + (s.size ? 2 : 0) +
			 (GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 1 : 0);
		if (!symfile_symbols_push(f, &cap, &s))
			return &ivm_sym_enomem;
	}
	symfile_symbols_finish(f);
	return NULL;
}

struct ivm_sym_error *ivm_symfile_open_module(
	const char *path, const char *name,
	const struct ivm_sym_section_addr *sections, size_t nr_sections,
	struct ivm_symfile **ret)
{
	struct ivm_sym_error *err;
	struct ivm_symfile *f;
	Dwfl_Module *mod;
	Dwarf_Addr bias = 0;
	uint16_t type;
	void **userdata;
	size_t i;

	err = symfile_open_checked(path, &type, &f);
	if (err)
		return err;
	if (type != ET_REL) {
		err = ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
			"%s: not a relocatable object: not a kernel module",
			path);
		goto fail;
	}
	f->mod_sections = calloc(nr_sections ? nr_sections : 1,
				 sizeof(*f->mod_sections));
	if (!f->mod_sections)
		goto nomem;
	for (i = 0; i < nr_sections; i++) {
		if (!sections[i].name)
			continue;
		f->mod_sections[f->nr_mod_sections].name =
			strdup(sections[i].name);
		if (!f->mod_sections[f->nr_mod_sections].name)
			goto nomem;
		f->mod_sections[f->nr_mod_sections++].addr = sections[i].addr;
	}
	err = module_texts(f);
	if (err)
		goto fail;
	f->dwfl = dwfl_begin(&module_callbacks);
	if (!f->dwfl)
		goto nomem;
	dwfl_report_begin(f->dwfl);
	mod = dwfl_report_module(f->dwfl, name, f->text_lo, f->text_hi);
	if (!mod || dwfl_report_end(f->dwfl, NULL, NULL)) {
		err = ivm_sym_error_create(IVM_SYM_ERROR_FORMAT,
					   "%s: cannot place module %s: %s",
					   path, name, dwfl_errmsg(-1));
		goto fail;
	}
	dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	*userdata = f;
	err = module_symbols(f, mod);
	if (err)
		goto fail;
	/*
	 * libdwfl applies the module's .rela.debug_* with the section
	 * addresses: DWARF then speaks guest addresses, bias 0.  A DWARF it
	 * cannot relocate is not used (names from the symbol table only).
	 */
	f->dwarf = dwfl_module_getdwarf(mod, &bias);
	f->dwarf_borrowed = true;
	if (f->dwarf && bias)
		f->dwarf = NULL;
	*ret = f;
	return NULL;
nomem:
	err = &ivm_sym_enomem;
fail:
	ivm_symfile_destroy(f);
	return err;
}
