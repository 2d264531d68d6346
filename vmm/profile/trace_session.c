// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <traceevent/event-parse.h>
#include <tracefs/tracefs.h>

#include "profile/trace_session.h"

#define TRACEFS_DIR "/sys/kernel/tracing"
#define TRACEFS_MAGIC_NR 0x74726163	/* "trac", linux/magic.h */
#define MAX_TIDS 256
#define MAX_EVENTS 16

struct ivm_trace_session {
	struct tracefs_instance *instance;
	struct tep_handle *tep;
	char *events[MAX_EVENTS];
	size_t nr_events;
};

static struct ivm_error *ensure_tracefs(void)
{
	struct statfs sfs;

	if (statfs(TRACEFS_DIR, &sfs) == 0 && sfs.f_type == TRACEFS_MAGIC_NR)
		return NULL;
	if (mount("nodev", TRACEFS_DIR, "tracefs", 0, NULL) < 0)
		return ivm_error_os(errno, "mounting tracefs on %s", TRACEFS_DIR);
	return NULL;
}

/* Split "system:event" in place. */
static struct ivm_error *split(char *spec, char **event)
{
	char *colon = strchr(spec, ':');

	if (!colon || colon == spec || !colon[1])
		return ivm_error_create(IVM_ERROR_INVALID,
					"bad trace event '%s' (want system:event)",
					spec);
	*colon = '\0';
	*event = colon + 1;
	return NULL;
}

struct ivm_error *ivm_trace_session_create(const char *const *events,
					   size_t nr_events, const pid_t *tids,
					   size_t nr_tids,
					   struct ivm_trace_session **ret)
{
	const char *systems[MAX_EVENTS + 1] = { NULL };
	struct ivm_trace_session *s;
	struct ivm_error *err;
	char name[64], *pids = NULL;
	size_t i, len = 0;

	if (!nr_events || nr_events > MAX_EVENTS || !nr_tids ||
	    nr_tids > MAX_TIDS)
		return ivm_error_create(IVM_ERROR_INVALID,
					"trace session: 1..%d events and 1..%d threads",
					MAX_EVENTS, MAX_TIDS);
	err = ensure_tracefs();
	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	pids = calloc(nr_tids, 12);
	if (!s || !pids) {
		free(s);
		free(pids);
		return &ivm_enomem;
	}
	for (i = 0; i < nr_events; i++) {
		char *event;

		s->events[i] = strdup(events[i]);
		if (!s->events[i]) {
			err = &ivm_enomem;
			goto fail;
		}
		s->nr_events++;
		err = split(s->events[i], &event);
		if (err)
			goto fail;
		systems[i] = s->events[i];
	}
	snprintf(name, sizeof(name), "idlevm-%d", (int)getpid());
	s->instance = tracefs_instance_create(name);
	if (!s->instance) {
		err = ivm_error_os(errno, "creating tracefs instance %s", name);
		goto fail;
	}
	/* Trace only the chosen threads, before any event is on. */
	for (i = 0; i < nr_tids; i++)
		len += (size_t)sprintf(pids + len, "%s%d", i ? " " : "",
				       (int)tids[i]);
	if (tracefs_instance_file_write(s->instance, "set_event_pid", pids) < 0) {
		err = ivm_error_os(errno, "limiting tracing to the vCPU threads");
		goto fail;
	}
	for (i = 0; i < nr_events; i++) {
		const char *sys = s->events[i];
		const char *ev = sys + strlen(sys) + 1;

		if (tracefs_event_enable(s->instance, sys, ev) < 0) {
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "cannot enable trace event %s:%s",
					       sys, ev);
			goto fail;
		}
	}
	s->tep = tracefs_local_events_system(NULL, systems);
	if (!s->tep) {
		err = ivm_error_create(IVM_ERROR_NOT_FOUND,
				       "cannot read the trace event formats");
		goto fail;
	}
	tracefs_trace_on(s->instance);
	free(pids);
	*ret = s;
	return NULL;
fail:
	free(pids);
	ivm_trace_session_destroy(s);
	return err;
}

void ivm_trace_session_destroy(struct ivm_trace_session *s)
{
	size_t i;

	if (!s)
		return;
	if (s->instance) {
		tracefs_trace_off(s->instance);
		for (i = 0; i < s->nr_events; i++) {
			const char *sys = s->events[i];

			tracefs_event_disable(s->instance, sys,
					      sys + strlen(sys) + 1);
		}
		tracefs_instance_destroy(s->instance);
		tracefs_instance_free(s->instance);
	}
	tep_free(s->tep);
	for (i = 0; i < s->nr_events; i++)
		free(s->events[i]);
	free(s);
}

struct tep_handle *ivm_trace_session_tep(struct ivm_trace_session *s)
{
	return s->tep;
}

struct read_ctx {
	int (*fn)(void *ctx, const void *data, size_t size, int cpu,
		  uint64_t ts);
	void *ctx;
};

static int on_record(struct tep_event *event, struct tep_record *rec,
		     int cpu, void *arg)
{
	struct read_ctx *rc = arg;

	(void)event;
	if (!rec->data || rec->size <= 0)
		return 0;
	return rc->fn(rc->ctx, rec->data, (size_t)rec->size, cpu, rec->ts);
}

struct ivm_error *ivm_trace_session_read(
	struct ivm_trace_session *s,
	int (*fn)(void *ctx, const void *data, size_t size, int cpu,
		  uint64_t ts),
	void *ctx)
{
	struct read_ctx rc = { fn, ctx };

	if (tracefs_iterate_raw_events(s->tep, s->instance, NULL, 0,
				       on_record, &rc) < 0)
		return ivm_error_os(errno, "reading the trace buffers");
	return NULL;
}
