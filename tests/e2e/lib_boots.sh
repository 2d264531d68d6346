# Helpers for the tests that follow one guest through its restarts and
# failures in a continuous run (t_96, t_97, t_98): the guest's own view of
# its boot, and the checks every window of such a run must pass.  Sources
# images/lib.sh (libvirtd, domains).
. images/lib.sh

# boots_need_lockstorm: end the test (passed, said) unless the guest runs
# lockstorm, whose to-idle stacks check_window knows.
boots_need_lockstorm() {
	case $IVM_WORKLOAD in
	lockstorm*) ;;
	*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
	esac
}

# kaslr: this boot's KASLR offset as the guest sees it (_text's place).
kaslr() {
	local text
	text=$(guest_sh 'grep " _text$" /proc/kallsyms' | awk '{ print $1 }')
	[ -n "$text" ] || fail "no _text in the guest's /proc/kallsyms"
	printf '0x%x\n' $((0x$text - 0xffffffff81000000))
}

# next_boot N0 WHAT: wait (300 s at most) for the workload's readiness
# after the N0th on the console: the guest is back from WHAT.
next_boot() {
	local end=$((SECONDS + 300))
	until [ "$(grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG")" -gt "$1" ]; do
		[ $SECONDS -lt $end ] || fail "the guest did not come back from its $2"
		sleep 0.5
	done
}

# wait_windows N: wait until idlevm profile (pid $pid, stderr in $log,
# windows in $dir) has started N windows.
wait_windows() {
	until [ "$(ls "$dir"/*.prof 2>/dev/null | wc -l)" -ge "$1" ]; do
		kill -0 "$pid" 2>/dev/null || fail "idlevm ended: $(cat "$log")"
		sleep 0.5
	done
}

# windows: how many windows were started so far.
windows() {
	ls "$dir"/*.prof 2>/dev/null | wc -l
}

# wait_back N: wait until idlevm profile said N times that the guest is
# back, and a window of that boot is whole (one more window was started).
wait_back() {
	until [ "$(grep -c 'the guest is back after' "$log")" -ge "$1" ]; do
		kill -0 "$pid" 2>/dev/null || fail "idlevm ended: $(cat "$log")"
		sleep 0.5
	done
	# The boot's first window has its file by now (flushed each second).
	sleep 2
	wait_windows $(($(windows) + 1))
}

# pause_seen: `virsh suspend` the guest, wait until the window being
# written says it was not running, `virsh resume` it.
pause_seen() {
	ivm_virsh suspend "$IVM_DOMAIN" >/dev/null || fail "virsh suspend failed"
	until "$idlevm" report -n 1 "$(ls "$dir"/*.prof | tail -n 1)" 2>/dev/null |
		grep -q "the guest was not running for"; do
		kill -0 "$pid" 2>/dev/null || fail "idlevm ended: $(cat "$log")"
		sleep 0.5
	done
	ivm_virsh resume "$IVM_DOMAIN" >/dev/null || fail "virsh resume failed"
}

# readies: how many times the workload said it is ready on the console.
readies() {
	grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG"
}

# window_meta KEY TXT: the first value of KEY in a window's report TXT.
window_meta() {
	sed -n "s/^  $1: //p" "$2" | head -n 1
}

# check_window PROF: the window is whole (its report says nothing cut
# short or skipped) and of one boot: its to-idle stacks switch away in
# __schedule, which stacks read with another boot's offset or symbols
# would not.  Leaves its report in PROF's .txt; prints "NAME: to_idle N
# (__schedule in S)".
check_window() {
	local prof=$1 name stacks n s
	name=${prof%.prof}
	"$idlevm" report -n 1 "$prof" >"$name.txt" 2>"$name.err" ||
		fail "report of $prof failed: $(cat "$name.err")"
	grep -q "cut short\|skipped" "$name.err" &&
		fail "$prof is not whole: $(cat "$name.err")"
	stacks=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null)
	n=$(echo "$stacks" | awk 'NF { n += $NF } END { print n + 0 }')
	s=$(echo "$stacks" | awk '/__schedule/ { n += $NF } END { print n + 0 }')
	echo "$(basename "$name"): to_idle $n (__schedule in $s)"
	if [ "$n" -gt 0 ]; then
		awk -v n="$n" -v s="$s" 'BEGIN { exit !(s * 10 >= n * 9) }' ||
			fail "$prof: only $s of $n to-idle stacks switch away in __schedule"
	fi
}
