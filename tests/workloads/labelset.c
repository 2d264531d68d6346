// SPDX-License-Identifier: MIT
/*
 * labelset — a guest program whose threads hold known values in every
 * kind of variable `idlevm profile --label` reads, and block often, so a
 * profile's labels can be checked against them.
 *
 *   globals        labelset_code = 31337 (int), labelset_name = "labelset"
 *                  (a char *), labelset_big = 0x123456789abcdef0 (u64)
 *   __thread       labelset_worker: the thread's number (1..N; 0 in main),
 *                  labelset_worker_name: "worker-<n>" ("main" in main)
 *   pthread keys   labelset_key_tenant: "tenant-<n>" (a string pointer);
 *                  labelset_key_far: (void *)(1000 + n), a key past the
 *                  first 32 (its data in a second-level block);
 *                  labelset_key_reused: a key whose number an earlier,
 *                  deleted key had, which every worker set before it was
 *                  deleted: pthread_getspecific() on the new key gives
 *                  NULL, so must a reader that checks sequence numbers.
 *
 * Each worker then sleeps in nanosleep (--sleep-ms, default 3) in a loop,
 * so it goes idle often.  Output, line-buffered:
 *   labelset: ready pid=<pid> code=31337 name=labelset big=<u64> keys=<t>,<f>,<r>
 *   labelset: worker=<n> tid=<tid> name=worker-<n> tenant=tenant-<n>
 *             far=<1000+n> reused=(null) tls_addr=<hex> code_addr=<hex>
 * (addresses for tests run on the host), once every worker has set its
 * values; nothing changes after.  Runs --seconds (0: until killed).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 16

int labelset_code = 31337;
const char *labelset_name = "labelset";
uint64_t labelset_big = 0x123456789abcdef0ull;
__thread int labelset_worker;
__thread const char *labelset_worker_name = "main";
pthread_key_t labelset_key_tenant, labelset_key_far, labelset_key_reused;

static pthread_key_t stale_key;
static pthread_barrier_t set_stale, stale_deleted, all_set;
static unsigned int nr_workers = 2, sleep_ms = 3;
static double seconds;
static char tenants[MAX_WORKERS][24], names[MAX_WORKERS][24];

static void die(const char *what, int err)
{
	fprintf(stderr, "labelset: %s: %s\n", what, strerror(err));
	exit(1);
}

static void *worker_main(void *arg)
{
	unsigned int n = (unsigned int)(uintptr_t)arg;
	struct timespec ts = { 0, (long)sleep_ms * 1000000L };
	int err;

	labelset_worker = (int)n;
	labelset_worker_name = names[n - 1];
	/* The stale value: under a key about to be deleted and reused. */
	err = pthread_setspecific(stale_key, "stale");
	if (err)
		die("pthread_setspecific", err);
	pthread_barrier_wait(&set_stale);
	pthread_barrier_wait(&stale_deleted);
	err = pthread_setspecific(labelset_key_tenant, tenants[n - 1]);
	if (!err)
		err = pthread_setspecific(labelset_key_far,
					  (void *)(uintptr_t)(1000 + n));
	if (err)
		die("pthread_setspecific", err);
	printf("labelset: worker=%u tid=%d name=%s tenant=%s far=%lu"
	       " reused=%s tls_addr=%#lx code_addr=%#lx\n", n, gettid(),
	       labelset_worker_name,
	       (const char *)pthread_getspecific(labelset_key_tenant),
	       (unsigned long)(uintptr_t)pthread_getspecific(labelset_key_far),
	       pthread_getspecific(labelset_key_reused) ? "set" : "(null)",
	       (unsigned long)(uintptr_t)&labelset_worker,
	       (unsigned long)(uintptr_t)&labelset_code);
	pthread_barrier_wait(&all_set);
	for (;;)
		nanosleep(&ts, NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[MAX_WORKERS];
	pthread_key_t filler[40];
	unsigned int i;
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i + 1 < (unsigned int)argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			nr_workers = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--sleep-ms"))
			sleep_ms = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else
			break;
	}
	if (i != (unsigned int)argc || !nr_workers || nr_workers > MAX_WORKERS) {
		fprintf(stderr, "usage: labelset [--threads 1..%d] [--sleep-ms MS]"
			" [--seconds S]\n", MAX_WORKERS);
		return 2;
	}
	err = pthread_key_create(&labelset_key_tenant, NULL);
	/* Past the first block of 32: a second-level one. */
	for (i = 0; !err && i < sizeof(filler) / sizeof(filler[0]); i++)
		err = pthread_key_create(&filler[i], NULL);
	if (!err)
		err = pthread_key_create(&labelset_key_far, NULL);
	if (!err)
		err = pthread_key_create(&stale_key, NULL);
	if (err)
		die("pthread_key_create", err);
	pthread_barrier_init(&set_stale, NULL, nr_workers + 1);
	pthread_barrier_init(&stale_deleted, NULL, nr_workers + 1);
	pthread_barrier_init(&all_set, NULL, nr_workers + 1);
	for (i = 0; i < nr_workers; i++) {
		snprintf(tenants[i], sizeof(tenants[i]), "tenant-%u", i + 1);
		snprintf(names[i], sizeof(names[i]), "worker-%u", i + 1);
		err = pthread_create(&threads[i], NULL, worker_main,
				     (void *)(uintptr_t)(i + 1));
		if (err)
			die("pthread_create", err);
	}
	pthread_barrier_wait(&set_stale);
	/* The same number again, a new sequence: the stale values are old. */
	pthread_key_delete(stale_key);
	err = pthread_key_create(&labelset_key_reused, NULL);
	if (err)
		die("pthread_key_create", err);
	if (labelset_key_reused != stale_key) {
		fprintf(stderr, "labelset: key %u not reused (got %u)\n",
			stale_key, labelset_key_reused);
		return 1;
	}
	pthread_barrier_wait(&stale_deleted);
	pthread_barrier_wait(&all_set);
	printf("labelset: ready pid=%d code=%d name=%s big=%llu keys=%u,%u,%u\n",
	       getpid(), labelset_code, labelset_name,
	       (unsigned long long)labelset_big, labelset_key_tenant,
	       labelset_key_far, labelset_key_reused);
	if (seconds > 0) {
		struct timespec ts = { (time_t)seconds,
				       (long)((seconds - (double)(time_t)seconds) * 1e9) };

		nanosleep(&ts, NULL);
		return 0;
	}
	for (;;)
		pause();
}
