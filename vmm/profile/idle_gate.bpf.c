// SPDX-License-Identifier: GPL-2.0
/*
 * The idle gate's program (idle_gate.h): at each sleep of a watched QEMU's
 * vCPU thread, decide in the kernel whether the profiler's loop must wake.
 *
 * The thread that sleeps is `current` at sched_switch, so its process's
 * memory, the guest's RAM, is what bpf_probe_read_user() reads: the vCPU's
 * guest run queue's switch count and its interrupt counts, at host
 * addresses the loader put in `words`.  A sleep after which the switch
 * count moved (or the first, or one whose words cannot be read) writes a
 * record to `ring`, which wakes the loop; the others only count, keeping
 * the interrupt counts of the last for the next record (what a look at
 * that sleep would have read of them).  Built with clang -target bpf,
 * carried inside idlevm (idle_gate_obj.S).
 *
 * GPL: bpf_probe_read_user() is a GPL-only helper.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "idle_gate_abi.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IVM_GATE_MAX_VCPUS);
	__type(key, __u32);
	__type(value, struct ivm_gate_words);
} words SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IVM_GATE_MAX_VCPUS);
	__type(key, __u32);
	__type(value, struct ivm_gate_seen);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, IVM_GATE_RING_BYTES);
} ring SEC(".maps");

/* A sleep's interrupt counts read here: the BPF stack holds 512 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[IVM_GATE_SPAN_WORDS]);
} scratch SEC(".maps");

/* Whether the profiler watches now (--cpu-budget's slices): 0 or 1. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} watching SEC(".maps");

const volatile __u32 qemu_tgid;

/* A record for the loop: this sleep, and the last one let pass before. */
static void ring_record(struct ivm_gate_seen *s,
			const struct ivm_gate_words *w, __u32 why, __u64 now)
{
	struct ivm_gate_record *r;
	__u32 i;

	r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		s->ring_full++;	/* the loop is behind: it reads soon */
		return;
	}
	r->vcpu = w->vcpu;
	r->why = why;
	r->known = (w->irq_hva && w->irq_len ? IVM_GATE_KNOWN_IRQ : 0) |
		   (w->sum_hva ? IVM_GATE_KNOWN_SUM : 0);
	r->pad = 0;
	r->ts = now;
	r->passed = s->passed;
	r->passed_ts = s->passed_ts;
	r->passed_sum = s->sum;
#pragma unroll
	for (i = 0; i < IVM_GATE_SPAN_WORDS; i++)
		r->passed_irq[i] = s->irq[i];
	bpf_ringbuf_submit(r, 0);
	s->passed = 0;
	s->records++;
}

/* raw_tp/sched_switch: (bool preempt, prev, next, unsigned int prev_state) */
SEC("raw_tp/sched_switch")
int gate_switch(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), sw = 0, sum = 0, now;
	__u32 tid = (__u32)id, zero = 0, len, i, why = 0, *on;
	struct ivm_gate_words *w;
	struct ivm_gate_seen *s;
	bool irq_moved = false;
	__u64 *buf;

	if ((__u32)(id >> 32) != qemu_tgid || ctx->args[0])
		return 0;
	/* TASK_INTERRUPTIBLE or TASK_UNINTERRUPTIBLE: a sleep, not a yield. */
	if (!(ctx->args[3] & 3))
		return 0;
	w = bpf_map_lookup_elem(&words, &tid);
	if (!w)
		return 0;
	i = w->vcpu;
	s = bpf_map_lookup_elem(&seen, &i);
	buf = bpf_map_lookup_elem(&scratch, &zero);
	on = bpf_map_lookup_elem(&watching, &zero);
	if (!s || !buf || !on)
		return 0;
	/*
	 * Not watched: nothing read, counted or recorded, and the first
	 * sleep watched again is a first (the profiler starts afresh then).
	 */
	if (!*on) {
		s->valid = 0;
		s->passed = 0;
		return 0;
	}
	now = bpf_ktime_get_ns();
	s->sleeps++;
	len = w->irq_len;
	if (len > IVM_GATE_SPAN_WORDS * 8)
		len = IVM_GATE_SPAN_WORDS * 8;
	if (bpf_probe_read_user(&sw, sizeof(sw), (void *)w->switches_hva) ||
	    (w->sum_hva &&
	     bpf_probe_read_user(&sum, sizeof(sum), (void *)w->sum_hva)) ||
	    (w->irq_hva && len &&
	     bpf_probe_read_user(buf, len, (void *)w->irq_hva))) {
		s->read_failed++;
		s->valid = 0;
		ring_record(s, w, IVM_GATE_UNREADABLE, now);
		return 0;
	}
	if (!s->valid) {
		s->first++;
		why = IVM_GATE_FIRST;
	} else if (sw != s->switches) {
		s->switch_moved++;
		why = IVM_GATE_SWITCHED;
	}
	/* The record carries the counts of the last sleep let pass. */
	if (why)
		ring_record(s, w, why, now);
	/* Past len the scratch is never written: zeros on both sides. */
#pragma unroll
	for (i = 0; i < IVM_GATE_SPAN_WORDS; i++) {
		if (buf[i] != s->irq[i]) {
			irq_moved = true;
			s->irq[i] = buf[i];
		}
	}
	irq_moved |= sum != s->sum;
	if (!why) {
		if (irq_moved)
			s->irq_moved++;
		else
			s->none_moved++;
		s->passed++;
		s->passed_ts = now;
	}
	s->switches = sw;
	s->sum = sum;
	s->valid = 1;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
