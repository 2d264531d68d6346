// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asm/svm.h>
#include <asm/vmx.h>
#include <traceevent/event-parse.h>

#include "profile/kvm_events.h"

/* The isa field of kvm_exit (arch/x86/kvm/trace.h: KVM_ISA_VMX, _SVM). */
#define KVM_ISA_VMX 1
#define KVM_ISA_SVM 2

#ifndef SVM_EXIT_IDLE_HLT
#define SVM_EXIT_IDLE_HLT 0x0a6	/* newer uapi headers have it */
#endif

struct field_ref {
	int offset, size;
};

struct ivm_kvm_events {
	struct tep_handle *tep;
	int exit_id, entry_id, wakeup_id;
	struct field_ref common_pid;
	struct field_ref exit_reason, exit_rip, exit_isa, exit_vcpu;
	struct field_ref entry_vcpu, entry_rip;
	struct field_ref wakeup_waited;
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

static struct ivm_error *field(struct tep_event *event, const char *name,
			       int max_size, struct field_ref *ret)
{
	struct tep_format_field *f = tep_find_any_field(event, name);

	if (!f || f->offset < 0 || f->size <= 0 || f->size > max_size)
		return ivm_error_create(IVM_ERROR_INVALID,
					"trace event %s has no usable field %s",
					event->name, name);
	ret->offset = f->offset;
	ret->size = f->size;
	return NULL;
}

static struct ivm_error *parse_one(struct ivm_kvm_events *ev,
				   const char *text, const char *name,
				   struct tep_event **ret)
{
	enum tep_errno e;

	if (!text)
		return ivm_error_create(IVM_ERROR_INVALID,
					"no format for kvm:%s", name);
	e = tep_parse_event(ev->tep, text, strlen(text), "kvm");
	if (e)
		return ivm_error_create(IVM_ERROR_INVALID,
					"cannot parse the format of kvm:%s", name);
	*ret = tep_find_event_by_name(ev->tep, "kvm", name);
	if (!*ret)
		return ivm_error_create(IVM_ERROR_INVALID,
					"format text is not kvm:%s", name);
	return NULL;
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
	err = parse_one(ev, exit_format, "kvm_exit", &exit_ev);
	if (!err)
		err = parse_one(ev, entry_format, "kvm_entry", &entry_ev);
	if (!err)
		err = parse_one(ev, wakeup_format, "kvm_vcpu_wakeup", &wakeup_ev);
	if (!err)
		err = field(exit_ev, "common_pid", 4, &ev->common_pid);
	if (!err)
		err = field(exit_ev, "exit_reason", 4, &ev->exit_reason);
	if (!err)
		err = field(exit_ev, "guest_rip", 8, &ev->exit_rip);
	if (!err)
		err = field(exit_ev, "isa", 4, &ev->exit_isa);
	if (!err)
		err = field(exit_ev, "vcpu_id", 4, &ev->exit_vcpu);
	if (!err)
		err = field(entry_ev, "vcpu_id", 4, &ev->entry_vcpu);
	if (!err)
		err = field(entry_ev, "rip", 8, &ev->entry_rip);
	if (!err)
		err = field(wakeup_ev, "waited", 1, &ev->wakeup_waited);
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

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 65536 + 1);	/* format files are a few KiB */
	if (buf) {
		n = fread(buf, 1, 65536, f);
		buf[n] = '\0';
	}
	fclose(f);
	return buf;
}

struct ivm_error *ivm_kvm_events_load(const char *tracefs,
				      struct ivm_kvm_events **ret)
{
	static const char *const names[] = { "kvm_exit", "kvm_entry",
					     "kvm_vcpu_wakeup" };
	char *text[3] = { NULL };
	struct ivm_error *err = NULL;
	char path[256];
	int i;

	if (!tracefs)
		tracefs = "/sys/kernel/tracing";
	for (i = 0; i < 3 && !err; i++) {
		snprintf(path, sizeof(path), "%s/events/kvm/%s/format",
			 tracefs, names[i]);
		text[i] = slurp(path);
		if (!text[i])
			err = ivm_error_os(errno ? errno : ENOENT,
					   "reading %s (is the kvm module loaded and tracefs mounted?)",
					   path);
	}
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

struct tep_handle *ivm_kvm_events_tep(struct ivm_kvm_events *ev)
{
	return ev->tep;
}

/* Little-endian unsigned field of at most 8 bytes, bounds-checked. */
static bool get(const uint8_t *data, size_t size, struct field_ref f,
		uint64_t *ret)
{
	uint64_t v = 0;
	int i;

	if ((size_t)f.offset + (size_t)f.size > size)
		return false;
	for (i = f.size - 1; i >= 0; i--)
		v = (v << 8) | data[f.offset + i];
	*ret = v;
	return true;
}

struct ivm_error *ivm_kvm_events_decode(struct ivm_kvm_events *ev,
					const void *data, size_t size,
					struct ivm_kvm_event *ret)
{
	const uint8_t *p = data;
	uint64_t type, pid, a, b, c, d;

	memset(ret, 0, sizeof(*ret));
	if (size < 2 || !get(p, size, ev->common_pid, &pid))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"trace record too short (%zu bytes)", size);
	type = (uint64_t)p[0] | (uint64_t)p[1] << 8;
	ret->tid = (int32_t)(uint32_t)pid;
	if ((int)type == ev->exit_id) {
		if (!get(p, size, ev->exit_reason, &a) ||
		    !get(p, size, ev->exit_rip, &b) ||
		    !get(p, size, ev->exit_isa, &c) ||
		    !get(p, size, ev->exit_vcpu, &d))
			goto short_record;
		ret->kind = IVM_KVM_EXIT;
		ret->exit_reason = (uint32_t)a;
		ret->guest_rip = b;
		ret->isa = (uint32_t)c;
		ret->vcpu_id = (uint32_t)d;
		ret->halt = ivm_kvm_exit_is_hlt(ret->isa, ret->exit_reason);
		return NULL;
	}
	if ((int)type == ev->entry_id) {
		if (!get(p, size, ev->entry_vcpu, &a) ||
		    !get(p, size, ev->entry_rip, &b))
			goto short_record;
		ret->kind = IVM_KVM_ENTRY;
		ret->vcpu_id = (uint32_t)a;
		ret->guest_rip = b;
		return NULL;
	}
	if ((int)type == ev->wakeup_id) {
		if (!get(p, size, ev->wakeup_waited, &a))
			goto short_record;
		ret->kind = IVM_KVM_VCPU_WAKEUP;
		ret->waited = a != 0;
		return NULL;
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"trace record of event %u is not a KVM event",
				(unsigned int)type);
short_record:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"trace record too short for its fields (%zu bytes)",
				size);
}
