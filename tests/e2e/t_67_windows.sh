# Continuous windows: `idlevm profile --window SEC --output-dir DIR -D
# 3*SEC` leaves 3 whole windows (each profile with its END record and the
# process names it needs, each pprof read by `go tool pprof` with the same
# totals), and the windows' samples add up to the run's.  IVM_WINDOW_SECONDS (default 20) sets SEC:
# the issue's 3-minute run is IVM_WINDOW_SECONDS=60 with
# IVM_TEST_TIMEOUT=400.
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac
. tests/e2e/lib_pprof.sh
command -v go >/dev/null || fail "go missing (golang-go: make deps)"

sec=${IVM_WINDOW_SECONDS:-20}
dir=$IVM_RUNDIR/t67
rm -rf "$dir"
# No budget: the windows' counts must add up to the run's exactly
# (under one they are estimates: t_62_budget).
out=$("$idlevm" profile --domain "$IVM_DOMAIN" --window "$sec" --cpu-budget 0 \
	--output-dir "$dir" -D $((3 * sec)) --binary "$IVM_BUILD/guest/lockstorm-fp" 2>&1) ||
	fail "idlevm profile --window failed: $out"
echo "$out" | tail -n 3
ls -l "$dir"
run=$(echo "$out" | sed -n 's/^idlevm: stopped after .*: \([0-9]*\) to_idle, \([0-9]*\) from_idle, \([0-9]*\) on_cpu samples.*/\1 \2 \3/p')
[ -n "$run" ] || fail "no closing line with the run's totals"
echo "$out" | grep -q "^idlevm: 3 windows in $dir (3 pprof made, 0 failed)" ||
	fail "not 3 windows with their pprof: $(echo "$out" | grep windows)"
# The pprof children say nothing of their window's run (report -q).
echo "$out" | grep -q "^== run ==" && fail "a pprof child told its window's run on stderr"

profs=$(ls "$dir"/*.prof)
assert_eq "$(echo "$profs" | wc -l)" 3 "window profiles"
assert_eq "$(ls "$dir" | grep -vc '\.prof$\|\.pb\.gz$')" 0 "other files in the window directory"
sum="0 0 0"
for prof in $profs; do
	name=$(basename "$prof" .prof)
	echo "$name" | grep -Eq "^${IVM_DOMAIN//./\\.}-[0-9]{8}T[0-9]{6}Z$" ||
		fail "window name $name"
	text=$("$idlevm" report -n 1 "$prof" 2>"$dir.err") || fail "report of $prof failed"
	grep -q "cut short\|skipped" "$dir.err" && fail "$prof is not whole: $(cat "$dir.err")"
	t=$(echo "$text" | sed -n 's/^  samples: [0-9]* (to_idle \([0-9]*\), from_idle \([0-9]*\), on_cpu \([0-9]*\))$/\1 \2 \3/p')
	[ -n "$t" ] || fail "no totals in the report of $prof"
	# Each window names its processes itself (not only the first).
	echo "$text" | grep -Eq '^ +lockstorm \[[0-9]+\]  \(process\)$' ||
		fail "$name does not name the lockstorm process"
	# Its pprof: whole, with the same totals, placed in its window.
	pb=$dir/$name.pb.gz
	[ -s "$pb" ] || fail "no $pb"
	i=0
	for kind in to_idle from_idle on_cpu; do
		i=$((i + 1))
		assert_eq "$(pprof_total "$pb" "$kind")" "$(echo "$t" | cut -d' ' -f$i)" "$name $kind pprof total"
	done
	dur=$(pprof_field "$pb" duration_nanos | awk '{ printf "%.2f", $1 / 1e9 }')
	echo "$name: to_idle/from_idle/on_cpu $t, pprof duration ${dur}s"
	awk -v d="$dur" -v s="$sec" 'BEGIN { exit !(d >= s * 0.9 && d < s + 30) }' ||
		fail "$name lasted ${dur}s, not about $sec s"
	sum=$(echo "$sum $t" | awk '{ print $1 + $4, $2 + $5, $3 + $6 }')
done
echo "windows sum $sum, run $run"
assert_eq "$sum" "$run" "the windows' samples against the run's"
