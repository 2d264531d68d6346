// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "unwind/elf_symbols.h"

#define EHDR_SIZE 64u
#define PHDR_SIZE 56u
#define SHDR_SIZE 64u
#define SYM_SIZE 24u
#define DYN_SIZE 16u
/* Bytes of a string table read at most (libc's .dynstr: 40 KiB). */
#define MAX_STRTAB (32u << 20)
/* Symbols read per chunk while scanning a table. */
#define SYM_CHUNK 1024u
/* GNU hash buckets and bloom words accepted. */
#define MAX_BUCKETS (1u << 20)
#define MAX_BLOOM (1u << 20)

/* ---- headers ------------------------------------------------------------- */

struct ivm_error *ivm_elf_headers_read(const struct ivm_kmem_reader *file,
				       struct ivm_elf_headers *ret)
{
	uint8_t ehdr[EHDR_SIZE], phdrs[IVM_ELF_MAX_PHNUM * PHDR_SIZE];
	struct ivm_error *err;
	uint64_t phoff, shoff;
	uint16_t phnum, shnum;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	err = file->read(file->ctx, 0, ehdr, sizeof(ehdr));
	if (err)
		return err;
	ret->type = (uint16_t)ivm_le_load(ehdr + 16, 2);
	phoff = ivm_le64(ehdr + 32);
	shoff = ivm_le64(ehdr + 40);
	phnum = (uint16_t)ivm_le_load(ehdr + 56, 2);
	shnum = (uint16_t)ivm_le_load(ehdr + 60, 2);
	if (memcmp(ehdr, ELFMAG, SELFMAG) || ehdr[EI_CLASS] != ELFCLASS64 ||
	    ehdr[EI_DATA] != ELFDATA2LSB ||
	    ivm_le_load(ehdr + 18, 2) != EM_X86_64 ||
	    (ret->type != ET_EXEC && ret->type != ET_DYN))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"not an x86-64 ELF executable or shared library");
	if (ivm_le_load(ehdr + 54, 2) != PHDR_SIZE || !phnum ||
	    phnum > IVM_ELF_MAX_PHNUM || phoff > UINT64_MAX - sizeof(phdrs))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"ELF file: %u program headers at %#llx",
					phnum, (unsigned long long)phoff);
	/* Extended section numbering (shnum 0) is for objects, not these. */
	if (shoff && shnum && ivm_le_load(ehdr + 58, 2) == SHDR_SIZE &&
	    shnum <= IVM_ELF_MAX_SHNUM &&
	    shoff <= UINT64_MAX - (uint64_t)shnum * SHDR_SIZE) {
		ret->shoff = shoff;
		ret->shnum = shnum;
		ret->shstrndx = (uint16_t)ivm_le_load(ehdr + 62, 2);
	}
	err = file->read(file->ctx, phoff, phdrs, phnum * PHDR_SIZE);
	if (err)
		return err;
	for (i = 0; i < phnum; i++) {
		const uint8_t *p = phdrs + i * PHDR_SIZE;
		uint32_t type = ivm_le32(p), flags = ivm_le32(p + 4);
		uint64_t offset = ivm_le64(p + 8), vaddr = ivm_le64(p + 16);
		uint64_t filesz = ivm_le64(p + 32), memsz = ivm_le64(p + 40);
		uint64_t align = ivm_le64(p + 48);

		if (vaddr + memsz < vaddr || offset + filesz < offset ||
		    filesz > memsz)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"program header %zu: bad sizes", i);
		switch (type) {
		case PT_LOAD:
			if (!memsz)
				break;
			if (ret->nr_loads == IVM_ELF_MAX_LOADS)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"more than %d PT_LOAD segments",
							IVM_ELF_MAX_LOADS);
			ret->loads[ret->nr_loads++] = (struct ivm_elf_load){
				vaddr, memsz, offset, filesz, flags };
			break;
		case PT_TLS:
			/* The alignment is a power of two, or none (0, 1). */
			if (align & (align - 1))
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"PT_TLS alignment %#llx",
							(unsigned long long)align);
			ret->tls_vaddr = vaddr;
			ret->tls_filesz = filesz;
			ret->tls_memsz = memsz;
			ret->tls_align = align ? align : 1;
			break;
		case PT_DYNAMIC:
			ret->dynamic = vaddr;
			ret->dynamic_size = filesz;
			break;
		default:
			break;
		}
	}
	if (!ret->nr_loads)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"ELF file without PT_LOAD");
	return NULL;
}

/* The file offset of [vaddr, vaddr + len) within one PT_LOAD's file bytes. */
static bool vaddr_offset(const struct ivm_elf_headers *h, uint64_t vaddr,
			 uint64_t len, uint64_t *ret)
{
	size_t i;

	for (i = 0; i < h->nr_loads; i++) {
		const struct ivm_elf_load *l = &h->loads[i];

		if (vaddr >= l->vaddr && len <= l->filesz &&
		    vaddr - l->vaddr <= l->filesz - len) {
			*ret = l->offset + (vaddr - l->vaddr);
			return true;
		}
	}
	return false;
}

struct ivm_error *ivm_elf_read_vaddr(const struct ivm_kmem_reader *file,
				     const struct ivm_elf_headers *h,
				     uint64_t vaddr, void *buf, size_t len)
{
	uint64_t off;

	if (!vaddr_offset(h, vaddr, len, &off))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%#llx+%zu lies in no segment's file bytes",
					(unsigned long long)vaddr, len);
	return file->read(file->ctx, off, buf, len);
}

/* ---- symbol tables ------------------------------------------------------- */

/* A symbol table and its strings, by file offset. */
struct table {
	uint64_t syms;		/* file offset of symbol 0 */
	uint64_t nr;		/* symbols */
	uint64_t strtab;	/* file offset */
	uint64_t strsz;
	enum ivm_elf_symtab kind;
};

/* .symtab and .dynsym with their string tables, from the section headers. */
static struct ivm_error *tables_from_sections(const struct ivm_kmem_reader *file,
					      const struct ivm_elf_headers *h,
					      struct table *symtab,
					      struct table *dynsym)
{
	struct ivm_error *err;
	uint8_t *sh;
	size_t i;

	if (!h->shoff)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no section headers");
	sh = malloc((size_t)h->shnum * SHDR_SIZE);
	if (!sh)
		return &ivm_enomem;
	err = file->read(file->ctx, h->shoff, sh, (size_t)h->shnum * SHDR_SIZE);
	for (i = 0; !err && i < h->shnum; i++) {
		const uint8_t *s = sh + i * SHDR_SIZE, *str;
		uint32_t type = ivm_le32(s + 4), link = ivm_le32(s + 40);
		uint64_t offset = ivm_le64(s + 24), size = ivm_le64(s + 32);
		struct table *t = type == SHT_SYMTAB ? symtab :
				  type == SHT_DYNSYM ? dynsym : NULL;

		if (!t || t->nr)
			continue;
		str = link < h->shnum ? sh + (size_t)link * SHDR_SIZE : NULL;
		if (ivm_le64(s + 56) != SYM_SIZE || !str ||
		    ivm_le32(str + 4) != SHT_STRTAB ||
		    offset + size < offset ||
		    ivm_le64(str + 24) + ivm_le64(str + 32) <
		    ivm_le64(str + 24)) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "section %zu: a malformed symbol table",
					       i);
			break;
		}
		t->syms = offset;
		t->nr = size / SYM_SIZE;
		t->strtab = ivm_le64(str + 24);
		t->strsz = ivm_le64(str + 32);
		t->kind = type == SHT_SYMTAB ? IVM_ELF_SYMTAB : IVM_ELF_DYNSYM;
	}
	free(sh);
	return err;
}

/*
 * A pointer of .dynamic as a link-time address inside a segment: as it is
 * in the file, or minus the bias when ld.so relocated it in memory.
 */
static bool dyn_ptr(const struct ivm_elf_headers *h, uint64_t v, uint64_t bias,
		    uint64_t len, uint64_t *ret)
{
	uint64_t off;

	if (vaddr_offset(h, v, len, &off)) {
		*ret = v;
		return true;
	}
	if (bias && v >= bias && vaddr_offset(h, v - bias, len, &off)) {
		*ret = v - bias;
		return true;
	}
	return false;
}

/* The number of symbols a GNU hash table at vaddr covers. */
static struct ivm_error *gnu_hash_count(const struct ivm_kmem_reader *file,
					const struct ivm_elf_headers *h,
					uint64_t vaddr, uint64_t *ret)
{
	uint8_t hdr[16], word[4];
	uint32_t nbuckets, symoffset, bloom, i, max = 0;
	uint64_t buckets, chain, idx;
	struct ivm_error *err;
	uint8_t *b;

	err = ivm_elf_read_vaddr(file, h, vaddr, hdr, sizeof(hdr));
	if (err)
		return err;
	nbuckets = ivm_le32(hdr);
	symoffset = ivm_le32(hdr + 4);
	bloom = ivm_le32(hdr + 8);
	if (!nbuckets || nbuckets > MAX_BUCKETS || bloom > MAX_BLOOM)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"GNU hash: %u buckets, %u bloom words",
					nbuckets, bloom);
	buckets = vaddr + 16 + 8ull * bloom;
	b = malloc(4ull * nbuckets);
	if (!b)
		return &ivm_enomem;
	err = ivm_elf_read_vaddr(file, h, buckets, b, 4ull * nbuckets);
	for (i = 0; !err && i < nbuckets; i++)
		if (ivm_le32(b + 4ull * i) > max)
			max = ivm_le32(b + 4ull * i);
	free(b);
	if (err)
		return err;
	if (!max) {
		*ret = symoffset;
		return NULL;
	}
	if (max < symoffset)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"GNU hash: bucket %u below symoffset %u",
					max, symoffset);
	/* The last chain ends with its low bit set. */
	chain = buckets + 4ull * nbuckets;
	for (idx = max; idx < IVM_ELF_MAX_SYMS; idx++) {
		err = ivm_elf_read_vaddr(file, h,
					 chain + 4 * (idx - symoffset), word, 4);
		if (err)
			return err;
		if (ivm_le32(word) & 1) {
			*ret = idx + 1;
			return NULL;
		}
	}
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"GNU hash: a chain longer than %u symbols",
				IVM_ELF_MAX_SYMS);
}

/* .dynsym through PT_DYNAMIC, as the loader finds it. */
static struct ivm_error *table_from_dynamic(const struct ivm_kmem_reader *file,
					    const struct ivm_elf_headers *h,
					    uint64_t bias, struct table *t)
{
	uint64_t symtab = 0, strtab = 0, strsz = 0, hash = 0, gnu_hash = 0;
	uint64_t syment = SYM_SIZE, n, i, v, off;
	uint8_t *dyn, word[8];
	struct ivm_error *err;

	if (!h->dynamic)
		return ivm_error_create(IVM_ERROR_NOT_FOUND, "no PT_DYNAMIC");
	n = h->dynamic_size / DYN_SIZE;
	if (n > IVM_ELF_MAX_DYNAMIC)
		n = IVM_ELF_MAX_DYNAMIC;
	dyn = malloc(n ? n * DYN_SIZE : 1);
	if (!dyn)
		return &ivm_enomem;
	err = ivm_elf_read_vaddr(file, h, h->dynamic, dyn, n * DYN_SIZE);
	for (i = 0; !err && i < n; i++) {
		uint64_t tag = ivm_le64(dyn + i * DYN_SIZE);

		v = ivm_le64(dyn + i * DYN_SIZE + 8);
		if (tag == DT_NULL)
			break;
		if (tag == DT_SYMTAB)
			symtab = v;
		else if (tag == DT_STRTAB)
			strtab = v;
		else if (tag == DT_STRSZ)
			strsz = v;
		else if (tag == DT_SYMENT)
			syment = v;
		else if (tag == DT_HASH)
			hash = v;
		else if (tag == DT_GNU_HASH)
			gnu_hash = v;
	}
	free(dyn);
	if (err)
		return err;
	if (!symtab || !strtab || (!hash && !gnu_hash))
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"PT_DYNAMIC names no symbol table");
	if (syment != SYM_SIZE || !strsz ||
	    !dyn_ptr(h, symtab, bias, SYM_SIZE, &symtab) ||
	    !dyn_ptr(h, strtab, bias, strsz, &strtab) ||
	    (hash && !dyn_ptr(h, hash, bias, 8, &hash)) ||
	    (!hash && !dyn_ptr(h, gnu_hash, bias, 16, &gnu_hash)))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"PT_DYNAMIC: tables outside the file's segments");
	if (hash) {
		/* nbucket, nchain: one chain entry per symbol. */
		err = ivm_elf_read_vaddr(file, h, hash, word, 8);
		if (err)
			return err;
		n = ivm_le32(word + 4);
	} else {
		err = gnu_hash_count(file, h, gnu_hash, &n);
		if (err)
			return err;
	}
	if (n > IVM_ELF_MAX_SYMS || !vaddr_offset(h, symtab, n * SYM_SIZE, &off))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"PT_DYNAMIC: %llu symbols out of the segments",
					(unsigned long long)n);
	t->syms = off;
	t->nr = n;
	vaddr_offset(h, strtab, strsz, &t->strtab);
	t->strsz = strsz;
	t->kind = IVM_ELF_DYNSYM;
	return NULL;
}

/*
 * One pass over table t for the names not found yet.  A global
 * definition wins over a local one; locals of one name count their
 * definitions (matches), so a caller can refuse an ambiguous one.
 */
static struct ivm_error *scan(const struct ivm_kmem_reader *file,
			      const struct table *t, const char *const *names,
			      size_t n, struct ivm_elf_symbol *ret, bool *found,
			      const bool *done)
{
	uint8_t *syms = NULL;
	char *str = NULL;
	struct ivm_error *err;
	uint64_t i, k;
	size_t j;

	if (t->nr > IVM_ELF_MAX_SYMS || t->strsz > MAX_STRTAB ||
	    t->syms + t->nr * SYM_SIZE < t->syms)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"a symbol table over the caps (%llu symbols, %llu string bytes)",
					(unsigned long long)t->nr,
					(unsigned long long)t->strsz);
	str = malloc(t->strsz + 1);
	syms = malloc(SYM_CHUNK * SYM_SIZE);
	if (!str || !syms) {
		err = &ivm_enomem;
		goto out;
	}
	err = file->read(file->ctx, t->strtab, str, t->strsz);
	if (err)
		goto out;
	str[t->strsz] = '\0';
	for (i = 0; i < t->nr; i += SYM_CHUNK) {
		uint64_t m = t->nr - i < SYM_CHUNK ? t->nr - i : SYM_CHUNK;

		err = file->read(file->ctx, t->syms + i * SYM_SIZE, syms,
				 m * SYM_SIZE);
		if (err)
			goto out;
		for (k = 0; k < m; k++) {
			const uint8_t *s = syms + k * SYM_SIZE;
			uint32_t name = ivm_le32(s);
			uint16_t shndx = (uint16_t)ivm_le_load(s + 6, 2);
			uint8_t info = s[4];
			struct ivm_elf_symbol sym = {
				.value = ivm_le64(s + 8),
				.size = ivm_le64(s + 16),
				.type = ELF64_ST_TYPE(info),
				.bind = ELF64_ST_BIND(info),
				.shndx = shndx, .table = t->kind,
			};

			if (!name || name >= t->strsz || shndx == SHN_UNDEF)
				continue;
			for (j = 0; j < n; j++) {
				if (done[j] ||
				    strncmp(str + name, names[j],
					    IVM_ELF_MAX_NAME))
					continue;
				if (!found[j] ||
				    (ret[j].bind == STB_LOCAL &&
				     sym.bind != STB_LOCAL)) {
					sym.matches = 1;
					ret[j] = sym;
					found[j] = true;
				} else if (sym.bind == ret[j].bind &&
					   sym.value != ret[j].value) {
					ret[j].matches++;
				}
			}
		}
	}
out:
	free(str);
	free(syms);
	return err;
}

struct ivm_error *ivm_elf_find_symbols(const struct ivm_kmem_reader *file,
				       const struct ivm_elf_headers *h,
				       uint64_t bias, const char *const *names,
				       size_t n, struct ivm_elf_symbol *ret,
				       bool *found, bool *incomplete)
{
	struct table symtab = { 0 }, dynsym = { 0 };
	struct ivm_error *err, *missed = NULL;
	bool *done, any = false;
	size_t i;

	done = calloc(n ? n : 1, sizeof(*done));
	if (!done)
		return &ivm_enomem;
	for (i = 0; i < n; i++)
		found[i] = false;
	err = tables_from_sections(file, h, &symtab, &dynsym);
	if (err) {
		/*
		 * Without readable section headers .symtab is out of reach:
		 * remember why, in case a name is then not found.
		 */
		if (err->code != IVM_ERROR_NOT_FOUND)
			missed = err;
		else
			ivm_error_destroy(err);
		err = NULL;
	}
	if (symtab.nr) {
		err = scan(file, &symtab, names, n, ret, found, done);
		any |= !err;
		if (err) {
			ivm_error_destroy(missed);
			missed = err;
			err = NULL;
		}
		/* .symtab's answers are final (it holds .dynsym's too). */
		for (i = 0; i < n; i++)
			done[i] = found[i];
	}
	if (!dynsym.nr) {
		err = table_from_dynamic(file, h, bias, &dynsym);
		if (err && err->code == IVM_ERROR_NOT_FOUND) {
			ivm_error_destroy(err);
			err = NULL;
		} else if (err) {
			ivm_error_destroy(missed);
			missed = err;
			err = NULL;
		}
	}
	if (dynsym.nr) {
		err = scan(file, &dynsym, names, n, ret, found, done);
		any |= !err;
		if (err) {
			ivm_error_destroy(missed);
			missed = err;
			err = NULL;
		}
	}
	free(done);
	/* A name not found in what could not be read is not known absent. */
	*incomplete = missed != NULL;
	if (!any)
		return missed ? missed :
		       ivm_error_create(IVM_ERROR_NOT_FOUND,
					"the ELF file has no symbol table");
	ivm_error_destroy(missed);
	return NULL;
}

/* ---- host files ----------------------------------------------------------- */

static struct ivm_error *host_read(void *ctx, uint64_t off, void *buf,
				   size_t len)
{
	const struct ivm_elf_host_file *f = ctx;
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

struct ivm_error *ivm_elf_host_file_open(const char *path,
					 struct ivm_elf_host_file *f,
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

void ivm_elf_host_file_close(struct ivm_elf_host_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}
