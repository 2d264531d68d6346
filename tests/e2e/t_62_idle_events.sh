# The sched idle source on lockstorm, against the guest's own account of
# the same window: its scheduler's switches into and out of idle (its
# tracefs, clock "perf", the clock its run queues read) and its interrupt
# counts.  Asserted: idlevm's idle-task switch counts, read from guest
# memory, are the guest trace's to the switch; the per-thread to-idle and
# from-idle splits agree; the timeline is well formed and renders.
# Printed: the share of the guest's transitions captured, the per-thread
# differences and the timer share of wake causes (the figures of issue 15).
. tests/e2e/lib_profile.sh
. tests/e2e/lib_idle_truth.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

prof=$IVM_RUNDIR/t62.prof
duration=${IVM_PROFILE_SECONDS:-15}

guest_idle_trace_start || fail "cannot start tracing in the guest"
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" -o "$prof" \
	--no-report ${IVM_T62_ARGS:-} 2>&1)
rc=$?
guest_idle_trace_stop || fail "cannot stop tracing in the guest"
[ "$rc" = 0 ] || fail "idlevm profile failed ($rc): $out"
echo "$out"
echo "$out" | grep -q 'idle source sched' || fail "the sched idle source did not run"

windows=$(profile_windows "$prof")
[ -n "$windows" ] || fail "no idle period with guest clocks in the profile"
truth=$(guest_idle_trace_count "$windows") || fail "cannot read the guest trace"
echo "$truth" | grep -v '^[TF] '

# 1. The guest's idle-task switch counts as idlevm read them, per vCPU and
# over the window, are the number of switches out of idle in its trace.
"$idlevm" report -f periods "$prof" 2>/dev/null | awk -F '\t' '
	$12 > 0 && $13 > 0 {
		if (!($1 in lo) || $12 < lo[$1]) { lo[$1] = $12; first[$1] = $14 }
		if ($13 > hi[$1]) { hi[$1] = $13; last[$1] = $15 } }
	END { for (c in lo) print "K", c, last[c] - first[c] }' > "$IVM_RUNDIR/t62.counts"
{ cat "$IVM_RUNDIR/t62.counts"; echo "$truth" | grep '^C '; } | awk '
	$1 == "K" { k[$2] = $3 } $1 == "C" { f[$2] = $4 }
	END {
		bad = 0
		for (c in k) {
			printf "vCPU %s: idle-task switches read by idlevm %d, in the guest trace %d\n", c, k[c], f[c]
			d = k[c] - f[c]; if (d < -2 || d > 2 || f[c] == 0) bad = 1
		}
		exit bad }' || fail "idlevm's idle switch counts disagree with the guest trace"

# 2. Captured against the guest's transitions, and per-thread splits.
report=$("$idlevm" report "$prof" 2>/dev/null) || fail "idlevm report failed"
echo "$report" | sed -n '/^== run ==/,/^== top/p' | head -n 40
to=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null)
from=$("$idlevm" report -f folded -K from_idle "$prof" 2>/dev/null)
by_thread() {
	echo "$1" | awk '{ split($1, f, ";"); t = f[2]; sub(/\/[0-9]+$/, "", t); n[t] += $NF }
		END { for (t in n) print n[t], t }'
}
# compare KIND LETTER OURS: idlevm's samples of KIND against the trace's
# LETTER lines; prints both splits and the capture ratio, fails when a
# thread with 5% or more of either side is 10 points off (or, at the small
# counts of a loaded host, 3 standard deviations: LS_AWK_TOL).
compare() {
	{ echo "$truth" | awk -v l="$2" '$1 == l { n[$2]++ } END { for (c in n) print "T", n[c], c }'
	  by_thread "$3" | sed 's/^/I /'; } | awk -v kind="$1" "$LS_AWK_TOL"'
		$1 == "T" { t[$3] += $2; tt += $2; next }
		$1 == "I" { i[$3] += $2; it += $2 }
		END {
			if (tt < 50) { printf "%s: too few in the trace (%d)\n", kind, tt; exit 1 }
			printf "%s: guest trace %d, idlevm captured %d (%.1f%%)\n", kind, tt, it, it * 100 / tt
			bad = 0; worst = 0
			for (c in t) seen[c] = 1
			for (c in i) seen[c] = 1
			for (c in seen) {
				a = t[c] * 100 / tt; b = it ? i[c] * 100 / it : 0
				d = a - b; if (d < 0) d = -d
				if (d > worst) worst = d
				if (a >= 2 || b >= 2)
					printf "  %-16s trace %5.1f%%  idlevm %5.1f%%\n", c, a, b
				if ((a >= 5 || b >= 5) && d > tol(a, tt, it)) bad = 1
			}
			printf "%s: largest per-thread difference %.1f points\n", kind, worst
			exit bad
		}'
}
compare to-idle T "$to" || fail "to-idle split differs from the guest trace by more than 10 points"
compare from-idle F "$from" || fail "from-idle split differs from the guest trace by more than 10 points"
# The same from the idle-period records, which name both tasks of every
# period, whether or not its stacks were kept.
periods=$("$idlevm" report -f periods "$prof" 2>/dev/null)
as_folded() { echo "$periods" | awk -F '\t' -v col="$1" '$col != "?" { print "x;" $col "/0 1" }'; }
compare "to-idle (period records)" T "$(as_folded 8)" ||
	fail "to-idle split of the period records differs from the guest trace by more than 10 points"
compare "from-idle (period records)" F "$(as_folded 11)" ||
	fail "from-idle split of the period records differs from the guest trace by more than 10 points"

# 3. Wake causes against the guest's interrupt counters.
echo "$truth" | awk '$1 == "I" { n = $2; sub(/:$/, "", n); v = $3
		if (n == "LOC") loc = v; else if (n == "RES") res = v; else if (n == "CAL") cal = v
		else if (n ~ /^[0-9]+$/) dev += v }
	END { t = loc + res + cal + dev
		if (t) printf "guest interrupts: LOC %d RES %d CAL %d devices %d: timer share %.1f%%\n", loc, res, cal, dev, loc * 100 / t }'
echo "$report" | grep 'timer share'

# 4. The timeline: Chrome trace JSON with one track per vCPU, and the HTML
# page rendered by headless Chromium.
json=$IVM_RUNDIR/t62-timeline.json
html=$IVM_RUNDIR/t62-timeline.html
png=$IVM_RUNDIR/t62-timeline.png
"$idlevm" report -f timeline -o "$json" "$prof" 2>/dev/null || fail "timeline report failed"
check_timeline_json "$json" "$IVM_VCPUS" || fail "timeline JSON is not well formed"
render_timeline "$html" "$png" || fail "timeline page did not render"
