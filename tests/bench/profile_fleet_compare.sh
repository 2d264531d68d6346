#!/bin/bash
# Measurement: do two guests profiled in one run (one idlevm, one loop) give
# the same per-guest results as two separate runs?
#
#   BUILD=build tests/bench/profile_fleet_compare.sh [SECONDS] [ROUNDS] [CAPTURE]
#
# Boots two demo guests running lockstorm (2 vCPUs each) as transient
# libvirt domains, then ROUNDS times (default 4): one run of both for
# SECONDS (default 60), then one run of each at the same time, in two
# processes.  Interleaving puts the host's drift (under TCG the guests'
# speed moves with the host's load) on both sides alike.  Prints each
# guest's to-idle split between lockstorm's three blocking paths (its
# workers' samples, all rounds pooled) both ways, the difference per share
# and its standard error.  CAPTURE (default pin) is passed to --capture.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECS=${1:-60}
ROUNDS=${2:-4}
CAPTURE=${3:-pin}
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
IVM_PROG=bench-fleet-compare
. images/lib.sh
. tests/e2e/lib_profile.sh
ivm_image_env
ivm_libvirt_ensure

PREFIX=idlevm-bench-cmp-$$
RUNS=()
OUT=$(mktemp -d /tmp/idlevm-bench-cmp.XXXXXX)
cleanup() {
	local k
	for k in a b; do
		ivm_domain_destroy "$PREFIX-$k"
	done
	for k in "${RUNS[@]}"; do
		rm -rf "$k"
	done
	rm -rf "$OUT"
	return 0
}
trap cleanup EXIT

for k in a b; do
	d=$(ivm_rundir_create idlevm-bench-cmp)
	RUNS+=("$d")
	ivm_domain_create "$PREFIX-$k" lockstorm "$d" 2 512
done
i=0
for k in a b; do
	ivm_wait_ready "${RUNS[$i]}/console.log" 300 \
		"$(ivm_domain_qemu_pid "$PREFIX-$k")" >/dev/null ||
		ivm_die "guest $k did not boot"
	i=$((i + 1))
done
echo "2 guests ready; $ROUNDS rounds of $SECS s, capture $CAPTURE; host $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A one sep
for r in $(seq 1 "$ROUNDS"); do
	"$IDLEVM" profile --domain "$PREFIX-a" --domain "$PREFIX-b" -D "$SECS" \
		--capture "$CAPTURE" --output-dir "$OUT/one-$r" --no-pprof \
		>"$OUT/one-$r.log" 2>&1 || ivm_die "one run failed: $(tail -n 3 "$OUT/one-$r.log")"
	for k in a b; do
		"$IDLEVM" profile --domain "$PREFIX-$k" -D "$SECS" --capture "$CAPTURE" \
			-o "$OUT/$k-$r.prof" --no-report >"$OUT/$k-$r.log" 2>&1 &
	done
	wait
	for k in a b; do
		one[$k]="${one[$k]:-}$("$IDLEVM" report -f folded -K to_idle "$(ls "$OUT"/one-$r/"$PREFIX-$k"-[0-9]*.prof)" 2>/dev/null)
"
		sep[$k]="${sep[$k]:-}$("$IDLEVM" report -f folded -K to_idle "$OUT/$k-$r.prof" 2>/dev/null)
"
	done
	echo "round $r done"
done
split() {
	echo "$1" | awk '
	$0 !~ /;ls-worker/ { next }
	{ n = $NF; w += n }
	/futex_wait/ { lock += n } /pipe_read/ { pipe += n } /nanosleep/ { sleep += n }
	END { if (w) printf "%.2f %.2f %.2f %d\n", lock * 100 / w, pipe * 100 / w, sleep * 100 / w, w }'
}
for k in a b; do
	o=$(split "${one[$k]}")
	s=$(split "${sep[$k]}")
	echo "guest $k: one run (lock pipe sleep %, workers' samples): $o; separate: $s"
	echo "$o $s" | awk '{
		for (i = 1; i <= 3; i++) {
			p = ($i + $(i + 4)) / 200
			se = sqrt(p * (1 - p) * (1 / $4 + 1 / $8)) * 100
			d = $i - $(i + 4); if (d < 0) d = -d
			printf "  %s: differs by %.2f points (standard error %.2f)\n",
				i == 1 ? "wait_for_lock" : i == 2 ? "read_request" : "throttle", d, se
		}}'
done
echo "command: BUILD=$BUILD tests/bench/profile_fleet_compare.sh $SECS $ROUNDS $CAPTURE"
