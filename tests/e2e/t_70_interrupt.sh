# Ctrl-C during a profile: the file is finished, the report printed, exit 0.
prof=$IVM_RUNDIR/t70.prof
"$idlevm" profile --domain "$IVM_DOMAIN" -o "$prof" >"$IVM_RUNDIR/t70.out" 2>&1 &
pid=$!
# Once it has samples to report (however long attaching takes here).
wait_for_samples "$prof" "$pid" ||
	fail "idlevm ended before any sample: $(cat "$IVM_RUNDIR/t70.out")"
kill -INT "$pid"
wait "$pid"
rc=$?
cat "$IVM_RUNDIR/t70.out"
[ "$rc" = 0 ] || fail "exit status $rc after SIGINT"
grep -q "interrupted" "$IVM_RUNDIR/t70.out" || fail "no interrupted end reason"
grep -q "== top to-idle stacks" "$IVM_RUNDIR/t70.out" || fail "no report printed"
# Complete: nothing damaged, skipped or cut short (report's other notes on
# stderr, such as where module symbols came from, are not damage).
out=$("$idlevm" report "$prof" 2>&1 >/dev/null)
echo "$out" | grep -E "intact records; skipped|has no end record" &&
	fail "the file is not complete: $out"
true
