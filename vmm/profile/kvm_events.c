// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include <asm/svm.h>
#include <asm/vmx.h>
#include <traceevent/event-parse.h>

#include "profile/kvm_events.h"
#include "profile/trace_fields.h"

/* The isa field of kvm_exit (arch/x86/kvm/trace.h: KVM_ISA_VMX, _SVM). */
#define KVM_ISA_VMX 1
#define KVM_ISA_SVM 2

#ifndef SVM_EXIT_IDLE_HLT
#define SVM_EXIT_IDLE_HLT 0x0a6	/* newer uapi headers have it */
#endif

struct ivm_kvm_events {
	struct tep_handle *tep;
	int exit_id, entry_id, wakeup_id;
	struct ivm_trace_field common_pid;
	struct ivm_trace_field exit_reason, exit_rip, exit_isa, exit_vcpu;
	struct ivm_trace_field entry_vcpu, entry_rip;
	struct ivm_trace_field wakeup_waited, wakeup_ns;
};

bool ivm_kvm_exit_is_hlt(uint32_t isa, uint32_t exit_reason)
{
	if (isa == KVM_ISA_VMX)
		/* The high bits carry flags (failed VM entry...). */
		return (exit_reason & 0xffff) == EXIT_REASON_HLT &&
		       !(exit_reason & 0x80000000u);
	if (isa == KVM_ISA_SVM)
		return exit_reason == SVM_EXIT_HLT ||
		       exit_reason == SVM_EXIT_IDLE_HLT;
	return false;
}

#define STR_(x) #x
#define STR(x) STR_(x)

const char *ivm_kvm_exit_hlt_filter(void)
{
	return "(isa == " STR(KVM_ISA_VMX) " && exit_reason == "
	       STR(EXIT_REASON_HLT) ") || (isa == " STR(KVM_ISA_SVM)
	       " && (exit_reason == " STR(SVM_EXIT_HLT) " || exit_reason == "
	       STR(SVM_EXIT_IDLE_HLT) "))";
}

struct ivm_error *ivm_kvm_events_parse(const char *exit_format,
				       const char *entry_format,
				       const char *wakeup_format,
				       struct ivm_kvm_events **ret)
{
	struct tep_event *exit_ev, *entry_ev, *wakeup_ev;
	struct ivm_kvm_events *ev = calloc(1, sizeof(*ev));
	struct ivm_error *err;

	if (!ev)
		return &ivm_enomem;
	ev->tep = tep_alloc();
	if (!ev->tep) {
		free(ev);
		return &ivm_enomem;
	}
	err = ivm_trace_format_parse(ev->tep, exit_format, "kvm", "kvm_exit", &exit_ev);
	if (!err)
		err = ivm_trace_format_parse(ev->tep, entry_format, "kvm", "kvm_entry",
					     &entry_ev);
	if (!err)
		err = ivm_trace_format_parse(ev->tep, wakeup_format, "kvm",
					     "kvm_vcpu_wakeup", &wakeup_ev);
	if (!err)
		err = ivm_trace_field_find(exit_ev, "common_pid", 4, &ev->common_pid);
	if (!err)
		err = ivm_trace_field_find(exit_ev, "exit_reason", 4, &ev->exit_reason);
	if (!err)
		err = ivm_trace_field_find(exit_ev, "guest_rip", 8, &ev->exit_rip);
	if (!err)
		err = ivm_trace_field_find(exit_ev, "isa", 4, &ev->exit_isa);
	if (!err)
		err = ivm_trace_field_find(exit_ev, "vcpu_id", 4, &ev->exit_vcpu);
	if (!err)
		err = ivm_trace_field_find(entry_ev, "vcpu_id", 4, &ev->entry_vcpu);
	if (!err)
		err = ivm_trace_field_find(entry_ev, "rip", 8, &ev->entry_rip);
	if (!err)
		err = ivm_trace_field_find(wakeup_ev, "waited", 1, &ev->wakeup_waited);
	if (!err)
		err = ivm_trace_field_find(wakeup_ev, "ns", 8, &ev->wakeup_ns);
	if (err) {
		ivm_kvm_events_destroy(ev);
		return err;
	}
	ev->exit_id = exit_ev->id;
	ev->entry_id = entry_ev->id;
	ev->wakeup_id = wakeup_ev->id;
	*ret = ev;
	return NULL;
}

struct ivm_error *ivm_kvm_events_load(const char *tracefs,
				      struct ivm_kvm_events **ret)
{
	static const char *const names[] = { "kvm_exit", "kvm_entry",
					     "kvm_vcpu_wakeup" };
	char *text[3] = { NULL };
	struct ivm_error *err = NULL;
	int i;

	for (i = 0; i < 3 && !err; i++)
		err = ivm_trace_format_read(tracefs, "kvm", names[i], &text[i]);
	if (!err)
		err = ivm_kvm_events_parse(text[0], text[1], text[2], ret);
	for (i = 0; i < 3; i++)
		free(text[i]);
	return err;
}

void ivm_kvm_events_destroy(struct ivm_kvm_events *ev)
{
	if (!ev)
		return;
	tep_free(ev->tep);
	free(ev);
}

struct ivm_error *ivm_kvm_events_decode(struct ivm_kvm_events *ev,
					const void *data, size_t size,
					struct ivm_kvm_event *ret)
{
	const uint8_t *p = data;
	uint64_t pid, a, b, c, d;
	int type;

	memset(ret, 0, sizeof(*ret));
	if (!ivm_trace_record_type(p, size, &type) ||
	    !ivm_trace_field_get(p, size, ev->common_pid, &pid))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"trace record too short (%zu bytes)", size);
	ret->tid = (int32_t)(uint32_t)pid;
	if (type == ev->exit_id) {
		if (!ivm_trace_field_get(p, size, ev->exit_reason, &a) ||
		    !ivm_trace_field_get(p, size, ev->exit_rip, &b) ||
		    !ivm_trace_field_get(p, size, ev->exit_isa, &c) ||
		    !ivm_trace_field_get(p, size, ev->exit_vcpu, &d))
			goto short_record;
		ret->kind = IVM_KVM_EXIT;
		ret->exit_reason = (uint32_t)a;
		ret->guest_rip = b;
		ret->isa = (uint32_t)c;
		ret->vcpu_id = (uint32_t)d;
		ret->halt = ivm_kvm_exit_is_hlt(ret->isa, ret->exit_reason);
		return NULL;
	}
	if (type == ev->entry_id) {
		if (!ivm_trace_field_get(p, size, ev->entry_vcpu, &a) ||
		    !ivm_trace_field_get(p, size, ev->entry_rip, &b))
			goto short_record;
		ret->kind = IVM_KVM_ENTRY;
		ret->vcpu_id = (uint32_t)a;
		ret->guest_rip = b;
		return NULL;
	}
	if (type == ev->wakeup_id) {
		if (!ivm_trace_field_get(p, size, ev->wakeup_waited, &a) ||
		    !ivm_trace_field_get(p, size, ev->wakeup_ns, &b))
			goto short_record;
		ret->kind = IVM_KVM_VCPU_WAKEUP;
		ret->waited = a != 0;
		ret->halt_ns = b;
		return NULL;
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"trace record of event %d is not a KVM event",
				type);
short_record:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"trace record too short for its fields (%zu bytes)",
				size);
}
