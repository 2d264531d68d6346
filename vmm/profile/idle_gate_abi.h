/* SPDX-License-Identifier: MIT */
/*
 * What the idle gate's BPF program (idle_gate.bpf.c) and its loader
 * (idle_gate.c) share: the maps' values and the ring's records.  Plain
 * fixed-size types, the same layout on both sides of the bpf() call.
 */
#ifndef IVM_IDLE_GATE_ABI_H
#define IVM_IDLE_GATE_ABI_H

#include <linux/types.h>

#define IVM_GATE_MAX_VCPUS	256
/* irq_stat's span is below 512 bytes (irq_stat.c checks). */
#define IVM_GATE_SPAN_WORDS	64
#define IVM_GATE_RING_BYTES	(256 * 1024)

/* Where one vCPU's words are in QEMU's memory, by its thread's id. */
struct ivm_gate_words {
	__u64 switches_hva;	/* the guest CPU's rq->nr_switches */
	__u64 irq_hva;		/* its irq_stat span; 0: not read */
	__u64 sum_hva;		/* its kstat.irqs_sum; 0: not read */
	__u32 irq_len;		/* bytes at irq_hva */
	__u32 vcpu;		/* index into seen, the profiler's vCPU */
};

/* What one vCPU's sleeps saw (the program's state and its counts). */
struct ivm_gate_seen {
	__u64 switches;		/* at the last sleep read */
	__u64 sum;
	__u64 irq[IVM_GATE_SPAN_WORDS];
	__u64 valid;		/* the three above were read */
	__u64 passed;		/* sleeps let pass since the last record */
	__u64 passed_ts;	/* the last of them (CLOCK_MONOTONIC ns) */
	/* Running counts. */
	__u64 sleeps;
	__u64 records;		/* sleeps that woke the loop */
	__u64 first;
	__u64 read_failed;
	__u64 switch_moved;
	__u64 irq_moved;	/* let pass: only interrupts moved */
	__u64 none_moved;	/* let pass: nothing moved */
	__u64 ring_full;	/* a record lost: the ring was full */
};

enum { IVM_GATE_FIRST = 1, IVM_GATE_SWITCHED, IVM_GATE_UNREADABLE };
enum { IVM_GATE_KNOWN_IRQ = 1, IVM_GATE_KNOWN_SUM = 2 };

/* One sleep that wakes the loop. */
struct ivm_gate_record {
	__u32 vcpu;
	__u32 why;		/* IVM_GATE_* */
	__u32 known;		/* IVM_GATE_KNOWN_*: what passed_* hold */
	__u32 pad;
	__u64 ts;		/* the sleep (CLOCK_MONOTONIC ns) */
	__u64 passed;		/* sleeps let pass before it, since the last */
	__u64 passed_ts;	/* the last of them */
	__u64 passed_sum;	/* its interrupt counts, when passed */
	__u64 passed_irq[IVM_GATE_SPAN_WORDS];
};

#endif /* IVM_IDLE_GATE_ABI_H */
