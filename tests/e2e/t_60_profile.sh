# idlevm profile on lockstorm: the to-idle stacks are the workload's known
# blocking paths in its designed ratio, and the per-thread split agrees with
# the guest's own scheduler trace.
. tests/e2e/lib_profile.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

prof=$IVM_RUNDIR/t60.prof
T=/sys/kernel/tracing
duration=${IVM_PROFILE_SECONDS:-15}

# One run: profile for $duration s while the guest traces its own switches
# to idle (who ran last before the CPU went idle), then compare.  Returns
# 2 when only the per-thread comparison is off (see the retry below).
attempt() {
	# Ground truth: the guest records every switch to its idle task (who ran
	# last before the CPU went idle) with its own tracefs, during the profile.
	guest_sh "echo 0 > $T/tracing_on; echo > $T/trace
	echo 4096 > $T/buffer_size_kb
	echo 'next_pid == 0' > $T/events/sched/sched_switch/filter
	echo 1 > $T/events/sched/sched_switch/enable
	echo 1 > $T/tracing_on" || fail "cannot start tracing in the guest"
	guest_paths_start || fail "cannot count the guest's switches to idle"
	out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" -o "$prof" 2>&1)
	rc=$?
	paths=$(guest_paths_stop) || fail "cannot read the guest's switches to idle"
	truth=$(guest_sh "echo 0 > $T/tracing_on
	awk '/sched_switch:/ { for (i = 1; i <= NF; i++) if (\$i ~ /^prev_comm=/) n[substr(\$i, 11)]++ }
	     END { for (c in n) print n[c], c }' $T/trace
	echo 0 > $T/events/sched/sched_switch/filter; echo > $T/trace")
	[ "$rc" = 0 ] || fail "idlevm profile failed ($rc): $out"
	echo "$out" | head -n 40

	folded=$("$idlevm" report -f folded -K to_idle "$prof") || fail "idlevm report failed"

	# 1. Blocking paths of the workload's threads (ls-*), from kernel
	# frames, split as the guest itself saw its workers go idle.
	check_lockstorm_paths "$folded" "" "$paths" "$out"
	case $? in
	0) ;;
	2) return 3 ;;	# too few samples to judge: the caller runs longer
	*) fail "blocking paths or ratio off" ;;
	esac

	# 2. Per-thread share of "ran last before the CPU went idle": idlevm's
	# to-idle samples against the guest's sched_switch trace, over the
	# workload's threads.
	ours=$(echo "$folded" | awk '{
		split($1, f, ";"); t = f[2]; sub(/\/[0-9]+$/, "", t); n[t] += $NF }
		END { for (t in n) print n[t], t }')
	echo "guest trace (switches to idle by thread):"; echo "$truth" | sort -rn | head -n 12
	echo "idlevm to-idle samples by thread:"; echo "$ours" | sort -rn | head -n 12
	{ echo "$truth" | sed 's/^/T /'; echo "$ours" | sed 's/^/I /'; } | awk "$LS_AWK_TOL"'
		$3 ~ /^ls-/ { if ($1 == "T") { t[$3] += $2; tt += $2 } else { i[$3] += $2; it += $2 } }
		END {
			if (tt < 50 || it < 50) { printf "too few: trace %d idlevm %d\n", tt, it; exit 1 }
			bad = 0
			for (c in t) {
				a = t[c] * 100 / tt; b = i[c] * 100 / it
				printf "%-14s trace %5.1f%%  idlevm %5.1f%%\n", c, a, b
				if (a - b > tol(a, tt, it) || b - a > tol(a, tt, it)) bad = 1
			}
			for (c in i) if (!(c in t)) { printf "%s only in idlevm\n", c; if (i[c] * 100 / it > 10) bad = 1 }
			exit bad
		}' || return 2
	return 0
}

# A run on this 2-vCPU TCG guest has once put one worker 13.6 points off
# while the blocking-path check passed (that worker also switched to idle
# far less often than its peers in the guest's trace that run; the cause
# is not pinned down).  Such a run is retried once, in full, and the
# second must agree: a lasting bias still fails.
# A loaded host leaves the guest few idle periods: a run with too few to
# judge (status 3) is done again twice as long, twice at most; it does not
# count as the one retry.
retried=0
for try in 1 2 3 4; do
	attempt
	case $? in
	0) exit 0 ;;
	2)	[ "$retried" = 0 ] ||
			fail "per-thread to-idle split differs from the guest trace by more than 10 points, twice"
		echo "per-thread split off by more than 10 points: one more run"
		retried=1 ;;
	3)	[ "$duration" -lt $((4 * ${IVM_PROFILE_SECONDS:-15})) ] ||
			fail "too few samples to judge, in runs up to $duration s"
		echo "too few to judge in $duration s: once more, twice as long"
		duration=$((duration * 2)) ;;
	*) fail "t_60 attempt failed" ;;
	esac
done
fail "no conclusive run in $try attempts"
