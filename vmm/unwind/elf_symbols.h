/* SPDX-License-Identifier: MIT */
/*
 * elf_symbols: an ELF file's symbols by name and its thread-local storage
 * segment, read through a reader by file offset: a guest file's bytes
 * (kernel/gfile.h: the process's mapping of it, the page cache) or a host
 * copy (ivm_elf_host_file).  What labels need to find a program's
 * variables: their link-time addresses, and for a __thread variable its
 * offset in the TLS block.
 *
 * Symbols are looked for in .symtab (found through the section headers,
 * which lie in no loaded segment: a guest holds them only in its page
 * cache, and a stripped file has none), then in .dynsym: through the
 * section headers too, else through PT_DYNAMIC (DT_SYMTAB, DT_STRTAB,
 * DT_STRSZ, and the count of symbols from DT_HASH or DT_GNU_HASH), whose
 * bytes the loaded segments hold.  Link-time addresses become file offsets
 * through the PT_LOAD that holds them; ld.so rewrites a loaded object's
 * .dynamic to run-time addresses, so a pointer that lies in no segment but
 * does at the object's load bias is taken at that bias.
 *
 * (The user-stack work of issue 14 brings a fuller parser of guest ELF
 * files, uelf; these headers and the dynamic table fold into it then, and
 * the lookup by name stays as its addition.)
 *
 * Everything read is hostile: counts and sizes are capped
 * (IVM_ELF_MAX_*), every offset and length is overflow-checked, a pointer
 * outside the file's segments is refused, a failed read is returned as
 * the reader's error (IVM_ERROR_FAULT at the file offset: bytes the guest
 * does not hold), never guessed around.
 */
#ifndef IVM_ELF_SYMBOLS_H
#define IVM_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gmem/vmem.h"

#define IVM_ELF_MAX_PHNUM 64
#define IVM_ELF_MAX_LOADS 16
#define IVM_ELF_MAX_SHNUM 4096
#define IVM_ELF_MAX_DYNAMIC 512		/* entries of PT_DYNAMIC read */
#define IVM_ELF_MAX_SYMS (1u << 22)	/* symbols of one table scanned */
#define IVM_ELF_MAX_NAME 512		/* bytes of a name compared */

/* One PT_LOAD, link-time. */
struct ivm_elf_load {
	uint64_t vaddr, memsz, offset, filesz;
	uint32_t flags;
};

/* The headers of an ELF file, as far as symbols and TLS need them. */
struct ivm_elf_headers {
	uint16_t type;			/* ET_EXEC or ET_DYN */
	struct ivm_elf_load loads[IVM_ELF_MAX_LOADS];
	size_t nr_loads;
	/* PT_TLS: the TLS template; memsz 0: none. */
	uint64_t tls_vaddr, tls_filesz, tls_memsz, tls_align;
	uint64_t dynamic, dynamic_size;	/* PT_DYNAMIC's vaddr; 0: none */
	uint64_t shoff;			/* section headers; 0: none */
	uint16_t shnum, shstrndx;
};

/*
 * Decode the ELF header and program headers of the file.
 * IVM_ERROR_PROTOCOL when it is not a 64-bit little-endian x86-64
 * executable or shared library, or its headers are inconsistent; the
 * reader's error when they cannot be read.
 */
struct ivm_error *ivm_elf_headers_read(const struct ivm_kmem_reader *file,
				       struct ivm_elf_headers *ret);

/* Where a symbol was found. */
enum ivm_elf_symtab {
	IVM_ELF_SYMTAB = 1,	/* .symtab */
	IVM_ELF_DYNSYM = 2,	/* .dynsym */
};

/* A symbol as its table has it. */
struct ivm_elf_symbol {
	uint64_t value;		/* link-time address; a TLS symbol's offset
				 * in the TLS template */
	uint64_t size;
	uint8_t type;		/* STT_* */
	uint8_t bind;		/* STB_* */
	uint16_t shndx;		/* SHN_UNDEF for an undefined one */
	enum ivm_elf_symtab table;
	/*
	 * Definitions of that name and binding with other values in its
	 * table: more than 1 for a local name that several files use
	 * (static variables), which then names nothing for sure.
	 */
	uint32_t matches;
};

/*
 * Look up names[0..n) (each at most IVM_ELF_MAX_NAME - 1 bytes) among
 * the defined symbols of the file: .symtab first, then .dynsym, in one
 * pass over each table for all names; a global symbol wins over a local
 * one of the same name.  found[i] says whether names[i] was (ret[i] then
 * holds it).  bias is the load bias of the object when its .dynamic may
 * have been relocated (0: unknown).  *incomplete is set when a table
 * could not be read whole (the guest does not hold all its bytes): a
 * name not found may then be in it, and is not known to be absent.
 * Errors: IVM_ERROR_NOT_FOUND when the file has no symbol table;
 * IVM_ERROR_PROTOCOL for a malformed one; the reader's error when not one
 * table could be read.
 */
struct ivm_error *ivm_elf_find_symbols(const struct ivm_kmem_reader *file,
				       const struct ivm_elf_headers *h,
				       uint64_t bias, const char *const *names,
				       size_t n, struct ivm_elf_symbol *ret,
				       bool *found, bool *incomplete);

/*
 * Read len bytes at link-time vaddr through file: they must lie within
 * the file bytes (p_filesz) of one PT_LOAD (IVM_ERROR_PROTOCOL
 * otherwise), else the reader's error.
 */
struct ivm_error *ivm_elf_read_vaddr(const struct ivm_kmem_reader *file,
				     const struct ivm_elf_headers *h,
				     uint64_t vaddr, void *buf, size_t len);

/*
 * A reader by file offset over a host file (pread), for a host copy of
 * a guest executable (--binary, --symdir).  ret->ctx is the struct, which
 * must outlive the reader; close with ivm_elf_host_file_close.
 */
struct ivm_elf_host_file {
	int fd;
	uint64_t size;
};

struct ivm_error *ivm_elf_host_file_open(const char *path,
					 struct ivm_elf_host_file *f,
					 struct ivm_kmem_reader *ret);
void ivm_elf_host_file_close(struct ivm_elf_host_file *f);

#endif /* IVM_ELF_SYMBOLS_H */
