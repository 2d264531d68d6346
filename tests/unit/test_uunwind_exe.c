// SPDX-License-Identifier: MIT
/*
 * Finding a process's executable, its load bias and its host copy:
 *  - on this very test process (a PIE): its real auxiliary vector
 *    (/proc/self/auxv) and its memory (process_vm_readv) give the bias the
 *    dynamic loader reports and the build-id of /proc/self/exe, and the
 *    host file passes ivm_uexe_check();
 *  - on a synthetic process image: every lie a hostile guest can tell
 *    (headers that do not match the vector, a bias PT_PHDR contradicts, an
 *    ET_EXEC off its address, broken notes, unreadable pages) is refused;
 *  - the symdir cache: .build-id/xx/rest by symlink, rest.debug only when
 *    it has CFI (a debug file's .eh_frame is SHT_NOBITS), remembered
 *    misses, a file whose program headers disagree, and least recently
 *    used replacement with stale handles detected.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "unwind/uunwind_exe.h"

/* ---- our own process ------------------------------------------------------ */

static struct ivm_error *read_self(void *ctx, uint64_t va, void *buf,
				   size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)va, len };

	(void)ctx;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) !=
	    (ssize_t)len)
		return ivm_error_fault(va, "process_vm_readv at %#llx",
				       (unsigned long long)va);
	return NULL;
}

static const struct ivm_kmem_reader self_reader = { read_self, NULL };

static size_t read_auxv(uint8_t *buf, size_t cap)
{
	int fd = open("/proc/self/auxv", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	cr_assert_geq(fd, 0);
	n = read(fd, buf, cap);
	close(fd);
	cr_assert_gt(n, 0);
	return (size_t)n;
}

static int main_bias_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	/* The first object is the main program. */
	*(uint64_t *)data = info->dlpi_addr;
	return 1;
}

static char *self_exe(void)
{
	static char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	cr_assert_gt(n, 0);
	path[n] = 0;
	return path;
}

static void identify_self(struct ivm_uexe *x)
{
	uint8_t auxv[IVM_UEXE_MAX_AUXV * 16];
	size_t n = read_auxv(auxv, sizeof(auxv));
	struct ivm_error *err = ivm_uexe_identify(&self_reader, auxv, n, 0, x);

	cr_assert_null(err, "identify: %s", ivm_error_string(err));
}

Test(uunwind_exe, identifies_this_process)
{
	struct ivm_uexe x;
	struct ivm_ubinary *b;
	const uint8_t *id;
	uint64_t bias = 0;
	size_t len;

	identify_self(&x);
	dl_iterate_phdr(main_bias_cb, &bias);
	cr_assert(x.dyn, "the unit tests are built as a PIE");
	cr_assert_neq(x.bias, 0);
	cr_assert_eq(x.bias, bias, "bias %#llx, the loader says %#llx",
		     (unsigned long long)x.bias, (unsigned long long)bias);
	cr_assert_eq(x.header, getauxval(AT_PHDR) & ~4095ul);
	cr_assert_null(ivm_ubinary_open(self_exe(), &b));
	cr_assert(ivm_ubinary_build_id(b, &id, &len));
	cr_assert_eq(len, x.build_id_len);
	cr_assert_arr_eq(id, x.build_id, len);
	cr_assert_null(ivm_uexe_check(&x, b));
	ivm_ubinary_destroy(b);
}

Test(uunwind_exe, check_refuses_another_binary_or_bias)
{
	struct ivm_uexe x, y;
	struct ivm_ubinary *b;
	struct ivm_error *err;

	identify_self(&x);
	cr_assert_null(ivm_ubinary_open(self_exe(), &b));
	y = x;
	y.build_id[0] ^= 1;
	err = ivm_uexe_check(&y, b);
	cr_assert_not_null(err);
	cr_assert(strstr(ivm_error_string(err), "build-id"));
	ivm_error_destroy(err);
	y = x;
	y.bias += 4096;		/* the header somewhere the file disagrees */
	err = ivm_uexe_check(&y, b);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	y = x;
	y.exec[0].memsz += 16;
	err = ivm_uexe_check(&y, b);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	y = x;
	y.dyn = false;
	err = ivm_uexe_check(&y, b);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	ivm_ubinary_destroy(b);
}

/* ---- a synthetic process image ------------------------------------------- */

#define IMG_BASE 0x7f1234560000ull	/* where the "loader" put it */
#define IMG_SIZE 0x3000ull
#define NOTE_OFF 0x400u

struct image {
	uint8_t mem[IMG_SIZE];
	uint8_t auxv[8 * 16];
	size_t auxv_len;
};

static struct image img;

static struct ivm_error *read_img(void *ctx, uint64_t va, void *buf,
				  size_t len)
{
	struct image *im = ctx;

	if (va < IMG_BASE || len > IMG_SIZE || va - IMG_BASE > IMG_SIZE - len)
		return ivm_error_fault(va, "not mapped");
	memcpy(buf, im->mem + (va - IMG_BASE), len);
	return NULL;
}

static const struct ivm_kmem_reader img_reader = { read_img, &img };

static Elf64_Ehdr *img_ehdr(void)
{
	return (Elf64_Ehdr *)img.mem;
}

static Elf64_Phdr *img_phdr(unsigned int i)
{
	return (Elf64_Phdr *)(img.mem + sizeof(Elf64_Ehdr)) + i;
}

static void set_auxv(uint64_t phdr, uint64_t phnum)
{
	uint64_t v[] = { AT_PAGESZ, 4096, AT_PHDR, phdr, AT_PHENT,
			 sizeof(Elf64_Phdr), AT_PHNUM, phnum, AT_NULL, 0 };

	memcpy(img.auxv, v, sizeof(v));
	img.auxv_len = sizeof(v);
}

/*
 * A PIE linked at 0 and loaded at IMG_BASE: PT_PHDR, a read-only first
 * segment with the headers and the build-id note, a code segment.
 */
static void build_image(void)
{
	Elf64_Ehdr *eh = img_ehdr();
	uint8_t *note = img.mem + NOTE_OFF;
	uint32_t nh[3] = { 4, 20, NT_GNU_BUILD_ID };

	memset(&img, 0, sizeof(img));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_phoff = sizeof(Elf64_Ehdr);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = 4;
	*img_phdr(0) = (Elf64_Phdr){ .p_type = PT_PHDR, .p_flags = PF_R,
		.p_offset = 64, .p_vaddr = 64, .p_filesz = 4 * 56,
		.p_memsz = 4 * 56 };
	*img_phdr(1) = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R,
		.p_offset = 0, .p_vaddr = 0, .p_filesz = 0x1000,
		.p_memsz = 0x1000, .p_align = 0x1000 };
	*img_phdr(2) = (Elf64_Phdr){ .p_type = PT_LOAD,
		.p_flags = PF_R | PF_X, .p_offset = 0x1000,
		.p_vaddr = 0x1000, .p_filesz = 0x1800, .p_memsz = 0x1800,
		.p_align = 0x1000 };
	*img_phdr(3) = (Elf64_Phdr){ .p_type = PT_NOTE, .p_flags = PF_R,
		.p_offset = NOTE_OFF, .p_vaddr = NOTE_OFF, .p_filesz = 36,
		.p_memsz = 36, .p_align = 4 };
	memcpy(note, nh, sizeof(nh));
	memcpy(note + 12, "GNU", 4);
	for (int i = 0; i < 20; i++)
		note[16 + i] = (uint8_t)(0xa0 + i);
	set_auxv(IMG_BASE + 64, 4);
}

static struct ivm_error *identify_img(struct ivm_uexe *x)
{
	return ivm_uexe_identify(&img_reader, img.auxv, img.auxv_len, 0, x);
}

static void expect_refused(const char *what, enum ivm_error_code code)
{
	struct ivm_uexe x;
	struct ivm_error *err = identify_img(&x);

	cr_assert_not_null(err, "%s: accepted", what);
	cr_assert_eq(err->code, code, "%s: %s", what, ivm_error_string(err));
	ivm_error_destroy(err);
}

Test(uunwind_exe, synthetic_pie)
{
	struct ivm_uexe x;
	struct ivm_error *err;

	build_image();
	err = identify_img(&x);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(x.bias, IMG_BASE);
	cr_assert_eq(x.header, IMG_BASE);
	cr_assert(x.dyn);
	cr_assert_eq(x.nr_exec, 1);
	cr_assert_eq(x.exec[0].vaddr, 0x1000);
	cr_assert_eq(x.exec[0].memsz, 0x1800);
	cr_assert_eq(x.build_id_len, 20);
	cr_assert_eq(x.build_id[19], 0xa0 + 19);
}

Test(uunwind_exe, synthetic_without_pt_phdr)
{
	struct ivm_uexe x;

	/* A static-pie may lack PT_PHDR: the header's mapping still says. */
	build_image();
	img_phdr(0)->p_type = PT_NULL;
	cr_assert_null(identify_img(&x));
	cr_assert_eq(x.bias, IMG_BASE);
}

Test(uunwind_exe, refuses_lies)
{
	build_image();
	set_auxv(0, 0);
	expect_refused("no AT_PHDR", IVM_ERROR_NOT_FOUND);

	build_image();
	set_auxv(IMG_BASE + 64, IVM_UEXE_MAX_PHNUM + 1);
	expect_refused("too many headers", IVM_ERROR_PROTOCOL);

	build_image();
	set_auxv(0xffff888000000000ull, 4);
	expect_refused("kernel address", IVM_ERROR_PROTOCOL);

	build_image();
	set_auxv(IMG_BASE + 128, 4);
	expect_refused("AT_PHDR off e_phoff", IVM_ERROR_PROTOCOL);

	build_image();
	set_auxv(IMG_BASE + 0x4000 + 64, 4);
	expect_refused("a page not mapped", IVM_ERROR_FAULT);

	build_image();
	img_ehdr()->e_machine = EM_AARCH64;
	expect_refused("foreign machine", IVM_ERROR_PROTOCOL);

	build_image();
	img_ehdr()->e_type = ET_REL;
	expect_refused("relocatable", IVM_ERROR_PROTOCOL);

	build_image();
	img_ehdr()->e_phnum = 3;
	expect_refused("e_phnum differs", IVM_ERROR_PROTOCOL);

	build_image();
	img_ehdr()->e_type = ET_EXEC;	/* at IMG_BASE, linked at 0 */
	expect_refused("ET_EXEC with a bias", IVM_ERROR_PROTOCOL);

	build_image();
	img_phdr(0)->p_vaddr = 0x1040;	/* PT_PHDR says another bias */
	expect_refused("PT_PHDR disagrees", IVM_ERROR_PROTOCOL);

	build_image();
	img_phdr(2)->p_flags = PF_R;
	expect_refused("no code", IVM_ERROR_PROTOCOL);

	build_image();
	img_phdr(1)->p_offset = 0x1000;
	expect_refused("nothing maps the header", IVM_ERROR_PROTOCOL);

	build_image();
	img_phdr(2)->p_vaddr = UINT64_MAX - 0x100;
	expect_refused("a wrapping segment", IVM_ERROR_PROTOCOL);
}

Test(uunwind_exe, broken_notes)
{
	uint32_t *nh;

	build_image();
	nh = (uint32_t *)(img.mem + NOTE_OFF);
	nh[1] = 0xfffffff0;		/* descsz past the segment */
	expect_refused("huge descsz", IVM_ERROR_NOT_FOUND);

	build_image();
	nh = (uint32_t *)(img.mem + NOTE_OFF);
	nh[0] = 0xffffffff;		/* namesz: the aligned size wraps u32 */
	expect_refused("huge namesz", IVM_ERROR_NOT_FOUND);

	build_image();
	img_phdr(3)->p_vaddr = 0x2ff0;	/* notes past the mapped pages */
	img_phdr(3)->p_filesz = 0x100;
	expect_refused("unreadable notes", IVM_ERROR_NOT_FOUND);

	build_image();
	memcpy(img.mem + NOTE_OFF + 12, "GNX", 4);
	expect_refused("not a GNU note", IVM_ERROR_NOT_FOUND);

	build_image();
	nh = (uint32_t *)(img.mem + NOTE_OFF);
	nh[1] = IVM_UBINARY_MAX_BUILD_ID + 1;
	img_phdr(3)->p_filesz = 0x200;
	expect_refused("over-long build-id", IVM_ERROR_NOT_FOUND);
}

Test(uunwind_exe, paths_and_hex)
{
	static const uint8_t id[] = { 0xab, 0xcd, 0x01, 0x9f };
	char hex[9], *p;

	cr_assert_str_eq(ivm_build_id_hex(id, 4, hex), "abcd019f");
	p = ivm_uexe_symdir_path("/s", id, 4, false);
	cr_assert_str_eq(p, "/s/.build-id/ab/cd019f");
	free(p);
	p = ivm_uexe_symdir_path("/s", id, 4, true);
	cr_assert_str_eq(p, "/s/.build-id/ab/cd019f.debug");
	free(p);
	cr_assert_null(ivm_uexe_symdir_path("/s", id, 1, false));
	cr_assert_null(ivm_uexe_symdir_path(NULL, id, 4, false));
}

/* ---- the symdir cache ----------------------------------------------------- */

static char tmpdir[] = "/tmp/ivm-uexe-XXXXXX";

static void tmp_setup(void)
{
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void tmp_teardown(void)
{
	char cmd[128];

	/* Only our own mkdtemp directory. */
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
	if (!strncmp(tmpdir, "/tmp/ivm-uexe-", 14))
		cr_assert_eq(system(cmd), 0);
}

/* Make tmpdir/.build-id/xx/ for id and return the path of rest[.debug]. */
static char *entry_path(const uint8_t *id, size_t len, bool debug)
{
	char *path = ivm_uexe_symdir_path(tmpdir, id, len, debug);
	char dir[4200];

	cr_assert_not_null(path);
	snprintf(dir, sizeof(dir), "%s/.build-id", tmpdir);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = 0;
	mkdir(dir, 0755);
	return path;
}

static void copy_file(const char *from, const char *to)
{
	char cmd[8400];

	snprintf(cmd, sizeof(cmd), "cp -- '%s' '%s'", from, to);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/*
 * Turn the copy at path into what objcopy --only-keep-debug makes of
 * .eh_frame: a section header of type SHT_NOBITS.
 */
static void make_eh_frame_nobits(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool done = false;

	cr_assert_geq(fd, 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_RDWR, NULL);
	cr_assert_not_null(elf);
	elf_flagelf(elf, ELF_C_SET, ELF_F_LAYOUT);
	cr_assert_eq(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		cr_assert_not_null(gelf_getshdr(scn, &sh));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".eh_frame"))
			continue;
		sh.sh_type = SHT_NOBITS;
		cr_assert(gelf_update_shdr(scn, &sh));
		done = true;
	}
	cr_assert(done, "no .eh_frame in %s", path);
	cr_assert_geq(elf_update(elf, ELF_C_WRITE), 0);
	elf_end(elf);
	close(fd);
}

TestSuite(uunwind_exe_cache, .init = tmp_setup, .fini = tmp_teardown);

Test(uunwind_exe_cache, symlink_and_remembered_miss)
{
	struct ivm_uexe_cache *c;
	struct ivm_uexe_cache_stats st;
	struct ivm_uexe_handle h, h2;
	struct ivm_uexe x, other;
	const char *why;
	char *path;

	identify_self(&x);
	cr_assert_null(ivm_uexe_cache_create(tmpdir, &c));
	/* Nothing there yet: a miss, remembered. */
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h, &why));
	cr_assert_eq(h.slot, -1);
	cr_assert_not_null(why);
	path = entry_path(x.build_id, x.build_id_len, false);
	cr_assert_eq(symlink(self_exe(), path), 0);
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h, &why));
	cr_assert_eq(h.slot, -1, "a remembered miss is not looked up again");
	ivm_uexe_cache_stats(c, &st);
	cr_assert_eq(st.miss_hits, 1);
	cr_assert_eq(st.opened, 0);
	ivm_uexe_cache_destroy(c);

	/* A fresh cache finds it through the symlink, and keeps it. */
	cr_assert_null(ivm_uexe_cache_create(tmpdir, &c));
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h, &why));
	cr_assert_geq(h.slot, 0, "not found: %s", why ? why : "?");
	cr_assert_not_null(ivm_uexe_cache_get(c, h));
	cr_assert_str_eq(ivm_ubinary_path(ivm_uexe_cache_get(c, h)), path);
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h2, NULL));
	cr_assert_eq(h2.slot, h.slot);
	ivm_uexe_cache_stats(c, &st);
	cr_assert_eq(st.opened, 1);

	/* Another build-id: no file, a miss. */
	other = x;
	other.build_id[0] ^= 0xff;
	cr_assert_null(ivm_uexe_cache_find(c, &other, &h2, &why));
	cr_assert_eq(h2.slot, -1);
	free(path);
	ivm_uexe_cache_destroy(c);
}

Test(uunwind_exe_cache, debug_file_only_with_cfi)
{
	struct ivm_uexe_cache *c;
	struct ivm_uexe_handle h;
	struct ivm_uexe x;
	const char *why;
	char *path;

	identify_self(&x);
	path = entry_path(x.build_id, x.build_id_len, true);
	copy_file(self_exe(), path);
	make_eh_frame_nobits(path);
	cr_assert_null(ivm_uexe_cache_create(tmpdir, &c));
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h, &why));
	cr_assert_eq(h.slot, -1, ".eh_frame as NOBITS taken for CFI");
	cr_assert_not_null(why);
	cr_assert(strstr(why, "CFI"), "why: %s", why);
	ivm_uexe_cache_destroy(c);

	/* A .debug that does carry .eh_frame is used. */
	copy_file(self_exe(), path);
	cr_assert_null(ivm_uexe_cache_create(tmpdir, &c));
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h, &why));
	cr_assert_geq(h.slot, 0, "not found: %s", why ? why : "?");
	cr_assert_str_eq(ivm_ubinary_path(ivm_uexe_cache_get(c, h)), path);
	ivm_uexe_cache_destroy(c);
	free(path);
}

Test(uunwind_exe_cache, explicit_binary_first_and_mismatch)
{
	struct ivm_uexe_cache *c;
	struct ivm_uexe_handle h;
	struct ivm_uexe x, moved;
	const char *why;

	identify_self(&x);
	cr_assert_null(ivm_uexe_cache_create(NULL, &c));
	cr_assert_null(ivm_uexe_cache_add(c, self_exe()));
	cr_assert_not_null(ivm_uexe_cache_explicit(c, 0));
	cr_assert_null(ivm_uexe_cache_explicit(c, 1));
	cr_assert_null(ivm_uexe_cache_find(c, &x, &h, &why));
	cr_assert_eq(h.slot, 0);
	/* Same build-id, but its headers are not where the bias puts them. */
	moved = x;
	moved.header += 4096;
	cr_assert_null(ivm_uexe_cache_find(c, &moved, &h, &why));
	cr_assert_eq(h.slot, -1);
	cr_assert_not_null(why);
	ivm_uexe_cache_destroy(c);
}

Test(uunwind_exe_cache, not_a_directory)
{
	struct ivm_uexe_cache *c;
	struct ivm_error *err;

	err = ivm_uexe_cache_create("/nonexistent/ivm-symdir", &c);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_OS);
	ivm_error_destroy(err);
	err = ivm_uexe_cache_create("/proc/self/exe", &c);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
}

/*
 * More build-ids than the cache holds: copies of one small binary, each
 * with its build-id changed, each found once; the oldest is replaced and
 * its handle goes stale.
 */
Test(uunwind_exe_cache, replacement_is_bounded)
{
	enum { N = IVM_UEXE_CACHE_SYMDIR + 2 };
	struct ivm_uexe_handle h[N];
	struct ivm_uexe_cache_stats st;
	struct ivm_uexe_cache *c;
	struct ivm_ubinary *b;
	struct ivm_uexe x;
	const uint8_t *id0;
	uint8_t *data;
	size_t len, size, i;
	char *src = self_exe();
	FILE *f;

	cr_assert_null(ivm_ubinary_open(src, &b));
	cr_assert(ivm_ubinary_build_id(b, &id0, &len));
	/* A guest view of this file loaded at 0x7f0000000000. */
	memset(&x, 0, sizeof(x));
	x.dyn = true;
	x.header = 0x7f0000000000ull;
	cr_assert_null(ivm_ubinary_bias(b, x.header, 0, &x.bias));
	for (i = 0; i < ivm_ubinary_nr_exec(b); i++)
		x.exec[x.nr_exec++] = *ivm_ubinary_exec(b, i);
	memcpy(x.build_id, id0, len);
	x.build_id_len = len;
	ivm_ubinary_destroy(b);
	f = fopen(src, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	size = (size_t)ftell(f);
	rewind(f);
	data = malloc(size);
	cr_assert_not_null(data);
	cr_assert_eq(fread(data, 1, size, f), size);
	fclose(f);

	cr_assert_null(ivm_uexe_cache_create(tmpdir, &c));
	for (i = 0; i < N; i++) {
		uint8_t *at = memmem(data, size, x.build_id, len);
		char *path;

		cr_assert_not_null(at, "build-id bytes not in the file");
		x.build_id[len - 1] = (uint8_t)(0x40 + i);
		memcpy(at, x.build_id, len);
		path = entry_path(x.build_id, len, false);
		f = fopen(path, "wb");
		cr_assert_not_null(f);
		cr_assert_eq(fwrite(data, 1, size, f), size);
		fclose(f);
		free(path);
		cr_assert_null(ivm_uexe_cache_find(c, &x, &h[i], NULL));
		cr_assert_geq(h[i].slot, 0, "copy %zu not found", i);
	}
	ivm_uexe_cache_stats(c, &st);
	cr_assert_eq(st.opened, N);
	cr_assert_eq(st.evicted, N - IVM_UEXE_CACHE_SYMDIR);
	/* The first two were least recently used: their handles are stale. */
	cr_assert_null(ivm_uexe_cache_get(c, h[0]));
	cr_assert_null(ivm_uexe_cache_get(c, h[1]));
	cr_assert_not_null(ivm_uexe_cache_get(c, h[2]));
	cr_assert_not_null(ivm_uexe_cache_get(c, h[N - 1]));
	free(data);
	ivm_uexe_cache_destroy(c);
}

/* ---- the report: a PIE's user pcs by its labels and the profile's symdir -- */

#include "cmd/commands.h"
#include "profile/profile_file.h"
#include "report/report.h"

__attribute__((noinline, used)) void ivm_test_pie_marker(void)
{
	__asm__ volatile("");
}

static void write_pie_profile(const char *path, const struct ivm_uexe *x,
			      bool with_bias)
{
	char hex[2 * IVM_UBINARY_MAX_BUILD_ID + 1], bias[32];
	struct ivm_label labels[2] = {
		{ "user_build_id", ivm_build_id_hex(x->build_id,
						    x->build_id_len, hex) },
		{ "user_bias", bias },
	};
	/* A return address just after a call inside the function. */
	uint64_t u[1] = { (uint64_t)(uintptr_t)ivm_test_pie_marker + 1 };
	struct ivm_sample s = {
		.kind = IVM_SAMPLE_TO_IDLE, .pid = 100, .tid = 101,
		.comm = "pie", .nr_user = 1, .user_pcs = u,
		.nr_labels = with_bias ? 2 : 1, .labels = labels,
	};
	struct ivm_profile_writer *w;

	snprintf(bias, sizeof(bias), "0x%llx", (unsigned long long)x->bias);
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_meta(w, "symdir", tmpdir));
	cr_assert_null(ivm_profile_write_sample(w, &s));
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));
}

static char *folded_report(const char *prof)
{
	struct ivm_report_options opts = { .kind = -1, .top = 10,
					   .format = IVM_REPORT_FOLDED };
	char *buf = NULL;
	size_t len = 0;

	opts.out = open_memstream(&buf, &len);
	cr_assert_eq(ivm_report_file(prof, true, &opts,
				     IVM_CALLTREE_BY_PROCESS), 0);
	fclose(opts.out);
	return buf;
}

Test(uunwind_exe_cache, report_places_a_pie_by_its_labels)
{
	struct ivm_uexe x;
	char prof[4200], *path, *out;

	identify_self(&x);
	path = entry_path(x.build_id, x.build_id_len, false);
	cr_assert_eq(symlink(self_exe(), path), 0);
	free(path);
	snprintf(prof, sizeof(prof), "%s/p.prof", tmpdir);

	/* No --binary, no --symdir: the labels and the profile's symdir. */
	write_pie_profile(prof, &x, true);
	out = folded_report(prof);
	cr_assert(strstr(out, "ivm_test_pie_marker"), "%s", out);
	free(out);

	/* Without the bias the run-time pc is nowhere in the file. */
	write_pie_profile(prof, &x, false);
	out = folded_report(prof);
	cr_assert(!strstr(out, "ivm_test_pie_marker"), "%s", out);
	free(out);
}

/*
 * Two fixed-address executables share their addresses (lockstorm and spin
 * both start at 0x401000): a sample is named only from the binary whose
 * build-id it carries, whatever the order the binaries are given in.
 */
static char *guest_bin(const char *name)
{
	const char *dir = getenv("IVM_GUEST_DIR");
	char *path;

	cr_assert(asprintf(&path, "%s/%s", dir ? dir : "build/guest", name) > 0);
	return path;
}

static uint64_t symbol_addr(const char *bin, const char *sym)
{
	char cmd[4400], line[256];
	unsigned long long addr = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -- '%s'", bin);
	p = popen(cmd, "r");
	cr_assert(p);
	while (fgets(line, sizeof(line), p)) {
		char name[200], type;
		unsigned long long a;

		if (sscanf(line, "%llx %c %199s", &a, &type, name) == 3 &&
		    !strcmp(name, sym))
			addr = a;
	}
	pclose(p);
	cr_assert(addr, "no %s in %s", sym, bin);
	return addr;
}

static void build_id_of(const char *bin, char *hex)
{
	struct ivm_ubinary *b;

	const uint8_t *id;
	size_t len;

	cr_assert_null(ivm_ubinary_open(bin, &b));
	cr_assert(ivm_ubinary_build_id(b, &id, &len));
	ivm_build_id_hex(id, len, hex);
	ivm_ubinary_destroy(b);
}

Test(uunwind_exe_cache, report_keeps_executables_at_the_same_addresses_apart)
{
	char *ls = guest_bin("lockstorm-fp"), *spin = guest_bin("spin");
	char ls_id[2 * IVM_UBINARY_MAX_BUILD_ID + 1];
	char spin_id[2 * IVM_UBINARY_MAX_BUILD_ID + 1];
	uint64_t pc = symbol_addr(ls, "worker_main") + 1;
	struct ivm_label l1 = { "user_build_id", ls_id };
	struct ivm_label l2 = { "user_build_id", spin_id };
	uint64_t u[1] = { pc };
	struct ivm_sample s1 = {
		.kind = IVM_SAMPLE_TO_IDLE, .pid = 1, .tid = 1, .comm = "ls",
		.nr_user = 1, .user_pcs = u, .nr_labels = 1, .labels = &l1,
	}, s2 = s1;
	struct ivm_profile_writer *w;
	char prof[4200];
	int order;

	if (access(ls, R_OK) || access(spin, R_OK)) {
		/* A skipped test's fini does not run. */
		tmp_teardown();
		cr_skip_test("no guest binaries built");
	}
	build_id_of(ls, ls_id);
	build_id_of(spin, spin_id);
	s2.pid = s2.tid = 2;
	strcpy(s2.comm, "spin");
	s2.labels = &l2;
	snprintf(prof, sizeof(prof), "%s/two.prof", tmpdir);
	cr_assert_null(ivm_profile_writer_create(prof, &w));
	cr_assert_null(ivm_profile_write_sample(w, &s1));
	cr_assert_null(ivm_profile_write_sample(w, &s2));
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));

	for (order = 0; order < 2; order++) {
		const char *bins[2] = { order ? spin : ls, order ? ls : spin };
		struct ivm_report_options opts = {
			.kind = -1, .top = 10, .format = IVM_REPORT_FOLDED,
			.binaries = bins, .nr_binaries = 2,
		};
		char *out = NULL, *line, *save = NULL;
		size_t len = 0;
		int seen = 0;

		opts.out = open_memstream(&out, &len);
		cr_assert_eq(ivm_report_file(prof, true, &opts,
					     IVM_CALLTREE_BY_PROCESS), 0);
		fclose(opts.out);
		for (line = strtok_r(out, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			if (strstr(line, "pid 1") || strstr(line, "ls")) {
				cr_assert(strstr(line, "worker_main"), "%s", line);
				seen |= 1;
			}
			if (strstr(line, "spin")) {
				cr_assert(!strstr(line, "worker_main"),
					  "spin named from lockstorm: %s", line);
				seen |= 2;
			}
		}
		cr_assert_eq(seen, 3, "order %d: %s", order, out);
		free(out);
	}
	free(ls);
	free(spin);
}
