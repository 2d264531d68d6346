// SPDX-License-Identifier: MIT
/*
 * Seeds for fuzz_helper_proto: a protocol-version-2 conversation (HOLD_PIN,
 * STATS and READAHEAD, requests and replies) encoded by the real encoders,
 * so the fuzzer starts from valid frames of every type added since version
 * 1 instead of having to find their CRCs.  Run once when the protocol
 * grows; the files go into tests/fuzz/corpus/fuzz_helper_proto/:
 *
 *   cc -Iguest-helper -o build/seed-helper-proto \
 *      tests/tools/seed-helper-proto.c guest-helper/proto.c
 *   build/seed-helper-proto tests/fuzz/corpus/fuzz_helper_proto
 *
 * Each seed starts with the fuzz target's piece-size byte, then whole
 * frames back to back.
 */
#include <stdio.h>
#include <string.h>

#include "proto.h"

static uint8_t out[8 * IVM_PROTO_MAX_FRAME];
static size_t out_len;

static struct idlevm_writer *frame(struct idlevm_writer *w, uint16_t type,
				   uint16_t flags, uint32_t id)
{
	idlevm_frame_begin(w, out + out_len, sizeof(out) - out_len, type,
			   flags, id);
	return w;
}

static void done(struct idlevm_writer *w)
{
	out_len += idlevm_frame_finish(w);
}

static int save(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/v2-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, out_len, f) != out_len || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct idlevm_hold_pin_req hpq = { .cpu = 1, .tid = 4242,
					   .lease_us = 800 };
	struct idlevm_hold_pin_rep hpr = { .lease_us = 800,
					   .flags = IVM_HOLD_PIN_F_PINNED,
					   .prev_cpu = 0, .holder_tid = 311 };
	static const char *names[] = { "pins", "holds", "hold_ns", "wakeups" };
	struct idlevm_stats_rep st = { .count = 4 };
	static const char path[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	struct idlevm_readahead_req raq = {
		.pid = 901, .inode = 131090, .offset = 0x1000,
		.length = 0x20000, .path = { path, sizeof(path) - 1 },
	};
	struct idlevm_readahead_rep rar = { .bytes = 0x20000 };
	struct idlevm_writer w;
	int rc = 0;
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
		return 2;
	}
	for (i = 0; i < st.count; i++) {
		st.stat[i].name.ptr = names[i];
		st.stat[i].name.len = (uint16_t)strlen(names[i]);
		st.stat[i].value = 1000 * (i + 1);
	}

	/* Piece size 7: frames split at odd places. */
	out[0] = 7;
	out_len = 1;
	idlevm_encode_hold_pin_req(frame(&w, IVM_MSG_HOLD_PIN, 0, 1), &hpq);
	done(&w);
	idlevm_encode_hold_pin_rep(frame(&w, IVM_MSG_HOLD_PIN,
					 IVM_PROTO_F_REPLY, 1), &hpr);
	done(&w);
	rc |= save(argv[1], "hold-pin");

	out[0] = 255;
	out_len = 1;
	frame(&w, IVM_MSG_STATS, 0, 2);	/* the request has no payload */
	done(&w);
	idlevm_encode_stats_rep(frame(&w, IVM_MSG_STATS, IVM_PROTO_F_REPLY, 2),
				&st);
	done(&w);
	rc |= save(argv[1], "stats");

	out[0] = 1;	/* byte by byte */
	out_len = 1;
	idlevm_encode_readahead_req(frame(&w, IVM_MSG_READAHEAD, 0, 3), &raq);
	done(&w);
	idlevm_encode_readahead_rep(frame(&w, IVM_MSG_READAHEAD,
					  IVM_PROTO_F_REPLY, 3), &rar);
	done(&w);
	rc |= save(argv[1], "readahead");
	return rc;
}
