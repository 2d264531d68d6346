// SPDX-License-Identifier: MIT
/*
 * The symbols of an ELF file (uelf.h): its dynamic symbol table, the
 * sorted tables lookups use, the MiniDebugInfo of .gnu_debugdata, and
 * symbols of any type by name.
 */
#include <elf.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "unwind/uelf_int.h"

#define SYM_SIZE 24u

/* ---- the dynamic symbol table -------------------------------------------- */

/*
 * A d_ptr of the dynamic section as a link-time address: as it is in the
 * file, or as ld.so rewrote it in a loaded object's memory (plus bias).
 */
static bool dyn_ptr(const struct ivm_uelf *elf, uint64_t v, uint64_t bias,
		    uint64_t *ret)
{
	if (ivm_uelf_in_segment(elf, v, 1)) {
		*ret = v;
		return true;
	}
	if (bias && ivm_uelf_in_segment(elf, v - bias, 1)) {
		*ret = v - bias;
		return true;
	}
	return false;
}

/*
 * Symbols of the GNU hash table at gnu: one past the highest index any
 * bucket's chain reaches.  Buckets hold each chain's first symbol; a
 * chain runs while the low bit of its hash values is clear.
 */
static struct ivm_error *gnu_hash_count(const struct ivm_kmem_reader *file,
					const struct ivm_uelf *elf,
					uint64_t gnu, uint64_t *ret)
{
	uint8_t hdr[16];
	uint32_t nbuckets, symoffset, bloom_size, *buckets, max = 0;
	uint64_t at;
	struct ivm_error *err;
	uint32_t i;

	err = ivm_uelf_read(file, elf, gnu, hdr, sizeof(hdr));
	if (err)
		return err;
	nbuckets = ivm_le32(hdr);
	symoffset = ivm_le32(hdr + 4);
	bloom_size = ivm_le32(hdr + 8);
	if (!nbuckets || nbuckets > IVM_UELF_MAX_BUCKETS ||
	    bloom_size > IVM_UELF_MAX_BUCKETS || symoffset > IVM_UELF_MAX_SYMS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"GNU hash table of %u buckets, %u bloom words",
					nbuckets, bloom_size);
	at = gnu + 16 + 8ull * bloom_size;
	buckets = malloc(4ull * nbuckets);
	if (!buckets)
		return &ivm_enomem;
	err = ivm_uelf_read(file, elf, at, buckets, 4ull * nbuckets);
	if (err) {
		free(buckets);
		return err;
	}
	for (i = 0; i < nbuckets; i++) {
		uint32_t b = ivm_le32((const uint8_t *)&buckets[i]);

		if (b > max)
			max = b;
	}
	free(buckets);
	if (max > IVM_UELF_MAX_SYMS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"GNU hash bucket names symbol %u", max);
	if (max < symoffset) {
		/* Every bucket empty: only the unhashed symbols. */
		*ret = symoffset;
		return NULL;
	}
	/* The chain of the highest bucket: its end bit ends the table. */
	at += 4ull * nbuckets + 4ull * (max - symoffset);
	for (;;) {
		uint8_t chunk[256];
		size_t n;

		err = ivm_uelf_read(file, elf, at, chunk, 4);
		if (err)
			return err;
		/* Read ahead within the same page when possible. */
		n = 4096 - (size_t)(at & 4095);
		n = n < sizeof(chunk) ? n & ~3ul : sizeof(chunk);
		if (n > 4) {
			err = ivm_uelf_read(file, elf, at, chunk, n);
			if (err) {
				ivm_error_destroy(err);
				n = 4;
			}
		} else {
			n = 4;
		}
		for (i = 0; i < n / 4; i++, max++) {
			if (max >= IVM_UELF_MAX_SYMS)
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"GNU hash chain runs past %u symbols",
							IVM_UELF_MAX_SYMS);
			if (ivm_le32(chunk + 4 * i) & 1) {
				*ret = (uint64_t)max + 1;
				return NULL;
			}
		}
		at += n;
	}
}

/*
 * Where .dynsym is, through PT_DYNAMIC: its link-time address and count,
 * and its strings'.
 */
static struct ivm_error *dynsym_table(const struct ivm_kmem_reader *file,
				      const struct ivm_uelf *elf,
				      uint64_t bias, uint64_t *symtab_ret,
				      uint64_t *nsyms_ret, uint64_t *strtab_ret,
				      uint64_t *strsz_ret)
{
	uint8_t dyn[IVM_UELF_MAX_DYNAMIC * 16];
	uint64_t symtab = 0, strtab = 0, strsz = 0, gnu = 0, hash = 0;
	uint64_t syment = SYM_SIZE, nsyms = 0, len;
	struct ivm_error *err;
	size_t i, n;

	if (!elf->dynamic || elf->dynamic_size < 16)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no dynamic section");
	len = elf->dynamic_size < sizeof(dyn) ? elf->dynamic_size & ~15ull :
						sizeof(dyn);
	err = ivm_uelf_read(file, elf, elf->dynamic, dyn, len);
	if (err)
		return err;
	for (i = 0, n = len / 16; i < n; i++) {
		uint64_t tag = ivm_le64(dyn + 16 * i);
		uint64_t val = ivm_le64(dyn + 16 * i + 8);
		uint64_t *slot = NULL;

		if (tag == DT_NULL)
			break;
		switch (tag) {
		case DT_SYMTAB: slot = &symtab; break;
		case DT_STRTAB: slot = &strtab; break;
		case DT_GNU_HASH: slot = &gnu; break;
		case DT_HASH: slot = &hash; break;
		case DT_STRSZ: strsz = val; continue;
		case DT_SYMENT: syment = val; continue;
		default: continue;
		}
		if (!dyn_ptr(elf, val, bias, slot))
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"dynamic tag %llu points outside the file (%#llx)",
						(unsigned long long)tag,
						(unsigned long long)val);
	}
	if (!symtab || !strtab || !strsz || (!gnu && !hash))
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"no dynamic symbol table");
	if (syment != SYM_SIZE || strsz > IVM_UELF_MAX_STRTAB)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"dynamic symbols of %llu bytes, %llu bytes of names",
					(unsigned long long)syment,
					(unsigned long long)strsz);
	if (gnu) {
		err = gnu_hash_count(file, elf, gnu, &nsyms);
	} else {
		uint8_t h[8];

		/* DT_HASH: nbucket, nchain; nchain is the symbol count. */
		err = ivm_uelf_read(file, elf, hash, h, sizeof(h));
		nsyms = err ? 0 : ivm_le32(h + 4);
		if (!err && nsyms > IVM_UELF_MAX_SYMS)
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "%llu dynamic symbols",
					       (unsigned long long)nsyms);
	}
	if (err)
		return err;
	*symtab_ret = symtab;
	*nsyms_ret = nsyms;
	*strtab_ret = strtab;
	*strsz_ret = strsz;
	return NULL;
}

struct ivm_error *ivm_uelf_read_dynsym(const struct ivm_kmem_reader *file,
				       const struct ivm_uelf *elf,
				       uint64_t bias,
				       struct ivm_uelf_syms **ret)
{
	uint64_t symtab, strtab, strsz, nsyms;
	struct ivm_error *err;
	uint8_t *raw = NULL;
	char *str = NULL;

	err = dynsym_table(file, elf, bias, &symtab, &nsyms, &strtab, &strsz);
	if (err)
		return err;
	raw = malloc(nsyms ? nsyms * SYM_SIZE : 1);
	str = malloc(strsz);
	if (!raw || !str) {
		err = &ivm_enomem;
		goto out;
	}
	err = ivm_uelf_read(file, elf, symtab, raw, nsyms * SYM_SIZE);
	if (!err)
		err = ivm_uelf_read(file, elf, strtab, str, strsz);
	if (!err)
		err = ivm_uelf_syms_build(raw, nsyms, str, strsz, ret);
out:
	free(raw);
	free(str);
	return err;
}

/* ---- symbol tables --------------------------------------------------------- */

struct sym_sort {
	struct ivm_uelf_sym sym;
	uint8_t bind;
};

/*
 * Of two symbols at the same place (aliases: glibc's write, __write,
 * __libc_write), the name a person would look for: fewer leading
 * underscores, then global over weak over local, then the shorter, then
 * the alphabetically first.  Deterministic whatever the table order.
 */
static int better(const struct sym_sort *a, const struct sym_sort *b,
		  const char *strtab)
{
	const char *na = strtab + a->sym.name, *nb = strtab + b->sym.name;
	size_t ua = strspn(na, "_"), ub = strspn(nb, "_");
	static const int rank[] = { [STB_LOCAL] = 2, [STB_GLOBAL] = 0,
				    [STB_WEAK] = 1 };
	int ra = a->bind <= STB_WEAK ? rank[a->bind] : 3;
	int rb = b->bind <= STB_WEAK ? rank[b->bind] : 3;
	size_t la, lb;

	if (ua != ub)
		return ua < ub ? -1 : 1;
	if (ra != rb)
		return ra < rb ? -1 : 1;
	la = strlen(na);
	lb = strlen(nb);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(na, nb);
}

static int cmp_sym(const void *pa, const void *pb, void *strtab)
{
	const struct sym_sort *a = pa, *b = pb;

	if (a->sym.vaddr != b->sym.vaddr)
		return a->sym.vaddr < b->sym.vaddr ? -1 : 1;
	if (a->sym.size != b->sym.size)
		return a->sym.size > b->sym.size ? -1 : 1;
	return better(a, b, strtab);
}

struct ivm_error *ivm_uelf_syms_build(const uint8_t *raw, size_t nr,
				      const char *strtab, size_t strsz,
				      struct ivm_uelf_syms **ret)
{
	struct ivm_uelf_syms *s = calloc(1, sizeof(*s));
	struct sym_sort *tmp = NULL;
	size_t i, n = 0, k;

	if (!s)
		return &ivm_enomem;
	s->strsz = strsz + 1;
	s->strtab = malloc(s->strsz);
	tmp = malloc((nr ? nr : 1) * sizeof(*tmp));
	if (!s->strtab || !tmp) {
		free(tmp);
		ivm_uelf_syms_destroy(s);
		return &ivm_enomem;
	}
	memcpy(s->strtab, strtab, strsz);
	s->strtab[strsz] = '\0';
	for (i = 0; i < nr; i++) {
		const uint8_t *p = raw + i * SYM_SIZE;
		uint32_t name = ivm_le32(p);
		uint8_t info = p[4], type = ELF64_ST_TYPE(info);
		uint16_t shndx = (uint16_t)ivm_le_load(p + 6, 2);
		uint64_t value = ivm_le64(p + 8), size = ivm_le64(p + 16);

		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || !size ||
		    shndx == SHN_UNDEF || shndx == SHN_ABS ||
		    name >= strsz || !s->strtab[name] ||
		    value + size < value)
			continue;
		tmp[n].sym = (struct ivm_uelf_sym){ value, size, name };
		tmp[n].bind = ELF64_ST_BIND(info);
		n++;
	}
	qsort_r(tmp, n, sizeof(*tmp), cmp_sym, s->strtab);
	s->syms = malloc((n ? n : 1) * sizeof(*s->syms));
	if (!s->syms) {
		free(tmp);
		ivm_uelf_syms_destroy(s);
		return &ivm_enomem;
	}
	/* Aliases (same start and size) keep the best name only. */
	for (i = 0, k = 0; i < n; i++) {
		if (k && s->syms[k - 1].vaddr == tmp[i].sym.vaddr &&
		    s->syms[k - 1].size == tmp[i].sym.size)
			continue;
		s->syms[k++] = tmp[i].sym;
	}
	s->nr = k;
	free(tmp);
	*ret = s;
	return NULL;
}

static int cmp_sym_plain(const void *pa, const void *pb)
{
	const struct ivm_uelf_sym *a = pa, *b = pb;

	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	/* a's entries come first in the array: stable by name offset. */
	return a->name < b->name ? -1 : a->name > b->name;
}

struct ivm_error *ivm_uelf_syms_merge(const struct ivm_uelf_syms *a,
				      const struct ivm_uelf_syms *b,
				      struct ivm_uelf_syms **ret)
{
	struct ivm_uelf_syms *s = calloc(1, sizeof(*s));
	size_t i, k, nr = a->nr + b->nr;

	if (!s)
		return &ivm_enomem;
	s->strsz = a->strsz + b->strsz;
	s->strtab = malloc(s->strsz);
	s->syms = malloc((nr ? nr : 1) * sizeof(*s->syms));
	if (!s->strtab || !s->syms) {
		ivm_uelf_syms_destroy(s);
		return &ivm_enomem;
	}
	memcpy(s->strtab, a->strtab, a->strsz);
	memcpy(s->strtab + a->strsz, b->strtab, b->strsz);
	memcpy(s->syms, a->syms, a->nr * sizeof(*s->syms));
	for (i = 0; i < b->nr; i++) {
		s->syms[a->nr + i] = b->syms[i];
		s->syms[a->nr + i].name += (uint32_t)a->strsz;
	}
	/* Names of a lie below a->strsz: sorting by name puts a's first. */
	qsort(s->syms, nr, sizeof(*s->syms), cmp_sym_plain);
	for (i = 0, k = 0; i < nr; i++) {
		if (k && s->syms[k - 1].vaddr == s->syms[i].vaddr &&
		    s->syms[k - 1].size == s->syms[i].size)
			continue;
		s->syms[k++] = s->syms[i];
	}
	s->nr = k;
	*ret = s;
	return NULL;
}

/* ---- .gnu_debugdata ---------------------------------------------------------- */

struct mem_file {
	const uint8_t *bytes;
	size_t size;
};

static struct ivm_error *mem_read(void *ctx, uint64_t off, void *buf,
				  size_t len)
{
	const struct mem_file *m = ctx;

	if (off > m->size || len > m->size - off)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"MiniDebugInfo: %zu bytes at %#llx are past its end",
					len, (unsigned long long)off);
	memcpy(buf, m->bytes + off, len);
	return NULL;
}

/* xz-decompress data into a buffer of at most IVM_UELF_MAX_MINIDEBUG. */
static struct ivm_error *unxz(const uint8_t *data, size_t len, uint8_t **out,
			      size_t *out_len)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	size_t cap = len * 4 > 65536 ? len * 4 : 65536;
	uint8_t *buf = NULL;
	lzma_ret r;

	if (lzma_stream_decoder(&strm, 256u << 20, 0) != LZMA_OK)
		return &ivm_enomem;
	strm.next_in = data;
	strm.avail_in = len;
	for (;;) {
		if (!buf || !strm.avail_out) {
			size_t used = buf ? cap : 0;
			uint8_t *n;

			if (buf)
				cap *= 2;
			if (cap > IVM_UELF_MAX_MINIDEBUG)
				cap = IVM_UELF_MAX_MINIDEBUG;
			if (buf && used >= cap) {
				lzma_end(&strm);
				free(buf);
				return ivm_error_create(IVM_ERROR_PROTOCOL,
							"MiniDebugInfo over %u bytes",
							IVM_UELF_MAX_MINIDEBUG);
			}
			n = realloc(buf, cap);
			if (!n) {
				lzma_end(&strm);
				free(buf);
				return &ivm_enomem;
			}
			buf = n;
			strm.next_out = buf + used;
			strm.avail_out = cap - used;
		}
		r = lzma_code(&strm, LZMA_FINISH);
		if (r == LZMA_STREAM_END)
			break;
		if (r != LZMA_OK) {
			lzma_end(&strm);
			free(buf);
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"MiniDebugInfo: not xz (%d)", r);
		}
	}
	*out_len = strm.total_out;
	*out = buf;
	lzma_end(&strm);
	return NULL;
}

/* The symbols of MiniDebugInfo, from the xz bytes of .gnu_debugdata. */
static struct ivm_error *minidebug_syms(const uint8_t *data, size_t len,
					struct ivm_uelf_syms **ret)
{
	struct ivm_uelf_section symtab, strtab;
	struct ivm_kmem_reader r;
	struct mem_file m;
	struct ivm_uelf inner;
	struct ivm_error *err;
	uint8_t *elf = NULL, *raw = NULL;
	char *str = NULL;
	size_t elf_len = 0;

	err = unxz(data, len, &elf, &elf_len);
	if (err)
		return err;
	m = (struct mem_file){ elf, elf_len };
	r = (struct ivm_kmem_reader){ mem_read, &m };
	/* Only its section headers matter; it need not have segments. */
	memset(&inner, 0, sizeof(inner));
	if (elf_len < 64 || memcmp(elf, ELFMAG, SELFMAG) ||
	    elf[EI_CLASS] != ELFCLASS64 || elf[EI_DATA] != ELFDATA2LSB) {
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "MiniDebugInfo is not a 64-bit ELF file");
		goto out;
	}
	inner.shoff = ivm_le64(elf + 40);
	inner.shentsize = (uint16_t)ivm_le_load(elf + 58, 2);
	inner.shnum = (uint16_t)ivm_le_load(elf + 60, 2);
	inner.shstrndx = (uint16_t)ivm_le_load(elf + 62, 2);
	err = ivm_uelf_find_section(&r, &inner, ".symtab", &symtab);
	if (!err)
		err = ivm_uelf_find_section(&r, &inner, ".strtab", &strtab);
	if (err) {
		if (err->code == IVM_ERROR_NOT_FOUND)
			err->code = IVM_ERROR_PROTOCOL;
		goto out;
	}
	if (symtab.type != SHT_SYMTAB || strtab.type != SHT_STRTAB ||
	    symtab.size / SYM_SIZE > IVM_UELF_MAX_SYMS ||
	    strtab.size > IVM_UELF_MAX_STRTAB || !strtab.size) {
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "MiniDebugInfo: a symbol table of %llu bytes, names of %llu",
				       (unsigned long long)symtab.size,
				       (unsigned long long)strtab.size);
		goto out;
	}
	raw = malloc(symtab.size ? symtab.size : 1);
	str = malloc(strtab.size);
	if (!raw || !str) {
		err = &ivm_enomem;
		goto out;
	}
	err = mem_read(&m, symtab.offset, raw, symtab.size);
	if (!err)
		err = mem_read(&m, strtab.offset, str, strtab.size);
	if (!err)
		err = ivm_uelf_syms_build(raw, symtab.size / SYM_SIZE, str,
					  strtab.size, ret);
out:
	free(raw);
	free(str);
	free(elf);
	return err;
}

struct ivm_error *ivm_uelf_read_gnu_debugdata(const struct ivm_kmem_reader *file,
					      const struct ivm_uelf *elf,
					      struct ivm_uelf_syms **ret)
{
	struct ivm_uelf_section sec;
	struct ivm_error *err;
	uint8_t *data;

	err = ivm_uelf_find_section(file, elf, ".gnu_debugdata", &sec);
	if (err)
		return err;
	if (sec.type != SHT_PROGBITS || !sec.size ||
	    sec.size > IVM_UELF_MAX_DEBUGDATA)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					".gnu_debugdata of %llu bytes",
					(unsigned long long)sec.size);
	data = malloc(sec.size);
	if (!data)
		return &ivm_enomem;
	err = file->read(file->ctx, sec.offset, data, sec.size);
	if (!err)
		err = minidebug_syms(data, sec.size, ret);
	free(data);
	return err;
}

void ivm_uelf_syms_destroy(struct ivm_uelf_syms *s)
{
	if (!s)
		return;
	free(s->syms);
	free(s->strtab);
	free(s);
}

const char *ivm_uelf_syms_lookup(const struct ivm_uelf_syms *s,
				 uint64_t vaddr, uint64_t *off)
{
	const struct ivm_uelf_sym *sym = ivm_uelf_syms_find(s, vaddr);

	if (!sym)
		return NULL;
	*off = vaddr - sym->vaddr;
	return s->strtab + sym->name;
}

const struct ivm_uelf_sym *ivm_uelf_syms_find(const struct ivm_uelf_syms *s,
					      uint64_t vaddr)
{
	size_t lo = 0, hi = s ? s->nr : 0, i;

	/* The last symbol starting at or before vaddr... */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->syms[mid].vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ...or an earlier, larger one that still covers it (nesting). */
	for (i = lo; i-- > 0 && lo - i <= 64;) {
		const struct ivm_uelf_sym *sym = &s->syms[i];

		if (vaddr - sym->vaddr < sym->size)
			return sym;
	}
	return NULL;
}

/* ---- symbols by name -------------------------------------------------- */

/* Symbols read per chunk while scanning a table for names. */
#define SYM_CHUNK 1024u

/* A symbol table and its strings, by file offset. */
struct table {
	uint64_t syms;		/* file offset of symbol 0 */
	uint64_t nr;		/* symbols */
	uint64_t strtab;	/* file offset */
	uint64_t strsz;
	enum ivm_uelf_table kind;
};

/* .symtab and .dynsym with their string tables, from the section headers. */
static struct ivm_error *tables_from_sections(const struct ivm_kmem_reader *file,
					      const struct ivm_uelf *elf,
					      struct table *symtab,
					      struct table *dynsym)
{
	struct ivm_error *err;
	uint8_t *sh;
	size_t i;

	err = uelf_read_shdrs(file, elf, &sh);
	if (err)
		return err;
	for (i = 0; !err && i < elf->shnum; i++) {
		const uint8_t *s = sh + i * 64, *str;
		uint32_t type = ivm_le32(s + 4), link = ivm_le32(s + 40);
		uint64_t offset = ivm_le64(s + 24), size = ivm_le64(s + 32);
		struct table *t = type == SHT_SYMTAB ? symtab :
				  type == SHT_DYNSYM ? dynsym : NULL;

		if (!t || t->nr)
			continue;
		str = link < elf->shnum ? sh + (size_t)link * 64 : NULL;
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
		t->kind = type == SHT_SYMTAB ? IVM_UELF_SYMTAB : IVM_UELF_DYNSYM;
	}
	free(sh);
	return err;
}

/* .dynsym through PT_DYNAMIC, as the loader finds it, by file offset. */
static struct ivm_error *table_from_dynamic(const struct ivm_kmem_reader *file,
					    const struct ivm_uelf *elf,
					    uint64_t bias, struct table *t)
{
	uint64_t symtab, nsyms, strtab, strsz;
	struct ivm_error *err;

	err = dynsym_table(file, elf, bias, &symtab, &nsyms, &strtab, &strsz);
	if (err)
		return err;
	if (!ivm_uelf_offset(elf, symtab, nsyms * SYM_SIZE, &t->syms) ||
	    !ivm_uelf_offset(elf, strtab, strsz, &t->strtab))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"dynamic symbols out of the file's segments");
	t->nr = nsyms;
	t->strsz = strsz;
	t->kind = IVM_UELF_DYNSYM;
	return NULL;
}

/*
 * One pass over table t for the names not found yet.  A global
 * definition wins over a local one; locals of one name count their
 * definitions (matches), so a caller can refuse an ambiguous one.
 */
static struct ivm_error *scan(const struct ivm_kmem_reader *file,
			      const struct table *t, const char *const *names,
			      size_t n, struct ivm_uelf_symbol *ret, bool *found,
			      const bool *done)
{
	uint8_t *syms = NULL;
	char *str = NULL;
	struct ivm_error *err;
	uint64_t i, k;
	size_t j;

	if (t->nr > IVM_UELF_MAX_SCAN || t->strsz > IVM_UELF_MAX_STRTAB ||
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
			struct ivm_uelf_symbol sym = {
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
					    IVM_UELF_MAX_NAME))
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

struct ivm_error *ivm_uelf_find_symbols(const struct ivm_kmem_reader *file,
					const struct ivm_uelf *elf,
					uint64_t bias, const char *const *names,
					size_t n, struct ivm_uelf_symbol *ret,
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
	err = tables_from_sections(file, elf, &symtab, &dynsym);
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
		err = table_from_dynamic(file, elf, bias, &dynsym);
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

