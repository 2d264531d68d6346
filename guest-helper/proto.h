/* SPDX-License-Identifier: MIT */
/*
 * The idlevm helper wire protocol, shared by the guest daemon
 * (idlevm-helper) and the host tool (vmm/access/helper_client.c).
 *
 * Transport: a byte stream (the virtio-serial port org.idlevm.helper.0 in the
 * guest, a unix socket on the host).  The stream carries frames:
 *
 *   offset size  field
 *        0    4  magic       "IVMH" (0x49 0x56 0x4d 0x48)
 *        4    2  version     IVM_PROTO_VERSION of the sender
 *        6    2  type        enum idlevm_msg_type
 *        8    2  flags       IVM_PROTO_F_*; unknown bits must be zero
 *       10    2  reserved    zero
 *       12    4  id          request id; a reply carries its request's id
 *       16    4  length      payload length, <= IVM_PROTO_MAX_PAYLOAD
 *       20    4  checksum    CRC32C of header (this field as zero) + payload
 *       24   ..  payload
 *
 * All integers are little-endian and every field is encoded and decoded one
 * by one: no struct of the host's layout ever crosses the wire.
 *
 * Why CRC32C: a virtio-serial port has no framing of its own, a host that
 * dies in the middle of a write leaves half a frame in the guest's buffer,
 * and the host must treat the helper's bytes as hostile.  A 32-bit CRC
 * catches every burst error up to 32 bits and, unlike a sum, any byte
 * transposition; the Castagnoli polynomial has the better Hamming distance at
 * the frame sizes we use, needs only a 1 KiB table in software (the helper
 * stays libc-only) and has a hardware instruction (SSE4.2) should it ever
 * matter.  The checksum is not a security measure: the decoders are written
 * for hostile input regardless.
 *
 * Versioning: the header layout above is frozen for every protocol version;
 * the version field says how to read payloads.  A frame whose checksum holds
 * but whose version the receiver does not speak is dropped whole and reported
 * (IVM_PROTO_EV_BAD_VERSION) so the receiver can answer with an ERROR
 * (EPROTONOSUPPORT) in its own version carrying the same request id.
 * Receivers speak every version from IVM_PROTO_VERSION_MIN to
 * IVM_PROTO_VERSION, and a reply is sent in the version of its request.
 * The HELLO payloads never change: a host sends HELLO in a version-1 frame
 * with max_version its highest, the helper answers with the highest version
 * both speak, and the host uses that version from then on.  So an old helper
 * keeps working with a new host, and a new helper with an old host.
 *
 *   version 1: HELLO PING PIN UNPIN HOLD RELEASE MAPS
 *   version 2: adds HOLD_PIN (a hold and a pin that end on their own) and
 *              STATS (the helper's footprint); version-1 payloads unchanged
 *
 * A request (flags without IVM_PROTO_F_REPLY) gets exactly one reply with
 * the same id: either the same type with IVM_PROTO_F_REPLY, or an
 * IVM_MSG_ERROR reply.
 *
 * Nothing in this file does I/O or allocates: it is linked into the static
 * guest helper and into the host tool, and is fuzzed on both.
 */
#ifndef IDLEVM_PROTO_H
#define IDLEVM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IVM_PROTO_MAGIC		0x484d5649u	/* "IVMH" read as LE u32 */
#define IVM_PROTO_VERSION	2
#define IVM_PROTO_VERSION_MIN	1
#define IVM_PROTO_HEADER_SIZE	24
#define IVM_PROTO_MAX_PAYLOAD	(64 * 1024)
#define IVM_PROTO_MAX_FRAME	(IVM_PROTO_HEADER_SIZE + IVM_PROTO_MAX_PAYLOAD)

/* The virtio-serial port name the helper listens on. */
#define IVM_PROTO_PORT_NAME	"org.idlevm.helper.0"

/* Header flags. */
#define IVM_PROTO_F_REPLY	0x0001u
#define IVM_PROTO_F_KNOWN	IVM_PROTO_F_REPLY

/* Lease of a PIN or HOLD: default when the request says 0, and the cap. */
#define IVM_PROTO_LEASE_DEFAULT_MS	50
#define IVM_PROTO_LEASE_MAX_MS		1000
/* Lease of a HOLD_PIN, in microseconds: default when 0, and the cap. */
#define IVM_PROTO_HOLD_PIN_LEASE_DEFAULT_US	1000
#define IVM_PROTO_HOLD_PIN_LEASE_MAX_US		(IVM_PROTO_LEASE_MAX_MS * 1000)

/* Bounds of variable-length fields. */
#define IVM_PROTO_MAX_TEXT	1024	/* error text, kernel release... */
#define IVM_PROTO_MAX_PATH	4096
#define IVM_PROTO_MAX_BUILD_ID	64	/* GNU build-ids are 20 bytes */
#define IVM_PROTO_MAX_PING_DATA	1024

enum idlevm_msg_type {
	IVM_MSG_ERROR = 1,	/* reply only */
	IVM_MSG_HELLO = 2,
	IVM_MSG_PING = 3,
	IVM_MSG_PIN = 4,
	IVM_MSG_UNPIN = 5,
	IVM_MSG_HOLD = 6,
	IVM_MSG_RELEASE = 7,
	IVM_MSG_MAPS = 8,
	IVM_MSG_READAHEAD = 9,
	IVM_MSG_HOLD_PIN = 10,	/* version 2 */
	IVM_MSG_STATS = 11,	/* version 2 */
};

/* The first protocol version that has message type, or 0 for none. */
uint16_t idlevm_msg_type_since(uint16_t type);

/* The name of a message type ("hello"), or "unknown". */
const char *idlevm_msg_type_name(uint16_t type);

/* Capability bits of a HELLO reply: what this helper implements. */
#define IVM_CAP_PING	0x0001u
#define IVM_CAP_PIN	0x0002u
#define IVM_CAP_HOLD	0x0004u
#define IVM_CAP_MAPS	0x0008u
#define IVM_CAP_JOURNAL	0x0010u	/* pins survive a helper crash */
#define IVM_CAP_READAHEAD 0x0020u
#define IVM_CAP_HOLD_PIN 0x0040u	/* version 2 */
#define IVM_CAP_STATS	0x0080u		/* version 2 */

/*
 * Write into buf (len bytes, NUL included) a comma-separated list of the
 * capability names ("ping,pin,hold"), unknown bits as "0x..".
 */
void idlevm_caps_string(uint32_t caps, char *buf, size_t len);

struct idlevm_frame_header {
	uint16_t version;
	uint16_t type;
	uint16_t flags;
	uint32_t id;
	uint32_t length;
};

/* ---- messages -------------------------------------------------------- */

/*
 * A decoded string points into the frame's payload (not NUL-terminated on
 * the wire): it is valid as long as the payload is.  Decoders reject
 * strings that contain a NUL byte, so callers may print them with "%.*s".
 */
struct idlevm_str {
	const char *ptr;
	uint16_t len;
};

struct idlevm_error_msg {
	int32_t errnum;		/* Linux errno value, positive */
	struct idlevm_str text;
};

struct idlevm_hello_req {
	uint16_t max_version;	/* highest version the host speaks */
	uint32_t caps;		/* what the host would like to use */
};

#define IVM_HELLO_F_KASLR_KNOWN	0x01u

struct idlevm_hello_rep {
	uint16_t version;	/* protocol version of the helper */
	uint32_t caps;		/* IVM_CAP_* */
	uint32_t ncpus;		/* online CPUs */
	uint32_t flags;		/* IVM_HELLO_F_* */
	uint64_t kaslr_offset;	/* valid when IVM_HELLO_F_KASLR_KNOWN */
	uint32_t pid;		/* of the helper, for the logs */
	struct idlevm_str kernel_release;	/* uname -r */
	struct idlevm_str helper_version;
};

/* PING request and reply: the reply echoes the request's payload. */
struct idlevm_ping {
	uint64_t cookie;
	const uint8_t *data;
	uint16_t data_len;	/* <= IVM_PROTO_MAX_PING_DATA */
};

/* Pin thread tid to cpu until UNPIN or the lease runs out. */
struct idlevm_pin_req {
	int32_t tid;
	uint32_t cpu;
	uint32_t lease_ms;	/* 0: IVM_PROTO_LEASE_DEFAULT_MS */
};

struct idlevm_pin_rep {
	uint32_t lease_ms;	/* lease granted (clamped) */
	uint32_t prev_cpu;	/* CPU the thread last ran on, or UINT32_MAX */
};

/* Restore the thread's original affinity. */
struct idlevm_unpin_req {
	int32_t tid;
};

/* UNPIN, RELEASE reply: how long the lease was held, and whether it had
 * already run out before the request arrived. */
#define IVM_LEASE_F_EXPIRED	0x01u

struct idlevm_lease_rep {
	uint64_t held_ns;
	uint32_t flags;		/* IVM_LEASE_F_* */
};

/* Occupy cpu with a real-time spinning thread until RELEASE or the lease
 * runs out.  The reply is sent once the holder runs on that CPU. */
struct idlevm_hold_req {
	uint32_t cpu;
	uint32_t lease_ms;
};

struct idlevm_hold_rep {
	uint32_t lease_ms;
};

struct idlevm_release_req {
	uint32_t cpu;
};

/*
 * HOLD_PIN (version 2): hold cpu and pin tid to it, both ended by the helper
 * itself lease_us after they are in place: no UNPIN or RELEASE follows.  The
 * CPU's holder thread does it all from the CPU: once it runs there it pins
 * tid (tid <= 0: hold only), sends the reply, spins until the lease ends,
 * restores tid's affinity and sleeps.  So the host may read as soon as the
 * reply arrives, and the target waits behind the holder for the lease only.
 * Errors before the holder runs (cpu out of range or held, tid unknown) are
 * ERROR replies; a pin refused once the CPU is held is pin_errnum.
 */
struct idlevm_hold_pin_req {
	uint32_t cpu;
	int32_t tid;		/* <= 0: hold only */
	uint32_t lease_us;	/* 0: IVM_PROTO_HOLD_PIN_LEASE_DEFAULT_US */
};

#define IVM_HOLD_PIN_F_PINNED	0x01u	/* tid is pinned to cpu */

struct idlevm_hold_pin_rep {
	uint32_t lease_us;	/* granted, from the moment of this reply */
	uint32_t flags;		/* IVM_HOLD_PIN_F_* */
	int32_t pin_errnum;	/* why tid was not pinned; 0 if it was, or not asked */
	uint32_t prev_cpu;	/* CPU tid last ran on, or UINT32_MAX */
	uint32_t holder_tid;	/* the holder thread, as guest memory names it */
};

/*
 * STATS (version 2): the helper's own footprint since the host connected,
 * as named counters (request payload empty).  Names are [a-z0-9_], 1 to
 * IVM_PROTO_MAX_STAT_NAME bytes; the decoder rejects anything else.
 */
#define IVM_PROTO_MAX_STATS	32
#define IVM_PROTO_MAX_STAT_NAME	32

struct idlevm_stat {
	struct idlevm_str name;
	uint64_t value;
};

struct idlevm_stats_rep {
	uint32_t count;		/* <= IVM_PROTO_MAX_STATS */
	struct idlevm_stat stat[IVM_PROTO_MAX_STATS];
};

/* The mappings of a process, paged: entries [first, first + count). */
struct idlevm_maps_req {
	int32_t pid;
	uint32_t first;
};

#define IVM_MAP_R	0x01u
#define IVM_MAP_W	0x02u
#define IVM_MAP_X	0x04u
#define IVM_MAP_SHARED	0x08u

struct idlevm_map_entry {
	uint64_t start, end, offset, inode;
	uint32_t dev_major, dev_minor;
	uint32_t prot;		/* IVM_MAP_* */
	uint8_t build_id_len;	/* 0 when not an ELF file or no note */
	uint8_t build_id[IVM_PROTO_MAX_BUILD_ID];
	struct idlevm_str path;	/* may be empty, "[stack]"... */
};

/* An entry's bytes on the wire before its build id and path. */
#define IVM_MAP_ENTRY_FIXED	(4 * 8 + 3 * 4 + 1 + 2)

#define IVM_MAPS_F_MORE	0x01u	/* entries after first + count exist */

/*
 * Bring bytes of a file a process maps into the guest's page cache, so
 * that the host finds them in guest memory: [offset, offset + length) of
 * the file at path as process pid sees it (its root), which must be a
 * regular file with inode number inode.  The helper reads them, so they
 * are in the page cache when the reply comes; the reply says how many it
 * read (fewer at the end of the file).  length is at most
 * IVM_READAHEAD_MAX_LEN; path is absolute.
 */
#define IVM_READAHEAD_MAX_LEN	(16u << 20)

struct idlevm_readahead_req {
	int32_t pid;
	uint64_t inode;
	uint64_t offset, length;
	struct idlevm_str path;
};

struct idlevm_readahead_rep {
	uint64_t bytes;
};

/*
 * A MAPS reply is a header followed by entries; the decoder iterates the
 * entries with idlevm_maps_rep_next (they are not stored in the struct).
 */
struct idlevm_maps_rep {
	uint32_t first;
	uint32_t count;
	uint32_t flags;		/* IVM_MAPS_F_* */
	/* private: cursor over the encoded entries */
	const uint8_t *entries;
	size_t entries_len;
	size_t pos;
	uint32_t seen;
};

/* ---- encoding -------------------------------------------------------- */

/*
 * A bounded writer.  Encoders never write past cap; once a field does not
 * fit, the writer is marked overflowed, later writes are ignored, and
 * idlevm_frame_finish fails.  So a caller checks once, at the end.
 */
struct idlevm_writer {
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool overflow;
};

/*
 * Start a frame in buf (cap bytes, at least IVM_PROTO_HEADER_SIZE): the
 * header is reserved and the payload follows.  cap beyond IVM_PROTO_MAX_FRAME
 * is not used.  The frame says IVM_PROTO_VERSION; _version says another one
 * (a reply to an older peer's request, the host's first HELLO).
 */
void idlevm_frame_begin(struct idlevm_writer *w, uint8_t *buf, size_t cap,
			uint16_t type, uint16_t flags, uint32_t id);
void idlevm_frame_begin_version(struct idlevm_writer *w, uint8_t *buf,
				size_t cap, uint16_t version, uint16_t type,
				uint16_t flags, uint32_t id);
/*
 * Fill in length and checksum.  Returns the frame's size in bytes, or 0 if
 * the payload overflowed buf or IVM_PROTO_MAX_PAYLOAD.
 */
size_t idlevm_frame_finish(struct idlevm_writer *w);

void idlevm_put_u8(struct idlevm_writer *w, uint8_t v);
void idlevm_put_u16(struct idlevm_writer *w, uint16_t v);
void idlevm_put_u32(struct idlevm_writer *w, uint32_t v);
void idlevm_put_u64(struct idlevm_writer *w, uint64_t v);
void idlevm_put_bytes(struct idlevm_writer *w, const void *p, size_t n);
/* A u16 length then the bytes; longer than max marks overflow. */
void idlevm_put_str(struct idlevm_writer *w, const char *s, size_t n);

/*
 * Payload encoders.  Each appends to a writer positioned after
 * idlevm_frame_begin.  Strings longer than their bound are cut to it (text)
 * or make the frame overflow (paths).
 */
void idlevm_encode_error(struct idlevm_writer *w, int32_t errnum,
			 const char *text);
void idlevm_encode_hello_req(struct idlevm_writer *w,
			     const struct idlevm_hello_req *m);
void idlevm_encode_hello_rep(struct idlevm_writer *w,
			     const struct idlevm_hello_rep *m);
void idlevm_encode_ping(struct idlevm_writer *w, const struct idlevm_ping *m);
void idlevm_encode_pin_req(struct idlevm_writer *w,
			   const struct idlevm_pin_req *m);
void idlevm_encode_pin_rep(struct idlevm_writer *w,
			   const struct idlevm_pin_rep *m);
void idlevm_encode_unpin_req(struct idlevm_writer *w,
			     const struct idlevm_unpin_req *m);
void idlevm_encode_lease_rep(struct idlevm_writer *w,
			     const struct idlevm_lease_rep *m);
void idlevm_encode_hold_req(struct idlevm_writer *w,
			    const struct idlevm_hold_req *m);
void idlevm_encode_hold_rep(struct idlevm_writer *w,
			    const struct idlevm_hold_rep *m);
void idlevm_encode_release_req(struct idlevm_writer *w,
			       const struct idlevm_release_req *m);
void idlevm_encode_maps_req(struct idlevm_writer *w,
			    const struct idlevm_maps_req *m);
void idlevm_encode_hold_pin_req(struct idlevm_writer *w,
				const struct idlevm_hold_pin_req *m);
void idlevm_encode_hold_pin_rep(struct idlevm_writer *w,
				const struct idlevm_hold_pin_rep *m);
/* Names are written as given (the caller's own, checked by the decoder). */
void idlevm_encode_stats_rep(struct idlevm_writer *w,
			     const struct idlevm_stats_rep *m);
/* A MAPS reply: the header, then one idlevm_encode_map_entry per entry;
 * idlevm_maps_rep_end patches count and flags in place. */
size_t idlevm_encode_maps_rep_begin(struct idlevm_writer *w, uint32_t first);
void idlevm_encode_map_entry(struct idlevm_writer *w,
			     const struct idlevm_map_entry *e);
void idlevm_encode_maps_rep_end(struct idlevm_writer *w, size_t hdr_pos,
				uint32_t count, uint32_t flags);
void idlevm_encode_readahead_req(struct idlevm_writer *w,
				 const struct idlevm_readahead_req *m);
void idlevm_encode_readahead_rep(struct idlevm_writer *w,
				 const struct idlevm_readahead_rep *m);
/* The encoded size of one map entry, to know whether it still fits. */
size_t idlevm_map_entry_size(const struct idlevm_map_entry *e);

/* ---- decoding -------------------------------------------------------- */

/*
 * Payload decoders.  Each reads exactly one message from payload/len and
 * returns false when the payload is short, has trailing bytes, a string over
 * its bound or containing NUL, or a value out of range.  They never read
 * outside [payload, payload + len) and never allocate; decoded strings point
 * into payload.
 */
bool idlevm_decode_error(const uint8_t *p, size_t len,
			 struct idlevm_error_msg *ret);
bool idlevm_decode_hello_req(const uint8_t *p, size_t len,
			     struct idlevm_hello_req *ret);
bool idlevm_decode_hello_rep(const uint8_t *p, size_t len,
			     struct idlevm_hello_rep *ret);
bool idlevm_decode_ping(const uint8_t *p, size_t len, struct idlevm_ping *ret);
bool idlevm_decode_pin_req(const uint8_t *p, size_t len,
			   struct idlevm_pin_req *ret);
bool idlevm_decode_pin_rep(const uint8_t *p, size_t len,
			   struct idlevm_pin_rep *ret);
bool idlevm_decode_unpin_req(const uint8_t *p, size_t len,
			     struct idlevm_unpin_req *ret);
bool idlevm_decode_lease_rep(const uint8_t *p, size_t len,
			     struct idlevm_lease_rep *ret);
bool idlevm_decode_hold_req(const uint8_t *p, size_t len,
			    struct idlevm_hold_req *ret);
bool idlevm_decode_hold_rep(const uint8_t *p, size_t len,
			    struct idlevm_hold_rep *ret);
bool idlevm_decode_release_req(const uint8_t *p, size_t len,
			       struct idlevm_release_req *ret);
bool idlevm_decode_maps_req(const uint8_t *p, size_t len,
			    struct idlevm_maps_req *ret);
bool idlevm_decode_hold_pin_req(const uint8_t *p, size_t len,
				struct idlevm_hold_pin_req *ret);
bool idlevm_decode_hold_pin_rep(const uint8_t *p, size_t len,
				struct idlevm_hold_pin_rep *ret);
/* The request is empty: any payload is malformed. */
bool idlevm_decode_stats_req(const uint8_t *p, size_t len);
bool idlevm_decode_stats_rep(const uint8_t *p, size_t len,
			     struct idlevm_stats_rep *ret);
/* Checks the header; entries are checked one by one by _next. */
bool idlevm_decode_maps_rep(const uint8_t *p, size_t len,
			    struct idlevm_maps_rep *ret);
/*
 * The next entry of a MAPS reply: 1 with *ret filled, 0 at the end (after
 * exactly count entries and no trailing bytes), -1 on a malformed entry.
 */
int idlevm_maps_rep_next(struct idlevm_maps_rep *m,
			 struct idlevm_map_entry *ret);
/* Refuses a relative or empty path, a length of 0 or over the bound. */
bool idlevm_decode_readahead_req(const uint8_t *p, size_t len,
				 struct idlevm_readahead_req *ret);
bool idlevm_decode_readahead_rep(const uint8_t *p, size_t len,
				 struct idlevm_readahead_rep *ret);

/* ---- streaming decoder ----------------------------------------------- */

enum idlevm_decode_event {
	IVM_PROTO_EV_NEED_MORE,	/* feed more bytes */
	IVM_PROTO_EV_FRAME,	/* a valid frame: header and payload */
	/* skipped bytes (skip_reason, skipped): garbage before a magic, or a
	 * frame-looking run that turned out bad; decoding goes on after it */
	IVM_PROTO_EV_SKIPPED,
	/* a checksummed frame of a version we do not speak was dropped; the
	 * header is in frame->hdr so the receiver can answer its id */
	IVM_PROTO_EV_BAD_VERSION,
};

enum idlevm_skip_reason {
	IVM_SKIP_NO_MAGIC = 1,	/* bytes with no frame magic */
	IVM_SKIP_BAD_HEADER,	/* reserved/flags bits set, or length over cap */
	IVM_SKIP_BAD_CHECKSUM,
	IVM_SKIP_STALE,		/* a partial frame abandoned by the caller */
};

const char *idlevm_skip_reason_name(enum idlevm_skip_reason reason);

struct idlevm_frame {
	struct idlevm_frame_header hdr;
	const uint8_t *payload;	/* valid until the next decoder call */
};

/*
 * Takes a byte stream in any pieces and yields frames.  On a bad header or
 * checksum it drops one byte and scans for the next magic, so one corrupt
 * frame costs only itself.  The buffer is embedded: one decoder is about
 * 64 KiB; no allocation ever.
 *
 * Usage: idlevm_decoder_feed what arrived, then call idlevm_decoder_next
 * until it says IVM_PROTO_EV_NEED_MORE.  feed accepts at most
 * idlevm_decoder_space bytes; next always makes space (a full buffer always
 * holds a frame or garbage to skip).
 */
struct idlevm_decoder {
	size_t len;		/* bytes buffered */
	size_t start;		/* bytes consumed at the front */
	/* Of the last IVM_PROTO_EV_SKIPPED event: */
	enum idlevm_skip_reason skip_reason;
	size_t skipped;
	/* Totals since init, for statistics and logs. */
	uint64_t total_skipped;
	uint64_t total_frames;
	uint8_t buf[IVM_PROTO_MAX_FRAME];
};

void idlevm_decoder_init(struct idlevm_decoder *d);
/* Forget buffered bytes (after a reconnect); totals are kept. */
void idlevm_decoder_reset(struct idlevm_decoder *d);
size_t idlevm_decoder_space(const struct idlevm_decoder *d);
/* Append up to len bytes; returns how many were taken. */
size_t idlevm_decoder_feed(struct idlevm_decoder *d, const void *data,
			   size_t len);
/*
 * A pointer to the free space (idlevm_decoder_space bytes) for reading into
 * directly, and idlevm_decoder_commit to account n bytes read there.
 */
uint8_t *idlevm_decoder_tail(struct idlevm_decoder *d);
void idlevm_decoder_commit(struct idlevm_decoder *d, size_t n);
/* Bytes buffered and not yet decoded (a partial frame, or garbage). */
size_t idlevm_decoder_pending(const struct idlevm_decoder *d);
enum idlevm_decode_event idlevm_decoder_next(struct idlevm_decoder *d,
					     struct idlevm_frame *ret);
/*
 * Give up on the partial frame at the front (call it after
 * idlevm_decoder_next said NEED_MORE): drop its first byte and everything up
 * to the next magic, as for a bad checksum, and return how many bytes went
 * (also recorded as an IVM_SKIP_STALE skip).
 *
 * Why: a virtio-serial port is one byte stream across host reconnects.  A
 * host that dies after a frame's header leaves the receiver waiting for a
 * payload that never comes, and the next host's frames would be swallowed as
 * that payload.  Senders write whole frames at once, so a frame still partial
 * long after its first bytes (the helper uses 250 ms) is abandoned.
 */
size_t idlevm_decoder_abandon(struct idlevm_decoder *d);

/* CRC32C (Castagnoli) of buf, continuing from crc (start with 0). */
uint32_t idlevm_crc32c(uint32_t crc, const void *buf, size_t len);

#endif /* IDLEVM_PROTO_H */
