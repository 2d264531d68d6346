# The guest shuts down in the middle of a profile: idlevm finishes the file,
# prints the report and exits cleanly.  Powers the shared guest off: last.
prof=$IVM_RUNDIR/t99.prof
"$idlevm" profile --domain "$IVM_DOMAIN" -D 120 -o "$prof" >"$IVM_RUNDIR/t99.out" 2>&1 &
pid=$!
wait_for_samples "$prof" "$pid" ||
	fail "idlevm ended before any sample: $(cat "$IVM_RUNDIR/t99.out")"
# The shell cannot answer a poweroff: guest_sh returns when the guest is
# gone (its socket closes), or after its timeout.  Not a short timeout:
# the guest kills the command at it, and a loaded host can take seconds
# to get the command through (a 5 s one once left the guest running).
guest_sh 'sync; poweroff -f' >/dev/null 2>&1
# idlevm must notice by itself; the bound is only a hang guard, in guest
# shell round trips (a loaded host slows QEMU's shutdown too).
limit=$(guest_sh_timeout)
end=$((SECONDS + limit))
while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
	sleep 0.5
done
if kill -0 "$pid" 2>/dev/null; then
	kill -KILL "$pid"
	fail "idlevm still running $limit s after the guest powered off"
fi
wait "$pid"
rc=$?
cat "$IVM_RUNDIR/t99.out"
[ "$rc" = 0 ] || fail "exit status $rc after the guest went away"
grep -qE "went away|shut down|not running any more|gone" "$IVM_RUNDIR/t99.out" ||
	fail "no shutdown end reason"
grep -q "== top to-idle stacks" "$IVM_RUNDIR/t99.out" || fail "no report printed"
# Complete: nothing damaged, skipped or cut short (report's other notes on
# stderr, such as where module symbols came from, are not damage).
out=$("$idlevm" report "$prof" 2>&1 >/dev/null)
echo "$out" | grep -E "intact records; skipped|has no end record" &&
	fail "the file is not complete: $out"
true
