// SPDX-License-Identifier: MIT
/*
 * gmem backend: guest RAM mapped into our own address space.
 *
 * When QEMU's guest RAM is a shared file mapping (memory-backend-memfd or
 * -file with share=on; libvirt <memoryBacking><source type='memfd'/>
 * <access mode='shared'/>), root can open the very file behind QEMU's
 * mapping through /proc/PID/map_files/START-END and map it read-only too.
 * Reads are then plain memory copies instead of one process_vm_readv each,
 * which is what page walks (four dependent reads) and stack unwinding
 * (many small reads) are made of.  Guest writes show through at once: the
 * pages are the same.
 *
 * Private (anonymous) RAM, the default, has no file to open: creation fails
 * with IVM_ERROR_NOT_FOUND and the caller uses the process backend.
 *
 * The mapping keeps the memfd alive after QEMU exits, so reads never fault
 * then: callers detect a departed guest through its monitor or threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gmem/gmem_internal.h"
#include "base/proc_maps.h"

struct mapping {
	void *addr;
	size_t len;
};

struct mmap_gmem {
	struct ivm_gmem *inner;		/* buffer backend over the mappings */
	struct mapping *maps;
	size_t nr_maps;
};

static struct ivm_error *mmap_read_phys(struct ivm_gmem *gmem, uint64_t gpa,
					void *buf, size_t len)
{
	struct mmap_gmem *mg = ivm_gmem_priv(gmem);

	return ivm_gmem_read_phys(mg->inner, gpa, buf, len);
}

static void mmap_destroy(struct ivm_gmem *gmem)
{
	struct mmap_gmem *mg = ivm_gmem_priv(gmem);
	size_t i;

	if (!mg)
		return;
	ivm_gmem_destroy(mg->inner);
	for (i = 0; i < mg->nr_maps; i++)
		munmap(mg->maps[i].addr, mg->maps[i].len);
	free(mg->maps);
	free(mg);
}

static const struct ivm_gmem_ops mmap_ops = {
	.read_phys = mmap_read_phys,
	.destroy = mmap_destroy,
};

struct mapping_search {
	uint64_t hva, size;
	struct ivm_error *err;
	bool found;
	uint64_t start, end, offset;
};

static bool holds_hva(const struct ivm_proc_map *m, void *arg)
{
	struct mapping_search *ms = arg;
	uint64_t hva = ms->hva, size = ms->size;

	if (hva < m->lo || hva >= m->hi)
		return true;
	ms->found = true;
	if (hva + size > m->hi || hva + size < hva)
		ms->err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					   "guest RAM at 0x%" PRIx64 " spans several mappings",
					   hva);
	else if (m->perms[3] != 's' || m->name[0] != '/')
		ms->err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					   "guest RAM at 0x%" PRIx64 " is private memory (%s)",
					   hva, m->name[0] ? m->name : "anonymous");
	ms->start = m->lo;
	ms->end = m->hi;
	ms->offset = m->offset;
	return false;
}

/*
 * Find the mapping of pid that holds [hva, hva + size): its start, end,
 * file offset and whether it is a shared file mapping.
 */
static struct ivm_error *find_mapping(pid_t pid, uint64_t hva, uint64_t size,
				      uint64_t *start, uint64_t *end,
				      uint64_t *offset)
{
	struct mapping_search ms = { .hva = hva, .size = size };
	struct ivm_error *err;

	err = ivm_proc_maps_each(pid, holds_hva, &ms);
	if (err)
		return err;
	if (!ms.found)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no mapping of qemu holds guest RAM at 0x%" PRIx64,
					hva);
	*start = ms.start;
	*end = ms.end;
	*offset = ms.offset;
	return ms.err;
}

struct ivm_error *ivm_gmem_mmap_create(pid_t pid,
				       const struct ivm_gmem_region *regions,
				       size_t nr_regions, struct ivm_gmem **ret)
{
	struct ivm_gmem_region *local = NULL;
	struct mmap_gmem *mg;
	struct ivm_error *err = NULL;
	size_t i;

	if (!nr_regions)
		return ivm_error_create(IVM_ERROR_INVALID, "no guest RAM regions");
	mg = calloc(1, sizeof(*mg));
	local = calloc(nr_regions, sizeof(*local));
	if (mg)
		mg->maps = calloc(nr_regions, sizeof(*mg->maps));
	if (!mg || !local || !mg->maps) {
		err = &ivm_enomem;
		goto fail;
	}
	for (i = 0; i < nr_regions; i++) {
		uint64_t start = 0, end = 0, off = 0, delta;
		char path[96];
		void *addr;
		int fd;

		err = find_mapping(pid, regions[i].hva, regions[i].size, &start,
				   &end, &off);
		if (err)
			goto fail;
		delta = regions[i].hva - start;
		if ((delta & 4095) || off + delta < off) {
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "guest RAM at 0x%" PRIx64 " is not page aligned",
					       regions[i].hva);
			goto fail;
		}
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
			 (int)pid, start, end);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			err = ivm_error_os(errno, "opening %s", path);
			goto fail;
		}
		addr = mmap(NULL, regions[i].size, PROT_READ, MAP_SHARED, fd,
			    (off_t)(off + delta));
		close(fd);
		if (addr == MAP_FAILED) {
			err = ivm_error_os(errno, "mapping guest RAM at 0x%" PRIx64,
					   regions[i].gpa);
			goto fail;
		}
		mg->maps[mg->nr_maps].addr = addr;
		mg->maps[mg->nr_maps++].len = regions[i].size;
		local[i].gpa = regions[i].gpa;
		local[i].size = regions[i].size;
		local[i].hva = (uint64_t)(uintptr_t)addr;
	}
	err = ivm_gmem_buffer_create(local, nr_regions, &mg->inner);
	free(local);
	local = NULL;
	if (!err)
		err = ivm_gmem_create(&mmap_ops, mg, ret);
	if (!err)
		return NULL;
	ivm_gmem_destroy(mg->inner);
fail:
	free(local);
	if (mg) {
		for (i = 0; i < mg->nr_maps; i++)
			munmap(mg->maps[i].addr, mg->maps[i].len);
		free(mg->maps);
		free(mg);
	}
	return err;
}
