/* SPDX-License-Identifier: MIT */
/*
 * kmodules: the guest kernel's loaded modules, read from its memory, so
 * that addresses inside module code can be symbolized offline (symbols/
 * needs each module's name, build-id and where each of its sections was
 * loaded, the same facts as the guest's /sys/module/NAME/sections/).
 *
 * Walks the kernel's `modules` list with offsets from BTF: struct module's
 * list, name, state, core memory (core_layout on 4.x-6.3, mem[MOD_TEXT]
 * from 6.4) and sect_attrs (struct module_sect_attrs, one address per
 * ELF section).  The build-id is read from the module's own
 * .note.gnu.build-id section in guest memory.
 *
 * Hostile guest: at most IVM_KMODULES_MAX modules and
 * IVM_KMODULE_MAX_SECTIONS sections each; every pointer is checked to be a
 * kernel address; names are copied bounded and NUL-terminated, a module
 * name only of the characters a profile's reader takes back; a bad
 * module ends the walk, marked truncated, with what was read before kept.
 */
#ifndef IVM_KMODULES_H
#define IVM_KMODULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/btf.h"
#include "base/error.h"
#include "kernel/kernel_layout.h"

#define IVM_KMODULES_MAX		4096
#define IVM_KMODULE_MAX_SECTIONS	256
#define IVM_KMODULE_NAME_LEN		64
#define IVM_KMODULE_SECTION_NAME_LEN	64
/* More ORC entries than any module has (the whole kernel has ~300k). */
#define IVM_KMODULE_MAX_ORCS		(1u << 20)

struct ivm_kmodule_section {
	char name[IVM_KMODULE_SECTION_NAME_LEN];
	uint64_t addr;
};

struct ivm_kmodule {
	char name[IVM_KMODULE_NAME_LEN];
	uint64_t base;		/* start of its core text, 0 if unknown */
	uint64_t size;		/* bytes of core memory from base */
	char build_id[41];	/* hex; "" when none could be read */
	/*
	 * Its ORC unwind tables (x86-64 struct mod_arch_specific), 0 when the
	 * kernel has none: num_orcs entries of orc_unwind_ip (relative ips)
	 * and of orc_unwind, as for the kernel's own tables.
	 */
	uint64_t orc_unwind_ip, orc_unwind;
	uint32_t num_orcs;
	size_t nr_sections;
	struct ivm_kmodule_section *sections;
};

struct ivm_kmodules {
	size_t nr;
	struct ivm_kmodule *mods;
	bool truncated;		/* the walk ended early: see error */
	struct ivm_error *error;	/* why, when truncated */
};

/*
 * Read the module list.  Errors: IVM_ERROR_NOT_FOUND when the kernel has
 * no `modules` symbol or its BTF lacks struct module (a kernel without
 * module support: an empty list is not an error), IVM_ERROR_NOMEM.  A
 * guest fault mid-walk is not an error: the result is truncated.
 */
struct ivm_error *ivm_kmodules_read(const struct ivm_kernel_layout *layout,
				    const struct ivm_btf *btf,
				    struct ivm_kmodules **ret);
void ivm_kmodules_destroy(struct ivm_kmodules *mods);

/*
 * A module as lines of text, for a profile's metadata, whose strings are
 * at most IVM_KMODULE_LINE_MAX bytes:
 *   module:          NAME BASE SIZE BUILD-ID|-
 *   module_sections: NAME SECTION=ADDR[,SECTION=ADDR...]   (as many as needed)
 * addresses in hex with 0x.  Sections whose names hold a space, comma or
 * '=', or are too long for a line, are left out (no real module has
 * them).  Both return NULL only without memory; the caller frees the line,
 * and each section line and then the array.
 */
#define IVM_KMODULE_LINE_MAX 255

char *ivm_kmodule_format(const struct ivm_kmodule *m);
char **ivm_kmodule_format_sections(const struct ivm_kmodule *m, size_t *nr);

/*
 * Parse a module line (from a profile file, so untrusted): fills *m with
 * no sections.  IVM_ERROR_PROTOCOL on anything malformed.
 */
struct ivm_error *ivm_kmodule_parse(const char *line, struct ivm_kmodule *m);

/*
 * Parse a module_sections line and append its sections to the module of
 * that name among mods[0..nr) (sections allocated; free with
 * ivm_kmodule_release).  IVM_ERROR_PROTOCOL when malformed, naming an
 * unknown module, or past IVM_KMODULE_MAX_SECTIONS; nothing is appended
 * then.
 */
struct ivm_error *ivm_kmodule_parse_sections(const char *line,
					     struct ivm_kmodule *mods,
					     size_t nr);
void ivm_kmodule_release(struct ivm_kmodule *m);

#endif /* IVM_KMODULES_H */
