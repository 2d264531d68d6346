#!/bin/bash
# Benchmark: what attaching idlevm costs the guest it watches, measured
# against a twin guest so that the host's own drift cancels out.
#
#   BUILD=build tests/bench/profile_overhead_pair.sh [SECONDS] [ROUNDS]
#
# IDLEVM_ARGS adds options to `idlevm profile` (e.g. "-F 0" to leave out
# the on-CPU samples and their register reads).
# Under TCG on a virtual machine, spin's rate alone swings by 15-25%
# between windows (the host's speed drifts), far more than the 2% to be
# told apart.  Two identical guests (1 vCPU each, `spin`) feel the same
# drift; idlevm profiles A in one window and B in the next, ROUNDS times
# each (default 8), SECONDS per window (default 10).  With r = opsA/opsB,
# slowdown = 1 - sqrt(median r while on A / median r while on B): the
# drift is in both guests and drops out of r, the guests' own difference
# drops out of the quotient.  It measures what idlevm does to the guest it
# watches (QMP, guest memory reads, pinning); its own host CPU (also
# printed) costs the guest only on a host without a spare core, as this
# 2-core one is with two busy guests.
#
# Where the host's cores drift apart (measured on one of these machines:
# A/B swinging 0.72-1.49 from one window to the next with the guests free
# to move), the twin guests only feel the same drift on the same core.
# So with IVM_BENCH_PIN=1 (the default on a host with 2 or more cores)
# both QEMUs, every thread, share host CPU 0 and idlevm runs on CPU 1;
# IVM_BENCH_PIN=0 leaves all three to the host's scheduler, where idlevm's
# own CPU time competes with the guests too.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECONDS_PER=${1:-10}
ROUNDS=${2:-8}
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
TCK=$(getconf CLK_TCK)
A=$(mktemp -d /tmp/idlevm-bench-a.XXXXXX)
B=$(mktemp -d /tmp/idlevm-bench-b.XXXXXX)
cleanup() {
	local d
	for d in "$A" "$B"; do
		[ -f "$d/qemu.pid" ] && kill "$(cat "$d/qemu.pid")" 2>/dev/null
		rm -rf "$d"
	done
	return 0
}
trap cleanup EXIT

for d in "$A" "$B"; do
	BUILD=$BUILD images/run-guest --workload spin --vcpus 1 --run-dir "$d" \
		--wait >/dev/null
done
PIN=${IVM_BENCH_PIN:-$([ "$(nproc)" -ge 2 ] && echo 1 || echo 0)}
PIN_IDLEVM=()
if [ "$PIN" = 1 ]; then
	for d in "$A" "$B"; do
		taskset -a -p -c 0 "$(cat "$d/qemu.pid")" >/dev/null
	done
	PIN_IDLEVM=(taskset -c 1)
	echo "guests on host CPU 0, idlevm on CPU 1 (IVM_BENCH_PIN=0: unpinned)"
else
	echo "guests and idlevm unpinned"
fi

lines() { wc -l <"$1/console.log"; }
# mean_ops RUN FROM: mean of spin's ops_per_sec lines after line FROM,
# skipping the first (a partial second).
mean_ops() {
	tail -n +"$2" "$1/console.log" | tr -d '\r' |
		awk -F'ops_per_sec=' '/^spin: t=/ { n++; if (n > 1) { s += $2; k++ } }
			END { if (k) printf "%.0f", s / k; else print 0 }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# samples_per_s FILE: kept samples per second from idlevm's closing line.
samples_per_s() {
	sed -n 's/.*stopped after \([0-9.]*\) s[^:]*: \([0-9]*\) to_idle, \([0-9]*\) from_idle, \([0-9]*\) on_cpu.*/\1 \2 \3 \4/p' "$1" |
		awk '{ if ($1 > 0) printf "%.1f", ($2 + $3 + $4) / $1; else print 0 }'
}

: >"$A/ra"
: >"$A/rb"
: >"$A/cpu"
: >"$A/sps"
for r in $(seq 1 "$ROUNDS"); do
	for on in A B; do
		if [ "$on" = A ]; then target=$A; else target=$B; fi
		fa=$(($(lines "$A") + 1))
		fb=$(($(lines "$B") + 1))
		"${PIN_IDLEVM[@]}" "$IDLEVM" profile --qmp "$target/qmp.sock" -D "$SECONDS_PER" \
			-o "$target/b.prof" --no-report ${IDLEVM_ARGS:-} \
			>"$target/profile.out" 2>&1 &
		pid=$!
		sleep 1
		t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
		s0=$(date +%s.%N)
		sleep $((SECONDS_PER - 2))
		t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
		s1=$(date +%s.%N)
		wait "$pid"
		oa=$(mean_ops "$A" "$fa")
		ob=$(mean_ops "$B" "$fb")
		ratio=$(awk -v a="$oa" -v b="$ob" 'BEGIN { printf "%.5f", a / b }')
		cpu=$(awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v h="$TCK" \
			'BEGIN { printf "%.1f", (b - a) / h / (e - s) * 100 }')
		echo "$ratio" >>"$A/r$(echo "$on" | tr AB ab)"
		echo "$cpu" >>"$A/cpu"
		sps=$(samples_per_s "$target/profile.out")
		[ -n "$sps" ] || { echo "idlevm profile failed:"; cat "$target/profile.out"; exit 1; }
		echo "$sps" >>"$A/sps"
		printf 'round %d, idlevm on %s: A %s ops/s, B %s ops/s, A/B %s; idlevm %s%% of a host core, %s samples/s\n' \
			"$r" "$on" "$oa" "$ob" "$ratio" "$cpu" "$sps"
	done
done
ra=$(median <"$A/ra")
rb=$(median <"$A/rb")
printf 'median A/B with idlevm on A %s, on B %s: slowdown of the watched guest %s%%; idlevm %s%% of a host core, %s samples/s\n' \
	"$ra" "$rb" \
	"$(awk -v a="$ra" -v b="$rb" 'BEGIN { printf "%.2f", (1 - sqrt(a / b)) * 100 }')" \
	"$(median <"$A/cpu")" "$(median <"$A/sps")"
