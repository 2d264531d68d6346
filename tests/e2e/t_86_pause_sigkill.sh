# SIGKILL idlevm while it has the guest paused (--capture stop pauses it
# around every capture; every profile pauses it once at the start to find
# QEMU's register state): the guest runs again, resumed by idlevm's pause
# guardian (vmm/access/pause_guard.h), every time.
#
# Kills land while the guest is paused only some of the time: go on until
# a few did (seen as "paused" right after the kill), or give up after
# max_rounds.  Whatever the timing, every round must end with the guest
# running and answering.
want=${IVM_PAUSE_KILL_WANT:-2}
max_rounds=${IVM_PAUSE_KILL_ROUNDS:-60}
state() { virsh -q -c qemu:///system domstate "$IVM_DOMAIN" 2>/dev/null | head -n 1; }

uuid=$(virsh -q -c qemu:///system domuuid "$IVM_DOMAIN") || fail "no UUID for $IVM_DOMAIN"
killed_paused=0
i=0
while [ "$i" -lt "$max_rounds" ] && [ "$killed_paused" -lt "$want" ]; do
	i=$((i + 1))
	"$idlevm" profile --domain "$IVM_DOMAIN" --capture stop -D 30 \
		-o "$IVM_RUNDIR/t86.prof" --no-report >"$IVM_RUNDIR/t86.out" 2>&1 &
	pid=$!
	# Into the run: past the start (1 to 3 s), at a random millisecond.
	sleep "$((1 + RANDOM % 3)).$(printf '%03d' $((RANDOM % 1000)))"
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	s=$(state)
	paused_at_kill=$s
	# The guardian resumes within a second or so; a loaded host gets 60.
	for t in $(seq 1 600); do
		s=$(state)
		[ "$s" = running ] && break
		sleep 0.1
	done
	[ "$s" = running ] || {
		cat "$IVM_RUNDIR/t86.out"
		virsh -q -c qemu:///system resume "$IVM_DOMAIN" >/dev/null 2>&1
		fail "round $i: the guest stayed '$s' after idlevm was killed"
	}
	# The guardian of this round ends (it watches a running guest a few
	# seconds for a stop still on its way) before the next idlevm pauses
	# the guest; it says on idlevm's stderr when it resumed one, which
	# on a quiet host is often before virsh could see it paused.
	for t in $(seq 1 600); do
		pgrep -f "__pause-guard.*$uuid" >/dev/null || break
		sleep 0.1
	done
	if [ "$paused_at_kill" = paused ] ||
	   grep -q "pause guard: resumed guest" "$IVM_RUNDIR/t86.out"; then
		killed_paused=$((killed_paused + 1))
	fi
done
echo "rounds $i, killed with the guest paused $killed_paused"
[ "$killed_paused" -ge 1 ] ||
	fail "no kill landed while the guest was paused in $i rounds: nothing was tested"
guest_sh true >/dev/null || fail "the guest shell does not answer after the kills"
