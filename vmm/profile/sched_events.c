// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "profile/sched_events.h"
#include "profile/trace_fields.h"

/*
 * prev_state bits as sched_switch reports them (TASK_REPORT in
 * include/linux/sched.h): S 0x1, D 0x2, and I 0x80 (TASK_REPORT_IDLE, an
 * uninterruptible wait that does not count as load).  Bit 0x100
 * (TASK_REPORT_MAX) marks a preemption: the thread is still runnable.
 */
#define STATE_SLEEPS	(0x1 | 0x2 | 0x80)
#define STATE_PREEMPTED	0x100

struct ivm_sched_events {
	struct tep_handle *tep;
	int switch_id, waking_id, wakeup_id;	/* -1: not parsed */
	struct ivm_trace_field prev_pid, prev_state, next_pid;
	struct ivm_trace_field prev_comm, next_comm;
	struct ivm_trace_field waking_pid, wakeup_pid;
	struct ivm_trace_field waking_waker, wakeup_waker;	/* common_pid */
};

bool ivm_sched_state_sleeping(uint64_t prev_state)
{
	return (prev_state & STATE_SLEEPS) && !(prev_state & STATE_PREEMPTED);
}

static struct ivm_error *parse_wake(struct ivm_sched_events *ev,
				    const char *text, const char *name,
				    int *id, struct ivm_trace_field *pid,
				    struct ivm_trace_field *waker)
{
	struct tep_event *e;
	struct ivm_error *err;

	*id = -1;
	if (!text)
		return NULL;
	err = ivm_trace_format_parse(ev->tep, text, "sched", name, &e);
	if (!err)
		err = ivm_trace_field_find(e, "pid", 4, pid);
	if (!err)
		err = ivm_trace_field_find(e, "common_pid", 4, waker);
	if (!err)
		*id = e->id;
	return err;
}

struct ivm_error *ivm_sched_events_parse(const char *switch_format,
					 const char *waking_format,
					 const char *wakeup_format,
					 struct ivm_sched_events **ret)
{
	struct ivm_sched_events *ev;
	struct tep_event *sw;
	struct ivm_error *err;

	if (!waking_format && !wakeup_format)
		return ivm_error_create(IVM_ERROR_INVALID,
					"no format for sched_waking nor sched_wakeup");
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return &ivm_enomem;
	ev->tep = tep_alloc();
	if (!ev->tep) {
		free(ev);
		return &ivm_enomem;
	}
	err = ivm_trace_format_parse(ev->tep, switch_format, "sched",
				     "sched_switch", &sw);
	if (!err)
		err = ivm_trace_field_find(sw, "prev_pid", 4, &ev->prev_pid);
	/* long on 64-bit kernels, int on some older ones. */
	if (!err)
		err = ivm_trace_field_find(sw, "prev_state", 8, &ev->prev_state);
	if (!err)
		err = ivm_trace_field_find(sw, "next_pid", 4, &ev->next_pid);
	if (!err)
		err = ivm_trace_field_find(sw, "prev_comm", 16, &ev->prev_comm);
	if (!err)
		err = ivm_trace_field_find(sw, "next_comm", 16, &ev->next_comm);
	if (!err)
		ev->switch_id = sw->id;
	if (!err)
		err = parse_wake(ev, waking_format, "sched_waking",
				 &ev->waking_id, &ev->waking_pid,
				 &ev->waking_waker);
	if (!err)
		err = parse_wake(ev, wakeup_format, "sched_wakeup",
				 &ev->wakeup_id, &ev->wakeup_pid,
				 &ev->wakeup_waker);
	if (err) {
		ivm_sched_events_destroy(ev);
		return err;
	}
	*ret = ev;
	return NULL;
}

struct ivm_error *ivm_sched_events_load(const char *tracefs,
					struct ivm_sched_events **ret)
{
	static const char *const names[] = { "sched_switch", "sched_waking",
					     "sched_wakeup" };
	char *text[3] = { NULL };
	struct ivm_error *err = NULL;
	int i;

	for (i = 0; i < 3 && !err; i++) {
		err = ivm_trace_format_read(tracefs, "sched", names[i],
					    &text[i]);
		/* sched_waking is 4.3+; sched_wakeup alone will do. */
		if (err && i == 1) {
			ivm_error_destroy(err);
			err = NULL;
		}
	}
	if (!err)
		err = ivm_sched_events_parse(text[0], text[1], text[2], ret);
	for (i = 0; i < 3; i++)
		free(text[i]);
	return err;
}

/* "PREFIX(FIELD == T1 || FIELD == T2 ...)", malloc'd. */
static char *pid_filter(const char *prefix, const char *field,
			const pid_t *tids, size_t n)
{
	size_t i, len, cap;
	char *f;

	if (!n || n > 4096)
		return NULL;
	/* " || " + FIELD + " == " + an int: under 48 bytes per thread. */
	cap = strlen(prefix) + 8 + n * 48;
	f = malloc(cap);
	if (!f)
		return NULL;
	len = (size_t)snprintf(f, cap, "%s(", prefix);
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(f + len, cap - len, "%s%s == %d",
					i ? " || " : "", field, (int)tids[i]);
	snprintf(f + len, cap - len, ")");
	return f;
}

char *ivm_sched_switch_filter(const pid_t *tids, size_t n)
{
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "prev_state & %d && ", STATE_SLEEPS);
	return pid_filter(prefix, "prev_pid", tids, n);
}

char *ivm_sched_wake_filter(const pid_t *tids, size_t n)
{
	return pid_filter("", "pid", tids, n);
}

bool ivm_sched_events_has_wakeup(const struct ivm_sched_events *ev)
{
	return ev->wakeup_id >= 0;
}

bool ivm_sched_events_has_waking(const struct ivm_sched_events *ev)
{
	return ev->waking_id >= 0;
}

void ivm_sched_events_destroy(struct ivm_sched_events *ev)
{
	if (!ev)
		return;
	tep_free(ev->tep);
	free(ev);
}

struct ivm_error *ivm_sched_events_decode(const struct ivm_sched_events *ev,
					  const void *data, size_t size,
					  struct ivm_sched_event *ret)
{
	uint64_t a, b, c;
	int type;

	memset(ret, 0, sizeof(*ret));
	if (!ivm_trace_record_type(data, size, &type))
		goto short_record;
	if (type == ev->switch_id) {
		if (!ivm_trace_field_get(data, size, ev->prev_pid, &a) ||
		    !ivm_trace_field_get(data, size, ev->prev_state, &b) ||
		    !ivm_trace_field_get(data, size, ev->next_pid, &c) ||
		    !ivm_trace_field_str(data, size, ev->prev_comm,
					 ret->prev_comm, sizeof(ret->prev_comm)) ||
		    !ivm_trace_field_str(data, size, ev->next_comm,
					 ret->next_comm, sizeof(ret->next_comm)))
			goto short_record;
		ret->kind = IVM_SCHED_SWITCH;
		ret->prev_tid = (int32_t)(uint32_t)a;
		ret->prev_state = b;
		ret->next_tid = (int32_t)(uint32_t)c;
		return NULL;
	}
	if (type == ev->waking_id || type == ev->wakeup_id) {
		bool waking = type == ev->waking_id;

		if (!ivm_trace_field_get(data, size,
					 waking ? ev->waking_pid : ev->wakeup_pid,
					 &a) ||
		    !ivm_trace_field_get(data, size,
					 waking ? ev->waking_waker :
					 ev->wakeup_waker, &b))
			goto short_record;
		ret->kind = waking ? IVM_SCHED_WAKING : IVM_SCHED_WAKEUP;
		ret->tid = (int32_t)(uint32_t)a;
		ret->waker = (int32_t)(uint32_t)b;
		return NULL;
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"trace record of event %d is not a sched event",
				type);
short_record:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"trace record too short for its fields (%zu bytes)",
				size);
}
