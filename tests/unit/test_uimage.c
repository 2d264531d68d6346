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

#include "unwind/ucfi.h"
#include "unwind/uelf.h"
#include "unwind/uimage.h"
#include "unwind/uunwind_dwarf.h"

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
