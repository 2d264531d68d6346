/* SPDX-License-Identifier: MIT */
/*
 * idle_summary: what a profile says about its run and its idle periods,
 * for `idlevm report`: the run's duration and idle source, the guest's
 * idle transitions seen, captured and lost by cause (from the last STATS
 * or END record), and its idle periods (IDLE_PERIOD records): count and
 * duration histogram per vCPU, wake causes, and which task hands the CPU
 * to which through idle.  The records are kept (up to
 * IVM_IDLE_SUMMARY_MAX_PERIODS) for the timeline writer (timeline.h).
 *
 * Everything comes from a profile file the reader already bounded and
 * NUL-terminated (profile_file.h); guest comms are still guest bytes, so
 * the summary rewrites them to printable words ('_' for anything else,
 * quotes and markup included) before any writer sees them.  It caps what
 * it keeps and counts what it drops.
 */
#ifndef IVM_IDLE_SUMMARY_H
#define IVM_IDLE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "profile/profile_file.h"

#define IVM_IDLE_SUMMARY_MAX_PERIODS (1u << 21)
#define IVM_IDLE_SUMMARY_MAX_VCPUS 256
#define IVM_IDLE_SUMMARY_MAX_SAMPLES (1u << 20)
#define IVM_IDLE_SUMMARY_MAX_SPANS (1u << 21)

/* A span of the host's (HOST_SPANS), as the timeline draws it. */
struct ivm_idle_summary_span {
	uint64_t start_ns, end_ns;
	uint32_t lane;		/* vCPU, or IVM_SPAN_LANE_DISK */
	uint8_t kind;		/* enum ivm_span_kind */
	uint8_t flags;		/* IVM_SPAN_DISK: a bit per ivm_disk_kind */
};

/* An on-CPU or transition sample, as the timeline shows it. */
struct ivm_idle_summary_sample {
	uint64_t time_ns;
	uint32_t vcpu;
	uint32_t tid;
	enum ivm_sample_kind kind;
	char comm[IVM_COMM_LEN];
};

/*
 * What ended an idle period, as its time is told (one per period: the
 * most telling of the interrupts that woke its vCPU).
 */
enum ivm_idle_cause {
	IVM_IDLE_CAUSE_DEVICE,	/* a device interrupt: I/O completed */
	/*
	 * An IPI from another vCPU: mostly a task woken there for this one
	 * (a wakeup of a task on an idle CPU is a rescheduling IPI, or since
	 * 5.x a function-call IPI through the wake list), or a TLB shootdown.
	 */
	IVM_IDLE_CAUSE_IPI,
	IVM_IDLE_CAUSE_TIMER,	/* a timer: a sleep or timeout ended */
	IVM_IDLE_CAUSE_UNKNOWN,
	IVM_IDLE_CAUSE_NR,
};

/* The cause of a wake_mask, and its name ("device", "ipi", "timer"...). */
enum ivm_idle_cause ivm_idle_cause_of(uint32_t wake_mask);
const char *ivm_idle_cause_name(enum ivm_idle_cause c);

struct ivm_idle_summary {
	struct ivm_idle_record *periods;	/* in file order */
	size_t nr_periods, cap_periods;
	uint64_t dropped_periods;		/* past the cap */
	struct ivm_idle_summary_sample *samples;
	size_t nr_samples, cap_samples;
	uint64_t dropped_samples;
	/*
	 * The host's spans (HOST_SPANS records), in file order (by start
	 * within a lane), and per lane their time and what the writer left
	 * out (shorter than its threshold, or past its cap): a vCPU's spans
	 * plus its left-out time are its host_steal_ns.
	 */
	struct ivm_idle_summary_span *spans;
	size_t nr_spans, cap_spans;
	uint64_t dropped_spans;			/* past the cap, or lane */
	uint64_t span_records;
	uint64_t steal_span_ns[IVM_IDLE_SUMMARY_MAX_VCPUS];
	uint64_t steal_left_out_ns[IVM_IDLE_SUMMARY_MAX_VCPUS];
	uint64_t steal_left_out[IVM_IDLE_SUMMARY_MAX_VCPUS];
	uint64_t disk_span_ns, disk_left_out_ns, disk_left_out;
	struct ivm_stat *stats;			/* the last STATS/END seen */
	char *stat_names;			/* their names, NUL-separated */
	size_t nr_stats;
	/*
	 * Idle time of every period with both ends known (none is capped),
	 * per vCPU and by cause; periods without a start are counted apart.
	 */
	uint64_t idle_ns[IVM_IDLE_SUMMARY_MAX_VCPUS];
	uint64_t cause_ns[IVM_IDLE_CAUSE_NR];
	uint64_t cause_periods[IVM_IDLE_CAUSE_NR];
	uint64_t timed_periods, untimed_periods;
	char idle_source[32];
	char guest[64];
	uint32_t nr_vcpus;			/* highest vCPU + 1 seen */
};

void ivm_idle_summary_init(struct ivm_idle_summary *s);
void ivm_idle_summary_deinit(struct ivm_idle_summary *s);

/* Take one record of the file (others than these kinds are ignored). */
struct ivm_error *ivm_idle_summary_add(struct ivm_idle_summary *s,
				       const struct ivm_profile_record *rec);

/* Whether the last STATS/END record has the stat. */
bool ivm_idle_summary_has_stat(const struct ivm_idle_summary *s,
			       const char *name);

/* A stat of the last STATS/END record, 0 when absent. */
uint64_t ivm_idle_summary_stat(const struct ivm_idle_summary *s,
			       const char *name);

/* The name of a wake_mask ("timer", "call+timer", "unknown"). */
void ivm_idle_wake_name(uint32_t wake_mask, char *buf, size_t size);

/*
 * Print the run (always) and the idle periods (when there are any) as the
 * text report's header block.
 */
void ivm_idle_summary_print(const struct ivm_idle_summary *s, FILE *out);

/*
 * One line per idle period, tab-separated, for scripts:
 * vcpu start_ns end_ns flags wake to_pid to_tid to_comm from_pid from_tid
 * from_comm before_rq_clock after_rq_clock before_idle_switches
 * after_idle_switches.
 */
void ivm_idle_summary_print_periods(const struct ivm_idle_summary *s,
				    FILE *out);

#endif /* IVM_IDLE_SUMMARY_H */
