// SPDX-License-Identifier: MIT
/*
 * symbols/ over hostile files: the input is read as a System.map, as an
 * ELF file and as a kernel module (through a memfd, as the library opens
 * paths), and a few addresses are looked up, so the section checks, the symbol table, the
 * build-id and banner readers and the DWARF index all see it.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symfile.h"

static void lookups(struct ivm_symfile *f)
{
	static const uint64_t addrs[] = {
		0, 0x1000, 0x401000, 0x401100, 0xffffffff81000000ull,
		0xffffffff81000123ull, UINT64_MAX,
	};
	uint64_t lo, hi;
	size_t i;

	ivm_symfile_text_range(f, &lo, &hi);
	for (i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++)
		ivm_symfile_lookup(f, addrs[i]);
	for (i = 0; i < 64 && lo + i * 7 < hi; i++)
		ivm_symfile_lookup(f, lo + i * 7);
}

static const struct ivm_sym_section_addr module_sections[] = {
	{ ".text", 0xffffffffc0246000ull },
	{ ".text.unlikely", 0xffffffffc0249892ull },
	{ ".init.text", 0xffffffffc0251000ull },
	{ ".rodata", 0xffffffffc024a6c0ull },
	{ ".data", 0xffffffffc024e060ull },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	char path[64];
	int fd;

	err = ivm_symfile_system_map_from_memory("fuzz", (const char *)data,
						 size, &f);
	if (!err) {
		lookups(f);
		ivm_symfile_destroy(f);
	}
	ivm_sym_error_destroy(err);

	fd = memfd_create("ivm-fuzz-elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		err = ivm_symfile_open_elf(path, &f);
		if (!err) {
			ivm_symfile_build_id_hex(f);
			ivm_symfile_kernel_release(f);
			lookups(f);
			ivm_symfile_destroy(f);
		}
		ivm_sym_error_destroy(err);
		/* And as a kernel module placed at guest addresses. */
		err = ivm_symfile_open_module(path, "fuzz", module_sections,
			sizeof(module_sections) / sizeof(module_sections[0]),
			&f);
		if (!err) {
			lookups(f);
			ivm_symfile_lookup(f, 0xffffffffc0246000ull);
			ivm_symfile_lookup(f, 0xffffffffc0249900ull);
			ivm_symfile_destroy(f);
		}
		ivm_sym_error_destroy(err);
	}
	close(fd);
	return 0;
}
