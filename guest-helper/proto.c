// SPDX-License-Identifier: MIT
/*
 * The helper wire protocol codec, its writing half: the checksum, names,
 * frames and payload encoders (proto_decode.c reads them back).  Pure: no
 * I/O, no allocation, no global state; linked into the static guest
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

size_t idlevm_map_entry_size(const struct idlevm_map_entry *e)
{
	return IVM_MAP_ENTRY_FIXED + e->build_id_len + e->path.len;
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
