// SPDX-License-Identifier: MIT
/*
 * The host's spans for the timeline: HOST_SPANS records written and read
 * back (split where a record's 32-bit offsets or its cap end, damage and
 * unknown kinds), the waits host_sched keeps and counts, the disks'
 * merged service, the timeline's tracks of them, and the why-idle causes
 * as pprof labels from a synthetic profile.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "profile/disk_service.h"
#include "profile/host_sched.h"
#include "profile/profile_file.h"
#include "proto.h"
#include "report/idle_summary.h"
#include "report/timeline.h"
#include "pprof_decode.h"
#include "tmp_files.h"

static char path[] = "/tmp/ivm-unit-spans-XXXXXX";
static char pb[] = "/tmp/ivm-unit-spans-pb-XXXXXX";

static void make_path(void)
{
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
}

static void drop_paths(void)
{
	if (IVM_TMP_MADE(path))
		unlink(path);
	if (IVM_TMP_MADE(pb))
		unlink(pb);
}

/* Every record of the file at path into the summary; returns the damage. */
/* A record the writer must refuse: an error, which is ours to free. */
static void refused(struct ivm_error *err)
{
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}

static struct ivm_profile_damage read_all(struct ivm_idle_summary *s)
{
	struct ivm_profile_reader *r;
	struct ivm_profile_record rec;
	struct ivm_profile_damage d;

	cr_assert_null(ivm_profile_reader_open(path, &r));
	while (ivm_profile_reader_next(r, &rec))
		cr_assert_null(ivm_idle_summary_add(s, &rec));
	d = *ivm_profile_reader_damage(r);
	ivm_profile_reader_destroy(r);
	return d;
}

Test(host_spans, written_and_read_back, .init = make_path, .fini = drop_paths)
{
	static struct ivm_span many[IVM_SPANS_MAX + 10];
	struct ivm_span sp[] = {
		{ .start_ns = 1000000, .dur_ns = 50000, .kind = IVM_SPAN_WAKE_DELAY },
		{ .start_ns = 2000000, .dur_ns = 70000, .kind = IVM_SPAN_PREEMPTED },
		/* 10 s later: past a record's 32-bit offsets. */
		{ .start_ns = 10002000000ull, .dur_ns = 30000, .kind = IVM_SPAN_WAKE_DELAY },
	};
	struct ivm_spans_record sr = { .lane = 1, .min_ns = 10000,
				       .dropped = 5, .dropped_ns = 20000,
				       .nr = 3, .spans = sp };
	struct ivm_span disk = { .start_ns = 1500000, .dur_ns = 400000,
				 .kind = IVM_SPAN_DISK, .flags = 6 };
	struct ivm_spans_record dr = { .lane = IVM_SPAN_LANE_DISK, .nr = 1,
				       .spans = &disk };
	struct ivm_profile_writer *w;
	struct ivm_idle_summary s;
	struct ivm_profile_damage d;
	uint64_t bytes = 0;
	size_t i;

	for (i = 0; i < IVM_SPANS_MAX + 10; i++)
		many[i] = (struct ivm_span){ .start_ns = 5000000 + 100000 * i,
					     .dur_ns = 20000,
					     .kind = IVM_SPAN_PREEMPTED };
	cr_assert_null(ivm_profile_writer_create(path, &w));
	cr_assert_null(ivm_profile_write_spans(w, &sr, &bytes));
	/* Two records: 16 + 32 + 2 * 12, then 16 + 32 + 12. */
	cr_assert_eq(bytes, 72 + 60, "%" PRIu64, bytes);
	cr_assert_null(ivm_profile_write_spans(w, &dr, NULL));
	sr = (struct ivm_spans_record){ .lane = 0, .nr = IVM_SPANS_MAX + 10,
					.spans = many };
	cr_assert_null(ivm_profile_write_spans(w, &sr, NULL));
	/* Nothing to say: no record. */
	sr = (struct ivm_spans_record){ .lane = 2 };
	cr_assert_null(ivm_profile_write_spans(w, &sr, NULL));
	/* Out of order, a lane past the vCPUs, a kind unknown: refused. */
	sp[0].start_ns = 3000000;
	sr = (struct ivm_spans_record){ .lane = 1, .nr = 2, .spans = sp };
	refused(ivm_profile_write_spans(w, &sr, NULL));
	sr = (struct ivm_spans_record){ .lane = IVM_SPAN_MAX_VCPUS };
	refused(ivm_profile_write_spans(w, &sr, NULL));
	disk.kind = IVM_SPAN_NR_KINDS;
	refused(ivm_profile_write_spans(w, &dr, NULL));
	cr_assert_null(ivm_profile_writer_finish(w, 1, NULL, 0));

	ivm_idle_summary_init(&s);
	d = read_all(&s);
	cr_assert_eq(d.records_bad, 0);
	cr_assert_eq(d.records_unknown, 0);
	/* 2 for vCPU 1, 1 disk, 2 for vCPU 0 (the cap). */
	cr_assert_eq(s.span_records, 5);
	cr_assert_eq(s.nr_spans, 3 + 1 + IVM_SPANS_MAX + 10);
	cr_assert_eq(s.steal_span_ns[1], 150000);
	cr_assert_eq(s.steal_left_out[1], 5);
	cr_assert_eq(s.steal_left_out_ns[1], 20000);
	cr_assert_eq(s.steal_span_ns[0], 20000ull * (IVM_SPANS_MAX + 10));
	cr_assert_eq(s.disk_span_ns, 400000);
	cr_assert_eq(s.spans[2].start_ns, 10002000000ull);
	cr_assert_eq(s.spans[2].end_ns, 10002030000ull);
	cr_assert_eq(s.spans[3].lane, IVM_SPAN_LANE_DISK);
	cr_assert_eq(s.spans[3].flags, 6);
	cr_assert_eq(s.nr_vcpus, 2);
	ivm_idle_summary_deinit(&s);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* A file of one HOST_SPANS record with this payload, checksum and all. */
static void write_raw(const uint8_t *payload, uint32_t len)
{
	uint8_t hdr[IVM_RECORD_HEADER_SIZE] = { 'I', 'V', 'M', 'R',
						IVM_RECORD_HOST_SPANS };
	uint8_t file[IVM_PROFILE_HEADER_SIZE] = { 'I', 'D', 'L', 'E', 'V',
						  'M', 'P', 'F', 1 };
	uint32_t crc;
	FILE *f;

	put32(hdr + 8, len);
	crc = idlevm_crc32c(idlevm_crc32c(0, hdr + 4, 8), payload, len);
	put32(hdr + 12, crc);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	fwrite(file, 1, sizeof(file), f);
	fwrite(hdr, 1, sizeof(hdr), f);
	fwrite(payload, 1, len, f);
	fclose(f);
}

/* Read back a file of one record: whether it was good, and its spans. */
static bool read_one(size_t *nr_spans)
{
	struct ivm_idle_summary s;
	struct ivm_profile_damage d;

	ivm_idle_summary_init(&s);
	d = read_all(&s);
	*nr_spans = s.nr_spans;
	ivm_idle_summary_deinit(&s);
	cr_assert_eq(d.records_ok + d.records_bad, 1);
	return d.records_ok == 1;
}

/*
 * Every field is checked: a span count the payload does not hold, spans
 * out of order, a lane past the vCPUs, a base whose spans would wrap the
 * clock cost the record (counted bad), never the reader; a span of a kind
 * this reader does not know is skipped, the record kept.
 */
Test(host_spans, damaged_fields, .init = make_path, .fini = drop_paths)
{
	uint8_t p[32 + 2 * 12];
	size_t nr;

	/* lane 0, min 0, base 1000, 2 spans. */
	memset(p, 0, sizeof(p));
	put32(p + 8, 1000);
	put32(p + 16, 2);
	put32(p + 32, 10);		/* start 10, dur 5 */
	put32(p + 36, 5);
	put32(p + 44, 20);
	put32(p + 48, 5);
	write_raw(p, sizeof(p));
	cr_assert(read_one(&nr));
	cr_assert_eq(nr, 2);

	put32(p + 16, 3);		/* 3 spans, room for 2 */
	write_raw(p, sizeof(p));
	cr_assert_not(read_one(&nr));
	put32(p + 16, 2);

	put32(p + 44, 5);		/* second starts before the first */
	write_raw(p, sizeof(p));
	cr_assert_not(read_one(&nr));
	put32(p + 44, 20);

	put32(p, IVM_SPAN_MAX_VCPUS);	/* no such lane */
	write_raw(p, sizeof(p));
	cr_assert_not(read_one(&nr));
	put32(p, 0);

	put32(p + 8, 0xffffffffu);	/* base near the clock's end */
	put32(p + 12, 0xffffffffu);
	write_raw(p, sizeof(p));
	cr_assert_not(read_one(&nr));
	put32(p + 8, 1000);
	put32(p + 12, 0);

	p[52] = IVM_SPAN_NR_KINDS;	/* a newer writer's kind: skipped */
	write_raw(p, sizeof(p));
	cr_assert(read_one(&nr));
	cr_assert_eq(nr, 1);
}

/* host_sched keeps waits of 10 us and more; the rest sum to the steal. */
Test(host_spans, host_sched_waits)
{
	struct ivm_host_sched *hs;
	struct ivm_spans_record sr;
	uint64_t t = 1000000;
	int i;

	cr_assert_null(ivm_host_sched_create(2, &hs));
	/* vCPU 0 runs, sleeps, is woken and waits 50 us; then 3 us. */
	ivm_host_sched_switch(hs, -1, 0, "swapper", 0, "CPU 0/TCG", t);
	for (i = 0; i < 2; i++) {
		uint64_t wait = i ? 3000 : 50000;

		ivm_host_sched_switch(hs, 0, 1, "CPU 0/TCG", -1, "hog", t += 1000);
		ivm_host_sched_wake(hs, 0, t += 100000);
		ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG",
				      t += wait);
	}
	/* Preempted by the hog for 2 ms. */
	ivm_host_sched_switch(hs, 0, 0, "CPU 0/TCG", -1, "hog", t += 1000);
	ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG", t += 2000000);
	ivm_host_sched_take_spans(hs, 0, &sr);
	cr_assert_eq(sr.lane, 0);
	cr_assert_eq(sr.nr, 2);
	cr_assert_eq(sr.spans[0].kind, IVM_SPAN_WAKE_DELAY);
	cr_assert_eq(sr.spans[0].dur_ns, 50000);
	cr_assert_eq(sr.spans[1].kind, IVM_SPAN_PREEMPTED);
	cr_assert_eq(sr.spans[1].dur_ns, 2000000);
	cr_assert_eq(sr.dropped, 1);
	cr_assert_eq(sr.dropped_ns, 3000);
	cr_assert_eq(ivm_host_sched_vcpu(hs, 0)->steal_ns,
		     50000 + 2000000 + 3000);
	/* Taken: the next take starts afresh. */
	ivm_host_sched_take_spans(hs, 0, &sr);
	cr_assert_eq(sr.nr + sr.dropped, 0);
	ivm_host_sched_destroy(hs);
}

/*
 * The host's CPUs' records come a CPU's batch at a time: a wait can be
 * kept before one that began earlier and overlaps it.  Taken, the spans
 * are in order, never overlap, and with the dropped time sum to the
 * steal (t_59 found this on a real host).
 */
Test(host_spans, host_sched_waits_out_of_order)
{
	struct ivm_host_sched *hs;
	struct ivm_spans_record sr;
	uint64_t sum;
	size_t i;

	cr_assert_null(ivm_host_sched_create(1, &hs));
	ivm_host_sched_switch(hs, 0, 0, "CPU 0/TCG", -1, "hog", 10000);
	ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG", 80000);
	ivm_host_sched_switch(hs, 0, 0, "CPU 0/TCG", -1, "hog", 40000);
	ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG", 100000);
	ivm_host_sched_switch(hs, 0, 0, "CPU 0/TCG", -1, "hog", 5000);
	ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG", 9000);
	ivm_host_sched_take_spans(hs, 0, &sr);
	cr_assert_eq(sr.nr, 2);
	cr_assert_eq(sr.spans[0].start_ns, 10000);
	cr_assert_eq(sr.spans[0].dur_ns, 70000);
	cr_assert_eq(sr.spans[1].start_ns, 80000);
	cr_assert_eq(sr.spans[1].dur_ns, 20000);
	sum = sr.dropped_ns;
	for (i = 0; i < sr.nr; i++)
		sum += sr.spans[i].dur_ns;
	cr_assert_eq(sum, ivm_host_sched_vcpu(hs, 0)->steal_ns);
	cr_assert_eq(sr.dropped, 1);	/* the 4 us one */
	/* A wait before the last one taken ends is cut to after it. */
	ivm_host_sched_switch(hs, 0, 0, "CPU 0/TCG", -1, "hog", 90000);
	ivm_host_sched_switch(hs, -1, 0, "hog", 0, "CPU 0/TCG", 130000);
	ivm_host_sched_take_spans(hs, 0, &sr);
	cr_assert_eq(sr.nr, 1);
	cr_assert_eq(sr.spans[0].start_ns, 100000);
	cr_assert_eq(sr.dropped_ns, 10000);
	ivm_host_sched_destroy(hs);
}

/* The disks' calls merge into spans that never overlap earlier ones. */
Test(host_spans, disk_service_merged)
{
	struct ivm_disk_service *ds;
	struct ivm_spans_record sr;

	cr_assert_null(ivm_disk_service_create(&ds));
	ivm_disk_service_enter(ds, 10, IVM_DISK_WRITE, 1000000);
	ivm_disk_service_enter(ds, 11, IVM_DISK_FLUSH, 1100000);
	ivm_disk_service_exit(ds, 10, IVM_DISK_WRITE, 0, 1200000);
	ivm_disk_service_exit(ds, 11, IVM_DISK_FLUSH, 0, 1500000);
	/* Apart, and too short to keep. */
	ivm_disk_service_enter(ds, 10, IVM_DISK_READ, 3000000);
	ivm_disk_service_exit(ds, 10, IVM_DISK_READ, 0, 3005000);
	/* In flight across the take. */
	ivm_disk_service_enter(ds, 12, IVM_DISK_WRITE, 1400000);
	ivm_disk_service_take_spans(ds, &sr);
	cr_assert_eq(sr.lane, IVM_SPAN_LANE_DISK);
	cr_assert_eq(sr.nr, 1);
	cr_assert_eq(sr.spans[0].start_ns, 1000000);
	cr_assert_eq(sr.spans[0].dur_ns, 500000);
	cr_assert_eq(sr.spans[0].flags,
		     (1u << IVM_DISK_WRITE) | (1u << IVM_DISK_FLUSH));
	cr_assert_eq(sr.dropped, 1);
	cr_assert_eq(sr.dropped_ns, 5000);
	/* Began before the last span's end: cut to what came after. */
	ivm_disk_service_exit(ds, 12, IVM_DISK_WRITE, 0, 1800000);
	ivm_disk_service_take_spans(ds, &sr);
	cr_assert_eq(sr.nr, 1);
	cr_assert_eq(sr.spans[0].start_ns, 1500000);
	cr_assert_eq(sr.spans[0].dur_ns, 300000);
	ivm_disk_service_destroy(ds);
}

static char *render(const struct ivm_idle_summary *s, bool html)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	if (html)
		cr_assert_null(ivm_timeline_html(s, f));
	else
		cr_assert_null(ivm_timeline_json(s, f));
	fclose(f);
	return buf;
}

static void add_spans(struct ivm_idle_summary *s, uint32_t lane,
		      const struct ivm_span *sp, size_t nr, uint64_t left_ns)
{
	struct ivm_profile_record rec = { .type = IVM_RECORD_HOST_SPANS };

	rec.spans = (struct ivm_spans_record){ .lane = lane, .nr = nr,
					       .spans = sp, .dropped = 2,
					       .dropped_ns = left_ns };
	cr_assert_null(ivm_idle_summary_add(s, &rec));
}

Test(host_spans, timeline_tracks)
{
	const struct ivm_span v0[] = {
		{ .start_ns = 1000, .dur_ns = 4000, .kind = IVM_SPAN_WAKE_DELAY },
		{ .start_ns = 20000, .dur_ns = 6000, .kind = IVM_SPAN_PREEMPTED },
	};
	const struct ivm_span dk[] = {
		{ .start_ns = 2000, .dur_ns = 9000, .kind = IVM_SPAN_DISK,
		  .flags = 1u << IVM_DISK_FLUSH },
	};
	struct ivm_profile_record rec = { .type = IVM_RECORD_IDLE_PERIOD };
	struct ivm_idle_summary s;
	char *json, *html;

	ivm_idle_summary_init(&s);
	rec.idle.vcpu = 1;
	rec.idle.start_ns = 500;
	rec.idle.end_ns = 30000;
	cr_assert_null(ivm_idle_summary_add(&s, &rec));
	/* vCPU 0 idle over 4 us of its second wait's 6. */
	rec.idle.vcpu = 0;
	rec.idle.start_ns = 18000;
	rec.idle.end_ns = 24000;
	cr_assert_null(ivm_idle_summary_add(&s, &rec));
	/* Without spans: no host tracks, no legend for them. */
	json = render(&s, false);
	cr_assert_null(strstr(json, "host steal"), "%s", json);
	free(json);
	add_spans(&s, 0, v0, 2, 7000);
	add_spans(&s, IVM_SPAN_LANE_DISK, dk, 1, 0);
	json = render(&s, false);
	cr_assert(strstr(json, "\"name\":\"vCPU 0 host steal\""), "%s", json);
	cr_assert(strstr(json, "\"name\":\"vCPU 1 host steal\""), "%s", json);
	cr_assert(strstr(json, "{\"ph\":\"X\",\"cat\":\"host_steal\",\"name\":\"host wake delay\",\"pid\":1,\"tid\":100000,\"ts\":0.500,\"dur\":4.000"), "%s", json);
	cr_assert(strstr(json, "\"name\":\"host preempted\",\"pid\":1,\"tid\":100000,\"ts\":19.500,\"dur\":6.000,\"args\":{\"wait\":\"preempted, waiting for a host CPU\",\"in_idle_us\":4.000}"), "%s", json);
	cr_assert(strstr(json, "\"in_idle_us\":0.000"), "%s", json);
	cr_assert(strstr(json, "\"cat\":\"host_disk\",\"name\":\"host disk service\",\"pid\":1,\"tid\":200000,\"ts\":1.500,\"dur\":9.000,\"args\":{\"calls\":\"flush\"}"), "%s", json);
	cr_assert(strstr(json, "{\"vcpu\":0,\"steal_us\":10.000,\"left_out_us\":7.000,\"left_out\":2}"), "%s", json);
	html = render(&s, true);
	cr_assert(strstr(html, "class=\"host-steal\" data-kind=\"wake\""), "%s", html);
	cr_assert(strstr(html, "class=\"host-steal\" data-kind=\"preempted\""), "%s", html);
	cr_assert(strstr(html, "fill-opacity=\"0.4\"><title>vCPU 0 host preempted 6.0 us, 4.0 us of it while the guest was idle"), "%s", html);
	cr_assert(strstr(html, "class=\"host-disk\""), "%s", html);
	cr_assert(strstr(html, "host steal: woken, waiting for a host CPU"), "%s", html);
	cr_assert(strstr(html, "host disk service (QEMU"), "%s", html);
	free(json);
	free(html);
	ivm_idle_summary_deinit(&s);
}

static const uint64_t kpcs[] = { 0xffffffff81000010ull };

static void write_sample(struct ivm_profile_writer *w, enum ivm_sample_kind kind,
			 uint64_t t, uint32_t tid, uint64_t wake_ns)
{
	struct ivm_counter c = { IVM_COUNTER_HOST_WAKE_NS, wake_ns };
	struct ivm_sample s = { .time_ns = t, .vcpu = 0, .kind = kind,
				.pid = tid, .tid = tid, .nr_kernel = 1,
				.kernel_pcs = kpcs };

	if (wake_ns) {
		s.nr_counters = 1;
		s.counters = &c;
	}
	snprintf(s.comm, sizeof(s.comm), "t%u", tid);
	cr_assert_null(ivm_profile_write_sample(w, &s));
}

static void write_period(struct ivm_profile_writer *w, uint64_t start,
			 uint64_t end, uint32_t wake_mask)
{
	struct ivm_idle_record r = { .vcpu = 0, .start_ns = start,
				     .end_ns = end, .wake_mask = wake_mask };

	cr_assert_null(ivm_profile_write_idle_period(w, &r));
}

/*
 * pprof: a to-idle sample is labelled with what woke the period it began,
 * a from-idle one with what woke the one it ended and its host wake
 * delay's bucket; a sample with no period gets none.
 */
Test(host_spans, pprof_cause_labels, .init = make_path, .fini = drop_paths)
{
	struct ivm_report_options opts = { .kind = -1, .top = 10,
					   .format = IVM_REPORT_PPROF };
	struct ivm_profile_writer *w;
	char *out;
	int fd;

	if (access("/usr/bin/protoc", X_OK))
		cr_skip_test("protoc (protobuf-compiler) not installed");
	cr_assert_null(ivm_profile_writer_create(path, &w));
	write_period(w, 1000000, 5000000, 1u << IVM_IRQ_DEVICE);
	write_sample(w, IVM_SAMPLE_TO_IDLE, 1200000, 101, 0);
	write_sample(w, IVM_SAMPLE_FROM_IDLE, 5000000, 102, 40000);
	write_period(w, 6000000, 9000000, 1u << IVM_IRQ_TIMER);
	write_sample(w, IVM_SAMPLE_TO_IDLE, 6100000, 103, 0);
	/* Long after any period: no wake label. */
	write_sample(w, IVM_SAMPLE_FROM_IDLE, 900000000, 104, 0);
	cr_assert_null(ivm_profile_writer_finish(w, 1000000000, NULL, 0));
	fd = mkstemp(pb);
	cr_assert_geq(fd, 0);
	close(fd);
	opts.output = pb;
	opts.out = stdout;
	cr_assert_eq(ivm_report_file(path, false, &opts,
				     IVM_CALLTREE_BY_PROCESS |
				     IVM_CALLTREE_BY_THREAD), 0);
	out = pprof_samples(pb);
	cr_assert(strstr(out, "1 kind=to_idle wake=device thread=t101/101"), "%s", out);
	cr_assert(strstr(out, "kind=from_idle wake=device host_wake=lt_100us thread=t102/102"), "%s", out);
	cr_assert(strstr(out, "1 kind=to_idle wake=timer thread=t103/103"), "%s", out);
	cr_assert(strstr(out, "kind=from_idle thread=t104/104"), "%s", out);
	free(out);
}
