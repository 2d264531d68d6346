// SPDX-License-Identifier: MIT
/*
 * kvm-records: the host's KVM tracepoint records of some threads (a KVM
 * guest's vCPU threads), read through idlevm's own trace session and
 * decoded by its own decoder (vmm/profile/kvm_events.h), for the KVM
 * end-to-end test and to record unit-test fixtures:
 *
 *   kvm-records [-o FILE] SECONDS TID...
 *
 * Prints one line per record on stdout:
 *   TS exit TID vcpu=N isa=N reason=0xN halt=0|1 rip=0xN
 *   TS entry TID vcpu=N rip=0xN
 *   TS wakeup TID waited=0|1 ns=N
 * then "records: N decoded, N not decoded, N lost".  With -o, every raw
 * record is also written to FILE as "TS HEXBYTES" (the format of
 * tests/unit/data/kvm/kvm.records).  Exits 1 if a record failed to decode.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "profile/kvm_events.h"
#include "profile/trace_session.h"

struct recorder {
	struct ivm_kvm_events *ev;
	FILE *raw;
	unsigned long decoded, failed;
};

static int on_record(void *ctx, const void *data, size_t size, int cpu,
		     uint64_t ts)
{
	struct recorder *r = ctx;
	const uint8_t *b = data;
	struct ivm_kvm_event e;
	struct ivm_error *err;
	size_t i;

	(void)cpu;
	if (r->raw) {
		fprintf(r->raw, "%" PRIu64 " ", ts);
		for (i = 0; i < size; i++)
			fprintf(r->raw, "%02x", b[i]);
		fputc('\n', r->raw);
	}
	err = ivm_kvm_events_decode(r->ev, data, size, &e);
	if (err) {
		printf("%" PRIu64 " undecoded: %s\n", ts, ivm_error_string(err));
		ivm_error_destroy(err);
		r->failed++;
		return 0;
	}
	r->decoded++;
	switch (e.kind) {
	case IVM_KVM_EXIT:
		printf("%" PRIu64 " exit %d vcpu=%u isa=%u reason=0x%x halt=%d rip=0x%" PRIx64 "\n",
		       ts, (int)e.tid, e.vcpu_id, e.isa, e.exit_reason,
		       e.halt, e.guest_rip);
		break;
	case IVM_KVM_ENTRY:
		printf("%" PRIu64 " entry %d vcpu=%u rip=0x%" PRIx64 "\n", ts,
		       (int)e.tid, e.vcpu_id, e.guest_rip);
		break;
	case IVM_KVM_VCPU_WAKEUP:
		printf("%" PRIu64 " wakeup %d waited=%d ns=%" PRIu64 "\n", ts,
		       (int)e.tid, e.waited, e.halt_ns);
		break;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const events[] = {
		"kvm:kvm_exit", "kvm:kvm_entry", "kvm:kvm_vcpu_wakeup",
	};
	struct recorder r = { 0 };
	struct ivm_trace_session *s = NULL;
	struct ivm_error *err;
	pid_t tids[64];
	size_t nr = 0;
	uint64_t end;
	bool mounted;
	int c;

	while ((c = getopt(argc, argv, "o:")) != -1) {
		if (c != 'o')
			goto usage;
		r.raw = fopen(optarg, "w");
		if (!r.raw) {
			perror(optarg);
			return 2;
		}
	}
	if (argc - optind < 2 || argc - optind - 1 > 64)
		goto usage;
	end = ivm_mono_ns() + (uint64_t)(atof(argv[optind]) * 1e9);
	for (c = optind + 1; c < argc; c++)
		tids[nr++] = (pid_t)atoi(argv[c]);
	err = ivm_tracefs_ensure(&mounted);
	if (!err)
		err = ivm_kvm_events_load(NULL, &r.ev);
	if (!err)
		err = ivm_trace_session_create(events, 3, tids, nr, 0, &s);
	while (!err && ivm_mono_ns() < end) {
		bool ready;

		err = ivm_trace_session_wait(s, 100000000ull, &ready);
		if (!err)
			err = ivm_trace_session_read(s, on_record, &r);
	}
	if (err) {
		fprintf(stderr, "kvm-records: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		ivm_trace_session_destroy(s);
		ivm_kvm_events_destroy(r.ev);
		return 2;
	}
	printf("records: %lu decoded, %lu not decoded, %" PRIu64 " lost\n",
	       r.decoded, r.failed, ivm_trace_session_lost(s));
	ivm_trace_session_destroy(s);
	ivm_kvm_events_destroy(r.ev);
	if (r.raw)
		fclose(r.raw);
	return r.failed ? 1 : 0;
usage:
	fprintf(stderr, "usage: kvm-records [-o FILE] SECONDS TID...\n");
	return 2;
}
