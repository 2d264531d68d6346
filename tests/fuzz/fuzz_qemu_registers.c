// SPDX-License-Identifier: MIT
/*
 * Fuzz the parsers of QEMU's monitor text: the first byte picks the parser
 * (`info registers [-a]`, `info mtree -f`, `gpa2hva`, query-cpus-fast's
 * JSON), the rest is the text.  Seeds are real QEMU 7.2 outputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access/qemu_discovery.h"
#include "access/qemu_registers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_qemu_registers *regs;
	struct ivm_qemu_ram_map *map;
	struct ivm_qemu_vcpus *vcpus;
	struct json_object *json;
	struct ivm_error *err;
	const char *text;
	uint64_t hva;
	char *copy;
	size_t i;

	if (!size)
		return 0;
	text = (const char *)data + 1;
	size--;
	switch (data[0] % 4) {
	case 0:
		err = ivm_qemu_parse_registers(text, size, &regs);
		if (!err) {
			/* Every vCPU has an instruction pointer, bounded CPL. */
			for (i = 0; i < regs->nr; i++) {
				if (regs->cpu[i].cpl < -1 || regs->cpu[i].cpl > 3)
					abort();
			}
			free(regs);
		}
		break;
	case 1:
		err = ivm_qemu_parse_mtree_ram(text, size, &map);
		if (!err) {
			for (i = 0; i < map->nr; i++) {
				if (!map->piece[i].size ||
				    (i && map->piece[i].gpa <
					  map->piece[i - 1].gpa +
						  map->piece[i - 1].size))
					abort();
			}
			free(map);
		}
		break;
	case 2:
		copy = malloc(size + 1);
		if (!copy)
			return 0;
		memcpy(copy, text, size);
		copy[size] = '\0';
		err = ivm_qemu_parse_gpa2hva(copy, 0x100000, "pc.ram", &hva);
		free(copy);
		break;
	default:
		copy = malloc(size + 1);
		if (!copy)
			return 0;
		memcpy(copy, text, size);
		copy[size] = '\0';
		json = json_tokener_parse(copy);
		free(copy);
		err = ivm_qemu_parse_vcpus(json, &vcpus);
		if (!err)
			free(vcpus);
		json_object_put(json);
		break;
	}
	ivm_error_destroy(err);
	return 0;
}
