// SPDX-License-Identifier: MIT
/*
 * The idle summary and the timeline writers on synthetic profile records:
 * the run block tells transitions seen, captured and lost; guest comms
 * that would break JSON or HTML are rewritten; the JSON has one track per
 * vCPU and the periods and runs between them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/idle_summary.h"
#include "report/timeline.h"
#include "report/why_idle.h"

static void add_period(struct ivm_idle_summary *s, uint32_t vcpu,
		       uint64_t start, uint64_t end, uint32_t wake,
		       const char *to, const char *from)
{
	struct ivm_profile_record rec = { .type = IVM_RECORD_IDLE_PERIOD };

	rec.idle.vcpu = vcpu;
	rec.idle.start_ns = start;
	rec.idle.end_ns = end;
	rec.idle.wake_mask = wake;
	snprintf(rec.idle.to_idle.comm, IVM_COMM_LEN, "%s", to);
	snprintf(rec.idle.from_idle.comm, IVM_COMM_LEN, "%s", from);
	rec.idle.to_idle.tid = 7;
	cr_assert_null(ivm_idle_summary_add(s, &rec));
}

/* to_idle_later: how many to-idle samples were read after a later run. */
static void add_stats_later(struct ivm_idle_summary *s, uint64_t to_idle_later)
{
	const struct ivm_stat st[] = {
		{ "elapsed_ms", 2500 }, { "to_idle", 9 }, { "from_idle", 8 },
		{ "idle_periods_seen", 8 }, { "idle_periods_ended", 8 },
		{ "idle_periods_unseen", 2 }, { "idle_periods_replayed", 1 },
		{ "discarded_ran", 1 }, { "to_idle_later", to_idle_later },
	};
	struct ivm_profile_record rec = { .type = IVM_RECORD_END };
	struct ivm_label meta[] = { { "idle_source", "sched" },
				    { "guest", "we\"b<01>" } };

	rec.stats.items = st;
	rec.stats.nr = sizeof(st) / sizeof(st[0]);
	cr_assert_null(ivm_idle_summary_add(s, &rec));
	rec.type = IVM_RECORD_META;
	rec.meta.items = meta;
	rec.meta.nr = 2;
	cr_assert_null(ivm_idle_summary_add(s, &rec));
}

static void add_stats(struct ivm_idle_summary *s)
{
	add_stats_later(s, 0);
}

/* what: 0 the run block, 1 the timeline's JSON, 2 its HTML, 3 why idle. */
static char *render(struct ivm_idle_summary *s, int what)
{
	struct ivm_calltree *tree;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	if (what == 0) {
		ivm_idle_summary_print(s, f);
	} else if (what == 1) {
		cr_assert_null(ivm_timeline_json(s, f));
	} else if (what == 2) {
		cr_assert_null(ivm_timeline_html(s, f));
	} else {
		cr_assert_null(ivm_calltree_create(0, &tree));
		ivm_why_idle_print(s, tree, f);
		ivm_calltree_destroy(tree);
	}
	fclose(f);
	return buf;
}

static unsigned int count(const char *hay, const char *needle)
{
	unsigned int n = 0;

	for (; (hay = strstr(hay, needle)); hay++)
		n++;
	return n;
}

Test(idle_report, run_block_and_periods)
{
	struct ivm_idle_summary s;
	char *text;

	ivm_idle_summary_init(&s);
	add_stats(&s);
	add_period(&s, 0, 1000, 51000, 1u << IVM_IRQ_TIMER, "worker", "holder");
	add_period(&s, 1, 2000, 2500, 1u << IVM_IRQ_CALL, "worker", "holder");
	add_period(&s, 1, 9000, 2009000, 0, "holder", "worker");
	text = render(&s, 0);
	cr_assert(strstr(text, "duration: 2.5 s; idle source: sched; vCPUs: 2"), "%s", text);
	cr_assert(strstr(text, "guest to-idle switches: 10 (8 seen at a look, 2 between looks, 1 of those rebuilt); captured 9 (90.0%)"), "%s", text);
	cr_assert(strstr(text, "between looks, not rebuilt 1; target ran during the read 1"), "%s", text);
	cr_assert(strstr(text, "== idle periods: 3 recorded =="), "%s", text);
	cr_assert(strstr(text, "timer share of known wake causes: 50.0% of 2"), "%s", text);
	cr_assert(strstr(text, "2  worker           -> holder"), "%s", text);
	free(text);
	ivm_idle_summary_deinit(&s);
}

Test(idle_report, hostile_comms_and_json_tracks)
{
	struct ivm_idle_summary s;
	char *json, *html;

	ivm_idle_summary_init(&s);
	add_stats(&s);
	add_period(&s, 0, 1000, 5000, 1u << IVM_IRQ_DEVICE, "a\"b\\c<d>", "x\ny");
	add_period(&s, 0, 9000, 12000, 1u << IVM_IRQ_TIMER, "a", "z");
	add_period(&s, 1, 2000, 3000, 0, "q", "r");
	json = render(&s, 1);
	html = render(&s, 2);
	/* No guest byte closes a string or a tag early. */
	cr_assert_null(strstr(json, "a\"b"));
	cr_assert(strstr(json, "a_b_c_d_"), "%s", json);
	cr_assert(strstr(json, "\"guest\":\"we_b_01_\""), "%s", json);
	cr_assert_null(strstr(html, "<d>"));
	cr_assert_eq(count(json, "\"name\":\"thread_name\""), 2);
	cr_assert_eq(count(json, "\"cat\":\"idle\""), 3);
	/* One run between the two periods of vCPU 0, from 5 us for 4 us. */
	cr_assert_eq(count(json, "\"cat\":\"running\""), 1);
	cr_assert(strstr(json, "\"ts\":4.000,\"dur\":4.000"), "%s", json);
	cr_assert_eq(count(html, "class=\"idle\""), 3);
	cr_assert_eq(count(html, "class=\"track\""), 2);
	free(json);
	free(html);
	ivm_idle_summary_deinit(&s);
}

/*
 * A period rebuilt without a start (a second run of its to-idle thread hid
 * it) counts as a period but not in the durations, and its to-idle sample
 * read after that run is said to be so.
 */
Test(idle_report, period_without_a_start)
{
	struct ivm_idle_summary s;
	char *text, *json;

	ivm_idle_summary_init(&s);
	add_stats_later(&s, 3);
	add_period(&s, 0, 1000, 51000, 1u << IVM_IRQ_TIMER, "worker", "holder");
	add_period(&s, 0, 90000, 90000, 0, "worker", "worker");
	s.periods[1].flags = IVM_IDLE_REPLAYED | IVM_IDLE_START_UNKNOWN;
	text = render(&s, 0);
	cr_assert(strstr(text, "captured 9 (90.0%), 3 of them with the stack the thread blocked in next"), "%s", text);
	cr_assert(strstr(text, "== idle periods: 2 recorded =="), "%s", text);
	/* vCPU 0: two periods, 50 us idle, one under 100 us; none under 1 ms. */
	cr_assert(strstr(text, "     0        2    0.000       1       0"), "%s", text);
	cr_assert(strstr(text, "(1 rebuilt periods whose start is not known are not in the durations)"), "%s", text);
	json = render(&s, 1);
	cr_assert_eq(count(json, "\"start_known\":false"), 1);
	cr_assert_eq(count(json, "\"start_known\":true"), 1);
	free(text);
	free(json);
	ivm_idle_summary_deinit(&s);
}

static char *why_idle(uint64_t host_sleep_ns)
{
	const struct ivm_stat st[] = {
		{ "elapsed_ms", 1000 }, { "host_steal_ns", 0 },
		{ "host_sleep_ns", host_sleep_ns }, { "host_steal_idle_ns", 0 },
		{ "host_sleep_idle_ns", 0 },
	};
	struct ivm_profile_record rec = { .type = IVM_RECORD_END };
	struct ivm_idle_summary s;
	char *text;

	ivm_idle_summary_init(&s);
	add_period(&s, 0, 0, 600000000, 1u << IVM_IRQ_TIMER, "worker", "w");
	rec.stats.items = st;
	rec.stats.nr = sizeof(st) / sizeof(st[0]);
	cr_assert_null(ivm_idle_summary_add(&s, &rec));
	text = render(&s, 3);
	ivm_idle_summary_deinit(&s);
	return text;
}

/* The parts of the vCPU time add up to it, and say so when they do not. */
Test(idle_report, why_idle_parts_add_up_or_say_they_overlap)
{
	char *text = why_idle(300000000);

	cr_assert(strstr(text, "guest idle (halted)           0.600 s   60.0%"), "%s", text);
	cr_assert(strstr(text, "host sleep, not idle          0.300 s   30.0%"), "%s", text);
	cr_assert(strstr(text, "the rest                      0.100 s   10.0%"), "%s", text);
	cr_assert_null(strstr(text, "counted twice"), "%s", text);
	free(text);
	/* 0.6 s idle and 0.6 s blocked in one second: 0.2 s twice. */
	text = why_idle(600000000);
	cr_assert(strstr(text, "the rest                      0.000 s    0.0%"), "%s", text);
	cr_assert(strstr(text, "add up to 0.200 s more than the vCPU time"), "%s", text);
	free(text);
}
