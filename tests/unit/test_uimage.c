// SPDX-License-Identifier: MIT
/*
 * ELF files read from "guest" bytes, with no host copy: uelf.h (headers,
 * build-id, dynamic symbols), ucfi.h (.eh_frame_hdr and .eh_frame) and
 * uimage.h (rows for the unwinder), checked against libelf and libdw on
 * the same real files:
 *  - every row of every FDE of the host's libc.so.6, ld.so and the
 *    lockstorm workload is the one libdw computes (the unwinder's rules,
 *    compared as text);
 *  - the build-id, segments and .eh_frame_hdr are libelf's;
 *  - every function of .dynsym is named at its address and within its
 *    size, and not one byte past it; aliases get one stable name;
 *  - a reader that lacks pages: faults are reported, not guessed around;
 *  - synthetic files: a symbol's size bounds it, DT_HASH instead of GNU
 *    hash, a .dynamic relocated by ld.so.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind/cfi_rows.h"
#include "unwind/ucfi.h"
#include "unwind/uelf.h"
#include "unwind/uimage.h"
#include "unwind/uunwind_dwarf.h"
#include "tmp_files.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO "/lib64/ld-linux-x86-64.so.2"
#define LOCKSTORM "build/guest/lockstorm-nofp"

/* A file held in memory, read by offset; pages in "hole" are not held. */
struct file_bytes {
	uint8_t *data;
	size_t size;
	uint64_t hole_lo, hole_hi;	/* [lo, hi) faults; 0, 0: none */
	uint64_t reads;
};

static struct ivm_error *read_file_bytes(void *ctx, uint64_t off, void *buf,
					 size_t len)
{
	struct file_bytes *f = ctx;

	f->reads++;
	if (off > f->size || len > f->size - off)
		return ivm_error_fault(off, "past the end");
	if (f->hole_hi && off < f->hole_hi && off + len > f->hole_lo)
		return ivm_error_fault(off < f->hole_lo ? f->hole_lo : off,
				       "not held");
	memcpy(buf, f->data + off, len);
	return NULL;
}

static void load_file(const char *path, struct file_bytes *f)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	memset(f, 0, sizeof(*f));
	cr_assert_geq(fd, 0, "open %s", path);
	cr_assert_eq(fstat(fd, &st), 0);
	f->size = (size_t)st.st_size;
	f->data = malloc(f->size);
	cr_assert_not_null(f->data);
	cr_assert_eq(pread(fd, f->data, f->size, 0), (ssize_t)f->size);
	close(fd);
}

/* ---- headers against libelf ------------------------------------------------ */

static void check_headers(const char *path, bool eh_frame_hdr)
{
	struct file_bytes f;
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct ivm_ubinary *b;
	struct ivm_uelf elf;
	const uint8_t *id;
	size_t len, nexec = 0;

	load_file(path, &f);
	cr_assert_null(ivm_uelf_parse(&r, &elf), "%s", path);
	cr_assert_null(ivm_ubinary_open(path, &b));
	cr_assert(ivm_ubinary_build_id(b, &id, &len));
	cr_assert_eq(elf.build_id_len, len, "%s build-id", path);
	cr_assert_arr_eq(elf.build_id, id, len);
	for (size_t i = 0; i < elf.nr_loads; i++) {
		const struct ivm_ubinary_segment *s;

		if (!(elf.loads[i].flags & PF_X))
			continue;
		s = ivm_ubinary_exec(b, nexec++);
		cr_assert_not_null(s);
		cr_assert_eq(s->vaddr, elf.loads[i].vaddr);
		cr_assert_eq(s->memsz, elf.loads[i].memsz);
		cr_assert_eq(s->offset, elf.loads[i].offset);
	}
	cr_assert_eq(nexec, ivm_ubinary_nr_exec(b));
	/* gcc asks for .eh_frame_hdr only when linking dynamically. */
	cr_assert_eq(elf.eh.vaddr != 0, eh_frame_hdr, "%s: .eh_frame_hdr",
		     path);
	if (eh_frame_hdr)
		cr_assert_gt(elf.eh.count, 100);
	ivm_ubinary_destroy(b);
	free(f.data);
}

Test(uimage, headers_agree_with_libelf)
{
	check_headers(LIBC, true);
	check_headers(LDSO, true);
	check_headers(LOCKSTORM, false);
}

/* ---- every row against libdw ------------------------------------------------- */

/*
 * Every step-th pc of the file's code, by the guest-bytes image and by
 * libdw over the file: the unwinder's rules must be the same, and no pc
 * libdw has a row for may lack one here.
 */
static void compare_rows(const char *path, unsigned int step)
{
	struct file_bytes f;
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct ivm_uimage *im;
	struct ivm_ubinary *b;
	const struct ivm_uelf *elf;
	uint64_t compared = 0, ok = 0;
	char mine[1024], theirs[1024];

	load_file(path, &f);
	cr_assert_null(ivm_uimage_create(&r, &im));
	cr_assert_null(ivm_ubinary_open(path, &b));
	elf = ivm_uimage_elf(im);
	for (size_t i = 0; i < elf->nr_loads; i++) {
		const struct ivm_uelf_load *l = &elf->loads[i];

		if (!(l->flags & PF_X))
			continue;
		for (uint64_t pc = l->vaddr; pc < l->vaddr + l->memsz;
		     pc += step) {
			ivm_uimage_describe_row(im, &r, pc, mine,
						sizeof(mine));
			ivm_ubinary_describe_row(b, pc, theirs,
						 sizeof(theirs));
			compared++;
			ok += !strcmp(theirs, "ok") || !strncmp(theirs, "ok ", 3);
			cr_assert_str_eq(mine, theirs, "%s pc %#llx: %s vs %s",
					 path, (unsigned long long)pc, mine,
					 theirs);
		}
	}
	cr_log_info("%s: %llu pcs, %llu with a row", path,
		    (unsigned long long)compared, (unsigned long long)ok);
	/* Code without CFI is rare: nearly every pc has a row. */
	cr_assert_gt(ok, compared * 9 / 10, "%s: %llu of %llu", path,
		     (unsigned long long)ok, (unsigned long long)compared);
	ivm_ubinary_destroy(b);
	ivm_uimage_destroy(im);
	free(f.data);
}

Test(uimage, rows_agree_with_libdw_libc, .timeout = 120)
{
	compare_rows(LIBC, 5);
}

Test(uimage, rows_agree_with_libdw_ldso, .timeout = 60)
{
	compare_rows(LDSO, 1);
}

Test(uimage, rows_agree_with_libdw_static_executable, .timeout = 120)
{
	compare_rows(LOCKSTORM, 7);
}

/* ---- dynamic symbols ---------------------------------------------------------- */

/* The functions of libelf's .dynsym that cover addr. */
struct dynsym_truth {
	GElf_Sym *syms;
	char **names;
	size_t nr;
};

static void load_truth(const char *path, struct dynsym_truth *t)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	Elf_Scn *scn = NULL;

	memset(t, 0, sizeof(*t));
	cr_assert_geq(fd, 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(e);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_DYNSYM)
			continue;
		d = elf_getdata(scn, NULL);
		t->syms = calloc(sh.sh_size / 24, sizeof(*t->syms));
		t->names = calloc(sh.sh_size / 24, sizeof(*t->names));
		for (size_t i = 0; i < sh.sh_size / 24; i++) {
			GElf_Sym s;
			int type;

			gelf_getsym(d, (int)i, &s);
			type = GELF_ST_TYPE(s.st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
			    !s.st_size || s.st_shndx == SHN_UNDEF)
				continue;
			t->syms[t->nr] = s;
			t->names[t->nr++] = strdup(elf_strptr(e, sh.sh_link,
							       s.st_name));
		}
	}
	elf_end(e);
	close(fd);
	cr_assert_gt(t->nr, 100);
}

/* Whether libelf has a function named name covering addr. */
static bool truth_covers(const struct dynsym_truth *t, uint64_t addr,
			 const char *name)
{
	for (size_t i = 0; i < t->nr; i++)
		if (addr - t->syms[i].st_value < t->syms[i].st_size &&
		    (!name || !strcmp(name, t->names[i])))
			return true;
	return false;
}

Test(uimage, dynsym_names_within_sizes, .timeout = 60)
{
	struct file_bytes f;
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct dynsym_truth t;
	struct ivm_uimage *im;
	uint64_t off;
	const char *name;
	size_t named = 0, outside = 0;

	load_file(LIBC, &f);
	load_truth(LIBC, &t);
	cr_assert_null(ivm_uimage_create(&r, &im));
	for (size_t i = 0; i < t.nr; i++) {
		uint64_t start = t.syms[i].st_value, size = t.syms[i].st_size;
		uint64_t probes[3] = { start, start + size - 1, start + size };

		for (int k = 0; k < 3; k++) {
			name = ivm_uimage_symbol(im, &r, 0, probes[k], &off);
			if (!truth_covers(&t, probes[k], NULL)) {
				cr_assert_null(name, "%#llx named %s outside every function",
					       (unsigned long long)probes[k], name);
				outside++;
				continue;
			}
			cr_assert_not_null(name, "%#llx (in %s) unnamed",
					   (unsigned long long)probes[k],
					   t.names[i]);
			cr_assert(truth_covers(&t, probes[k], name),
				  "%#llx named %s", (unsigned long long)probes[k],
				  name);
			named++;
		}
	}
	cr_log_info("libc: %zu probes named, %zu outside any function", named,
		    outside);
	cr_assert_gt(outside, 0, "no probe fell past a function's end");
	/* Aliases: the plain name wins over __write and __libc_write. */
	for (size_t i = 0; i < t.nr; i++)
		if (!strcmp(t.names[i], "write")) {
			cr_assert_str_eq(ivm_uimage_symbol(im, &r, 0,
							   t.syms[i].st_value,
							   &off), "write");
			cr_assert_eq(off, 0);
		}
	for (size_t i = 0; i < t.nr; i++)
		free(t.names[i]);
	free(t.names);
	free(t.syms);
	ivm_uimage_destroy(im);
	free(f.data);
}

/*
 * A small shared object made here: one PT_LOAD holding everything, a
 * PT_DYNAMIC with DT_HASH (no GNU hash), and three functions: f at 0x1000
 * (16 bytes), g at 0x1020 (8 bytes), and a zero-size one that names
 * nothing.  relocated: the dynamic section's pointers as ld.so leaves
 * them in memory, plus bias.
 */
#define SYN_SIZE 0x2000

static void synthetic_so(uint8_t *img, uint64_t bias)
{
	uint8_t *p;
	const char strtab[] = "\0f\0g\0zero\0";
	const uint64_t dyn = 0x200, hash = 0x300, symtab = 0x400,
		       str = 0x500;
	uint64_t dyns[][2] = {
		{ DT_HASH, hash + bias }, { DT_SYMTAB, symtab + bias },
		{ DT_STRTAB, str + bias }, { DT_STRSZ, sizeof(strtab) },
		{ DT_SYMENT, 24 }, { DT_NULL, 0 },
	};
	struct { uint32_t name; uint64_t value, size; } syms[] = {
		{ 0, 0, 0 }, { 1, 0x1000, 16 }, { 3, 0x1020, 8 },
		{ 5, 0x1030, 0 },
	};

	memset(img, 0, SYN_SIZE);
	memcpy(img, ELFMAG, SELFMAG);
	img[EI_CLASS] = ELFCLASS64;
	img[EI_DATA] = ELFDATA2LSB;
	img[EI_VERSION] = EV_CURRENT;
	*(uint16_t *)(img + 16) = ET_DYN;
	*(uint16_t *)(img + 18) = EM_X86_64;
	*(uint64_t *)(img + 32) = 64;		/* e_phoff */
	*(uint16_t *)(img + 54) = 56;		/* e_phentsize */
	*(uint16_t *)(img + 56) = 2;		/* e_phnum */
	p = img + 64;				/* PT_LOAD, all of it */
	*(uint32_t *)p = PT_LOAD;
	*(uint32_t *)(p + 4) = PF_R | PF_X;
	*(uint64_t *)(p + 32) = SYN_SIZE;
	*(uint64_t *)(p + 40) = SYN_SIZE;
	p += 56;				/* PT_DYNAMIC */
	*(uint32_t *)p = PT_DYNAMIC;
	*(uint64_t *)(p + 8) = dyn;
	*(uint64_t *)(p + 16) = dyn;
	*(uint64_t *)(p + 32) = sizeof(dyns);
	*(uint64_t *)(p + 40) = sizeof(dyns);
	memcpy(img + dyn, dyns, sizeof(dyns));
	*(uint32_t *)(img + hash) = 1;		/* nbucket */
	*(uint32_t *)(img + hash + 4) = 4;	/* nchain: the symbol count */
	for (size_t i = 0; i < 4; i++) {
		p = img + symtab + 24 * i;
		*(uint32_t *)p = syms[i].name;
		p[4] = i ? ELF64_ST_INFO(STB_GLOBAL, STT_FUNC) : 0;
		*(uint16_t *)(p + 6) = i ? 1 : 0;	/* st_shndx */
		*(uint64_t *)(p + 8) = syms[i].value;
		*(uint64_t *)(p + 16) = syms[i].size;
	}
	memcpy(img + str, strtab, sizeof(strtab));
}

static void check_synthetic(uint64_t bias)
{
	static uint8_t img[SYN_SIZE];
	struct file_bytes f = { img, SYN_SIZE, 0, 0, 0 };
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct ivm_uimage *im;
	uint64_t off;
	const char *name;

	synthetic_so(img, bias);
	cr_assert_null(ivm_uimage_create(&r, &im));
	cr_assert_eq(ivm_uimage_elf(im)->eh.vaddr, 0);
	name = ivm_uimage_symbol(im, &r, bias, 0x1000, &off);
	cr_assert_str_eq(name, "f");
	cr_assert_eq(off, 0);
	cr_assert_str_eq(ivm_uimage_symbol(im, &r, bias, 0x100f, &off), "f");
	cr_assert_eq(off, 15);
	/* One byte past f's 16: in no function, whatever is near. */
	cr_assert_null(ivm_uimage_symbol(im, &r, bias, 0x1010, &off));
	cr_assert_str_eq(ivm_uimage_symbol(im, &r, bias, 0x1027, &off), "g");
	cr_assert_null(ivm_uimage_symbol(im, &r, bias, 0x1028, &off));
	/* A symbol of size 0 covers nothing. */
	cr_assert_null(ivm_uimage_symbol(im, &r, bias, 0x1030, &off));
	ivm_uimage_destroy(im);
}

Test(uimage, dt_hash_sizes_and_relocated_dynamic)
{
	check_synthetic(0);
	check_synthetic(0x7f1234560000ull);
}

/* ---- pages the guest does not hold ------------------------------------------- */

Test(uimage, missing_pages_fault_and_are_retried)
{
	struct file_bytes f;
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct ivm_uimage *im;
	struct ivm_uimage_stats stats;
	struct ivm_uelf_section sec;
	struct ivm_cfi_row scratch;
	const struct ivm_cfi_row *row = NULL;
	char mine[1024];
	uint64_t pc;

	load_file(LIBC, &f);
	cr_assert_null(ivm_uimage_create(&r, &im));
	cr_assert_null(ivm_uelf_find_section(&r, ivm_uimage_elf(im),
					     ".eh_frame", &sec));
	/* .eh_frame's middle page is not in memory. */
	f.hole_lo = (sec.offset + sec.size / 2) & ~4095ull;
	f.hole_hi = f.hole_lo + 4096;
	for (pc = 0x28000; pc < 0x180000; pc += 64) {
		row = ivm_uimage_row(im, &r, NULL, pc, &scratch);
		if (row->state == ROW_FAULT)
			break;
	}
	cr_assert_lt(pc, 0x180000, "no pc's FDE fell in the hole");
	cr_assert_str_eq(ivm_uimage_describe_row(im, &r, pc, mine,
						 sizeof(mine)), "fault");
	/* Not remembered: once the page is there, the row is found. */
	f.hole_lo = f.hole_hi = 0;
	row = ivm_uimage_row(im, &r, NULL, pc, &scratch);
	cr_assert_eq(row->state, ROW_OK);
	row = ivm_uimage_row(im, &r, NULL, pc, &scratch);
	cr_assert_eq(row->state, ROW_OK);
	ivm_uimage_stats(im, &stats);
	cr_assert_eq(stats.faults, 2);	/* the loop's and describe_row's */
	cr_assert_geq(stats.hits, 1);
	cr_assert_gt(stats.memory, sizeof(struct ivm_cfi_row) * 100);
	ivm_uimage_destroy(im);
	free(f.data);
}

/*
 * The row cache starts small and grows as distinct rows come (an object
 * with a few pcs on stacks holds a few rows' memory), and the rows it
 * moves as it grows are still the rows of their pcs.
 */
Test(uimage, row_cache_grows_with_the_rows_met)
{
	struct file_bytes f;
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct ivm_uimage *im;
	struct ivm_uimage_stats st;
	struct ivm_cfi_row scratch;
	const struct ivm_cfi_row *row;
	char cached[1024], fresh[1024];
	size_t small, i;
	uint64_t pc;

	load_file(LIBC, &f);
	cr_assert_null(ivm_uimage_create(&r, &im));
	ivm_uimage_stats(im, &st);
	small = st.memory;
	ivm_uimage_row(im, &r, NULL, 0x28000, &scratch);
	ivm_uimage_stats(im, &st);
	cr_assert_leq(st.memory - small, 16 * sizeof(struct ivm_cfi_row),
		      "one row: %zu bytes", st.memory - small);
	/* 200 distinct pcs, then each again: the cache grew to its most. */
	for (i = 0; i < 200; i++)
		ivm_uimage_row(im, &r, NULL, 0x28000 + 4099 * i, &scratch);
	ivm_uimage_stats(im, &st);
	cr_assert_geq(st.memory - small, 256 * sizeof(struct ivm_cfi_row));
	for (i = 0; i < 200; i++) {
		pc = 0x28000 + 4099 * i;
		row = ivm_uimage_row(im, &r, NULL, pc, &scratch);
		cr_assert_eq(row->pc, pc);
		ivm_cfi_row_format(row, cached, sizeof(cached));
		ivm_uimage_describe_row(im, &r, pc, fresh, sizeof(fresh));
		cr_assert_str_eq(cached, fresh, "pc %#llx",
				 (unsigned long long)pc);
	}
	ivm_uimage_stats(im, &st);
	/*
	 * Direct-mapped: 200 rows in 256 slots, over half come from the
	 * cache (111 here), the others met another row in their slot.
	 */
	cr_assert_geq(st.hits, 100, "%llu hits",
		      (unsigned long long)st.hits);
	ivm_uimage_destroy(im);
	free(f.data);
}

/* ---- .gnu_debugdata (MiniDebugInfo) ------------------------------------------ */

/*
 * The workload built dynamically, stripped, with a MiniDebugInfo section
 * made as the distributions that ship one make it (nm, objcopy, xz): its
 * .symtab holds the functions .dynsym lacks, worker_main among them.
 */
/* Removed by the fixture's fini, which runs after a failed assertion too. */
static char minidebug_dir[] = "/tmp/ivm-minidebug-XXXXXX";

static void minidebug_cleanup(void)
{
	char cmd[64];

	if (IVM_TMP_MADE(minidebug_dir)) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", minidebug_dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", minidebug_dir);
	}
}

Test(uimage, gnu_debugdata_names_local_functions, .timeout = 60,
     .fini = minidebug_cleanup)
{
	char *dir = minidebug_dir, cmd[4096], path[512];
	struct file_bytes f;
	struct ivm_kmem_reader r = { read_file_bytes, &f };
	struct ivm_uimage *im;
	uint64_t off, worker;
	const char *bin = "build/guest/lockstorm-dyn";
	FILE *p;

	if (access("/usr/bin/xz", X_OK) || access("/usr/bin/objcopy", X_OK))
		cr_skip_test("no xz or objcopy");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; b=%s/%s;"
		 " nm -D --format=posix --defined-only $b | awk '{print $1}' | sort > dyn;"
		 " nm --format=posix --defined-only $b | awk '$2 ~ /[TtWw]/ {print $1}' | sort > funcs;"
		 " comm -13 dyn funcs > keep;"
		 " objcopy --only-keep-debug $b debug;"
		 " objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep debug mini;"
		 " xz -f mini;"
		 " strip --strip-all -o stripped $b;"
		 " objcopy --add-section .gnu_debugdata=mini.xz stripped out",
		 dir, getcwd(path, sizeof(path)), bin);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd),
		 "nm %s | awk '$3 == \"worker_main\" { print $1 }'", bin);
	p = popen(cmd, "r");
	cr_assert_eq(fscanf(p, "%lx", &worker), 1);
	pclose(p);
	snprintf(path, sizeof(path), "%s/out", dir);
	load_file(path, &f);
	cr_assert_null(ivm_uimage_create(&r, &im));
	cr_assert_str_eq(ivm_uimage_symbol(im, &r, 0, worker + 4, &off),
			 "worker_main");
	cr_assert_eq(off, 4);
	/* .dynsym's names are still there. */
	{
		struct ivm_uelf_section dynsym;

		cr_assert_null(ivm_uelf_find_section(&r, ivm_uimage_elf(im),
						     ".dynsym", &dynsym));
	}
	ivm_uimage_destroy(im);
	free(f.data);
	/* The stripped file alone names no local function. */
	snprintf(path, sizeof(path), "%s/stripped", dir);
	load_file(path, &f);
	cr_assert_null(ivm_uimage_create(&r, &im));
	cr_assert_null(ivm_uimage_symbol(im, &r, 0, worker + 4, &off));
	ivm_uimage_destroy(im);
	free(f.data);
}
