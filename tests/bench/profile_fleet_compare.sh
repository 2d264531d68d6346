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
# workers' samples, all rounds pooled) both ways, and judges each share:
# within 3 points, or 3 standard deviations of the difference when the
# counts are too small for that (tests/e2e/lib.sh LS_AWK_TOL); exits 1 when
# a share is outside.  Also each round's figures, and idlevm's host CPU
# both ways.  CAPTURE (default pin) is passed to --capture.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECS=${1:-60}
ROUNDS=${2:-4}
CAPTURE=${3:-pin}
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
IVM_BUILD=$(cd "$BUILD" && pwd)
IVM_PROG=bench-fleet-compare
. images/lib.sh
. tests/e2e/lib.sh
. tests/e2e/lib_profile.sh
. tests/bench/lib_guests.sh
ivm_image_env
ivm_libvirt_ensure

PREFIX=idlevm-bench-cmp-$$
OUT=$(mktemp -d /tmp/idlevm-bench-cmp.XXXXXX)
trap 'bench_guests_destroy; rm -rf "$OUT"' EXIT

bench_guests_boot "$PREFIX" 2 512 a b
echo "2 guests ready; $ROUNDS rounds of $SECS s, capture $CAPTURE; host $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
folded() { "$IDLEVM" report -f folded -K to_idle "$1" 2>/dev/null; }
# cpu LOG [NAME]: the host CPU seconds idlevm says it took for guest NAME
# (for the only guest without NAME).
cpu() { sed -n "s/^idlevm: ${2:+$2: }host CPU \\([0-9.]*\\) s over.*/\\1/p" "$1"; }
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
		f1=$(folded "$(ls "$OUT"/one-$r/"$PREFIX-$k"-[0-9]*.prof)")
		f2=$(folded "$OUT/$k-$r.prof")
		one[$k]="${one[$k]:-}$f1
"
		sep[$k]="${sep[$k]:-}$f2
"
		echo "round $r, guest $k: one run $(lockstorm_split "$f1") (host CPU $(cpu "$OUT/one-$r.log" "$PREFIX-$k") s); separate $(lockstorm_split "$f2") (host CPU $(cpu "$OUT/$k-$r.log") s)  [lock pipe sleep %, workers' samples]"
	done
	grep -h "guests over" "$OUT/one-$r.log"
done
status=0
for k in a b; do
	o=$(lockstorm_split "${one[$k]}")
	s=$(lockstorm_split "${sep[$k]}")
	echo "guest $k, all rounds: one run $o; separate $s  [lock pipe sleep %, workers' samples]"
	compare_splits "$o" "$s" 3 || status=1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: BUILD=$BUILD tests/bench/profile_fleet_compare.sh $SECS $ROUNDS $CAPTURE"
[ "$status" = 0 ] && echo "same split both ways (every share within its allowance)" ||
	echo "NOT the same split both ways (a share outside its allowance)"
exit "$status"
