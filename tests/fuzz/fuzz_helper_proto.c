// SPDX-License-Identifier: MIT
/*
 * Fuzz target: bytes from a hostile helper (or host), delivered in pieces of
 * input-chosen sizes to the streaming decoder, every frame through the
 * payload decoder of its type and every MAPS entry through the iterator.
 * The first input byte picks the piece size (1..256), so the fuzzer explores
 * both byte-by-byte and bulk delivery.
 *
 * A first byte of 0xff selects payload mode instead: the next two bytes are
 * a message type, the next a flags byte, the rest a payload, sealed into a
 * valid frame here, so the fuzzer reaches the payload decoders without
 * having to forge CRC32C checksums.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto.h"

static struct idlevm_decoder dec;

static void decode_payload(const struct idlevm_frame *fr)
{
	const uint8_t *p = fr->payload;
	size_t len = fr->hdr.length;
	bool reply = fr->hdr.flags & IVM_PROTO_F_REPLY;
	union {
		struct idlevm_error_msg error;
		struct idlevm_hello_req hello_req;
		struct idlevm_hello_rep hello_rep;
		struct idlevm_ping ping;
		struct idlevm_pin_req pin_req;
		struct idlevm_pin_rep pin_rep;
		struct idlevm_unpin_req unpin;
		struct idlevm_lease_rep lease;
		struct idlevm_hold_req hold_req;
		struct idlevm_hold_rep hold_rep;
		struct idlevm_release_req release;
		struct idlevm_maps_req maps_req;
		struct idlevm_maps_rep maps_rep;
		struct idlevm_hold_pin_req hold_pin_req;
		struct idlevm_hold_pin_rep hold_pin_rep;
		struct idlevm_stats_rep stats;
		struct idlevm_readahead_req readahead_req;
		struct idlevm_readahead_rep readahead_rep;
	} m;
	struct idlevm_map_entry e;
	volatile size_t sink = 0;
	int guard = 0;

	switch (fr->hdr.type) {
	case IVM_MSG_ERROR:
		if (idlevm_decode_error(p, len, &m.error))
			for (size_t i = 0; i < m.error.text.len; i++)
				sink += m.error.text.ptr[i];
		break;
	case IVM_MSG_HELLO:
		if (reply && idlevm_decode_hello_rep(p, len, &m.hello_rep))
			sink += m.hello_rep.kernel_release.len +
				memchr(m.hello_rep.kernel_release.ptr, 0,
				       m.hello_rep.kernel_release.len) != NULL;
		if (!reply)
			idlevm_decode_hello_req(p, len, &m.hello_req);
		break;
	case IVM_MSG_PING:
		if (idlevm_decode_ping(p, len, &m.ping) && m.ping.data_len)
			sink += m.ping.data[m.ping.data_len - 1];
		break;
	case IVM_MSG_PIN:
		if (reply)
			idlevm_decode_pin_rep(p, len, &m.pin_rep);
		else
			idlevm_decode_pin_req(p, len, &m.pin_req);
		break;
	case IVM_MSG_UNPIN:
	case IVM_MSG_RELEASE:
		if (reply)
			idlevm_decode_lease_rep(p, len, &m.lease);
		else if (fr->hdr.type == IVM_MSG_UNPIN)
			idlevm_decode_unpin_req(p, len, &m.unpin);
		else
			idlevm_decode_release_req(p, len, &m.release);
		break;
	case IVM_MSG_HOLD:
		if (reply)
			idlevm_decode_hold_rep(p, len, &m.hold_rep);
		else
			idlevm_decode_hold_req(p, len, &m.hold_req);
		break;
	case IVM_MSG_HOLD_PIN:
		if (reply)
			idlevm_decode_hold_pin_rep(p, len, &m.hold_pin_rep);
		else
			idlevm_decode_hold_pin_req(p, len, &m.hold_pin_req);
		break;
	case IVM_MSG_STATS:
		if (!reply) {
			idlevm_decode_stats_req(p, len);
			break;
		}
		if (!idlevm_decode_stats_rep(p, len, &m.stats))
			break;
		/* Every name it let through must be readable, and good. */
		for (uint32_t i = 0; i < m.stats.count; i++) {
			const struct idlevm_str *n = &m.stats.stat[i].name;

			if (!n->len || n->len > IVM_PROTO_MAX_STAT_NAME ||
			    n->ptr[n->len - 1] == '\0')
				__builtin_trap();
			sink += n->ptr[n->len - 1];
		}
		break;
	case IVM_MSG_MAPS:
		if (!reply) {
			idlevm_decode_maps_req(p, len, &m.maps_req);
			break;
		}
		if (!idlevm_decode_maps_rep(p, len, &m.maps_rep))
			break;
		while (idlevm_maps_rep_next(&m.maps_rep, &e) > 0) {
			/* An entry's bytes must all be readable. */
			if (e.path.len)
				sink += e.path.ptr[e.path.len - 1];
			if (e.build_id_len)
				sink += e.build_id[e.build_id_len - 1];
			if (++guard > IVM_PROTO_MAX_PAYLOAD)
				__builtin_trap();
		}
		break;
	case IVM_MSG_READAHEAD:
		if (reply) {
			idlevm_decode_readahead_rep(p, len, &m.readahead_rep);
			break;
		}
		/* Its path's bytes must all be readable. */
		if (idlevm_decode_readahead_req(p, len, &m.readahead_req))
			sink += m.readahead_req.path.ptr[
				m.readahead_req.path.len - 1];
		break;
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct idlevm_frame fr;
	size_t piece, pos = 0;
	int events = 0;

	if (!size)
		return 0;
	if (data[0] == 0xff && size >= 4 &&
	    size - 4 <= IVM_PROTO_MAX_PAYLOAD) {
		static uint8_t frame[IVM_PROTO_MAX_FRAME];
		struct idlevm_writer w;
		size_t len;

		idlevm_frame_begin(&w, frame, sizeof(frame),
				   (uint16_t)(data[1] | data[2] << 8),
				   data[3] & IVM_PROTO_F_KNOWN, 1);
		idlevm_put_bytes(&w, data + 4, size - 4);
		len = idlevm_frame_finish(&w);
		idlevm_decoder_init(&dec);
		idlevm_decoder_feed(&dec, frame, len);
		if (idlevm_decoder_next(&dec, &fr) != IVM_PROTO_EV_FRAME)
			__builtin_trap();	/* a sealed frame must decode */
		decode_payload(&fr);
		return 0;
	}
	piece = (size_t)data[0] + 1;
	data++;
	size--;
	idlevm_decoder_init(&dec);
	while (pos < size) {
		size_t n = size - pos < piece ? size - pos : piece;
		enum idlevm_decode_event ev;

		n = idlevm_decoder_feed(&dec, data + pos, n);
		pos += n;
		while ((ev = idlevm_decoder_next(&dec, &fr)) !=
		       IVM_PROTO_EV_NEED_MORE) {
			if (ev == IVM_PROTO_EV_FRAME)
				decode_payload(&fr);
			/* Every event consumes at least one byte. */
			if (++events > (int)size + 1)
				__builtin_trap();
		}
		/* Sometimes give up on a partial frame, as the helper does
		 * after 250 ms. */
		if (data[pos - 1] == 0xa5)
			idlevm_decoder_abandon(&dec);
	}
	return 0;
}
