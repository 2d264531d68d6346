# e2e-timeout: 600
# libvirtd restarted under a continuous run (`profile --domain --window`):
# QEMU and the guest go on, and so must the run.
#
#  1. libvirtd stopped: idlevm says its connection closed, the window
#     goes on (one ends whole while libvirtd is away); libvirtd started
#     again: idlevm says its connection is back, and its events work again
#     (a `virsh suspend` then is seen: the window says the guest was not
#     running).  It holds no more sockets or eventfds than before: the
#     dead connection is let go.
#  2. libvirtd stopped again, and the guest reboots meanwhile (its own
#     `reboot -f`): no event can come, so the reboot is seen from the
#     kernel itself; the window ends whole (end_reason: the kernel is not
#     the boot opened), and once libvirtd is back the run goes on in the
#     new boot's windows (after: ...), which name the new kaslr_offset.
#
# Every window is whole and of one boot, and windows after each restart
# have samples.  Restarts the shared guest once (the same domain, kernel
# and workload) and leaves libvirtd running, also when it fails.
IVM_PROG=t97
. tests/e2e/lib_boots.sh
boots_need_lockstorm
pidfile=/run/libvirtd.pid
if [ ! -f "$pidfile" ]; then
	echo "skip: no $pidfile: libvirtd was not started as images/lib.sh starts it"
	exit 77
fi

dir=$IVM_RUNDIR/t97
rm -rf "$dir"
log=$IVM_RUNDIR/t97.log
pid=""

# reboot_action ACTION: what QEMU does when the guest reboots (QMP
# set-action): the suite's domain (on_reboot destroy) has libvirt make it
# "shutdown", and libvirt destroys the domain then, which it cannot do
# while it is away; "reset" reboots it in place.
reboot_action() {
	ivm_virsh qemu-monitor-command "$IVM_DOMAIN" \
		"{\"execute\":\"set-action\",\"arguments\":{\"reboot\":\"$1\"}}" >/dev/null
}

# libvirtd_stop: SIGTERM to the libvirtd of the pid file (it leaves its
# domains running), and wait until it is gone.
libvirtd_stop() {
	local p i
	p=$(cat "$pidfile" 2>/dev/null)
	[ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = libvirtd ] ||
		fail "no libvirtd at the pid in $pidfile"
	kill -TERM "$p"
	for i in $(seq 1 300); do
		[ -d "/proc/$p" ] || return 0
		sleep 0.1
	done
	fail "libvirtd ($p) did not stop"
}

cleanup() {
	local rc=$?
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ "$rc" = 0 ] || { echo "---- idlevm profile's stderr ----"; cat "$log"; }
	timeout 5 $IVM_VIRSH version >/dev/null 2>&1 || ivm_libvirt_ensure
	reboot_action shutdown
	true
}
trap cleanup EXIT
trap 'exit 143' TERM

# connections: idlevm's sockets and eventfds (libvirt's client holds one
# of each per connection; the helper's channel is another socket).
connections() {
	ls -l "/proc/$pid/fd" 2>/dev/null | grep -cE 'socket:|\[eventfd\]'
}

k1=$(kaslr)
reboot_action reset || fail "cannot set the guest's reboot action"
"$idlevm" profile --domain "$IVM_DOMAIN" --window 6 --output-dir "$dir" \
	--no-pprof -D 600 >"$log" 2>&1 &
pid=$!
wait_windows 2
c0=$(connections)

# 1. libvirtd stopped: the window goes on.
libvirtd_stop
wait_for_output "$log" "^idlevm: libvirt's connection closed" "$pid" ||
	fail "no word of libvirt's connection closing: $(cat "$log")"
wait_windows $(($(windows) + 1))
ivm_libvirt_ensure
wait_for_output "$log" "^idlevm: libvirt's connection is back" "$pid" ||
	fail "no word of libvirt's connection coming back: $(cat "$log")"
# Its events again: a pause is seen (no event, no look at the state).
pause_seen
wait_windows $(($(windows) + 2))
n_first=$(windows)
# The dead connection is let go: no descriptor kept per restart.
c1=$(connections)
echo "sockets and eventfds: $c0 before libvirtd's restart, $c1 after"
[ "$c1" -le "$c0" ] ||
	fail "$((c1 - c0)) more sockets and eventfds after libvirtd's restart ($c0 -> $c1): $(ls -l "/proc/$pid/fd")"

# 2. libvirtd stopped, and the guest reboots meanwhile.
libvirtd_stop
until [ "$(grep -c "^idlevm: libvirt's connection closed" "$log")" -ge 2 ]; do
	kill -0 "$pid" 2>/dev/null || fail "idlevm ended: $(cat "$log")"
	sleep 0.2
done
n0=$(readies)
guest_sh_fatal 'reboot -f' || fail "the guest did not take reboot -f"
wait_for_output "$log" "^idlevm: the guest's kernel is not the boot opened.*: window .* ended, whole" "$pid" ||
	fail "the reboot was not seen while libvirtd was away: $(cat "$log")"
next_boot "$n0" reboot
ivm_libvirt_ensure
k2=$(kaslr)
wait_back 1
wait_windows $(($(windows) + 1))
kill -INT "$pid"
wait "$pid" || fail "idlevm failed: $(cat "$log")"
pid=""
grep -E "libvirt|ended, whole|is back|waiting for|stopped" "$log"
echo "boots: kaslr $k1, $k2 (rebooted while libvirtd was away)"
[ "$k1" = "$k2" ] && echo "note: the reboot drew the same KASLR offset ($k1): it happens"

# Every window whole, of one boot, with samples after each restart; the
# boot's end and the next boot's start said in the windows.
want=("$IVM_KVER $k1" "$IVM_KVER $k2")
i=0
nr=0
last=""
for prof in "$dir"/*.prof; do
	name=$(basename "$prof" .prof)
	nr=$((nr + 1))
	check=$(check_window "$prof") || exit 1
	txt=$dir/$name.txt
	after=$(window_meta after "$txt")
	if [ -n "$after" ]; then
		[ "$i" = 0 ] || fail "$name: a third boot"
		i=1
		echo "$after" | grep -q "^the guest's kernel is not the boot opened.*the window before: $last.prof" ||
			fail "$name, first of the second boot, does not say what came before: $after"
		window_meta end_reason "$dir/$last.txt" | grep -q "^the guest's kernel is not the boot opened" ||
			fail "$last, last of the first boot, says no end_reason"
	fi
	b="$(window_meta kernel "$txt") $(window_meta kaslr_offset "$txt")"
	assert_eq "$b" "${want[$i]}" "$name's kernel and kaslr_offset (boot $((i + 1)))"
	n=$(echo "$check" | sed -n 's/.*to_idle \([0-9]*\).*/\1/p')
	echo "$name: boot $((i + 1)) ($b), ${check#*: }${after:+, after: $after}"
	# The windows after libvirtd came back (the first, cut short by the
	# reboot, and the last, by the end, may be short) have samples.
	if [ "$nr" -gt 3 ] && [ "$nr" -lt "$n_first" ] && [ "$n" -eq 0 ]; then
		fail "$name: no to-idle sample after libvirtd came back"
	fi
	last=$name
done
assert_eq "$i" 1 "the reboot while libvirtd was away"
[ -n "$(ls "$dir"/*.txt | xargs grep -l "the guest was not running for")" ] ||
	fail "no window says the guest was paused"
[ -n "$(ls "$dir"/*.txt | xargs grep -l "libvirtd went away and its connection was opened again")" ] ||
	fail "no window says libvirt's connection was opened again"
# The new boot's connection is new: nothing to say of it coming back.
assert_eq "$(grep -c "^idlevm: libvirt's connection is back" "$log")" 1 \
	"returns of libvirt's connection said"
