# e2e-timeout: 400
# The in-guest helper killed and restarted under a continuous run with pin
# capture (`profile --domain --window --capture pin`): while it is dead,
# pins fail and the run goes on optimistic, said on stderr and counted
# (pin_failed, captures unpinned meanwhile), the windows whole; once the
# guest's supervisor has started it again, idlevm connects to it again
# (said, counted: pin_reconnects) and pins again, in the same boot's
# windows.
#
# The guest's supervisor (images/init's helper_loop) is held (SIGSTOP)
# while the helper is dead, so that it stays dead for a window; it is let
# go (SIGCONT) also when the test fails, and restarts the helper.
IVM_PROG=t96
. tests/e2e/lib_boots.sh
boots_need_lockstorm

dir=$IVM_RUNDIR/t96
rm -rf "$dir"
log=$IVM_RUNDIR/t96.log
pid=""
loop=""

cleanup() {
	local rc=$?
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$loop" ] && guest_sh "kill -CONT $loop" >/dev/null 2>&1
	[ "$rc" = 0 ] || { echo "---- idlevm profile's stderr ----"; cat "$log"; }
	true
}
trap cleanup EXIT
trap 'exit 143' TERM

helper=$(guest_sh 'cat /run/idlevm-helper.pid') || fail "no helper pid in the guest"
loop=$(guest_sh "awk '{ print \$4 }' /proc/$helper/stat") || fail "no supervisor of helper $helper"
[ -n "$loop" ] || fail "no supervisor of helper $helper"
"$idlevm" profile --domain "$IVM_DOMAIN" --window 6 --output-dir "$dir" \
	--no-pprof --capture pin --pin-policy always -D 300 >"$log" 2>&1 &
pid=$!
wait_windows 2
grep -q "capture pin," "$log" || skip_reason=$(grep "no pin capture" "$log")
[ -z "${skip_reason:-}" ] || fail "pin capture did not start: $skip_reason"

# The helper killed, its supervisor held.
guest_sh "kill -STOP $loop && kill -KILL $helper" >/dev/null ||
	fail "cannot kill the helper ($helper, supervisor $loop)"
wait_for_output "$log" "^idlevm: warning: pin capture off, optimistic until the helper answers again" "$pid" ||
	fail "no word of the helper's failure"
# A window ends whole without it.
wait_windows $(($(windows) + 2))
dead_last=$(ls "$dir"/*.prof | tail -n 2 | head -n 1)
guest_sh "kill -CONT $loop" >/dev/null || fail "cannot let the supervisor go"
loop=""
wait_for_output "$log" "^idlevm: pin capture back: the helper \(guest pid [0-9]+\) answers again" "$pid" ||
	fail "no word of the helper coming back"
wait_windows $(($(windows) + 2))
back_last=$(ls "$dir"/*.prof | tail -n 2 | head -n 1)
kill -INT "$pid"
wait "$pid" || fail "idlevm failed"
pid=""
grep -E "pin capture|^idlevm: pin:" "$log"

# The closing line counts both.
failed=$(sed -n 's/^idlevm: pin: .* \([0-9][0-9]*\) pin_failed (helper lost).*/\1/p' "$log")
back=$(sed -n 's/^idlevm: pin: .* \([0-9][0-9]*\) pin_reconnects (it answered again).*/\1/p' "$log")
[ "${failed:-0}" -ge 1 ] || fail "pin_failed ${failed:-?} after the helper was killed"
[ "${back:-0}" -ge 1 ] || fail "pin_reconnects ${back:-?} after the helper came back"

# Every window whole and of the one boot; the one taken while the helper
# was dead pinned nothing, the one after it came back pinned again.
for prof in "$dir"/*.prof; do
	check_window "$prof" || exit 1
	grep "pin capture:" "${prof%.prof}.txt"
done
pins() {
	sed -n 's/^  pin capture: \([0-9]*\) pinned, \([0-9]*\) held only.*/\1 \2/p' "${1%.prof}.txt" |
		awk '{ print $1 + $2 }'
}
assert_eq "$(pins "$dead_last")" 0 "pins in $(basename "$dead_last"), taken without the helper"
[ "$(pins "$back_last")" -gt 0 ] ||
	fail "no pin in $(basename "$back_last"), taken after the helper came back"
# The helper is back in the guest, under its supervisor.
guest_sh 'kill -0 $(cat /run/idlevm-helper.pid)' >/dev/null || fail "no helper in the guest at the end"
