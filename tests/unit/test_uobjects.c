// SPDX-License-Identifier: MIT
/*
 * The user objects of a run (profile/uobjects.h): numbered once by
 * build-id, announced once (again only when the path becomes known), each
 * process's mapping and each function name said once, the metadata read
 * back by the report's parsers, and an emit failure keeps what was not
 * written for the next take; the images held to a bound in bytes, least
 * recently used dropped first and made again, build-id checked, when next
 * needed.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/uobjects.h"

struct emitted {
	char lines[64][256];
	int nr, fail_at;
};

static struct ivm_error *emit(void *ctx, const char *key, const char *value)
{
	struct emitted *e = ctx;

	if (e->nr == e->fail_at)
		return ivm_error_create(IVM_ERROR_OS, "disk full");
	cr_assert_lt(e->nr, 64);
	snprintf(e->lines[e->nr++], 256, "%s: %s", key, value);
	return NULL;
}

Test(uobjects, numbered_announced_and_said_once)
{
	static const uint8_t a[20] = { 0x93, 0xac, 0x61 }, b[20] = { 1, 2 };
	struct emitted e = { .fail_at = -1 };
	struct ivm_uobjects *t;
	struct ivm_uobject *oa, *ob;
	uint8_t id[IVM_UELF_MAX_BUILD_ID];
	const char *path, *name;
	uint64_t vaddr, size;
	size_t len;
	uint32_t num;
	bool dyn;

	cr_assert_null(ivm_uobjects_create(&t));
	oa = ivm_uobjects_get(t, a, sizeof(a), true, NULL);
	ob = ivm_uobjects_get(t, b, sizeof(b), false, "/bin/x y");
	cr_assert_eq(oa->id, 1);
	cr_assert_eq(ob->id, 2);
	cr_assert_eq(ivm_uobjects_get(t, a, sizeof(a), true, NULL), oa);
	cr_assert_eq(ivm_uobjects_by_id(t, 2), ob);
	cr_assert_null(ivm_uobjects_by_id(t, 3));
	/* The path, once known, is announced again; later ones are not. */
	ivm_uobjects_get(t, a, sizeof(a), true, "/lib/libc.so.6");
	ivm_uobjects_set_path(t, oa, "/other");
	ivm_uobjects_note_map(t, 100, oa, 0x7f0000026000ull, 0x7f000017c000ull,
			      0x26000, 0x7f0000000000ull);
	ivm_uobjects_note_map(t, 100, oa, 0x7f0000026000ull, 0x7f000017c000ull,
			      0x26000, 0x7f0000000000ull);
	ivm_uobjects_note_map(t, 101, oa, 0x7f0000026000ull, 0x7f000017c000ull,
			      0x26000, 0x7f0000000000ull);
	ivm_uobjects_note_symbol(t, oa, 0xf82a0, 0x9d, "read");
	ivm_uobjects_note_symbol(t, oa, 0xf82a0, 0x9d, "read");
	ivm_uobjects_note_symbol(t, ob, 0xf82a0, 0x10, "bad\nname");
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 7, "%d items", e.nr);
	cr_assert(!strncmp(e.lines[0], "uobject: 1 93ac61", 17));
	cr_assert(strstr(e.lines[1], "uobject: 2 0102") &&
		  strstr(e.lines[1], " exec /bin/x y"));
	cr_assert(strstr(e.lines[2], " dyn /lib/libc.so.6"));
	cr_assert_str_eq(e.lines[3], "umap: 100 1 0x7f0000026000 0x7f000017c000 0x26000 0x7f0000000000");
	cr_assert(!strncmp(e.lines[4], "umap: 101 1 ", 12));
	cr_assert_str_eq(e.lines[5], "usym: 1 0xf82a0 0x9d read");
	/* Guest bytes in a name become one printable line. */
	cr_assert_str_eq(e.lines[6], "usym: 2 0xf82a0 0x10 bad?name");
	/* Read back as the report does. */
	cr_assert_null(ivm_uobject_parse(e.lines[2] + 9, &num, id, &len, &dyn,
					 &path));
	cr_assert_eq(num, 1);
	cr_assert_eq(len, 20);
	cr_assert_arr_eq(id, a, 20);
	cr_assert(dyn);
	cr_assert_str_eq(path, "/lib/libc.so.6");
	cr_assert_null(ivm_uobject_parse(e.lines[1] + 9, &num, id, &len, &dyn,
					 &path));
	cr_assert_str_eq(path, "/bin/x y");
	cr_assert_null(ivm_usym_parse(e.lines[5] + 6, &num, &vaddr, &size,
				      &name));
	cr_assert_eq(vaddr, 0xf82a0);
	cr_assert_eq(size, 0x9d);
	cr_assert_str_eq(name, "read");
	/* Nothing left; a failed write keeps the rest. */
	e.nr = 0;
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 0);
	ivm_uobjects_note_symbol(t, oa, 0x1000, 0x10, "f");
	ivm_uobjects_note_symbol(t, oa, 0x2000, 0x10, "g");
	e.fail_at = 1;
	{
		struct ivm_error *err = ivm_uobjects_take_meta(t, emit, &e);

		cr_assert_not_null(err);
		ivm_error_destroy(err);
	}
	e.fail_at = -1;
	e.nr = 0;
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 1);
	cr_assert_str_eq(e.lines[0], "usym: 1 0x2000 0x10 g");
	ivm_uobjects_destroy(t);
}

/* err is an error; it is freed. */
static void refused(struct ivm_error *err)
{
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}

Test(uobjects, parsers_refuse_malformed)
{
	uint8_t id[IVM_UELF_MAX_BUILD_ID];
	const char *path, *name;
	uint64_t vaddr, size;
	size_t len;
	uint32_t num;
	bool dyn;

	refused(ivm_uobject_parse("0 00 dyn -", &num, id, &len,
					     &dyn, &path));
	refused(ivm_uobject_parse("4097 00 dyn -", &num, id, &len,
					     &dyn, &path));
	refused(ivm_uobject_parse("1 0g dyn -", &num, id, &len,
					     &dyn, &path));
	refused(ivm_uobject_parse("1 00 elf -", &num, id, &len,
					     &dyn, &path));
	refused(ivm_usym_parse("1 0x10 0x0 f", &num, &vaddr, &size,
					  &name));
	refused(ivm_usym_parse("1 0xffffffffffffffff 0x10 f", &num,
					  &vaddr, &size, &name));
	refused(ivm_usym_parse("1 0x10 0x10", &num, &vaddr, &size,
					  &name));
}

/* A continuous run's next file announces every object again, same ids. */
Test(uobjects, forget_announces_again_for_a_new_file)
{
	static const uint8_t a[20] = { 0xaa }, b[20] = { 0xbb };
	struct emitted e = { .fail_at = -1 };
	struct ivm_uobjects *t;
	struct ivm_uobject *oa, *ob;

	cr_assert_null(ivm_uobjects_create(&t));
	oa = ivm_uobjects_get(t, a, sizeof(a), true, "/lib/a.so");
	ob = ivm_uobjects_get(t, b, sizeof(b), true, "/lib/b.so");
	ivm_uobjects_note_symbol(t, oa, 0x1000, 0x10, "f");
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 3);
	ivm_uobjects_forget(t);
	ivm_uobjects_note_symbol(t, oa, 0x1000, 0x10, "f");
	e.nr = 0;
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 3, "%d items", e.nr);
	cr_assert(!strncmp(e.lines[0], "uobject: 1 aa", 13));
	cr_assert(!strncmp(e.lines[1], "uobject: 2 bb", 13));
	cr_assert_str_eq(e.lines[2], "usym: 1 0x1000 0x10 f");
	cr_assert_eq(ivm_uobjects_get(t, b, sizeof(b), true, NULL), ob);
	ivm_uobjects_destroy(t);
}

/* A run that met no user object (kernel threads only) has none to take. */
Test(uobjects, nothing_to_take)
{
	struct emitted e = { .fail_at = -1 };
	struct ivm_uobjects *t;

	cr_assert_null(ivm_uobjects_create(&t));
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 0);
	ivm_uobjects_destroy(t);
}

/* ---- the images' bound ---------------------------------------------------- */

/* A host file as a guest's bytes, by offset. */
struct mapped_file {
	const uint8_t *data;
	size_t size;
};

static struct ivm_error *read_mapped(void *ctx, uint64_t off, void *buf,
				     size_t len)
{
	const struct mapped_file *f = ctx;

	if (off > f->size || len > f->size - off)
		return ivm_error_fault(off, "past the end");
	memcpy(buf, f->data + off, len);
	return NULL;
}

/* The host file path, mapped, numbered in t, its image made and named. */
static struct ivm_uobject *object_of(struct ivm_uobjects *t,
				     const char *path, struct mapped_file *f,
				     struct ivm_kmem_reader *r)
{
	const struct ivm_uelf *elf;
	struct ivm_uimage *im;
	struct ivm_uobject *o;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s", path);
	cr_assert_eq(fstat(fd, &st), 0);
	f->size = (size_t)st.st_size;
	f->data = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	cr_assert_neq(f->data, MAP_FAILED);
	close(fd);
	*r = (struct ivm_kmem_reader){ read_mapped, f };
	cr_assert_null(ivm_uimage_create(r, &im));
	elf = ivm_uimage_elf(im);
	cr_assert_gt(elf->build_id_len, 0, "%s has no build-id", path);
	o = ivm_uobjects_get(t, elf->build_id, elf->build_id_len, true, path);
	ivm_uimage_destroy(im);
	cr_assert_not_null(o);
	cr_assert_not_null(ivm_uobjects_image(t, o, r));
	cr_assert_not_null(ivm_uimage_syms(o->image, r, 0), "%s", path);
	return o;
}

Test(uobjects, images_bounded_in_bytes_least_recent_first)
{
	static const char *const paths[3] = {
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libm.so.6",
	};
	struct mapped_file f[3];
	struct ivm_kmem_reader r[3];
	struct ivm_uobjects_stats us;
	struct ivm_uobjects *t;
	struct ivm_uobject *o[3];
	struct emitted e = { .fail_at = -1 };
	size_t held;

	cr_assert_null(ivm_uobjects_create(&t));
	for (int i = 0; i < 3; i++)
		o[i] = object_of(t, paths[i], &f[i], &r[i]);
	/* libc used again: ld.so is now the least recently used. */
	ivm_uobjects_adopt(t, o[0], NULL);
	ivm_uobjects_stats(t, &us);
	held = us.image_memory;
	cr_assert_eq(us.with_image, 3);
	cr_assert_eq(ivm_uobjects_bound(t, held), 0, "within the bound");
	cr_assert_eq(ivm_uobjects_bound(t, held - 1), 1);
	cr_assert_null(o[1]->image, "ld.so, the least recently used, kept");
	cr_assert_not_null(o[0]->image);
	cr_assert_not_null(o[2]->image);
	ivm_uobjects_stats(t, &us);
	cr_assert_lt(us.image_memory, held);
	cr_assert_eq(us.images_dropped, 1);
	/* Past any bound, the last one used stays. */
	cr_assert_eq(ivm_uobjects_bound(t, 0), 1);
	cr_assert_null(o[2]->image);
	cr_assert_not_null(o[0]->image, "the last one used dropped");
	/* The objects stay, numbered and announced as before. */
	cr_assert_eq(ivm_uobjects_by_id(t, o[1]->id), o[1]);
	cr_assert_eq(ivm_uobjects_get(t, o[1]->build_id, o[1]->build_id_len,
				      true, NULL), o[1]);
	ivm_uobjects_forget(t);
	cr_assert_null(ivm_uobjects_take_meta(t, emit, &e));
	cr_assert_eq(e.nr, 3);
	/* Made again from the same file; never from another one. */
	cr_assert_null(ivm_uobjects_image(t, o[2], &r[1]));
	cr_assert_null(o[2]->image, "libm's object took ld.so's bytes");
	cr_assert_not_null(ivm_uobjects_image(t, o[1], &r[1]));
	cr_assert_not_null(ivm_uimage_syms(o[1]->image, &r[1], 0));
	ivm_uobjects_stats(t, &us);
	cr_assert_eq(us.with_image, 2);
	cr_assert_eq(us.images_dropped, 2);
	ivm_uobjects_destroy(t);
	for (int i = 0; i < 3; i++)
		munmap((void *)f[i].data, f[i].size);
}
