// SPDX-License-Identifier: MIT
/*
 * gmem over an ELF64 core written by QEMU's dump-guest-memory.
 *
 * The file is mapped read-only and every header is checked before use; after
 * that, reads only ever touch [data, data + size).  PT_LOAD segments become
 * two sorted, non-overlapping indexes, one by p_paddr and (for a dump taken
 * with "paging": true, whose p_vaddr are guest virtual addresses) one by
 * p_vaddr.  Overlapping segments are legal here: with paging, several virtual
 * mappings of one physical page each get a segment; QEMU points them all at
 * the same file bytes, so keeping whichever comes first is correct.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/hexnum.h"
#include "gmem/gmem_internal.h"

/* x86-64 struct elf_prstatus: offset of pr_reg (27 longs). */
#define PRSTATUS_REG_OFF 112
#define PRSTATUS_NR_REGS 27

/*
 * QEMU's "QEMU" note (QEMUCPUState, target/i386/arch_dump.c): version and
 * size words, 16 GPRs, rip, rflags, ten 24-byte segments (selector, limit,
 * flags, pad, base), cr[0..4], then fields appended later and detected by
 * size, of which kernel_gs_base is the first.
 */
#define QEMU_NOTE_VERSION 1
#define QEMU_NOTE_GPR_OFF 8
#define QEMU_NOTE_RIP_OFF 136
#define QEMU_NOTE_RFLAGS_OFF 144
#define QEMU_NOTE_SEG_OFF 152
#define QEMU_NOTE_SEG_SIZE 24
#define QEMU_NOTE_SEG_BASE 16
#define QEMU_NOTE_CR_OFF 392
#define QEMU_NOTE_KGS_OFF 432
#define QEMU_NOTE_MIN_SIZE QEMU_NOTE_KGS_OFF
enum { QSEG_CS, QSEG_DS, QSEG_ES, QSEG_FS, QSEG_GS, QSEG_SS };

/* Notes per kind we keep; a guest with more vCPUs than this is absurd. */
#define MAX_CPU_NOTES 4096

struct core_seg {
	uint64_t start;		/* p_paddr or p_vaddr */
	uint64_t memsz;
	uint64_t offset;	/* in the file; meaningful when filesz > 0 */
	uint64_t filesz;
};

struct cpu_note {
	const uint8_t *desc;
	uint32_t descsz;
};

struct core_gmem {
	const uint8_t *data;
	size_t size;
	bool mapped;

	struct core_seg *phys, *virt;
	size_t nr_phys, nr_virt;

	/* PT_NOTE segments, [offset, offset + size) checked inside the file. */
	struct core_seg *note_segs;
	size_t nr_note_segs;

	struct cpu_note *prstatus, *qemu;
	size_t nr_prstatus, nr_qemu;
	char *vmcoreinfo;

	FILE *trace;		/* IVM_CORE_TRACE: see the test hooks below */
};

static const struct ivm_gmem_ops core_ops;

/* [off, off + len) inside the file, overflow-safe. */
static bool in_file(const struct core_gmem *core, uint64_t off, uint64_t len)
{
	return off <= core->size && len <= core->size - off;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct core_seg *sa = a, *sb = b;

	if (sa->start != sb->start)
		return sa->start < sb->start ? -1 : 1;
	/* Longer first, so the trimming below keeps the most. */
	if (sa->memsz != sb->memsz)
		return sa->memsz > sb->memsz ? -1 : 1;
	return 0;
}

/* Sort segs and trim each so none overlaps an earlier one; returns count. */
static size_t seg_index_build(struct core_seg *segs, size_t nr)
{
	uint64_t end = 0;
	bool have_end = false;
	size_t i, out = 0;

	qsort(segs, nr, sizeof(*segs), seg_cmp);
	for (i = 0; i < nr; i++) {
		struct core_seg s = segs[i];

		if (have_end && s.start < end) {
			uint64_t delta = end - s.start;

			if (delta >= s.memsz)
				continue;
			s.start = end;
			s.memsz -= delta;
			s.offset += delta;
			s.filesz = s.filesz > delta ? s.filesz - delta : 0;
		}
		segs[out++] = s;
		end = s.start + s.memsz;
		have_end = true;
	}
	return out;
}

/*
 * One line of the read trace: what was read ('p'hysical, 'v'irtual, a vCPU
 * 'n'ote), at which guest address, from which file offset, how many bytes
 * (hex).  Only bytes the file holds: zero-filled tails cannot be patched.
 */
static void trace_read(const struct core_gmem *core, char space,
		       uint64_t addr, uint64_t offset, uint64_t len)
{
	if (core->trace && len)
		fprintf(core->trace, "%c %" PRIx64 " %" PRIx64 " %" PRIx64 "\n",
			space, addr, offset, len);
}

static const struct core_seg *seg_find(const struct core_seg *segs, size_t nr,
				       uint64_t addr)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (segs[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr - segs[lo - 1].start < segs[lo - 1].memsz)
		return &segs[lo - 1];
	return NULL;
}

static struct ivm_error *seg_read(const struct core_gmem *core,
				  const struct core_seg *segs, size_t nr,
				  uint64_t addr, void *buf, size_t len,
				  const char *space)
{
	uint8_t *out = buf;

	while (len) {
		const struct core_seg *s = seg_find(segs, nr, addr);
		uint64_t off, n;

		if (!s)
			return ivm_error_fault(addr,
					       "%s address 0x%" PRIx64 " not in core",
					       space, addr);
		off = addr - s->start;
		n = s->memsz - off;
		if (n > len)
			n = len;
		if (off < s->filesz) {
			uint64_t from_file = s->filesz - off;

			if (from_file > n)
				from_file = n;
			trace_read(core, segs == core->virt ? 'v' : 'p',
				   addr, s->offset + off, from_file);
			memcpy(out, core->data + s->offset + off, from_file);
			memset(out + from_file, 0, n - from_file);
		} else {
			memset(out, 0, n);
		}
		out += n;
		len -= n;
		/* Segments were checked not to end at or past 2^64. */
		addr += n;
	}
	return NULL;
}

static struct ivm_error *core_read_phys(struct ivm_gmem *gmem, uint64_t gpa,
					void *buf, size_t len)
{
	struct core_gmem *core = gmem->priv;

	return seg_read(core, core->phys, core->nr_phys, gpa, buf, len,
			"guest physical");
}

/*
 * Walk the notes of one PT_NOTE segment.  Each note is a 12-byte header,
 * the name and the descriptor, each padded to 4 bytes; any length that runs
 * past the segment ends the walk.
 */
static struct ivm_error *walk_notes(const struct core_gmem *core,
				    const struct core_seg *seg,
				    struct ivm_error *(*fn)(const struct ivm_elf_note *,
							    void *),
				    void *arg)
{
	const uint8_t *p = core->data + seg->offset;
	uint64_t left = seg->filesz;

	while (left >= 12) {
		uint32_t namesz = ivm_le32(p), descsz = ivm_le32(p + 4);
		uint64_t name_pad = ((uint64_t)namesz + 3) & ~3ull;
		uint64_t desc_pad = ((uint64_t)descsz + 3) & ~3ull;
		struct ivm_elf_note note;
		struct ivm_error *err;

		/* name_pad, desc_pad < 2^33: their sum cannot overflow. */
		if (name_pad + desc_pad > left - 12)
			break;
		note.name = (const char *)p + 12;
		note.namesz = namesz;
		if (namesz && note.name[namesz - 1] == '\0')
			note.namesz--;
		note.type = ivm_le32(p + 8);
		note.desc = p + 12 + name_pad;
		note.descsz = descsz;
		err = fn(&note, arg);
		if (err)
			return err;
		p += 12 + name_pad + desc_pad;
		left -= 12 + name_pad + desc_pad;
	}
	return NULL;
}

static bool note_named(const struct ivm_elf_note *note, const char *name)
{
	size_t len = strlen(name);

	return note->namesz == len && !memcmp(note->name, name, len);
}

static struct ivm_error *push_cpu_note(struct cpu_note **notes, size_t *nr,
				       const struct ivm_elf_note *note)
{
	struct cpu_note *n;

	if (*nr >= MAX_CPU_NOTES)
		return NULL;
	n = realloc(*notes, (*nr + 1) * sizeof(**notes));
	if (!n)
		return &ivm_enomem;
	n[*nr].desc = note->desc;
	n[*nr].descsz = note->descsz;
	*notes = n;
	(*nr)++;
	return NULL;
}

static struct ivm_error *collect_note(const struct ivm_elf_note *note,
				      void *arg)
{
	struct core_gmem *core = arg;

	if (note_named(note, "CORE") && note->type == NT_PRSTATUS)
		return push_cpu_note(&core->prstatus, &core->nr_prstatus, note);
	if (note_named(note, "QEMU"))
		return push_cpu_note(&core->qemu, &core->nr_qemu, note);
	if (note_named(note, "VMCOREINFO") && !core->vmcoreinfo) {
		core->vmcoreinfo = malloc((size_t)note->descsz + 1);
		if (!core->vmcoreinfo)
			return &ivm_enomem;
		memcpy(core->vmcoreinfo, note->desc, note->descsz);
		core->vmcoreinfo[note->descsz] = '\0';
	}
	return NULL;
}

static struct ivm_error *elf_error(const char *what)
{
	return ivm_error_create(IVM_ERROR_ELF, "corrupt core: %s", what);
}

static struct ivm_error *core_parse(struct core_gmem *core)
{
	const uint8_t *d = core->data;
	Elf64_Ehdr eh;
	uint64_t phnum, i, phoff;
	size_t nr_load = 0, nr_note = 0;
	bool any_vaddr = false;
	struct ivm_error *err;

	if (core->size < EI_NIDENT || memcmp(d, ELFMAG, SELFMAG))
		return elf_error("not an elf file");
	if (d[EI_CLASS] != ELFCLASS64)
		return ivm_error_create(IVM_ERROR_ELF,
					"core is not elf64 (a 32-bit guest state? dump the guest once it runs in long mode)");
	if (d[EI_DATA] != ELFDATA2LSB)
		return elf_error("not little-endian");
	if (core->size < sizeof(eh))
		return elf_error("truncated elf header");
	memcpy(&eh, d, sizeof(eh));
	if (eh.e_type != ET_CORE)
		return elf_error("not a core file (e_type)");
	if (eh.e_machine != EM_X86_64)
		return elf_error("not an x86-64 core (e_machine)");
	if (eh.e_phentsize < sizeof(Elf64_Phdr))
		return elf_error("program header entry size too small");
	phnum = eh.e_phnum;
	phoff = eh.e_phoff;
	if (phnum == PN_XNUM) {
		/* More than 0xfffe segments: the count is in section 0. */
		Elf64_Shdr sh;

		if (eh.e_shentsize < sizeof(sh) ||
		    !in_file(core, eh.e_shoff, sizeof(sh)))
			return elf_error("extended program header count outside file");
		memcpy(&sh, d + eh.e_shoff, sizeof(sh));
		phnum = sh.sh_info;
	}
	/* phnum < 2^32, e_phentsize < 2^16: the product fits. */
	if (!in_file(core, phoff, phnum * eh.e_phentsize))
		return elf_error("program headers outside file");

	core->phys = calloc(phnum ? phnum : 1, sizeof(*core->phys));
	core->virt = calloc(phnum ? phnum : 1, sizeof(*core->virt));
	core->note_segs = calloc(phnum ? phnum : 1, sizeof(*core->note_segs));
	if (!core->phys || !core->virt || !core->note_segs)
		return &ivm_enomem;
	for (i = 0; i < phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, d + phoff + i * eh.e_phentsize, sizeof(ph));
		if (ph.p_type != PT_LOAD && ph.p_type != PT_NOTE)
			continue;
		if (ph.p_filesz && !in_file(core, ph.p_offset, ph.p_filesz))
			return elf_error("segment data outside file");
		if (ph.p_type == PT_NOTE) {
			/* An empty one's p_offset was not checked: drop it. */
			if (!ph.p_filesz)
				continue;
			core->note_segs[nr_note].offset = ph.p_offset;
			core->note_segs[nr_note].filesz = ph.p_filesz;
			nr_note++;
			continue;
		}
		if (ph.p_filesz > ph.p_memsz)
			return elf_error("segment file size larger than memory size");
		if (!ph.p_memsz)
			continue;
		/*
		 * An end at or past 2^64 would make "addr < end" wrong; no
		 * guest has memory up there, so refuse such a file.
		 */
		if (ph.p_paddr + ph.p_memsz <= ph.p_paddr ||
		    ph.p_vaddr + ph.p_memsz <= ph.p_vaddr)
			return elf_error("segment wraps around the address space");
		/*
		 * p_offset of an empty segment is meaningless (QEMU writes -1
		 * for a paging-mode mapping of something that is not RAM).
		 */
		core->phys[nr_load] = (struct core_seg){
			.start = ph.p_paddr, .memsz = ph.p_memsz,
			.offset = ph.p_filesz ? ph.p_offset : 0,
			.filesz = ph.p_filesz,
		};
		core->virt[nr_load] = core->phys[nr_load];
		core->virt[nr_load].start = ph.p_vaddr;
		if (ph.p_vaddr && ph.p_vaddr != ph.p_paddr)
			any_vaddr = true;
		nr_load++;
	}
	core->nr_phys = seg_index_build(core->phys, nr_load);
	/*
	 * Without paging, QEMU 7.2 sets every p_vaddr to p_paddr (older
	 * versions to 0): that is no virtual address space to offer.
	 */
	if (any_vaddr)
		core->nr_virt = seg_index_build(core->virt, nr_load);
	core->nr_note_segs = nr_note;
	for (i = 0; i < nr_note; i++) {
		err = walk_notes(core, &core->note_segs[i], collect_note, core);
		if (err)
			return err;
	}
	return NULL;
}

static void core_free(struct core_gmem *core)
{
	if (!core)
		return;
	if (core->mapped)
		munmap((void *)core->data, core->size);
	free(core->phys);
	free(core->virt);
	free(core->note_segs);
	free(core->prstatus);
	free(core->qemu);
	free(core->vmcoreinfo);
	if (core->trace)
		fclose(core->trace);
	free(core);
}

static void core_destroy(struct ivm_gmem *gmem)
{
	core_free(gmem->priv);
}

static const struct ivm_gmem_ops core_ops = {
	.read_phys = core_read_phys,
	.destroy = core_destroy,
};

static struct ivm_error *core_finish(struct core_gmem *core,
				     struct ivm_gmem **ret)
{
	struct ivm_error *err;

	err = core_parse(core);
	if (!err)
		err = ivm_gmem_create(&core_ops, core, ret);
	if (err)
		core_free(core);
	return err;
}

struct ivm_error *ivm_gmem_core_create_from_memory(const void *data,
						   size_t size,
						   struct ivm_gmem **ret)
{
	struct core_gmem *core = calloc(1, sizeof(*core));

	if (!core)
		return &ivm_enomem;
	core->data = data;
	core->size = size;
	return core_finish(core, ret);
}

/*
 * Test hooks for tests/tools/core-mutate, which runs the commands over a
 * real guest's core with words of it changed, to find what hostile guest
 * memory does to the whole tool rather than to one parser (tests/fuzz/
 * covers those one by one).  It needs to know which bytes a command reads,
 * and to change some without copying a core of hundreds of MiB per run:
 *
 *   IVM_CORE_TRACE=FILE  append one line per read of guest memory to FILE
 *                        (trace_read() says the format);
 *   IVM_CORE_PATCH=FILE  before the core is parsed, write the patches of
 *                        FILE into its private (copy-on-write) mapping:
 *                        lines "OFFSET HEXBYTES" (OFFSET in the file, in
 *                        hex, then one space); '#' starts a comment.
 *
 * Only the environment of the one who runs idlevm sets them, never the
 * guest; only a core file is read this way (the file on disk is never
 * written, a live guest never patched); secure_getenv() ignores them in a
 * process that changed identity.
 */
static struct ivm_error *core_patch(uint8_t *map, size_t size,
				    const char *path)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned int lineno = 0;
	bool bad = false;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return ivm_error_os(errno, "opening IVM_CORE_PATCH %s", path);
	while (!bad && (len = getline(&line, &cap, f)) >= 0) {
		size_t pos = 0;
		uint64_t off;

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		bad = !ivm_hex_span(line, len, &pos, &off) || line[pos] != ' ';
		for (pos++; !bad && pos < (size_t)len && line[pos] != '\n';
		     pos += 2, off++) {
			int hi = ivm_hex_digit(line[pos]);
			int lo = hi < 0 ? -1 : ivm_hex_digit(line[pos + 1]);

			bad = off >= size || lo < 0;
			if (!bad)
				map[off] = hi << 4 | lo;
		}
	}
	free(line);
	fclose(f);
	if (bad)
		return ivm_error_create(IVM_ERROR_INVALID,
					"IVM_CORE_PATCH %s line %u: not \"OFFSET HEXBYTES\" inside the core",
					path, lineno);
	return NULL;
}

struct ivm_error *ivm_gmem_core_create(const char *path, struct ivm_gmem **ret)
{
	const char *patch = secure_getenv("IVM_CORE_PATCH");
	const char *trace = secure_getenv("IVM_CORE_TRACE");
	struct core_gmem *core;
	struct ivm_error *err;
	struct stat st;
	void *map;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "opening core %s", path);
	if (fstat(fd, &st) < 0) {
		err = ivm_error_os(errno, "stat of core %s", path);
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
		close(fd);
		return ivm_error_create(IVM_ERROR_ELF,
					"core %s is empty or not a regular file",
					path);
	}
	map = mmap(NULL, st.st_size, PROT_READ | (patch ? PROT_WRITE : 0),
		   MAP_PRIVATE, fd, 0);
	err = map == MAP_FAILED ? ivm_error_os(errno, "mapping core %s", path)
				: NULL;
	close(fd);
	if (err)
		return err;
	if (patch) {
		err = core_patch(map, st.st_size, patch);
		if (!err && mprotect(map, st.st_size, PROT_READ) < 0)
			err = ivm_error_os(errno, "mprotect of core %s", path);
	}
	core = err ? NULL : calloc(1, sizeof(*core));
	if (!core) {
		munmap(map, st.st_size);
		return err ? err : &ivm_enomem;
	}
	core->data = map;
	core->size = st.st_size;
	core->mapped = true;
	if (trace) {
		core->trace = fopen(trace, "ae");
		if (!core->trace) {
			err = ivm_error_os(errno, "opening IVM_CORE_TRACE %s",
					   trace);
			core_free(core);
			return err;
		}
	}
	err = core_finish(core, ret);
	return ivm_error_wrap(err, "%s", path);
}

/* ---- core extras ------------------------------------------------------ */

bool ivm_gmem_is_core(const struct ivm_gmem *gmem)
{
	return gmem && gmem->ops == &core_ops;
}

bool ivm_gmem_core_has_vaddr(const struct ivm_gmem *gmem)
{
	return ivm_gmem_is_core(gmem) &&
	       ((struct core_gmem *)gmem->priv)->nr_virt;
}

static struct ivm_error *not_core(void)
{
	return ivm_error_create(IVM_ERROR_INVALID,
				"guest memory is not an elf core");
}

struct ivm_error *ivm_gmem_core_read_vaddr(struct ivm_gmem *gmem, uint64_t va,
					   void *buf, size_t len)
{
	struct core_gmem *core;

	if (!ivm_gmem_is_core(gmem))
		return not_core();
	core = gmem->priv;
	if (!len)
		return NULL;
	if (!core->nr_virt)
		return ivm_error_fault(va,
				       "core has no virtual addresses (dumped without paging)");
	return seg_read(core, core->virt, core->nr_virt, va, buf, len,
			"guest virtual");
}

struct ivm_error *ivm_gmem_core_for_each_note(
	struct ivm_gmem *gmem,
	struct ivm_error *(*fn)(const struct ivm_elf_note *note, void *arg),
	void *arg)
{
	struct core_gmem *core;
	size_t i;

	if (!ivm_gmem_is_core(gmem))
		return not_core();
	core = gmem->priv;
	for (i = 0; i < core->nr_note_segs; i++) {
		struct ivm_error *err;

		err = walk_notes(core, &core->note_segs[i], fn, arg);
		if (err == &ivm_stop)
			return NULL;
		if (err)
			return err;
	}
	return NULL;
}

size_t ivm_gmem_core_nr_cpus(const struct ivm_gmem *gmem)
{
	const struct core_gmem *core;

	if (!ivm_gmem_is_core(gmem))
		return 0;
	core = gmem->priv;
	return core->nr_prstatus > core->nr_qemu ? core->nr_prstatus
						 : core->nr_qemu;
}

static void regs_from_prstatus(const struct cpu_note *n,
			       struct ivm_x86_regs *r)
{
	const uint8_t *g = n->desc + PRSTATUS_REG_OFF;
	uint64_t v[PRSTATUS_NR_REGS];
	int i;

	if (n->descsz < PRSTATUS_REG_OFF + sizeof(v))
		return;
	for (i = 0; i < PRSTATUS_NR_REGS; i++)
		v[i] = ivm_le64(g + 8 * i);
	/* struct user_regs_struct order. */
	r->r15 = v[0]; r->r14 = v[1]; r->r13 = v[2]; r->r12 = v[3];
	r->rbp = v[4]; r->rbx = v[5]; r->r11 = v[6]; r->r10 = v[7];
	r->r9 = v[8]; r->r8 = v[9]; r->rax = v[10]; r->rcx = v[11];
	r->rdx = v[12]; r->rsi = v[13]; r->rdi = v[14];
	/* v[15] is orig_rax */
	r->rip = v[16]; r->cs = v[17]; r->rflags = v[18]; r->rsp = v[19];
	r->ss = v[20]; r->fs_base = v[21]; r->gs_base = v[22];
	r->ds = v[23]; r->es = v[24]; r->fs = v[25]; r->gs = v[26];
	r->valid |= IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
		    IVM_X86_REGS_FS_GS_BASE;
}

static uint16_t qemu_selector(const uint8_t *desc, int seg)
{
	return ivm_le32(desc + QEMU_NOTE_SEG_OFF + seg * QEMU_NOTE_SEG_SIZE);
}

static uint64_t qemu_seg_base(const uint8_t *desc, int seg)
{
	return ivm_le64(desc + QEMU_NOTE_SEG_OFF + seg * QEMU_NOTE_SEG_SIZE +
		       QEMU_NOTE_SEG_BASE);
}

static void regs_from_qemu(const struct cpu_note *n, struct ivm_x86_regs *r)
{
	const uint8_t *d = n->desc;
	uint64_t avail;
	uint64_t *gprs[] = {
		&r->rax, &r->rbx, &r->rcx, &r->rdx, &r->rsi, &r->rdi,
		&r->rsp, &r->rbp, &r->r8, &r->r9, &r->r10, &r->r11,
		&r->r12, &r->r13, &r->r14, &r->r15,
	};
	size_t i;

	if (n->descsz < QEMU_NOTE_MIN_SIZE ||
	    ivm_le32(d) != QEMU_NOTE_VERSION)
		return;
	/* The size word says which appended fields exist. */
	avail = ivm_le32(d + 4);
	if (avail > n->descsz)
		avail = n->descsz;
	for (i = 0; i < sizeof(gprs) / sizeof(gprs[0]); i++)
		*gprs[i] = ivm_le64(d + QEMU_NOTE_GPR_OFF + 8 * i);
	r->rip = ivm_le64(d + QEMU_NOTE_RIP_OFF);
	r->rflags = ivm_le64(d + QEMU_NOTE_RFLAGS_OFF);
	r->cs = qemu_selector(d, QSEG_CS);
	r->ds = qemu_selector(d, QSEG_DS);
	r->es = qemu_selector(d, QSEG_ES);
	r->fs = qemu_selector(d, QSEG_FS);
	r->gs = qemu_selector(d, QSEG_GS);
	r->ss = qemu_selector(d, QSEG_SS);
	r->fs_base = qemu_seg_base(d, QSEG_FS);
	r->gs_base = qemu_seg_base(d, QSEG_GS);
	r->cr0 = ivm_le64(d + QEMU_NOTE_CR_OFF);
	r->cr2 = ivm_le64(d + QEMU_NOTE_CR_OFF + 16);
	r->cr3 = ivm_le64(d + QEMU_NOTE_CR_OFF + 24);
	r->cr4 = ivm_le64(d + QEMU_NOTE_CR_OFF + 32);
	r->valid |= IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
		    IVM_X86_REGS_FS_GS_BASE | IVM_X86_REGS_CRS;
	if (avail >= QEMU_NOTE_KGS_OFF + 8) {
		r->kernel_gs_base = ivm_le64(d + QEMU_NOTE_KGS_OFF);
		r->valid |= IVM_X86_REGS_KERNEL_GS_BASE;
	}
}

/* The guest's registers are as hostile as its memory: trace them too. */
static void trace_note(const struct core_gmem *core, size_t cpu,
		       const struct cpu_note *n)
{
	trace_read(core, 'n', cpu, n->desc - core->data, n->descsz);
}

struct ivm_error *ivm_gmem_core_cpu_state(struct ivm_gmem *gmem, size_t cpu,
					  struct ivm_x86_regs *ret)
{
	const struct core_gmem *core;
	struct ivm_x86_regs regs = { 0 };

	if (!ivm_gmem_is_core(gmem))
		return not_core();
	core = gmem->priv;
	if (cpu >= ivm_gmem_core_nr_cpus(gmem))
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"core has no registers for vcpu %zu (%zu vcpus)",
					cpu, ivm_gmem_core_nr_cpus(gmem));
	/* The QEMU note is the richer one; it wins where both are present. */
	if (cpu < core->nr_prstatus) {
		regs_from_prstatus(&core->prstatus[cpu], &regs);
		trace_note(core, cpu, &core->prstatus[cpu]);
	}
	if (cpu < core->nr_qemu) {
		regs_from_qemu(&core->qemu[cpu], &regs);
		trace_note(core, cpu, &core->qemu[cpu]);
	}
	if (!regs.valid)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"core notes for vcpu %zu are too short or of an unknown version",
					cpu);
	*ret = regs;
	return NULL;
}

const char *ivm_gmem_core_vmcoreinfo(const struct ivm_gmem *gmem)
{
	if (!ivm_gmem_is_core(gmem))
		return NULL;
	return ((const struct core_gmem *)gmem->priv)->vmcoreinfo;
}
