// SPDX-License-Identifier: MIT
/*
 * Fuzz target: System.map / kallsyms text from anywhere, through the
 * parser and both lookups.
 */
#include <stddef.h>
#include <stdint.h>

#include "kernel/ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_ksyms *ksyms;
	struct ivm_error *err;
	const struct ivm_ksym *sym;
	uint64_t addr, off;

	err = ivm_ksyms_parse_system_map((const char *)data, size, &ksyms);
	if (err) {
		ivm_error_destroy(err);
		return 0;
	}
	ivm_error_destroy(ivm_ksyms_lookup(ksyms, "init_task", &addr));
	sym = ivm_ksyms_find(ksyms, "linux_banner");
	if (sym)
		ivm_ksyms_symbolize(ksyms, sym->addr + 1, &off);
	ivm_ksyms_symbolize(ksyms, 0, &off);
	ivm_ksyms_symbolize(ksyms, UINT64_MAX, NULL);
	ivm_ksyms_destroy(ksyms);
	return 0;
}
