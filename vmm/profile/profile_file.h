/* SPDX-License-Identifier: MIT */
/*
 * The profile file: raw, unsymbolized samples in framed, checksummed,
 * append-only records, so a killed run keeps everything it flushed and
 * symbolization happens later, offline (`idlevm report`).
 *
 * Layout (all integers little-endian):
 *
 *   file header, 16 bytes:  "IDLEVMPF"  u32 version (1)  u32 flags (0)
 *   records, each:
 *        0  4  magic     "IVMR"
 *        4  2  type      enum ivm_record_type
 *        6  2  flags     zero
 *        8  4  length    payload bytes, <= IVM_RECORD_MAX_PAYLOAD
 *       12  4  checksum  CRC32C of bytes 4..11 and the payload
 *       16 ..  payload
 *
 * Record payloads:
 *   META    repeated { u16 klen, key, u16 vlen, value }: the run's
 *           configuration and the guest's identity (domain, kernel release,
 *           kaslr_offset, idle source, capture mode...).
 *   SAMPLE  u64 time_ns, u32 vcpu, u8 kind, u8 0, u16 stack_flags, u32 pid,
 *           u32 tid, u8 comm[16], u16 nr_kernel, u16 nr_user, u16 nr_labels,
 *           u16 nr_counters, u64 kernel_pcs[], u64 user_pcs[],
 *           labels { u16 klen, key, u16 vlen, value }[],
 *           counters { u32 id, u64 value }[]
 *   SAMPLE2 a SAMPLE's payload, then u8 kernel_flags[nr_kernel] and u8
 *           user_flags[nr_user] (IVM_PC_*: which pcs are exact, not
 *           return addresses).  What the writer writes; SAMPLE is read as
 *           all return addresses.
 *   STATS   repeated { u16 klen, key, u64 value }: running totals (samples by
 *           kind, discarded, lost...), written at each flush; the last one
 *           wins.
 *   END     u64 time_ns then the same body as STATS: the run finished and
 *           closed the file; a file without END was cut short.
 *   IDLE_PERIOD  one idle period of one vCPU (vmm/profile/idle_periods.h):
 *           u32 vcpu, u32 flags, u64 start_ns, u64 end_ns, u32 halts,
 *           u32 wake_mask, u32 exit_reason, u32 0,
 *           to-idle task { u32 pid, u32 tid, u8 comm[16] },
 *           from-idle task { the same } (pid 0, tid 0: unknown),
 *           u8 nr_snapshots (3), u8 nr_irq, u16 0, then the snapshots
 *           before, wake_before, after, each { u64 time_ns,
 *           u64 cpu_switches, u64 idle_switches, u64 rq_clock,
 *           u32 irq_known, u32 0,
 *           u64 irq[nr_irq] } (enum ivm_irq_kind order; kinds a newer
 *           writer adds past IVM_IRQ_NR_KINDS are skipped).  Added after
 *           version 1 shipped: older readers skip it as unknown.
 *   THREAD  one guest thread's scheduler accounting over the run so far
 *           (profile --switch-every, vmm/profile/switch_sampler.h):
 *           u32 pid, u32 tid, u8 comm[16], u64 start_time (the task's,
 *           guest ns since boot: with tid, which thread this is),
 *           u64 first_ns, u64 last_ns (host monotonic times of its first
 *           and last reads), u32 flags (IVM_THREAD_*), u32 samples (switch
 *           samples kept of it), u16 nr_counters, u16 0,
 *           counters { u32 id, u64 value }[] (enum ivm_counter_id: totals
 *           from first_ns to last_ns, or from the thread's start with
 *           IVM_THREAD_BORN; ids a reader does not know are skipped).  A
 *           thread's record is written again whenever its totals moved,
 *           at most once a flush, and once more at the end: the last one
 *           wins.  Added after version 1 shipped: older readers skip it.
 *   HOST_SPANS  what the host did over time on one lane (a vCPU's thread,
 *           or the guest's disks: lane IVM_SPAN_LANE_DISK), for the
 *           timeline: u32 lane, u32 min_ns (shorter spans were left
 *           out), u64 base_ns, u32 nr_spans (<= IVM_SPANS_MAX), u32
 *           dropped, u64 dropped_ns (spans left out since the lane's last
 *           record, shorter than min_ns or past the writer's cap, and
 *           their time), then spans { u32 start (ns after base_ns), u32
 *           duration ns, u8 kind (enum ivm_span_kind), u8 flags, u16 0 },
 *           by start, never overlapping the lane's earlier ones.  A lane's
 *           span sum plus its dropped_ns is what the STATS count for it
 *           (a vCPU's host_steal_ns).  Written at each flush, one record
 *           per lane that has something to say; spans of kinds a reader
 *           does not know are skipped.  Added after version 1 shipped:
 *           older readers skip it.
 * Unknown record types are skipped whole (their length is known), so newer
 * writers stay readable by older readers.
 *
 * Invariants of the writer: the file only ever grows; a flush writes whole
 * records; a record is never rewritten.  The reader trusts nothing: a bad
 * checksum, a bad length or a torn tail costs only the damaged bytes, which
 * it skips (scanning for the next record magic) and counts.
 */
#ifndef IVM_PROFILE_FILE_H
#define IVM_PROFILE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "profile/idle_periods.h"
#include "profile/sample.h"

#define IVM_PROFILE_MAGIC	"IDLEVMPF"
#define IVM_PROFILE_VERSION	1
#define IVM_PROFILE_HEADER_SIZE	16
#define IVM_RECORD_MAGIC	0x524d5649u	/* "IVMR" read as LE u32 */
#define IVM_RECORD_HEADER_SIZE	16
#define IVM_RECORD_MAX_PAYLOAD	(256 * 1024)

enum ivm_record_type {
	IVM_RECORD_META = 1,
	IVM_RECORD_SAMPLE = 2,
	IVM_RECORD_STATS = 3,
	IVM_RECORD_END = 4,
	IVM_RECORD_IDLE_PERIOD = 5,
	IVM_RECORD_SAMPLE2 = 6,
	IVM_RECORD_THREAD = 7,
	IVM_RECORD_HOST_SPANS = 8,
};

/* What a HOST_SPANS record's span was. */
enum ivm_span_kind {
	/* A vCPU's thread woken, waiting for a host CPU (wake delay). */
	IVM_SPAN_WAKE_DELAY = 0,
	/* A vCPU's thread preempted while runnable, waiting to run again. */
	IVM_SPAN_PREEMPTED = 1,
	/*
	 * At least one of QEMU's disk calls in flight (the union of the
	 * calls; flags: a bit per enum ivm_disk_kind among them).
	 */
	IVM_SPAN_DISK = 2,
	IVM_SPAN_NR_KINDS,
};

/* The lane of the guest's disks; vCPU lanes are below IVM_SPAN_MAX_VCPUS. */
#define IVM_SPAN_LANE_DISK	UINT32_MAX
#define IVM_SPAN_MAX_VCPUS	4096
/* Spans in one record (12 bytes each: well under the payload cap). */
#define IVM_SPANS_MAX		4096

struct ivm_span {
	uint64_t start_ns;
	uint32_t dur_ns;
	uint8_t kind;		/* enum ivm_span_kind */
	uint8_t flags;
};

/* A lane's spans as a HOST_SPANS record holds them. */
struct ivm_spans_record {
	uint32_t lane;		/* vCPU, or IVM_SPAN_LANE_DISK */
	uint32_t min_ns;
	uint32_t dropped;
	uint64_t dropped_ns;
	size_t nr;
	const struct ivm_span *spans;	/* by start; borrowed */
};

/* IVM_THREAD_* flags of a THREAD record. */
enum {
	/* First seen after the run began: totals count from its start. */
	IVM_THREAD_BORN		= 1 << 0,
	/* Gone from the guest's task lists (exited): totals end at last_ns. */
	IVM_THREAD_GONE		= 1 << 1,
	/* The run's last record of it (written at the end). */
	IVM_THREAD_FINAL	= 1 << 2,
};

/* A thread's accounting as a THREAD record holds it. */
struct ivm_thread_record {
	uint32_t pid;			/* tgid */
	uint32_t tid;
	char comm[IVM_COMM_LEN];	/* NUL-terminated */
	uint64_t start_time;
	uint64_t first_ns, last_ns;
	uint32_t flags;			/* IVM_THREAD_* */
	uint32_t samples;
	uint16_t nr_counters;		/* <= IVM_SAMPLE_MAX_COUNTERS */
	const struct ivm_counter *counters;	/* borrowed, as in a sample */
};

/* A guest task as an idle-period record names it. */
struct ivm_idle_task_id {
	uint32_t pid;		/* tgid; 0 with tid 0: unknown */
	uint32_t tid;
	char comm[IVM_COMM_LEN];	/* NUL-terminated */
};

/* An idle period as the file holds it: task addresses become names. */
struct ivm_idle_record {
	uint32_t vcpu;
	uint32_t flags;			/* IVM_IDLE_* */
	uint64_t start_ns, end_ns;
	uint32_t halts;
	uint32_t wake_mask;		/* bit per enum ivm_irq_kind */
	uint32_t exit_reason;
	struct ivm_idle_task_id to_idle, from_idle;
	struct ivm_idle_snapshot before, wake_before, after;
};

/* A named running total, in STATS and END records. */
struct ivm_stat {
	const char *name;
	uint64_t value;
};

/* ---- writing ----------------------------------------------------------- */

struct ivm_profile_writer;

/*
 * Create path and write the file header.  Data is buffered and reaches the
 * file at ivm_profile_writer_flush() or when the buffer fills.  A regular
 * file is first written under a temporary name next to path (path.XXXXXX)
 * and takes path's place at the first flush after a record was written:
 * a writer destroyed with nothing written removes it, so a run that fails
 * during setup leaves whatever was at path before untouched.  Other files
 * (a FIFO, /dev/stdout) are written directly.
 */
struct ivm_error *ivm_profile_writer_create(const char *path,
					    struct ivm_profile_writer **ret);

struct ivm_error *ivm_profile_write_meta(struct ivm_profile_writer *w,
					 const char *key, const char *value);

/*
 * Append a sample.  Samples breaking the caps in sample.h are refused with
 * IVM_ERROR_INVALID (a bug in the producer, not in the guest).
 */
struct ivm_error *ivm_profile_write_sample(struct ivm_profile_writer *w,
					   const struct ivm_sample *s);

struct ivm_error *ivm_profile_write_stats(struct ivm_profile_writer *w,
					  const struct ivm_stat *stats,
					  size_t nr_stats);

struct ivm_error *ivm_profile_write_idle_period(struct ivm_profile_writer *w,
						const struct ivm_idle_record *r);

/* IVM_ERROR_INVALID when nr_counters breaks IVM_SAMPLE_MAX_COUNTERS. */
struct ivm_error *ivm_profile_write_thread(struct ivm_profile_writer *w,
					   const struct ivm_thread_record *t);

/*
 * A lane's spans (by start, none within 2^33 ns of the clock's end): as many
 * records as they need (IVM_SPANS_MAX a record, a record's spans within
 * 4.29 s of its base), the dropped counts in the first.  Nothing is
 * written when there are neither spans nor dropped ones.
 * IVM_ERROR_INVALID when the spans are not by start or their lane or
 * kind is out of range.  *bytes (NULL: not wanted) grows by the bytes
 * the records take in the file, for what the timeline costs.
 */
struct ivm_error *ivm_profile_write_spans(struct ivm_profile_writer *w,
					  const struct ivm_spans_record *sr,
					  uint64_t *bytes);

/* Write buffered records to the file (whole records only). */
struct ivm_error *ivm_profile_writer_flush(struct ivm_profile_writer *w);

/*
 * Write an END record with the final stats, flush, fsync and close.  The
 * writer is freed even when this fails.
 */
struct ivm_error *ivm_profile_writer_finish(struct ivm_profile_writer *w,
					    uint64_t time_ns,
					    const struct ivm_stat *stats,
					    size_t nr_stats);

/* Close without an END record (the file reads as cut short).  NULL ok. */
void ivm_profile_writer_destroy(struct ivm_profile_writer *w);

/* ---- reading ----------------------------------------------------------- */

struct ivm_profile_reader;

/* A decoded record; everything points into the reader, valid until next. */
struct ivm_profile_record {
	enum ivm_record_type type;
	uint64_t offset;		/* file offset of the record */
	union {
		struct ivm_sample sample;	/* SAMPLE, SAMPLE2 (as SAMPLE) */
		struct {			/* META */
			const struct ivm_label *items;
			size_t nr;
		} meta;
		struct {			/* STATS, END */
			const struct ivm_stat *items;
			size_t nr;
			uint64_t time_ns;	/* END only */
		} stats;
		struct ivm_idle_record idle;	/* IDLE_PERIOD */
		struct ivm_thread_record thread;	/* THREAD */
		struct ivm_spans_record spans;	/* HOST_SPANS */
	};
};

/* What the reader had to skip, for the user to see. */
struct ivm_profile_damage {
	uint64_t records_ok;
	uint64_t records_bad;		/* bad checksum or undecodable payload */
	uint64_t records_unknown;	/* unknown type, skipped */
	uint64_t bytes_skipped;		/* garbage between records */
	uint64_t tail_bytes;		/* torn record at the end of the file */
	bool ended;			/* an END record was seen */
};

/* Open a profile file; fails with IVM_ERROR_INVALID if it is not one. */
struct ivm_error *ivm_profile_reader_open(const char *path,
					  struct ivm_profile_reader **ret);

/* Read a profile from memory (borrowed), for tests and fuzzing. */
struct ivm_error *ivm_profile_reader_from_memory(const void *buf, size_t len,
						 struct ivm_profile_reader **ret);

void ivm_profile_reader_destroy(struct ivm_profile_reader *r);

/*
 * Decode the next intact record into *rec.  Returns false at the end of the
 * file.  Damage never stops the reader: it is skipped and counted.
 */
bool ivm_profile_reader_next(struct ivm_profile_reader *r,
			     struct ivm_profile_record *rec);

const struct ivm_profile_damage *
ivm_profile_reader_damage(const struct ivm_profile_reader *r);

#endif /* IVM_PROFILE_FILE_H */
