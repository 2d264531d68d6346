// SPDX-License-Identifier: MIT
/*
 * Domain discovery through libvirt, and the few facts idlevm needs from the
 * live domain XML.  See libvirt_domain.h.
 *
 * The XML is read by a small tag scanner rather than libxml2: we need two
 * attributes of two child elements of <channel>, and the scanner keeps the
 * host tool free of another library (libvirt links libxml2 but does not
 * export it to us).  It handles what libvirt emits and XML allows around it:
 * comments, processing instructions, CDATA, both quote styles, '>' inside
 * attribute values, and the predefined and numeric character references.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/virterror.h>

#include "access/libvirt_domain.h"

#define DEFAULT_URI "qemu:///system"

struct ivm_libvirt_domain {
	virConnectPtr conn;
	virDomainPtr dom;
	char *name;
};

static void ignore_libvirt_error(void *opaque, virErrorPtr err)
{
	(void)opaque;
	(void)err;
}

struct ivm_error *ivm_libvirt_error(const char *what)
{
	virErrorPtr e = virGetLastError();

	return ivm_error_create(IVM_ERROR_LIBVIRT, "%s: %s", what,
				e && e->message ? e->message :
				"unknown libvirt error");
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of conn's running domains, sorted. */
static struct ivm_error *running_names(virConnectPtr conn, char ***ret,
				       size_t *nr)
{
	virDomainPtr *doms = NULL;
	char **names;
	size_t k = 0;
	int n, i;

	*ret = NULL;
	*nr = 0;
	n = virConnectListAllDomains(conn, &doms,
				     VIR_CONNECT_LIST_DOMAINS_ACTIVE);
	if (n < 0)
		return ivm_libvirt_error("listing domains");
	names = calloc((size_t)n + 1, sizeof(*names));
	for (i = 0; i < n; i++) {
		if (names && (names[k] = strdup(virDomainGetName(doms[i]))))
			k++;
		virDomainFree(doms[i]);
	}
	free(doms);
	if (!names || k < (size_t)n) {
		ivm_libvirt_free_names(names, k);
		return &ivm_enomem;
	}
	qsort(names, k, sizeof(*names), name_cmp);
	*ret = names;
	*nr = k;
	return NULL;
}

void ivm_libvirt_free_names(char **names, size_t nr)
{
	while (names && nr--)
		free(names[nr]);
	free(names);
}

struct ivm_error *ivm_libvirt_running_domains(const char *uri, char ***ret,
					      size_t *nr)
{
	struct ivm_error *err;
	virConnectPtr conn;

	virSetErrorFunc(NULL, ignore_libvirt_error);
	conn = virConnectOpen(uri ? uri : DEFAULT_URI);
	if (!conn)
		return ivm_error_wrap(ivm_libvirt_error("cannot connect to libvirt"),
				      "%s", uri ? uri : DEFAULT_URI);
	err = running_names(conn, ret, nr);
	virConnectClose(conn);
	return err;
}

/* "no domain named X (running: a, b)" with the names libvirt has. */
static struct ivm_error *no_such_domain(virConnectPtr conn, const char *name)
{
	char **names = NULL, *list = NULL;
	size_t nr = 0, len = 0, i;
	struct ivm_error *err;
	FILE *f;

	ivm_error_destroy(running_names(conn, &names, &nr));
	f = open_memstream(&list, &len);
	for (i = 0; f && i < nr; i++)
		fprintf(f, "%s%s", i ? ", " : "", names[i]);
	if (f)
		fclose(f);
	ivm_libvirt_free_names(names, nr);
	if (nr && list) {
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "no domain named '%s' (running domains: %s)",
				       name, list);
		free(list);
		return err;
	}
	free(list);
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no domain named '%s' (no domain is running)",
				name);
}

struct ivm_error *ivm_libvirt_domain_open(const char *uri, const char *name,
					  struct ivm_libvirt_domain **ret)
{
	struct ivm_libvirt_domain *d;
	struct ivm_error *err;
	virErrorPtr e;
	int active;

	/* libvirt prints every error on stderr by default; ours are
	 * reported once, with context, by the caller. */
	virSetErrorFunc(NULL, ignore_libvirt_error);
	if (!uri)
		uri = DEFAULT_URI;
	d = calloc(1, sizeof(*d));
	if (!d)
		return &ivm_enomem;
	d->conn = virConnectOpen(uri);
	if (!d->conn) {
		err = ivm_libvirt_error("cannot connect to libvirt");
		err = ivm_error_wrap(err, "%s", uri);
		free(d);
		return err;
	}
	d->dom = virDomainLookupByName(d->conn, name);
	if (!d->dom) {
		e = virGetLastError();
		if (e && e->code == VIR_ERR_NO_DOMAIN)
			err = no_such_domain(d->conn, name);
		else
			err = ivm_libvirt_error("looking up domain");
		ivm_libvirt_domain_close(d);
		return err;
	}
	active = virDomainIsActive(d->dom);
	if (active < 0) {
		err = ivm_libvirt_error("querying domain state");
		ivm_libvirt_domain_close(d);
		return err;
	}
	if (!active) {
		ivm_libvirt_domain_close(d);
		return ivm_error_create(IVM_ERROR_INVALID,
					"domain %s is not running", name);
	}
	d->name = strdup(name);
	if (!d->name) {
		ivm_libvirt_domain_close(d);
		return &ivm_enomem;
	}
	*ret = d;
	return NULL;
}

void ivm_libvirt_domain_close(struct ivm_libvirt_domain *d)
{
	if (!d)
		return;
	if (d->dom)
		virDomainFree(d->dom);
	if (d->conn)
		virConnectClose(d->conn);
	free(d->name);
	free(d);
}

virConnectPtr ivm_libvirt_domain_conn(struct ivm_libvirt_domain *d)
{
	return d->conn;
}

virDomainPtr ivm_libvirt_domain_ptr(struct ivm_libvirt_domain *d)
{
	return d->dom;
}

const char *ivm_libvirt_domain_name(struct ivm_libvirt_domain *d)
{
	return d->name;
}

/* ---- a small XML tag scanner ----------------------------------------- */

struct xml_tag {
	bool end;		/* </name> */
	bool empty;		/* <name/> */
	const char *name;
	size_t name_len;
	const char *attrs;	/* between the name and '>' or '/>' */
	size_t attrs_len;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_name_char(char c)
{
	return c && !is_space(c) && c != '>' && c != '/' && c != '=' &&
	       c != '<' && c != '\'' && c != '"';
}

/* After the first occurrence of what in [p, end), or NULL. */
static const char *skip_past(const char *p, const char *end,
			     const char *what)
{
	size_t n = strlen(what);

	for (; (size_t)(end - p) >= n; p++)
		if (!memcmp(p, what, n))
			return p + n;
	return NULL;
}

enum scan {
	SCAN_TAG,
	SCAN_END,	/* no more tags */
	SCAN_BAD,
};

/*
 * The next element tag at or after *pp, skipping text, comments, CDATA,
 * processing instructions and declarations.  *pp moves past it.
 */
static enum scan xml_next_tag(const char **pp, const char *end,
			      struct xml_tag *tag)
{
	const char *p = *pp, *q;
	char quote;

	for (;;) {
		p = memchr(p, '<', end - p);
		if (!p)
			return SCAN_END;
		if (end - p >= 4 && !memcmp(p, "<!--", 4)) {
			p = skip_past(p + 4, end, "-->");
		} else if (end - p >= 9 && !memcmp(p, "<![CDATA[", 9)) {
			p = skip_past(p + 9, end, "]]>");
		} else if (end - p >= 2 && p[1] == '?') {
			p = skip_past(p + 2, end, "?>");
		} else if (end - p >= 2 && p[1] == '!') {
			/* <!DOCTYPE ...>: no internal subsets from libvirt */
			p = skip_past(p + 2, end, ">");
		} else {
			break;
		}
		if (!p)
			return SCAN_BAD;
	}
	p++;
	tag->end = p < end && *p == '/';
	if (tag->end)
		p++;
	tag->name = p;
	while (p < end && is_name_char(*p))
		p++;
	tag->name_len = p - tag->name;
	if (!tag->name_len)
		return SCAN_BAD;
	tag->attrs = p;
	/* The tag ends at the first '>' outside quotes. */
	for (quote = 0, q = p; q < end; q++) {
		if (quote) {
			if (*q == quote)
				quote = 0;
		} else if (*q == '\'' || *q == '"') {
			quote = *q;
		} else if (*q == '>') {
			break;
		} else if (*q == '<') {
			return SCAN_BAD;
		}
	}
	if (q == end)
		return SCAN_BAD;
	tag->empty = q > p && q[-1] == '/' && !quote;
	tag->attrs_len = (q - p) - (tag->empty ? 1 : 0);
	*pp = q + 1;
	return SCAN_TAG;
}

static bool name_is(const char *p, size_t len, const char *name)
{
	return strlen(name) == len && !memcmp(p, name, len);
}

/*
 * The raw (still escaped) value of attribute name of tag.  false when
 * absent; SCAN_BAD-worthy syntax also reads as absent, which is the safe
 * answer for a lookup.
 */
static bool xml_attr(const struct xml_tag *tag, const char *name,
		     const char **val, size_t *val_len)
{
	const char *p = tag->attrs, *end = tag->attrs + tag->attrs_len;

	while (p < end) {
		const char *an, *v;
		size_t an_len;
		char quote;

		while (p < end && is_space(*p))
			p++;
		an = p;
		while (p < end && is_name_char(*p))
			p++;
		an_len = p - an;
		while (p < end && is_space(*p))
			p++;
		if (!an_len || p == end || *p != '=')
			return false;
		p++;
		while (p < end && is_space(*p))
			p++;
		if (p == end || (*p != '\'' && *p != '"'))
			return false;
		quote = *p++;
		v = memchr(p, quote, end - p);
		if (!v)
			return false;
		if (name_is(an, an_len, name)) {
			*val = p;
			*val_len = v - p;
			return true;
		}
		p = v + 1;
	}
	return false;
}

/* Decode character references; NULL on a malformed one or no memory. */
static char *xml_unescape(const char *s, size_t len, bool *bad)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {
		{ "lt;", '<' }, { "gt;", '>' }, { "amp;", '&' },
		{ "apos;", '\'' }, { "quot;", '"' },
	};
	char *out = malloc(len + 1), *o = out;
	size_t i = 0, k;

	*bad = false;
	if (!out)
		return NULL;
	while (i < len) {
		if (s[i] != '&') {
			*o++ = s[i++];
			continue;
		}
		i++;
		for (k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
			size_t n = strlen(named[k].name);

			if (len - i >= n && !memcmp(s + i, named[k].name, n)) {
				*o++ = named[k].c;
				i += n;
				break;
			}
		}
		if (k < sizeof(named) / sizeof(named[0]))
			continue;
		if (i < len && s[i] == '#') {
			unsigned long v = 0;
			bool hex = i + 1 < len && s[i + 1] == 'x';
			size_t digits = 0;

			i += hex ? 2 : 1;
			for (; i < len && s[i] != ';' && digits < 8;
			     i++, digits++) {
				int d;

				if (s[i] >= '0' && s[i] <= '9')
					d = s[i] - '0';
				else if (hex && (s[i] | 0x20) >= 'a' &&
					 (s[i] | 0x20) <= 'f')
					d = (s[i] | 0x20) - 'a' + 10;
				else
					break;
				v = v * (hex ? 16 : 10) + d;
			}
			/* Only plain ASCII makes sense in a socket path; a
			 * NUL would silently cut it. */
			if (digits && i < len && s[i] == ';' && v > 0 &&
			    v < 0x80) {
				*o++ = (char)v;
				i++;
				continue;
			}
		}
		*bad = true;
		free(out);
		return NULL;
	}
	*o = '\0';
	return out;
}

static bool attr_equals(const struct xml_tag *tag, const char *name,
			const char *want)
{
	const char *v;
	size_t len;
	bool bad, eq;
	char *s;

	if (!xml_attr(tag, name, &v, &len))
		return false;
	s = xml_unescape(v, len, &bad);
	if (!s)
		return false;
	eq = !strcmp(s, want);
	free(s);
	return eq;
}

/* The facts gathered inside one <channel> element. */
struct channel {
	bool is_unix;
	bool name_matches;
	const char *path;	/* raw attribute value */
	size_t path_len;
};

struct ivm_error *ivm_libvirt_channel_path_from_xml(const char *xml,
						    const char *channel_name,
						    char **ret)
{
	size_t len = strlen(xml), guard;
	const char *p = xml, *end = xml + len;
	struct channel ch = { 0 };
	unsigned int depth = 0;	/* inside <channel>: 1 + nesting below it */
	struct xml_tag tag;
	enum scan s;

	/* Every iteration consumes at least "<x>": bounded by the length. */
	for (guard = 0; guard <= len; guard++) {
		s = xml_next_tag(&p, end, &tag);
		if (s == SCAN_END)
			break;
		if (s == SCAN_BAD)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"malformed domain XML near offset %zu",
						(size_t)(p - xml));
		if (!depth) {
			if (tag.end || !name_is(tag.name, tag.name_len,
						"channel"))
				continue;
			memset(&ch, 0, sizeof(ch));
			ch.is_unix = attr_equals(&tag, "type", "unix");
			if (tag.empty)
				continue;
			depth = 1;
			continue;
		}
		if (tag.end) {
			if (--depth)
				continue;
			if (ch.is_unix && ch.name_matches && ch.path) {
				bool bad;

				*ret = xml_unescape(ch.path, ch.path_len, &bad);
				if (!*ret)
					return bad ? ivm_error_create(
							     IVM_ERROR_PROTOCOL,
							     "malformed channel path in domain XML") :
						     &ivm_enomem;
				if (!**ret) {
					free(*ret);
					break;
				}
				return NULL;
			}
			continue;
		}
		if (depth == 1 && name_is(tag.name, tag.name_len, "source")) {
			if (!xml_attr(&tag, "path", &ch.path, &ch.path_len))
				ch.path = NULL;
		} else if (depth == 1 &&
			   name_is(tag.name, tag.name_len, "target")) {
			ch.name_matches = attr_equals(&tag, "type", "virtio") &&
					  attr_equals(&tag, "name",
						      channel_name);
		}
		if (!tag.empty)
			depth++;
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no unix virtio channel named %s",
				channel_name);
}

struct ivm_error *ivm_libvirt_channel_path(virDomainPtr dom,
					    const char *dom_name,
					    const char *channel_name,
					    char **ret)
{
	struct ivm_error *err;
	char *xml = virDomainGetXMLDesc(dom, 0);

	if (!xml)
		return ivm_libvirt_error("reading domain XML");
	err = ivm_libvirt_channel_path_from_xml(xml, channel_name, ret);
	free(xml);
	if (err && err->code == IVM_ERROR_NOT_FOUND)
		return ivm_error_wrap(err, "domain %s", dom_name);
	return err;
}
