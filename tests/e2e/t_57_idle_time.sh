# e2e-timeout: 300
# Idle time by path: the workers' to-idle stacks weighed by how long the
# idle period each began lasted (report --value idle_time) split between
# the workload's blocking paths as the guest's own trace splits its idle
# time: every switch to the idle task with its kernel stack and the switch
# out of idle after it, per CPU, timed in the guest.  Within 5 points.
# And the pprof's idle_ns sample type, read by go tool pprof, holds the
# same total.
. tests/e2e/lib_profile.sh
. tests/e2e/lib_pprof.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

prof=$IVM_RUNDIR/t57.prof
pb=$IVM_RUNDIR/t57.pb.gz
trap 'rm -f "$prof" "$pb"' EXIT
T=/sys/kernel/tracing
duration=${IVM_PROFILE_SECONDS:-15}

guest_sh "echo 0 > $T/tracing_on; echo > $T/trace
echo 8192 > $T/buffer_size_kb
echo 'prev_pid == 0 || next_pid == 0' > $T/events/sched/sched_switch/filter
echo 'stacktrace if next_pid == 0' > $T/events/sched/sched_switch/trigger
echo 1 > $T/events/sched/sched_switch/enable
echo 1 > $T/tracing_on" || fail "cannot start tracing in the guest"
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" -o "$prof" 2>&1)
rc=$?
# The guest's idle time per path of its workers, summed in the guest (the
# trace is large; only the sums cross the serial line): "LOCK PIPE SLEEP N"
# in percent of the workers' idle time, N their idle periods.
truth=$(guest_sh "echo 0 > $T/tracing_on
awk '
/ sched_switch: / {
	match(\$0, /\\[[0-9]+\\]/); cpu = substr(\$0, RSTART + 1, RLENGTH - 2) + 0
	for (i = 1; i < NF; i++) if (\$(i + 1) == \"sched_switch:\") { ts = \$i; sub(/:\$/, \"\", ts) }
	if (\$0 ~ /next_pid=0 /) {
		start[cpu] = ts; worker[cpu] = \$0 ~ /prev_comm=ls-worker/
		path[cpu] = \"other\"; cur = cpu; stack = 1; next
	}
	stack = 0
	if (\$0 ~ /prev_pid=0 / && (cpu in start)) {
		if (worker[cpu]) { t[path[cpu]] += ts - start[cpu]; n++ }
		delete start[cpu]
	}
	next
}
stack && / => / && path[cur] == \"other\" {
	if (\$0 ~ /futex_wait/) path[cur] = \"lock\"
	else if (\$0 ~ /pipe_read/) path[cur] = \"pipe\"
	else if (\$0 ~ /nanosleep/) path[cur] = \"sleep\"
}
END {
	w = t[\"lock\"] + t[\"pipe\"] + t[\"sleep\"]
	if (w > 0) printf \"%.2f %.2f %.2f %d\\n\", t[\"lock\"] * 100 / w, t[\"pipe\"] * 100 / w, t[\"sleep\"] * 100 / w, n
}' $T/trace
echo '!stacktrace if next_pid == 0' > $T/events/sched/sched_switch/trigger
echo 0 > $T/events/sched/sched_switch/enable
echo 0 > $T/events/sched/sched_switch/filter; echo > $T/trace")
[ "$rc" = 0 ] || fail "idlevm profile failed ($rc): $out"
[ -n "$truth" ] || fail "no idle time of the workers in the guest's trace"

folded=$("$idlevm" report -f folded -K to_idle --value idle_time "$prof" 2>/dev/null) ||
	fail "idlevm report --value idle_time failed"
ours=$(lockstorm_split "$folded")
[ -n "$ours" ] || fail "no worker to-idle samples with a time"
echo "workers' idle time by path (wait_for_lock read_request throttle, %):"
echo "  the guest's trace: $truth (periods)"
echo "  idlevm:            $ours (ns)"
compare_splits "$ours" "$truth" 5 || fail "idle-time split off by more than 5 points"

# The text report says how much was timed; the pprof has it as idle_ns.
text=$("$idlevm" report --value idle_time "$prof" 2>/dev/null)
echo "$text" | grep -E '^== (why idle|top to-idle stacks by idle time)' ||
	fail "no why-idle block or idle-time stacks in the text report"
"$idlevm" report -f pprof -o "$pb" "$prof" 2>/dev/null || fail "pprof report failed"
sum=$("$idlevm" report -f folded -K to_idle --value idle_time "$prof" 2>/dev/null |
	awk '{ s += $NF } END { printf "%.0f", s }')
top=$(go tool pprof -symbolize=none -top -sample_index=idle_ns -unit=ns "$pb" 2>&1) ||
	fail "go tool pprof -sample_index=idle_ns failed: $top"
total=$(echo "$top" | sed -n 's/.*Total samples = \([0-9.]*\)ns.*/\1/p')
echo "idle_ns in pprof: $total ns; folded --value idle_time: $sum ns"
assert_eq "$total" "$sum" "pprof idle_ns total"
