# e2e-timeout: 900
# Several guests in one run.  The test boots a second demo guest (B) next
# to the suite's (A), then:
#  1. `--all-domains --match 'A*'` started before B exists: A at once, B
#     once it has booted; Ctrl-C ends both runs with whole windows, each
#     with its pprof (the guests' pprof children take turns);
#  2. `--domain A --domain B` (one process, one loop) and two separate
#     runs at the same time, in two rounds: both guests profiled, each
#     guest's host CPU said, and each guest's to-idle split between the
#     workload's three blocking paths printed for both ways.  The split is
#     not asserted here: on two loaded cores the guests' own behaviour
#     drifts between runs a minute apart (a share moved 15 points between
#     two runs of the same guest), and two separate idlevm at real-time
#     priority (--realtime) take both cores from the guests where one process takes
#     one.  The issue's three-point comparison is a measurement, with long
#     interleaved runs: tests/bench/profile_fleet_compare.sh;
#  3. B destroyed in the middle of a windowed run of both: B's last window
#     is whole and says the guest went away, A goes on to the end.
# IVM_FLEET_SECONDS (default 15) is the length of each run in 2.
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac
. tests/e2e/lib_profile.sh
IVM_PROG=t69
. images/lib.sh

secs=${IVM_FLEET_SECONDS:-15}
A=$IVM_DOMAIN
B=$IVM_DOMAIN-b
base=$IVM_RUNDIR/t69
rm -rf "$base"; mkdir -p "$base"
rundir_b=""
pid=""
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	ivm_domain_destroy "$B"
	[ -n "$rundir_b" ] && rm -rf "$rundir_b"
	true
}
trap cleanup EXIT

# whole PROF: its report has no word of damage or of being cut short.
whole() {
	"$idlevm" report -n 1 "$1" >/dev/null 2>"$base/err" || return 1
	! grep -q "cut short\|skipped" "$base/err"
}

# 1. --all-domains, B starting later.
"$idlevm" profile --all-domains --match "$A*" --window 10 \
	--output-dir "$base/all" >"$base/all.log" 2>&1 &
pid=$!
# B's run directory inside the suite's, which the runner removes.
rundir_b=$(ivm_rundir_create b "$IVM_RUNDIR")
ivm_domain_create "$B" "$IVM_WORKLOAD" "$rundir_b" "$IVM_VCPUS" 512
ivm_wait_ready "$rundir_b/console.log" 300 "$(ivm_domain_qemu_pid "$B")" >/dev/null ||
	fail "guest $B did not boot; its console's end: $(tail -n 15 "$rundir_b/console.log")"
end=$((SECONDS + 120))
until [ "$(ls "$base/all/$B"-[0-9]*.prof 2>/dev/null | wc -l)" -ge 2 ]; do
	[ $SECONDS -lt $end ] || fail "$B not profiled by --all-domains: $(cat "$base/all.log")"
	kill -0 "$pid" 2>/dev/null || fail "idlevm ended: $(cat "$base/all.log")"
	sleep 1
done
kill -INT "$pid"
wait "$pid" || fail "idlevm --all-domains failed: $(cat "$base/all.log")"
pid=""
grep -E "profiling|stopped|host CPU|guests over|windows in" "$base/all.log"
grep -q "^idlevm: $B: profiling" "$base/all.log" || fail "no word of $B being profiled"
grep -q "^idlevm: 2 guests over " "$base/all.log" || fail "not 2 guests in the run"
# One kernel for both: its symbols, ORC and BTF are loaded once, shared.
for g in "$A" "$B"; do
	grep -q "^idlevm: $g: memory: .*shared by guests of the same kernel" "$base/all.log" ||
		fail "$g does not share its kernel's tables: $(grep "memory:" "$base/all.log")"
done
grep "memory:" "$base/all.log"
for prof in "$base"/all/*.prof; do
	whole "$prof" || fail "window $prof damaged: $(cat "$base/err")"
	# Each its pprof: the guests' children take turns (window_run.h).
	[ -s "${prof%.prof}.pb.gz" ] || fail "no pprof for $prof: $(grep pprof "$base/all.log")"
done
for g in "$A" "$B"; do
	grep -q "^idlevm: $g: [0-9]* windows in .* pprof made, 0 failed" "$base/all.log" ||
		fail "$g: pprofs failed: $(grep "windows in" "$base/all.log")"
done
echo "all-domains: $(ls "$base"/all/"$A"-[0-9]*.prof | wc -l) windows of $A, $(ls "$base"/all/"$B"-[0-9]*.prof | wc -l) of $B (started later), all whole"

# 2. One run of both against two separate runs at the same time.
# Rounds of (one run of both, then both alone at once), so that the
# host's drift (the guests' speed under TCG moves with the host's load)
# falls on both sides alike.
one_a=""; one_b=""; sep_a=""; sep_b=""
for round in 1 2; do
	out=$("$idlevm" profile --domain "$A" --domain "$B" -D "$secs" \
		--output-dir "$base/one-$round" --no-pprof 2>&1) ||
		fail "idlevm --domain A --domain B failed: $out"
	echo "$out" | grep -E "stopped|host CPU|guests over"
	for g in "$A" "$B"; do
		echo "$out" | grep -q "^idlevm: $g: host CPU [0-9.]* s over" || fail "no host CPU for $g"
	done
	"$idlevm" profile --domain "$A" -D "$secs" -o "$base/a-$round.prof" --no-report >"$base/a.log" 2>&1 &
	pa=$!
	"$idlevm" profile --domain "$B" -D "$secs" -o "$base/b-$round.prof" --no-report >"$base/b.log" 2>&1 ||
		fail "separate run of $B failed: $(cat "$base/b.log")"
	wait "$pa" || fail "separate run of $A failed: $(cat "$base/a.log")"
	folded() { "$idlevm" report -f folded -K to_idle "$1" 2>/dev/null; }
	one_a="$one_a$(folded "$(ls "$base"/one-$round/"$A"-[0-9]*.prof)")
"
	one_b="$one_b$(folded "$(ls "$base"/one-$round/"$B"-[0-9]*.prof)")
"
	sep_a="$sep_a$(folded "$base/a-$round.prof")
"
	sep_b="$sep_b$(folded "$base/b-$round.prof")
"
done
for g in A B; do
	if [ $g = A ]; then
		check_lockstorm_paths "$one_a" "$g in one run" || true
		check_lockstorm_paths "$sep_a" "$g alone" || true
		one=$(lockstorm_split "$one_a"); sep=$(lockstorm_split "$sep_a")
	else
		check_lockstorm_paths "$one_b" "$g in one run" || true
		check_lockstorm_paths "$sep_b" "$g alone" || true
		one=$(lockstorm_split "$one_b"); sep=$(lockstorm_split "$sep_b")
	fi
	[ -n "$one" ] && [ -n "$sep" ] || fail "$g: no worker to-idle samples"
	echo "$g: one run: $one; separate: $sep (lock pipe sleep %, workers' samples)"
	# Printed, not asserted (see above): tests/bench/profile_fleet_compare.sh.
	compare_splits "$one" "$sep" 3 || true
done

# 3. B goes away in the middle of a windowed run of both.
"$idlevm" profile --domain "$A" --domain "$B" --window 5 -D 30 \
	--output-dir "$base/stop" >"$base/stop.log" 2>&1 &
pid=$!
end=$((SECONDS + 90))
until [ "$(ls "$base/stop/$B"-[0-9]*.pb.gz 2>/dev/null | wc -l)" -ge 1 ]; do
	[ $SECONDS -lt $end ] || fail "no window of $B: $(cat "$base/stop.log")"
	sleep 1
done
ivm_domain_destroy "$B"
wait "$pid" || fail "idlevm failed when $B went away: $(cat "$base/stop.log")"
pid=""
grep -E "stopped|windows in" "$base/stop.log"
grep -q "^idlevm: $B: stopped after .* (the guest \(shut down\|went away\))" "$base/stop.log" ||
	fail "$B's run did not end with the guest"
grep -q "^idlevm: $A: stopped after .* (duration reached)" "$base/stop.log" ||
	fail "$A's run did not go on to the end"
for prof in "$base"/stop/*.prof; do
	whole "$prof" || fail "window $prof damaged: $(cat "$base/err")"
done
when() { basename "$1" .prof | sed 's/.*-\([0-9]\{8\}T[0-9]\{6\}Z\).*/\1/'; }
last_b=$(when "$(ls "$base"/stop/"$B"-[0-9]*.prof | tail -n 1)")
last_a=$(when "$(ls "$base"/stop/"$A"-[0-9]*.prof | tail -n 1)")
[ "$last_a" \> "$last_b" ] || fail "$A has no window after $B went away ($last_a, $last_b)"
echo "$B went away: its last window whole, $A went on"
