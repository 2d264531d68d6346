// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "report/mappings.h"
#include "report/report.h"

struct ivm_mappings {
	struct ivm_mapping *maps;
	size_t nr, cap;
};

struct ivm_mappings *ivm_mappings_create(void)
{
	return calloc(1, sizeof(struct ivm_mappings));
}

void ivm_mappings_destroy(struct ivm_mappings *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->nr; i++) {
		free((char *)m->maps[i].file);
		free((char *)m->maps[i].build_id);
	}
	free(m->maps);
	free(m);
}

struct ivm_error *ivm_mappings_add(struct ivm_mappings *m,
				   const struct ivm_mapping *desc)
{
	struct ivm_mapping *map;

	if (desc->lo >= desc->hi)
		return ivm_error_create(IVM_ERROR_INVALID,
					"mapping of %s: empty range",
					desc->file ? desc->file : "?");
	if (m->nr == IVM_MAPPINGS_MAX)
		return ivm_error_create(IVM_ERROR_INVALID,
					"more than %d mappings",
					IVM_MAPPINGS_MAX);
	if (m->nr == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 16;
		struct ivm_mapping *n = realloc(m->maps, ncap * sizeof(*n));

		if (!n)
			return &ivm_enomem;
		m->maps = n;
		m->cap = ncap;
	}
	map = &m->maps[m->nr];
	*map = *desc;
	map->id = (uint32_t)m->nr + 1;
	map->file = strdup(desc->file ? desc->file : "");
	map->build_id = strdup(desc->build_id ? desc->build_id : "");
	if (!map->file || !map->build_id) {
		free((char *)map->file);
		free((char *)map->build_id);
		return &ivm_enomem;
	}
	m->nr++;
	return NULL;
}

const struct ivm_mapping *ivm_mappings_find(const struct ivm_mappings *m,
					    enum ivm_node_type type,
					    uint64_t pc)
{
	const struct ivm_mapping *kernel = NULL;
	uint64_t addr = pc;
	uint32_t tag = 0;
	size_t i;

	if (!m)
		return NULL;
	if (type == IVM_NODE_USER) {
		tag = (uint32_t)IVM_REPORT_USER_TAG(pc);
		addr = IVM_REPORT_USER_PC(pc);
	}
	for (i = 0; i < m->nr; i++) {
		const struct ivm_mapping *map = &m->maps[i];

		if (addr < map->lo || addr >= map->hi)
			continue;
		switch (map->kind) {
		case IVM_MAPPING_USER:
			if (type == IVM_NODE_USER && map->tag == tag)
				return map;
			break;
		case IVM_MAPPING_MODULE:
			if (type == IVM_NODE_KERNEL)
				return map;
			break;
		case IVM_MAPPING_KERNEL:
			/* After the modules: one may sit inside its range. */
			if (type == IVM_NODE_KERNEL && !kernel)
				kernel = map;
			break;
		}
	}
	return kernel;
}

size_t ivm_mappings_count(const struct ivm_mappings *m)
{
	return m ? m->nr : 0;
}

const struct ivm_mapping *ivm_mappings_at(const struct ivm_mappings *m,
					  size_t i)
{
	return m && i < m->nr ? &m->maps[i] : NULL;
}
