// SPDX-License-Identifier: MIT
/* A host process's mappings; see proc_maps.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/proc_maps.h"

/* "7f12a000-7f12b000 rw-p 00001000 fe:01 1234   /usr/lib/x.so\n" */
static bool parse_line(const char *line, struct ivm_proc_map *m)
{
	unsigned long long lo, hi, offset, inode;
	const char *name;
	size_t len;
	int used = 0;

	if (sscanf(line, "%llx-%llx %4s %llx %*x:%*x %llu%n", &lo, &hi,
		   m->perms, &offset, &inode, &used) != 5 || !used || lo >= hi)
		return false;
	m->lo = lo;
	m->hi = hi;
	m->offset = offset;
	m->inode = inode;
	name = line + used;
	name += strspn(name, " \t");
	len = strcspn(name, "\n");
	if (len >= sizeof(m->name))
		len = sizeof(m->name) - 1;
	memcpy(m->name, name, len);
	m->name[len] = '\0';
	return true;
}

struct ivm_error *ivm_proc_maps_each(pid_t pid,
				     bool (*fn)(const struct ivm_proc_map *map,
						void *arg),
				     void *arg)
{
	struct ivm_proc_map m;
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return ivm_error_os(errno, "opening %s", path);
	while (getline(&line, &cap, f) > 0) {
		if (parse_line(line, &m) && !fn(&m, arg))
			break;
	}
	free(line);
	fclose(f);
	return NULL;
}
