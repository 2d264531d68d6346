// SPDX-License-Identifier: MIT
/*
 * MAPS: a process's mappings with the build-ids of the files behind them, so
 * the host can symbolize user-space frames against binaries it holds.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"

#define MAX_PHNUM 512
#define MAX_NOTE_SEGMENT (64 * 1024)

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/* Find NT_GNU_BUILD_ID in one note segment. */
static int find_build_id(const uint8_t *p, size_t len, uint8_t *id,
			 unsigned int max)
{
	size_t pos = 0;

	while (len - pos >= 12) {
		uint32_t namesz, descsz, type;
		size_t name_off, desc_off, next;

		memcpy(&namesz, p + pos, 4);
		memcpy(&descsz, p + pos + 4, 4);
		memcpy(&type, p + pos + 8, 4);
		name_off = pos + 12;
		/* Sizes are 32-bit and pos is below 64 KiB: no overflow in
		 * size_t, but the results must stay inside the segment. */
		desc_off = name_off + (((size_t)namesz + 3) & ~(size_t)3);
		next = desc_off + (((size_t)descsz + 3) & ~(size_t)3);
		if (desc_off > len || next > len || descsz > len)
			return 0;
		if (type == NT_GNU_BUILD_ID && namesz == 4 &&
		    !memcmp(p + name_off, "GNU", 4) && descsz > 0) {
			unsigned int n = descsz < max ? descsz : max;

			memcpy(id, p + desc_off, n);
			return (int)n;
		}
		pos = next;
	}
	return 0;
}

int helper_read_build_id(int fd, uint8_t *id, unsigned int max)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	unsigned int i;
	uint8_t *notes;
	int r;

	if (read_full(fd, &eh, sizeof(eh), 0) < 0 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > MAX_PHNUM)
		return 0;
	for (i = 0; i < eh.e_phnum; i++) {
		if (read_full(fd, &ph, sizeof(ph),
			      eh.e_phoff + (off_t)i * sizeof(ph)) < 0)
			return 0;
		if (ph.p_type != PT_NOTE || !ph.p_filesz ||
		    ph.p_filesz > MAX_NOTE_SEGMENT)
			continue;
		notes = malloc(ph.p_filesz);
		if (!notes)
			return -ENOMEM;
		r = read_full(fd, notes, ph.p_filesz, ph.p_offset);
		if (!r)
			r = find_build_id(notes, ph.p_filesz, id, max);
		free(notes);
		if (r > 0)
			return r;
	}
	return 0;
}

struct build_id_cache {
	bool valid;
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	uint8_t len;
	uint8_t id[IVM_PROTO_MAX_BUILD_ID];
};

/*
 * A file is usually mapped several times in a row (text, rodata, data):
 * remember the last one read.  map_files/ opens the very object mapped, even
 * if its path was deleted or replaced since.
 */
static void entry_build_id(pid_t pid, const char *range, const char *path,
			   struct idlevm_map_entry *e,
			   struct build_id_cache *cache)
{
	char mf[96];
	int fd, r;

	e->build_id_len = 0;
	if (!e->inode)
		return;
	if (cache->valid && cache->inode == e->inode &&
	    cache->dev_major == e->dev_major &&
	    cache->dev_minor == e->dev_minor) {
		e->build_id_len = cache->len;
		memcpy(e->build_id, cache->id, cache->len);
		return;
	}
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%s", (int)pid, range);
	fd = open(mf, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && path[0] == '/')
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	r = helper_read_build_id(fd, e->build_id, IVM_PROTO_MAX_BUILD_ID);
	close(fd);
	e->build_id_len = r > 0 ? (uint8_t)r : 0;
	cache->valid = true;
	cache->dev_major = e->dev_major;
	cache->dev_minor = e->dev_minor;
	cache->inode = e->inode;
	cache->len = e->build_id_len;
	memcpy(cache->id, e->build_id, e->build_id_len);
}

/* "7f12a000-7f12b000 r-xp 00001000 fe:01 1234   /usr/lib/x.so" */
static bool parse_maps_line(char *line, struct idlevm_map_entry *e,
			    char *range, size_t range_len)
{
	unsigned long long start, end, offset, inode;
	unsigned int major, minor;
	char perms[5];
	int used = 0, rlen = 0;
	char *path;

	if (sscanf(line, "%llx-%llx%n %4s %llx %x:%x %llu%n", &start, &end,
		   &rlen, perms, &offset, &major, &minor, &inode, &used) != 7 ||
	    !used || start > end || rlen <= 0 || (size_t)rlen >= range_len)
		return false;
	memcpy(range, line, rlen);
	range[rlen] = '\0';
	memset(e, 0, sizeof(*e));
	e->start = start;
	e->end = end;
	e->offset = offset;
	e->inode = inode;
	e->dev_major = major;
	e->dev_minor = minor;
	e->prot = (perms[0] == 'r' ? IVM_MAP_R : 0) |
		  (perms[1] == 'w' ? IVM_MAP_W : 0) |
		  (perms[2] == 'x' ? IVM_MAP_X : 0) |
		  (perms[3] == 's' ? IVM_MAP_SHARED : 0);
	path = line + used;
	while (*path == ' ' || *path == '\t')
		path++;
	/* NUL-ended: entry_build_id may open it. */
	path[strcspn(path, "\n")] = '\0';
	e->path.ptr = path;
	e->path.len = strnlen(path, IVM_PROTO_MAX_PATH);
	return true;
}

int helper_maps_encode(struct idlevm_writer *w, pid_t pid, uint32_t first)
{
	struct build_id_cache cache = { .valid = false };
	uint32_t index = 0, count = 0, flags = 0;
	char path[64], range[64], *line = NULL;
	size_t cap = 0, hdr;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	hdr = idlevm_encode_maps_rep_begin(w, first);
	while (getline(&line, &cap, f) > 0) {
		struct idlevm_map_entry e;

		if (!parse_maps_line(line, &e, range, sizeof(range)))
			continue;
		if (index++ < first)
			continue;
		entry_build_id(pid, range, e.path.ptr, &e, &cache);
		if (idlevm_map_entry_size(&e) > w->cap - w->len) {
			flags |= IVM_MAPS_F_MORE;
			break;
		}
		idlevm_encode_map_entry(w, &e);
		count++;
	}
	free(line);
	fclose(f);
	idlevm_encode_maps_rep_end(w, hdr, count, flags);
	return 0;
}
