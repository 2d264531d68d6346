#!/bin/bash
# Benchmark: idlevm's own host CPU when one process profiles 1, 2 and 4
# guests at once (`idlevm profile --all-domains`, one thread, one wait).
#
#   BUILD=build tests/bench/profile_fleet.sh [SECONDS] [VCPUS] [COUNTS]
#
# Boots as many demo guests running lockstorm (VCPUS each, default 1; 512
# MiB) as the largest of COUNTS (default "1 2 4") as transient libvirt
# domains, then for each count N profiles the first N of them for SECONDS
# (default 30), and prints idlevm's CPU time: the whole process (getrusage:
# the libvirt client's threads included), the part spent in the guests'
# runs, and each guest's share as idlevm reports it.  The guests are
# destroyed at the end, also when it fails.  Under TCG the guests' speed,
# hence their idle transitions per second, moves with the host's load:
# read the samples per second next to the CPU figures.  On a shared
# machine that allows only two guests at a time: COUNTS="1 2".
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECS=${1:-30}
VCPUS=${2:-1}
COUNTS=${3:-1 2 4}
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
IVM_PROG=bench-fleet
. images/lib.sh
. tests/bench/lib_guests.sh
ivm_image_env
ivm_libvirt_ensure

PREFIX=idlevm-bench-fleet-$$
OUT=$(mktemp -d /tmp/idlevm-bench-fleet.XXXXXX)
trap 'bench_guests_destroy; rm -rf "$OUT"' EXIT

max=0
for n in $COUNTS; do
	[ "$n" -gt "$max" ] && max=$n
done
[ "$max" -ge 1 ] && [ "$max" -le 9 ] || ivm_die "COUNTS: from 1 to 9 guests"
bench_guests_boot "$PREFIX" "$VCPUS" 512 $(seq 1 "$max")
echo "$max guests ready ($VCPUS vCPU each, lockstorm); $SECS s per run; host $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-7s %-22s %-18s %-26s %s\n' guests "idlevm CPU (process)" "in guests' runs" "per guest (% of a core)" "samples/s per guest"
for n in $COUNTS; do
	log=$OUT/run-$n.log
	"$IDLEVM" profile --all-domains --match "$PREFIX-[1-$n]" -D "$SECS" \
		--output-dir "$OUT/$n" --no-pprof >"$log" 2>&1 ||
		ivm_die "idlevm failed: $(tail -n 5 "$log")"
	total=$(sed -n 's/^idlevm: [0-9]* guests over \([0-9.]*\) s: host CPU \([0-9.]*\) s (\([0-9.]*\)% of a core), \([0-9.]*\) s of it.*/\2 s (\3%)|\4 s/p' "$log")
	per=$(sed -n 's/^idlevm: [^:]*: host CPU [0-9.]* s over [0-9.]* s (\([0-9.]*\)% of a core).*/\1/p' "$log" | tr '\n' ' ')
	rate=$(sed -n 's/^idlevm: [^:]*: stopped after \([0-9.]*\) s[^:]*: \([0-9]*\) to_idle, \([0-9]*\) from_idle, \([0-9]*\) on_cpu.*/\1 \2 \3 \4/p' "$log" |
		awk '{ if ($1 > 0) printf "%.0f ", ($2 + $3 + $4) / $1 }')
	printf '%-7s %-22s %-18s %-26s %s\n' "$n" "${total%%|*}" "${total##*|}" "$per" "$rate"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: BUILD=$BUILD tests/bench/profile_fleet.sh $SECS $VCPUS \"$COUNTS\""
