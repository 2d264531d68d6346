# Ctrl-C during a profile: the file is finished, the report printed, exit 0.
prof=$IVM_RUNDIR/t70.prof
"$idlevm" profile --domain "$IVM_DOMAIN" -o "$prof" >"$IVM_RUNDIR/t70.out" 2>&1 &
pid=$!
sleep 4
kill -INT "$pid"
wait "$pid"
rc=$?
cat "$IVM_RUNDIR/t70.out"
[ "$rc" = 0 ] || fail "exit status $rc after SIGINT"
grep -q "interrupted" "$IVM_RUNDIR/t70.out" || fail "no interrupted end reason"
grep -q "== top to-idle stacks" "$IVM_RUNDIR/t70.out" || fail "no report printed"
# Complete: an end record and no damage (the report says so otherwise; it
# may also say where module symbols came from, which is no loss).
out=$("$idlevm" report "$prof" 2>&1 >/dev/null)
case $out in
*"no end record"* | *"damaged records"*) fail "the file is not complete: $out" ;;
esac
