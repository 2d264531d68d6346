// SPDX-License-Identifier: MIT
/*
 * Fuzz target: a BTF blob as read from guest memory, through the loader
 * (size cap, libbpf validation) and every lookup idlevm makes on it.
 */
#include <stdarg.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <bpf/libbpf.h>

#include "kernel/btf.h"

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[][2] = {
		{ "task_struct", "thread.sp" },
		{ "task_struct", "thread_info.cpu" },
		{ "task_struct", "comm" },
		{ "outer", "in.b" },
		{ "outer", "z" },
		{ "s", "m" },
		{ "loop", "missing" },
	};
	struct ivm_kernel_offsets offsets;
	struct ivm_btf_member member;
	struct ivm_btf *btf;
	struct ivm_error *err;
	uint64_t type_size;
	int64_t value;
	size_t i;

	libbpf_set_print(quiet);
	err = ivm_btf_load_blob(data, size, &btf);
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	ivm_error_destroy(ivm_kernel_offsets_from_btf(btf, &offsets));
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		ivm_error_destroy(ivm_btf_member_find(btf, paths[i][0],
						      paths[i][1], &member));
	ivm_error_destroy(ivm_btf_type_size(btf, "outer", &type_size));
	ivm_error_destroy(ivm_btf_enum_value(btf, NULL, "GREEN", &value));
	ivm_btf_destroy(btf);
	return 0;
}
