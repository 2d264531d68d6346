/* SPDX-License-Identifier: MIT */
/*
 * What uelf's two files share (never included outside vmm/unwind/uelf*.c):
 *   uelf.c       the headers (ELF, program, .eh_frame_hdr), the sections,
 *                host files
 *   uelf_syms.c  the symbols: the dynamic symbol table, sorted tables,
 *                .gnu_debugdata, symbols by name
 */
#ifndef IVM_UELF_INT_H
#define IVM_UELF_INT_H

#include "unwind/uelf.h"

/* The section headers (elf->shnum of 64 bytes) into *ret; caller frees. */
struct ivm_error *uelf_read_shdrs(const struct ivm_kmem_reader *file,
				  const struct ivm_uelf *elf, uint8_t **ret);

#endif /* IVM_UELF_INT_H */
