// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/outfile.h"
#include "profile/profile_file.h"
#include "proto.h"	/* idlevm_crc32c, shared with the helper protocol */

/* Flush by ourselves once this much is buffered, so memory stays bounded. */
#define WRITER_HIGH_WATER	(1024 * 1024)

struct ivm_profile_writer {
	struct ivm_outfile file;	/* published at the first flush */
	bool wrote;		/* a record after the header was emitted */
	struct ivm_buf buf;
	struct ivm_buf rec;	/* payload of the record being built */
};

const char *ivm_sample_kind_name(enum ivm_sample_kind kind)
{
	switch (kind) {
	case IVM_SAMPLE_TO_IDLE:
		return "to_idle";
	case IVM_SAMPLE_FROM_IDLE:
		return "from_idle";
	case IVM_SAMPLE_ON_CPU:
		return "on_cpu";
	case IVM_SAMPLE_SWITCH:
		return "switch";
	default:
		return "?";
	}
}

const char *ivm_counter_name(uint32_t id)
{
	switch (id) {
	case IVM_COUNTER_NVCSW:
		return "nvcsw";
	case IVM_COUNTER_NIVCSW:
		return "nivcsw";
	case IVM_COUNTER_RUN_DELAY_NS:
		return "run_delay_ns";
	case IVM_COUNTER_CPU_NS:
		return "cpu_ns";
	case IVM_COUNTER_IDLE_NS:
		return "idle_ns";
	case IVM_COUNTER_HOST_WAKE_NS:
		return "host_wake_ns";
	default:
		return NULL;
	}
}

static struct ivm_error *write_all(int fd, const uint8_t *p, size_t len,
				   const char *path)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return ivm_error_os(errno, "writing %s", path);
		}
		p += n;
		len -= (size_t)n;
	}
	return NULL;
}

/*
 * A regular file (or a new one) is written under a temporary name in the
 * same directory and takes its name at the first flush with a record
 * (outfile.h): a run that fails before it has anything to say leaves an
 * older profile at path alone.
 */
struct ivm_error *ivm_profile_writer_create(const char *path,
					    struct ivm_profile_writer **ret)
{
	struct ivm_profile_writer *w;
	struct ivm_error *err;
	uint8_t header[IVM_PROFILE_HEADER_SIZE] = { 0 };

	w = calloc(1, sizeof(*w));
	if (!w)
		return &ivm_enomem;
	err = ivm_outfile_open(path, O_APPEND, &w->file);
	if (err) {
		free(w);
		return err;
	}
	memcpy(header, IVM_PROFILE_MAGIC, 8);
	header[8] = IVM_PROFILE_VERSION;
	err = write_all(w->file.fd, header, sizeof(header), path);
	if (err) {
		ivm_profile_writer_destroy(w);
		return err;
	}
	*ret = w;
	return NULL;
}

/* Frame the payload in w->rec as one record into the write buffer. */
static struct ivm_error *emit_record(struct ivm_profile_writer *w,
				     enum ivm_record_type type)
{
	uint8_t hdr[8];
	size_t start;
	uint32_t crc;

	if (w->rec.nomem)
		return &ivm_enomem;
	if (w->rec.len > IVM_RECORD_MAX_PAYLOAD)
		return ivm_error_create(IVM_ERROR_INVALID,
					"profile record too large (%zu bytes)",
					w->rec.len);
	hdr[0] = (uint8_t)type;
	hdr[1] = (uint8_t)(type >> 8);
	hdr[2] = hdr[3] = 0;
	hdr[4] = (uint8_t)w->rec.len;
	hdr[5] = (uint8_t)(w->rec.len >> 8);
	hdr[6] = (uint8_t)(w->rec.len >> 16);
	hdr[7] = (uint8_t)(w->rec.len >> 24);
	crc = idlevm_crc32c(0, hdr, sizeof(hdr));
	crc = idlevm_crc32c(crc, w->rec.data, w->rec.len);

	start = w->buf.len;
	ivm_put_u32(&w->buf, IVM_RECORD_MAGIC);
	ivm_put_bytes(&w->buf, hdr, sizeof(hdr));
	ivm_put_u32(&w->buf, crc);
	ivm_put_bytes(&w->buf, w->rec.data, w->rec.len);
	w->rec.len = 0;
	if (w->buf.nomem) {
		/* Drop the partial record: the buffer holds whole ones only. */
		w->buf.len = start;
		w->buf.nomem = false;
		return &ivm_enomem;
	}
	w->wrote = true;
	if (w->buf.len >= WRITER_HIGH_WATER)
		return ivm_profile_writer_flush(w);
	return NULL;
}

static void put_string(struct ivm_buf *b, const char *s)
{
	size_t n = s ? strnlen(s, IVM_SAMPLE_MAX_STRING) : 0;

	ivm_put_u16(b, (uint16_t)n);
	ivm_put_bytes(b, s, n);
}

struct ivm_error *ivm_profile_write_meta(struct ivm_profile_writer *w,
					 const char *key, const char *value)
{
	put_string(&w->rec, key);
	put_string(&w->rec, value);
	return emit_record(w, IVM_RECORD_META);
}

struct ivm_error *ivm_profile_write_sample(struct ivm_profile_writer *w,
					   const struct ivm_sample *s)
{
	char comm[IVM_COMM_LEN] = { 0 };
	unsigned int i;

	if (s->nr_kernel > IVM_SAMPLE_MAX_FRAMES ||
	    s->nr_user > IVM_SAMPLE_MAX_FRAMES ||
	    s->nr_labels > IVM_SAMPLE_MAX_LABELS ||
	    s->nr_counters > IVM_SAMPLE_MAX_COUNTERS ||
	    (unsigned int)s->kind >= IVM_SAMPLE_NR_KINDS)
		return ivm_error_create(IVM_ERROR_INVALID,
					"sample breaks the record caps");
	memcpy(comm, s->comm, strnlen(s->comm, IVM_COMM_LEN - 1));

	ivm_put_u64(&w->rec, s->time_ns);
	ivm_put_u32(&w->rec, s->vcpu);
	ivm_put_u8(&w->rec, (uint8_t)s->kind);
	ivm_put_u8(&w->rec, 0);
	ivm_put_u16(&w->rec, (uint16_t)s->stack_flags);
	ivm_put_u32(&w->rec, s->pid);
	ivm_put_u32(&w->rec, s->tid);
	ivm_put_bytes(&w->rec, comm, sizeof(comm));
	ivm_put_u16(&w->rec, s->nr_kernel);
	ivm_put_u16(&w->rec, s->nr_user);
	ivm_put_u16(&w->rec, s->nr_labels);
	ivm_put_u16(&w->rec, s->nr_counters);
	for (i = 0; i < s->nr_kernel; i++)
		ivm_put_u64(&w->rec, s->kernel_pcs[i]);
	for (i = 0; i < s->nr_user; i++)
		ivm_put_u64(&w->rec, s->user_pcs[i]);
	for (i = 0; i < s->nr_labels; i++) {
		put_string(&w->rec, s->labels[i].key);
		put_string(&w->rec, s->labels[i].value);
	}
	for (i = 0; i < s->nr_counters; i++) {
		ivm_put_u32(&w->rec, s->counters[i].id);
		ivm_put_u64(&w->rec, s->counters[i].value);
	}
	for (i = 0; i < s->nr_kernel; i++)
		ivm_put_u8(&w->rec, s->kernel_flags ? s->kernel_flags[i] : 0);
	for (i = 0; i < s->nr_user; i++)
		ivm_put_u8(&w->rec, s->user_flags ? s->user_flags[i] : 0);
	return emit_record(w, IVM_RECORD_SAMPLE2);
}

static void put_stats(struct ivm_buf *b, const struct ivm_stat *stats,
		      size_t nr_stats)
{
	size_t i;

	for (i = 0; i < nr_stats; i++) {
		put_string(b, stats[i].name);
		ivm_put_u64(b, stats[i].value);
	}
}

struct ivm_error *ivm_profile_write_stats(struct ivm_profile_writer *w,
					  const struct ivm_stat *stats,
					  size_t nr_stats)
{
	put_stats(&w->rec, stats, nr_stats);
	return emit_record(w, IVM_RECORD_STATS);
}

static void put_task_id(struct ivm_buf *b, const struct ivm_idle_task_id *t)
{
	char comm[IVM_COMM_LEN] = { 0 };

	memcpy(comm, t->comm, strnlen(t->comm, IVM_COMM_LEN - 1));
	ivm_put_u32(b, t->pid);
	ivm_put_u32(b, t->tid);
	ivm_put_bytes(b, comm, sizeof(comm));
}

static void put_snapshot(struct ivm_buf *b, const struct ivm_idle_snapshot *s)
{
	int k;

	ivm_put_u64(b, s->time_ns);
	ivm_put_u64(b, s->cpu_switches);
	ivm_put_u64(b, s->idle_switches);
	ivm_put_u64(b, s->rq_clock);
	ivm_put_u32(b, s->irqs.known);
	ivm_put_u32(b, 0);
	for (k = 0; k < IVM_IRQ_NR_KINDS; k++)
		ivm_put_u64(b, s->irqs.count[k]);
}

struct ivm_error *ivm_profile_write_idle_period(struct ivm_profile_writer *w,
						const struct ivm_idle_record *r)
{
	ivm_put_u32(&w->rec, r->vcpu);
	ivm_put_u32(&w->rec, r->flags);
	ivm_put_u64(&w->rec, r->start_ns);
	ivm_put_u64(&w->rec, r->end_ns);
	ivm_put_u32(&w->rec, r->halts);
	ivm_put_u32(&w->rec, r->wake_mask);
	ivm_put_u32(&w->rec, r->exit_reason);
	ivm_put_u32(&w->rec, 0);
	put_task_id(&w->rec, &r->to_idle);
	put_task_id(&w->rec, &r->from_idle);
	ivm_put_u8(&w->rec, 3);
	ivm_put_u8(&w->rec, IVM_IRQ_NR_KINDS);
	ivm_put_u16(&w->rec, 0);
	put_snapshot(&w->rec, &r->before);
	put_snapshot(&w->rec, &r->wake_before);
	put_snapshot(&w->rec, &r->after);
	return emit_record(w, IVM_RECORD_IDLE_PERIOD);
}

struct ivm_error *ivm_profile_write_thread(struct ivm_profile_writer *w,
					   const struct ivm_thread_record *t)
{
	struct ivm_idle_task_id id = { .pid = t->pid, .tid = t->tid };
	unsigned int i;

	if (t->nr_counters > IVM_SAMPLE_MAX_COUNTERS)
		return ivm_error_create(IVM_ERROR_INVALID,
					"thread record breaks the counter cap");
	memcpy(id.comm, t->comm, strnlen(t->comm, IVM_COMM_LEN - 1));
	put_task_id(&w->rec, &id);
	ivm_put_u64(&w->rec, t->start_time);
	ivm_put_u64(&w->rec, t->first_ns);
	ivm_put_u64(&w->rec, t->last_ns);
	ivm_put_u32(&w->rec, t->flags);
	ivm_put_u32(&w->rec, t->samples);
	ivm_put_u16(&w->rec, t->nr_counters);
	ivm_put_u16(&w->rec, 0);
	for (i = 0; i < t->nr_counters; i++) {
		ivm_put_u32(&w->rec, t->counters[i].id);
		ivm_put_u64(&w->rec, t->counters[i].value);
	}
	return emit_record(w, IVM_RECORD_THREAD);
}

/* A HOST_SPANS record's header, before its spans. */
static void put_spans_header(struct ivm_buf *b,
			     const struct ivm_spans_record *sr, uint64_t base,
			     uint32_t nr, bool first)
{
	ivm_put_u32(b, sr->lane);
	ivm_put_u32(b, sr->min_ns);
	ivm_put_u64(b, base);
	ivm_put_u32(b, nr);
	ivm_put_u32(b, first ? sr->dropped : 0);
	ivm_put_u64(b, first ? sr->dropped_ns : 0);
}

/* Offset of the nr_spans field in a HOST_SPANS payload. */
#define SPANS_NR_AT	16
#define SPANS_HEADER	32
#define SPAN_SIZE	12

/* Patch the span count of the record being built. */
static void set_spans_nr(struct ivm_buf *b, uint32_t nr)
{
	if (b->nomem || b->len < SPANS_HEADER)
		return;
	b->data[SPANS_NR_AT] = (uint8_t)nr;
	b->data[SPANS_NR_AT + 1] = (uint8_t)(nr >> 8);
	b->data[SPANS_NR_AT + 2] = (uint8_t)(nr >> 16);
	b->data[SPANS_NR_AT + 3] = (uint8_t)(nr >> 24);
}

/*
 * Spans are relative to their record's base in 32 bits, so a record ends
 * where the next span starts too far from it, or at IVM_SPANS_MAX.
 */
struct ivm_error *ivm_profile_write_spans(struct ivm_profile_writer *w,
					  const struct ivm_spans_record *sr,
					  uint64_t *bytes)
{
	struct ivm_error *err;
	uint64_t base = 0;
	uint32_t nr = 0;
	bool open = false, first = true;
	size_t i;

	if (sr->lane >= IVM_SPAN_MAX_VCPUS && sr->lane != IVM_SPAN_LANE_DISK)
		return ivm_error_create(IVM_ERROR_INVALID,
					"span lane %u out of range", sr->lane);
	for (i = 0; i < sr->nr; i++)
		if (sr->spans[i].kind >= IVM_SPAN_NR_KINDS ||
		    (i && sr->spans[i].start_ns < sr->spans[i - 1].start_ns) ||
		    sr->spans[i].start_ns > UINT64_MAX - 2 * (uint64_t)UINT32_MAX)
			return ivm_error_create(IVM_ERROR_INVALID,
						"spans of lane %u not in order",
						sr->lane);
	if (!sr->nr && !sr->dropped)
		return NULL;
	w->rec.len = 0;
	for (i = 0; i < sr->nr; i++) {
		const struct ivm_span *sp = &sr->spans[i];

		if (open && (nr == IVM_SPANS_MAX ||
			     sp->start_ns - base > UINT32_MAX)) {
			set_spans_nr(&w->rec, nr);
			if (bytes)
				*bytes += IVM_RECORD_HEADER_SIZE + w->rec.len;
			err = emit_record(w, IVM_RECORD_HOST_SPANS);
			if (err)
				return err;
			open = false;
			first = false;
		}
		if (!open) {
			base = sp->start_ns;
			nr = 0;
			put_spans_header(&w->rec, sr, base, 0, first);
			open = true;
		}
		ivm_put_u32(&w->rec, (uint32_t)(sp->start_ns - base));
		ivm_put_u32(&w->rec, sp->dur_ns);
		ivm_put_u8(&w->rec, sp->kind);
		ivm_put_u8(&w->rec, sp->flags);
		ivm_put_u16(&w->rec, 0);
		nr++;
	}
	if (!open)
		put_spans_header(&w->rec, sr, 0, 0, true);
	set_spans_nr(&w->rec, nr);
	if (bytes)
		*bytes += IVM_RECORD_HEADER_SIZE + w->rec.len;
	return emit_record(w, IVM_RECORD_HOST_SPANS);
}

struct ivm_error *ivm_profile_writer_flush(struct ivm_profile_writer *w)
{
	struct ivm_error *err;

	if (!w->buf.len)
		return NULL;
	err = write_all(w->file.fd, w->buf.data, w->buf.len, w->file.path);
	if (!err && w->wrote)
		err = ivm_outfile_publish(&w->file);
	/*
	 * On failure the buffer is kept: the caller may retry (ENOSPC may
	 * clear) and nothing already written is duplicated, because write_all
	 * only fails before the first byte or leaves a torn record the reader
	 * skips.
	 */
	if (!err)
		w->buf.len = 0;
	return err;
}

struct ivm_error *ivm_profile_writer_finish(struct ivm_profile_writer *w,
					    uint64_t time_ns,
					    const struct ivm_stat *stats,
					    size_t nr_stats)
{
	struct ivm_error *err;

	ivm_put_u64(&w->rec, time_ns);
	put_stats(&w->rec, stats, nr_stats);
	err = emit_record(w, IVM_RECORD_END);
	if (!err)
		err = ivm_profile_writer_flush(w);
	if (!err && fsync(w->file.fd) < 0 && errno != EINVAL)
		err = ivm_error_os(errno, "syncing %s", w->file.path);
	if (close(w->file.fd) < 0 && !err)
		err = ivm_error_os(errno, "closing %s", w->file.path);
	w->file.fd = -1;
	ivm_profile_writer_destroy(w);
	return err;
}

void ivm_profile_writer_destroy(struct ivm_profile_writer *w)
{
	if (!w)
		return;
	/* Best effort: what is buffered is worth keeping. */
	if (w->file.fd >= 0 && w->wrote)
		ivm_error_destroy(ivm_profile_writer_flush(w));
	/* Nothing but a header, or the rename failed: leave no debris. */
	ivm_outfile_close(&w->file);
	ivm_buf_free(&w->buf);
	ivm_buf_free(&w->rec);
	free(w);
}

/* ---- reading ------------------------------------------------------------ */

struct ivm_profile_reader {
	const uint8_t *data;
	size_t len;
	size_t pos;
	void *map;		/* mmap of the file, or NULL */
	size_t map_len;
	struct ivm_profile_damage damage;
	/* Scratch the current record's decoded arrays point into. */
	uint64_t kernel_pcs[IVM_SAMPLE_MAX_FRAMES];
	uint64_t user_pcs[IVM_SAMPLE_MAX_FRAMES];
	uint8_t kernel_flags[IVM_SAMPLE_MAX_FRAMES];
	uint8_t user_flags[IVM_SAMPLE_MAX_FRAMES];
	struct ivm_label labels[IVM_SAMPLE_MAX_LABELS];
	struct ivm_counter counters[IVM_SAMPLE_MAX_COUNTERS];
	struct ivm_span spans[IVM_SPANS_MAX];
	/* Strings are copied out NUL-terminated into this arena. */
	/*
	 * A payload of n bytes holds at most n/2 strings (each has a 2-byte
	 * length), so n + n/2 bytes always fit them with their NULs.
	 */
	char strings[IVM_RECORD_MAX_PAYLOAD + IVM_RECORD_MAX_PAYLOAD / 2];
	size_t strings_used;
	struct ivm_label *meta;
	size_t meta_cap;
	struct ivm_stat *stats;
	size_t stats_cap;
};

static struct ivm_error *reader_init(struct ivm_profile_reader *r)
{
	if (r->len < IVM_PROFILE_HEADER_SIZE ||
	    memcmp(r->data, IVM_PROFILE_MAGIC, 8))
		return ivm_error_create(IVM_ERROR_INVALID,
					"not an idlevm profile (bad header)");
	if (ivm_le_load(r->data + 8, 4) != IVM_PROFILE_VERSION)
		return ivm_error_create(IVM_ERROR_INVALID,
					"unsupported profile version %u",
					(unsigned int)ivm_le_load(r->data + 8, 4));
	r->pos = IVM_PROFILE_HEADER_SIZE;
	return NULL;
}

struct ivm_error *ivm_profile_reader_from_memory(const void *buf, size_t len,
						 struct ivm_profile_reader **ret)
{
	struct ivm_profile_reader *r;
	struct ivm_error *err;

	r = calloc(1, sizeof(*r));
	if (!r)
		return &ivm_enomem;
	r->data = buf;
	r->len = len;
	err = reader_init(r);
	if (err) {
		free(r);
		return err;
	}
	*ret = r;
	return NULL;
}

struct ivm_error *ivm_profile_reader_open(const char *path,
					  struct ivm_profile_reader **ret)
{
	struct ivm_profile_reader *r;
	struct ivm_error *err;
	struct stat st;
	void *map;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ivm_error_os(errno, "cannot open profile %s", path);
	if (fstat(fd, &st) < 0) {
		err = ivm_error_os(errno, "cannot stat %s", path);
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < IVM_PROFILE_HEADER_SIZE) {
		close(fd);
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: not an idlevm profile (%s)", path,
					S_ISREG(st.st_mode) ? "too short" :
					"not a regular file");
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return ivm_error_os(errno, "cannot map %s", path);
	err = ivm_profile_reader_from_memory(map, (size_t)st.st_size, &r);
	if (err) {
		munmap(map, (size_t)st.st_size);
		return ivm_error_wrap(err, "%s", path);
	}
	r->map = map;
	r->map_len = (size_t)st.st_size;
	*ret = r;
	return NULL;
}

void ivm_profile_reader_destroy(struct ivm_profile_reader *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->map_len);
	free(r->meta);
	free(r->stats);
	free(r);
}

const struct ivm_profile_damage *
ivm_profile_reader_damage(const struct ivm_profile_reader *r)
{
	return &r->damage;
}

/* Copy a length-prefixed string into the arena; NULL when malformed. */
static const char *get_string(struct ivm_profile_reader *r,
			      struct ivm_cursor *c)
{
	uint16_t n = ivm_get_u16(c);
	const uint8_t *p = ivm_cursor_take(c, n);
	char *s;

	if (!p || n > IVM_SAMPLE_MAX_STRING ||
	    r->strings_used + n + 1 > sizeof(r->strings))
		return NULL;
	s = r->strings + r->strings_used;
	memcpy(s, p, n);
	s[n] = '\0';
	r->strings_used += n + 1;
	return s;
}

static bool decode_sample(struct ivm_profile_reader *r, struct ivm_cursor *c,
			  bool with_flags, struct ivm_sample *s)
{
	const uint8_t *comm;
	unsigned int i;
	uint8_t kind;

	memset(s, 0, sizeof(*s));
	s->time_ns = ivm_get_u64(c);
	s->vcpu = ivm_get_u32(c);
	kind = ivm_get_u8(c);
	ivm_get_u8(c);
	s->stack_flags = ivm_get_u16(c);
	s->pid = ivm_get_u32(c);
	s->tid = ivm_get_u32(c);
	comm = ivm_cursor_take(c, IVM_COMM_LEN);
	s->nr_kernel = ivm_get_u16(c);
	s->nr_user = ivm_get_u16(c);
	s->nr_labels = ivm_get_u16(c);
	s->nr_counters = ivm_get_u16(c);
	if (c->bad || kind >= IVM_SAMPLE_NR_KINDS ||
	    s->nr_kernel > IVM_SAMPLE_MAX_FRAMES ||
	    s->nr_user > IVM_SAMPLE_MAX_FRAMES ||
	    s->nr_labels > IVM_SAMPLE_MAX_LABELS ||
	    s->nr_counters > IVM_SAMPLE_MAX_COUNTERS)
		return false;
	s->kind = kind;
	memcpy(s->comm, comm, IVM_COMM_LEN - 1);
	s->comm[IVM_COMM_LEN - 1] = '\0';
	for (i = 0; i < s->nr_kernel; i++)
		r->kernel_pcs[i] = ivm_get_u64(c);
	for (i = 0; i < s->nr_user; i++)
		r->user_pcs[i] = ivm_get_u64(c);
	for (i = 0; i < s->nr_labels; i++) {
		r->labels[i].key = get_string(r, c);
		r->labels[i].value = get_string(r, c);
		if (!r->labels[i].key || !r->labels[i].value)
			return false;
	}
	for (i = 0; i < s->nr_counters; i++) {
		r->counters[i].id = ivm_get_u32(c);
		r->counters[i].value = ivm_get_u64(c);
	}
	for (i = 0; with_flags && i < s->nr_kernel; i++)
		r->kernel_flags[i] = ivm_get_u8(c);
	for (i = 0; with_flags && i < s->nr_user; i++)
		r->user_flags[i] = ivm_get_u8(c);
	if (c->bad || c->left)
		return false;
	s->kernel_pcs = r->kernel_pcs;
	s->user_pcs = r->user_pcs;
	s->kernel_flags = with_flags ? r->kernel_flags : NULL;
	s->user_flags = with_flags ? r->user_flags : NULL;
	s->labels = r->labels;
	s->counters = r->counters;
	return true;
}

static bool decode_meta(struct ivm_profile_reader *r, struct ivm_cursor *c,
			struct ivm_profile_record *rec)
{
	size_t nr = 0;

	while (c->left) {
		if (nr == r->meta_cap) {
			size_t cap = r->meta_cap ? 2 * r->meta_cap : 16;
			struct ivm_label *m = realloc(r->meta, cap * sizeof(*m));

			if (!m)
				return false;
			r->meta = m;
			r->meta_cap = cap;
		}
		r->meta[nr].key = get_string(r, c);
		r->meta[nr].value = get_string(r, c);
		if (!r->meta[nr].key || !r->meta[nr].value)
			return false;
		nr++;
	}
	rec->meta.items = r->meta;
	rec->meta.nr = nr;
	return true;
}

static bool decode_stats(struct ivm_profile_reader *r, struct ivm_cursor *c,
			 struct ivm_profile_record *rec)
{
	size_t nr = 0;

	rec->stats.time_ns = 0;
	if (rec->type == IVM_RECORD_END)
		rec->stats.time_ns = ivm_get_u64(c);
	while (c->left && !c->bad) {
		if (nr == r->stats_cap) {
			size_t cap = r->stats_cap ? 2 * r->stats_cap : 16;
			struct ivm_stat *st = realloc(r->stats, cap * sizeof(*st));

			if (!st)
				return false;
			r->stats = st;
			r->stats_cap = cap;
		}
		r->stats[nr].name = get_string(r, c);
		r->stats[nr].value = ivm_get_u64(c);
		if (!r->stats[nr].name)
			return false;
		nr++;
	}
	rec->stats.items = r->stats;
	rec->stats.nr = nr;
	return !c->bad;
}

static void get_task_id(struct ivm_cursor *c, struct ivm_idle_task_id *t)
{
	const uint8_t *comm;

	t->pid = ivm_get_u32(c);
	t->tid = ivm_get_u32(c);
	comm = ivm_cursor_take(c, IVM_COMM_LEN);
	memset(t->comm, 0, sizeof(t->comm));
	if (comm)
		memcpy(t->comm, comm, IVM_COMM_LEN - 1);
}

/* Cap on irq counts per snapshot a file may carry (newer writers). */
#define MAX_FILE_IRQ_KINDS 16

static void get_snapshot(struct ivm_cursor *c, unsigned int nr_irq,
			 struct ivm_idle_snapshot *s)
{
	unsigned int k;

	s->time_ns = ivm_get_u64(c);
	s->cpu_switches = ivm_get_u64(c);
	s->idle_switches = ivm_get_u64(c);
	s->rq_clock = ivm_get_u64(c);
	s->irqs.known = ivm_get_u32(c) & ((1u << IVM_IRQ_NR_KINDS) - 1);
	ivm_get_u32(c);
	for (k = 0; k < nr_irq; k++) {
		uint64_t v = ivm_get_u64(c);

		if (k < IVM_IRQ_NR_KINDS)
			s->irqs.count[k] = v;
	}
	/* Kinds this file does not carry are unknown, whatever it says. */
	if (nr_irq < IVM_IRQ_NR_KINDS)
		s->irqs.known &= (1u << nr_irq) - 1;
}

static bool decode_idle_period(struct ivm_cursor *c,
			       struct ivm_idle_record *r)
{
	unsigned int nr_snap, nr_irq;

	memset(r, 0, sizeof(*r));
	r->vcpu = ivm_get_u32(c);
	r->flags = ivm_get_u32(c);
	r->start_ns = ivm_get_u64(c);
	r->end_ns = ivm_get_u64(c);
	r->halts = ivm_get_u32(c);
	r->wake_mask = ivm_get_u32(c) & ((1u << IVM_IRQ_NR_KINDS) - 1);
	r->exit_reason = ivm_get_u32(c);
	ivm_get_u32(c);
	get_task_id(c, &r->to_idle);
	get_task_id(c, &r->from_idle);
	nr_snap = ivm_get_u8(c);
	nr_irq = ivm_get_u8(c);
	ivm_get_u16(c);
	if (c->bad || nr_snap != 3 || nr_irq > MAX_FILE_IRQ_KINDS ||
	    r->end_ns < r->start_ns)
		return false;
	get_snapshot(c, nr_irq, &r->before);
	get_snapshot(c, nr_irq, &r->wake_before);
	get_snapshot(c, nr_irq, &r->after);
	return !c->bad && !c->left;
}

static bool decode_thread(struct ivm_profile_reader *r, struct ivm_cursor *c,
			  struct ivm_thread_record *t)
{
	struct ivm_idle_task_id id;
	unsigned int i;

	memset(t, 0, sizeof(*t));
	get_task_id(c, &id);
	t->pid = id.pid;
	t->tid = id.tid;
	memcpy(t->comm, id.comm, IVM_COMM_LEN);
	t->start_time = ivm_get_u64(c);
	t->first_ns = ivm_get_u64(c);
	t->last_ns = ivm_get_u64(c);
	t->flags = ivm_get_u32(c);
	t->samples = ivm_get_u32(c);
	t->nr_counters = ivm_get_u16(c);
	ivm_get_u16(c);
	if (c->bad || t->nr_counters > IVM_SAMPLE_MAX_COUNTERS ||
	    t->last_ns < t->first_ns)
		return false;
	for (i = 0; i < t->nr_counters; i++) {
		r->counters[i].id = ivm_get_u32(c);
		r->counters[i].value = ivm_get_u64(c);
	}
	t->counters = r->counters;
	return !c->bad && !c->left;
}

/*
 * A HOST_SPANS record: the header's fields, then exactly nr_spans spans,
 * by start, within the 64-bit clock; spans of kinds this reader does not
 * know are skipped.
 */
static bool decode_spans(struct ivm_profile_reader *r, struct ivm_cursor *c,
			 struct ivm_spans_record *sr)
{
	uint64_t base, prev = 0;
	uint32_t nr, i;
	size_t kept = 0;

	memset(sr, 0, sizeof(*sr));
	sr->lane = ivm_get_u32(c);
	sr->min_ns = ivm_get_u32(c);
	base = ivm_get_u64(c);
	nr = ivm_get_u32(c);
	sr->dropped = ivm_get_u32(c);
	sr->dropped_ns = ivm_get_u64(c);
	if (c->bad || nr > IVM_SPANS_MAX ||
	    (sr->lane >= IVM_SPAN_MAX_VCPUS &&
	     sr->lane != IVM_SPAN_LANE_DISK) ||
	    c->left != (size_t)nr * SPAN_SIZE ||
	    base > UINT64_MAX - 2 * (uint64_t)UINT32_MAX)
		return false;
	for (i = 0; i < nr; i++) {
		uint32_t start = ivm_get_u32(c), dur = ivm_get_u32(c);
		uint8_t kind = ivm_get_u8(c), flags = ivm_get_u8(c);

		ivm_get_u16(c);
		if (i && start < prev)
			return false;
		prev = start;
		if (kind >= IVM_SPAN_NR_KINDS)
			continue;
		r->spans[kept++] = (struct ivm_span){
			.start_ns = base + start, .dur_ns = dur, .kind = kind,
			.flags = flags,
		};
	}
	sr->nr = kept;
	sr->spans = r->spans;
	return !c->bad && !c->left;
}

static bool checksum_ok(const uint8_t *h, uint32_t len, uint32_t crc)
{
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	/* Let the fuzzer reach the payload decoders behind the CRC. */
	(void)h;
	(void)len;
	(void)crc;
	return true;
#else
	return idlevm_crc32c(idlevm_crc32c(0, h + 4, 8),
			     h + IVM_RECORD_HEADER_SIZE, len) == crc;
#endif
}

/* Find the next record magic at or after pos; len if none. */
static size_t scan_magic(const struct ivm_profile_reader *r, size_t pos)
{
	static const uint8_t magic[4] = { 'I', 'V', 'M', 'R' };
	const uint8_t *p;

	if (pos >= r->len)
		return r->len;
	p = memmem(r->data + pos, r->len - pos, magic, sizeof(magic));
	return p ? (size_t)(p - r->data) : r->len;
}

bool ivm_profile_reader_next(struct ivm_profile_reader *r,
			     struct ivm_profile_record *rec)
{
	while (r->pos < r->len) {
		size_t at = scan_magic(r, r->pos);
		const uint8_t *h;
		uint32_t len, crc;
		uint16_t type;
		struct ivm_cursor c;
		bool ok;

		if (at > r->pos)
			r->damage.bytes_skipped += at - r->pos;
		r->pos = at;
		if (at == r->len)
			break;
		h = r->data + at;
		if (r->len - at < IVM_RECORD_HEADER_SIZE) {
			r->damage.tail_bytes += r->len - at;
			r->pos = r->len;
			break;
		}
		type = (uint16_t)ivm_le_load(h + 4, 2);
		len = (uint32_t)ivm_le_load(h + 8, 4);
		crc = (uint32_t)ivm_le_load(h + 12, 4);
		if (len > IVM_RECORD_MAX_PAYLOAD) {
			/* Not a record header after all; look further. */
			r->damage.bytes_skipped += 1;
			r->pos = at + 1;
			continue;
		}
		if (r->len - at - IVM_RECORD_HEADER_SIZE < len) {
			/*
			 * Torn record at the end of a killed run; but it may
			 * also be a stray magic inside damage, so only call it
			 * a tail when no later magic exists.
			 */
			size_t next = scan_magic(r, at + 1);

			if (next == r->len) {
				r->damage.tail_bytes += r->len - at;
				r->pos = r->len;
				break;
			}
			r->damage.bytes_skipped += next - at;
			r->pos = next;
			continue;
		}
		if (!checksum_ok(h, len, crc)) {
			r->damage.records_bad++;
			/*
			 * The length may be the damaged field: resume the scan
			 * just after this magic rather than trusting it.
			 */
			r->pos = at + 1;
			r->damage.bytes_skipped += 1;
			continue;
		}
		r->pos = at + IVM_RECORD_HEADER_SIZE + len;
		r->strings_used = 0;
		ivm_cursor_init(&c, h + IVM_RECORD_HEADER_SIZE, len);
		memset(rec, 0, sizeof(*rec));
		rec->type = type;
		rec->offset = at;
		switch (type) {
		case IVM_RECORD_SAMPLE:
		case IVM_RECORD_SAMPLE2:
			ok = decode_sample(r, &c, type == IVM_RECORD_SAMPLE2,
					   &rec->sample);
			rec->type = IVM_RECORD_SAMPLE;
			break;
		case IVM_RECORD_META:
			ok = decode_meta(r, &c, rec);
			break;
		case IVM_RECORD_IDLE_PERIOD:
			ok = decode_idle_period(&c, &rec->idle);
			break;
		case IVM_RECORD_THREAD:
			ok = decode_thread(r, &c, &rec->thread);
			break;
		case IVM_RECORD_HOST_SPANS:
			ok = decode_spans(r, &c, &rec->spans);
			break;
		case IVM_RECORD_STATS:
		case IVM_RECORD_END:
			ok = decode_stats(r, &c, rec);
			if (ok && type == IVM_RECORD_END)
				r->damage.ended = true;
			break;
		default:
			r->damage.records_unknown++;
			continue;
		}
		if (!ok) {
			r->damage.records_bad++;
			continue;
		}
		r->damage.records_ok++;
		return true;
	}
	return false;
}
