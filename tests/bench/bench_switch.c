// SPDX-License-Identifier: MIT
/*
 * Benchmark: what the switch sampler (profile --switch-every) costs per
 * look on a live guest, against its number of threads.
 *
 *   bench_switch (--qmp PATH | --domain NAME) [--looks N] [--every N]
 *                [--batch B] [--interval MS]
 *
 * Sets the sampler up as `idlevm profile --switch-every N` does (default
 * N 100) and times: the setup (the first whole sweep of the task lists and
 * the first read of every thread), LOOKS looks (default 1000) paced at
 * the sampler's own interval (each reads BATCH threads' counters, walks
 * the task lists a budget further and captures what is due), and a full
 * pass over every thread (what the end of a run does).  Prints the
 * threads watched, the median, p90, p99 and max microseconds of a look,
 * the threads read and the task-list reads per look, the samples kept,
 * and the share of one host core the looks took.  Samples go to a
 * temporary profile file, removed at the end.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernel/guest.h"
#include "profile/capture.h"
#include "profile/profile_file.h"
#include "profile/switch_sampler.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static struct ivm_error *emit(void *ctx, const struct ivm_capture *cap)
{
	return ivm_profile_write_sample(ctx, &cap->sample);
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
			       .tv_nsec = (long)(t % 1000000000ull) };

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "looks", required_argument, NULL, 'n' },
		{ "every", required_argument, NULL, 'e' },
		{ "batch", required_argument, NULL, 'b' },
		{ "interval", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_switch_sampler_config cfg = {
		.every = 100, .filter_pid = -1, .emit = emit,
	};
	struct ivm_switch_sampler_stats before, after;
	struct ivm_guest_options opts = { 0 };
	struct ivm_capture_engine *engine;
	struct ivm_switch_sampler *s;
	struct ivm_profile_writer *w;
	struct ivm_guest *g;
	struct ivm_error *err;
	char path[] = "/tmp/bench-switch.XXXXXX";
	uint64_t *lat, t0, setup_ns, pass_ns, busy = 0, start, elapsed;
	long looks = 1000, i;
	int c, fd;

	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "n:e:b:i:",
				longopts, NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		if (c == 'n')
			looks = atol(optarg);
		else if (c == 'e')
			cfg.every = (uint32_t)atol(optarg);
		else if (c == 'b')
			cfg.batch = (uint32_t)atol(optarg);
		else if (c == 'i')
			cfg.interval_ns = (uint64_t)(atof(optarg) * 1e6);
		else
			return 2;
	}
	if (looks < 1 || !cfg.every) {
		fprintf(stderr, "bench_switch: --looks and --every must be positive\n");
		return 2;
	}
	err = ivm_guest_open(&opts, &g);
	if (err)
		return ivm_error_report(err);
	err = ivm_capture_engine_create(g, &engine);
	if (err)
		return ivm_error_report(err);
	fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	err = ivm_profile_writer_create(path, &w);
	if (err)
		return ivm_error_report(err);
	cfg.emit_ctx = w;
	lat = calloc((size_t)looks, sizeof(*lat));
	if (!lat)
		return 1;

	t0 = ivm_mono_ns();
	err = ivm_switch_sampler_create(g, engine, w, &cfg, &s);
	setup_ns = ivm_mono_ns() - t0;
	if (err)
		return ivm_error_report(err);
	ivm_switch_sampler_stats(s, &before);
	start = ivm_mono_ns();
	for (i = 0; i < looks; i++) {
		uint64_t due = ivm_switch_sampler_due(s);

		sleep_until(due);
		t0 = ivm_mono_ns();
		err = ivm_switch_sampler_look(s, t0 > due ? t0 : due);
		lat[i] = ivm_mono_ns() - t0;
		busy += lat[i];
		if (err)
			return ivm_error_report(err);
	}
	elapsed = ivm_mono_ns() - start;
	ivm_switch_sampler_stats(s, &after);
	t0 = ivm_mono_ns();
	err = ivm_switch_sampler_end_window(s);
	pass_ns = ivm_mono_ns() - t0;
	if (err)
		return ivm_error_report(err);
	qsort(lat, (size_t)looks, sizeof(*lat), cmp_u64);
	printf("threads %" PRIu64 " (batch %u, every %u, look every %.1f ms): setup %.1f ms (first sweep %" PRIu64
	       " task-list reads, every thread read once); full pass %.1f ms\n",
	       after.watched, cfg.batch ? cfg.batch : IVM_SWITCH_BATCH_DEFAULT,
	       cfg.every,
	       (double)(cfg.interval_ns ? cfg.interval_ns :
			IVM_SWITCH_INTERVAL_DEFAULT_NS) / 1e6,
	       (double)setup_ns / 1e6, before.walk_reads,
	       (double)pass_ns / 1e6);
	printf("  %ld looks: median %.1f us, p90 %.1f, p99 %.1f, max %.1f; per look %.1f threads read, %.1f task-list reads, %.2f samples kept (%" PRIu64
	       " sweeps, %" PRIu64 " cut short); looks took %.2f%% of a host core\n",
	       looks, (double)lat[looks / 2] / 1e3,
	       (double)lat[looks * 9 / 10] / 1e3,
	       (double)lat[looks * 99 / 100] / 1e3,
	       (double)lat[looks - 1] / 1e3,
	       (double)(after.reads - before.reads) / (double)looks,
	       (double)(after.walk_reads - before.walk_reads) / (double)looks,
	       (double)(after.captured - before.captured) / (double)looks,
	       after.sweeps - before.sweeps,
	       after.sweeps_truncated - before.sweeps_truncated,
	       100.0 * (double)busy / (double)elapsed);
	ivm_switch_sampler_destroy(s);
	ivm_profile_writer_destroy(w);
	unlink(path);
	ivm_capture_engine_destroy(engine);
	ivm_guest_close(g);
	free(lat);
	return 0;
}
