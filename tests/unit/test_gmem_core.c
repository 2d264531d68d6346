// SPDX-License-Identifier: MIT
/*
 * The ELF core backend over cores this test writes: QEMU's layouts without
 * and with paging, its notes, and corrupt files.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "gmem/gmem.h"
#include "test_gmem_core_build.h"
#include "tmp_files.h"

#define LOW_SIZE 0x10000
#define HIGH_GPA 0x100000
#define HIGH_SIZE 0x4000

static uint8_t low[LOW_SIZE], highmem[HIGH_SIZE];

static const char vmcoreinfo_text[] =
	"OSRELEASE=6.1.0-56-cloud-amd64\nPAGESIZE=4096\n"
	"SYMBOL(swapper_pg_dir)=ffffffff8260a000\n"
	"NUMBER(phys_base)=0\nKERNELOFFSET=1000000\n";

static void fill(void)
{
	size_t i;

	for (i = 0; i < LOW_SIZE; i++)
		low[i] = (uint8_t)(i ^ (i >> 8));
	for (i = 0; i < HIGH_SIZE; i++)
		highmem[i] = (uint8_t)(0xa5 ^ i);
}

/* Notes of a 3-vCPU guest: 3 NT_PRSTATUS, QEMU notes for 2, VMCOREINFO. */
static uint8_t *make_notes(size_t *len, int with_vmcoreinfo)
{
	struct corebuild cb = { 0 };
	int cpu;

	for (cpu = 0; cpu < 3; cpu++)
		cb_prstatus(&cb, cpu + 1, 0xffffffff81000000ull + cpu,
			    0xffffc90000010000ull + cpu * 0x100,
			    0xffff88807fc00000ull + cpu * 0x100000);
	cb_qemu_note(&cb, 440, 0xffffffff81aaaa00ull, 0xffffc90000abc000ull,
		     0x1000 | 0x5, 0xffff88807fc00000ull, 0x7fff00001000ull);
	cb_qemu_note(&cb, 432, 0xffffffff81bbbb00ull, 0xffffc90000def000ull,
		     0x2000, 0xffff88807fd00000ull, 0x1234);
	if (with_vmcoreinfo)
		cb_note(&cb, "VMCOREINFO", 0, vmcoreinfo_text,
			strlen(vmcoreinfo_text));
	*len = cb.len;
	return cb.buf;
}

/* A non-paging core: physical segments, p_vaddr 0. */
static uint8_t *make_plain_core(size_t *len)
{
	size_t notes_len;
	uint8_t *notes = make_notes(&notes_len, 1), *core;
	struct cb_load loads[] = {
		{ .paddr = 0, .memsz = LOW_SIZE, .filesz = LOW_SIZE,
		  .data = low },
		/* memsz beyond filesz: the rest reads as zeros. */
		{ .paddr = HIGH_GPA, .memsz = HIGH_SIZE + 0x1000,
		  .filesz = HIGH_SIZE, .data = highmem },
	};

	core = cb_core(notes, notes_len, loads, 2, len);
	free(notes);
	return core;
}

static void put64_at(uint8_t *core, size_t off, uint64_t v)
{
	memcpy(core + off, &v, 8);
}

static struct ivm_gmem *open_copy(const uint8_t *data, size_t len,
				  uint8_t **copy)
{
	struct ivm_gmem *gmem = NULL;
	struct ivm_error *err;

	/* An exact-size heap copy: ASan catches any read past the end. */
	*copy = malloc(len ? len : 1);
	cr_assert(*copy);
	memcpy(*copy, data, len);
	err = ivm_gmem_core_create_from_memory(*copy, len, &gmem);
	cr_assert_null(err, "%s", ivm_error_string(err));
	return gmem;
}

static void expect_fault(struct ivm_error *err, uint64_t address)
{
	cr_assert_not_null(err, "expected a fault at 0x%llx",
			   (unsigned long long)address);
	cr_assert_eq(err->code, IVM_ERROR_FAULT, "%s", ivm_error_string(err));
	cr_assert_eq(err->address, address, "fault at 0x%llx, not 0x%llx",
		     (unsigned long long)err->address,
		     (unsigned long long)address);
	ivm_error_destroy(err);
}

Test(gmem_core, plain_physical, .init = fill)
{
	size_t len;
	uint8_t *core = make_plain_core(&len), *copy, buf[0x3000];
	struct ivm_gmem *gmem = open_copy(core, len, &copy);
	size_t i;

	cr_assert(ivm_gmem_is_core(gmem));
	cr_assert(!ivm_gmem_core_has_vaddr(gmem));
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x1230, buf, 0x100));
	cr_assert_eq(memcmp(buf, low + 0x1230, 0x100), 0);
	cr_assert_null(ivm_gmem_read_phys(gmem, HIGH_GPA + HIGH_SIZE - 0x10,
					  buf, 0x20));
	cr_assert_eq(memcmp(buf, highmem + HIGH_SIZE - 0x10, 0x10), 0);
	for (i = 0x10; i < 0x20; i++)
		cr_assert_eq(buf[i], 0);
	/* Beyond memsz, and the hole between the segments. */
	expect_fault(ivm_gmem_read_phys(gmem, HIGH_GPA + HIGH_SIZE + 0xff8,
					buf, 16),
		     HIGH_GPA + HIGH_SIZE + 0x1000);
	expect_fault(ivm_gmem_read_phys(gmem, LOW_SIZE - 8, buf, 16),
		     LOW_SIZE);
	expect_fault(ivm_gmem_core_read_vaddr(gmem, 0, buf, 8), 0);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(core);
}

Test(gmem_core, plain_identity_vaddr, .init = fill)
{
	/* QEMU 7.2 without paging writes p_vaddr == p_paddr: still plain. */
	struct cb_load loads[] = {
		{ .paddr = 0x1000, .vaddr = 0x1000, .memsz = 0x1000,
		  .filesz = 0x1000, .data = low },
	};
	size_t len;
	uint8_t *core = cb_core(NULL, 0, loads, 1, &len), *copy, buf[8];
	struct ivm_gmem *gmem = open_copy(core, len, &copy);

	cr_assert(!ivm_gmem_core_has_vaddr(gmem));
	cr_assert_eq(ivm_gmem_core_nr_cpus(gmem), 0);
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x1ff8, buf, 8));
	cr_assert_eq(memcmp(buf, low + 0xff8, 8), 0);
	expect_fault(ivm_gmem_core_read_vaddr(gmem, 0x1000, buf, 8), 0x1000);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(core);
}

Test(gmem_core, empty_note_segment_with_bogus_offset, .init = fill)
{
	/* Found by fuzzing: an empty PT_NOTE's p_offset must not be used. */
	size_t len;
	uint8_t *core = make_plain_core(&len), *copy;
	struct ivm_gmem *gmem;

	put64_at(core, sizeof(Elf64_Ehdr) + offsetof(Elf64_Phdr, p_filesz), 0);
	put64_at(core, sizeof(Elf64_Ehdr) + offsetof(Elf64_Phdr, p_offset),
		 UINT64_MAX - 0x10000);
	gmem = open_copy(core, len, &copy);
	cr_assert_eq(ivm_gmem_core_nr_cpus(gmem), 0);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(core);
}

Test(gmem_core, registers_and_vmcoreinfo, .init = fill)
{
	size_t len;
	uint8_t *core = make_plain_core(&len), *copy;
	struct ivm_gmem *gmem = open_copy(core, len, &copy);
	struct ivm_x86_regs r;
	struct ivm_error *err;
	const char *vmci;

	cr_assert_eq(ivm_gmem_core_nr_cpus(gmem), 3);

	/* vCPU 0: QEMU note (size 440) wins over NT_PRSTATUS. */
	cr_assert_null(ivm_gmem_core_cpu_state(gmem, 0, &r));
	cr_assert_eq(r.valid, IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
			      IVM_X86_REGS_FS_GS_BASE | IVM_X86_REGS_CRS |
			      IVM_X86_REGS_KERNEL_GS_BASE);
	cr_assert_eq(r.rip, 0xffffffff81aaaa00ull);
	cr_assert_eq(r.rsp, 0xffffc90000abc000ull);
	cr_assert_eq(r.rax, 0x2000);
	cr_assert_eq(r.rdi, 0x2005);
	cr_assert_eq(r.rbp, 0x2007);
	cr_assert_eq(r.r15, 0x200f);
	cr_assert_eq(r.rflags, 0x246);
	cr_assert_eq(r.cs, 0x10);
	cr_assert_eq(r.ss, 0x10 + 8 * 5);
	cr_assert_eq(r.cr0, 0x80050033);
	cr_assert_eq(r.cr2, 0xdeadbeef);
	cr_assert_eq(r.cr3, 0x1005);
	cr_assert_eq(r.cr4, 0x3506f0);
	cr_assert_eq(r.gs_base, 0xffff88807fc00000ull);
	cr_assert_eq(r.kernel_gs_base, 0x7fff00001000ull);

	/* vCPU 1: QEMU note of the older size: no kernel_gs_base. */
	cr_assert_null(ivm_gmem_core_cpu_state(gmem, 1, &r));
	cr_assert(!(r.valid & IVM_X86_REGS_KERNEL_GS_BASE));
	cr_assert_eq(r.kernel_gs_base, 0);
	cr_assert_eq(r.cr3, 0x2000);
	cr_assert_eq(r.rip, 0xffffffff81bbbb00ull);

	/* vCPU 2: NT_PRSTATUS only. */
	cr_assert_null(ivm_gmem_core_cpu_state(gmem, 2, &r));
	cr_assert_eq(r.valid, IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
			      IVM_X86_REGS_FS_GS_BASE);
	cr_assert_eq(r.rip, 0xffffffff81000002ull);
	cr_assert_eq(r.rsp, 0xffffc90000010200ull);
	cr_assert_eq(r.gs_base, 0xffff88807fe00000ull);
	cr_assert_eq(r.r15, 0x1000);
	cr_assert_eq(r.rbp, 0x1004);
	cr_assert_eq(r.rax, 0x100a);
	cr_assert_eq(r.cs, 0x10);
	cr_assert_eq(r.ss, 0x18);

	err = ivm_gmem_core_cpu_state(gmem, 3, &r);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);

	vmci = ivm_gmem_core_vmcoreinfo(gmem);
	cr_assert_not_null(vmci);
	cr_assert_str_eq(vmci, vmcoreinfo_text);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(core);
}

struct note_count {
	int notes, qemu;
	int stop_after;
};

static struct ivm_error *count_note(const struct ivm_elf_note *note,
				    void *arg)
{
	struct note_count *c = arg;

	c->notes++;
	if (note->namesz == 4 && !memcmp(note->name, "QEMU", 4)) {
		cr_assert(note->descsz == 440 || note->descsz == 432);
		c->qemu++;
	}
	if (c->notes == c->stop_after)
		return &ivm_stop;
	return NULL;
}

Test(gmem_core, note_iteration, .init = fill)
{
	size_t len;
	uint8_t *core = make_plain_core(&len), *copy;
	struct ivm_gmem *gmem = open_copy(core, len, &copy);
	struct note_count c = { 0 };

	cr_assert_null(ivm_gmem_core_for_each_note(gmem, count_note, &c));
	cr_assert_eq(c.notes, 6);
	cr_assert_eq(c.qemu, 2);
	c = (struct note_count){ .stop_after = 2 };
	cr_assert_null(ivm_gmem_core_for_each_note(gmem, count_note, &c));
	cr_assert_eq(c.notes, 2);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(core);
}

Test(gmem_core, paging_layout, .init = fill)
{
	/*
	 * As QEMU writes it with "paging": true: one segment per virtual
	 * mapping, p_paddr the physical address, several virtual mappings of
	 * the same physical pages, and a mapping of something that is not RAM
	 * with p_filesz 0 and p_offset -1.
	 */
	uint64_t kva = 0xffffffff81000000ull, dmap = 0xffff888000000000ull;
	struct cb_load loads[] = {
		{ .paddr = 0x2000, .vaddr = kva, .memsz = 0x4000,
		  .filesz = 0x4000, .data = low + 0x2000 },
		{ .paddr = 0, .vaddr = dmap, .memsz = LOW_SIZE,
		  .filesz = LOW_SIZE, .data = low },
		{ .paddr = 0xfebc0000, .vaddr = 0xffffc90000000000ull,
		  .memsz = 0x1000, .filesz = 0 },
	};
	size_t notes_len, len;
	uint8_t *notes = make_notes(&notes_len, 0);
	uint8_t *core = cb_core(notes, notes_len, loads, 3, &len), *copy;
	Elf64_Phdr ph;
	struct ivm_gmem *gmem;
	uint8_t buf[0x100];
	size_t off = sizeof(Elf64_Ehdr) + 3 * sizeof(Elf64_Phdr);
	uint64_t bogus = UINT64_MAX;

	/* Patch the MMIO mapping's p_offset to QEMU's -1. */
	memcpy(&ph, core + off, sizeof(ph));
	cr_assert_eq(ph.p_filesz, 0);
	memcpy(core + off + offsetof(Elf64_Phdr, p_offset), &bogus, 8);

	gmem = open_copy(core, len, &copy);
	cr_assert(ivm_gmem_core_has_vaddr(gmem));
	cr_assert_null(ivm_gmem_core_vmcoreinfo(gmem));
	cr_assert_null(ivm_gmem_core_read_vaddr(gmem, kva + 0x10, buf, 0x80));
	cr_assert_eq(memcmp(buf, low + 0x2010, 0x80), 0);
	cr_assert_null(ivm_gmem_core_read_vaddr(gmem, dmap + 0x2010, buf,
						0x80));
	cr_assert_eq(memcmp(buf, low + 0x2010, 0x80), 0);
	/* Physical reads through the aliasing segments. */
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x1ff0, buf, 0x100));
	cr_assert_eq(memcmp(buf, low + 0x1ff0, 0x100), 0);
	/* Not RAM: no file bytes, reads as zeros per ELF. */
	memset(buf, 0xff, 8);
	cr_assert_null(ivm_gmem_core_read_vaddr(gmem, 0xffffc90000000000ull,
						buf, 8));
	cr_assert_eq(buf[0] | buf[7], 0);
	expect_fault(ivm_gmem_core_read_vaddr(gmem, kva + 0x3ff8, buf, 16),
		     kva + 0x4000);
	expect_fault(ivm_gmem_core_read_vaddr(gmem, 0x1000, buf, 1), 0x1000);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(core);
	free(notes);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char core_path[] = "/tmp/ivm-d-core-XXXXXX";

static void unlink_core(void)
{
	if (IVM_TMP_MADE(core_path))
		unlink(core_path);
}

Test(gmem_core, from_file, .init = fill, .fini = unlink_core)
{
	char *path = core_path;
	size_t len;
	uint8_t *core = make_plain_core(&len), buf[16];
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, core, len), (ssize_t)len);
	err = ivm_gmem_core_create(path, &gmem);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x100, buf, 16));
	cr_assert_eq(memcmp(buf, low + 0x100, 16), 0);
	cr_assert_eq(ivm_gmem_core_nr_cpus(gmem), 3);
	ivm_gmem_destroy(gmem);

	/* Empty file, then no file. */
	cr_assert_eq(ftruncate(fd, 0), 0);
	err = ivm_gmem_core_create(path, &gmem);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_ELF);
	ivm_error_destroy(err);
	close(fd);
	unlink(path);
	err = ivm_gmem_core_create(path, &gmem);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_OS);
	ivm_error_destroy(err);
	free(core);
}

/* The mutation harness's hooks (IVM_CORE_TRACE, IVM_CORE_PATCH). */
static char hook_dir[] = "/tmp/ivm-d-hooks-XXXXXX";

static void remove_hook_dir(void)
{
	IVM_TMP_REMOVE_TREE(hook_dir);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

static struct ivm_error *open_patched(const char *path, const char *patch,
				      const char *text, struct ivm_gmem **ret)
{
	write_text(patch, text);
	setenv("IVM_CORE_PATCH", patch, 1);
	return ivm_gmem_core_create(path, ret);
}

Test(gmem_core, trace_and_patch_hooks, .init = fill, .fini = remove_hook_dir)
{
	char path[64], trace[64], patch[64], text[128], space;
	unsigned long long addr, off, n;
	size_t len;
	uint8_t *core = make_plain_core(&len), buf[16], disk[4];
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	FILE *f;
	int fd;

	cr_assert(mkdtemp(hook_dir));
	snprintf(path, sizeof(path), "%s/core", hook_dir);
	snprintf(trace, sizeof(trace), "%s/trace", hook_dir);
	snprintf(patch, sizeof(patch), "%s/patch", hook_dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, core, len), (ssize_t)len);

	/* A read is logged with its guest address and file offset. */
	setenv("IVM_CORE_TRACE", trace, 1);
	err = ivm_gmem_core_create(path, &gmem);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x100, buf, 16));
	ivm_gmem_destroy(gmem);
	unsetenv("IVM_CORE_TRACE");
	f = fopen(trace, "r");
	cr_assert(f);
	cr_assert_eq(fscanf(f, "%c %llx %llx %llx", &space, &addr, &off, &n), 4);
	fclose(f);
	cr_assert_eq(space, 'p');
	cr_assert_eq(addr, 0x100);
	cr_assert_eq(n, 16);
	cr_assert_eq(memcmp(core + off, low + 0x100, 16), 0);

	/* That offset patched: in memory only, the file is untouched. */
	snprintf(text, sizeof(text), "# a comment\n\n%llx deadBEEF\n", off);
	err = open_patched(path, patch, text, &gmem);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_null(ivm_gmem_read_phys(gmem, 0x100, buf, 16));
	cr_assert_eq(memcmp(buf, "\xde\xad\xbe\xef", 4), 0);
	cr_assert_eq(memcmp(buf + 4, low + 0x104, 12), 0);
	ivm_gmem_destroy(gmem);
	cr_assert_eq(pread(fd, disk, 4, off), 4);
	cr_assert_eq(memcmp(disk, low + 0x100, 4), 0);

	/* Odd digits, no bytes' separator, past the end: refused. */
	snprintf(text, sizeof(text), "%llx dea\n", off);
	err = open_patched(path, patch, text, &gmem);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID, "%s", ivm_error_string(err));
	ivm_error_destroy(err);
	err = open_patched(path, patch, "100:ff\n", &gmem);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	snprintf(text, sizeof(text), "%zx 00ff\n", len - 1);
	err = open_patched(path, patch, text, &gmem);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID, "%s", ivm_error_string(err));
	ivm_error_destroy(err);
	unsetenv("IVM_CORE_PATCH");
	close(fd);
	free(core);
}

static void expect_corrupt(const uint8_t *data, size_t len, const char *what)
{
	struct ivm_gmem *gmem = NULL;
	struct ivm_error *err;
	uint8_t *copy = malloc(len ? len : 1);

	cr_assert(copy);
	memcpy(copy, data, len);
	err = ivm_gmem_core_create_from_memory(copy, len, &gmem);
	cr_assert_not_null(err, "%s: accepted", what);
	cr_assert_eq(err->code, IVM_ERROR_ELF, "%s: %s", what,
		     ivm_error_string(err));
	ivm_error_destroy(err);
	cr_assert_null(gmem);
	free(copy);
}

static void put64(uint8_t *core, size_t off, uint64_t v)
{
	memcpy(core + off, &v, 8);
}

Test(gmem_core, corrupt, .init = fill)
{
	size_t len, load1 = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
	uint8_t *good = make_plain_core(&len);
	uint8_t *c = malloc(len);
	uint16_t u16;

	cr_assert(c);
#define RESET() memcpy(c, good, len)
	RESET();
	c[EI_CLASS] = ELFCLASS32;
	expect_corrupt(c, len, "elf32");
	RESET();
	c[0] = 0;
	expect_corrupt(c, len, "bad magic");
	RESET();
	u16 = EM_AARCH64;
	memcpy(c + offsetof(Elf64_Ehdr, e_machine), &u16, 2);
	expect_corrupt(c, len, "wrong machine");
	RESET();
	put64(c, offsetof(Elf64_Ehdr, e_phoff), len - 10);
	expect_corrupt(c, len, "phdrs past the end");
	RESET();
	put64(c, offsetof(Elf64_Ehdr, e_phoff), UINT64_MAX - 8);
	expect_corrupt(c, len, "phoff overflowing");
	RESET();
	u16 = 0xfffe;
	memcpy(c + offsetof(Elf64_Ehdr, e_phnum), &u16, 2);
	expect_corrupt(c, len, "absurd phnum");
	RESET();
	u16 = 8;
	memcpy(c + offsetof(Elf64_Ehdr, e_phentsize), &u16, 2);
	expect_corrupt(c, len, "tiny phentsize");
	RESET();
	/* PN_XNUM without section headers. */
	u16 = PN_XNUM;
	memcpy(c + offsetof(Elf64_Ehdr, e_phnum), &u16, 2);
	put64(c, offsetof(Elf64_Ehdr, e_shoff), len + 100);
	expect_corrupt(c, len, "pn_xnum, shdr outside file");
	RESET();
	put64(c, load1 + offsetof(Elf64_Phdr, p_offset), UINT64_MAX - 0x100);
	expect_corrupt(c, len, "p_offset overflowing");
	RESET();
	put64(c, load1 + offsetof(Elf64_Phdr, p_filesz), len);
	put64(c, load1 + offsetof(Elf64_Phdr, p_memsz), len);
	expect_corrupt(c, len, "segment past the end");
	RESET();
	put64(c, load1 + offsetof(Elf64_Phdr, p_filesz), LOW_SIZE + 1);
	expect_corrupt(c, len, "filesz > memsz");
	RESET();
	put64(c, load1 + offsetof(Elf64_Phdr, p_paddr), UINT64_MAX - 0x100);
	expect_corrupt(c, len, "paddr wrapping");
	RESET();
	put64(c, sizeof(Elf64_Ehdr) + offsetof(Elf64_Phdr, p_filesz), len);
	expect_corrupt(c, len, "note segment past the end");
	free(c);
	free(good);
#undef RESET
}

Test(gmem_core, pn_xnum, .init = fill)
{
	/* e_phnum = PN_XNUM, the real count in section header 0's sh_info. */
	size_t len;
	uint8_t *good = make_plain_core(&len), *c, *copy;
	Elf64_Shdr sh = { 0 };
	uint16_t u16 = PN_XNUM;
	struct ivm_gmem *gmem;
	uint8_t buf[8];

	c = malloc(len + sizeof(sh));
	cr_assert(c);
	memcpy(c, good, len);
	sh.sh_info = 3;
	memcpy(c + len, &sh, sizeof(sh));
	memcpy(c + offsetof(Elf64_Ehdr, e_phnum), &u16, 2);
	put64(c, offsetof(Elf64_Ehdr, e_shoff), len);
	u16 = sizeof(sh);
	memcpy(c + offsetof(Elf64_Ehdr, e_shentsize), &u16, 2);
	gmem = open_copy(c, len + sizeof(sh), &copy);
	cr_assert_null(ivm_gmem_read_phys(gmem, HIGH_GPA, buf, 8));
	cr_assert_eq(memcmp(buf, highmem, 8), 0);
	ivm_gmem_destroy(gmem);
	free(copy);
	free(c);
	free(good);
}

Test(gmem_core, truncated_and_bad_notes, .init = fill)
{
	size_t len, cut, note_off = sizeof(Elf64_Ehdr) + 3 * sizeof(Elf64_Phdr);
	uint8_t *good = make_plain_core(&len), *c, *copy;
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	uint32_t huge = 0xfffffff0;
	int opened = 0;

	/*
	 * Every truncation either fails cleanly or (never, here: the last
	 * segment's data is at the end) opens; under ASan, any read past the
	 * exact-size copy would abort.
	 */
	for (cut = 0; cut < len; cut += cut < 1024 ? 1 : 509) {
		c = malloc(cut ? cut : 1);
		cr_assert(c);
		memcpy(c, good, cut);
		err = ivm_gmem_core_create_from_memory(c, cut, &gmem);
		if (!err) {
			opened++;
			ivm_gmem_destroy(gmem);
		} else {
			cr_assert_eq(err->code, IVM_ERROR_ELF, "cut %zu: %s",
				     cut, ivm_error_string(err));
			ivm_error_destroy(err);
		}
		free(c);
	}
	cr_assert_eq(opened, 0);

	/*
	 * A note whose descsz runs past the segment: the core still opens
	 * (memory is readable), notes before it are kept, the rest ignored.
	 */
	c = malloc(len);
	cr_assert(c);
	memcpy(c, good, len);
	/* The second note: after the first prstatus (12 + 8 + 336 bytes). */
	memcpy(c + note_off + 12 + 8 + 336 + 4, &huge, 4);
	gmem = open_copy(c, len, &copy);
	cr_assert_eq(ivm_gmem_core_nr_cpus(gmem), 1);
	cr_assert_null(ivm_gmem_core_vmcoreinfo(gmem));
	ivm_gmem_destroy(gmem);
	free(copy);
	free(c);
	free(good);
}
