// SPDX-License-Identifier: MIT
/*
 * The helper wire protocol codec, its reading half: payload decoders and
 * the streaming frame decoder, over bytes from the other side (the guest's
 * helper is guest-controlled: every length and count is checked).  Pure:
 * no I/O, no allocation, no global state.  See proto.h for the format.
 */
#include <string.h>

#include "proto.h"

static uint16_t load_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* ---- reader ---------------------------------------------------------- */

/*
 * A bounded reader over one payload.  A read past the end marks it bad and
 * yields zeros, so a decoder reads all its fields and checks once.
 */
struct reader {
	const uint8_t *p;
	size_t len;
	size_t pos;
	bool bad;
};

static const uint8_t *reader_take(struct reader *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || n > r->len - r->pos) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->pos;
	r->pos += n;
	return p;
}

static uint8_t get_u8(struct reader *r)
{
	const uint8_t *p = reader_take(r, 1);

	return p ? *p : 0;
}

static uint16_t get_u16(struct reader *r)
{
	const uint8_t *p = reader_take(r, 2);

	return p ? load_le16(p) : 0;
}

static uint32_t get_u32(struct reader *r)
{
	const uint8_t *p = reader_take(r, 4);

	return p ? load_le32(p) : 0;
}

static uint64_t get_u64(struct reader *r)
{
	const uint8_t *p = reader_take(r, 8);

	return p ? load_le32(p) | (uint64_t)load_le32(p + 4) << 32 : 0;
}

/* A string of at most max bytes and no NUL. */
static void get_str(struct reader *r, size_t max, struct idlevm_str *ret)
{
	uint16_t n = get_u16(r);
	const uint8_t *p;

	ret->ptr = "";
	ret->len = 0;
	if (n > max) {
		r->bad = true;
		return;
	}
	p = reader_take(r, n);
	if (!p)
		return;
	if (memchr(p, '\0', n)) {
		r->bad = true;
		return;
	}
	ret->ptr = (const char *)p;
	ret->len = n;
}

static void reader_init(struct reader *r, const uint8_t *p, size_t len)
{
	r->p = p;
	r->len = p ? len : 0;
	r->pos = 0;
	r->bad = false;
}

/* The whole payload was read, and nothing but it. */
static bool reader_done(const struct reader *r)
{
	return !r->bad && r->pos == r->len;
}

/* ---- payload decoders ------------------------------------------------ */

bool idlevm_decode_error(const uint8_t *p, size_t len,
			 struct idlevm_error_msg *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->errnum = (int32_t)get_u32(&r);
	get_str(&r, IVM_PROTO_MAX_TEXT, &ret->text);
	/* errno values are small and positive; anything else is made up. */
	return reader_done(&r) && ret->errnum > 0 && ret->errnum < 4096;
}

bool idlevm_decode_hello_req(const uint8_t *p, size_t len,
			     struct idlevm_hello_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->max_version = get_u16(&r);
	ret->caps = get_u32(&r);
	return reader_done(&r) && ret->max_version >= 1;
}

bool idlevm_decode_hello_rep(const uint8_t *p, size_t len,
			     struct idlevm_hello_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->version = get_u16(&r);
	ret->caps = get_u32(&r);
	ret->ncpus = get_u32(&r);
	ret->flags = get_u32(&r);
	ret->kaslr_offset = get_u64(&r);
	ret->pid = get_u32(&r);
	get_str(&r, IVM_PROTO_MAX_TEXT, &ret->kernel_release);
	get_str(&r, IVM_PROTO_MAX_TEXT, &ret->helper_version);
	/* Linux caps CPUs at 8192 (CONFIG_NR_CPUS max). */
	return reader_done(&r) && ret->version >= 1 && ret->ncpus >= 1 &&
	       ret->ncpus <= 8192 && !(ret->flags & ~IVM_HELLO_F_KASLR_KNOWN);
}

bool idlevm_decode_ping(const uint8_t *p, size_t len, struct idlevm_ping *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->cookie = get_u64(&r);
	ret->data_len = get_u16(&r);
	ret->data = NULL;
	if (ret->data_len > IVM_PROTO_MAX_PING_DATA)
		return false;
	ret->data = reader_take(&r, ret->data_len);
	return reader_done(&r);
}

bool idlevm_decode_pin_req(const uint8_t *p, size_t len,
			   struct idlevm_pin_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->tid = (int32_t)get_u32(&r);
	ret->cpu = get_u32(&r);
	ret->lease_ms = get_u32(&r);
	return reader_done(&r) && ret->tid > 0;
}

bool idlevm_decode_pin_rep(const uint8_t *p, size_t len,
			   struct idlevm_pin_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->lease_ms = get_u32(&r);
	ret->prev_cpu = get_u32(&r);
	return reader_done(&r) && ret->lease_ms <= IVM_PROTO_LEASE_MAX_MS;
}

bool idlevm_decode_unpin_req(const uint8_t *p, size_t len,
			     struct idlevm_unpin_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->tid = (int32_t)get_u32(&r);
	return reader_done(&r) && ret->tid > 0;
}

bool idlevm_decode_lease_rep(const uint8_t *p, size_t len,
			     struct idlevm_lease_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->held_ns = get_u64(&r);
	ret->flags = get_u32(&r);
	return reader_done(&r) && !(ret->flags & ~IVM_LEASE_F_EXPIRED);
}

bool idlevm_decode_hold_req(const uint8_t *p, size_t len,
			    struct idlevm_hold_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->cpu = get_u32(&r);
	ret->lease_ms = get_u32(&r);
	return reader_done(&r);
}

bool idlevm_decode_hold_rep(const uint8_t *p, size_t len,
			    struct idlevm_hold_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->lease_ms = get_u32(&r);
	return reader_done(&r) && ret->lease_ms <= IVM_PROTO_LEASE_MAX_MS;
}

bool idlevm_decode_release_req(const uint8_t *p, size_t len,
			       struct idlevm_release_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->cpu = get_u32(&r);
	return reader_done(&r);
}

bool idlevm_decode_maps_req(const uint8_t *p, size_t len,
			    struct idlevm_maps_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->pid = (int32_t)get_u32(&r);
	ret->first = get_u32(&r);
	return reader_done(&r) && ret->pid > 0;
}

bool idlevm_decode_hold_pin_req(const uint8_t *p, size_t len,
				struct idlevm_hold_pin_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->cpu = get_u32(&r);
	ret->tid = (int32_t)get_u32(&r);
	ret->lease_us = get_u32(&r);
	return reader_done(&r);
}

bool idlevm_decode_hold_pin_rep(const uint8_t *p, size_t len,
				struct idlevm_hold_pin_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->lease_us = get_u32(&r);
	ret->flags = get_u32(&r);
	ret->pin_errnum = (int32_t)get_u32(&r);
	ret->prev_cpu = get_u32(&r);
	ret->holder_tid = get_u32(&r);
	/* A granted lease, a known flag, an errno (not both pinned and not),
	 * and a tid the guest kernel could have (PID_MAX_LIMIT is 2^22). */
	return reader_done(&r) && ret->lease_us >= 1 &&
	       ret->lease_us <= IVM_PROTO_HOLD_PIN_LEASE_MAX_US &&
	       !(ret->flags & ~IVM_HOLD_PIN_F_PINNED) &&
	       ret->pin_errnum >= 0 && ret->pin_errnum < 4096 &&
	       !((ret->flags & IVM_HOLD_PIN_F_PINNED) && ret->pin_errnum) &&
	       ret->holder_tid >= 1 && ret->holder_tid <= (1u << 22);
}

bool idlevm_decode_stats_req(const uint8_t *p, size_t len)
{
	(void)p;
	return len == 0;
}

/* A counter's name: 1 to IVM_PROTO_MAX_STAT_NAME bytes of [a-z0-9_]. */
static bool stat_name_ok(const struct idlevm_str *name)
{
	uint16_t i;

	if (!name->len || name->len > IVM_PROTO_MAX_STAT_NAME)
		return false;
	for (i = 0; i < name->len; i++) {
		char c = name->ptr[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

bool idlevm_decode_stats_rep(const uint8_t *p, size_t len,
			     struct idlevm_stats_rep *ret)
{
	struct reader r;
	uint32_t i;

	reader_init(&r, p, len);
	ret->count = get_u32(&r);
	if (r.bad || ret->count > IVM_PROTO_MAX_STATS) {
		ret->count = 0;
		return false;
	}
	for (i = 0; i < ret->count; i++) {
		get_str(&r, IVM_PROTO_MAX_STAT_NAME, &ret->stat[i].name);
		ret->stat[i].value = get_u64(&r);
		if (r.bad || !stat_name_ok(&ret->stat[i].name)) {
			ret->count = 0;
			return false;
		}
	}
	return reader_done(&r);
}

bool idlevm_decode_maps_rep(const uint8_t *p, size_t len,
			    struct idlevm_maps_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->first = get_u32(&r);
	ret->count = get_u32(&r);
	ret->flags = get_u32(&r);
	ret->entries = NULL;
	ret->entries_len = 0;
	ret->pos = 0;
	ret->seen = 0;
	if (r.bad || (ret->flags & ~IVM_MAPS_F_MORE))
		return false;
	/* Every entry takes at least IVM_MAP_ENTRY_FIXED bytes: a count the
	 * payload cannot hold is a lie, caught before anyone loops on it. */
	if (ret->count > (len - r.pos) / IVM_MAP_ENTRY_FIXED)
		return false;
	ret->entries = p + r.pos;
	ret->entries_len = len - r.pos;
	return true;
}

int idlevm_maps_rep_next(struct idlevm_maps_rep *m,
			 struct idlevm_map_entry *ret)
{
	struct reader r;
	const uint8_t *id;

	if (m->seen == m->count)
		return m->pos == m->entries_len ? 0 : -1;
	reader_init(&r, m->entries, m->entries_len);
	r.pos = m->pos;
	ret->start = get_u64(&r);
	ret->end = get_u64(&r);
	ret->offset = get_u64(&r);
	ret->inode = get_u64(&r);
	ret->dev_major = get_u32(&r);
	ret->dev_minor = get_u32(&r);
	ret->prot = get_u32(&r);
	ret->build_id_len = get_u8(&r);
	if (ret->build_id_len > IVM_PROTO_MAX_BUILD_ID)
		return -1;
	id = reader_take(&r, ret->build_id_len);
	if (id)
		memcpy(ret->build_id, id, ret->build_id_len);
	get_str(&r, IVM_PROTO_MAX_PATH, &ret->path);
	if (r.bad || ret->start > ret->end ||
	    (ret->prot & ~(IVM_MAP_R | IVM_MAP_W | IVM_MAP_X | IVM_MAP_SHARED)))
		return -1;
	m->pos = r.pos;
	m->seen++;
	return 1;
}

bool idlevm_decode_readahead_req(const uint8_t *p, size_t len,
				 struct idlevm_readahead_req *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->pid = (int32_t)get_u32(&r);
	ret->inode = get_u64(&r);
	ret->offset = get_u64(&r);
	ret->length = get_u64(&r);
	get_str(&r, IVM_PROTO_MAX_PATH, &ret->path);
	return reader_done(&r) && ret->pid > 0 && ret->length &&
	       ret->length <= IVM_READAHEAD_MAX_LEN &&
	       ret->offset + ret->length > ret->offset &&
	       ret->path.len && ret->path.ptr[0] == '/';
}

bool idlevm_decode_readahead_rep(const uint8_t *p, size_t len,
				 struct idlevm_readahead_rep *ret)
{
	struct reader r;

	reader_init(&r, p, len);
	ret->bytes = get_u64(&r);
	return reader_done(&r) && ret->bytes <= IVM_READAHEAD_MAX_LEN;
}

/* ---- streaming decoder ----------------------------------------------- */

void idlevm_decoder_init(struct idlevm_decoder *d)
{
	d->len = 0;
	d->start = 0;
	d->skip_reason = IVM_SKIP_NO_MAGIC;
	d->skipped = 0;
	d->total_skipped = 0;
	d->total_frames = 0;
}

void idlevm_decoder_reset(struct idlevm_decoder *d)
{
	d->len = 0;
	d->start = 0;
}

static void decoder_compact(struct idlevm_decoder *d)
{
	if (!d->start)
		return;
	memmove(d->buf, d->buf + d->start, d->len - d->start);
	d->len -= d->start;
	d->start = 0;
}

size_t idlevm_decoder_space(const struct idlevm_decoder *d)
{
	return sizeof(d->buf) - (d->len - d->start);
}

size_t idlevm_decoder_pending(const struct idlevm_decoder *d)
{
	return d->len - d->start;
}

uint8_t *idlevm_decoder_tail(struct idlevm_decoder *d)
{
	decoder_compact(d);
	return d->buf + d->len;
}

void idlevm_decoder_commit(struct idlevm_decoder *d, size_t n)
{
	if (n > sizeof(d->buf) - d->len)
		n = sizeof(d->buf) - d->len;
	d->len += n;
}

size_t idlevm_decoder_feed(struct idlevm_decoder *d, const void *data,
			   size_t len)
{
	size_t space = idlevm_decoder_space(d);

	if (len > space)
		len = space;
	memcpy(idlevm_decoder_tail(d), data, len);
	d->len += len;
	return len;
}

static const uint8_t magic_bytes[4] = { 0x49, 0x56, 0x4d, 0x48 };

/*
 * Where the next possible frame starts in p[0, n): the first full magic, or
 * a tail that is a prefix of the magic (more bytes may complete it), or n.
 */
static size_t find_magic(const uint8_t *p, size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (p[i] != magic_bytes[0])
			continue;
		for (k = 1; k < 4 && i + k < n; k++)
			if (p[i + k] != magic_bytes[k])
				break;
		if (k == 4 || i + k == n)
			return i;
	}
	return n;
}

static enum idlevm_decode_event decoder_skip(struct idlevm_decoder *d,
					     enum idlevm_skip_reason reason,
					     size_t n)
{
	d->start += n;
	d->skip_reason = reason;
	d->skipped = n;
	d->total_skipped += n;
	return IVM_PROTO_EV_SKIPPED;
}

enum idlevm_decode_event idlevm_decoder_next(struct idlevm_decoder *d,
					     struct idlevm_frame *ret)
{
	const uint8_t *p = d->buf + d->start;
	size_t avail = d->len - d->start, at;
	struct idlevm_frame_header *h = &ret->hdr;
	uint32_t crc, want;
	static const uint8_t zero[4];

	ret->payload = NULL;
	at = find_magic(p, avail);
	if (at)
		return decoder_skip(d, IVM_SKIP_NO_MAGIC, at);
	if (avail < IVM_PROTO_HEADER_SIZE) {
		decoder_compact(d);
		return IVM_PROTO_EV_NEED_MORE;
	}
	h->version = load_le16(p + 4);
	h->type = load_le16(p + 6);
	h->flags = load_le16(p + 8);
	h->id = load_le32(p + 12);
	h->length = load_le32(p + 16);
	/*
	 * A bad header: drop the first magic byte and whatever follows up to
	 * the next magic, so the scan resumes at the next candidate frame.
	 */
	if ((h->flags & ~IVM_PROTO_F_KNOWN) || load_le16(p + 10) ||
	    h->length > IVM_PROTO_MAX_PAYLOAD)
		return decoder_skip(d, IVM_SKIP_BAD_HEADER,
				    1 + find_magic(p + 1, avail - 1));
	if (avail - IVM_PROTO_HEADER_SIZE < h->length) {
		decoder_compact(d);
		return IVM_PROTO_EV_NEED_MORE;
	}
	want = load_le32(p + 20);
	crc = idlevm_crc32c(0, p, 20);
	crc = idlevm_crc32c(crc, zero, 4);
	crc = idlevm_crc32c(crc, p + IVM_PROTO_HEADER_SIZE, h->length);
	if (crc != want)
		return decoder_skip(d, IVM_SKIP_BAD_CHECKSUM,
				    1 + find_magic(p + 1, avail - 1));
	d->start += IVM_PROTO_HEADER_SIZE + h->length;
	if (h->version < IVM_PROTO_VERSION_MIN ||
	    h->version > IVM_PROTO_VERSION)
		return IVM_PROTO_EV_BAD_VERSION;
	ret->payload = p + IVM_PROTO_HEADER_SIZE;
	d->total_frames++;
	return IVM_PROTO_EV_FRAME;
}

size_t idlevm_decoder_abandon(struct idlevm_decoder *d)
{
	const uint8_t *p = d->buf + d->start;
	size_t avail = d->len - d->start;

	if (!avail)
		return 0;
	decoder_skip(d, IVM_SKIP_STALE, 1 + find_magic(p + 1, avail - 1));
	return d->skipped;
}
