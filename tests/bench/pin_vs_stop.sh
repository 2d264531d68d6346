#!/bin/bash
# Benchmark: what `--capture pin` costs the guest against `--capture stop`
# (QMP stop/cont around every read), at the same sample rate.
#
#   BUILD=build tests/bench/pin_vs_stop.sh [SECONDS] [ROUNDS] [HZ]
#
# Boots the demo guest under plain QEMU running `spin` (lib_spin.sh), then
# ROUNDS times (default 3) measures spin's ops/s for SECONDS (default 15)
# each: alone, under idlevm profile --capture pin, under --capture stop
# (and, with PIN_ALWAYS=1, under --capture pin --pin-policy always).  All
# profiles sample at -F HZ (default 99) and every idle transition.  Prints
# per round each mode's slowdown against that round's run alone, samples/s
# and pins; then the median slowdowns and the ratio pin/stop of the medians.
# The host is shared: single runs are noisy, hence the rounds.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
SECONDS_PER=${1:-15}
ROUNDS=${2:-3}
HZ=${3:-99}
MODES="pin stop"
[ "${PIN_ALWAYS:-0}" = 1 ] && MODES="pin always stop"
. tests/bench/lib_spin.sh

alone() {
	local from=$(($(console_lines) + 1))

	sleep "$SECONDS_PER"
	mean_ops "$from"
}

# with MODE: spin's ops/s during an idlevm profile in MODE; the profile's
# closing lines go to $RUN/MODE.out.
with() {
	local from=$(($(console_lines) + 1)) args

	case $1 in
	pin) args="--capture pin" ;;
	always) args="--capture pin --pin-policy always" ;;
	stop) args="--capture stop" ;;
	esac
	# shellcheck disable=SC2086
	"$IDLEVM" profile --qmp "$RUN/qmp.sock" -D "$SECONDS_PER" -F "$HZ" \
		-o "$RUN/$1.prof" --no-report $args >"$RUN/$1.out" 2>&1
	case $1 in
	pin | always)
		grep -q 'capture pin,' "$RUN/$1.out" || {
			echo "pin_vs_stop: pin mode not available:" >&2
			cat "$RUN/$1.out" >&2
			exit 1
		}
		;;
	esac
	mean_ops "$from"
}

samples_per_s() {
	sed -n 's/.*: \([0-9]*\) to_idle, \([0-9]*\) from_idle, \([0-9]*\) on_cpu.*/\1 \2 \3/p' "$RUN/$1.out" |
		awk -v d="$SECONDS_PER" '{ printf "%.1f", ($1 + $2 + $3) / d }'
}

pins() {
	local n

	n=$(sed -n 's/^idlevm: pin: \([0-9]*\) pinned.*/\1/p' "$RUN/$1.out")
	echo "${n:--}"
}

slowdown() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a - b) / a * 100 }'; }

for r in $(seq 1 "$ROUNDS"); do
	base=$(alone)
	line="round $r: alone $base ops/s"
	for m in $MODES; do
		ops=$(with "$m")
		s=$(slowdown "$base" "$ops")
		echo "$s" >>"$RUN/slow.$m"
		line="$line; $m $ops ops/s, slowdown $s%, $(samples_per_s "$m") samples/s, $(pins "$m") pins"
	done
	echo "$line"
done
summary="median of $ROUNDS rounds of $SECONDS_PER s at $HZ Hz:"
for m in $MODES; do
	eval "med_$m=$(median <"$RUN/slow.$m")"
	summary="$summary $m slowdown $(eval echo "\$med_$m")%"
done
echo "$summary"
# shellcheck disable=SC2154
awk -v p="$med_pin" -v s="$med_stop" 'BEGIN {
	if (s > 0) printf "slowdown ratio pin/stop: %.2f\n", p / s
	else print "stop caused no measurable slowdown: no ratio"
}'
