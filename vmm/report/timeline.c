// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profile/disk_syscalls.h"
#include "report/timeline.h"

/* The HTML page's drawing: pixels. */
#define WIDTH 1800
#define LEFT 90
#define ROW 56
#define TOP 40
#define BAR 36

const char *ivm_timeline_wake_color(uint32_t wake_mask)
{
	if (wake_mask & (1u << IVM_IRQ_DEVICE))
		return "#e15759";
	if (wake_mask & ((1u << IVM_IRQ_CALL) | (1u << IVM_IRQ_TLB)))
		return "#f28e2b";
	if (wake_mask & (1u << IVM_IRQ_RESCHED))
		return "#59a14f";
	if (wake_mask & (1u << IVM_IRQ_TIMER))
		return "#4e79a7";
	return "#9c9c9c";
}

#define RUNNING_COLOR "#d9d2c5"

/*
 * The host's spans (HOST_SPANS): a thin lane under each vCPU's track, and
 * a track of the disks' service under the vCPUs; in the JSON, tracks of
 * their own beside the vCPUs' (thread ids past any vCPU's).
 */
#define HOST_LANE_Y	(BAR + 9)	/* under the samples' ticks */
#define HOST_LANE	10
#define HOST_TID	100000u
#define DISK_TID	200000u

const char *ivm_timeline_span_color(uint8_t kind)
{
	switch (kind) {
	case IVM_SPAN_WAKE_DELAY:
		return "#b07aa1";
	case IVM_SPAN_PREEMPTED:
		return "#76338a";
	default:
		return "#8c564b";
	}
}

const char *ivm_timeline_span_name(uint8_t kind)
{
	switch (kind) {
	case IVM_SPAN_WAKE_DELAY:
		return "host wake delay";
	case IVM_SPAN_PREEMPTED:
		return "host preempted";
	default:
		return "host disk service";
	}
}

/* "write+flush": the disk calls a disk span merged. */
static void disk_kinds(uint8_t flags, char *buf, size_t size)
{
	size_t len = 0;
	int k;

	buf[0] = '\0';
	for (k = 0; k < IVM_DISK_NR_KINDS && k < 8; k++)
		if (flags & (1u << k))
			len += (size_t)snprintf(buf + len, len < size ?
						size - len : 0, "%s%s",
						len ? "+" : "",
						ivm_disk_kind_name(k));
	if (!buf[0])
		snprintf(buf, size, "?");
}

/* Where a vCPU's track starts, with or without a host lane under it. */
static unsigned int row_of(const struct ivm_idle_summary *s, uint32_t c)
{
	return TOP + (s->span_records ? ROW + HOST_LANE + 8 : ROW) * c;
}

/* Periods ordered by vCPU, then start. */
static int by_vcpu_start(const void *a, const void *b)
{
	const struct ivm_idle_record *x = *(const struct ivm_idle_record *const *)a;
	const struct ivm_idle_record *y = *(const struct ivm_idle_record *const *)b;

	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static const struct ivm_idle_record **sorted(const struct ivm_idle_summary *s)
{
	const struct ivm_idle_record **v = calloc(s->nr_periods ? s->nr_periods : 1,
						  sizeof(*v));
	size_t i;

	if (!v)
		return NULL;
	for (i = 0; i < s->nr_periods; i++)
		v[i] = &s->periods[i];
	qsort(v, s->nr_periods, sizeof(*v), by_vcpu_start);
	return v;
}

/*
 * How much of [start, end) vCPU lane was idle, from its periods in v
 * (sorted(): by vCPU, then start; one vCPU's periods never overlap): a
 * halted vCPU's thread is kicked awake and waits inside idle periods too,
 * which is not time the guest had work.
 */
static uint64_t idle_overlap(const struct ivm_idle_record *const *v, size_t nr,
			     uint32_t lane, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = nr;
	uint64_t ns = 0;

	/* The first period of lane that starts at or after start... */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid]->vcpu < lane ||
		    (v[mid]->vcpu == lane && v[mid]->start_ns < start))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ... and the one before it, which may reach into the span. */
	if (lo && v[lo - 1]->vcpu == lane)
		lo--;
	for (; lo < nr && v[lo]->vcpu == lane && v[lo]->start_ns < end; lo++) {
		uint64_t a = v[lo]->start_ns > start ? v[lo]->start_ns : start;
		uint64_t b = v[lo]->end_ns < end ? v[lo]->end_ns : end;

		if (b > a)
			ns += b - a;
	}
	return ns;
}

/* The time span of everything drawn. */
static void span(const struct ivm_idle_summary *s, uint64_t *t0, uint64_t *t1)
{
	size_t i;

	*t0 = UINT64_MAX;
	*t1 = 0;
	for (i = 0; i < s->nr_periods; i++) {
		if (s->periods[i].start_ns < *t0)
			*t0 = s->periods[i].start_ns;
		if (s->periods[i].end_ns > *t1)
			*t1 = s->periods[i].end_ns;
	}
	for (i = 0; i < s->nr_samples; i++) {
		if (s->samples[i].time_ns < *t0)
			*t0 = s->samples[i].time_ns;
		if (s->samples[i].time_ns > *t1)
			*t1 = s->samples[i].time_ns;
	}
	for (i = 0; i < s->nr_spans; i++) {
		if (s->spans[i].start_ns < *t0)
			*t0 = s->spans[i].start_ns;
		if (s->spans[i].end_ns > *t1)
			*t1 = s->spans[i].end_ns;
	}
	if (*t0 > *t1)
		*t0 = *t1 = 0;
}

static double us(uint64_t t, uint64_t t0)
{
	return (double)(t - t0) / 1e3;
}

/* What ran between two idle periods of one vCPU. */
static void running_name(const struct ivm_idle_record *prev,
			 const struct ivm_idle_record *next, char *buf,
			 size_t size)
{
	const char *a = prev->from_idle.comm[0] ? prev->from_idle.comm : "?";
	const char *b = next->to_idle.comm[0] ? next->to_idle.comm : "?";

	if (!strcmp(a, b))
		snprintf(buf, size, "%s", a);
	else
		snprintf(buf, size, "%s .. %s", a, b);
}

struct ivm_error *ivm_timeline_json(const struct ivm_idle_summary *s,
				    FILE *out)
{
	const struct ivm_idle_record **v = sorted(s);
	uint64_t t0, t1;
	size_t i;
	uint32_t c;
	bool first = true;

	if (!v)
		return &ivm_enomem;
	span(s, &t0, &t1);
	fprintf(out, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"guest\":\"%s\",\"idle_source\":\"%s\"},\n\"traceEvents\":[\n",
		s->guest, s->idle_source);
#define SEP() (first ? (first = false, "") : ",\n")
	fprintf(out, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"guest %s\"}}",
		SEP(), s->guest[0] ? s->guest : "?");
	for (c = 0; c < s->nr_vcpus; c++)
		fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"vCPU %u\"}}",
			SEP(), c, c);
	/* The host's tracks, each beside (under) its vCPU's. */
	for (c = 0; s->span_records && c < s->nr_vcpus; c++) {
		fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
			SEP(), c, 2 * c);
		fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"vCPU %u host steal\"}}",
			SEP(), HOST_TID + c, c);
		fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
			SEP(), HOST_TID + c, 2 * c + 1);
	}
	if (s->span_records) {
		fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"host disk service\"}}",
			SEP(), DISK_TID);
		fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
			SEP(), DISK_TID, 2 * s->nr_vcpus);
	}
	for (i = 0; i < s->nr_periods; i++) {
		const struct ivm_idle_record *r = v[i];
		char wake[64], run[2 * IVM_COMM_LEN + 8];

		ivm_idle_wake_name(r->wake_mask, wake, sizeof(wake));
		fprintf(out, "%s{\"ph\":\"X\",\"cat\":\"idle\",\"name\":\"idle (%s)\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
			"\"args\":{\"wake\":\"%s\",\"to_idle\":\"%s/%u\",\"from_idle\":\"%s/%u\",\"halts\":%u,\"rebuilt\":%s,\"start_known\":%s}}",
			SEP(), wake, r->vcpu, us(r->start_ns, t0),
			(double)(r->end_ns - r->start_ns) / 1e3, wake,
			r->to_idle.comm[0] ? r->to_idle.comm : "?", r->to_idle.tid,
			r->from_idle.comm[0] ? r->from_idle.comm : "?",
			r->from_idle.tid, r->halts,
			r->flags & IVM_IDLE_REPLAYED ? "true" : "false",
			r->flags & IVM_IDLE_START_UNKNOWN ? "false" : "true");
		if (i + 1 < s->nr_periods && v[i + 1]->vcpu == r->vcpu &&
		    v[i + 1]->start_ns > r->end_ns) {
			running_name(r, v[i + 1], run, sizeof(run));
			fprintf(out, "%s{\"ph\":\"X\",\"cat\":\"running\",\"name\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
				"\"args\":{\"from_idle\":\"%s\",\"to_idle\":\"%s\"}}",
				SEP(), run, r->vcpu, us(r->end_ns, t0),
				(double)(v[i + 1]->start_ns - r->end_ns) / 1e3,
				r->from_idle.comm[0] ? r->from_idle.comm : "?",
				v[i + 1]->to_idle.comm[0] ? v[i + 1]->to_idle.comm : "?");
		}
	}
	for (i = 0; i < s->nr_samples; i++) {
		const struct ivm_idle_summary_sample *t = &s->samples[i];

		fprintf(out, "%s{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"sample\",\"name\":\"%s %s/%u\",\"pid\":1,\"tid\":%u,\"ts\":%.3f}",
			SEP(), ivm_sample_kind_name(t->kind), t->comm, t->tid,
			t->vcpu, us(t->time_ns, t0));
	}
	for (i = 0; i < s->nr_spans; i++) {
		const struct ivm_idle_summary_span *sp = &s->spans[i];
		bool disk = sp->lane == IVM_SPAN_LANE_DISK;
		char kinds[48];

		if (!disk && sp->lane >= s->nr_vcpus)
			continue;
		if (disk) {
			disk_kinds(sp->flags, kinds, sizeof(kinds));
			fprintf(out, "%s{\"ph\":\"X\",\"cat\":\"host_disk\",\"name\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"calls\":\"%s\"}}",
				SEP(), ivm_timeline_span_name(sp->kind),
				DISK_TID, us(sp->start_ns, t0),
				(double)(sp->end_ns - sp->start_ns) / 1e3,
				kinds);
			continue;
		}
		fprintf(out, "%s{\"ph\":\"X\",\"cat\":\"host_steal\",\"name\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"wait\":\"%s\",\"in_idle_us\":%.3f}}",
			SEP(), ivm_timeline_span_name(sp->kind),
			HOST_TID + sp->lane, us(sp->start_ns, t0),
			(double)(sp->end_ns - sp->start_ns) / 1e3,
			sp->kind == IVM_SPAN_WAKE_DELAY ?
			"woken, waiting for a host CPU" :
			"preempted, waiting for a host CPU",
			(double)idle_overlap(v, s->nr_periods, sp->lane,
					     sp->start_ns, sp->end_ns) / 1e3);
	}
#undef SEP
	/* What the lanes left out, so their sums can be checked. */
	fprintf(out, "\n],\"hostSpans\":{\"records\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"disk_us\":%.3f,\"disk_left_out_us\":%.3f,\"vcpus\":[",
		s->span_records, s->dropped_spans, (double)s->disk_span_ns / 1e3,
		(double)s->disk_left_out_ns / 1e3);
	for (c = 0; c < s->nr_vcpus; c++) {
		char name[48];

		/* The run's own count beside it (STATS), when it has one. */
		snprintf(name, sizeof(name), "vcpu%u.host_steal_ns", c);
		fprintf(out, "%s{\"vcpu\":%u,\"steal_us\":%.3f,\"left_out_us\":%.3f,\"left_out\":%" PRIu64,
			c ? "," : "", c, (double)s->steal_span_ns[c] / 1e3,
			(double)s->steal_left_out_ns[c] / 1e3,
			s->steal_left_out[c]);
		if (ivm_idle_summary_has_stat(s, name))
			fprintf(out, ",\"stats_steal_us\":%.3f",
				(double)ivm_idle_summary_stat(s, name) / 1e3);
		fprintf(out, "}");
	}
	fprintf(out, "],\"written\":{\"spans\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"elapsed_ms\":%" PRIu64 "}}}\n",
		ivm_idle_summary_stat(s, "timeline_spans"),
		ivm_idle_summary_stat(s, "timeline_spans_dropped"),
		ivm_idle_summary_stat(s, "timeline_span_bytes"),
		ivm_idle_summary_stat(s, "elapsed_ms"));
	free(v);
	return NULL;
}

static double px(uint64_t t, uint64_t t0, uint64_t t1)
{
	if (t1 <= t0)
		return LEFT;
	return LEFT + (double)(t - t0) * (WIDTH - LEFT - 10) / (double)(t1 - t0);
}

static void legend(FILE *out, double x, double y, const char *color,
		   const char *name)
{
	fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\"/>"
		"<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", x, y, color, x + 18,
		y + 12, name);
}

/*
 * A vCPU's wait, paler when it fell mostly inside an idle period (its
 * halted thread kicked awake: not time the guest had work).
 */
static void steal_rect(const struct ivm_idle_summary *s,
		       const struct ivm_idle_record *const *v, FILE *out,
		       const struct ivm_idle_summary_span *sp, double x0,
		       double x1)
{
	uint64_t ns = sp->end_ns - sp->start_ns;
	uint64_t idle = idle_overlap(v, s->nr_periods, sp->lane, sp->start_ns,
				     sp->end_ns);

	fprintf(out, "<rect class=\"host-steal\" data-kind=\"%s\" x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" fill=\"%s\"%s>"
		"<title>vCPU %u %s %.1f us, %.1f us of it while the guest was idle</title></rect>\n",
		sp->kind == IVM_SPAN_WAKE_DELAY ? "wake" : "preempted", x0,
		row_of(s, sp->lane) + HOST_LANE_Y, x1 - x0, HOST_LANE,
		ivm_timeline_span_color(sp->kind),
		2 * idle > ns ? " fill-opacity=\"0.4\"" : "", sp->lane,
		ivm_timeline_span_name(sp->kind), (double)ns / 1e3,
		(double)idle / 1e3);
}

/*
 * The host's spans: each vCPU's waits in a thin lane under its track, the
 * disks' service in a track of its own at disk_y; at least a pixel wide.
 */
static void host_spans_html(const struct ivm_idle_summary *s,
			    const struct ivm_idle_record *const *v, FILE *out,
			    uint64_t t0, uint64_t t1, unsigned int disk_y)
{
	uint32_t c;
	size_t i;

	if (!s->span_records)
		return;
	for (c = 0; c < s->nr_vcpus; c++)
		fprintf(out, "<text x=\"4\" y=\"%u\" style=\"font-size:10px\">host steal"
			"<title>vCPU %u: %.3f ms of host steal drawn, %.3f ms in %" PRIu64 " shorter waits not</title></text>\n",
			row_of(s, c) + HOST_LANE_Y + HOST_LANE - 1, c,
			(double)s->steal_span_ns[c] / 1e6,
			(double)s->steal_left_out_ns[c] / 1e6,
			s->steal_left_out[c]);
	fprintf(out, "<text x=\"4\" y=\"%u\">host disk</text>\n"
		"<rect class=\"track\" x=\"%d\" y=\"%u\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
		disk_y + BAR / 2 + 4, LEFT, disk_y, WIDTH - LEFT - 10, BAR);
	for (i = 0; i < s->nr_spans; i++) {
		const struct ivm_idle_summary_span *sp = &s->spans[i];
		bool disk = sp->lane == IVM_SPAN_LANE_DISK;
		double x0 = px(sp->start_ns, t0, t1), x1 = px(sp->end_ns, t0, t1);
		char kinds[48];

		if (!disk && sp->lane >= s->nr_vcpus)
			continue;
		if (x1 - x0 < 1)
			x1 = x0 + 1;
		disk_kinds(sp->flags, kinds, sizeof(kinds));
		if (disk)
			fprintf(out, "<rect class=\"host-disk\" x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
				"<title>host disk service %.1f us (%s)</title></rect>\n",
				x0, disk_y, x1 - x0, BAR,
				ivm_timeline_span_color(sp->kind),
				(double)(sp->end_ns - sp->start_ns) / 1e3, kinds);
		else
			steal_rect(s, v, out, sp, x0, x1);
	}
}

struct ivm_error *ivm_timeline_html(const struct ivm_idle_summary *s,
				    FILE *out)
{
	const struct ivm_idle_record **v = sorted(s);
	uint64_t t0, t1;
	/* The vCPUs, the disks' track (with spans), the legend's lines. */
	unsigned int bottom = row_of(s, s->nr_vcpus ? s->nr_vcpus : 1);
	unsigned int disk_y = bottom;
	unsigned int height;
	size_t i;
	uint32_t c;
	int tick;

	if (!v)
		return &ivm_enomem;
	if (s->span_records)
		bottom += ROW;
	height = bottom + (s->span_records ? 90 : 60);
	span(s, &t0, &t1);
	fprintf(out, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>idlevm timeline</title>\n"
		"<style>body{font-family:sans-serif;margin:12px;background:#fff}"
		"svg text{font-size:12px;fill:#222}.box{overflow-x:auto}</style></head><body>\n"
		"<h3>idlevm timeline</h3>\n<p>guest %s, idle source %s, %zu idle periods on %u vCPUs over %.3f s. Hover a shape for its details.</p>\n"
		"<div class=\"box\"><svg xmlns=\"http://www.w3.org/2000/svg\" id=\"timeline\" width=\"%d\" height=\"%u\">\n",
		s->guest[0] ? s->guest : "?",
		s->idle_source[0] ? s->idle_source : "?", s->nr_periods,
		s->nr_vcpus, (double)(t1 - t0) / 1e9, WIDTH, height);
	/* Time axis: ten ticks. */
	for (tick = 0; tick <= 10; tick++) {
		uint64_t t = t0 + (t1 - t0) * (uint64_t)tick / 10;
		double x = px(t, t0, t1);

		fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%u\" stroke=\"#eee\"/>"
			"<text x=\"%.1f\" y=\"%d\"%s>%.3f s</text>\n", x, TOP - 14, x,
			bottom, x, TOP - 18,
			tick == 10 ? " text-anchor=\"end\"" : "",
			(double)(t - t0) / 1e9);
	}
	for (c = 0; c < s->nr_vcpus; c++) {
		unsigned int y = row_of(s, c);

		fprintf(out, "<text x=\"4\" y=\"%u\">vCPU %u</text>\n"
			"<rect class=\"track\" x=\"%d\" y=\"%u\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
			y + BAR / 2 + 4, c, LEFT, y, WIDTH - LEFT - 10, BAR,
			RUNNING_COLOR);
	}
	for (i = 0; i < s->nr_periods; i++) {
		const struct ivm_idle_record *r = v[i];
		double x0 = px(r->start_ns, t0, t1), x1 = px(r->end_ns, t0, t1);
		char wake[64];

		ivm_idle_wake_name(r->wake_mask, wake, sizeof(wake));
		if (i + 1 < s->nr_periods && v[i + 1]->vcpu == r->vcpu &&
		    v[i + 1]->start_ns > r->end_ns) {
			char run[2 * IVM_COMM_LEN + 8];
			double x2 = px(v[i + 1]->start_ns, t0, t1);

			running_name(r, v[i + 1], run, sizeof(run));
			fprintf(out, "<rect class=\"running\" x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
				"<title>vCPU %u running %.1f us: %s</title></rect>\n",
				x1, row_of(s, r->vcpu), x2 - x1, BAR,
				RUNNING_COLOR, r->vcpu,
				(double)(v[i + 1]->start_ns - r->end_ns) / 1e3, run);
		}
		/* At least a pixel: short periods stay visible. */
		if (x1 - x0 < 1)
			x1 = x0 + 1;
		fprintf(out, "<rect class=\"idle\" data-wake=\"%s\" x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
			"<title>vCPU %u idle %.1f us, woken by %s; %s/%u -&gt; %s/%u%s</title></rect>\n",
			wake, x0, row_of(s, r->vcpu), x1 - x0, BAR,
			ivm_timeline_wake_color(r->wake_mask), r->vcpu,
			(double)(r->end_ns - r->start_ns) / 1e3, wake,
			r->to_idle.comm[0] ? r->to_idle.comm : "?", r->to_idle.tid,
			r->from_idle.comm[0] ? r->from_idle.comm : "?",
			r->from_idle.tid,
			r->flags & IVM_IDLE_START_UNKNOWN ?
			" (rebuilt, its start not known)" :
			r->flags & IVM_IDLE_REPLAYED ? " (rebuilt)" : "");
	}
	for (i = 0; i < s->nr_samples; i++) {
		const struct ivm_idle_summary_sample *t = &s->samples[i];
		double x = px(t->time_ns, t0, t1);

		if (t->vcpu >= s->nr_vcpus)
			continue;
		fprintf(out, "<line class=\"sample\" x1=\"%.2f\" y1=\"%u\" x2=\"%.2f\" y2=\"%u\" stroke=\"#333\">"
			"<title>%s %s/%u</title></line>\n", x,
			row_of(s, t->vcpu) + BAR, x, row_of(s, t->vcpu) + BAR + 6,
			ivm_sample_kind_name(t->kind), t->comm, t->tid);
	}
	host_spans_html(s, v, out, t0, t1, disk_y);
	{
		double y = bottom + 10;

		legend(out, LEFT, y, RUNNING_COLOR, "running");
		legend(out, LEFT + 110, y, ivm_timeline_wake_color(1u << IVM_IRQ_TIMER), "idle, timer");
		legend(out, LEFT + 230, y, ivm_timeline_wake_color(1u << IVM_IRQ_CALL), "idle, function-call IPI");
		legend(out, LEFT + 420, y, ivm_timeline_wake_color(1u << IVM_IRQ_RESCHED), "idle, reschedule IPI");
		legend(out, LEFT + 600, y, ivm_timeline_wake_color(1u << IVM_IRQ_DEVICE), "idle, device interrupt");
		legend(out, LEFT + 790, y, ivm_timeline_wake_color(0), "idle, cause unknown");
		if (s->span_records) {
			y += 24;
			legend(out, LEFT, y, ivm_timeline_span_color(IVM_SPAN_WAKE_DELAY),
			       "host steal: woken, waiting for a host CPU (under each vCPU)");
			legend(out, LEFT + 420, y, ivm_timeline_span_color(IVM_SPAN_PREEMPTED),
			       "host steal: preempted, waiting for a host CPU");
			legend(out, LEFT + 760, y, ivm_timeline_span_color(IVM_SPAN_DISK),
			       "host disk service (QEMU&apos;s disk calls in flight)");
		}
	}
	fprintf(out, "</svg></div>\n</body></html>\n");
	free(v);
	return NULL;
}
