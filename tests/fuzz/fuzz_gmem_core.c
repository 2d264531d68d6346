// SPDX-License-Identifier: MIT
/*
 * The ELF core backend over arbitrary bytes: open, walk the notes, decode
 * every vCPU's registers, and read at a few addresses.  The probe address
 * comes from the ELF header's e_entry, which the backend does not use, so
 * the fuzzer can steer reads into the segments it builds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmem/gmem.h"

static struct ivm_error *touch_note(const struct ivm_elf_note *note, void *arg)
{
	size_t *sum = arg;
	const uint8_t *d = note->desc;

	if (note->namesz)
		*sum += (uint8_t)note->name[note->namesz - 1];
	if (note->descsz)
		*sum += d[0] + d[note->descsz - 1];
	return NULL;
}

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_gmem *gmem;
	struct ivm_error *err;
	uint8_t *copy, buf[9000];
	uint64_t probe = 0;
	size_t i, sum = 0;
	const char *vmci;

	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	err = ivm_gmem_core_create_from_memory(copy, size, &gmem);
	if (err) {
		ivm_error_destroy(err);
		free(copy);
		return 0;
	}
	if (size >= 32)
		memcpy(&probe, copy + 24, 8);
	ivm_error_destroy(ivm_gmem_core_for_each_note(gmem, touch_note, &sum));
	for (i = 0; i < ivm_gmem_core_nr_cpus(gmem); i++) {
		struct ivm_x86_regs regs;

		ivm_error_destroy(ivm_gmem_core_cpu_state(gmem, i, &regs));
	}
	vmci = ivm_gmem_core_vmcoreinfo(gmem);
	if (vmci)
		sum += strlen(vmci);
	ivm_error_destroy(ivm_gmem_read_phys(gmem, probe, buf, sizeof(buf)));
	ivm_error_destroy(ivm_gmem_read_phys(gmem, 0, buf, 64));
	ivm_error_destroy(ivm_gmem_core_read_vaddr(gmem, probe, buf,
						   sizeof(buf)));
	err = ivm_gmem_read_phys(gmem, probe, buf, 8);
	if (err && err->code != IVM_ERROR_FAULT)
		abort();
	ivm_error_destroy(err);
	ivm_gmem_destroy(gmem);
	free(copy);
	/* Keep sum alive so the note walk is not optimized out. */
	sink = sum;
	return 0;
}
