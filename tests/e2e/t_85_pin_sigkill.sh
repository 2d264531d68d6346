# SIGKILL idlevm in the middle of pinned captures, again and again: every
# thread's affinity in the guest is back to its original mask, and the
# helper ended the pins by itself, within a second each time.  Within 100
# ms (or, on a host so loaded that the helper's own round trips are slow,
# within the pin lease plus four of its slowest round trips measured
# around the kills: the helper cannot see the host go, nor its lease run
# out, faster than its loop gets the CPU) is the goal: a bound over it is
# reported as degraded, not failed, since a load spike between two round
# trips measured (a CI rehearsal beside the 2-hour soak: 121 ms against a
# limit of 100, round trips 3-7 ms) delays the helper's timer alone.
#
# How the time is measured: the guest's own shell is far too slow under
# TCG to poll affinities at millisecond resolution (one grep of the masks
# takes about 80 ms), so the helper measures it: when it ends leases
# because the host went away (or a lease ran out), it logs how long after
# the last request it did so.  The last request came before the kill, so
# that figure bounds the time from the kill to the restore from above.
# From inside the guest (guest_sh), each round then checks that every
# thread of the workload has its original mask.
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

# Kills land inside a pin only some of the time (a pinned capture lasts a
# few ms; faster captures make it rarer): go on until a few did, or give up
# after max_rounds.
want=${IVM_PIN_KILL_WANT:-3}
max_rounds=${IVM_PIN_KILL_ROUNDS:-48}
prof=$IVM_RUNDIR/t85.prof
# The lease each hold and pin gets (--pin-lease), in ms.
lease=40
masks='p=$(pidof lockstorm) || exit 1
for s in /proc/$p/task/*/status; do
	t=${s%/status}; t=${t##*/}
	echo "$t $(grep Cpus_allowed_list "$s" | cut -f2)"
done'

orig=$(guest_sh "$masks") || fail "cannot read the workload's masks"
[ -n "$orig" ] || fail "no workload threads"
echo "original masks (tid mask):"; echo "$orig"

restored_log() {
	tr -d '\r' <"$IVM_CONSOLE_LOG" |
		grep -E 'idlevm-helper: (host disconnected|lease ran out): ended [1-9][0-9]* pin'
}
disconnects() {
	tr -d '\r' <"$IVM_CONSOLE_LOG" | grep -c 'idlevm-helper: host disconnected$'
}
rtt_before=$(rtt_helper_ms 10) || fail "the helper does not answer pings"
rtt_during=0
unpinned_rounds=0
base=$(restored_log | wc -l)
killed_pinned=0
i=0
while [ "$i" -lt "$max_rounds" ] && [ "$killed_pinned" -lt "$want" ]; do
	i=$((i + 1))
	# Not the last round's output: the redirection below happens in the
	# background job, after wait_for_output may have looked.
	rm -f "$IVM_RUNDIR/t85.out"
	# Leases of $lease ms (the default is about 1 ms, ended by the helper
	# itself): long enough that kills land inside them.
	"$idlevm" profile --domain "$IVM_DOMAIN" --capture pin \
		--pin-policy always --pin-lease "$lease" -D 60 -o "$prof" --no-report \
		>"$IVM_RUNDIR/t85.out" 2>&1 &
	pid=$!
	disc=$(disconnects)
	# Random moment once it samples (however long attaching took).
	wait_for_output "$IVM_RUNDIR/t85.out" '^idlevm: profiling ' "$pid" ||
		fail "idlevm ended early: $(cat "$IVM_RUNDIR/t85.out")"
	sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
	kill -0 "$pid" 2>/dev/null ||
		fail "idlevm ended early: $(cat "$IVM_RUNDIR/t85.out")"
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	# Pin capture starts only when the helper answers a hello in time;
	# otherwise idlevm says so and captures optimistic (by design): such
	# a round pins nothing, and only the masks are checked.
	pinround=1
	if ! grep -q "capture pin," "$IVM_RUNDIR/t85.out"; then
		pinround=0
		grep -q "warning: no pin capture" "$IVM_RUNDIR/t85.out" ||
			fail "not in pin mode, and not said why: $(cat "$IVM_RUNDIR/t85.out")"
		echo "degraded: round $i: no pin capture (reported): $(grep "warning: no pin capture" "$IVM_RUNDIR/t85.out")"
		unpinned_rounds=$((unpinned_rounds + 1))
	fi
	# The restore itself is measured by the helper; wait for its log
	# (the serial console is slow) until it says it saw the host go.
	end=$((SECONDS + $(guest_sh_timeout)))
	while [ "$pinround" = 1 ] && [ "$(disconnects)" -le "$disc" ]; do
		[ "$SECONDS" -lt "$end" ] ||
			fail "round $i: the helper never logged the host's disconnect"
		sleep 0.1
	done
	now=$(guest_sh "$masks") || fail "cannot read the masks after the kill"
	# The helper's latency around this kill.
	r=$(rtt_helper_ms 3) || fail "the helper does not answer pings after kill $i"
	[ "$r" -gt "$rtt_during" ] && rtt_during=$r
	[ "$now" = "$orig" ] || {
		echo "after kill $i:"; echo "$now"
		# A thread may have exited; a changed mask is the failure.
		join <(echo "$orig" | sort) <(echo "$now" | sort) |
			awk '$2 != $3 { print "tid " $1 ": " $2 " -> " $3; bad = 1 } END { exit bad }' ||
			fail "round $i: affinity not restored"
	}
	n=$(restored_log | wc -l)
	if [ "$n" -gt "$base" ]; then
		killed_pinned=$((killed_pinned + 1))
		restored_log | tail -n $((n - base))
		base=$n
	fi
done
rm -f "$prof" "$IVM_RUNDIR/t85.out"

# Every restore the helper logged while this test ran: its bound in ms.
times=$(restored_log | tail -n "$killed_pinned" |
	sed -n 's/.*, \([0-9.]*\) ms after the last request.*/\1/p')
rtt_after=$(rtt_helper_ms 10) || fail "the helper does not answer pings after the kills"
rtt=$((rtt_before > rtt_after ? rtt_before : rtt_after))
rtt=$((rtt > rtt_during ? rtt : rtt_during))
limit=$((lease + 4 * rtt > 100 ? lease + 4 * rtt : 100))
echo "rounds $i ($unpinned_rounds without pin capture), killed with pins in place $killed_pinned;" \
	"restore bounds (ms): $(echo $times);" \
	"slowest helper round trips: ${rtt_before} ms before (10 pings)," \
	"${rtt_during} ms between kills (3 after each), ${rtt_after} ms after (10): limit $limit ms"
[ "$killed_pinned" -ge 2 ] || fail "only $killed_pinned kill(s) landed while a pin was in place"
# Over the limit is a loaded host's doing (the helper's lease timer fired
# late: its loop did not get the vCPU, or the vCPU its host CPU), reported;
# over a second, 25 leases, the helper did not end the pins by itself.
echo "$times" | awk '$1 > 1000 { print "restore bound " $1 " ms over 1000 ms"; bad = 1 } END { exit bad }' ||
	fail "an affinity stayed pinned over a second after the kill"
echo "$times" | awk -v limit="$limit" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
	$1 > limit { printf "degraded: restore bound %s ms over the %s ms limit (host load %s)\n", $1, limit, load }'
