# --cpu-budget: a run that would cost more than its budget watches the
# guest only in some slices of time, says how much, and its reports scale
# the counts back (vmm/profile/cpu_budget.h).
#  1. --cpu-budget 2 against the guest's own trace (idle_events_check, as
#     t_62): the per-thread to-idle and from-idle splits hold within t_62's
#     bounds; the closing line says what share was watched (under 90%:
#     unbudgeted, lockstorm costs several times 2% of a core here); the
#     text report and the pprof say the figures are estimated, and agree
#     within 1% (each rounds its stacks' scaled counts).
#  2. A continuous run keeps to 1% by default: two windows, each whole,
#     estimated, its pprof's totals the report's.
# idlevm's CPU against the budget is printed, not asserted (a timing:
# tests/bench/profile_cost.sh measures it).
. tests/e2e/lib_profile.sh
. tests/e2e/lib_idle_truth.sh
. tests/e2e/lib_pprof.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac
command -v go >/dev/null || fail "go missing (golang-go: make deps)"

# 1. Accuracy under a budget.
log=$IVM_RUNDIR/t62b.log
# The idle switch counts over the window: within 10 rather than 2.  Under a
# budget the window's two ends are periods of different watched slices, and
# in one CI run of four idlevm read 5 and 6 fewer than the trace's 6,199
# and 6,629 (cause not found yet; unbudgeted t_62 stays within 2).
# In a subshell, so that its fail ends it alone, its output kept whole
# (not through a pipe under pipefail: `echo "$out" | grep -q` inside may
# see echo killed by SIGPIPE once grep has its match, a false failure).
(
	IVM_T62_SWITCH_SLACK=10 IVM_PROFILE_SECONDS=20 \
		IVM_T62_ARGS="--cpu-budget 2" IVM_T62_NO_TIMELINE=1 \
		idle_events_check t62b
) >"$log"
rc=$?
cat "$log"
[ "$rc" = 0 ] || fail "accuracy under --cpu-budget 2 (above)"
prof=$IVM_RUNDIR/t62b.prof
line=$(grep "CPU budget 2% of a core" "$log") || fail "no closing line on the budget"
grep "host CPU" "$log" | tail -n 1
watched=$(echo "$line" | sed -n 's/.* s (\([0-9.]*\)%, .*/\1/p')
scale=$(echo "$line" | sed -n 's/.*reports scale counts by \([0-9.]*\)$/\1/p')
echo "watched ${watched}% of the run, scale $scale"
awk -v w="$watched" 'BEGIN { exit !(w > 0 && w < 90) }' ||
	fail "watched '$watched'% under a 2% budget: the budget changed nothing"
text=$("$idlevm" report -n 1 "$prof" 2>/dev/null) || fail "report failed"
est=$(echo "$text" | grep '^  estimated: the guest was watched') ||
	fail "the report does not say its counts are estimated"
echo "$est"
recorded=$(echo "$est" | sed -n 's/.*(\([0-9]*\) samples recorded)$/\1/p')
t=$(echo "$text" | sed -n 's/^  samples: \([0-9]*\) (to_idle \([0-9]*\), from_idle \([0-9]*\), on_cpu \([0-9]*\))$/\1 \2 \3 \4/p')
[ -n "$t" ] && [ -n "$recorded" ] || fail "no sample totals in the report"
# The totals are the recorded samples scaled (rounded per stack).
echo "$t $recorded $scale" | awk '{ e = $5 * $6; printf "report totals %d, recorded %d x %.2f = %.0f\n", $1, $5, $6, e
	d = $1 - e; if (d < 0) d = -d; exit !(d <= 0.01 * e + 50) }' ||
	fail "the report's totals are not the recorded samples scaled"
pb=$IVM_RUNDIR/t62b.pb.gz
"$idlevm" report -f pprof -o "$pb" "$prof" 2>/dev/null || fail "pprof report failed"
go tool pprof -comments "$pb" 2>/dev/null | grep -q 'counts: estimated' ||
	fail "the pprof does not say its values are estimated"
# The same estimate, each stack rounded on its own (the pprof's stacks
# are split further, by their cause labels): within 1%.
close() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 0.01 * b + 2) }' ||
		fail "$3: $1 against $2"
}
i=1
for kind in to_idle from_idle on_cpu; do
	i=$((i + 1))
	close "$(pprof_total "$pb" "$kind")" "$(echo "$t" | cut -d' ' -f$i)" "pprof $kind total"
done

# 2. The continuous default: 1% of a core.
dir=$IVM_RUNDIR/t62b-windows
rm -rf "$dir"
out=$("$idlevm" profile --domain "$IVM_DOMAIN" --window 8 --output-dir "$dir" \
	-D 16 2>&1) || fail "idlevm profile --window failed: $out"
echo "$out" | grep -E "CPU budget|host CPU|windows in"
echo "$out" | grep -q "CPU budget 1% of a core" || fail "a continuous run has no budget by default"
n=0
for prof in "$dir"/*.prof; do
	n=$((n + 1))
	text=$("$idlevm" report -n 1 "$prof" 2>"$dir.err") || fail "report of $prof failed"
	grep -q "cut short\|skipped" "$dir.err" && fail "$prof is not whole: $(cat "$dir.err")"
	echo "$text" | grep -q '^  estimated: the guest was watched' ||
		fail "$prof does not say its counts are estimated"
	t=$(echo "$text" | sed -n 's/^  samples: [0-9]* (to_idle \([0-9]*\), from_idle \([0-9]*\), on_cpu \([0-9]*\))$/\1/p')
	close "$(pprof_total "${prof%.prof}.pb.gz" to_idle)" "$t" "$(basename "$prof") pprof to_idle total"
done
rm -f "$dir.err"
assert_eq "$n" 2 "windows"
