/* SPDX-License-Identifier: MIT */
/*
 * Writes small ELF64 x86-64 cores laid out the way QEMU's dump-guest-memory
 * lays them out (one PT_NOTE first, then PT_LOADs; notes CORE/NT_PRSTATUS
 * and QEMU per vCPU, optionally VMCOREINFO), for the core backend's tests
 * and the fuzz seed corpus.
 */
#ifndef IVM_TEST_GMEM_CORE_BUILD_H
#define IVM_TEST_GMEM_CORE_BUILD_H

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct corebuild {
	uint8_t *buf;
	size_t len, cap;
};

static inline size_t cb_put(struct corebuild *cb, const void *data, size_t n)
{
	size_t at = cb->len;

	if (cb->len + n > cb->cap) {
		cb->cap = (cb->len + n) * 2 + 4096;
		cb->buf = realloc(cb->buf, cb->cap);
		if (!cb->buf)
			abort();
	}
	if (data)
		memcpy(cb->buf + at, data, n);
	else
		memset(cb->buf + at, 0, n);
	cb->len += n;
	return at;
}

static inline void cb_note(struct corebuild *cb, const char *name,
			   uint32_t type, const void *desc, uint32_t descsz)
{
	uint32_t hdr[3] = { (uint32_t)strlen(name) + 1, descsz, type };
	static const uint8_t zero[4];

	cb_put(cb, hdr, sizeof(hdr));
	cb_put(cb, name, hdr[0]);
	cb_put(cb, zero, (4 - hdr[0] % 4) % 4);
	cb_put(cb, desc, descsz);
	cb_put(cb, zero, (4 - descsz % 4) % 4);
}

/* x86-64 elf_prstatus: 336 bytes, pr_reg (user_regs_struct) at 112. */
static inline void cb_prstatus(struct corebuild *cb, uint32_t pid,
			       uint64_t rip, uint64_t rsp, uint64_t gs_base)
{
	uint8_t d[336] = { 0 };
	uint64_t regs[27] = { 0 };
	int i;

	for (i = 0; i < 27; i++)
		regs[i] = 0x1000 + i;	/* r15 = 0x1000, r14 = 0x1001, ... */
	regs[16] = rip;
	regs[17] = 0x10;	/* cs */
	regs[19] = rsp;
	regs[20] = 0x18;	/* ss */
	regs[22] = gs_base;
	memcpy(d + 32, &pid, 4);
	memcpy(d + 112, regs, sizeof(regs));
	cb_note(cb, "CORE", NT_PRSTATUS, d, sizeof(d));
}

/* QEMUCPUState, version 1, size 440 (with kernel_gs_base) or 432. */
static inline void cb_qemu_note(struct corebuild *cb, uint32_t size,
				uint64_t rip, uint64_t rsp, uint64_t cr3,
				uint64_t gs_base, uint64_t kernel_gs_base)
{
	uint8_t d[440] = { 0 };
	uint32_t version = 1;
	uint64_t v;
	int i;

	memcpy(d, &version, 4);
	memcpy(d + 4, &size, 4);
	for (i = 0; i < 16; i++) {
		v = 0x2000 + i;	/* rax = 0x2000, rbx = 0x2001, ... */
		memcpy(d + 8 + 8 * i, &v, 8);
	}
	memcpy(d + 8 + 8 * 6, &rsp, 8);
	memcpy(d + 136, &rip, 8);
	v = 0x246;
	memcpy(d + 144, &v, 8);
	for (i = 0; i < 6; i++) {
		uint32_t sel = 0x10 + 8 * i;

		memcpy(d + 152 + 24 * i, &sel, 4);
	}
	memcpy(d + 152 + 24 * 4 + 16, &gs_base, 8);
	v = 0x80050033;
	memcpy(d + 392, &v, 8);
	v = 0xdeadbeef;
	memcpy(d + 392 + 16, &v, 8);
	memcpy(d + 392 + 24, &cr3, 8);
	v = 0x3506f0;
	memcpy(d + 392 + 32, &v, 8);
	memcpy(d + 432, &kernel_gs_base, 8);
	cb_note(cb, "QEMU", 0, d, size);
}

struct cb_load {
	uint64_t paddr, vaddr, memsz, filesz;
	const void *data;	/* filesz bytes */
};

/*
 * A whole core: ELF header, phdrs (PT_NOTE then loads), the note bytes,
 * then each load's data.  notes/notes_len come from a corebuild filled with
 * cb_note() and friends.  Returns a malloc'd buffer.
 */
static inline uint8_t *cb_core(const uint8_t *notes, size_t notes_len,
			       const struct cb_load *loads, size_t nr_loads,
			       size_t *len)
{
	struct corebuild cb = { 0 };
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	size_t i, off;

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1 + nr_loads;
	cb_put(&cb, &eh, sizeof(eh));
	off = sizeof(eh) + (1 + nr_loads) * sizeof(ph);
	ph.p_type = PT_NOTE;
	ph.p_offset = off;
	ph.p_filesz = notes_len;
	cb_put(&cb, &ph, sizeof(ph));
	off += notes_len;
	for (i = 0; i < nr_loads; i++) {
		memset(&ph, 0, sizeof(ph));
		ph.p_type = PT_LOAD;
		ph.p_flags = PF_R | PF_W | PF_X;
		ph.p_offset = off;
		ph.p_paddr = loads[i].paddr;
		ph.p_vaddr = loads[i].vaddr;
		ph.p_filesz = loads[i].filesz;
		ph.p_memsz = loads[i].memsz;
		cb_put(&cb, &ph, sizeof(ph));
		off += loads[i].filesz;
	}
	cb_put(&cb, notes, notes_len);
	for (i = 0; i < nr_loads; i++)
		cb_put(&cb, loads[i].data, loads[i].filesz);
	*len = cb.len;
	return cb.buf;
}

#endif /* IVM_TEST_GMEM_CORE_BUILD_H */
