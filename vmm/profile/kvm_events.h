/* SPDX-License-Identifier: MIT */
/*
 * kvm_events: decoding the host kernel's KVM tracepoints into idle-signal
 * events, for hosts with hardware virtualization.
 *
 * kvm:kvm_exit with an HLT exit reason says a vCPU halted (VMX
 * EXIT_REASON_HLT, SVM SVM_EXIT_HLT or SVM_EXIT_IDLE_HLT, from the
 * kernel's uapi <asm/vmx.h> and <asm/svm.h>); kvm:kvm_vcpu_wakeup says a
 * halted vCPU is runnable again; kvm:kvm_entry that it entered the guest.
 * The record's common_pid is the QEMU vCPU thread.
 *
 * Field offsets are never assumed: they come from the event format files
 * of the running kernel (tracefs events/kvm/NAME/format), parsed by
 * libtraceevent, and every field read is checked to lie inside the record.
 */
#ifndef IVM_KVM_EVENTS_H
#define IVM_KVM_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct ivm_kvm_events;

enum ivm_kvm_event_kind {
	IVM_KVM_EXIT,
	IVM_KVM_ENTRY,
	IVM_KVM_VCPU_WAKEUP,
};

struct ivm_kvm_event {
	enum ivm_kvm_event_kind kind;
	int32_t tid;		/* common_pid: the vCPU thread */
	uint32_t vcpu_id;	/* exit, entry */
	uint32_t exit_reason;	/* exit */
	uint32_t isa;		/* exit: 1 VMX, 2 SVM */
	uint64_t guest_rip;	/* exit, entry */
	bool halt;		/* exit: the vCPU executed HLT */
	bool waited;		/* wakeup: the thread slept, not only polled */
	uint64_t halt_ns;	/* wakeup: how long the halt lasted */
};

/*
 * Parse the format texts of kvm_exit, kvm_entry and kvm_vcpu_wakeup (each
 * NUL-terminated).  Fails with IVM_ERROR_INVALID naming the event whose
 * format lacks a field idlevm reads.
 */
struct ivm_error *ivm_kvm_events_parse(const char *exit_format,
				       const char *entry_format,
				       const char *wakeup_format,
				       struct ivm_kvm_events **ret);

/* The same from a tracefs mount (NULL: /sys/kernel/tracing). */
struct ivm_error *ivm_kvm_events_load(const char *tracefs,
				      struct ivm_kvm_events **ret);

void ivm_kvm_events_destroy(struct ivm_kvm_events *ev);

/*
 * Decode one raw record (starting at common_type).  IVM_ERROR_NOT_FOUND
 * for a record of another event; IVM_ERROR_PROTOCOL for one too short for
 * its fields.
 */
struct ivm_error *ivm_kvm_events_decode(struct ivm_kvm_events *ev,
					const void *data, size_t size,
					struct ivm_kvm_event *ret);

/* Whether a kvm_exit (isa, exit_reason) is a halt. */
bool ivm_kvm_exit_is_hlt(uint32_t isa, uint32_t exit_reason);

/*
 * The kernel filter for kvm:kvm_exit that lets through the halts of
 * ivm_kvm_exit_is_hlt() alone (a static string).  Unfiltered, every exit
 * of a vCPU (MMIO, interrupt windows, ...) is a record that wakes the
 * reader of the sched idle source, which only wants the HLT exit reason.
 */
const char *ivm_kvm_exit_hlt_filter(void);

#endif /* IVM_KVM_EVENTS_H */
