# Shared by the benches that measure what idlevm costs a guest running the
# `spin` workload (profile_overhead.sh, pin_vs_stop.sh).  Source it after
# cd to the repository root with BUILD set; it boots the guest under plain
# QEMU in RUN (a fresh directory under /tmp) and removes both on exit.
#
# Provides: RUN, CONSOLE, IDLEVM, TCK, console_lines, mean_ops FROM_LINE,
# median (stdin), proc_cpu_ticks PID.
IDLEVM=$(cd "$BUILD" && pwd)/idlevm
RUN=$(mktemp -d /tmp/idlevm-bench.XXXXXX)
trap '[ -f "$RUN/qemu.pid" ] && kill "$(cat "$RUN/qemu.pid")" 2>/dev/null; rm -rf "$RUN"' EXIT

BUILD=$BUILD images/run-guest --workload spin --run-dir "$RUN" --wait >/dev/null
CONSOLE=$RUN/console.log
TCK=$(getconf CLK_TCK)

console_lines() { wc -l <"$CONSOLE"; }

# mean_ops FROM_LINE: mean of spin's ops_per_sec lines after line FROM_LINE,
# skipping the first (a partial second).
mean_ops() {
	tail -n +"$1" "$CONSOLE" | tr -d '\r' |
		awk -F'ops_per_sec=' '/^spin: t=/ { n++; if (n > 1) { s += $2; k++ } }
			END { if (k) printf "%.0f", s / k; else print 0 }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# utime + stime of PID, in clock ticks.
proc_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
