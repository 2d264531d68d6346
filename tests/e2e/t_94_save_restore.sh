# e2e-timeout: 400
# A guest saved to a file and restored under a continuous run (`profile
# --domain --window`): `virsh save` ends the guest's QEMU (libvirt's
# STOPPED event, detail SAVED), so the window ends whole, its end_reason
# says the guest was saved; `virsh restore` starts another QEMU with the
# same boot, and the run goes on in a new window that names the same
# kernel and kaslr_offset and says what came before (after).
#
# The shared guest is saved and restored as it is: the same boot, its
# workload and helper go on (its QEMU is another), also when the test
# fails.
IVM_PROG=t94
. tests/e2e/lib_boots.sh
boots_need_lockstorm

dir=$IVM_RUNDIR/t94
rm -rf "$dir"
log=$IVM_RUNDIR/t94.log
save=$IVM_RUNDIR/t94.save
pid=""
vpid=""
held=""

cleanup() {
	local rc=$?
	[ -n "$held" ] && kill -CONT "$held"
	[ -n "$vpid" ] && wait "$vpid" 2>/dev/null
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	# Never leave the guest saved away.
	[ -f "$save" ] && ! ivm_virsh domid "$IVM_DOMAIN" >/dev/null 2>&1 &&
		ivm_virsh restore "$save" >/dev/null
	rm -f "$save"
	[ "$rc" = 0 ] || { echo "---- idlevm profile's stderr ----"; cat "$log"; }
	true
}
trap cleanup EXIT
trap 'exit 143' TERM

k1=$(kaslr)
"$idlevm" profile --domain "$IVM_DOMAIN" --window 6 --output-dir "$dir" \
	--no-pprof -D 300 >"$log" 2>&1 &
pid=$!
wait_windows 2
# libvirt says why QEMU exited only once it has cleaned up after it (its
# STOPPED event), seconds later on a loaded host: CI's run looked at the
# kernel meanwhile and took the QEMU gone for a changed kernel.  libvirtd
# is held for 3 s as soon as QEMU is gone, so the run always meets that.
qpid=$(cat "/run/libvirt/qemu/$IVM_DOMAIN.pid" 2>/dev/null)
lpid=$(cat /run/libvirtd.pid 2>/dev/null)
[ "$(cat "/proc/$lpid/comm" 2>/dev/null)" = libvirtd ] || lpid=""
ivm_virsh save "$IVM_DOMAIN" "$save" >/dev/null &
vpid=$!
if [ -n "$qpid" ] && [ -n "$lpid" ]; then
	while kill -0 "$qpid" 2>/dev/null && kill -0 "$vpid" 2>/dev/null; do
		sleep 0.01
	done
	kill -0 "$qpid" 2>/dev/null && fail "virsh save ended, QEMU did not"
	held=$lpid
	kill -STOP "$lpid"
	echo "libvirtd ($lpid) held for 3 s from QEMU's exit"
	sleep 3
	kill -CONT "$lpid"
	held=""
else
	echo "libvirtd not held: no pid of QEMU ($qpid) or libvirtd ($lpid)"
fi
wait "$vpid" || fail "virsh save failed"
vpid=""
# The window's end, whichever reason it names: a save taken for QEMU
# gone fails here, not at -D's end.
wait_for_output "$log" "^idlevm: the guest (was saved to a file|went away).*: window .* ended, whole" "$pid" ||
	fail "no word of the window's end after the save"
grep -q "^idlevm: the guest was saved to a file .*: window .* ended, whole" "$log" ||
	fail "no word of the save: $(grep "ended, whole" "$log")"
ivm_virsh restore "$save" >/dev/null || fail "virsh restore failed"
rm -f "$save"
wait_back 1
k2=$(kaslr)
assert_eq "$k2" "$k1" "kaslr_offset after the restore (the same boot)"
kill -INT "$pid"
wait "$pid" || fail "idlevm failed"
pid=""
grep -E "saved|ended, whole|is back|waiting for" "$log"
grep -q "^idlevm: the guest was saved to a file .*ended, whole; waiting for the guest to run here again" "$log" ||
	fail "the save's line does not say idlevm waits for the guest to run again"
grep "following the guest to its next boot" "$log" && fail "a save taken for a reboot"

last=""
saw_after=0
for prof in "$dir"/*.prof; do
	name=$(basename "$prof" .prof)
	check=$(check_window "$prof") || exit 1
	txt=$dir/$name.txt
	after=$(window_meta after "$txt")
	assert_eq "$(window_meta kernel "$txt") $(window_meta kaslr_offset "$txt")" \
		"$IVM_KVER $k1" "$name's kernel and kaslr_offset"
	if [ -n "$after" ]; then
		saw_after=1
		echo "$after" | grep -q "^the guest was saved to a file.*the window before: $last.prof" ||
			fail "$name, first after the restore, does not say what came before: $after"
		window_meta end_reason "$dir/$last.txt" | grep -q "^the guest was saved to a file" ||
			fail "$last, last before the save, says no end_reason: $(window_meta end_reason "$dir/$last.txt")"
	fi
	echo "$name: ${check#*: }${after:+, after: $after}"
	last=$name
done
assert_eq "$saw_after" 1 "windows after the restore"
guest_sh 'kill -0 $(cat /run/idlevm-helper.pid) && kill -0 $(cat /run/idlevm-workload.pid)' >/dev/null ||
	fail "the guest's helper or workload is gone after the restore"
