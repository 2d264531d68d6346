#!/bin/bash
# Benchmark: what idlevm's profile costs the host, and where it goes.
#
#   [GUEST=web01] [SHARED=1] BUILD=build tests/bench/profile_cost.sh [SECONDS] [RUNS]
#
# Boots one demo guest running lockstorm (2 vCPUs, 512 MiB) as a transient
# libvirt domain, profiles it RUNS times (default 5) for SECONDS (default
# 20) at the defaults, and prints per run and as the median of the runs:
# samples recorded per second, idlevm's host CPU as a share of a core and
# per recorded sample, the guest memory reads per recorded sample (system
# calls with private RAM: 0 in the rows of an idlevm older than the
# count), and the loop's time by stage (stage_clock.h: host
# events, looks at the guest, the scheduler's stamps, captures, writing,
# the rest) from the closing lines.  The guest is destroyed at the end,
# also when it fails.  Under TCG the guest's speed, hence its idle
# transitions, moves with the host's load: read samples/s beside the CPU.
#
# BUDGET=PCT runs with --cpu-budget PCT and prints the share of the run
# watched beside idlevm's CPU, which the budget should hold within 10%.
#
# GUEST=web01 profiles web01 (make web01: Debian 12 with nginx, php-fpm,
# redis, postgres) under its own paced load instead, 2 vCPUs, 1 GiB: the
# service a user would watch, whose transitions are fewer and whose
# stacks reach through many more user objects than lockstorm's.
#
# SHARED=1 backs the guest's RAM with a shared memfd (make-domain-xml
# --shared-memory), which idlevm maps and reads without system calls,
# instead of QEMU's private RAM read with process_vm_readv; the bench
# checks with `idlevm info` that the guest's memory is read the way asked.
#
# IDLEVM_OTHER=PATH (another idlevm build, e.g. main's) runs it beside the
# first in each run, on the same guest, first in every other run, and
# prints both medians: the host's drift (a few % between runs of one build
# here) and the guest's (its rate still rising minutes after boot) then
# fall on both alike.  Rows and medians name the build: "a" is BUILD's,
# "b" PATH's.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECS=${1:-20}
RUNS=${2:-5}
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
OTHER=${IDLEVM_OTHER:-}
[ -z "$OTHER" ] || [ -x "$OTHER" ] || { echo "IDLEVM_OTHER=$OTHER: not an executable" >&2; exit 2; }
IVM_PROG=bench-cost
. images/lib.sh
. tests/bench/lib_guests.sh
GUEST=${GUEST:-demo}
case $GUEST in
demo|web01) ;;
*) echo "GUEST=$GUEST: demo or web01" >&2; exit 2 ;;
esac
SHARED=${SHARED:-0}
case $SHARED in
0) want="process_vm_readv" ;;
1) want="mmap of shared guest RAM" ;;
*) echo "SHARED=$SHARED: 0 or 1" >&2; exit 2 ;;
esac
export IVM_SHARED_MEMORY=$SHARED
ivm_image_env
[ "$GUEST" = demo ] || ivm_web01_env
ivm_libvirt_ensure

PREFIX=idlevm-bench-cost-$$
OUT=$(mktemp -d /tmp/idlevm-bench-cost.XXXXXX)
trap 'bench_guests_destroy; rm -rf "$OUT"' EXIT
if [ "$GUEST" = web01 ]; then
	bench_web01_boot "$PREFIX-1"
else
	bench_guests_boot "$PREFIX" 2 512 1
fi
gmem=$("$IDLEVM" info --domain "$PREFIX-1" 2>&1 | sed -n 's/^guest memory: *//p')
[ "$gmem" = "$want" ] || ivm_die "guest memory read by '$gmem', not '$want'"
echo "guest ready ($GUEST, 2 vCPUs, memory read by $gmem); $SECS s per run, $RUNS runs; host $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-4s %10s %8s %9s %7s  %s\n' run samples/s "% core" "us/sample" "reads" "time by stage (%)"
builds=a
[ -z "$OTHER" ] || builds="a b"
for i in $(seq 1 "$RUNS"); do
	order=$builds
	[ -z "$OTHER" ] || [ $((i % 2)) = 1 ] || order="b a"
	for b in $order; do
		bin=$IDLEVM
		[ "$b" = a ] || bin=$OTHER
		log=$OUT/run-$i$b.log
		"$bin" profile --domain "$PREFIX-1" -D "$SECS" -o "$OUT/p.prof" \
			--no-report ${BUDGET:+--cpu-budget "$BUDGET"} >"$log" 2>&1 ||
			ivm_die "idlevm ($bin) failed: $(tail -n 5 "$log")"
		run=$i
		[ -z "$OTHER" ] || run=$i$b
		awk -v run="$run" '
		/stopped after/ {
			for (k = 1; k <= NF; k++) {
				if ($k == "after") secs = $(k + 1)
				if ($(k + 1) ~ /^(to_idle|from_idle|on_cpu),?$/) n += $k
			}
		}
		/^idlevm: host CPU/ { sub(/.*\(/, ""); core = $1 + 0 }
		/^idlevm: time by stage:/ {
			line = $0; sub(/.*time by stage: /, "", line); split(line, a, "; ")
			stages = a[1]; us = a[2] + 0
		}
		/guest memory reads per sample recorded:/ { rd = $0; sub(/.*recorded: /, "", rd); reads = rd + 0 }
		/CPU budget .* watched/ { w = $0; sub(/.* s \(/, "", w); watched = w + 0 }
		END { printf "%-4s %10.0f %8.1f %9.1f %7.1f  %s%s\n", run, n / secs, core, us, reads, stages,
			watched ? sprintf(" watched %.1f%%", watched) : "" }' "$log" |
			tee -a "$OUT/rows-$b"
	done
done
# Medians, column by column, and of each stage; per build.
for b in $builds; do
	name=
	[ -z "$OTHER" ] || { [ "$b" = a ] && name="a ($IDLEVM) " || name="b ($OTHER) "; }
	awk -v name="$name" '
	function median(v, n,   i, j, t) {
		for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	{
		r++; s[r] = $2; c[r] = $3; u[r] = $4; g[r] = $5
		for (k = 6; k < NF; k += 2) { nm[k] = $k; v = $(k + 1); sub(/%/, "", v); st[k, r] = v + 0 }
		last = NF
	}
	END {
		printf "%smedian: %.0f samples/s, %.1f%% of a core, %.1f us of host CPU and %.1f guest memory reads per sample; by stage:",
			name, median(s, r), median(c, r), median(u, r), median(g, r)
		for (k = 6; k < last; k += 2) {
			for (i = 1; i <= r; i++) x[i] = st[k, i]
			printf " %s %.0f%%", nm[k], median(x, r)
		}
		printf "\n"
	}' "$OUT/rows-$b"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: ${GUEST:+GUEST=$GUEST }$([ "$SHARED" = 1 ] && echo "SHARED=1 ")${BUDGET:+BUDGET=$BUDGET }${OTHER:+IDLEVM_OTHER=$OTHER }BUILD=$BUILD tests/bench/profile_cost.sh $SECS $RUNS"
