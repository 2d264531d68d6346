#!/bin/bash
# Benchmark: the continuous agent over hours (issue 33's soak).
#
#   BUILD=build tests/bench/soak.sh [MINUTES] [WINDOW_SECONDS]
#
# Boots web01 (make web01) under its paced load and a lockstorm demo guest
# as transient domains, and runs one `idlevm profile --all-domains --match
# PREFIX-* --window WINDOW_SECONDS` (default 60: the agent's setting, its
# default --cpu-budget 1 included) for MINUTES (default 120).  Every
# 60 s it prints idlevm's RSS (and its anonymous and file-backed parts,
# /proc/PID/status), open file descriptors, threads, child processes
# (the windows' pprof reports), the host's tracefs instances and the
# windows written so far; at the end, what changed after the
# first 10 minutes (RSS, descriptors and threads should stay within 5%),
# and it checks every window: whole (its END record), with its pprof, no
# tracefs instance or child left.  Exits 1 when a check fails.  Both
# guests are destroyed at the end, also when it fails.
#
# IVM_SOAK_NICE=1 runs both guests' QEMU threads at nice 19, so that
# hours of soak can share the host with other work: what the soak judges
# (memory, descriptors, threads, whole windows) does not need the guests
# fast, and the other work keeps the CPU it would have had.  idlevm itself
# keeps its priority.
#
# IVM_SOAK_KEEP=DIR keeps, in DIR, idlevm's log and its /proc/PID/smaps at
# minute 10 and at the last row: which mappings grew.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
MINUTES=${1:-120}
WINDOW=${2:-60}
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
IVM_PROG=soak
. images/lib.sh
. tests/bench/lib_guests.sh
ivm_image_env
ivm_web01_env
ivm_libvirt_ensure

PREFIX=idlevm-soak-$$
OUT=$(mktemp -d /tmp/idlevm-soak.XXXXXX)
pid=
finish() {
	[ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	bench_guests_destroy
	if [ -n "${IVM_SOAK_KEEP:-}" ]; then
		mkdir -p "$IVM_SOAK_KEEP"
		cp "$OUT"/idlevm.log "$OUT"/smaps.* "$OUT"/rows "$IVM_SOAK_KEEP"/ 2>/dev/null || true
	fi
	rm -rf "$OUT"
}
trap finish EXIT
bench_web01_boot "$PREFIX-web01"
bench_guests_boot "$PREFIX" 2 512 demo
if [ "${IVM_SOAK_NICE:-0}" = 1 ]; then
	for g in "${BENCH_GUESTS[@]}"; do
		q=$(ivm_domain_qemu_pid "$g")
		[ -n "$q" ] && renice -n 19 -p $(ls "/proc/$q/task") >/dev/null
	done
fi
# The soak's own idlevm's instances (idlevm-PID, idlevm-PID-N): other
# idlevm runs on the host (e2e tests beside a niced soak) have theirs.
instances() {
	ls /sys/kernel/tracing/instances 2>/dev/null | grep -cE "^idlevm-$pid(-|\$)" || true
}
echo "soak: web01 and demo up; $MINUTES min, windows of $WINDOW s; host $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$IDLEVM" profile --all-domains --match "$PREFIX-*" --window "$WINDOW" \
	--output-dir "$OUT/windows" -D $((MINUTES * 60)) >"$OUT/idlevm.log" 2>&1 &
pid=$!
printf '%5s %9s %9s %9s %5s %7s %8s %9s %7s %8s\n' min "rss KiB" "anon KiB" "file KiB" \
	fds threads children instances windows "cpu s"
end=$((SECONDS + MINUTES * 60))
# Rows while the run is under way, not as it ends: the last one a minute
# or more before its end, when it has not begun to close its windows.
while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt $((end - 120)) ]; do
	sleep 60
	kill -0 "$pid" 2>/dev/null || break
	read -r rss anon file <<<"$(awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 }
		/^RssFile:/ { f = $2 } /^RssShmem:/ { f += $2 } END { print r, a, f }' "/proc/$pid/status")"
	thr=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")
	fds=$(ls "/proc/$pid/fd" | wc -l)
	kids=$(pgrep -c -P "$pid" || true)
	cpu=$(awk '{ printf "%.1f", ($14 + $15) / 100 }' "/proc/$pid/stat")
	wins=$(ls "$OUT/windows" 2>/dev/null | grep -c '\.prof$' || true)
	min=$(((SECONDS - end + MINUTES * 60) / 60))
	printf '%5d %9d %9d %9d %5d %7d %8d %9d %7d %8s\n' "$min" "$rss" "$anon" "$file" \
		"$fds" "$thr" "$kids" "$(instances)" "$wins" "$cpu" | tee -a "$OUT/rows"
	if [ -n "${IVM_SOAK_KEEP:-}" ]; then
		[ "$min" -ge 10 ] && [ ! -e "$OUT/smaps.10" ] && { cp "/proc/$pid/smaps" "$OUT/smaps.10" 2>/dev/null || true; }
		cp "/proc/$pid/smaps" "$OUT/smaps.last" 2>/dev/null || true
	fi
done
wait "$pid" || ivm_die "idlevm failed: $(tail -n 5 "$OUT/idlevm.log")"
pid=
tail -n 4 "$OUT/idlevm.log"
bad=0
awk '$1 >= 10 { if (!n++) { r = $2; a = $3; fb = $4; f = $5; t = $6 }
		lr = $2; la = $3; lfb = $4; lf = $5; lt = $6 }
	END { if (!n) { print "soak: shorter than 10 minutes: no drift to judge"; exit }
	      printf "after the first 10 minutes: RSS %d -> %d KiB (%+.1f%%: anonymous %d -> %d, file-backed %d -> %d), fds %d -> %d, threads %d -> %d\n",
		r, lr, (lr - r) * 100 / r, a, la, fb, lfb, f, lf, t, lt
	      exit !(lr <= r * 1.05 && lf <= f * 1.05 + 1 && lt <= t * 1.05) }' "$OUT/rows" ||
	{ echo "soak: FAIL: grew by more than 5% after the first 10 minutes"; bad=1; }
n=0
for prof in "$OUT"/windows/*.prof; do
	n=$((n + 1))
	"$IDLEVM" report -n 1 "$prof" >/dev/null 2>"$OUT/err" || { echo "soak: FAIL: report of $prof"; bad=1; }
	grep -q "cut short\|skipped" "$OUT/err" && { echo "soak: FAIL: $prof not whole"; bad=1; }
	[ -s "${prof%.prof}.pb.gz" ] || { echo "soak: FAIL: no pprof for $prof"; bad=1; }
done
echo "soak: $n windows checked; tracefs instances of its idlevm left: $(instances); load $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$(instances)" = 0 ] || { echo "soak: FAIL: tracefs instances left behind"; bad=1; }
echo "command: BUILD=$BUILD tests/bench/soak.sh $MINUTES $WINDOW"
exit $bad
