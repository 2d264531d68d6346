# Context-switch sampling (profile --switch-every) on lockstorm, against
# the guest's own accounting of the same window.
#
# The window: the workload is frozen (SIGSTOP, every thread in state T) at
# both ends while the guest's /proc is read and while idlevm takes its
# first read (at setup) and its last (at the end), so both sides count the
# same switches.  Reading /proc runs a shell on the guest's two CPUs: with
# the workload running it would preempt workers (switches of its own) and
# take long enough for tens of switches to happen between the two sides'
# reads.  Frozen, nothing of the workload moves while either side reads.
#
# Asserted: every workload thread's voluntary and involuntary switches as
# idlevm read them are the guest's (status) within 2%, its CPU time and
# run delay (schedstat) within 5%; the workers' switch samples split
# between wait_for_lock, read_request and throttle like the workload's own
# counts of blocking calls over the window, within 5 points; the threads
# report sorts by each column; --kind switch selects the switch samples; a
# thread born and gone during the window is in the report as such.
#
# --no-realtime (the default, said here because it matters): at real-time
# priority (--realtime) idlevm slowed this 2-vCPU TCG guest to a third of its blocking
# calls per second on a host at load 20, and fewer switches mean fewer
# samples; what is tested here does not depend on it.
. tests/e2e/lib_switch.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

prof=$IVM_RUNDIR/t64.prof
log=$IVM_RUNDIR/t64.idlevm.log
duration=${IVM_SWITCH_SECONDS:-20}
every=${IVM_SWITCH_EVERY:-2}
rm -f "$prof"

pid=$(workload_pid) || fail "no workload pid"
[ -n "$pid" ] || fail "no workload pid"
idlevm_pid=""
cleanup() {
	[ -n "$idlevm_pid" ] && kill -INT "$idlevm_pid" 2>/dev/null && wait "$idlevm_pid"
	workload_thaw "$pid" >/dev/null
}
trap cleanup EXIT

counts0=$(lockstorm_counts "$pid") || fail "no lockstorm report"
workload_freeze "$pid" || fail "cannot freeze the workload"
start=$(workload_sched "$pid") || fail "cannot read the guest's /proc"
"$idlevm" profile --domain "$IVM_DOMAIN" -o "$prof" --no-report \
	--switch-every "$every" --no-realtime >"$log" 2>&1 &
idlevm_pid=$!
# The file takes its name once setup is over: every thread read once.
for i in $(seq 1 600); do
	[ -f "$prof" ] && break
	kill -0 "$idlevm_pid" 2>/dev/null || break
	sleep 0.2
done
[ -f "$prof" ] || fail "idlevm profile did not start: $(cat "$log")"
workload_thaw "$pid" || fail "cannot thaw the workload"
# A process born in the window that exits in it: met by a sweep, then gone.
brief=$(guest_sh 'sleep 3 >/dev/null 2>&1 & echo $!') || fail "cannot start sleep"
sleep "$duration"
counts1=$(lockstorm_counts "$pid") || fail "no lockstorm report"
workload_freeze "$pid" || fail "cannot freeze the workload"
end=$(workload_sched "$pid") || fail "cannot read the guest's /proc"
kill -INT "$idlevm_pid"
wait "$idlevm_pid"
rc=$?
idlevm_pid=""
workload_thaw "$pid"
cat "$log"
[ "$rc" = 0 ] || fail "idlevm profile failed ($rc)"

threads=$("$idlevm" report -f threads "$prof") || fail "report -f threads failed"
echo "$threads" | head -n 16

# 1. Per thread, idlevm's totals against the guest's deltas.
{ echo "$start" | sed 's/^/S /'; echo "$end" | sed 's/^/E /'
  echo "$threads" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print "I", $1, $4, $5, $6, $7 }'; } |
awk '
	$1 == "S" { sv[$2] = $4; sn[$2] = $5; sr[$2] = $6; sd[$2] = $7; comm[$2] = $3 }
	$1 == "E" { ev[$2] = $4; en[$2] = $5; er[$2] = $6; ed[$2] = $7 }
	$1 == "I" { iv[$2] = $3; in_[$2] = $4; id[$2] = $5; ir[$2] = $6; have[$2] = 1 }
	function off(ours, theirs, rel, abs,   d) {
		d = ours - theirs; if (d < 0) d = -d
		return d > abs && d > rel * theirs
	}
	END {
		bad = 0; n = 0
		printf "%-14s %7s %7s  %7s %7s  %10s %10s  %10s %10s\n", "thread", "vol", "guest", "invol", "guest", "cpu ms", "guest", "delay ms", "guest"
		for (t in ev) {
			if (!(t in sv)) continue
			n++
			gv = ev[t] - sv[t]; gn = en[t] - sn[t]
			gr = (er[t] - sr[t]) / 1e6; gd = (ed[t] - sd[t]) / 1e6
			if (!have[t]) { printf "%s/%s: not in the threads report\n", comm[t], t; bad = 1; continue }
			printf "%-14s %7d %7d  %7d %7d  %10.1f %10.1f  %10.1f %10.1f\n", comm[t] "/" t, iv[t], gv, in_[t], gn, ir[t], gr, id[t], gd
			if (off(iv[t], gv, 0.02, 1) || off(in_[t], gn, 0.02, 1)) { print "  FAIL: switches differ by more than 2%"; bad = 1 }
			if (off(ir[t], gr, 0.05, 1) || off(id[t], gd, 0.05, 1)) { print "  FAIL: CPU time or run delay differ by more than 5%"; bad = 1 }
		}
		if (n < 5) { printf "only %d workload threads compared\n", n; bad = 1 }
		exit bad
	}' || fail "per-thread switch counts, CPU time or run delay disagree with the guest"

# 2. Born and gone in the window.
echo "$threads" | awk -v t="$brief" '$1 == t' | grep -q 'born,gone' ||
	fail "the brief process $brief is not in the threads report as born,gone"

# 3. Where the workers blocked: the switch samples against the workload's
# own counts of blocking calls over the window.
folded=$("$idlevm" report -f folded -K switch "$prof") || fail "report -K switch failed"
paths=$(switch_paths "$folded")
echo "workload counts at start: $counts0, at end: $counts1; switch samples of workers (lock read throttle other): $paths"
echo "$counts0 $counts1 $paths" | awk '{
	wl = $4 - $1; wr = $5 - $2; wt = $6 - $3; w = wl + wr + wt
	sl = $7; sr = $8; st = $9; s = sl + sr + st
	if (w < 100 || s < 100) { printf "too few: workload %d, samples %d\n", w, s; exit 1 }
	printf "workload blocking calls %d: wait_for_lock %.1f%% read_request %.1f%% throttle %.1f%%\n", w, wl * 100 / w, wr * 100 / w, wt * 100 / w
	printf "switch samples %d (+%d elsewhere): wait_for_lock %.1f%% read_request %.1f%% throttle %.1f%%\n", s, $10, sl * 100 / s, sr * 100 / s, st * 100 / s
	bad = 0
	d = sl * 100 / s - wl * 100 / w; if (d < -5 || d > 5) { print "FAIL: wait_for_lock share"; bad = 1 }
	d = sr * 100 / s - wr * 100 / w; if (d < -5 || d > 5) { print "FAIL: read_request share"; bad = 1 }
	d = st * 100 / s - wt * 100 / w; if (d < -5 || d > 5) { print "FAIL: throttle share"; bad = 1 }
	exit bad }' || fail "switch samples do not split like the workload's blocking calls"

# 4. Only switch samples with --kind switch, and every one of a worker
# in the threads report's sample counts.
"$idlevm" report -f folded -K to_idle "$prof" | grep -q . || fail "no to-idle samples beside the switch samples"
all=$(echo "$folded" | awk '{ n += $NF } END { print n + 0 }')
listed=$(echo "$threads" | awk '$1 == "all" { print $8 }')
assert_eq "$all" "$listed" "switch samples in the folded report and in the threads report"

# 5. --sort by each column: the column is ordered.
for c in tid:1:n pid:2:n comm:3:s voluntary:4:r involuntary:5:r run_delay:6:r cpu:7:r samples:8:r; do
	name=${c%%:*}; rest=${c#*:}; col=${rest%%:*}; how=${rest#*:}
	out=$("$idlevm" report -f threads --sort "$name" "$prof" 2>/dev/null) ||
		fail "--sort $name failed"
	echo "$out" | awk -v c="$col" -v how="$how" '
		NR == 1 || $1 == "all" || $1 ~ /^\(/ { next }
		NR > 2 {
			if (how == "n" && $c + 0 < prev + 0) bad = 1
			if (how == "r" && $c + 0 > prev + 0) bad = 1
			if (how == "s" && $c < prev) bad = 1
		}
		{ prev = $c }
		END { exit bad }' || fail "--sort $name: column $col not in order"
done
"$idlevm" report -f threads --sort nosuch "$prof" >/dev/null 2>&1 &&
	fail "--sort nosuch accepted"
true
