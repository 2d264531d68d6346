// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kernel/kernel_layout.h"
#include "profile/idle_gate.h"

/* idle_gate.bpf.c as built, carried in idlevm (idle_gate_obj.S). */
extern const char ivm_idle_gate_bpf[];
extern const char ivm_idle_gate_bpf_end[];

struct ivm_idle_gate {
	struct bpf_object *obj;
	struct bpf_link *link;
	struct ring_buffer *ring;
	int seen_fd;
	int watching_fd;	/* the program's switch (ivm_idle_gate_enable) */
	size_t nr_vcpus;
	const struct ivm_irq_stat *irq_stat;
	/* The read under way (ring_buffer__consume has one context). */
	void (*fn)(void *ctx, const struct ivm_gate_record *r);
	void *ctx;
};

/* libbpf's own messages (a verifier log, say): ours say what failed. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

/* QEMU's address of guest kernel memory va (len bytes, one piece). */
static struct ivm_error *qemu_address(const struct ivm_guest *g, uint64_t va,
				      uint64_t len, __u64 *ret)
{
	struct ivm_error *err;
	uint64_t pa, hva;

	err = ivm_kernel_translate_range(g->layout, va, len, &pa);
	if (!err)
		err = ivm_guest_qemu_address(g, pa, len, &hva);
	if (!err)
		*ret = hva;
	return err;
}

/* Where vCPU i's words are; the interrupt counts only where they can be. */
static struct ivm_error *vcpu_words(const struct ivm_guest *g,
				    const struct ivm_irq_stat *is, size_t i,
				    struct ivm_gate_words *w)
{
	struct ivm_irq_stat_words iw;
	struct ivm_error *err;
	uint64_t va;

	memset(w, 0, sizeof(*w));
	w->vcpu = (uint32_t)i;
	err = ivm_kernel_cpu_switches_va(g->layout,
					 (unsigned int)g->vcpus[i].cpu, &va);
	if (!err)
		err = qemu_address(g, va, 8, &w->switches_hva);
	if (err || !is)
		return err;
	err = ivm_irq_stat_words(is, (unsigned int)g->vcpus[i].cpu, &iw);
	if (err) {
		ivm_error_destroy(err);
		return NULL;
	}
	if (iw.stat_va && iw.stat_len <= IVM_GATE_SPAN_WORDS * 8) {
		err = qemu_address(g, iw.stat_va, iw.stat_len,
				   &w->irq_hva);
		if (!err)
			w->irq_len = iw.stat_len;
		ivm_error_destroy(err);
	}
	if (iw.sum_va) {
		err = qemu_address(g, iw.sum_va, 8, &w->sum_hva);
		if (err)
			w->sum_hva = 0;
		ivm_error_destroy(err);
	}
	return NULL;
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct ivm_idle_gate *gate = ctx;

	if (gate->fn && size >= sizeof(struct ivm_gate_record))
		gate->fn(gate->ctx, data);
	return 0;
}

static struct ivm_error *load(struct ivm_idle_gate *gate, pid_t qemu_pid)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "idle_gate");
	uint32_t tgid = (uint32_t)qemu_pid;
	struct bpf_map *ro;
	int err;

	libbpf_set_print(quiet);
	gate->obj = bpf_object__open_mem(ivm_idle_gate_bpf,
					 (size_t)(ivm_idle_gate_bpf_end -
						  ivm_idle_gate_bpf),
					 &opts);
	if (!gate->obj)
		return ivm_error_os(errno, "opening the idle gate's BPF object");
	ro = bpf_object__find_map_by_name(gate->obj, ".rodata");
	if (!ro)
		return ivm_error_create(IVM_ERROR_INVALID,
					"the idle gate's BPF object has no .rodata");
	err = bpf_map__set_initial_value(ro, &tgid, sizeof(tgid));
	if (!err)
		err = bpf_object__load(gate->obj);
	if (err)
		return ivm_error_os(-err, "loading the idle gate's BPF program");
	gate->seen_fd = bpf_map__fd(bpf_object__find_map_by_name(gate->obj,
								 "seen"));
	gate->watching_fd = bpf_map__fd(
		bpf_object__find_map_by_name(gate->obj, "watching"));
	gate->ring = ring_buffer__new(
		bpf_map__fd(bpf_object__find_map_by_name(gate->obj, "ring")),
		on_record, gate, NULL);
	if (!gate->ring)
		return ivm_error_os(errno, "opening the idle gate's ring");
	return NULL;
}

static struct ivm_error *attach(struct ivm_idle_gate *gate)
{
	struct bpf_program *prog;

	prog = bpf_object__find_program_by_name(gate->obj, "gate_switch");
	if (!prog)
		return ivm_error_create(IVM_ERROR_INVALID,
					"the idle gate's BPF object has no gate_switch");
	gate->link = bpf_program__attach(prog);
	if (!gate->link)
		return ivm_error_os(errno,
				    "attaching the idle gate to sched_switch");
	return NULL;
}

struct ivm_error *ivm_idle_gate_enable(struct ivm_idle_gate *gate, bool on)
{
	uint32_t key = 0, value = on;

	if (bpf_map_update_elem(gate->watching_fd, &key, &value, BPF_ANY))
		return ivm_error_os(errno, "switching the idle gate %s",
				    on ? "on" : "off");
	return NULL;
}

struct ivm_error *ivm_idle_gate_probe(void)
{
	struct ivm_idle_gate *gate = calloc(1, sizeof(*gate));
	struct ivm_error *err;

	if (!gate)
		return &ivm_enomem;
	/* No process has tgid 0: the program is never more than a compare. */
	err = load(gate, 0);
	if (!err)
		err = attach(gate);
	ivm_idle_gate_destroy(gate);
	return err;
}

struct ivm_error *ivm_idle_gate_create(struct ivm_guest *g,
				       const struct ivm_irq_stat *irq_stat,
				       struct ivm_idle_gate **ret)
{
	struct ivm_idle_gate *gate;
	struct ivm_error *err;
	size_t i, placed = 0;
	int words_fd;

	*ret = NULL;
	if (!g->qmp || g->qemu_pid <= 0)
		return ivm_error_create(IVM_ERROR_INVALID,
					"the idle gate needs a live guest");
	if (g->nr_vcpus > IVM_GATE_MAX_VCPUS)
		return ivm_error_create(IVM_ERROR_INVALID,
					"the idle gate takes %d vCPUs at most",
					IVM_GATE_MAX_VCPUS);
	gate = calloc(1, sizeof(*gate));
	if (!gate)
		return &ivm_enomem;
	gate->nr_vcpus = g->nr_vcpus;
	gate->irq_stat = irq_stat;
	err = load(gate, g->qemu_pid);
	words_fd = err ? -1 :
		   bpf_map__fd(bpf_object__find_map_by_name(gate->obj,
							    "words"));
	for (i = 0; !err && i < g->nr_vcpus; i++) {
		struct ivm_gate_words w = { .vcpu = (uint32_t)i };
		uint32_t tid = (uint32_t)g->vcpus[i].tid;
		struct ivm_error *e = NULL;

		/*
		 * A vCPU whose words cannot be placed goes in with none: its
		 * every sleep is unreadable and wakes the loop.  Left out of
		 * the map, its sleeps would wake nothing.
		 */
		if (g->vcpus[i].cpu >= 0)
			e = vcpu_words(g, irq_stat, i, &w);
		if (e) {
			ivm_error_destroy(e);
			memset(&w, 0, sizeof(w));
			w.vcpu = (uint32_t)i;
		}
		if (bpf_map_update_elem(words_fd, &tid, &w, BPF_ANY))
			err = ivm_error_os(errno, "filling the idle gate's map");
		placed += w.switches_hva != 0;
	}
	if (!err && !placed)
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "no vCPU's switch count could be placed in QEMU's memory");
	if (!err)
		err = ivm_idle_gate_enable(gate, true);
	if (!err)
		err = attach(gate);
	if (err) {
		ivm_idle_gate_destroy(gate);
		return err;
	}
	*ret = gate;
	return NULL;
}

void ivm_idle_gate_destroy(struct ivm_idle_gate *gate)
{
	if (!gate)
		return;
	bpf_link__destroy(gate->link);
	ring_buffer__free(gate->ring);
	bpf_object__close(gate->obj);
	free(gate);
}

int ivm_idle_gate_fd(const struct ivm_idle_gate *gate)
{
	return ring_buffer__epoll_fd(gate->ring);
}

size_t ivm_idle_gate_read(struct ivm_idle_gate *gate,
			  void (*fn)(void *ctx,
				     const struct ivm_gate_record *r),
			  void *ctx)
{
	int n;

	gate->fn = fn;
	gate->ctx = ctx;
	n = ring_buffer__consume(gate->ring);
	gate->fn = NULL;
	return n > 0 ? (size_t)n : 0;
}

void ivm_idle_gate_passed_irqs(const struct ivm_idle_gate *gate,
			       const struct ivm_gate_record *r,
			       struct ivm_irq_counts *ret)
{
	uint8_t sum[8];

	memset(ret, 0, sizeof(*ret));
	if (!gate->irq_stat)
		return;
	memcpy(sum, &r->passed_sum, sizeof(sum));
	ivm_irq_stat_decode(gate->irq_stat,
			    (r->known & IVM_GATE_KNOWN_IRQ) ?
			    (const uint8_t *)r->passed_irq : NULL,
			    (r->known & IVM_GATE_KNOWN_SUM) ? sum : NULL, ret);
}

void ivm_idle_gate_stats(const struct ivm_idle_gate *gate,
			 struct ivm_idle_gate_stats *ret)
{
	struct ivm_gate_seen s;
	uint32_t i;

	memset(ret, 0, sizeof(*ret));
	for (i = 0; i < gate->nr_vcpus; i++) {
		if (bpf_map_lookup_elem(gate->seen_fd, &i, &s))
			continue;
		ret->sleeps += s.sleeps;
		ret->records += s.records;
		ret->first += s.first;
		ret->read_failed += s.read_failed;
		ret->switch_moved += s.switch_moved;
		ret->irq_moved += s.irq_moved;
		ret->none_moved += s.none_moved;
		ret->ring_full += s.ring_full;
	}
}
