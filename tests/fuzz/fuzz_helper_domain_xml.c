// SPDX-License-Identifier: MIT
/*
 * Fuzz target: domain XML (as libvirt would hand it over, or worse) through
 * the channel-path lookup of vmm/access/libvirt_domain.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access/libvirt_domain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_error *err;
	char *xml = malloc(size + 1), *path;

	if (!xml)
		return 0;
	memcpy(xml, data, size);
	xml[size] = '\0';
	err = ivm_libvirt_channel_path_from_xml(xml, "org.idlevm.helper.0",
						&path);
	if (!err) {
		if (!path[0])
			__builtin_trap();	/* never an empty path */
		free(path);
	}
	ivm_error_destroy(err);
	free(xml);
	return 0;
}
