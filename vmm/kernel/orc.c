// SPDX-License-Identifier: MIT
/*
 * ORC table loading and lookup.  See orc.h for the format.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/orc.h"

/* One decoded entry with its absolute ip; 16 bytes, sorted by ip. */
struct orc_slot {
	uint64_t ip;
	struct ivm_orc_entry entry;
};

/*
 * The lookup index, as the kernel's own (orc_lookup, LOOKUP_BLOCK_ORDER):
 * the table's ip range cut into blocks of 1 << block_shift bytes, and for
 * each block b the slot that covers its first byte, block[b].  A lookup
 * searches only slots block[b]..block[b + 1], a few on one or two cache
 * lines, instead of the whole table: a kernel stack's every frame is a
 * lookup, and a binary search over a 6 MiB table (6.1's 368456 entries)
 * misses the cache at each of its last levels (perf: 15% of the profile
 * loop's CPU on web01 with its RAM mapped).
 */
#define ORC_BLOCK_SHIFT 8

struct ivm_orc_table {
	struct orc_slot *slots;
	size_t nr;
	enum ivm_orc_format format;
	uint32_t *block;		/* nr_blocks + 1 slot indexes */
	size_t nr_blocks;
	unsigned int block_shift;
};

void ivm_orc_decode(const uint8_t raw[6], enum ivm_orc_format fmt,
		    struct ivm_orc_entry *ret)
{
	unsigned int hi = raw[5];
	unsigned int type;
	bool end;

	ret->sp_offset = (int16_t)(uint16_t)(raw[0] | raw[1] << 8);
	ret->bp_offset = (int16_t)(uint16_t)(raw[2] | raw[3] << 8);
	ret->sp_reg = raw[4] & 0xf;
	ret->bp_reg = raw[4] >> 4;

	if (fmt == IVM_ORC_FORMAT_V3) {
		static const uint8_t types[8] = {
			[0] = IVM_ORC_TYPE_UNDEFINED,
			[1] = IVM_ORC_TYPE_END_OF_STACK,
			[2] = IVM_ORC_TYPE_CALL,
			[3] = IVM_ORC_TYPE_REGS,
			[4] = IVM_ORC_TYPE_REGS_PARTIAL,
			/* 5..7 unassigned: no information */
		};

		ret->type = types[hi & 7];
		ret->signal = (hi >> 3) & 1;
		return;
	}

	/* V1 and V2 share the 2-bit type; they differ in signal/end bits. */
	type = hi & 3;
	if (fmt == IVM_ORC_FORMAT_V2) {
		ret->signal = (hi >> 2) & 1;
		end = (hi >> 3) & 1;
	} else {
		ret->signal = false;
		end = (hi >> 2) & 1;
	}
	/*
	 * Before V3 "no information" and "end of stack" were both spelled
	 * sp_reg == UNDEFINED, told apart by the end bit; normalize so the
	 * unwinder has one rule for every version.
	 */
	if (ret->sp_reg == IVM_ORC_REG_UNDEFINED)
		ret->type = end ? IVM_ORC_TYPE_END_OF_STACK
				: IVM_ORC_TYPE_UNDEFINED;
	else if (type == 0)
		ret->type = IVM_ORC_TYPE_CALL;
	else if (type == 1)
		ret->type = IVM_ORC_TYPE_REGS;
	else if (type == 2)
		ret->type = IVM_ORC_TYPE_REGS_PARTIAL;
	else
		ret->type = IVM_ORC_TYPE_UNDEFINED;
}

static int slot_cmp(const void *a, const void *b)
{
	const struct orc_slot *x = a, *y = b;

	if (x->ip != y->ip)
		return x->ip < y->ip ? -1 : 1;
	/*
	 * Duplicate ips only occur in hostile tables; order them by content
	 * so the result does not depend on qsort's instability.
	 */
	return memcmp(&x->entry, &y->entry, sizeof(x->entry));
}

/*
 * Build table->block.  Blocks grow past ORC_BLOCK_SHIFT while there would
 * be more blocks than slots, so that a sparse table (a hostile one's ips
 * may spread over the whole address space) keeps a small index; the
 * search within a block is right whatever its size.
 */
static struct ivm_error *build_index(struct ivm_orc_table *table)
{
	uint64_t lo = table->slots[0].ip;
	uint64_t span = table->slots[table->nr - 1].ip - lo;
	unsigned int shift = ORC_BLOCK_SHIFT;
	size_t b, i = 0;

	while (shift < 63 && (span >> shift) >= (uint64_t)table->nr + 64)
		shift++;
	table->block_shift = shift;
	table->nr_blocks = (size_t)(span >> shift) + 1;
	table->block = malloc((table->nr_blocks + 1) * sizeof(*table->block));
	if (!table->block)
		return &ivm_enomem;
	for (b = 0; b <= table->nr_blocks; b++) {
		/* The block's first byte; past the table's end for the last. */
		uint64_t start = b < table->nr_blocks ?
				 lo + ((uint64_t)b << shift) : UINT64_MAX;

		/* The greatest slot whose ip <= start, as the search finds. */
		while (i + 1 < table->nr && table->slots[i + 1].ip <= start)
			i++;
		table->block[b] = (uint32_t)i;
	}
	return NULL;
}

struct ivm_error *ivm_orc_load_buffer(const void *ip_buf, size_t ip_len,
				      uint64_t ip_addr, const void *orc_buf,
				      size_t orc_len, enum ivm_orc_format fmt,
				      struct ivm_orc_table **ret)
{
	const uint8_t *ipb = ip_buf, *orcb = orc_buf;
	struct ivm_orc_table *table;
	bool sorted = true;
	size_t nr, i;

	if (ip_len % 4 || orc_len % 6)
		return ivm_error_create(IVM_ERROR_ELF,
					"orc tables have a partial entry (ip table %zu bytes, entry table %zu bytes)",
					ip_len, orc_len);
	nr = ip_len / 4;
	if (nr != orc_len / 6)
		return ivm_error_create(IVM_ERROR_ELF,
					"orc tables disagree: %zu ips but %zu entries",
					nr, orc_len / 6);
	if (nr == 0)
		return ivm_error_create(IVM_ERROR_ELF, "orc tables are empty");
	if (nr > IVM_ORC_MAX_ENTRIES)
		return ivm_error_create(IVM_ERROR_ELF,
					"orc tables too large: %zu entries (max %u)",
					nr, IVM_ORC_MAX_ENTRIES);
	if (fmt == IVM_ORC_FORMAT_AUTO)
		fmt = IVM_ORC_FORMAT_V1;

	table = calloc(1, sizeof(*table));
	if (!table)
		return &ivm_enomem;
	table->slots = malloc(nr * sizeof(*table->slots));
	if (!table->slots) {
		free(table);
		return &ivm_enomem;
	}
	table->nr = nr;
	table->format = fmt;

	for (i = 0; i < nr; i++) {
		const uint8_t *p = ipb + 4 * i;
		int32_t rel = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
					(uint32_t)p[2] << 16 |
					(uint32_t)p[3] << 24);

		/* Modular on purpose: the kernel computes it the same way. */
		table->slots[i].ip = ip_addr + 4 * (uint64_t)i +
				     (uint64_t)(int64_t)rel;
		ivm_orc_decode(orcb + 6 * i, fmt, &table->slots[i].entry);
		if (i && table->slots[i].ip < table->slots[i - 1].ip)
			sorted = false;
	}
	/* vmlinux tables come sorted (build-time sort); others may not. */
	if (!sorted)
		qsort(table->slots, nr, sizeof(*table->slots), slot_cmp);
	if (build_index(table)) {
		ivm_orc_destroy(table);
		return &ivm_enomem;
	}
	*ret = table;
	return NULL;
}

void ivm_orc_destroy(struct ivm_orc_table *table)
{
	if (!table)
		return;
	free(table->slots);
	free(table->block);
	free(table);
}

size_t ivm_orc_nr_entries(const struct ivm_orc_table *table)
{
	return table->nr;
}

enum ivm_orc_format ivm_orc_table_format(const struct ivm_orc_table *table)
{
	return table->format;
}

void ivm_orc_ip_range(const struct ivm_orc_table *table, uint64_t *lo,
		      uint64_t *hi)
{
	*lo = table->slots[0].ip;
	*hi = table->slots[table->nr - 1].ip;
}

bool ivm_orc_entry_at(const struct ivm_orc_table *table, size_t i,
		      uint64_t *ip, struct ivm_orc_entry *ret)
{
	if (i >= table->nr)
		return false;
	*ip = table->slots[i].ip;
	*ret = table->slots[i].entry;
	return true;
}

bool ivm_orc_lookup(const struct ivm_orc_table *table, uint64_t ip,
		    struct ivm_orc_entry *ret, uint64_t *start)
{
	size_t lo, hi, b;

	if (ip < table->slots[0].ip || ip > table->slots[table->nr - 1].ip)
		return false;
	/*
	 * slots[block[b]].ip <= the block's start <= ip, and the slot after
	 * block[b + 1] lies past the next block's start, hence past ip.
	 */
	b = (size_t)((ip - table->slots[0].ip) >> table->block_shift);
	lo = table->block[b];
	hi = (size_t)table->block[b + 1] + 1;
	if (hi > table->nr)
		hi = table->nr;
	/* Invariant: slots[lo].ip <= ip, and slots[hi].ip > ip (or hi == nr). */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (table->slots[mid].ip <= ip)
			lo = mid;
		else
			hi = mid;
	}
	*ret = table->slots[lo].entry;
	if (start)
		*start = table->slots[lo].ip;
	return true;
}

/* ---- ELF ----------------------------------------------------------- */

struct orc_sections {
	Elf_Data *ip, *orc;
	uint64_t ip_addr;
	bool has_header;
};

static struct ivm_error *section_data(Elf_Scn *scn, const GElf_Shdr *shdr,
				      const char *name, Elf_Data **ret)
{
	Elf_Data *data;

	if (shdr->sh_type != SHT_PROGBITS)
		return ivm_error_create(IVM_ERROR_ELF,
					"vmlinux section %s has no contents (type %u)",
					name, (unsigned int)shdr->sh_type);
	/* elf_rawdata: the bytes as in the file, no conversion needed. */
	data = elf_rawdata(scn, NULL);
	if (!data || !data->d_buf || data->d_size != shdr->sh_size)
		return ivm_error_create(IVM_ERROR_ELF,
					"vmlinux section %s cannot be read: %s",
					name, elf_errmsg(-1));
	*ret = data;
	return NULL;
}

static struct ivm_error *find_orc_sections(Elf *elf, struct orc_sections *ret)
{
	struct ivm_error *err;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Ehdr ehdr;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
		return ivm_error_create(IVM_ERROR_ELF, "not an ELF file");
	if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 ||
	    ehdr.e_ident[EI_DATA] != ELFDATA2LSB || ehdr.e_machine != EM_X86_64)
		return ivm_error_create(IVM_ERROR_ELF,
					"not a 64-bit little-endian x86-64 ELF file");
	if (elf_getshdrstrndx(elf, &shstrndx))
		return ivm_error_create(IVM_ERROR_ELF,
					"no section name table: %s",
					elf_errmsg(-1));
	memset(ret, 0, sizeof(*ret));
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		const char *name;

		if (!gelf_getshdr(scn, &shdr))
			return ivm_error_create(IVM_ERROR_ELF,
						"bad section header: %s",
						elf_errmsg(-1));
		name = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (!name)
			continue;
		if (!strcmp(name, ".orc_unwind_ip")) {
			if (ret->ip)
				return ivm_error_create(IVM_ERROR_ELF,
							"vmlinux has two .orc_unwind_ip sections");
			err = section_data(scn, &shdr, name, &ret->ip);
			if (err)
				return err;
			ret->ip_addr = shdr.sh_addr;
		} else if (!strcmp(name, ".orc_unwind")) {
			if (ret->orc)
				return ivm_error_create(IVM_ERROR_ELF,
							"vmlinux has two .orc_unwind sections");
			err = section_data(scn, &shdr, name, &ret->orc);
			if (err)
				return err;
		} else if (!strcmp(name, ".orc_header")) {
			ret->has_header = true;
		}
	}
	if (!ret->ip || !ret->orc)
		return ivm_error_create(IVM_ERROR_ELF,
					"no ORC tables (.orc_unwind_ip, .orc_unwind): kernel built without CONFIG_UNWINDER_ORC?");
	return NULL;
}

struct ivm_error *ivm_orc_load_elf(const char *path, enum ivm_orc_format fmt,
				   struct ivm_orc_table **ret)
{
	struct orc_sections secs;
	struct ivm_error *err;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return ivm_error_create(IVM_ERROR_ELF, "libelf too old: %s",
					elf_errmsg(-1));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "cannot open %s", path);
	/* Mapped, not read: only the two ORC sections are ever touched. */
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		err = ivm_error_create(IVM_ERROR_ELF, "%s: %s", path,
				       elf_errmsg(-1));
		close(fd);
		return err;
	}
	err = find_orc_sections(elf, &secs);
	if (!err) {
		if (fmt == IVM_ORC_FORMAT_AUTO)
			fmt = secs.has_header ? IVM_ORC_FORMAT_V3
					      : IVM_ORC_FORMAT_V1;
		err = ivm_orc_load_buffer(secs.ip->d_buf, secs.ip->d_size,
					  secs.ip_addr, secs.orc->d_buf,
					  secs.orc->d_size, fmt, ret);
	}
	if (err)
		err = ivm_error_wrap(err, "loading orc from %s", path);
	elf_end(elf);
	close(fd);
	return err;
}

enum ivm_orc_format ivm_orc_format_for_release(const char *release)
{
	unsigned long major, minor;
	char *end;

	if (!release || release[0] < '0' || release[0] > '9')
		return IVM_ORC_FORMAT_AUTO;
	errno = 0;
	major = strtoul(release, &end, 10);
	if (errno || *end != '.' || end[1] < '0' || end[1] > '9')
		return IVM_ORC_FORMAT_AUTO;
	minor = strtoul(end + 1, &end, 10);
	if (errno)
		return IVM_ORC_FORMAT_AUTO;
	if (major < 6 || (major == 6 && minor < 3))
		return IVM_ORC_FORMAT_V1;
	if (major == 6 && minor == 3)
		return IVM_ORC_FORMAT_V2;
	return IVM_ORC_FORMAT_V3;
}

/* Guest reads in pieces, so one fault names where the table broke off. */
#define ORC_READ_CHUNK (64u << 10)

static struct ivm_error *read_chunked(const struct ivm_kmem_reader *mem,
				      uint64_t va, uint8_t *buf, size_t len)
{
	struct ivm_error *err;
	size_t done, n;

	for (done = 0; done < len; done += n) {
		n = len - done < ORC_READ_CHUNK ? len - done : ORC_READ_CHUNK;
		err = mem->read(mem->ctx, va + done, buf + done, n);
		if (err)
			return err;
	}
	return NULL;
}

struct ivm_error *ivm_orc_load_guest(const struct ivm_kmem_reader *mem,
				     uint64_t ip_start, uint64_t ip_stop,
				     uint64_t orc_start,
				     enum ivm_orc_format fmt,
				     struct ivm_orc_table **ret)
{
	uint8_t *ipb = NULL, *orcb = NULL;
	struct ivm_error *err;
	uint64_t nr;

	if (!mem || !mem->read)
		return ivm_error_create(IVM_ERROR_INVALID,
					"orc from guest memory: no reader");
	if (ip_stop <= ip_start || (ip_stop - ip_start) % 4)
		return ivm_error_create(IVM_ERROR_INVALID,
					"orc from guest memory: bad ip table %#llx-%#llx",
					(unsigned long long)ip_start,
					(unsigned long long)ip_stop);
	nr = (ip_stop - ip_start) / 4;
	if (nr > IVM_ORC_MAX_ENTRIES || orc_start + nr * 6 < orc_start)
		return ivm_error_create(IVM_ERROR_INVALID,
					"orc from guest memory: %llu entries is too many",
					(unsigned long long)nr);
	ipb = malloc(nr * 4);
	orcb = malloc(nr * 6);
	if (!ipb || !orcb) {
		err = &ivm_enomem;
		goto out;
	}
	err = read_chunked(mem, ip_start, ipb, nr * 4);
	if (!err)
		err = read_chunked(mem, orc_start, orcb, nr * 6);
	if (err) {
		err = ivm_error_wrap(err, "reading orc tables from guest memory");
		goto out;
	}
	err = ivm_orc_load_buffer(ipb, nr * 4, ip_start, orcb, nr * 6, fmt,
				  ret);
out:
	free(ipb);
	free(orcb);
	return err;
}
