#!/bin/bash
# Benchmark: the switch sampler's cost per look (profile --switch-every)
# against the number of guest threads.
#
#   BUILD=build tests/bench/switch_poll.sh [COUNTS] [LOOKS]
#
# Boots the demo guest under plain QEMU (no workload, MEMORY default
# 1536M: ten thousand threads take about 400 MiB of the guest's memory),
# then for each count in COUNTS (default "100 1000 10000") starts
# `threadpark --threads COUNT --hz 1` in it (threads that sleep and wake
# once a second, staggered), waits until every thread runs, and runs
# bench_switch for LOOKS looks (default 1000) at the sampler's defaults
# (BENCH_ARGS adds options, e.g. "--batch 1024").  Prints bench_switch's
# two lines per count: setup and full-pass times, and the median, p90,
# p99 and max microseconds of a look with the threads read and task-list
# reads per look.  The guest also runs its own threads (about 60).
set -u	# not -e: guest_sh reads with timeouts that fail on purpose
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
COUNTS=${1:-100 1000 10000}
LOOKS=${2:-1000}
MEMORY=${MEMORY:-1536M}
BENCH=$(cd "$BUILD" && pwd)/bench/bench_switch
[ -x "$BENCH" ] || { echo "switch_poll: $BENCH missing: make bench" >&2; exit 1; }

RUN=$(mktemp -d /tmp/idlevm-bench.XXXXXX)
trap '[ -f "$RUN/qemu.pid" ] && kill "$(cat "$RUN/qemu.pid")" 2>/dev/null; rm -rf "$RUN"' EXIT
# A TCG guest on a loaded host can take minutes to boot.
IVM_BOOT_TIMEOUT=${IVM_BOOT_TIMEOUT:-600} BUILD=$BUILD \
	images/run-guest --workload none --memory "$MEMORY" \
	--run-dir "$RUN" --wait >/dev/null || exit 1

# The test shell on the guest's second serial port (tests/e2e/lib.sh).
IVM_BUILD=$(cd "$BUILD" && pwd)
IVM_SHELL_SOCK=$RUN/shell.sock
. tests/e2e/lib.sh
GUEST_SH_TIMEOUT=120 guest_sh 'echo 100000 > /proc/sys/kernel/threads-max' >/dev/null ||
	{ echo "switch_poll: the guest shell does not answer" >&2; exit 1; }

for n in $COUNTS; do
	guest_sh "threadpark --threads $n --hz 1 >/tmp/tp.log 2>&1 &" >/dev/null
	ready=""
	for i in $(seq 1 300); do
		out=$(guest_sh 'cat /tmp/tp.log' 2>/dev/null) || true
		case $out in
		*"ready threads="*) ready=1; break ;;
		*"made "*) break ;;
		esac
		sleep 1
	done
	[ -n "$ready" ] || { echo "switch_poll: threadpark --threads $n did not start: $out" >&2; exit 1; }
	"$BENCH" --qmp "$RUN/qmp.sock" --looks "$LOOKS" ${BENCH_ARGS:-} || exit 1
	guest_sh 'kill $(pidof threadpark); while pidof threadpark >/dev/null; do sleep 0.2; done' 60 >/dev/null
done
