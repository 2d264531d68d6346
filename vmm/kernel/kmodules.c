// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/hexnum.h"
#include "kernel/kimage.h"
#include "kernel/kmodules.h"

/* MODULE_STATE_UNFORMED: still being loaded; its fields are not set. */
#define MODULE_STATE_UNFORMED 3

/* Where the walk finds things, from BTF. */
struct mod_offsets {
	uint64_t list, name, name_size, state, base, size, sect_attrs;
	uint64_t nsections, attrs, attr_size, attr_address, attr_name;
	bool has_sections;
	uint64_t num_orcs, orc_unwind_ip, orc_unwind;
	bool has_orc;
};

static struct ivm_error *member(const struct ivm_btf *btf, const char *type,
				const char *path, uint64_t *off, uint64_t *size)
{
	struct ivm_btf_member m;
	struct ivm_error *err = ivm_btf_member_find(btf, type, path, &m);

	if (err)
		return err;
	*off = m.offset;
	if (size)
		*size = m.size;
	return NULL;
}

static struct ivm_error *find_offsets(const struct ivm_btf *btf,
				      struct mod_offsets *o)
{
	struct ivm_error *err;
	uint64_t mem, mbase, msize;

	err = member(btf, "module", "list", &o->list, NULL);
	if (!err)
		err = member(btf, "module", "name", &o->name, &o->name_size);
	if (!err)
		err = member(btf, "module", "state", &o->state, NULL);
	if (!err)
		err = member(btf, "module", "sect_attrs", &o->sect_attrs, NULL);
	if (err)
		return ivm_error_wrap(err, "the guest kernel's struct module");
	/* Core memory: core_layout up to 6.3, mem[MOD_TEXT = 0] since 6.4. */
	err = member(btf, "module", "core_layout.base", &o->base, NULL);
	if (!err)
		err = member(btf, "module", "core_layout.size", &o->size, NULL);
	if (err) {
		ivm_error_destroy(err);
		err = member(btf, "module", "mem", &mem, NULL);
		if (!err)
			err = member(btf, "module_memory", "base", &mbase, NULL);
		if (!err)
			err = member(btf, "module_memory", "size", &msize, NULL);
		if (err)
			return ivm_error_wrap(err, "the guest kernel's module memory layout");
		o->base = mem + mbase;
		o->size = mem + msize;
	}
	/* Sections (sysfs attributes): optional, CONFIG_KALLSYMS + SYSFS. */
	err = member(btf, "module_sect_attrs", "nsections", &o->nsections,
		     NULL);
	if (!err)
		err = member(btf, "module_sect_attrs", "attrs", &o->attrs, NULL);
	if (!err)
		err = ivm_btf_type_size(btf, "module_sect_attr", &o->attr_size);
	if (!err)
		err = member(btf, "module_sect_attr", "address",
			     &o->attr_address, NULL);
	if (!err)
		err = member(btf, "module_sect_attr", "battr.attr.name",
			     &o->attr_name, NULL);
	o->has_sections = !err && o->attr_size > 0 && o->attr_size < 4096;
	ivm_error_destroy(err);
	/* ORC tables: x86-64 with CONFIG_UNWINDER_ORC. */
	err = member(btf, "module", "arch.num_orcs", &o->num_orcs, NULL);
	if (!err)
		err = member(btf, "module", "arch.orc_unwind_ip",
			     &o->orc_unwind_ip, NULL);
	if (!err)
		err = member(btf, "module", "arch.orc_unwind", &o->orc_unwind,
			     NULL);
	o->has_orc = !err;
	ivm_error_destroy(err);
	if (o->name_size > IVM_KMODULE_NAME_LEN)
		o->name_size = IVM_KMODULE_NAME_LEN;
	return NULL;
}

static struct ivm_error *read_u64(const struct ivm_kernel_layout *l,
				  uint64_t va, uint64_t *ret)
{
	uint8_t b[8];
	struct ivm_error *err = ivm_kernel_read(l, va, b, sizeof(b));

	if (!err)
		*ret = ivm_le64(b);
	return err;
}

/* A NUL-terminated string of at most cap - 1 bytes at va. */
static struct ivm_error *read_str(const struct ivm_kernel_layout *l,
				  uint64_t va, char *buf, size_t cap)
{
	struct ivm_error *err;
	size_t i;

	/* Byte by byte would be slow; a string may end near a page end. */
	err = ivm_kernel_read(l, va, buf, cap - 1);
	if (err) {
		ivm_error_destroy(err);
		for (i = 0; i + 1 < cap; i++) {
			err = ivm_kernel_read(l, va + i, &buf[i], 1);
			if (err)
				return i ? (ivm_error_destroy(err), buf[i] = 0,
					    NULL) : err;
			if (!buf[i])
				break;
		}
	}
	buf[cap - 1] = '\0';
	for (i = 0; buf[i]; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	return NULL;
}

/*
 * The GNU build-id note at va (the module's .note.gnu.build-id: one note,
 * a 160-bit id; a shorter id leaves bytes of the next section unused).
 */
static void read_build_id(const struct ivm_kernel_layout *l, uint64_t va,
			  char *hex)
{
	uint8_t note[12 + 4 + 20];
	struct ivm_error *err;

	hex[0] = '\0';
	err = ivm_kernel_read(l, va, note, sizeof(note));
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	ivm_notes_build_id(note, sizeof(note), hex);
}

static struct ivm_error *read_sections(const struct ivm_kernel_layout *l,
				       const struct mod_offsets *o,
				       uint64_t mod, struct ivm_kmodule *km)
{
	uint64_t sa, addr, name;
	uint32_t n, i;
	uint8_t b[4];
	struct ivm_error *err;

	err = read_u64(l, mod + o->sect_attrs, &sa);
	if (err || !sa)
		return err;	/* no sysfs sections: none known */
	if (!ivm_kernel_is_kernel_address(l, sa))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"module %s: sect_attrs 0x%llx is not a kernel address",
					km->name, (unsigned long long)sa);
	err = ivm_kernel_read(l, sa + o->nsections, b, sizeof(b));
	if (err)
		return err;
	n = ivm_le32(b);
	if (n > IVM_KMODULE_MAX_SECTIONS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"module %s has %u sections (at most %d)",
					km->name, n, IVM_KMODULE_MAX_SECTIONS);
	km->sections = calloc(n ? n : 1, sizeof(*km->sections));
	if (!km->sections)
		return &ivm_enomem;
	for (i = 0; i < n; i++) {
		uint64_t at = sa + o->attrs + (uint64_t)i * o->attr_size;
		struct ivm_kmodule_section *s = &km->sections[km->nr_sections];

		err = read_u64(l, at + o->attr_address, &addr);
		if (!err)
			err = ivm_kernel_read_ptr(l, at + o->attr_name, "section name",
				       &name);
		if (!err)
			err = read_str(l, name, s->name, sizeof(s->name));
		if (err)
			return ivm_error_wrap(err, "module %s section %u",
					      km->name, i);
		s->addr = addr;
		km->nr_sections++;
		if (!strcmp(s->name, ".note.gnu.build-id"))
			read_build_id(l, addr, km->build_id);
	}
	return NULL;
}

/* A module name: it becomes part of a file name when the .ko is sought. */
static bool name_ok(const char *f, size_t n, size_t cap)
{
	size_t i;

	if (!n || n >= cap)
		return false;
	for (i = 0; i < n; i++)
		if (!f[i] || !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "0123456789_-", f[i]))
			return false;
	return true;
}

/* Where its ORC tables are; left 0 when anything looks wrong. */
static void read_orc(const struct ivm_kernel_layout *l,
		     const struct mod_offsets *o, uint64_t mod,
		     struct ivm_kmodule *km)
{
	uint64_t ip, orc;
	struct ivm_error *err;
	uint8_t b[4];
	uint32_t n;

	err = ivm_kernel_read(l, mod + o->num_orcs, b, sizeof(b));
	if (!err)
		err = read_u64(l, mod + o->orc_unwind_ip, &ip);
	if (!err)
		err = read_u64(l, mod + o->orc_unwind, &orc);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	n = ivm_le32(b);
	if (!n || n > IVM_KMODULE_MAX_ORCS ||
	    !ivm_kernel_is_kernel_address(l, ip) ||
	    !ivm_kernel_is_kernel_address(l, orc))
		return;
	km->orc_unwind_ip = ip;
	km->orc_unwind = orc;
	km->num_orcs = n;
}

static struct ivm_error *read_module(const struct ivm_kernel_layout *l,
				     const struct mod_offsets *o, uint64_t mod,
				     struct ivm_kmodule *km, bool *skip)
{
	struct ivm_error *err;
	uint8_t b[4];
	uint64_t size;

	memset(km, 0, sizeof(*km));
	*skip = false;
	err = ivm_kernel_read(l, mod + o->state, b, sizeof(b));
	if (err)
		return err;
	if (ivm_le32(b) == MODULE_STATE_UNFORMED) {
		*skip = true;
		return NULL;
	}
	err = ivm_kernel_read(l, mod + o->name, km->name, o->name_size);
	if (err)
		return err;
	km->name[sizeof(km->name) - 1] = '\0';
	/* The reader's rule (ivm_kmodule_parse): else the profile loses it. */
	if (!name_ok(km->name, strlen(km->name), sizeof(km->name)))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"module at 0x%llx has a bad name",
					(unsigned long long)mod);
	err = read_u64(l, mod + o->base, &km->base);
	if (!err) {
		/* size is an unsigned int in both layouts. */
		err = ivm_kernel_read(l, mod + o->size, b, sizeof(b));
		size = ivm_le32(b);
	}
	if (err)
		return err;
	if (ivm_kernel_is_kernel_address(l, km->base) &&
	    km->base + size > km->base)
		km->size = size;
	else
		km->base = 0;
	if (o->has_orc)
		read_orc(l, o, mod, km);
	if (o->has_sections)
		return read_sections(l, o, mod, km);
	return NULL;
}

static void truncate_with(struct ivm_kmodules *m, struct ivm_error *err)
{
	m->truncated = true;
	m->error = err;
}

struct ivm_error *ivm_kmodules_read(const struct ivm_kernel_layout *layout,
				    const struct ivm_btf *btf,
				    struct ivm_kmodules **ret)
{
	struct mod_offsets o = { 0 };
	struct ivm_kmodules *m;
	struct ivm_error *err;
	uint64_t head, next;
	size_t cap = 0;

	err = ivm_kernel_symbol(layout, "modules", &head);
	if (err)
		return ivm_error_wrap(err, "the guest kernel's module list");
	err = find_offsets(btf, &o);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return &ivm_enomem;
	err = ivm_kernel_read_ptr(layout, head, "modules.next", &next);
	while (!err && next != head) {
		struct ivm_kmodule *km;
		bool skip;

		if (m->nr == IVM_KMODULES_MAX) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "more than %d modules (a loop?)",
					       IVM_KMODULES_MAX);
			break;
		}
		if (m->nr == cap) {
			struct ivm_kmodule *nm;

			cap = cap ? 2 * cap : 16;
			nm = realloc(m->mods, cap * sizeof(*nm));
			if (!nm) {
				ivm_kmodules_destroy(m);
				return &ivm_enomem;
			}
			m->mods = nm;
		}
		km = &m->mods[m->nr];
		err = read_module(layout, &o, next - o.list, km, &skip);
		if (err) {
			free(km->sections);
			if (err == &ivm_enomem) {
				ivm_kmodules_destroy(m);
				return err;
			}
			break;
		}
		if (!skip)
			m->nr++;
		err = ivm_kernel_read_ptr(layout, next, "module list", &next);
	}
	if (err)
		truncate_with(m, err);
	*ret = m;
	return NULL;
}

void ivm_kmodules_destroy(struct ivm_kmodules *mods)
{
	size_t i;

	if (!mods)
		return;
	for (i = 0; i < mods->nr; i++)
		free(mods->mods[i].sections);
	free(mods->mods);
	ivm_error_destroy(mods->error);
	free(mods);
}

char *ivm_kmodule_format(const struct ivm_kmodule *m)
{
	char *line;

	if (asprintf(&line, "%s 0x%llx 0x%llx %s", m->name,
		     (unsigned long long)m->base, (unsigned long long)m->size,
		     m->build_id[0] ? m->build_id : "-") < 0)
		return NULL;
	return line;
}

static bool section_name_ok(const char *name)
{
	return name[0] && !strpbrk(name, " ,=");
}

char **ivm_kmodule_format_sections(const struct ivm_kmodule *m, size_t *nr)
{
	char **lines = calloc(m->nr_sections + 1, sizeof(*lines));
	char buf[IVM_KMODULE_LINE_MAX + 1];
	size_t len = 0, n = 0, i;

	*nr = 0;
	if (!lines)
		return NULL;
	for (i = 0; i <= m->nr_sections; i++) {
		char item[IVM_KMODULE_SECTION_NAME_LEN + 24];
		int k = 0;

		if (i < m->nr_sections) {
			if (!section_name_ok(m->sections[i].name))
				continue;
			k = snprintf(item, sizeof(item), "%s=0x%llx",
				     m->sections[i].name,
				     (unsigned long long)m->sections[i].addr);
		}
		/* Flush the line when this item would not fit, or at the end. */
		if (len && (i == m->nr_sections ||
			    len + 1 + (size_t)k > IVM_KMODULE_LINE_MAX)) {
			lines[n] = strdup(buf);
			if (!lines[n])
				goto nomem;
			n++;
			len = 0;
		}
		if (i == m->nr_sections)
			break;
		if (!len)
			len = (size_t)snprintf(buf, sizeof(buf), "%s ", m->name);
		else
			buf[len++] = ',';
		if (len + (size_t)k > IVM_KMODULE_LINE_MAX) {
			len = 0;	/* cannot fit even alone: left out */
			continue;
		}
		memcpy(buf + len, item, (size_t)k + 1);
		len += (size_t)k;
	}
	*nr = n;
	return lines;
nomem:
	while (n--)
		free(lines[n]);
	free(lines);
	return NULL;
}

void ivm_kmodule_release(struct ivm_kmodule *m)
{
	free(m->sections);
	m->sections = NULL;
	m->nr_sections = 0;
}

/*
 * "0x" and lowercase hex digits, exactly n bytes: the one form
 * ivm_kmodule_format writes.
 */
static bool parse_hex(const char *s, size_t n, uint64_t *ret)
{
	size_t i;

	if (n < 3 || s[0] != '0' || s[1] != 'x')
		return false;
	for (i = 2; i < n; i++)
		if (s[i] >= 'A' && s[i] <= 'F')
			return false;
	return ivm_parse_hex64(s + 2, n - 2, ret);
}

/* The next space-delimited field of *p: start and length. */
static bool next_field(const char **p, const char **start, size_t *n)
{
	const char *s = *p, *e;

	if (!*s)
		return false;
	e = strchr(s, ' ');
	*start = s;
	*n = e ? (size_t)(e - s) : strlen(s);
	*p = e ? e + 1 : s + *n;
	return *n > 0;
}

struct ivm_error *ivm_kmodule_parse(const char *line, struct ivm_kmodule *m)
{
	const char *p = line, *f;
	size_t n, i;

	memset(m, 0, sizeof(*m));
	if (!next_field(&p, &f, &n) || !name_ok(f, n, sizeof(m->name)))
		goto bad;
	memcpy(m->name, f, n);
	if (!next_field(&p, &f, &n) || !parse_hex(f, n, &m->base) ||
	    !next_field(&p, &f, &n) || !parse_hex(f, n, &m->size) ||
	    !next_field(&p, &f, &n) || *p)
		goto bad;
	if (!(n == 1 && f[0] == '-')) {
		if (n != 40)
			goto bad;
		for (i = 0; i < n; i++)
			if (!f[i] || !strchr("0123456789abcdef", f[i]))
				goto bad;
		memcpy(m->build_id, f, n);
	}
	return NULL;
bad:
	memset(m, 0, sizeof(*m));
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"malformed module record in the profile");
}

struct ivm_error *ivm_kmodule_parse_sections(const char *line,
					     struct ivm_kmodule *mods,
					     size_t nr)
{
	struct ivm_kmodule_section *secs;
	struct ivm_kmodule *m = NULL;
	const char *p = line, *f, *q, *name;
	size_t n, name_len, i, count = 0;

	if (!next_field(&p, &name, &name_len) ||
	    !name_ok(name, name_len, IVM_KMODULE_NAME_LEN))
		goto bad;
	for (i = 0; i < nr && !m; i++)
		if (strlen(mods[i].name) == name_len &&
		    !memcmp(mods[i].name, name, name_len))
			m = &mods[i];
	if (!m || !next_field(&p, &f, &n) || *p)
		goto bad;
	for (i = 0; i <= n; i++)
		if (i == n || f[i] == ',')
			count++;
	if (m->nr_sections + count > IVM_KMODULE_MAX_SECTIONS)
		goto bad;
	secs = realloc(m->sections, (m->nr_sections + count) * sizeof(*secs));
	if (!secs)
		return &ivm_enomem;
	m->sections = secs;
	secs += m->nr_sections;
	for (i = 0, q = f; i < count; i++) {
		const char *end = memchr(q, ',', (size_t)(f + n - q));
		const char *eq;

		if (!end)
			end = f + n;
		eq = memchr(q, '=', (size_t)(end - q));
		if (!eq || eq == q ||
		    (size_t)(eq - q) >= sizeof(secs[i].name) ||
		    !parse_hex(eq + 1, (size_t)(end - eq - 1), &secs[i].addr))
			goto bad;	/* nothing counted yet: not appended */
		memset(secs[i].name, 0, sizeof(secs[i].name));
		memcpy(secs[i].name, q, (size_t)(eq - q));
		q = end + 1;
	}
	m->nr_sections += count;
	return NULL;
bad:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"malformed module_sections record in the profile");
}
