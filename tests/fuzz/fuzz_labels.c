// SPDX-License-Identifier: MIT
/*
 * The label readers on hostile guest bytes (profile/labels.h,
 * unwind/uelf.h).  The first byte picks what the rest is:
 *  0  an ELF file (a guest's executable or libc, read by file offset):
 *     its headers, the symbols labels look for (.symtab, .dynsym through
 *     the sections or through PT_DYNAMIC, whose pointers may be relocated
 *     by a bias taken from the input's last 8 bytes), PT_TLS arithmetic
 *     on what is found, and the bytes at every symbol found;
 *  1  a thread's memory at FUZZ_TP - 4096: its struct pthread (glibc's
 *     built-in layout, or one from the libthread_db descriptors in the
 *     first 76 bytes when byte 1 is odd), a key in bytes 2..5, and the
 *     key's value formatted as each type;
 *  2  a --label argument.
 * Whatever is accepted must be consistent: an address inside the TLS
 * block, a symbol inside the table's bounds, text within its caps.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "fuzz_image.h"
#include "profile/labels.h"
#include "unwind/uelf.h"

#define FUZZ_TP 0x7f0000100000ull

static void elf_file(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"labelset_worker", "labelset_code", "__pthread_keys",
		"_thread_db_pthread_specific", "ls_request_class_name", "main",
	};
	struct ivm_uelf_symbol sym[6];
	struct ivm_uelf h;
	struct fuzz_image file;
	struct ivm_error *err;
	bool found[6], incomplete;
	uint64_t bias = size >= 8 ? ivm_le64(data + size - 8) & ~4095ull : 0;
	size_t i;

	if (!fuzz_image_init(&file, 0, data, size))
		return;
	err = ivm_uelf_parse(&file.reader, &h);
	if (!err) {
		/* No PT_LOAD is accepted (uelf.h): a symbol then reads nothing. */
		if (h.nr_loads > IVM_UELF_MAX_LOADS || !h.tls_align ||
		    (h.tls_align & (h.tls_align - 1)))
			abort();
		err = ivm_uelf_find_symbols(&file.reader, &h, bias, names, 6,
					    sym, found, &incomplete);
	}
	for (i = 0; !err && i < 6; i++) {
		uint8_t b[8];
		uint64_t addr;
		struct ivm_error *e;

		if (!found[i])
			continue;
		if (sym[i].table != IVM_UELF_SYMTAB &&
		    sym[i].table != IVM_UELF_DYNSYM)
			abort();
		e = ivm_uelf_read(&file.reader, &h, sym[i].value, b, 8);
		ivm_error_destroy(e);
		if (h.tls_memsz) {
			e = ivm_tls_static_address(FUZZ_TP, h.tls_vaddr,
						   h.tls_memsz, h.tls_align,
						   sym[i].value, &addr);
			if (!e && (addr >= FUZZ_TP ||
				   FUZZ_TP - addr > h.tls_memsz + h.tls_align))
				abort();
			ivm_error_destroy(e);
		}
	}
	ivm_error_destroy(err);
	fuzz_image_fini(&file);
}

static void thread_memory(const uint8_t *data, size_t size)
{
	struct ivm_pthread_layout l = ivm_pthread_layout_glibc;
	struct ivm_pthread_db db;
	struct fuzz_image mem;
	struct ivm_error *err;
	char text[IVM_LABEL_STR_MAX + 32];
	uint64_t v;
	uint32_t key;
	int t;

	if (size < 6 + sizeof(db))
		return;
	key = ivm_le32(data + 2);
	if (data[1] & 1) {
		memcpy(&db, data + 6, sizeof(db));
		err = ivm_pthread_layout_from_db(&db, FUZZ_TP + 512, &l);
		if (err) {
			ivm_error_destroy(err);
			return;
		}
	} else {
		l.keys = FUZZ_TP + 512;
	}
	if (!fuzz_image_init(&mem, FUZZ_TP - 4096, data + 6 + sizeof(db),
			     size - 6 - sizeof(db)))
		return;
	err = ivm_pthread_getspecific(&mem.reader, &l, FUZZ_TP, key, &v);
	for (t = 0; !err && t < 3; t++) {
		struct ivm_error *e = ivm_label_format(&mem.reader,
						       (enum ivm_label_type)t,
						       v, text, sizeof(text));

		if (!e && strlen(text) > IVM_LABEL_STR_MAX + 24)
			abort();
		ivm_error_destroy(e);
	}
	ivm_error_destroy(err);
	fuzz_image_fini(&mem);
}

static void label_arg(const uint8_t *data, size_t size)
{
	struct ivm_label_spec s;
	struct ivm_error *err;
	char *arg = malloc(size + 1), buf[1024];

	if (!arg)
		return;
	memcpy(arg, data, size);
	arg[size] = '\0';
	err = ivm_label_spec_parse(arg, &s);
	if (!err) {
		struct ivm_label_spec back;

		/* What is accepted prints back as itself. */
		ivm_label_spec_format(&s, buf, sizeof(buf));
		err = ivm_label_spec_parse(buf, &back);
		if (err || strcmp(back.key, s.key) ||
		    strcmp(back.symbol, s.symbol) || back.type != s.type ||
		    back.source != s.source)
			abort();
	}
	ivm_error_destroy(err);
	free(arg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		elf_file(data + 1, size - 1);
		break;
	case 1:
		thread_memory(data, size);
		break;
	default:
		label_arg(data + 1, size - 1);
		break;
	}
	return 0;
}
