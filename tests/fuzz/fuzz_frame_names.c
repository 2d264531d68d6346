// SPDX-License-Identifier: MIT
/*
 * Fuzz what a report believes of a profile's metadata (report/frame_names.h):
 * "key: value" lines as a damaged or hostile profile may carry them
 * (uobject, usym, umap, ksym, module, module_sections...), loaded with no
 * debug files, then user frames of every object named as the writers ask
 * (exact and not).  Nothing may crash, read out of bounds or name a frame
 * with a string that is not NUL-terminated.
 *
 * Input: text, one "key: value" line each; the first 8 bytes (LE) pick
 * the link-time address asked of each object.
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "report/frame_names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_meta_lines meta = { 0 };
	struct ivm_frame_names_config cfg = { 0 };
	struct ivm_frame_names *fn;
	struct ivm_symbolizer sym;
	struct ivm_report_frame f[IVM_REPORT_MAX_INLINE];
	uint64_t vaddr;
	char *text, *line, *save = NULL;

	if (size < 8)
		return 0;
	vaddr = ivm_le64(data) & ((1ull << 40) - 1);
	text = malloc(size - 8 + 1);
	if (!text)
		return 0;
	memcpy(text, data + 8, size - 8);
	text[size - 8] = '\0';
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *colon = strstr(line, ": ");

		if (!colon)
			continue;
		*colon = '\0';
		ivm_meta_lines_add(&meta, line, colon + 2);
	}
	fn = ivm_frame_names_create();
	if (fn) {
		ivm_frame_names_load(fn, &cfg, &meta);
		sym = ivm_frame_names_symbolizer(fn);
		for (uint32_t id = 0; id < 8; id++)
			for (int exact = 0; exact < 2; exact++) {
				unsigned int got = sym.frames(sym.ctx,
					IVM_NODE_USER, IVM_UPC(id, vaddr),
					exact, f, IVM_REPORT_MAX_INLINE);

				for (unsigned int i = 0; i < got; i++)
					if (f[i].function)
						(void)strlen(f[i].function);
			}
		(void)sym.frames(sym.ctx, IVM_NODE_KERNEL,
				 0xffffffff81000000ull + vaddr, false, f,
				 IVM_REPORT_MAX_INLINE);
		ivm_frame_names_destroy(fn);
	}
	ivm_meta_lines_free(&meta);
	free(text);
	return 0;
}
