/* SPDX-License-Identifier: MIT */
/*
 * What symfile.c (the ELF side: symbols, sections, System.map, the
 * lookup cache), symfile_module.c (a kernel module placed where the guest
 * loaded it) and symfile_dwarf.c (the DWARF index: units, functions,
 * inline scopes, lines) share of an ivm_symfile.
 */
#ifndef IVM_SYMFILE_INT_H
#define IVM_SYMFILE_INT_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dwarf_lines.h"
#include "symfile.h"

struct symbol {
	uint64_t addr;
	uint64_t size;		/* implied from the next symbol if unsized */
	const char *name;
	unsigned char rank;	/* among aliases, the higher is kept */
};

struct unit;
struct unit_range;

struct cache_slot {
	uint64_t addr;
	struct ivm_sym_location *loc;	/* NULL: empty slot */
};

struct ivm_symfile {
	char *path;
	int fd;
	Elf *elf;
	Dwarf *dwarf;
	struct ivm_symfile *debug;	/* separate debuginfo, owned */
	struct ivm_symfile *alt;	/* dwz's supplementary file, owned;
					   its Dwarf is dwarf's alt */
	char alt_hex[2 * IVM_SYM_BUILD_ID_MAX + 1];	/* missing_alt's */
	Dwfl *dwfl;			/* a module: relocates its DWARF */
	bool dwarf_borrowed;		/* dwarf belongs to dwfl */
	struct ivm_sym_section_addr *mod_sections;	/* names owned */
	size_t nr_mod_sections;
	char *map_text;			/* System.map: names point here */

	struct symbol *symbols;
	size_t nr_symbols;
	uint64_t text_lo, text_hi;	/* hull of the executable sections */
	struct text_section {
		uint64_t lo, hi;
	} *texts;			/* the sections themselves */
	size_t nr_texts;

	/* Sections for the direct line-table reader (dwarf_lines.h). */
	struct ivm_dwarf_sections dwarf_sections;

	char build_id_hex[2 * IVM_SYM_BUILD_ID_MAX + 1];
	char *release;

	struct unit **units;		/* open addressing by cu_off */
	size_t units_size, nr_units;
	bool ranges_indexed;		/* fallback when aranges miss */
	struct unit_range *unit_ranges;	/* sorted by lo */
	size_t nr_unit_ranges;

	struct cache_slot *cache;
	size_t cache_size;		/* power of two */
	size_t cache_used;
	uint64_t hits, misses;
};

/* A hash of an address or a DIE offset, for open addressing. */
static inline size_t hash_addr(uint64_t addr)
{
	addr ^= addr >> 33;
	addr *= 0xff51afd7ed558ccdull;
	addr ^= addr >> 33;
	return (size_t)addr;
}

/*
 * Room for one more element in a growing array: returns the array, moved
 * if it had to grow, or NULL (the old array still valid and owned by the
 * caller) when memory or size_t runs out.
 */
void *symfile_grow(void *array, size_t *cap, size_t nr, size_t elem,
		   size_t first);

#define GROW(array, cap, nr, first) ({					\
	void *_n = symfile_grow((array), (cap), (nr), sizeof(*(array)),	\
				(first));					\
	if (_n)								\
		(array) = _n;						\
	_n != NULL;							\
})

/* symfile.c */
/* Append s to f's symbols (cap: their room); false when out of memory. */
bool symfile_symbols_push(struct ivm_symfile *f, size_t *cap,
			  const struct symbol *s);
/*
 * Sort, keep one name per address (the best ranked alias), and give
 * unsized symbols the room up to the next one, so a lookup is one binary
 * search.
 */
void symfile_symbols_finish(struct ivm_symfile *f);
/* A format error naming path, what failed and libelf's reason. */
struct ivm_sym_error *symfile_elf_error(const char *path, const char *what);
/*
 * Open path as an ELF file whose headers and section table are sane (no
 * section past the file's end); *type gets its e_type.
 */
struct ivm_sym_error *symfile_open_checked(const char *path,
					   uint16_t *type,
					   struct ivm_symfile **ret);

/* symfile_dwarf.c */
/*
 * The frames of addr in f's DWARF, innermost first (at most
 * IVM_SYM_MAX_INLINE); how many.
 */
unsigned int symfile_dwarf_frames(struct ivm_symfile *f, uint64_t addr,
				  struct ivm_sym_frame *frames);
/* Everything the DWARF index of f holds. */
void symfile_dwarf_free(struct ivm_symfile *f);

#endif /* IVM_SYMFILE_INT_H */
