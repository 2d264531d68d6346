/* SPDX-License-Identifier: MIT */
/*
 * timeline: the idle periods of a profile in time, one track per vCPU:
 * idle periods named by what woke the vCPU, the guest running in between
 * (named by the task that came from idle and the one that went to idle),
 * and the samples as instants.
 *
 *  - Chrome trace-event JSON (the "JSON Object Format": traceEvents with
 *    complete "X", instant "i" and metadata "M" events), which Perfetto's
 *    UI and chrome://tracing open;
 *  - a self-contained HTML page with an SVG of the same tracks (no script,
 *    no external resource), each shape titled with its details.
 *
 * Times are microseconds from the earliest stamp in the profile.  Strings
 * are the summary's cleaned comms (idle_summary.h), so nothing needs
 * escaping beyond what the writers do for their fixed texts.
 *
 * With the host's spans (HOST_SPANS records, profile_file.h), each vCPU
 * also gets the host's steal beside its idle periods (a track "vCPU N
 * host steal" in the JSON, a lane under its track in the page: its
 * thread woken or preempted and waiting for a host CPU), and the guest's
 * disks a track of the host's service ("host disk service").  The JSON's
 * "hostSpans" says per vCPU what the lanes hold and what the profiler
 * left out (shorter waits), so the sums can be checked against STATS.
 */
#ifndef IVM_TIMELINE_H
#define IVM_TIMELINE_H

#include <stdio.h>

#include "base/error.h"
#include "report/idle_summary.h"

struct ivm_error *ivm_timeline_json(const struct ivm_idle_summary *s,
				    FILE *out);
struct ivm_error *ivm_timeline_html(const struct ivm_idle_summary *s,
				    FILE *out);

/* The fill colour of an idle period woken by wake_mask ("#rrggbb"). */
const char *ivm_timeline_wake_color(uint32_t wake_mask);

/* A host span's kind (enum ivm_span_kind): its colour and its name. */
const char *ivm_timeline_span_color(uint8_t kind);
const char *ivm_timeline_span_name(uint8_t kind);

#endif /* IVM_TIMELINE_H */
