// SPDX-License-Identifier: MIT
/*
 * The helper wire codec (guest-helper/proto.c): every message round-trips,
 * and the streaming decoder survives truncation, corruption, oversized
 * lengths, other versions, garbage and byte-by-byte delivery.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "proto.h"

static uint8_t frame[IVM_PROTO_MAX_FRAME];
static struct idlevm_decoder dec;

/* Encode-side helpers: build a frame of type/flags/id with fn's payload. */
#define BUILD(w, type, flags, id, encode)                                   \
	({                                                                  \
		idlevm_frame_begin(&(w), frame, sizeof(frame), (type), (flags), \
				   (id));                                   \
		encode;                                                     \
		idlevm_frame_finish(&(w));                                  \
	})

/* Feed len bytes of buf and expect exactly one frame out. */
static struct idlevm_frame decode_one(const uint8_t *buf, size_t len)
{
	struct idlevm_frame fr;

	idlevm_decoder_init(&dec);
	cr_assert_eq(idlevm_decoder_feed(&dec, buf, len), len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_FRAME);
	/* The payload points into dec.buf, valid until the next call:
	 * the caller decodes it before touching the decoder again. */
	return fr;
}

static void expect_need_more(void)
{
	struct idlevm_frame fr;

	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_NEED_MORE);
}

static void store32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

/* Recompute the checksum after a test edited a header field. */
static void reseal(uint8_t *buf, size_t len)
{
	store32(buf + 20, 0);
	store32(buf + 20, idlevm_crc32c(0, buf, len));
}

Test(helper_proto, crc32c_check_value)
{
	/* The standard CRC-32C check value (RFC 3720 appendix). */
	cr_assert_eq(idlevm_crc32c(0, "123456789", 9), 0xe3069283u);
	cr_assert_eq(idlevm_crc32c(idlevm_crc32c(0, "1234", 4), "56789", 5),
		     0xe3069283u);
}

Test(helper_proto, header_layout_is_little_endian)
{
	struct idlevm_writer w;
	size_t len = BUILD(w, IVM_MSG_PING, IVM_PROTO_F_REPLY, 0x01020304,
			   (void)0);

	cr_assert_eq(len, IVM_PROTO_HEADER_SIZE);
	cr_assert_eq(memcmp(frame, "IVMH", 4), 0);
	cr_assert_eq(frame[4], IVM_PROTO_VERSION);
	cr_assert_eq(frame[5], 0);
	cr_assert_eq(frame[6], IVM_MSG_PING);
	cr_assert_eq(frame[8], 1);
	cr_assert_eq(frame[12], 0x04);
	cr_assert_eq(frame[15], 0x01);
	cr_assert_eq(frame[16], 0);
}

Test(helper_proto, error_round_trip)
{
	struct idlevm_error_msg m;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len = BUILD(w, IVM_MSG_ERROR, IVM_PROTO_F_REPLY, 7,
			   idlevm_encode_error(&w, 3, "no such process"));

	fr = decode_one(frame, len);
	cr_assert_eq(fr.hdr.type, IVM_MSG_ERROR);
	cr_assert_eq(fr.hdr.id, 7);
	cr_assert(idlevm_decode_error(fr.payload, fr.hdr.length, &m));
	cr_assert_eq(m.errnum, 3);
	cr_assert_eq(m.text.len, 15);
	cr_assert_eq(memcmp(m.text.ptr, "no such process", 15), 0);
}

Test(helper_proto, hello_round_trip)
{
	struct idlevm_hello_req req = { .max_version = 1, .caps = 0xf }, req2;
	struct idlevm_hello_rep rep = {
		.version = 1, .caps = IVM_CAP_PING | IVM_CAP_MAPS, .ncpus = 4,
		.flags = IVM_HELLO_F_KASLR_KNOWN,
		.kaslr_offset = 0xda00000, .pid = 110,
		.kernel_release = { "6.1.0-56-cloud-amd64", 20 },
		.helper_version = { "0.1.0", 5 },
	}, rep2;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len;

	len = BUILD(w, IVM_MSG_HELLO, 0, 1, idlevm_encode_hello_req(&w, &req));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_hello_req(fr.payload, fr.hdr.length, &req2));
	cr_assert_eq(req2.max_version, 1);
	cr_assert_eq(req2.caps, 0xf);

	len = BUILD(w, IVM_MSG_HELLO, IVM_PROTO_F_REPLY, 1,
		    idlevm_encode_hello_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_eq(fr.hdr.flags, IVM_PROTO_F_REPLY);
	cr_assert(idlevm_decode_hello_rep(fr.payload, fr.hdr.length, &rep2));
	cr_assert_eq(rep2.version, 1);
	cr_assert_eq(rep2.caps, rep.caps);
	cr_assert_eq(rep2.ncpus, 4);
	cr_assert_eq(rep2.flags, IVM_HELLO_F_KASLR_KNOWN);
	cr_assert_eq(rep2.kaslr_offset, 0xda00000);
	cr_assert_eq(rep2.pid, 110);
	cr_assert_eq(rep2.kernel_release.len, 20);
	cr_assert_eq(memcmp(rep2.kernel_release.ptr, "6.1.0-56-cloud-amd64",
			    20), 0);
	cr_assert_eq(rep2.helper_version.len, 5);
}

Test(helper_proto, ping_round_trip)
{
	static const uint8_t data[] = { 0, 1, 2, 0xff };
	struct idlevm_ping m = { .cookie = 0x1122334455667788ull,
				 .data = data, .data_len = 4 }, m2;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len = BUILD(w, IVM_MSG_PING, 0, 9, idlevm_encode_ping(&w, &m));

	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_ping(fr.payload, fr.hdr.length, &m2));
	cr_assert_eq(m2.cookie, m.cookie);
	cr_assert_eq(m2.data_len, 4);
	cr_assert_eq(memcmp(m2.data, data, 4), 0);
}

Test(helper_proto, pin_unpin_hold_release_round_trip)
{
	struct idlevm_pin_req pin = { .tid = 1234, .cpu = 3, .lease_ms = 50 },
			      pin2;
	struct idlevm_pin_rep pinr = { .lease_ms = 50, .prev_cpu = 1 }, pinr2;
	struct idlevm_unpin_req unpin = { .tid = 1234 }, unpin2;
	struct idlevm_lease_rep lease = { .held_ns = 123456789012ull,
					  .flags = IVM_LEASE_F_EXPIRED },
				lease2;
	struct idlevm_hold_req hold = { .cpu = 2, .lease_ms = 20 }, hold2;
	struct idlevm_hold_rep holdr = { .lease_ms = 20 }, holdr2;
	struct idlevm_release_req rel = { .cpu = 2 }, rel2;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len;

	len = BUILD(w, IVM_MSG_PIN, 0, 1, idlevm_encode_pin_req(&w, &pin));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_pin_req(fr.payload, fr.hdr.length, &pin2));
	cr_assert(pin2.tid == 1234 && pin2.cpu == 3 && pin2.lease_ms == 50);

	len = BUILD(w, IVM_MSG_PIN, 1, 1, idlevm_encode_pin_rep(&w, &pinr));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_pin_rep(fr.payload, fr.hdr.length, &pinr2));
	cr_assert(pinr2.lease_ms == 50 && pinr2.prev_cpu == 1);

	len = BUILD(w, IVM_MSG_UNPIN, 0, 2,
		    idlevm_encode_unpin_req(&w, &unpin));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_unpin_req(fr.payload, fr.hdr.length, &unpin2));
	cr_assert_eq(unpin2.tid, 1234);

	len = BUILD(w, IVM_MSG_UNPIN, 1, 2,
		    idlevm_encode_lease_rep(&w, &lease));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_lease_rep(fr.payload, fr.hdr.length, &lease2));
	cr_assert(lease2.held_ns == lease.held_ns &&
		  lease2.flags == IVM_LEASE_F_EXPIRED);

	len = BUILD(w, IVM_MSG_HOLD, 0, 3, idlevm_encode_hold_req(&w, &hold));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_hold_req(fr.payload, fr.hdr.length, &hold2));
	cr_assert(hold2.cpu == 2 && hold2.lease_ms == 20);

	len = BUILD(w, IVM_MSG_HOLD, 1, 3, idlevm_encode_hold_rep(&w, &holdr));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_hold_rep(fr.payload, fr.hdr.length, &holdr2));
	cr_assert_eq(holdr2.lease_ms, 20);

	len = BUILD(w, IVM_MSG_RELEASE, 0, 4,
		    idlevm_encode_release_req(&w, &rel));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_release_req(fr.payload, fr.hdr.length, &rel2));
	cr_assert_eq(rel2.cpu, 2);
}

Test(helper_proto, maps_round_trip)
{
	struct idlevm_map_entry e[2] = {
		{ .start = 0x400000, .end = 0x401000, .offset = 0,
		  .inode = 42, .dev_major = 254, .dev_minor = 1,
		  .prot = IVM_MAP_R | IVM_MAP_X, .build_id_len = 20,
		  .path = { "/bin/lockstorm", 14 } },
		{ .start = 0x7ffd0000, .end = 0x7ffe0000,
		  .prot = IVM_MAP_R | IVM_MAP_W, .path = { "[stack]", 7 } },
	}, got;
	struct idlevm_maps_req req = { .pid = 77, .first = 5 }, req2;
	struct idlevm_maps_rep rep;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len, hdr;
	int i;

	for (i = 0; i < 20; i++)
		e[0].build_id[i] = i * 7;
	len = BUILD(w, IVM_MSG_MAPS, 0, 5, idlevm_encode_maps_req(&w, &req));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_maps_req(fr.payload, fr.hdr.length, &req2));
	cr_assert(req2.pid == 77 && req2.first == 5);

	idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_MAPS,
			   IVM_PROTO_F_REPLY, 5);
	hdr = idlevm_encode_maps_rep_begin(&w, 5);
	idlevm_encode_map_entry(&w, &e[0]);
	idlevm_encode_map_entry(&w, &e[1]);
	idlevm_encode_maps_rep_end(&w, hdr, 2, IVM_MAPS_F_MORE);
	len = idlevm_frame_finish(&w);
	cr_assert_gt(len, 0);
	cr_assert_eq(len, IVM_PROTO_HEADER_SIZE + 12 +
			  idlevm_map_entry_size(&e[0]) +
			  idlevm_map_entry_size(&e[1]));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_maps_rep(fr.payload, fr.hdr.length, &rep));
	cr_assert(rep.first == 5 && rep.count == 2 &&
		  rep.flags == IVM_MAPS_F_MORE);
	cr_assert_eq(idlevm_maps_rep_next(&rep, &got), 1);
	cr_assert(got.start == 0x400000 && got.end == 0x401000 &&
		  got.inode == 42 && got.dev_major == 254 &&
		  got.dev_minor == 1 && got.prot == (IVM_MAP_R | IVM_MAP_X));
	cr_assert_eq(got.build_id_len, 20);
	cr_assert_eq(memcmp(got.build_id, e[0].build_id, 20), 0);
	cr_assert_eq(got.path.len, 14);
	cr_assert_eq(memcmp(got.path.ptr, "/bin/lockstorm", 14), 0);
	cr_assert_eq(idlevm_maps_rep_next(&rep, &got), 1);
	cr_assert_eq(got.build_id_len, 0);
	cr_assert_eq(memcmp(got.path.ptr, "[stack]", 7), 0);
	cr_assert_eq(idlevm_maps_rep_next(&rep, &got), 0);
}

Test(helper_proto, maps_count_that_cannot_fit_is_rejected)
{
	uint8_t p[12 + 10] = { 0 };
	struct idlevm_maps_rep rep;

	store32(p + 4, 1000000);	/* count */
	cr_assert_not(idlevm_decode_maps_rep(p, sizeof(p), &rep));
	/* Count 1 but the bytes are not a whole entry. */
	store32(p + 4, 0);
	cr_assert(idlevm_decode_maps_rep(p, 12, &rep));
	cr_assert_eq(idlevm_maps_rep_next(&rep, NULL), 0);
	cr_assert(idlevm_decode_maps_rep(p, sizeof(p), &rep));
	/* 10 trailing bytes after zero entries: malformed. */
	cr_assert_eq(idlevm_maps_rep_next(&rep, NULL), -1);
}

Test(helper_proto, readahead_round_trip_and_bounds)
{
	struct idlevm_readahead_req req = {
		.pid = 4242, .inode = 1234567, .offset = 0x46151c,
		.length = 0x78dcc, .path = { "/usr/sbin/php-fpm8.2", 20 },
	}, req2;
	struct idlevm_readahead_rep rep = { .bytes = 0x78dcc }, rep2;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	uint8_t buf[128];
	size_t len;

	len = BUILD(w, IVM_MSG_READAHEAD, 0, 9,
		    idlevm_encode_readahead_req(&w, &req));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_readahead_req(fr.payload, fr.hdr.length,
					      &req2));
	cr_assert(req2.pid == 4242 && req2.inode == 1234567 &&
		  req2.offset == 0x46151c && req2.length == 0x78dcc);
	cr_assert_eq(req2.path.len, 20);
	cr_assert_eq(memcmp(req2.path.ptr, "/usr/sbin/php-fpm8.2", 20), 0);
	len = BUILD(w, IVM_MSG_READAHEAD, IVM_PROTO_F_REPLY, 9,
		    idlevm_encode_readahead_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_readahead_rep(fr.payload, fr.hdr.length,
					      &rep2));
	cr_assert_eq(rep2.bytes, 0x78dcc);
	cr_assert_str_eq(idlevm_msg_type_name(IVM_MSG_READAHEAD), "readahead");

	/* A helper cannot have read more than the bound. */
	rep.bytes = IVM_READAHEAD_MAX_LEN + 1ull;
	len = BUILD(w, IVM_MSG_READAHEAD, IVM_PROTO_F_REPLY, 9,
		    idlevm_encode_readahead_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_readahead_rep(fr.payload, fr.hdr.length,
						  &rep2));
	/* Each bound of a request, one at a time. */
#define REQ(field_setup, ok) do {					\
		struct idlevm_readahead_req r = req;			\
		field_setup;						\
		len = BUILD(w, IVM_MSG_READAHEAD, 0, 9,			\
			    idlevm_encode_readahead_req(&w, &r));	\
		fr = decode_one(frame, len);				\
		cr_assert_eq(idlevm_decode_readahead_req(fr.payload,	\
				fr.hdr.length, &req2), ok, #field_setup); \
	} while (0)
	REQ((void)0, true);
	REQ(r.pid = 0, false);
	REQ(r.pid = -5, false);
	REQ(r.length = 0, false);
	REQ(r.length = IVM_READAHEAD_MAX_LEN, true);
	REQ(r.length = IVM_READAHEAD_MAX_LEN + 1, false);
	REQ(r.offset = UINT64_MAX - 10, false);
	REQ(r.path = ((struct idlevm_str){ "usr/sbin/x", 10 }), false);
	REQ(r.path = ((struct idlevm_str){ "", 0 }), false);
	REQ(r.path = ((struct idlevm_str){ "/a\0b", 4 }), false);
#undef REQ
	/* Short and trailing bytes. */
	len = BUILD(w, IVM_MSG_READAHEAD, 0, 9,
		    idlevm_encode_readahead_req(&w, &req));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_readahead_req(fr.payload,
						  fr.hdr.length - 1, &req2));
	memcpy(buf, fr.payload, fr.hdr.length);
	buf[fr.hdr.length] = 0;
	cr_assert_not(idlevm_decode_readahead_req(buf, fr.hdr.length + 1,
						  &req2));
}

Test(helper_proto, payload_decoders_reject_malformed)
{
	struct idlevm_writer w;
	struct idlevm_error_msg em;
	struct idlevm_pin_req pin;
	struct idlevm_hello_rep hello;
	struct idlevm_ping ping;
	uint8_t buf[64];
	size_t len;

	/* Short and trailing bytes. */
	memset(buf, 0, sizeof(buf));
	store32(buf, 5);
	store32(buf + 4, 1);
	cr_assert_not(idlevm_decode_pin_req(buf, 11, &pin));
	cr_assert(idlevm_decode_pin_req(buf, 12, &pin));
	cr_assert_not(idlevm_decode_pin_req(buf, 13, &pin));
	/* tid 0 and negative tids. */
	store32(buf, 0);
	cr_assert_not(idlevm_decode_pin_req(buf, 12, &pin));
	store32(buf, 0x80000000u);
	cr_assert_not(idlevm_decode_pin_req(buf, 12, &pin));
	/* A string with a NUL inside. */
	idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_ERROR, 1, 1);
	idlevm_put_u32(&w, 5);
	idlevm_put_str(&w, "a\0b", 3);
	len = idlevm_frame_finish(&w);
	cr_assert_not(idlevm_decode_error(frame + IVM_PROTO_HEADER_SIZE,
					  len - IVM_PROTO_HEADER_SIZE, &em));
	/* A string length past the payload. */
	idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_ERROR, 1, 1);
	idlevm_put_u32(&w, 5);
	idlevm_put_u16(&w, 100);
	idlevm_put_bytes(&w, "abc", 3);
	len = idlevm_frame_finish(&w);
	cr_assert_not(idlevm_decode_error(frame + IVM_PROTO_HEADER_SIZE,
					  len - IVM_PROTO_HEADER_SIZE, &em));
	/* An errno that is not one. */
	idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_ERROR, 1, 1);
	idlevm_encode_error(&w, -1, "x");
	len = idlevm_frame_finish(&w);
	cr_assert_not(idlevm_decode_error(frame + IVM_PROTO_HEADER_SIZE,
					  len - IVM_PROTO_HEADER_SIZE, &em));
	/* A hello reply with zero CPUs, or unknown flags. */
	{
		struct idlevm_hello_rep rep = { .version = 1, .ncpus = 0 };

		idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_HELLO, 1,
				   1);
		idlevm_encode_hello_rep(&w, &rep);
		len = idlevm_frame_finish(&w);
		cr_assert_not(idlevm_decode_hello_rep(
			frame + IVM_PROTO_HEADER_SIZE,
			len - IVM_PROTO_HEADER_SIZE, &hello));
		rep.ncpus = 1;
		rep.flags = 0x80;
		idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_HELLO, 1,
				   1);
		idlevm_encode_hello_rep(&w, &rep);
		len = idlevm_frame_finish(&w);
		cr_assert_not(idlevm_decode_hello_rep(
			frame + IVM_PROTO_HEADER_SIZE,
			len - IVM_PROTO_HEADER_SIZE, &hello));
	}
	/* Ping data over its cap. */
	memset(buf, 0, sizeof(buf));
	buf[8] = 0xff;
	buf[9] = 0xff;
	cr_assert_not(idlevm_decode_ping(buf, 10, &ping));
	/* Empty payloads. */
	cr_assert_not(idlevm_decode_ping(NULL, 0, &ping));
	cr_assert_not(idlevm_decode_pin_req(NULL, 0, &pin));
}

Test(helper_proto, writer_overflow_fails_the_frame)
{
	struct idlevm_writer w;
	uint8_t small[30];

	idlevm_frame_begin(&w, small, sizeof(small), IVM_MSG_PING, 0, 1);
	idlevm_put_u64(&w, 1);
	cr_assert(w.overflow);
	cr_assert_eq(idlevm_frame_finish(&w), 0);
	/* A payload over the protocol cap, even in a big buffer. */
	idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_PING, 0, 1);
	for (int i = 0; i < IVM_PROTO_MAX_PAYLOAD / 8; i++)
		idlevm_put_u64(&w, i);
	cr_assert_not(w.overflow);
	cr_assert_gt(idlevm_frame_finish(&w), 0);
	idlevm_put_u8(&w, 0);
	cr_assert_eq(idlevm_frame_finish(&w), 0);
}

Test(helper_proto, truncated_frame_waits_then_completes)
{
	struct idlevm_ping m = { .cookie = 42 }, m2;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len = BUILD(w, IVM_MSG_PING, 0, 1, idlevm_encode_ping(&w, &m));

	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, frame, len - 1);
	expect_need_more();
	cr_assert_eq(idlevm_decoder_pending(&dec), len - 1);
	idlevm_decoder_feed(&dec, frame + len - 1, 1);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_FRAME);
	cr_assert(idlevm_decode_ping(fr.payload, fr.hdr.length, &m2));
	cr_assert_eq(m2.cookie, 42);
	expect_need_more();
	cr_assert_eq(dec.total_skipped, 0);
}

Test(helper_proto, bad_checksum_is_skipped_and_next_frame_found)
{
	struct idlevm_ping m = { .cookie = 1 };
	struct idlevm_writer w;
	struct idlevm_frame fr;
	uint8_t two[2 * 64];
	size_t len = BUILD(w, IVM_MSG_PING, 0, 1, idlevm_encode_ping(&w, &m));

	memcpy(two, frame, len);
	memcpy(two + len, frame, len);
	two[len + 12] = 2;	/* second frame: id 2 */
	reseal(two + len, len);
	two[IVM_PROTO_HEADER_SIZE] ^= 0x40;	/* corrupt the first payload */

	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, two, 2 * len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_SKIPPED);
	cr_assert_eq(dec.skip_reason, IVM_SKIP_BAD_CHECKSUM);
	cr_assert_eq(dec.skipped, len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_FRAME);
	cr_assert_eq(fr.hdr.id, 2);
	expect_need_more();
}

Test(helper_proto, oversized_length_is_a_bad_header)
{
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len = BUILD(w, IVM_MSG_PING, 0, 1, (void)0);

	store32(frame + 16, IVM_PROTO_MAX_PAYLOAD + 1);
	reseal(frame, len);
	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, frame, len);
	/* Rejected on the header alone: no waiting for 64 KiB. */
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_SKIPPED);
	cr_assert_eq(dec.skip_reason, IVM_SKIP_BAD_HEADER);
	cr_assert_eq(dec.skipped, len);
	expect_need_more();
}

Test(helper_proto, unknown_flags_or_reserved_are_bad_headers)
{
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len = BUILD(w, IVM_MSG_PING, 0, 1, (void)0);

	frame[9] = 0x80;
	reseal(frame, len);
	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, frame, len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_SKIPPED);
	cr_assert_eq(dec.skip_reason, IVM_SKIP_BAD_HEADER);

	len = BUILD(w, IVM_MSG_PING, 0, 1, (void)0);
	frame[10] = 1;
	reseal(frame, len);
	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, frame, len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_SKIPPED);
}

Test(helper_proto, unknown_version_is_dropped_whole_with_its_id)
{
	struct idlevm_ping m = { .cookie = 1 };
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len = BUILD(w, IVM_MSG_PING, 0, 77, idlevm_encode_ping(&w, &m));

	frame[4] = 9;
	reseal(frame, len);
	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, frame, len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr),
		     IVM_PROTO_EV_BAD_VERSION);
	cr_assert_eq(fr.hdr.version, 9);
	cr_assert_eq(fr.hdr.id, 77);
	cr_assert_null(fr.payload);
	cr_assert_eq(idlevm_decoder_pending(&dec), 0);
	expect_need_more();
}

Test(helper_proto, garbage_between_frames_is_skipped_and_counted)
{
	static const char junk1[] = "hello, this is not a frame";
	static const char junk2[] = "IVM IVMx IVMHIV";	/* near-magics */
	struct idlevm_ping m = { .cookie = 5 };
	struct idlevm_writer w;
	struct idlevm_frame fr;
	uint8_t stream[512];
	size_t len = BUILD(w, IVM_MSG_PING, 0, 1, idlevm_encode_ping(&w, &m));
	size_t n = 0, frames = 0, skipped = 0;
	enum idlevm_decode_event ev;

	memcpy(stream + n, junk1, sizeof(junk1) - 1);
	n += sizeof(junk1) - 1;
	memcpy(stream + n, frame, len);
	n += len;
	memcpy(stream + n, junk2, sizeof(junk2) - 1);
	n += sizeof(junk2) - 1;
	memcpy(stream + n, frame, len);
	n += len;

	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, stream, n);
	while ((ev = idlevm_decoder_next(&dec, &fr)) != IVM_PROTO_EV_NEED_MORE) {
		if (ev == IVM_PROTO_EV_FRAME) {
			frames++;
			cr_assert_eq(fr.hdr.type, IVM_MSG_PING);
		} else {
			cr_assert_eq(ev, IVM_PROTO_EV_SKIPPED);
			skipped += dec.skipped;
		}
	}
	cr_assert_eq(frames, 2);
	cr_assert_eq(skipped, sizeof(junk1) - 1 + sizeof(junk2) - 1);
	cr_assert_eq(dec.total_skipped, skipped);
	cr_assert_eq(dec.total_frames, 2);
}

Test(helper_proto, byte_by_byte_delivery)
{
	struct idlevm_hello_rep rep = {
		.version = 1, .ncpus = 2,
		.kernel_release = { "6.1", 3 }, .helper_version = { "x", 1 },
	};
	struct idlevm_writer w;
	struct idlevm_frame fr;
	uint8_t stream[1024];
	size_t len, n = 0, i, frames = 0;

	len = BUILD(w, IVM_MSG_HELLO, 1, 1, idlevm_encode_hello_rep(&w, &rep));
	memcpy(stream, frame, len);
	n = len;
	stream[n++] = 'I';	/* a lone magic byte between frames */
	len = BUILD(w, IVM_MSG_PING, 1, 2, (void)0);
	memcpy(stream + n, frame, len);
	n += len;

	idlevm_decoder_init(&dec);
	for (i = 0; i < n; i++) {
		enum idlevm_decode_event ev;

		cr_assert_eq(idlevm_decoder_feed(&dec, stream + i, 1), 1);
		while ((ev = idlevm_decoder_next(&dec, &fr)) !=
		       IVM_PROTO_EV_NEED_MORE) {
			if (ev == IVM_PROTO_EV_FRAME) {
				frames++;
				cr_assert_eq(fr.hdr.id, frames);
			} else {
				cr_assert_eq(ev, IVM_PROTO_EV_SKIPPED);
			}
		}
	}
	cr_assert_eq(frames, 2);
	cr_assert_eq(dec.total_skipped, 1);
}

Test(helper_proto, abandon_drops_a_stale_partial_frame)
{
	struct idlevm_ping m = { .cookie = 3 };
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len;

	/* A header promising a large payload, then silence: the next
	 * client's frame must not be taken as that payload. */
	idlevm_decoder_init(&dec);
	len = BUILD(w, IVM_MSG_MAPS, 0, 1, (void)0);
	store32(frame + 16, 60000);
	idlevm_decoder_feed(&dec, frame, len);
	len = BUILD(w, IVM_MSG_PING, 0, 2, idlevm_encode_ping(&w, &m));
	idlevm_decoder_feed(&dec, frame, len);
	expect_need_more();
	cr_assert_eq(idlevm_decoder_abandon(&dec), IVM_PROTO_HEADER_SIZE);
	cr_assert_eq(dec.skip_reason, IVM_SKIP_STALE);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr), IVM_PROTO_EV_FRAME);
	cr_assert_eq(fr.hdr.id, 2);
	cr_assert_eq(idlevm_decoder_abandon(&dec), 0);
}

Test(helper_proto, full_buffer_always_makes_progress)
{
	static uint8_t junk[IVM_PROTO_MAX_FRAME];
	struct idlevm_frame fr;
	int guard = 0;

	/* Magic everywhere, valid-looking maximal lengths, bad checksums. */
	for (size_t i = 0; i + 24 <= sizeof(junk); i += 24) {
		memcpy(junk + i, "IVMH\1\0\3\0\0\0\0\0\1\0\0\0", 16);
		store32(junk + i + 16, IVM_PROTO_MAX_PAYLOAD);
	}
	idlevm_decoder_init(&dec);
	cr_assert_eq(idlevm_decoder_feed(&dec, junk, sizeof(junk)),
		     sizeof(junk));
	cr_assert_eq(idlevm_decoder_space(&dec), 0);
	while (idlevm_decoder_next(&dec, &fr) != IVM_PROTO_EV_NEED_MORE)
		cr_assert_lt(guard++, 100000);
	cr_assert_gt(idlevm_decoder_space(&dec), 0);
}

Test(helper_proto, caps_string)
{
	char buf[64];

	idlevm_caps_string(IVM_CAP_PING | IVM_CAP_HOLD, buf, sizeof(buf));
	cr_assert_str_eq(buf, "ping,hold");
	idlevm_caps_string(0, buf, sizeof(buf));
	cr_assert_str_eq(buf, "");
	idlevm_caps_string(IVM_CAP_PIN | 0x100, buf, sizeof(buf));
	cr_assert_str_eq(buf, "pin,0x100");
	idlevm_caps_string(IVM_CAP_PING | IVM_CAP_PIN, buf, 6);
	cr_assert_str_eq(buf, "ping");
}

Test(helper_proto, hold_pin_round_trip_and_bounds)
{
	struct idlevm_hold_pin_req req = { .cpu = 1, .tid = 4242,
					   .lease_us = 800 }, rq;
	struct idlevm_hold_pin_rep rep = {
		.lease_us = 800, .flags = IVM_HOLD_PIN_F_PINNED,
		.pin_errnum = 0, .prev_cpu = 0, .holder_tid = 321,
	}, rp;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len;

	len = BUILD(w, IVM_MSG_HOLD_PIN, 0, 5,
		    idlevm_encode_hold_pin_req(&w, &req));
	fr = decode_one(frame, len);
	cr_assert_eq(fr.hdr.version, 2);
	cr_assert(idlevm_decode_hold_pin_req(fr.payload, fr.hdr.length, &rq));
	cr_assert_eq(rq.cpu, 1);
	cr_assert_eq(rq.tid, 4242);
	cr_assert_eq(rq.lease_us, 800);

	len = BUILD(w, IVM_MSG_HOLD_PIN, IVM_PROTO_F_REPLY, 5,
		    idlevm_encode_hold_pin_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_hold_pin_rep(fr.payload, fr.hdr.length, &rp));
	cr_assert_eq(rp.lease_us, 800);
	cr_assert_eq(rp.flags, IVM_HOLD_PIN_F_PINNED);
	cr_assert_eq(rp.holder_tid, 321);

	/* Replies no helper could mean: refused. */
	rep.flags = IVM_HOLD_PIN_F_PINNED | 0x80;
	len = BUILD(w, IVM_MSG_HOLD_PIN, IVM_PROTO_F_REPLY, 5,
		    idlevm_encode_hold_pin_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_hold_pin_rep(fr.payload, fr.hdr.length,
						 &rp));
	rep.flags = IVM_HOLD_PIN_F_PINNED;
	rep.pin_errnum = 3;	/* pinned and not */
	len = BUILD(w, IVM_MSG_HOLD_PIN, IVM_PROTO_F_REPLY, 5,
		    idlevm_encode_hold_pin_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_hold_pin_rep(fr.payload, fr.hdr.length,
						 &rp));
	rep.pin_errnum = 0;
	rep.lease_us = IVM_PROTO_HOLD_PIN_LEASE_MAX_US + 1;
	len = BUILD(w, IVM_MSG_HOLD_PIN, IVM_PROTO_F_REPLY, 5,
		    idlevm_encode_hold_pin_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_hold_pin_rep(fr.payload, fr.hdr.length,
						 &rp));
	rep.lease_us = 800;
	rep.holder_tid = 0;
	len = BUILD(w, IVM_MSG_HOLD_PIN, IVM_PROTO_F_REPLY, 5,
		    idlevm_encode_hold_pin_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_hold_pin_rep(fr.payload, fr.hdr.length,
						 &rp));
	/* Short and long payloads. */
	cr_assert_not(idlevm_decode_hold_pin_req(fr.payload, 11, &rq));
	cr_assert_not(idlevm_decode_hold_pin_rep(fr.payload, 19, &rp));
}

Test(helper_proto, stats_round_trip_and_names)
{
	struct idlevm_stats_rep rep = { .count = 2 }, got;
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len;

	rep.stat[0].name = (struct idlevm_str){ "requests", 8 };
	rep.stat[0].value = 12;
	rep.stat[1].name = (struct idlevm_str){ "hold_ns", 7 };
	rep.stat[1].value = 1ull << 40;
	len = BUILD(w, IVM_MSG_STATS, IVM_PROTO_F_REPLY, 9,
		    idlevm_encode_stats_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert(idlevm_decode_stats_rep(fr.payload, fr.hdr.length, &got));
	cr_assert_eq(got.count, 2);
	cr_assert_eq(got.stat[0].name.len, 8);
	cr_assert_eq(memcmp(got.stat[0].name.ptr, "requests", 8), 0);
	cr_assert_eq(got.stat[0].value, 12);
	cr_assert_eq(got.stat[1].value, 1ull << 40);

	/* Names that are not [a-z0-9_]{1,32}: the whole reply goes. */
	rep.stat[1].name = (struct idlevm_str){ "Hold-ns", 7 };
	len = BUILD(w, IVM_MSG_STATS, IVM_PROTO_F_REPLY, 9,
		    idlevm_encode_stats_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_stats_rep(fr.payload, fr.hdr.length,
					      &got));
	cr_assert_eq(got.count, 0);
	rep.stat[1].name = (struct idlevm_str){ "", 0 };
	len = BUILD(w, IVM_MSG_STATS, IVM_PROTO_F_REPLY, 9,
		    idlevm_encode_stats_rep(&w, &rep));
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_stats_rep(fr.payload, fr.hdr.length,
					      &got));
	/* A count the payload does not hold. */
	rep.stat[1].name = (struct idlevm_str){ "x", 1 };
	len = BUILD(w, IVM_MSG_STATS, IVM_PROTO_F_REPLY, 9,
		    idlevm_encode_stats_rep(&w, &rep));
	frame[IVM_PROTO_HEADER_SIZE] = 3;
	reseal(frame, len);
	fr = decode_one(frame, len);
	cr_assert_not(idlevm_decode_stats_rep(fr.payload, fr.hdr.length,
					      &got));
	/* Over the cap: the encoder refuses, the decoder too. */
	rep.count = IVM_PROTO_MAX_STATS + 1;
	idlevm_frame_begin(&w, frame, sizeof(frame), IVM_MSG_STATS,
			   IVM_PROTO_F_REPLY, 9);
	idlevm_encode_stats_rep(&w, &rep);
	cr_assert_eq(idlevm_frame_finish(&w), 0);
	cr_assert(idlevm_decode_stats_req(NULL, 0));
	cr_assert_not(idlevm_decode_stats_req(frame, 1));
}

Test(helper_proto, every_spoken_version_decodes_and_says_so)
{
	struct idlevm_ping m = { .cookie = 1 };
	struct idlevm_writer w;
	struct idlevm_frame fr;
	size_t len;

	/* A version-1 frame (an old peer) is a frame, marked version 1. */
	idlevm_frame_begin_version(&w, frame, sizeof(frame), 1, IVM_MSG_PING,
				   0, 3);
	idlevm_encode_ping(&w, &m);
	len = idlevm_frame_finish(&w);
	fr = decode_one(frame, len);
	cr_assert_eq(fr.hdr.version, 1);
	/* Below the oldest spoken: dropped. */
	frame[4] = 0;
	reseal(frame, len);
	idlevm_decoder_init(&dec);
	idlevm_decoder_feed(&dec, frame, len);
	cr_assert_eq(idlevm_decoder_next(&dec, &fr),
		     IVM_PROTO_EV_BAD_VERSION);
	/* Which version has which type. */
	cr_assert_eq(idlevm_msg_type_since(IVM_MSG_PIN), 1);
	cr_assert_eq(idlevm_msg_type_since(IVM_MSG_HOLD_PIN), 2);
	cr_assert_eq(idlevm_msg_type_since(IVM_MSG_STATS), 2);
	cr_assert_eq(idlevm_msg_type_since(999), 0);
	cr_assert_str_eq(idlevm_msg_type_name(IVM_MSG_HOLD_PIN), "hold_pin");
}
