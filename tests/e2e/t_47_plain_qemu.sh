# A guest under plain QEMU (no libvirt: --qmp), with its RAM in a shared
# memfd: idlevm maps guest RAM instead of reading it with system calls, and
# info, ps and stack work the same.  Boots a guest of its own.
run=$(mktemp -d /tmp/ivm-e2e-plain.XXXXXX)
trap '[ -f "$run/qemu.pid" ] && kill "$(cat "$run/qemu.pid")" 2>/dev/null; rm -rf "$run"' EXIT
BUILD=$IVM_BUILD images/run-guest --shared-memory --run-dir "$run" --wait >/dev/null ||
	fail "the plain QEMU guest did not boot"

out=$("$idlevm" info --qmp "$run/qmp.sock" 2>&1) || fail "idlevm info --qmp: $out"
echo "$out"
echo "$out" | grep -q "^guest memory: *mmap of shared guest RAM" ||
	fail "shared guest RAM was not mapped"
echo "$out" | grep -q "^kernel: *$IVM_KVER" || fail "wrong kernel: $out"

ps=$("$idlevm" ps --qmp "$run/qmp.sock" 2>&1) || fail "idlevm ps --qmp: $ps"
pid=$(echo "$ps" | awk '$3 == "lockstorm" { print $1; exit }')
[ -n "$pid" ] || fail "no lockstorm in: $ps"
# A worker preempted in its compute phase is runnable, not asleep, and
# has no consistent stack to read ("no consistent stack"): several calls,
# each worker counted once, until three have shown worker_main (a loaded
# host stretches the compute phase: as many calls as it takes, 30 at most).
seen=""
for ((try = 1; try <= 30; try++)); do
	out=$("$idlevm" stack --qmp "$run/qmp.sock" --pid "$pid" \
		--binary "$IVM_BUILD/guest/lockstorm-fp" 2>&1) ||
		fail "idlevm stack: $out"
	seen+=$(echo "$out" | awk '/^tid / { t = $2 } / worker_main\+/ { print t }')$'\n'
	n=$(echo "$seen" | sort -u | grep -c .)
	[ "$n" -ge 3 ] && break
done
echo "$n lockstorm threads with worker_main in their stack ($try calls)"
[ "$n" -ge 3 ] || fail "expected the workers' user stacks: $out"
