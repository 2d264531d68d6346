// SPDX-License-Identifier: MIT
/*
 * The GNU build-id among ELF notes as a guest holds them: the real
 * vmlinux's .notes (Xen notes first), a module's single note, and notes
 * that lie.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel/kimage.h"

#define VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"

/* One note: name, then desc, each padded to 4 bytes. */
static size_t put_note(uint8_t *p, const char *name, uint32_t type,
		       const uint8_t *desc, uint32_t descsz)
{
	uint32_t namesz = (uint32_t)strlen(name) + 1;
	size_t at = 12;

	memcpy(p, &namesz, 4);
	memcpy(p + 4, &descsz, 4);
	memcpy(p + 8, &type, 4);
	memset(p + at, 0, (namesz + 3) & ~3u);
	memcpy(p + at, name, namesz);
	at += (namesz + 3) & ~3u;
	memset(p + at, 0, (descsz + 3) & ~3u);
	memcpy(p + at, desc, descsz);
	return at + ((descsz + 3) & ~3u);
}

Test(kimage, real_vmlinux_notes)
{
	uint8_t notes[IVM_KIMAGE_MAX_NOTES];
	char hex[IVM_BUILD_ID_HEX_LEN], want[64] = "";
	size_t n;
	FILE *p;

	if (access(VMLINUX, R_OK))
		cr_skip_test("%s not present (make image)", VMLINUX);
	p = popen("objcopy -O binary --only-section=.notes " VMLINUX
		  " /dev/stdout", "r");
	cr_assert(p);
	n = fread(notes, 1, sizeof(notes), p);
	cr_assert_eq(pclose(p), 0);
	cr_assert_gt(n, 100);
	p = popen("readelf -n " VMLINUX " | awk '/Build ID/ { print $3 }'", "r");
	cr_assert(p);
	cr_assert_eq(fscanf(p, "%63s", want), 1);
	pclose(p);
	ivm_notes_build_id(notes, n, hex);
	cr_assert_str_eq(hex, want);
	/* Cut inside the GNU note: nothing, not a part of it. */
	ivm_notes_build_id(notes, 0x90, hex);
	cr_assert_str_eq(hex, "");
}

Test(kimage, first_gnu_build_id_after_other_notes)
{
	uint8_t buf[256], id[20], prop[16] = { 2, 0, 0, 0xc0, 4 };
	char hex[IVM_BUILD_ID_HEX_LEN];
	size_t n = 0, i;

	for (i = 0; i < sizeof(id); i++)
		id[i] = (uint8_t)(0xa0 + i);
	n += put_note(buf + n, "Xen", 3, (const uint8_t *)"linux", 6);
	n += put_note(buf + n, "GNU", 5, prop, sizeof(prop));
	n += put_note(buf + n, "GNU", 3, id, sizeof(id));
	ivm_notes_build_id(buf, n, hex);
	cr_assert_str_eq(hex, "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
	/* A shorter id (md5, 16 bytes). */
	n = put_note(buf, "GNU", 3, id, 16);
	ivm_notes_build_id(buf, n, hex);
	cr_assert_str_eq(hex, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
}

Test(kimage, notes_that_lie)
{
	uint8_t buf[256], id[40] = { 1 };
	char hex[IVM_BUILD_ID_HEX_LEN];
	uint32_t huge = 0xfffffff0u;
	size_t n;

	/* Longer than any id we keep: none, not a truncated one. */
	n = put_note(buf, "GNU", 3, id, sizeof(id));
	ivm_notes_build_id(buf, n, hex);
	cr_assert_str_eq(hex, "");
	/* A size past the end stops the walk (no wrap-around). */
	n = put_note(buf, "Xen", 3, id, 4);
	memcpy(buf + 4, &huge, 4);
	n += put_note(buf + n, "GNU", 3, id, 20);
	ivm_notes_build_id(buf, n, hex);
	cr_assert_str_eq(hex, "");
	memcpy(buf, &huge, 4);
	ivm_notes_build_id(buf, n, hex);
	cr_assert_str_eq(hex, "");
	/* Not "GNU": not a build-id.  Empty input. */
	n = put_note(buf, "GNV", 3, id, 20);
	ivm_notes_build_id(buf, n, hex);
	cr_assert_str_eq(hex, "");
	ivm_notes_build_id(buf, 0, hex);
	cr_assert_str_eq(hex, "");
}
