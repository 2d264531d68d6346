// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/kimage.h"

#define NT_GNU_BUILD_ID	3

void ivm_notes_build_id(const uint8_t *notes, size_t len,
			char hex[IVM_BUILD_ID_HEX_LEN])
{
	size_t at = 0, i;

	hex[0] = '\0';
	/* limit iterations: every note takes at least its 12-byte header */
	while (len - at >= 12) {
		uint32_t namesz = ivm_le32(notes + at);
		uint32_t descsz = ivm_le32(notes + at + 4);
		uint32_t type = ivm_le32(notes + at + 8);
		/* Name and desc are each padded to 4 bytes. */
		uint64_t name_room = ((uint64_t)namesz + 3) & ~3ull;
		uint64_t desc_room = ((uint64_t)descsz + 3) & ~3ull;
		const uint8_t *name = notes + at + 12;

		if (name_room > len - at - 12 ||
		    desc_room > len - at - 12 - name_room)
			return;	/* malformed: trust nothing after it */
		if (type == NT_GNU_BUILD_ID && namesz == 4 &&
		    !memcmp(name, "GNU", 4)) {
			if (!descsz || descsz > (IVM_BUILD_ID_HEX_LEN - 1) / 2)
				return;
			for (i = 0; i < descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x",
					 name[name_room + i]);
			return;
		}
		at += 12 + name_room + desc_room;
	}
}

static void read_build_id(const struct ivm_kernel_layout *l,
			  struct ivm_kimage *k)
{
	uint8_t notes[IVM_KIMAGE_MAX_NOTES];
	uint64_t start, stop;
	struct ivm_error *err;

	err = ivm_kernel_symbol(l, "__start_notes", &start);
	if (!err)
		err = ivm_kernel_symbol(l, "__stop_notes", &stop);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	if (stop <= start || stop - start > sizeof(notes))
		return;
	err = ivm_kernel_read(l, start, notes, stop - start);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	ivm_notes_build_id(notes, stop - start, k->build_id);
}

void ivm_kimage_read(const struct ivm_kernel_layout *layout,
		     struct ivm_kimage *ret)
{
	struct ivm_error *err;
	uint64_t start, end;

	memset(ret, 0, sizeof(*ret));
	read_build_id(layout, ret);
	err = ivm_kernel_symbol(layout, "_stext", &start);
	if (!err)
		err = ivm_kernel_symbol(layout, "_etext", &end);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	if (start < end && ivm_kernel_is_kernel_address(layout, start)) {
		ret->text_start = start;
		ret->text_end = end;
	}
}
