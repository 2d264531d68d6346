// SPDX-License-Identifier: MIT
/*
 * Round trips to a live idlevm-helper: PING, PIN+UNPIN, HOLD+RELEASE, MAPS,
 * and with a protocol-2 helper HOLD_PIN (one round trip, a lease the
 * helper ends itself) and the helper's own count of what it did (STATS).
 *
 *   build/bench/bench_helper_pin --socket RUN/helper.sock [--tid TID]
 *       [--count N]
 *
 * Pins TID (default: the helper's own main thread) to each CPU in turn and
 * back, holds the last CPU, and checks on the way that a lease runs out by
 * itself: a PIN with a 20 ms lease is gone 200 ms later.  Prints the median
 * and 90th percentile of each round trip.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access/helper_client.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("%-16s n=%-5d median %8.3f ms  p90 %8.3f ms  p99 %8.3f ms  max %8.3f ms\n",
	       what, n, v[n / 2] / 1e6, v[n * 9 / 10] / 1e6,
	       v[n * 99 / 100] / 1e6, v[n - 1] / 1e6);
}

struct maps_count {
	unsigned int entries, with_build_id;
};

static struct ivm_error *count_map(const struct idlevm_map_entry *e,
				   void *arg)
{
	struct maps_count *c = arg;

	c->entries++;
	c->with_build_id += e->build_id_len > 0;
	return NULL;
}

static int fail(struct ivm_error *err, const char *what)
{
	fprintf(stderr, "bench_helper_pin: %s: %s\n", what,
		ivm_error_string(err));
	ivm_error_destroy(err);
	return 1;
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	int tid = 0, count = 200, i, c;
	struct ivm_helper_hello hello;
	struct ivm_helper *helper;
	struct ivm_error *err;
	struct maps_count mc = { 0 };
	uint64_t *t, start, held;

	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "tid", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};

	while ((c = getopt_long(argc, argv, "s:t:n:", opts, NULL)) != -1) {
		switch (c) {
		case 's': path = optarg; break;
		case 't': tid = atoi(optarg); break;
		case 'n': count = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: bench_helper_pin --socket PATH [--tid TID] [--count N]\n");
			return 2;
		}
	}
	if (!path || count < 10) {
		fprintf(stderr, "usage: bench_helper_pin --socket PATH [--tid TID] [--count N>=10]\n");
		return 2;
	}
	t = calloc(count, sizeof(*t));
	if (!t)
		return 1;
	err = ivm_helper_connect_path(path, &helper);
	if (err)
		return fail(err, "connect");
	err = ivm_helper_hello(helper, &hello);
	if (err)
		return fail(err, "hello");
	if (!tid)
		tid = (int)hello.pid;
	printf("helper %s, kernel %s, %u cpus, pinning tid %d\n",
	       hello.helper_version, hello.kernel_release, hello.ncpus, tid);

	for (i = 0; i < count; i++) {
		err = ivm_helper_ping(helper, &t[i]);
		if (err)
			return fail(err, "ping");
	}
	report("ping", t, count);

	for (i = 0; i < count; i++) {
		struct ivm_helper_pin pin;

		start = now_ns();
		err = ivm_helper_pin(helper, tid, i % hello.ncpus, 1000, &pin);
		if (!err)
			err = ivm_helper_unpin(helper, tid, &held);
		if (err)
			return fail(err, "pin/unpin");
		t[i] = now_ns() - start;
	}
	report("pin+unpin", t, count);

	for (i = 0; i < count / 10; i++) {
		struct ivm_helper_lease lease;
		uint32_t granted;

		start = now_ns();
		err = ivm_helper_hold(helper, hello.ncpus - 1, 500, &granted);
		if (!err)
			err = ivm_helper_release(helper, hello.ncpus - 1,
						 &lease);
		if (err)
			return fail(err, "hold/release");
		t[i] = now_ns() - start;
	}
	report("hold+release", t, count / 10);

	/*
	 * The pin capture's own sequence: HOLD+PIN and UNPIN+RELEASE as
	 * pipelined pairs.  Not on the helper's own thread: pinned to the CPU
	 * its holder spins on, the helper could not answer until the lease
	 * ran out.
	 */
	if (tid != (int)hello.pid) {
		uint64_t *r = calloc(count / 10, sizeof(*r));

		if (!r)
			return 1;
		for (i = 0; i < count / 10; i++) {
			struct ivm_helper_unpin_release rel;
			struct ivm_helper_hold_pin hp;
			uint64_t mid;

			start = now_ns();
			err = ivm_helper_hold_pin(helper, hello.ncpus - 1, 500,
						  tid, 500, &hp);
			mid = now_ns();
			if (!err && (hp.hold_errnum || hp.pin_errnum)) {
				fprintf(stderr, "bench_helper_pin: hold+pin refused: %s / %s\n",
					strerror(hp.hold_errnum),
					strerror(hp.pin_errnum));
				return 1;
			}
			if (!err)
				err = ivm_helper_unpin_release(helper, tid,
							       hello.ncpus - 1,
							       &rel);
			if (err)
				return fail(err, "hold+pin/unpin+release");
			t[i] = mid - start;
			r[i] = now_ns() - mid;
		}
		report("hold+pin pair", t, count / 10);
		report("unpin+release", r, count / 10);
		free(r);
	} else {
		printf("hold+pin pair: skipped (give --tid of a thread other than the helper's)\n");
	}

	/*
	 * HOLD_PIN: one round trip; the helper ends hold and pin by itself
	 * after the lease (1 ms here), so the next one waits that long.
	 */
	if (hello.protocol >= 2 && tid != (int)hello.pid) {
		struct ivm_helper_stats st;
		int refused = 0, n = 0;

		for (i = 0; i < count / 2; i++) {
			struct ivm_helper_held hd;

			start = now_ns();
			err = ivm_helper_hold_pin_lease(helper,
							hello.ncpus - 1, tid,
							1000, &hd);
			if (ivm_helper_error_is_answer(err)) {
				refused++;
				ivm_error_destroy(err);
				err = NULL;
			} else if (!err) {
				t[n++] = now_ns() - start;
			}
			if (err)
				return fail(err, "hold_pin");
			usleep(5000);
		}
		if (n)
			report("hold_pin", t, n);
		printf("hold_pin: %d refused\n", refused);
		err = ivm_helper_stats(helper, &st);
		if (err)
			return fail(err, "stats");
		printf("helper's count:");
		for (i = 0; i < (int)st.nr; i++)
			printf(" %s=%llu", st.stat[i].name,
			       (unsigned long long)st.stat[i].value);
		printf("\n");
	}

	for (i = 0; i < 10; i++) {
		mc.entries = mc.with_build_id = 0;
		start = now_ns();
		err = ivm_helper_maps(helper, (int)hello.pid, count_map, &mc);
		if (err)
			return fail(err, "maps");
		t[i] = now_ns() - start;
	}
	report("maps", t, 10);
	printf("maps of pid %u: %u entries, %u with a build-id\n", hello.pid,
	       mc.entries, mc.with_build_id);

	/* A lease runs out by itself. */
	{
		struct ivm_helper_pin pin;

		err = ivm_helper_pin(helper, tid, 0, 20, &pin);
		if (err)
			return fail(err, "pin");
		usleep(200000);
		err = ivm_helper_unpin(helper, tid, &held);
		if (!err || err->code != IVM_ERROR_OS ||
		    err->errnum != ENOENT) {
			fprintf(stderr, "bench_helper_pin: pin with a 20 ms lease still held after 200 ms (%s)\n",
				ivm_error_string(err));
			ivm_error_destroy(err);
			return 1;
		}
		ivm_error_destroy(err);
		printf("lease expiry: a 20 ms pin was gone after 200 ms\n");
	}
	ivm_helper_destroy(helper);
	free(t);
	return 0;
}
