// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <stdlib.h>

#include "kernel/guest.h"

/*
 * QEMU's address of a guest physical range: inside one RAM region only
 * (the idle gate's program reads it as one piece of QEMU's memory).
 */
Test(guest, qemu_address_of_guest_ram)
{
	static const struct {
		uint64_t gpa, len;
		int code;	/* 0: found */
		uint64_t hva;
	} cases[] = {
		{ 0x0, 8, 0, 0x7f0000000000ull },
		{ 0x9fff8, 8, 0, 0x7f000009fff8ull },	/* last word */
		{ 0x9fffc, 8, IVM_ERROR_NOT_FOUND, 0 },	/* past the end */
		{ 0xa0000, 8, IVM_ERROR_NOT_FOUND, 0 },	/* the hole */
		{ 0x100000, 0x1000, 0, 0x7f1000000000ull },
		{ 0x100000, 0x40000000, IVM_ERROR_NOT_FOUND, 0 },	/* too long */
		{ UINT64_MAX - 3, 8, IVM_ERROR_NOT_FOUND, 0 },
	};
	struct ivm_guest g = { .name = "test" };
	struct ivm_error *err;
	uint64_t hva;
	size_t i;

	g.ram = calloc(1, sizeof(*g.ram) + 2 * sizeof(g.ram->region[0]));
	cr_assert_not_null(g.ram);
	g.ram->nr = 2;
	g.ram->region[0] = (struct ivm_gmem_region){ 0, 0xa0000,
						      0x7f0000000000ull };
	g.ram->region[1] = (struct ivm_gmem_region){ 0x100000, 0x3ff00000,
						      0x7f1000000000ull };
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hva = 0;
		err = ivm_guest_qemu_address(&g, cases[i].gpa, cases[i].len,
					     &hva);
		cr_expect_eq(err ? (int)err->code : 0, cases[i].code,
			     "case %zu: %s", i, err ? ivm_error_string(err) : "found");
		if (!err)
			cr_expect_eq(hva, cases[i].hva, "case %zu", i);
		ivm_error_destroy(err);
	}
	free(g.ram);
	g.ram = NULL;
	err = ivm_guest_qemu_address(&g, 0, 8, &hva);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	ivm_error_destroy(err);
}
