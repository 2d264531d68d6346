#!/bin/bash
# Benchmark: what attaching idlevm costs the guest and the host.
#
#   BUILD=build tests/bench/profile_overhead.sh [SECONDS] [ROUNDS]
#
# Boots the demo guest under plain QEMU running `spin` (a CPU-bound loop
# printing ops/s each second), then alternates ROUNDS times (default 3):
# SECONDS (default 20) without the profiler, SECONDS with `idlevm profile`
# at its defaults.  Prints per round: spin ops/s without and with, the
# slowdown, idlevm's host CPU time (utime+stime from /proc) as a share of
# one core, and samples per second; then the medians.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECONDS_PER=${1:-20}
ROUNDS=${2:-3}
. tests/bench/lib_spin.sh

: >"$RUN/rounds"
for r in $(seq 1 "$ROUNDS"); do
	from=$(($(console_lines) + 1))
	sleep "$SECONDS_PER"
	base=$(mean_ops "$from")

	from=$(($(console_lines) + 1))
	"$IDLEVM" profile --qmp "$RUN/qmp.sock" -D "$SECONDS_PER" -o "$RUN/b.prof" \
		--no-report >"$RUN/profile.out" 2>&1 &
	pid=$!
	sleep 1
	t0=$(proc_cpu_ticks "$pid")
	s0=$(date +%s.%N)
	sleep $((SECONDS_PER - 2))
	t1=$(proc_cpu_ticks "$pid")
	s1=$(date +%s.%N)
	wait "$pid"
	with=$(mean_ops "$from")
	cpu=$(awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v h="$TCK" \
		'BEGIN { printf "%.1f", (b - a) / h / (e - s) * 100 }')
	samples=$(sed -n 's/.*: \([0-9]*\) to_idle, \([0-9]*\) from_idle, \([0-9]*\) on_cpu.*/\1 \2 \3/p' "$RUN/profile.out" |
		awk -v d="$SECONDS_PER" '{ printf "%.0f", ($1 + $2 + $3) / d }')
	slow=$(awk -v a="$base" -v b="$with" 'BEGIN { printf "%.2f", (a - b) / a * 100 }')
	printf 'round %d: spin %s ops/s alone, %s with idlevm: slowdown %s%%; idlevm %s%% of a host core; %s samples/s\n' \
		"$r" "$base" "$with" "$slow" "$cpu" "$samples"
	echo "$slow $cpu $samples" >>"$RUN/rounds"
done
printf 'median of %d rounds of %d s: slowdown %s%%, idlevm host CPU %s%% of a core, %s samples/s\n' \
	"$ROUNDS" "$SECONDS_PER" "$(cut -d' ' -f1 "$RUN/rounds" | median)" \
	"$(cut -d' ' -f2 "$RUN/rounds" | median)" "$(cut -d' ' -f3 "$RUN/rounds" | median)"
