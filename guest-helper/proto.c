// SPDX-License-Identifier: MIT
/*
 * The helper wire protocol codec: frames, payloads, the streaming decoder.
 * Pure: no I/O, no allocation, no global state; linked into the static guest
 * helper and into the host tool.  See proto.h for the format.
 */
#include <string.h>

#include "proto.h"

/* CRC32C, reflected polynomial 0x82f63b78, one table lookup per byte. */
static const uint32_t crc32c_table[256] = {
	0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4,
	0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb,
	0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b,
	0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24,
	0x105ec76f, 0xe235446c, 0xf165b798, 0x030e349b,
	0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
	0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54,
	0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b,
	0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
	0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35,
	0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5,
	0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
	0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45,
	0xf779deae, 0x05125dad, 0x1642ae59, 0xe4292d5a,
	0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a,
	0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595,
	0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48,
	0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
	0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687,
	0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198,
	0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927,
	0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38,
	0xdbfc821c, 0x2997011f, 0x3ac7f2eb, 0xc8ac71e8,
	0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
	0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096,
	0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789,
	0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
	0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46,
	0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9,
	0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
	0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36,
	0x3cdb9bdd, 0xceb018de, 0xdde0eb2a, 0x2f8b6829,
	0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c,
	0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93,
	0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043,
	0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
	0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3,
	0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc,
	0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c,
	0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033,
	0xa24bb5a6, 0x502036a5, 0x4370c551, 0xb11b4652,
	0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
	0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d,
	0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982,
	0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
	0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622,
	0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2,
	0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
	0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530,
	0x0417b1db, 0xf67c32d8, 0xe52cc12c, 0x1747422f,
	0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff,
	0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0,
	0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f,
	0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
	0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90,
	0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f,
	0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee,
	0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1,
	0x69e9f0d5, 0x9b8273d6, 0x88d28022, 0x7ab90321,
	0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
	0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81,
	0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e,
	0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
	0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t idlevm_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	crc = ~crc;
	while (len--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

const char *idlevm_msg_type_name(uint16_t type)
{
	switch (type) {
	case IVM_MSG_ERROR: return "error";
	case IVM_MSG_HELLO: return "hello";
	case IVM_MSG_PING: return "ping";
	case IVM_MSG_PIN: return "pin";
	case IVM_MSG_UNPIN: return "unpin";
	case IVM_MSG_HOLD: return "hold";
	case IVM_MSG_RELEASE: return "release";
	case IVM_MSG_MAPS: return "maps";
	case IVM_MSG_HOLD_PIN: return "hold_pin";
	case IVM_MSG_STATS: return "stats";
	case IVM_MSG_READAHEAD: return "readahead";
	}
	return "unknown";
}

uint16_t idlevm_msg_type_since(uint16_t type)
{
	switch (type) {
	case IVM_MSG_ERROR:
	case IVM_MSG_HELLO:
	case IVM_MSG_PING:
	case IVM_MSG_PIN:
	case IVM_MSG_UNPIN:
	case IVM_MSG_HOLD:
	case IVM_MSG_RELEASE:
	case IVM_MSG_MAPS:
	case IVM_MSG_READAHEAD:
		return 1;
	case IVM_MSG_HOLD_PIN:
	case IVM_MSG_STATS:
		return 2;
	}
	return 0;
}

const char *idlevm_skip_reason_name(enum idlevm_skip_reason reason)
{
	switch (reason) {
	case IVM_SKIP_NO_MAGIC: return "no frame magic";
	case IVM_SKIP_BAD_HEADER: return "bad frame header";
	case IVM_SKIP_BAD_CHECKSUM: return "bad checksum";
	case IVM_SKIP_STALE: return "stale partial frame";
	}
	return "unknown";
}

void idlevm_caps_string(uint32_t caps, char *buf, size_t len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
		{ IVM_CAP_PING, "ping" },
		{ IVM_CAP_PIN, "pin" },
		{ IVM_CAP_HOLD, "hold" },
		{ IVM_CAP_MAPS, "maps" },
		{ IVM_CAP_JOURNAL, "journal" },
		{ IVM_CAP_HOLD_PIN, "hold_pin" },
		{ IVM_CAP_STATS, "stats" },
		{ IVM_CAP_READAHEAD, "readahead" },
	};
	size_t used = 0, i, n;
	char hex[16];
	const char *word;

	if (!len)
		return;
	buf[0] = '\0';
	for (i = 0; i <= sizeof(names) / sizeof(names[0]); i++) {
		if (i < sizeof(names) / sizeof(names[0])) {
			if (!(caps & names[i].bit))
				continue;
			caps &= ~names[i].bit;
			word = names[i].name;
		} else {
			int d = 0, shift;

			if (!caps)
				break;
			/* Unknown bits, in hex, without snprintf (keeps the static
			 * helper small). */
			hex[d++] = '0';
			hex[d++] = 'x';
			for (shift = 28; shift > 0 && !(caps >> shift); shift -= 4)
				;
			for (; shift >= 0; shift -= 4)
				hex[d++] = "0123456789abcdef"[(caps >> shift) & 0xf];
			hex[d] = '\0';
			word = hex;
		}
		n = strlen(word) + (used ? 1 : 0);
		if (used + n >= len)
			break;
		if (used)
			buf[used++] = ',';
		memcpy(buf + used, word, strlen(word) + 1);
		used += strlen(word);
	}
}

/* ---- writer ---------------------------------------------------------- */

static uint8_t *writer_reserve(struct idlevm_writer *w, size_t n)
{
	uint8_t *p;

	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return NULL;
	}
	p = w->buf + w->len;
	w->len += n;
	return p;
}

static void store_le16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static void store_le32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static uint16_t load_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void idlevm_put_u8(struct idlevm_writer *w, uint8_t v)
{
	uint8_t *p = writer_reserve(w, 1);

	if (p)
		*p = v;
}

void idlevm_put_u16(struct idlevm_writer *w, uint16_t v)
{
	uint8_t *p = writer_reserve(w, 2);

	if (p)
		store_le16(p, v);
}

void idlevm_put_u32(struct idlevm_writer *w, uint32_t v)
{
	uint8_t *p = writer_reserve(w, 4);

	if (p)
		store_le32(p, v);
}

void idlevm_put_u64(struct idlevm_writer *w, uint64_t v)
{
	uint8_t *p = writer_reserve(w, 8);

	if (p) {
		store_le32(p, (uint32_t)v);
		store_le32(p + 4, (uint32_t)(v >> 32));
	}
}

void idlevm_put_bytes(struct idlevm_writer *w, const void *src, size_t n)
{
	uint8_t *p = writer_reserve(w, n);

	if (p && n)
		memcpy(p, src, n);
}

void idlevm_put_str(struct idlevm_writer *w, const char *s, size_t n)
{
	if (n > UINT16_MAX) {
		w->overflow = true;
		return;
	}
	idlevm_put_u16(w, (uint16_t)n);
	idlevm_put_bytes(w, s, n);
}

/* A text field: cut at its bound rather than failing the whole frame. */
static void put_text(struct idlevm_writer *w, const char *s)
{
	size_t n = s ? strnlen(s, IVM_PROTO_MAX_TEXT) : 0;

	idlevm_put_str(w, s, n);
}

void idlevm_frame_begin(struct idlevm_writer *w, uint8_t *buf, size_t cap,
			uint16_t type, uint16_t flags, uint32_t id)
{
	idlevm_frame_begin_version(w, buf, cap, IVM_PROTO_VERSION, type, flags,
				   id);
}

void idlevm_frame_begin_version(struct idlevm_writer *w, uint8_t *buf,
				size_t cap, uint16_t version, uint16_t type,
				uint16_t flags, uint32_t id)
{
	w->buf = buf;
	w->cap = cap < IVM_PROTO_MAX_FRAME ? cap : IVM_PROTO_MAX_FRAME;
	w->len = 0;
	w->overflow = false;
	idlevm_put_u32(w, IVM_PROTO_MAGIC);
	idlevm_put_u16(w, version);
	idlevm_put_u16(w, type);
	idlevm_put_u16(w, flags);
	idlevm_put_u16(w, 0);
	idlevm_put_u32(w, id);
	idlevm_put_u32(w, 0);	/* length, set by finish */
	idlevm_put_u32(w, 0);	/* checksum, set by finish */
}

size_t idlevm_frame_finish(struct idlevm_writer *w)
{
	uint32_t crc;

	if (w->overflow || w->len < IVM_PROTO_HEADER_SIZE ||
	    w->len - IVM_PROTO_HEADER_SIZE > IVM_PROTO_MAX_PAYLOAD)
		return 0;
	store_le32(w->buf + 16, (uint32_t)(w->len - IVM_PROTO_HEADER_SIZE));
	store_le32(w->buf + 20, 0);
	crc = idlevm_crc32c(0, w->buf, w->len);
	store_le32(w->buf + 20, crc);
	return w->len;
}

/* ---- payload encoders ------------------------------------------------ */

void idlevm_encode_error(struct idlevm_writer *w, int32_t errnum,
			 const char *text)
{
	idlevm_put_u32(w, (uint32_t)errnum);
	put_text(w, text);
}

void idlevm_encode_hello_req(struct idlevm_writer *w,
			     const struct idlevm_hello_req *m)
{
	idlevm_put_u16(w, m->max_version);
	idlevm_put_u32(w, m->caps);
}

static void put_istr(struct idlevm_writer *w, const struct idlevm_str *s,
		     size_t max)
{
	idlevm_put_str(w, s->ptr, s->len < max ? s->len : max);
}

void idlevm_encode_hello_rep(struct idlevm_writer *w,
			     const struct idlevm_hello_rep *m)
{
	idlevm_put_u16(w, m->version);
	idlevm_put_u32(w, m->caps);
	idlevm_put_u32(w, m->ncpus);
	idlevm_put_u32(w, m->flags);
	idlevm_put_u64(w, m->kaslr_offset);
	idlevm_put_u32(w, m->pid);
	put_istr(w, &m->kernel_release, IVM_PROTO_MAX_TEXT);
	put_istr(w, &m->helper_version, IVM_PROTO_MAX_TEXT);
}

void idlevm_encode_ping(struct idlevm_writer *w, const struct idlevm_ping *m)
{
	idlevm_put_u64(w, m->cookie);
	if (m->data_len > IVM_PROTO_MAX_PING_DATA) {
		w->overflow = true;
		return;
	}
	idlevm_put_u16(w, m->data_len);
	idlevm_put_bytes(w, m->data, m->data_len);
}

void idlevm_encode_pin_req(struct idlevm_writer *w,
			   const struct idlevm_pin_req *m)
{
	idlevm_put_u32(w, (uint32_t)m->tid);
	idlevm_put_u32(w, m->cpu);
	idlevm_put_u32(w, m->lease_ms);
}

void idlevm_encode_pin_rep(struct idlevm_writer *w,
			   const struct idlevm_pin_rep *m)
{
	idlevm_put_u32(w, m->lease_ms);
	idlevm_put_u32(w, m->prev_cpu);
}

void idlevm_encode_unpin_req(struct idlevm_writer *w,
			     const struct idlevm_unpin_req *m)
{
	idlevm_put_u32(w, (uint32_t)m->tid);
}

void idlevm_encode_lease_rep(struct idlevm_writer *w,
			     const struct idlevm_lease_rep *m)
{
	idlevm_put_u64(w, m->held_ns);
	idlevm_put_u32(w, m->flags);
}

void idlevm_encode_hold_req(struct idlevm_writer *w,
			    const struct idlevm_hold_req *m)
{
	idlevm_put_u32(w, m->cpu);
	idlevm_put_u32(w, m->lease_ms);
}

void idlevm_encode_hold_rep(struct idlevm_writer *w,
			    const struct idlevm_hold_rep *m)
{
	idlevm_put_u32(w, m->lease_ms);
}

void idlevm_encode_release_req(struct idlevm_writer *w,
			       const struct idlevm_release_req *m)
{
	idlevm_put_u32(w, m->cpu);
}

void idlevm_encode_maps_req(struct idlevm_writer *w,
			    const struct idlevm_maps_req *m)
{
	idlevm_put_u32(w, (uint32_t)m->pid);
	idlevm_put_u32(w, m->first);
}

void idlevm_encode_hold_pin_req(struct idlevm_writer *w,
				const struct idlevm_hold_pin_req *m)
{
	idlevm_put_u32(w, m->cpu);
	idlevm_put_u32(w, (uint32_t)m->tid);
	idlevm_put_u32(w, m->lease_us);
}

void idlevm_encode_hold_pin_rep(struct idlevm_writer *w,
				const struct idlevm_hold_pin_rep *m)
{
	idlevm_put_u32(w, m->lease_us);
	idlevm_put_u32(w, m->flags);
	idlevm_put_u32(w, (uint32_t)m->pin_errnum);
	idlevm_put_u32(w, m->prev_cpu);
	idlevm_put_u32(w, m->holder_tid);
}

void idlevm_encode_stats_rep(struct idlevm_writer *w,
			     const struct idlevm_stats_rep *m)
{
	uint32_t i;

	if (m->count > IVM_PROTO_MAX_STATS) {
		w->overflow = true;
		return;
	}
	idlevm_put_u32(w, m->count);
	for (i = 0; i < m->count; i++) {
		if (m->stat[i].name.len > IVM_PROTO_MAX_STAT_NAME) {
			w->overflow = true;
			return;
		}
		idlevm_put_str(w, m->stat[i].name.ptr, m->stat[i].name.len);
		idlevm_put_u64(w, m->stat[i].value);
	}
}

void idlevm_encode_readahead_req(struct idlevm_writer *w,
				 const struct idlevm_readahead_req *m)
{
	idlevm_put_u32(w, (uint32_t)m->pid);
	idlevm_put_u64(w, m->inode);
	idlevm_put_u64(w, m->offset);
	idlevm_put_u64(w, m->length);
	if (m->path.len > IVM_PROTO_MAX_PATH)
		w->overflow = true;
	else
		idlevm_put_str(w, m->path.ptr, m->path.len);
}

void idlevm_encode_readahead_rep(struct idlevm_writer *w,
				 const struct idlevm_readahead_rep *m)
{
	idlevm_put_u64(w, m->bytes);
}

size_t idlevm_encode_maps_rep_begin(struct idlevm_writer *w, uint32_t first)
{
	size_t pos = w->len;

	idlevm_put_u32(w, first);
	idlevm_put_u32(w, 0);	/* count, patched by _end */
	idlevm_put_u32(w, 0);	/* flags, patched by _end */
	return pos;
}

#define MAP_ENTRY_FIXED (4 * 8 + 3 * 4 + 1 + 2)

size_t idlevm_map_entry_size(const struct idlevm_map_entry *e)
{
	return MAP_ENTRY_FIXED + e->build_id_len + e->path.len;
}

void idlevm_encode_map_entry(struct idlevm_writer *w,
			     const struct idlevm_map_entry *e)
{
	if (e->build_id_len > IVM_PROTO_MAX_BUILD_ID ||
	    e->path.len > IVM_PROTO_MAX_PATH) {
		w->overflow = true;
		return;
	}
	idlevm_put_u64(w, e->start);
	idlevm_put_u64(w, e->end);
	idlevm_put_u64(w, e->offset);
	idlevm_put_u64(w, e->inode);
	idlevm_put_u32(w, e->dev_major);
	idlevm_put_u32(w, e->dev_minor);
	idlevm_put_u32(w, e->prot);
	idlevm_put_u8(w, e->build_id_len);
	idlevm_put_bytes(w, e->build_id, e->build_id_len);
	idlevm_put_str(w, e->path.ptr, e->path.len);
}

void idlevm_encode_maps_rep_end(struct idlevm_writer *w, size_t hdr_pos,
				uint32_t count, uint32_t flags)
{
	if (w->overflow || hdr_pos > w->len || w->len - hdr_pos < 12)
		return;
	store_le32(w->buf + hdr_pos + 4, count);
	store_le32(w->buf + hdr_pos + 8, flags);
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
	/* Every entry takes at least MAP_ENTRY_FIXED bytes: a count the
	 * payload cannot hold is a lie, caught before anyone loops on it. */
	if (ret->count > (len - r.pos) / MAP_ENTRY_FIXED)
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
