/* SPDX-License-Identifier: MIT */
/*
 * uelf: an ELF file (an executable or a shared library) as the guest holds
 * it, read without any host copy.
 *
 * The bytes come through a reader by file offset (struct ivm_kmem_reader
 * whose addresses are offsets into the file): the process's own mapping of
 * the file, another process's, or the guest's page cache of it.  From them
 * this module decodes what a loaded ELF carries in its loadable segments:
 *  - the ELF header and program headers (PT_LOAD, PT_DYNAMIC, PT_NOTE,
 *    PT_GNU_EH_FRAME, PT_TLS), and the GNU build-id note;
 *  - PT_DYNAMIC -> DT_SYMTAB, DT_STRTAB, DT_STRSZ, DT_GNU_HASH or DT_HASH:
 *    the dynamic symbol table, its size counted from the hash table (the
 *    GNU hash chains: the highest symbol any bucket reaches, then along its
 *    chain to the end bit), with each function's address and size;
 *  - PT_GNU_EH_FRAME -> the .eh_frame_hdr binary search table (ucfi.h
 *    reads the FDEs it points to);
 *  - symbols of any type by name, from .symtab or .dynsym (labels read
 *    the variables they name: profile/labels.h).
 * Link-time addresses (p_vaddr, d_ptr) become file offsets through the
 * PT_LOAD that holds them (ivm_uelf_offset()).  ld.so rewrites the
 * pointers of a loaded object's .dynamic to run-time addresses; a pointer
 * that lies in no segment but does at the caller's load bias is taken at
 * that bias, so the dynamic section may come from the process's memory or
 * from the file alike.
 *
 * Everything read is hostile: counts and sizes are capped (IVM_UELF_MAX_*),
 * every offset and length is overflow-checked, a pointer outside the
 * file's segments is refused, and a failed read is returned as the
 * reader's error (IVM_ERROR_FAULT with its address: a page the guest does
 * not hold), never guessed around.
 */
#ifndef IVM_UELF_H
#define IVM_UELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"

/* Program headers accepted (real objects have about a dozen). */
#define IVM_UELF_MAX_PHNUM 64
/* PT_LOAD segments kept (ld makes four; gold and lld a few more). */
#define IVM_UELF_MAX_LOADS 16
/* Bytes of one PT_NOTE searched for the build-id. */
#define IVM_UELF_MAX_NOTES 2048
/* Longest build-id accepted (GNU ld makes 20-byte SHA-1 ones). */
#define IVM_UELF_MAX_BUILD_ID 64
/* Entries of PT_DYNAMIC read (libc.so.6 has about 40). */
#define IVM_UELF_MAX_DYNAMIC 256
/* Dynamic symbols and string bytes read (libc.so.6: 3,000 and 40 KiB). */
#define IVM_UELF_MAX_SYMS (1u << 18)
#define IVM_UELF_MAX_STRTAB (16u << 20)
/* GNU hash buckets walked (libc.so.6 has about 1,000). */
#define IVM_UELF_MAX_BUCKETS (1u << 18)
/* .eh_frame_hdr entries accepted (libc.so.6 has about 5,000). */
#define IVM_UELF_MAX_FDES (1u << 22)

/* One PT_LOAD, link-time. */
struct ivm_uelf_load {
	uint64_t vaddr, memsz;
	uint64_t offset, filesz;
	uint32_t flags;		/* PF_R, PF_W, PF_X */
};

/* The .eh_frame_hdr search table, decoded from its header. */
struct ivm_uelf_eh_hdr {
	uint64_t vaddr;		/* of .eh_frame_hdr; 0: none */
	uint64_t eh_frame;	/* vaddr of .eh_frame */
	uint64_t table;		/* vaddr of the first (pc, fde) pair */
	uint64_t count;		/* pairs, <= IVM_UELF_MAX_FDES */
	uint8_t entry_size;	/* bytes of one value: 4 or 8 */
	bool entry_signed;
};

/* What the headers of an ELF file say. */
struct ivm_uelf {
	uint16_t type;		/* ET_EXEC or ET_DYN */
	uint16_t phnum;
	uint64_t phoff;
	uint64_t entry;
	struct ivm_uelf_load loads[IVM_UELF_MAX_LOADS];
	size_t nr_loads;
	uint64_t dynamic;	/* vaddr of PT_DYNAMIC; 0: none */
	uint64_t dynamic_size;
	/* PT_TLS, the thread-local storage template; tls_memsz 0: none. */
	uint64_t tls_vaddr, tls_memsz;
	uint64_t tls_align;	/* a power of two (1 for 0 or 1) */
	struct ivm_uelf_eh_hdr eh;
	uint8_t build_id[IVM_UELF_MAX_BUILD_ID];
	size_t build_id_len;	/* 0: none found */
	/*
	 * With no build-id found: the file offset of a PT_NOTE the reader
	 * could not read (it may hold one), UINT64_MAX when none failed.
	 */
	uint64_t build_id_fault;
	/* Section headers (not in any segment: read only when needed). */
	uint64_t shoff;
	uint16_t shnum, shentsize, shstrndx;
};

/* Section headers read (real files have about 40). */
#define IVM_UELF_MAX_SHNUM 256

/* A section found by name: its address, file offset and size. */
struct ivm_uelf_section {
	uint64_t vaddr, offset, size;
	uint32_t type;
};

/*
 * Find section name through the section headers (e_shoff: at the end of
 * the file, in no segment, so only the page cache may hold them).
 * IVM_ERROR_NOT_FOUND when the file has no such section or no section
 * headers; IVM_ERROR_PROTOCOL when they are malformed; the reader's error
 * when the guest does not hold them.
 */
struct ivm_error *ivm_uelf_find_section(const struct ivm_kmem_reader *file,
					const struct ivm_uelf *elf,
					const char *name,
					struct ivm_uelf_section *ret);

/*
 * Decode the ELF header, the program headers, the build-id (PT_NOTE) and
 * the .eh_frame_hdr header of the file read through file.  A build-id
 * note whose page cannot be read leaves build_id_len 0; so does an
 * .eh_frame_hdr that cannot be read or is malformed leave eh.vaddr 0.
 * Errors: IVM_ERROR_PROTOCOL (not an x86-64 ELF executable or shared
 * library, or inconsistent headers), the reader's error for the header
 * and program headers themselves.
 */
struct ivm_error *ivm_uelf_parse(const struct ivm_kmem_reader *file,
				 struct ivm_uelf *ret);

/*
 * Decode program headers (phnum of 56 bytes at phdrs) into elf: the
 * loads, PT_DYNAMIC, PT_TLS, PT_GNU_EH_FRAME's vaddr (eh.vaddr; the table
 * header is read by ivm_uelf_parse), and *phdr_vaddr gets PT_PHDR's
 * p_vaddr (UINT64_MAX: none).  IVM_ERROR_PROTOCOL for a segment that
 * wraps, too many loads, or a PT_TLS alignment that is no power of two.  For callers that read the headers themselves (uunwind_exe).
 */
struct ivm_error *ivm_uelf_parse_phdrs(const uint8_t *phdrs, size_t phnum,
				       struct ivm_uelf *elf,
				       uint64_t *phdr_vaddr);

/*
 * The GNU build-id among notes (len bytes of PT_NOTE or SHT_NOTE
 * content) into id (IVM_UELF_MAX_BUILD_ID bytes); returns its length, 0
 * when there is none.
 */
size_t ivm_uelf_find_build_id(const uint8_t *notes, size_t len, uint8_t *id);

/*
 * The file offset of the len bytes at link-time vaddr: they must lie
 * within the file bytes (p_filesz) of one PT_LOAD.  False otherwise.
 */
bool ivm_uelf_offset(const struct ivm_uelf *elf, uint64_t vaddr,
		     uint64_t len, uint64_t *ret);

/*
 * The load bias of elf from one of its file mappings (a VMA starting at
 * guest address map_start that maps the file from offset map_offset, both
 * page aligned): the loader maps each PT_LOAD from its page-rounded
 * p_offset to its page-rounded p_vaddr plus the bias.  False when no
 * PT_LOAD starts at that offset.
 */
bool ivm_uelf_bias(const struct ivm_uelf *elf, uint64_t map_start,
		   uint64_t map_offset, uint64_t *ret);

/* Whether [vaddr, vaddr + len) lies in the memory of one PT_LOAD. */
bool ivm_uelf_in_segment(const struct ivm_uelf *elf, uint64_t vaddr,
			 uint64_t len);

/*
 * Read len bytes at link-time vaddr through file.  IVM_ERROR_PROTOCOL
 * when they are not file bytes of one segment, else the reader's error.
 */
struct ivm_error *ivm_uelf_read(const struct ivm_kmem_reader *file,
				const struct ivm_uelf *elf, uint64_t vaddr,
				void *buf, size_t len);

/*
 * A reader by link-time vaddr over a reader by file offset (ctx: a
 * struct ivm_uelf_vreader that outlives the reader): what ucfi.h reads
 * .eh_frame_hdr and .eh_frame through.
 */
struct ivm_uelf_vreader {
	const struct ivm_kmem_reader *file;
	const struct ivm_uelf *elf;
};
void ivm_uelf_vreader_init(struct ivm_uelf_vreader *v,
			   const struct ivm_kmem_reader *file,
			   const struct ivm_uelf *elf,
			   struct ivm_kmem_reader *ret);

/* One function of the dynamic symbol table. */
struct ivm_uelf_sym {
	uint64_t vaddr, size;	/* link-time; size > 0 */
	uint32_t name;		/* offset into the string table */
};

/*
 * The functions (STT_FUNC, STT_GNU_IFUNC with a size and a section) of a
 * symbol table, sorted by address, and their names.  Owned by the caller
 * (ivm_uelf_syms_destroy).
 */
struct ivm_uelf_syms {
	struct ivm_uelf_sym *syms;
	size_t nr;
	char *strtab;		/* strsz bytes, the last one NUL */
	size_t strsz;
};

/*
 * Read the dynamic symbol table of elf through PT_DYNAMIC.  bias is the
 * run-time minus link-time address of the object where the dynamic
 * section may have been relocated by ld.so (0: not loaded, or unknown).
 * IVM_ERROR_NOT_FOUND: no PT_DYNAMIC, or no DT_SYMTAB/DT_STRTAB/hash
 * table; IVM_ERROR_PROTOCOL: malformed or over the caps; the reader's
 * error for a page the guest does not hold.
 */
struct ivm_error *ivm_uelf_read_dynsym(const struct ivm_kmem_reader *file,
				       const struct ivm_uelf *elf,
				       uint64_t bias,
				       struct ivm_uelf_syms **ret);

/*
 * Sort raw symbols (24-byte Elf64_Sym entries, nr of them) against strtab
 * (strsz bytes, copied) into a table of functions: what both .dynsym and
 * .gnu_debugdata's .symtab give.  Symbols whose name lies outside strtab
 * are skipped.  Errors only for no memory.
 */
struct ivm_error *ivm_uelf_syms_build(const uint8_t *raw, size_t nr,
				      const char *strtab, size_t strsz,
				      struct ivm_uelf_syms **ret);

void ivm_uelf_syms_destroy(struct ivm_uelf_syms *s);

/*
 * One table of both a's and b's functions (a's name wins where both have
 * a function of the same start and size).  Errors only for no memory.
 */
struct ivm_error *ivm_uelf_syms_merge(const struct ivm_uelf_syms *a,
				      const struct ivm_uelf_syms *b,
				      struct ivm_uelf_syms **ret);

/* ---- symbols by name ---------------------------------------------------- */

/* Symbols of .symtab scanned for names at most (it is read in chunks). */
#define IVM_UELF_MAX_SCAN (1u << 22)
/* Bytes of a name compared. */
#define IVM_UELF_MAX_NAME 512

/* Where a symbol was found. */
enum ivm_uelf_table {
	IVM_UELF_SYMTAB = 1,	/* .symtab */
	IVM_UELF_DYNSYM = 2,	/* .dynsym */
};

/* A symbol as its table has it (any type: variables, TLS, functions). */
struct ivm_uelf_symbol {
	uint64_t value;		/* link-time address; a TLS symbol's offset
				 * in the TLS template */
	uint64_t size;
	uint8_t type;		/* STT_* */
	uint8_t bind;		/* STB_* */
	uint16_t shndx;
	enum ivm_uelf_table table;
	/*
	 * Definitions of that name and binding with other values in its
	 * table: more than 1 for a local name that several files use
	 * (static variables), which then names nothing for sure.
	 */
	uint32_t matches;
};

/*
 * Look up names[0..n) (each at most IVM_UELF_MAX_NAME - 1 bytes) among
 * the defined symbols of the file: .symtab first (through the section
 * headers, which lie in no segment: a guest holds them only in its page
 * cache, and a stripped file has no .symtab), then .dynsym (through the
 * section headers too, else through PT_DYNAMIC as ivm_uelf_read_dynsym
 * finds it, bias as there), in one pass over each table for all names; a
 * global symbol wins over a local one of the same name.  found[i] says
 * whether names[i] was (ret[i] then holds it).  *incomplete is set when a
 * table could not be read whole (the guest does not hold all its bytes):
 * a name not found may then be in it, and is not known to be absent.
 * Errors: IVM_ERROR_NOT_FOUND when the file has no symbol table;
 * IVM_ERROR_PROTOCOL for a malformed one; the reader's error when not one
 * table could be read.
 */
struct ivm_error *ivm_uelf_find_symbols(const struct ivm_kmem_reader *file,
					const struct ivm_uelf *elf,
					uint64_t bias, const char *const *names,
					size_t n, struct ivm_uelf_symbol *ret,
					bool *found, bool *incomplete);

/*
 * A reader by file offset over a host file (pread), for a host copy of
 * a guest's ELF file (--binary, --symdir): ret->ctx is f, which must
 * outlive the reader; close with ivm_uelf_host_file_close (a no-op for
 * a file never opened: fd -1).  Bytes past the end fault.
 */
struct ivm_uelf_host_file {
	int fd;
	uint64_t size;
};

struct ivm_error *ivm_uelf_host_file_open(const char *path,
					  struct ivm_uelf_host_file *f,
					  struct ivm_kmem_reader *ret);
void ivm_uelf_host_file_close(struct ivm_uelf_host_file *f);

/* Bytes of .gnu_debugdata accepted, and of the ELF it decompresses to. */
#define IVM_UELF_MAX_DEBUGDATA (16u << 20)
#define IVM_UELF_MAX_MINIDEBUG (64u << 20)

/*
 * The functions of the MiniDebugInfo in .gnu_debugdata (an xz-compressed
 * ELF file whose .symtab names what .dynsym does not: local and static
 * functions), found through the section headers.  IVM_ERROR_NOT_FOUND
 * when the file has none; IVM_ERROR_PROTOCOL when it is over the caps,
 * not xz, or not an ELF file with a symbol table; the reader's error for
 * bytes the guest does not hold.
 */
struct ivm_error *ivm_uelf_read_gnu_debugdata(const struct ivm_kmem_reader *file,
					      const struct ivm_uelf *elf,
					      struct ivm_uelf_syms **ret);

/*
 * The function holding link-time vaddr: its name (owned by s) and *off
 * (vaddr minus its start), or NULL when vaddr is outside every function's
 * [start, start + size).  Where functions overlap (aliases), the one
 * starting last before vaddr that still covers it.
 */
const char *ivm_uelf_syms_lookup(const struct ivm_uelf_syms *s,
				 uint64_t vaddr, uint64_t *off);

/* The same, as the symbol itself (its name: s->strtab + sym->name). */
const struct ivm_uelf_sym *ivm_uelf_syms_find(const struct ivm_uelf_syms *s,
					      uint64_t vaddr);

#endif /* IVM_UELF_H */
