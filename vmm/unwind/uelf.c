// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "unwind/uelf_int.h"

#define PHDR_SIZE 56u

/* ---- headers ------------------------------------------------------------- */

size_t ivm_uelf_find_build_id(const uint8_t *notes, size_t len, uint8_t *id)
{
	size_t off = 0;

	/* Every step moves off forward by at least the 12-byte header. */
	while (len - off >= 12) {
		uint32_t namesz = ivm_le32(notes + off);
		uint32_t descsz = ivm_le32(notes + off + 4);
		uint32_t type = ivm_le32(notes + off + 8);
		uint64_t name = off + 12;
		uint64_t desc = name + (((uint64_t)namesz + 3) & ~3ull);
		uint64_t next = desc + (((uint64_t)descsz + 3) & ~3ull);

		if (desc > len || desc + descsz > len)
			return 0;
		if (type == NT_GNU_BUILD_ID && namesz == 4 &&
		    !memcmp(notes + name, "GNU", 4) && descsz > 0 &&
		    descsz <= IVM_UELF_MAX_BUILD_ID) {
			memcpy(id, notes + desc, descsz);
			return descsz;
		}
		if (next > len)
			return 0;
		off = (size_t)next;
	}
	return 0;
}

struct ivm_error *ivm_uelf_parse_phdrs(const uint8_t *phdrs, size_t phnum,
				       struct ivm_uelf *elf,
				       uint64_t *phdr_vaddr)
{
	size_t i;

	*phdr_vaddr = UINT64_MAX;
	elf->nr_loads = 0;
	elf->dynamic = elf->dynamic_size = 0;
	elf->tls_vaddr = elf->tls_memsz = 0;
	elf->tls_align = 1;
	elf->eh.vaddr = 0;
	for (i = 0; i < phnum && i < IVM_UELF_MAX_PHNUM; i++) {
		const uint8_t *p = phdrs + i * PHDR_SIZE;
		uint32_t type = ivm_le32(p), flags = ivm_le32(p + 4);
		uint64_t offset = ivm_le64(p + 8), vaddr = ivm_le64(p + 16);
		uint64_t filesz = ivm_le64(p + 32), memsz = ivm_le64(p + 40);

		if (vaddr + memsz < vaddr || offset + filesz < offset)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"program header %zu wraps", i);
		switch (type) {
		case PT_PHDR:
			*phdr_vaddr = vaddr;
			break;
		case PT_LOAD:
			if (!memsz)
				break;
			if (filesz > memsz)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"PT_LOAD %zu: more file than memory",
							i);
			if (elf->nr_loads == IVM_UELF_MAX_LOADS)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"more than %d PT_LOAD segments",
							IVM_UELF_MAX_LOADS);
			elf->loads[elf->nr_loads++] = (struct ivm_uelf_load){
				vaddr, memsz, offset, filesz, flags };
			break;
		case PT_DYNAMIC:
			elf->dynamic = vaddr;
			elf->dynamic_size = filesz;
			break;
		case PT_GNU_EH_FRAME:
			elf->eh.vaddr = vaddr;
			break;
		case PT_TLS: {
			uint64_t align = ivm_le64(p + 48);

			if (align & (align - 1))
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"PT_TLS aligned to %#llx",
							(unsigned long long)align);
			elf->tls_vaddr = vaddr;
			elf->tls_memsz = memsz;
			elf->tls_align = align ? align : 1;
			break;
		}
		}
	}
	return NULL;
}

bool ivm_uelf_offset(const struct ivm_uelf *elf, uint64_t vaddr,
		     uint64_t len, uint64_t *ret)
{
	size_t i;

	if (vaddr + len < vaddr)
		return false;
	for (i = 0; i < elf->nr_loads; i++) {
		const struct ivm_uelf_load *l = &elf->loads[i];

		if (vaddr >= l->vaddr && vaddr - l->vaddr <= l->filesz &&
		    len <= l->filesz - (vaddr - l->vaddr)) {
			*ret = l->offset + (vaddr - l->vaddr);
			return true;
		}
	}
	return false;
}

bool ivm_uelf_bias(const struct ivm_uelf *elf, uint64_t map_start,
		   uint64_t map_offset, uint64_t *ret)
{
	size_t i;

	for (i = 0; i < elf->nr_loads; i++) {
		const struct ivm_uelf_load *l = &elf->loads[i];

		if ((l->offset & ~4095ull) == map_offset) {
			/* Unsigned wrap is the arithmetic of a bias. */
			*ret = map_start - (l->vaddr & ~4095ull);
			return true;
		}
	}
	return false;
}

bool ivm_uelf_in_segment(const struct ivm_uelf *elf, uint64_t vaddr,
			 uint64_t len)
{
	size_t i;

	if (vaddr + len < vaddr)
		return false;
	for (i = 0; i < elf->nr_loads; i++) {
		const struct ivm_uelf_load *l = &elf->loads[i];

		if (vaddr >= l->vaddr && vaddr - l->vaddr <= l->memsz &&
		    len <= l->memsz - (vaddr - l->vaddr))
			return true;
	}
	return false;
}

struct ivm_error *ivm_uelf_read(const struct ivm_kmem_reader *file,
				const struct ivm_uelf *elf, uint64_t vaddr,
				void *buf, size_t len)
{
	uint64_t off;

	if (!ivm_uelf_offset(elf, vaddr, len, &off))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%zu bytes at %#llx are in no segment of the file",
					len, (unsigned long long)vaddr);
	return file->read(file->ctx, off, buf, len);
}

static struct ivm_error *vread(void *ctx, uint64_t va, void *buf, size_t len)
{
	const struct ivm_uelf_vreader *v = ctx;

	return ivm_uelf_read(v->file, v->elf, va, buf, len);
}

void ivm_uelf_vreader_init(struct ivm_uelf_vreader *v,
			   const struct ivm_kmem_reader *file,
			   const struct ivm_uelf *elf,
			   struct ivm_kmem_reader *ret)
{
	v->file = file;
	v->elf = elf;
	ret->read = vread;
	ret->ctx = v;
}

/*
 * A DW_EH_PE-encoded value of .eh_frame_hdr's header: absptr, udata4,
 * sdata4, udata8 or sdata8, absolute, pc-relative or relative to the
 * header (datarel).  False for anything else.
 */
static bool eh_value(struct ivm_cursor *c, uint8_t enc, uint64_t hdr,
		     uint64_t field, uint64_t *ret)
{
	uint64_t v;

	switch (enc & 0x0f) {
	case 0x00:		/* absptr */
	case 0x04:		/* udata8 */
	case 0x0c:		/* sdata8 */
		v = ivm_get_u64(c);
		break;
	case 0x03:		/* udata4 */
		v = ivm_get_u32(c);
		break;
	case 0x0b:		/* sdata4 */
		v = (uint64_t)(int64_t)(int32_t)ivm_get_u32(c);
		break;
	default:
		return false;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:		/* pcrel */
		v += field;
		break;
	case 0x30:		/* datarel: from the start of .eh_frame_hdr */
		v += hdr;
		break;
	default:
		return false;
	}
	*ret = v;
	return !c->bad;
}

/* Decode .eh_frame_hdr's header; leaves eh->vaddr 0 when unusable. */
static void parse_eh_hdr(const struct ivm_kmem_reader *file,
			 struct ivm_uelf *elf)
{
	struct ivm_uelf_eh_hdr *eh = &elf->eh;
	uint8_t buf[4 + 8 + 8];
	struct ivm_cursor c;
	uint64_t hdr = eh->vaddr, count, len = sizeof(buf);
	struct ivm_error *err;
	uint8_t ptr_enc, count_enc, table_enc;

	eh->vaddr = 0;
	/* A header with 4-byte fields is 12 bytes; read what there is. */
	if (!ivm_uelf_offset(elf, hdr, len, &count))
		len = 12;
	err = ivm_uelf_read(file, elf, hdr, buf, len);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	ivm_cursor_init(&c, buf, len);
	if (ivm_get_u8(&c) != 1)	/* version */
		return;
	ptr_enc = ivm_get_u8(&c);
	count_enc = ivm_get_u8(&c);
	table_enc = ivm_get_u8(&c);
	if (!eh_value(&c, ptr_enc, hdr, hdr + 4, &eh->eh_frame) ||
	    !eh_value(&c, count_enc, hdr, hdr + (len - c.left), &count))
		return;
	/* Binary search needs fixed-size, header-relative entries. */
	if ((table_enc & 0x70) != 0x30)
		return;
	switch (table_enc & 0x0f) {
	case 0x03: eh->entry_size = 4; eh->entry_signed = false; break;
	case 0x0b: eh->entry_size = 4; eh->entry_signed = true; break;
	case 0x04: eh->entry_size = 8; eh->entry_signed = false; break;
	case 0x0c: eh->entry_size = 8; eh->entry_signed = true; break;
	default: return;
	}
	if (!count || count > IVM_UELF_MAX_FDES)
		return;
	eh->table = hdr + (len - c.left);
	eh->count = count;
	if (!ivm_uelf_offset(elf, eh->table, count * 2 * eh->entry_size,
			     &len))
		return;
	eh->vaddr = hdr;
}

struct ivm_error *ivm_uelf_parse(const struct ivm_kmem_reader *file,
				 struct ivm_uelf *ret)
{
	uint8_t ehdr[64];
	uint8_t phdrs[IVM_UELF_MAX_PHNUM * PHDR_SIZE];
	uint8_t notes[IVM_UELF_MAX_NOTES];
	struct ivm_error *err;
	uint64_t phdr_vaddr;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	err = file->read(file->ctx, 0, ehdr, sizeof(ehdr));
	if (err)
		return err;
	ret->type = (uint16_t)ivm_le_load(ehdr + 16, 2);
	ret->entry = ivm_le64(ehdr + 24);
	ret->phoff = ivm_le64(ehdr + 32);
	ret->shoff = ivm_le64(ehdr + 40);
	ret->phnum = (uint16_t)ivm_le_load(ehdr + 56, 2);
	ret->shentsize = (uint16_t)ivm_le_load(ehdr + 58, 2);
	ret->shnum = (uint16_t)ivm_le_load(ehdr + 60, 2);
	ret->shstrndx = (uint16_t)ivm_le_load(ehdr + 62, 2);
	if (memcmp(ehdr, ELFMAG, SELFMAG) || ehdr[EI_CLASS] != ELFCLASS64 ||
	    ehdr[EI_DATA] != ELFDATA2LSB ||
	    ivm_le_load(ehdr + 18, 2) != EM_X86_64 ||
	    (ret->type != ET_EXEC && ret->type != ET_DYN))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"not an x86-64 executable or shared library");
	if (ivm_le_load(ehdr + 54, 2) != PHDR_SIZE || !ret->phnum ||
	    ret->phnum > IVM_UELF_MAX_PHNUM ||
	    ret->phoff > UINT64_MAX - IVM_UELF_MAX_PHNUM * PHDR_SIZE)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%u program headers of %u bytes",
					ret->phnum,
					(unsigned int)ivm_le_load(ehdr + 54, 2));
	err = file->read(file->ctx, ret->phoff, phdrs, ret->phnum * PHDR_SIZE);
	if (err)
		return err;
	err = ivm_uelf_parse_phdrs(phdrs, ret->phnum, ret, &phdr_vaddr);
	if (err)
		return err;
	ret->build_id_fault = UINT64_MAX;
	/*
	 * No PT_LOAD is no error: such a file has a build-id all the same;
	 * what needs a segment (rows, names) finds none and says so.
	 */
	for (i = 0; i < ret->phnum && !ret->build_id_len; i++) {
		const uint8_t *p = phdrs + i * PHDR_SIZE;
		uint64_t off = ivm_le64(p + 8), len = ivm_le64(p + 32);

		if (ivm_le32(p) != PT_NOTE || !len)
			continue;
		if (len > sizeof(notes))
			len = sizeof(notes);
		err = file->read(file->ctx, off, notes, len);
		if (err) {
			if (ret->build_id_fault == UINT64_MAX)
				ret->build_id_fault = off;
			ivm_error_destroy(err);
			continue;
		}
		ret->build_id_len = ivm_uelf_find_build_id(notes, len,
							   ret->build_id);
	}
	if (ret->eh.vaddr)
		parse_eh_hdr(file, ret);
	return NULL;
}

/* ---- sections --------------------------------------------------------------- */

/* The section headers (elf->shnum of 64 bytes) into *ret; caller frees. */
struct ivm_error *uelf_read_shdrs(const struct ivm_kmem_reader *file,
				  const struct ivm_uelf *elf, uint8_t **ret)
{
	struct ivm_error *err;
	uint8_t *shdrs;

	if (!elf->shoff || !elf->shnum)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no section headers");
	if (elf->shentsize != 64 || elf->shnum > IVM_UELF_MAX_SHNUM ||
	    elf->shstrndx >= elf->shnum ||
	    elf->shoff > UINT64_MAX - 64ull * elf->shnum)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%u section headers of %u bytes",
					elf->shnum, elf->shentsize);
	shdrs = malloc(64ull * elf->shnum);
	if (!shdrs)
		return &ivm_enomem;
	err = file->read(file->ctx, elf->shoff, shdrs, 64ull * elf->shnum);
	if (err) {
		free(shdrs);
		return err;
	}
	*ret = shdrs;
	return NULL;
}

struct ivm_error *ivm_uelf_find_section(const struct ivm_kmem_reader *file,
					const struct ivm_uelf *elf,
					const char *name,
					struct ivm_uelf_section *ret)
{
	uint8_t *shdrs = NULL, str[64];
	uint64_t names_off, names_size, want = strlen(name) + 1;
	struct ivm_error *err;
	size_t i;

	if (want > sizeof(str))
		return ivm_error_create(IVM_ERROR_INVALID,
					"section name %s too long", name);
	err = uelf_read_shdrs(file, elf, &shdrs);
	if (err)
		goto out;
	names_off = ivm_le64(shdrs + 64 * elf->shstrndx + 24);
	names_size = ivm_le64(shdrs + 64 * elf->shstrndx + 32);
	for (i = 0; i < elf->shnum; i++) {
		const uint8_t *sh = shdrs + 64 * i;
		uint32_t at = ivm_le32(sh);

		/* Names are short: read each where it is, within the table. */
		if (at >= names_size || names_size - at < want ||
		    names_off > UINT64_MAX - at)
			continue;
		err = file->read(file->ctx, names_off + at, str, want);
		if (err)
			goto out;
		if (memcmp(str, name, want))
			continue;
		ret->type = ivm_le32(sh + 4);
		ret->vaddr = ivm_le64(sh + 16);
		ret->offset = ivm_le64(sh + 24);
		ret->size = ivm_le64(sh + 32);
		if (ret->offset + ret->size < ret->offset)
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "section %s wraps", name);
		goto out;
	}
	err = ivm_error_create(IVM_ERROR_NOT_FOUND, "no section %s", name);
out:
	free(shdrs);
	return err;
}

/* ---- host files ----------------------------------------------------------- */

static struct ivm_error *host_read(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	const struct ivm_uelf_host_file *f = ctx;
	size_t done = 0;

	if (off > f->size || len > f->size - off)
		return ivm_error_fault(off, "past the end of the file");
	while (done < len) {
		ssize_t r = pread(f->fd, (uint8_t *)buf + done, len - done,
				  (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return ivm_error_fault(off + done, "reading the file");
		done += (size_t)r;
	}
	return NULL;
}

struct ivm_error *ivm_uelf_host_file_open(const char *path,
					  struct ivm_uelf_host_file *f,
					  struct ivm_kmem_reader *ret)
{
	struct stat st;

	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return ivm_error_os(errno, "opening %s", path);
	if (fstat(f->fd, &st)) {
		close(f->fd);
		f->fd = -1;
		return ivm_error_os(errno, "%s", path);
	}
	f->size = (uint64_t)st.st_size;
	ret->read = host_read;
	ret->ctx = f;
	return NULL;
}

void ivm_uelf_host_file_close(struct ivm_uelf_host_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}
