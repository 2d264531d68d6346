/* SPDX-License-Identifier: MIT */
/*
 * uunwind_exe: which executable a guest process runs, where it is loaded,
 * and the host file with its call frame information.
 *
 * The kernel keeps a process's ELF auxiliary vector in its mm_struct
 * (saved_auxv): AT_PHDR is the run-time address of the executable's
 * program headers, AT_PHNUM their count.  The ELF header sits at the start
 * of the page-aligned mapping of file offset 0, in front of them; from it
 * and the program headers (all read from the process's own memory) come
 * the load bias (run-time minus link-time address: 0 for a fixed-address
 * ET_EXEC, where the loader put it for a PIE) and the GNU build-id note.
 * The build-id then names the host copy: a --binary file, or a symbol
 * directory laid out as debuginfod and the distributions do
 * (DIR/.build-id/xx/rest for the executable, rest.debug for its separate
 * debug file).
 *
 * Everything read from the guest is untrusted: counts are capped, every
 * address is checked to be a canonical user address, the bias must be page
 * aligned and agree with PT_PHDR when there is one, and a host file is
 * used only when its build-id, type and executable segments are those the
 * guest shows and its own program headers give the same bias.  A process
 * that lies about any of that just gets frame pointers.
 */
#ifndef IVM_UUNWIND_EXE_H
#define IVM_UUNWIND_EXE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "unwind/kunwind.h"
#include "unwind/uunwind_dwarf.h"

/* Auxiliary vector entries looked at (the kernel's AT_VECTOR_SIZE is ~50). */
#define IVM_UEXE_MAX_AUXV 64
/* Program headers accepted from the guest (real executables have ~14). */
#define IVM_UEXE_MAX_PHNUM 64
/* Bytes of one PT_NOTE segment searched for the build-id. */
#define IVM_UEXE_MAX_NOTES 2048

/* A guest process's main executable as its memory shows it. */
struct ivm_uexe {
	uint64_t header;	/* run-time address of its ELF header */
	uint64_t bias;		/* run-time minus link-time address */
	bool dyn;		/* ET_DYN: a PIE */
	uint8_t build_id[IVM_UBINARY_MAX_BUILD_ID];
	size_t build_id_len;	/* > 0 */
	/* Its executable PT_LOADs, link-time addresses, program order. */
	struct ivm_ubinary_segment exec[IVM_UBINARY_MAX_EXEC];
	size_t nr_exec;
};

/*
 * Identify the executable of a process from its auxiliary vector (auxv,
 * auxv_len bytes: the raw saved_auxv of its mm_struct, pairs of
 * little-endian u64 ending at AT_NULL) and its memory (umem, through its
 * own page tables; la57 widens the user range).  IVM_ERROR_NOT_FOUND when
 * the vector has no program headers, or the executable has no build-id;
 * IVM_ERROR_PROTOCOL when what the guest shows is inconsistent; the
 * reader's error (a fault) when a page is not readable.
 */
struct ivm_error *ivm_uexe_identify(const struct ivm_kmem_reader *umem,
				    const uint8_t *auxv, size_t auxv_len,
				    int la57, struct ivm_uexe *ret);

/*
 * The GNU build-id of an ELF file, through a reader whose addresses are
 * offsets in the file (a guest file's bytes, kernel/gfile.h): its ELF
 * header, at most IVM_UEXE_MAX_PHNUM program headers and the first
 * IVM_UEXE_MAX_NOTES bytes of each PT_NOTE segment.  id gets len bytes.
 * IVM_ERROR_NOT_FOUND when it is no 64-bit little-endian ELF file or has
 * no build-id note; the reader's error when a part cannot be read.
 */
struct ivm_error *ivm_uexe_file_build_id(const struct ivm_kmem_reader *file,
					 uint8_t id[IVM_UBINARY_MAX_BUILD_ID],
					 size_t *len);

/*
 * Whether the host file b is the executable x: the same build-id, the same
 * ELF type, the same executable segments, and its program headers place
 * file offset 0 where the guest has the ELF header (the same bias).
 * IVM_ERROR_INVALID saying what differs.
 */
struct ivm_error *ivm_uexe_check(const struct ivm_uexe *x,
				 const struct ivm_ubinary *b);

/*
 * Lower-case hex of a build-id into out (2 * len + 1 bytes).  Returns out.
 */
char *ivm_build_id_hex(const uint8_t *id, size_t len, char *out);

/*
 * "dir/.build-id/xx/rest" (debug false) or ".../rest.debug" (true), the
 * debuginfod and distribution layout; NULL for a build-id shorter than 2
 * bytes or no memory.  Caller frees.
 */
char *ivm_uexe_symdir_path(const char *dir, const uint8_t *id, size_t len,
			   bool debug);

/*
 * Host binaries by build-id: the ones given explicitly (kept for the
 * cache's life) and the ones found in a symbol directory (opened on first
 * use, at most IVM_UEXE_CACHE_SYMDIR of them, least recently used
 * replaced), and the build-ids the directory has no usable file for (at
 * most IVM_UEXE_CACHE_MISSES, oldest forgotten).  Not thread-safe.
 */
#define IVM_UEXE_CACHE_EXPLICIT 16
#define IVM_UEXE_CACHE_SYMDIR 16
#define IVM_UEXE_CACHE_MISSES 64

struct ivm_uexe_cache;

/* dir may be NULL (explicit binaries only); it is copied. */
struct ivm_error *ivm_uexe_cache_create(const char *dir,
					struct ivm_uexe_cache **ret);
void ivm_uexe_cache_destroy(struct ivm_uexe_cache *c);

/*
 * Use dir (NULL: none; copied) for the lookups from now on; the misses
 * remembered so far are forgotten.  Errors as ivm_uexe_cache_create().
 */
struct ivm_error *ivm_uexe_cache_set_dir(struct ivm_uexe_cache *c,
					 const char *dir);

/*
 * Add the host file at path (ivm_ubinary_open's checks; it must have a
 * build-id).  A PIE is fine: its bias comes from the guest.
 */
struct ivm_error *ivm_uexe_cache_add(struct ivm_uexe_cache *c,
				     const char *path);

/* An explicit binary, in the order added, or NULL past the end. */
struct ivm_ubinary *ivm_uexe_cache_explicit(const struct ivm_uexe_cache *c,
					    size_t i);

/*
 * A handle on a binary of the cache: symdir binaries can be replaced, so a
 * handle kept across lookups is checked by ivm_uexe_cache_get().
 */
struct ivm_uexe_handle {
	int slot;		/* -1: none */
	uint32_t generation;
};

/*
 * The host binary for x: an explicit one with its build-id, else the
 * symdir's rest (if it has CFI), else rest.debug (if that has CFI: a
 * separate debug file usually has .eh_frame as NOBITS), each checked by
 * ivm_uexe_check().  *ret gets slot -1 when there is none, and a miss is
 * remembered.  why (may be NULL) gets a static reason for a miss.  Errors
 * only for no memory.
 */
struct ivm_error *ivm_uexe_cache_find(struct ivm_uexe_cache *c,
				      const struct ivm_uexe *x,
				      struct ivm_uexe_handle *ret,
				      const char **why);

/* The binary of h, or NULL when h is none or its slot was reused. */
struct ivm_ubinary *ivm_uexe_cache_get(struct ivm_uexe_cache *c,
				       struct ivm_uexe_handle h);

/* Counters for tests and benchmarks. */
struct ivm_uexe_cache_stats {
	uint64_t opened;	/* symdir files opened */
	uint64_t miss_hits;	/* lookups answered by a remembered miss */
	uint64_t evicted;	/* symdir binaries replaced */
};
void ivm_uexe_cache_stats(const struct ivm_uexe_cache *c,
			  struct ivm_uexe_cache_stats *ret);

#endif /* IVM_UUNWIND_EXE_H */
