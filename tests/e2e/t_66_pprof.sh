# idlevm's pprof as the real pprof tool reads it (`go tool pprof` from
# Debian's golang-go), on a profile of lockstorm:
#  - -raw: one mapping per file (the executable with its build-id and file
#    name, placed by its code segment; [kernel.kallsyms] with the guest
#    kernel's build-id), the profile's start time to the nanosecond and
#    its duration;
#  - -traces: every stack of every kind, with its count, as idlevm's
#    folded report has it; -top: each user function's flat and cumulative
#    counts as the folded report gives them, and the totals of the text
#    report;
#  - a profile taken with no host copy of the executable keeps its
#    build-id and a mapping, so a symbolizer that has the file names the
#    frames idlevm left raw: pprof does, given the file by name.
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac
. tests/e2e/lib_pprof.sh
command -v go >/dev/null || fail "go missing (golang-go: make deps)"

prof=$IVM_RUNDIR/t66.prof
pb=$IVM_RUNDIR/t66.pb.gz
bin=$IVM_BUILD/guest/lockstorm-fp
seconds=${IVM_PROFILE_SECONDS:-5}
[ -x "$bin" ] || fail "no $bin"
bin_id=$(readelf -n "$bin" | awk '/Build ID/ { print $3 }')
k_id=$(readelf -n "$IVM_VMLINUX" | awk '/Build ID/ { print $3 }')
[ -n "$bin_id" ] && [ -n "$k_id" ] || fail "no build-ids in $bin, $IVM_VMLINUX"

out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$seconds" -o "$prof" \
	--binary "$bin" --no-report 2>&1) || fail "idlevm profile failed: $out"
text=$("$idlevm" report -n 1000 "$prof" 2>/dev/null) || fail "idlevm report failed"
"$idlevm" report -f pprof -o "$pb" "$prof" 2>/dev/null || fail "pprof report failed"

# 1. -raw: mappings, time, duration.
raw=$(go tool pprof -raw "$pb" 2>&1) || fail "go tool pprof -raw failed: $raw"
echo "$raw" | sed -n '/^Mappings/,$p'
echo "$raw" | grep -Eq "^1: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ $(realpath "$bin") $bin_id \[FN\]" ||
	fail "the executable is not the first mapping with its build-id"
echo "$raw" | grep -Eq "^[0-9]+: 0xffffffff[0-9a-f]+/0xffffffff[0-9a-f]+/0x0 \[kernel\.kallsyms\] $k_id \[FN\]" ||
	fail "no [kernel.kallsyms] mapping with the vmlinux's build-id"
# One mapping per file: every one has a build-id, none twice (other
# processes' executables the host has no copy of have no file name).
maps=$(echo "$raw" | sed -n '/^Mappings/,$p' | sed 's/ \[FN\].*//')
n=$(echo "$maps" | grep -c "^[0-9]*: ")
ids=$(echo "$maps" | awk '/^[0-9]+: / && $NF ~ /^[0-9a-f]+$/ { print $NF }' | sort -u | wc -l)
assert_eq "$ids" "$n" "mappings with distinct build-ids"
start_ns=$(echo "$text" | sed -n 's/^  start_ns: //p')
[ -n "$start_ns" ] || fail "no start_ns in the profile"
frac=$(printf '%09d' $((start_ns % 1000000000)) | sed 's/0*$//')
want="Time: $(date -u -d "@$((start_ns / 1000000000))" '+%F %T')${frac:+.$frac} +0000 UTC"
echo "$raw" | grep -qxF "$want" || fail "pprof time is not '$want': $(echo "$raw" | grep '^Time')"
echo "$raw" | grep -q "^Duration: " || fail "no Duration in go tool pprof -raw"
dur=$(pprof_field "$pb" duration_nanos | awk '{ printf "%.2f", $1 / 1e9 }')
echo "pprof: $want, duration $dur s of a $seconds s run"
awk -v d="$dur" -v s="$seconds" 'BEGIN { exit !(d >= s && d < s + 60) }' ||
	fail "duration ${dur}s for a ${seconds}s run"

# 2. -traces and -top against idlevm's own reports, kind by kind.
totals=$(echo "$text" | sed -n 's/^  samples: [0-9]* (to_idle \([0-9]*\), from_idle \([0-9]*\), on_cpu \([0-9]*\))$/\1 \2 \3/p')
i=0
for kind in to_idle from_idle on_cpu; do
	i=$((i + 1))
	want=$(echo "$totals" | cut -d' ' -f$i)
	assert_eq "$(pprof_total "$pb" "$kind")" "$want" "$kind total"
	folded=$("$idlevm" report -f folded -K "$kind" "$prof" 2>/dev/null)
	a=$(pprof_stacks "$pb" "$kind")
	b=$(folded_stacks "$folded")
	[ "$a" = "$b" ] || fail "$kind stacks differ (< pprof, > idlevm):
$(diff <(echo "$a") <(echo "$b") | head -20)"
	a=$(folded_user_functions "$folded")
	b=$(pprof_functions "$pb" "$kind" $(echo "$a" | awk '{ print $1 }'))
	[ "$a" = "$b" ] || fail "$kind user functions differ (< idlevm, > pprof):
$(diff <(echo "$a") <(echo "$b") | head -20)"
	echo "$kind: $want samples, $(echo "$b" | wc -l) user functions agree; top by cum:" \
		$(echo "$b" | sort -k3,3nr -k1,1 | head -4 | awk '{ print $1 "=" $3 }')
done
# 3. The why-idle causes as labels: to-idle samples carry the wake cause
# of the period they began, which -tagfocus filters by; no more of them
# than there are to-idle samples, and some (the held ones are matched).
all=$(pprof_total "$pb" to_idle)
tagged=$(go tool pprof -symbolize=none -tags -sample_index=to_idle "$pb" 2>/dev/null |
	awk '$1 == "wake:" && $2 == "Total" { print int($3) }')
echo "to-idle samples with a wake label: ${tagged:-0} of $all"
[ "${tagged:-0}" -gt 0 ] && [ "$tagged" -le "$all" ] ||
	fail "to-idle samples with a wake label: ${tagged:-none} of $all"
sum=0
for w in device ipi timer unknown; do
	n=$(go tool pprof -symbolize=none -top -sample_index=to_idle \
		-tagfocus="wake=$w" "$pb" 2>/dev/null |
		sed -n 's/^Showing nodes accounting for \([0-9]*\), .*/\1/p')
	sum=$((sum + ${n:-0}))
done
assert_eq "$sum" "$tagged" "the wake causes' to-idle samples"
# The plain command a user types names lockstorm's own functions.
top=$(go tool pprof -top -cum -nodecount=30 "$pb" 2>&1) || fail "go tool pprof -top failed"
echo "$top" | grep -Eq ' (worker_main|wait_for_lock)$' ||
	fail "go tool pprof -top names no lockstorm function: $top"

# 3. No host copy of the executable: its frames stay addresses in idlevm's
# report, but the pprof keeps the build-id; pprof, given the file, names
# them.
prof2=$IVM_RUNDIR/t66-nobin.prof
pb2=$IVM_RUNDIR/t66-nobin.pb.gz
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$seconds" -o "$prof2" \
	--no-report 2>&1) || fail "idlevm profile without --binary failed: $out"
"$idlevm" report -f pprof -o "$pb2" "$prof2" 2>/dev/null || fail "pprof report failed"
raw=$(go tool pprof -symbolize=none -raw "$pb2" 2>&1)
# (Placed where the guest had its code, from the profile's own record of
# it, or over all addresses when that is unknown.)
m=$(echo "$raw" | awk -v id="$bin_id" '/^[0-9]+: 0x[0-9a-f]+\/0x[0-9a-f]+\/0x[0-9a-f]+ / && $NF == id { print $1 }')
[ -n "$m" ] || fail "no mapping with the executable's build-id: $(echo "$raw" | sed -n '/^Mappings/,$p')"
echo "$raw" | grep -q "M=${m%:} worker_main" && fail "worker_main named without the binary?"
# A symbolizer with the file names them: `go tool pprof BINARY PROFILE`
# gives the first mapping its file (go tool pprof itself matches files by
# name, not by build-id; a backend finds it by the build-id kept here).
sym=$(go tool pprof -raw "$bin" "$pb2" 2>&1) || fail "go tool pprof BINARY failed: $sym"
echo "$sym" | grep -Eq "M=${m%:} worker_main [^ ]*lockstorm\.c:[0-9]+ " ||
	fail "pprof did not name the frames from the binary: $(echo "$sym" | grep "M=${m%:}" | head)"
echo "with the binary, pprof names: $(echo "$sym" | grep -Eo "M=${m%:} [a-z_]+ [^ ]*lockstorm.c:[0-9]+" | sort -u | head -3 | tr '\n' ' ')"
