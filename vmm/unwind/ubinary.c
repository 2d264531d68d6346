// SPDX-License-Identifier: MIT
/*
 * A guest binary's host copy (uunwind_dwarf.h, struct ivm_ubinary): its
 * ELF file opened with libelf/libdw, its build-id and segments, and the
 * CFI rows libdw decodes from it, cached by pc.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/cfi_rows.h"
#include "unwind/uunwind_dwarf.h"

/* Power of two.  About 128 KiB per binary; see the bench for the gain. */
#define ROW_CACHE_SIZE 512u

struct ivm_ubinary {
	char *path;
	int fd;
	Elf *elf;
	Dwarf *dwarf;			/* for .debug_frame; may be NULL */
	Dwarf_CFI *eh_cfi;		/* .eh_frame; may be NULL */
	Dwarf_CFI *debug_cfi;		/* .debug_frame; owned by dwarf */
	bool is_dyn;
	uint8_t build_id[IVM_UBINARY_MAX_BUILD_ID];
	size_t build_id_len;
	struct ivm_ubinary_segment exec[IVM_UBINARY_MAX_EXEC];
	size_t nr_exec;
	/* every PT_LOAD, for ivm_ubinary_bias() */
	struct ivm_ubinary_segment *loads;
	size_t nr_loads;
	size_t phnum;
	bool cache_on;
	struct ivm_ubinary_stats stats;
	struct ivm_cfi_row cache[ROW_CACHE_SIZE];
};

/* ---- opening a binary ---------------------------------------------------- */

/* Find the GNU build-id in the notes of a PT_NOTE segment or SHT_NOTE. */
static bool note_build_id(struct ivm_ubinary *b, Elf_Data *data)
{
	size_t off = 0, next;
	GElf_Nhdr nhdr;
	size_t name_off, desc_off;

	/* gelf_getnote bounds every note by data->d_size and moves forward. */
	while ((next = gelf_getnote(data, off, &nhdr, &name_off,
				    &desc_off)) > 0) {
		const char *name = (const char *)data->d_buf + name_off;

		if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
		    memcmp(name, "GNU", 4) == 0 && nhdr.n_descsz > 0 &&
		    nhdr.n_descsz <= sizeof(b->build_id)) {
			memcpy(b->build_id,
			       (const uint8_t *)data->d_buf + desc_off,
			       nhdr.n_descsz);
			b->build_id_len = nhdr.n_descsz;
			return true;
		}
		if (next <= off)
			break;
		off = next;
	}
	return false;
}

static void read_build_id(struct ivm_ubinary *b)
{
	Elf_Scn *scn = NULL;

	/* Sections first: they survive in separate debug files too. */
	while ((scn = elf_nextscn(b->elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (data && data->d_buf && note_build_id(b, data))
			return;
	}
	/* Program headers: for a binary whose sections are stripped. */
	for (size_t i = 0; i < b->phnum; i++) {
		GElf_Phdr phdr;
		Elf_Data *data;

		if (!gelf_getphdr(b->elf, (int)i, &phdr))
			break;
		if (phdr.p_type != PT_NOTE)
			continue;
		data = elf_getdata_rawchunk(b->elf, phdr.p_offset,
					    phdr.p_filesz, ELF_T_NHDR);
		if (data && data->d_buf && note_build_id(b, data))
			return;
	}
}

static struct ivm_error *read_segments(struct ivm_ubinary *b)
{
	size_t phnum;

	if (elf_getphdrnum(b->elf, &phnum))
		return ivm_error_create(IVM_ERROR_ELF,
					"%s: no program headers: %s", b->path,
					elf_errmsg(-1));
	/* ELF allows 2^32 headers; no real binary has more than a few. */
	if (phnum > 4096)
		return ivm_error_create(IVM_ERROR_ELF,
					"%s: %zu program headers", b->path,
					phnum);
	b->phnum = phnum;
	b->loads = calloc(phnum ? phnum : 1, sizeof(*b->loads));
	if (!b->loads)
		return &ivm_enomem;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr phdr;
		struct ivm_ubinary_segment seg;

		if (!gelf_getphdr(b->elf, (int)i, &phdr))
			return ivm_error_create(IVM_ERROR_ELF,
						"%s: bad program header %zu",
						b->path, i);
		if (phdr.p_type != PT_LOAD || !phdr.p_memsz)
			continue;
		if (phdr.p_vaddr + phdr.p_memsz < phdr.p_vaddr)
			return ivm_error_create(IVM_ERROR_ELF,
						"%s: PT_LOAD %zu wraps",
						b->path, i);
		seg.vaddr = phdr.p_vaddr;
		seg.memsz = phdr.p_memsz;
		seg.offset = phdr.p_offset;
		b->loads[b->nr_loads++] = seg;
		if (!(phdr.p_flags & PF_X))
			continue;
		if (b->nr_exec == IVM_UBINARY_MAX_EXEC)
			return ivm_error_create(IVM_ERROR_INVALID,
						"%s: more than %d executable segments",
						b->path, IVM_UBINARY_MAX_EXEC);
		b->exec[b->nr_exec++] = seg;
	}
	if (!b->nr_exec)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: no executable segment", b->path);
	return NULL;
}

static struct ivm_error *open_elf(struct ivm_ubinary *b)
{
	GElf_Ehdr ehdr;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return ivm_error_create(IVM_ERROR_ELF, "libelf: %s",
					elf_errmsg(-1));
	b->fd = open(b->path, O_RDONLY | O_CLOEXEC);
	if (b->fd < 0)
		return ivm_error_os(errno, "%s", b->path);
	b->elf = elf_begin(b->fd, ELF_C_READ_MMAP, NULL);
	if (!b->elf)
		return ivm_error_create(IVM_ERROR_ELF, "%s: %s", b->path,
					elf_errmsg(-1));
	if (elf_kind(b->elf) != ELF_K_ELF || !gelf_getehdr(b->elf, &ehdr))
		return ivm_error_create(IVM_ERROR_ELF, "%s: not an ELF file",
					b->path);
	if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 ||
	    ehdr.e_machine != EM_X86_64)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: not an x86-64 ELF file", b->path);
	if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: not an executable or shared library (e_type %u)",
					b->path, ehdr.e_type);
	b->is_dyn = ehdr.e_type == ET_DYN;
	return NULL;
}

/*
 * Whether section name has bytes in this file: a separate debug file
 * (objcopy --only-keep-debug, the distributions' .debug files) keeps the
 * section header with type SHT_NOBITS and no data, which is no CFI.
 * unknown: the answer when the file has no such section header.
 */
static bool section_has_bytes(Elf *elf, const char *section, bool unknown)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return unknown;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		const char *name;

		if (!gelf_getshdr(scn, &shdr))
			continue;
		name = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (name && !strcmp(name, section))
			return shdr.sh_type != SHT_NOBITS && shdr.sh_size > 0;
	}
	return unknown;
}

/* A file without section headers has only PT_GNU_EH_FRAME: libdw uses it. */
static bool eh_frame_in_file(Elf *elf)
{
	return section_has_bytes(elf, ".eh_frame", true);
}

/* libdw finds .debug_frame by its section only. */
static bool debug_frame_in_file(Elf *elf)
{
	return section_has_bytes(elf, ".debug_frame", false);
}

struct ivm_error *ivm_ubinary_open(const char *path, struct ivm_ubinary **ret)
{
	struct ivm_ubinary *b;
	struct ivm_error *err;

	if (!path || !ret)
		return ivm_error_create(IVM_ERROR_INVALID,
					"user binary: bad arguments");
	b = calloc(1, sizeof(*b));
	if (!b)
		return &ivm_enomem;
	b->fd = -1;
	b->cache_on = true;
	b->path = strdup(path);
	if (!b->path) {
		free(b);
		return &ivm_enomem;
	}
	err = open_elf(b);
	if (!err)
		err = read_segments(b);
	if (err) {
		ivm_ubinary_destroy(b);
		return err;
	}
	read_build_id(b);
	/*
	 * .eh_frame is what the loaded code carries; .debug_frame (in
	 * binaries built with -fno-asynchronous-unwind-tables -g, or hand
	 * annotated assembly) only lives in the file.  Either may be missing.
	 */
	if (eh_frame_in_file(b->elf))
		b->eh_cfi = dwarf_getcfi_elf(b->elf);
	if (debug_frame_in_file(b->elf)) {
		b->dwarf = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
		if (b->dwarf)
			b->debug_cfi = dwarf_getcfi(b->dwarf);
	}
	if (!b->eh_cfi && !b->debug_cfi) {
		ivm_ubinary_destroy(b);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: no call frame information (.eh_frame or .debug_frame)",
					path);
	}
	*ret = b;
	return NULL;
}

void ivm_ubinary_destroy(struct ivm_ubinary *b)
{
	if (!b)
		return;
	if (b->eh_cfi)
		dwarf_cfi_end(b->eh_cfi);
	/* debug_cfi belongs to dwarf (dwarf_getcfi). */
	if (b->dwarf)
		dwarf_end(b->dwarf);
	if (b->elf)
		elf_end(b->elf);
	if (b->fd >= 0)
		close(b->fd);
	free(b->loads);
	free(b->path);
	free(b);
}

const char *ivm_ubinary_path(const struct ivm_ubinary *b)
{
	return b->path;
}

bool ivm_ubinary_is_dyn(const struct ivm_ubinary *b)
{
	return b->is_dyn;
}

bool ivm_ubinary_build_id(const struct ivm_ubinary *b, const uint8_t **bytes,
			  size_t *len)
{
	*bytes = b->build_id_len ? b->build_id : NULL;
	*len = b->build_id_len;
	return b->build_id_len != 0;
}

size_t ivm_ubinary_nr_exec(const struct ivm_ubinary *b)
{
	return b->nr_exec;
}

const struct ivm_ubinary_segment *ivm_ubinary_exec(const struct ivm_ubinary *b,
						   size_t i)
{
	return i < b->nr_exec ? &b->exec[i] : NULL;
}

#define PAGE_MASK_4K (~4095ull)

struct ivm_error *ivm_ubinary_bias(const struct ivm_ubinary *b,
				   uint64_t map_start, uint64_t map_offset,
				   uint64_t *ret)
{
	for (size_t i = 0; i < b->nr_loads; i++) {
		const struct ivm_ubinary_segment *s = &b->loads[i];

		if ((s->offset & PAGE_MASK_4K) == map_offset) {
			/* Unsigned wrap is the arithmetic of a bias. */
			*ret = map_start - (s->vaddr & PAGE_MASK_4K);
			return NULL;
		}
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"%s: no loadable segment at file offset %#llx",
				b->path, (unsigned long long)map_offset);
}

size_t ivm_ubinary_mappings(struct ivm_ubinary *b, uint64_t bias,
			    struct ivm_umapping *maps, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < b->nr_exec; i++) {
		uint64_t start = b->exec[i].vaddr + bias;
		uint64_t end = start + b->exec[i].memsz;

		if (end <= start)
			continue;
		if (n < cap) {
			maps[n].start = start;
			maps[n].end = end;
			maps[n].bias = bias;
			maps[n].binary = b;
		}
		n++;
	}
	return n;
}

void ivm_ubinary_stats(const struct ivm_ubinary *b,
		       struct ivm_ubinary_stats *ret)
{
	*ret = b->stats;
}

void ivm_ubinary_set_cache(struct ivm_ubinary *b, bool on)
{
	b->cache_on = on;
	memset(b->cache, 0, sizeof(b->cache));
	memset(&b->stats, 0, sizeof(b->stats));
}

/* ---- CFI rows ------------------------------------------------------------ */

/*
 * Reduce a libdw location description to a rule.  libdw hands simple
 * rules back as short expressions in ops_mem (offset(N) as
 * DW_OP_call_frame_cfa DW_OP_plus_uconst N, register(R) as DW_OP_bregx R 0,
 * a trailing DW_OP_stack_value for val_ rules) and DW_CFA_expression ones
 * as interned expressions that live as long as the CFI.  The simple forms
 * are decoded; anything else in ops_mem (which dies with this call) is
 * refused rather than pointed to.
 */
bool ivm_cfi_decode_rule(const Dwarf_Op *ops, size_t nops,
			const Dwarf_Op *ops_mem, struct ivm_cfi_rule *r)
{
	memset(r, 0, sizeof(*r));
	if (nops == 0) {
		r->kind = ops ? RULE_UNDEFINED : RULE_SAME;
		return true;
	}
	if (ops[nops - 1].atom == DW_OP_stack_value) {
		r->is_value = true;
		nops--;
		if (!nops)
			return false;
	}
	if (ops[0].atom == DW_OP_call_frame_cfa &&
	    (nops == 1 ||
	     (nops == 2 && ops[1].atom == DW_OP_plus_uconst))) {
		r->kind = RULE_CFA;
		r->off = nops == 2 ? (int64_t)ops[1].number : 0;
		return true;
	}
	if (nops == 1 && ops[0].atom == DW_OP_bregx &&
	    ops[0].number < NR_DW_REGS) {
		r->kind = RULE_REG;
		r->reg = (uint8_t)ops[0].number;
		r->off = (int64_t)ops[0].number2;
		return true;
	}
	if (nops == 1 && ops[0].atom >= DW_OP_breg0 &&
	    ops[0].atom < DW_OP_breg0 + NR_DW_REGS) {
		r->kind = RULE_REG;
		r->reg = (uint8_t)(ops[0].atom - DW_OP_breg0);
		r->off = (int64_t)ops[0].number;
		return true;
	}
	/* register(R) as a register location: the value is R's. */
	if (nops == 1 && !r->is_value &&
	    ((ops[0].atom == DW_OP_regx && ops[0].number < NR_DW_REGS) ||
	     (ops[0].atom >= DW_OP_reg0 &&
	      ops[0].atom < DW_OP_reg0 + NR_DW_REGS))) {
		r->kind = RULE_REG;
		r->reg = ops[0].atom == DW_OP_regx ?
			 (uint8_t)ops[0].number :
			 (uint8_t)(ops[0].atom - DW_OP_reg0);
		r->is_value = true;
		return true;
	}
	if (ops == ops_mem || nops > IVM_UUNWIND_DWARF_MAX_OPS)
		return false;
	r->kind = RULE_EXPR;
	r->ops = ops;
	r->nops = (uint8_t)nops;
	return true;
}

static bool decode_register(Dwarf_Frame *frame, int regno, struct ivm_cfi_rule *r)
{
	Dwarf_Op ops_mem[3], *ops = NULL;
	size_t nops = 0;

	if (dwarf_frame_register(frame, regno, ops_mem, &ops, &nops))
		return false;
	return ivm_cfi_decode_rule(ops, nops, ops_mem, r);
}

/* Decode the frame libdw computed for pc into row. */
static void decode_frame(Dwarf_Frame *frame, struct ivm_cfi_row *row)
{
	Dwarf_Op *ops = NULL;
	size_t nops = 0;
	bool signal = false;
	int ra;

	row->state = ROW_BAD;
	ra = dwarf_frame_info(frame, NULL, NULL, &signal);
	if (ra != DW_RA)
		return;
	row->signal = signal;
	if (dwarf_frame_cfa(frame, &ops, &nops) || !nops)
		return;
	/*
	 * The CFA of DW_CFA_def_cfa is one DW_OP_bregx owned by the frame,
	 * which is freed after this: decode it; a CFA expression is interned
	 * in the CFI.  The CFA is a value, never a location.
	 */
	if (nops == 1 && ops[0].atom == DW_OP_bregx) {
		if (ops[0].number >= NR_DW_REGS)
			return;
		row->cfa.kind = RULE_REG;
		row->cfa.reg = (uint8_t)ops[0].number;
		row->cfa.off = (int64_t)ops[0].number2;
	} else {
		if (nops > IVM_UUNWIND_DWARF_MAX_OPS)
			return;
		row->cfa.kind = RULE_EXPR;
		row->cfa.ops = ops;
		row->cfa.nops = (uint8_t)nops;
	}
	row->cfa.is_value = true;
	if (!decode_register(frame, DW_RA, &row->ra))
		return;
	for (size_t i = 0; i < NR_SAVED; i++) {
		/*
		 * A callee-saved register whose rule we cannot follow is lost
		 * from here on; the stack goes on without it.
		 */
		if (!decode_register(frame, saved_regs[i], &row->saved[i]))
			row->saved[i].kind = RULE_LOST;
		/*
		 * These registers are callee-saved by the psABI: a function
		 * that does not say where it saved one left it alone.  libdw
		 * 0.188 reports rbx "undefined" when the CFI does not mention
		 * it (its x86-64 default rules omit it), and no compiler
		 * emits DW_CFA_undefined for a callee-saved register, so
		 * undefined reads as same value here.
		 */
		if (row->saved[i].kind == RULE_UNDEFINED)
			row->saved[i].kind = RULE_SAME;
	}
	row->state = ROW_OK;
}

static void lookup_uncached(struct ivm_ubinary *b, uint64_t pc,
			    struct ivm_cfi_row *row)
{
	Dwarf_CFI *cfis[2] = { b->eh_cfi, b->debug_cfi };

	memset(row, 0, sizeof(*row));
	row->pc = pc;
	row->state = ROW_NONE;
	for (size_t i = 0; i < 2; i++) {
		Dwarf_Frame *frame = NULL;

		if (!cfis[i])
			continue;
		/*
		 * Any failure (no FDE, or CFI libdw cannot parse) sends us to
		 * the next table; a table that has an FDE but bad
		 * instructions is as good as none.
		 */
		if (dwarf_cfi_addrframe(cfis[i], pc, &frame) || !frame)
			continue;
		decode_frame(frame, row);
		free(frame);
		if (row->state == ROW_OK)
			return;
	}
}

const struct ivm_cfi_row *ivm_ubinary_row(struct ivm_ubinary *b, uint64_t pc,
					  struct ivm_cfi_row *scratch)
{
	struct ivm_cfi_row *slot;

	b->stats.lookups++;
	if (!b->cache_on) {
		lookup_uncached(b, pc, scratch);
		return scratch;
	}
	/* Code addresses cluster; fold the high bits in so pages spread. */
	slot = &b->cache[(pc ^ (pc >> 9)) & (ROW_CACHE_SIZE - 1)];
	if (slot->state != ROW_EMPTY && slot->pc == pc) {
		b->stats.hits++;
		return slot;
	}
	lookup_uncached(b, pc, slot);
	return slot;
}


/* ---- rows as text ------------------------------------------------------- */

static int format_rule(char *buf, size_t len, const char *name,
		       const struct ivm_cfi_rule *r)
{
	static const char *const kinds[] = { "undef", "same", "cfa", "reg",
					     "expr", "lost" };
	int n = snprintf(buf, len, " %s=%s%s", name,
			 r->kind < 6 ? kinds[r->kind] : "?",
			 r->is_value ? "(val)" : "");
	size_t used = n > 0 ? (size_t)n : 0;

	if (r->kind == RULE_CFA || r->kind == RULE_REG) {
		n = snprintf(buf + (used < len ? used : len),
			     used < len ? len - used : 0, "%s%u%+lld",
			     r->kind == RULE_REG ? "r" : "",
			     r->kind == RULE_REG ? r->reg : 0,
			     (long long)r->off);
		used += n > 0 ? (size_t)n : 0;
	}
	for (uint32_t i = 0; r->kind == RULE_EXPR && i < r->nops; i++) {
		n = snprintf(buf + (used < len ? used : len),
			     used < len ? len - used : 0, "%s%#x:%llx:%llx",
			     i ? "," : ":", r->ops[i].atom,
			     (unsigned long long)r->ops[i].number,
			     (unsigned long long)r->ops[i].number2);
		used += n > 0 ? (size_t)n : 0;
	}
	return (int)used;
}

char *ivm_cfi_row_format(const struct ivm_cfi_row *row, char *buf,
			 size_t len)
{
	static const char *const names[NR_SAVED] = { "rbx", "rbp", "r12",
						     "r13", "r14", "r15" };
	size_t used;
	int n;

	n = snprintf(buf, len, "%s%s", row->state == ROW_OK ? "ok" :
		     row->state == ROW_NONE ? "none" :
		     row->state == ROW_BAD ? "bad" :
		     row->state == ROW_FAULT ? "fault" : "?",
		     row->signal ? " signal" : "");
	used = n > 0 ? (size_t)n : 0;
	if (row->state != ROW_OK)
		return buf;
#define APPEND(name, r) do {						\
		n = format_rule(buf + (used < len ? used : len),	\
				used < len ? len - used : 0, name, r);	\
		used += n > 0 ? (size_t)n : 0;				\
	} while (0)
	APPEND("cfa", &row->cfa);
	APPEND("ra", &row->ra);
	for (size_t i = 0; i < NR_SAVED; i++)
		APPEND(names[i], &row->saved[i]);
#undef APPEND
	return buf;
}

char *ivm_ubinary_describe_row(struct ivm_ubinary *b, uint64_t pc, char *buf,
			       size_t len)
{
	struct ivm_cfi_row row;

	lookup_uncached(b, pc, &row);
	return ivm_cfi_row_format(&row, buf, len);
}
