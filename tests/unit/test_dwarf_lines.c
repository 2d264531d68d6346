// SPDX-License-Identifier: MIT
/*
 * symbols/dwarf_lines.c answers exactly as libdw: on the real guest
 * vmlinux, for a sample of its units, every file name of the line table
 * and the row of every row address and its neighbours (file and line)
 * must equal dwarf_filesrc() / dwarf_getsrc_die()'s.  Plus hostile
 * headers.
 */
#include <criterion/criterion.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <string.h>
#include <unistd.h>

#include "dwarf_lines.h"

#define VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"

static void section(Elf *elf, const char *name, const uint8_t **data,
		    size_t *size)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	cr_assert_eq(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		gelf_getshdr(scn, &sh);
		if (strcmp(elf_strptr(elf, shstrndx, sh.sh_name), name))
			continue;
		d = elf_getdata(scn, NULL);
		cr_assert(d);
		*data = d->d_buf;
		*size = d->d_size;
	}
}

static bool same_string(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

Test(dwarf_lines, same_answers_as_libdw_on_vmlinux, .timeout = 120)
{
	struct ivm_dwarf_sections sec = { 0 };
	size_t units = 0, checked = 0, rows = 0;
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie;
	uint8_t unit_type;
	Dwarf *dwarf;
	Elf *elf;
	int fd;

	if (access(VMLINUX, R_OK))
		cr_skip_test("%s not present (make image)", VMLINUX);
	elf_version(EV_CURRENT);
	fd = open(VMLINUX, O_RDONLY);
	cr_assert_geq(fd, 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	dwarf = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	cr_assert(dwarf);
	section(elf, ".debug_line", &sec.line, &sec.line_size);
	section(elf, ".debug_line_str", &sec.line_str, &sec.line_str_size);
	section(elf, ".debug_str", &sec.str, &sec.str_size);
	while (dwarf_get_units(dwarf, cu, &cu, NULL, &unit_type, &cudie,
			       NULL) == 0) {
		struct ivm_dwarf_lines *t;
		Dwarf_Attribute attr;
		Dwarf_Files *files;
		Dwarf_Lines *lines;
		Dwarf_Word off;
		size_t nfiles, nlines, i;

		/* Every 16th unit: all kinds of units, in seconds. */
		if (units++ % 16 ||
		    dwarf_formudata(dwarf_attr(&cudie, DW_AT_stmt_list, &attr),
				    &off))
			continue;
		cr_assert(ivm_dwarf_lines_read(&sec, off, &t),
			  "unit %s not read", dwarf_diename(&cudie));
		cr_assert_eq(dwarf_getsrcfiles(&cudie, &files, &nfiles), 0);
		for (i = 0; i < nfiles + 2; i++)
			cr_assert(same_string(i < nfiles ?
					      dwarf_filesrc(files, i, NULL, NULL) :
					      NULL, ivm_dwarf_lines_file(t, i)),
				  "%s: file %zu", dwarf_diename(&cudie), i);
		cr_assert_eq(dwarf_getsrclines(&cudie, &lines, &nlines), 0);
		for (i = 0; i < nlines; i++) {
			Dwarf_Addr a;
			int k;

			dwarf_lineaddr(dwarf_onesrcline(lines, i), &a);
			for (k = -1; k <= 1; k++) {
				Dwarf_Line *l = dwarf_getsrc_die(&cudie, a + k);
				const char *file = NULL;
				unsigned int line = 0;
				bool ours = ivm_dwarf_lines_find(t, a + k, &file,
								 &line);
				int lineno = 0;

				cr_assert_eq(ours, l != NULL, "0x%lx", a + k);
				rows++;
				if (!l)
					continue;
				dwarf_lineno(l, &lineno);
				cr_assert(same_string(file,
						      dwarf_linesrc(l, NULL, NULL)),
					  "0x%lx: %s", a + k, file);
				cr_assert_eq(line, lineno > 0 ? lineno : 0,
					     "0x%lx", a + k);
			}
		}
		ivm_dwarf_lines_destroy(t);
		checked++;
	}
	cr_assert_gt(checked, 100);
	cr_assert_gt(rows, 100000);
	dwarf_end(dwarf);
	elf_end(elf);
	close(fd);
}

Test(dwarf_lines, hostile_headers)
{
	/* unit_length past the section, version 4, header past the unit. */
	static const uint8_t past_end[] = { 0xff, 0x00, 0x00, 0x00, 0x05 };
	static const uint8_t v4[] = { 0x06, 0, 0, 0, 0x04, 0, 0, 0, 0, 0 };
	static const uint8_t long_header[] = {
		0x0a, 0, 0, 0, 0x05, 0, 0x08, 0, 0xff, 0xff, 0, 0, 0, 0,
	};
	struct ivm_dwarf_sections sec = { 0 };
	struct ivm_dwarf_lines *t;

	sec.line = past_end;
	sec.line_size = sizeof(past_end);
	cr_assert(!ivm_dwarf_lines_read(&sec, 0, &t));
	cr_assert_null(t);
	sec.line = v4;
	sec.line_size = sizeof(v4);
	cr_assert(!ivm_dwarf_lines_read(&sec, 0, &t));
	sec.line = long_header;
	sec.line_size = sizeof(long_header);
	cr_assert(!ivm_dwarf_lines_read(&sec, 0, &t));
	cr_assert(!ivm_dwarf_lines_read(&sec, 1000, &t));
}
