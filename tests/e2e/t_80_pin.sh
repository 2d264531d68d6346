# idlevm profile --capture pin against --capture optimistic on the same
# lockstorm guest: pin discards a smaller fraction of the captures it can
# help with (targets read from their saved frame; a running target that
# switches out mid-read is lost either way), and the stacks it keeps pass
# t_60's blocking-path and ratio checks.
. tests/e2e/lib_profile.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

duration=${IVM_PROFILE_SECONDS:-15}
opt=$IVM_RUNDIR/t80-optimistic.prof
pin=$IVM_RUNDIR/t80-pin.prof

# discard_fraction OUTPUT: "DISCARDED CAPTURES FRACTION" from the closing
# line of idlevm profile: captures = samples kept + discarded.
discard_fraction() {
	echo "$1" | awk '/^idlevm: stopped after/ {
		line = $0
		sub(/.*\): /, "", line)
		split(line, a, /[^0-9]+/)
		kept = a[1] + a[2] + a[3]; d = a[4] + a[5]
		c = kept + d
		printf "%d %d %.4f\n", d, c, c ? d / c : 1
	}'
}

out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" \
	--capture optimistic -o "$opt" --no-report 2>&1) ||
	fail "optimistic profile failed: $out"
echo "$out"
# blocked_fraction OUTPUT: the same for targets read from their saved frame.
blocked_fraction() {
	echo "$1" | awk '/^idlevm: targets read from their saved frame:/ {
		split($0, a, /[^0-9]+/)
		kept = a[2]; d = a[3]; c = kept + d
		printf "%d %d %.5f\n", d, c, c ? d / c : 1
	}'
}

read -r od oc of <<<"$(discard_fraction "$out")"
read -r obd obc obf <<<"$(blocked_fraction "$out")"
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" \
	--capture pin -o "$pin" --no-report 2>&1) ||
	fail "pin profile failed: $out"
echo "$out"
echo "$out" | grep -q "capture pin," || fail "pin mode was not chosen: $out"
echo "$out" | grep -q "idlevm: pin: [1-9]" ||
	fail "no capture was pinned: $out"
echo "$out" | grep -q "warning" && fail "pin capture degraded: $out"

read -r pd pc pf <<<"$(discard_fraction "$out")"
read -r pbd pbc pbf <<<"$(blocked_fraction "$out")"
echo "discarded: optimistic $od of $oc captures ($of), pin $pd of $pc captures ($pf)"
echo "blocked targets discarded: optimistic $obd of $obc ($obf), pin $pbd of $pbc ($pbf)"
[ "$obc" -ge 100 ] && [ "$pbc" -ge 100 ] ||
	fail "too few captures of blocked targets: optimistic $obc, pin $pbc"
# Fewer, or so few (at most 5 in thousands) that the two cannot be ordered.
awk -v o="$obf" -v p="$pbf" -v n="$pbd" 'BEGIN { exit !(p < o || n <= 5) }' ||
	fail "pin discards $pbf of its blocked targets, optimistic $obf: not fewer"

# The stacks pin mode kept: t_60's known blocking paths and ratio.
folded=$("$idlevm" report -f folded -K to_idle "$pin") ||
	fail "idlevm report failed"
check_lockstorm_paths "$folded" pin || fail "pin mode: blocking paths or ratio off"
rm -f "$opt" "$pin"
