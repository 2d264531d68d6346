# idlevm profile --label: business categories read from the guest's own
# variables at sample time.
#  1. lockstorm keeps each iteration's request class in __thread variables
#     and counts its blocks per class: the to-idle samples of its workers,
#     by the class read from their TLS, split as those counts (within 5
#     points), and every worker sample has a class (never "?").
#  2. labelset (static, static-pie and dynamically linked against the
#     image's Debian libc) holds known values in globals, __thread
#     variables and pthread keys (one past the first block of 32, one
#     reused after a delete): every sample of its workers carries exactly
#     them; other programs, which lack the symbols, carry none.
. tests/e2e/lib_profile.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

dir=/tmp/t64
cleanup() {
	guest_sh "kill \$(cat $dir/pids 2>/dev/null) 2>/dev/null; rm -rf $dir" >/dev/null 2>&1
}
trap cleanup EXIT

# ---- 1. lockstorm's request classes ------------------------------------------

ls_pid=$(guest_sh "pidof $IVM_WORKLOAD" | awk '{ print $1 }')
[ -n "$ls_pid" ] || fail "no $IVM_WORKLOAD in the guest"

# lockstorm's own per-class block counts, as its next report says them
# (SIGUSR1 asks for one; it goes to the console).
class_counts() {
	local n before
	before=$(grep -ac '^lockstorm: t=' "$IVM_CONSOLE_LOG")
	guest_sh "kill -USR1 $ls_pid" >/dev/null || fail "cannot signal lockstorm"
	for i in $(seq 1 100); do
		n=$(grep -ac '^lockstorm: t=' "$IVM_CONSOLE_LOG")
		[ "$n" -gt "$before" ] && break
		sleep 0.2
	done
	grep -a '^lockstorm: t=' "$IVM_CONSOLE_LOG" | tail -n 1 | tr -d '\r' |
		awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		       print v["browse_n"] + 0, v["search_n"] + 0, v["checkout_n"] + 0 }'
}

# One run: lockstorm's counts around a profile; prints "truth B S C" and
# "ours B S C" (to-idle samples of its workers by the class their TLS
# held), and fails on a worker sample without a class or with classes
# that the two labels (name and number) disagree on.
run_classes() {
	local prof=$IVM_RUNDIR/t64-classes.prof a b out folded
	a=$(class_counts)
	out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 45 -o "$prof" --no-report \
		--label class=tls:ls_request_class_name:str \
		--label cid=tls:ls_request_class 2>&1) || fail "idlevm profile failed: $out"
	b=$(class_counts)
	echo "$out" | grep 'label ' >&2
	folded=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null) ||
		fail "idlevm report failed"
	echo "$a" "$b" | awk '{ print "truth", $4 - $1, $5 - $2, $6 - $3 }'
	echo "$folded" | awk '
	{ n = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";") }
	f[2] ~ /^ls-worker-/ {
		c = f[3]; sub(/^class=/, "", c); id = f[4]; sub(/^cid=/, "", id)
		want = c == "browse" ? 1 : c == "search" ? 2 : c == "checkout" ? 3 : -1
		if (want < 0 || id != want) { printf "bad worker sample: %s\n", $0 > "/dev/stderr"; bad += n }
		s[c] += n
	}
	END { print "ours", s["browse"] + 0, s["search"] + 0, s["checkout"] + 0; exit bad > 0 }'
}

# share A B C: each as a percentage of their sum.
share() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { t = a + b + c; if (t) printf "%.1f %.1f %.1f\n", 100 * a / t, 100 * b / t, 100 * c / t; else print "0 0 0" }'; }

res=$(run_classes) || fail "worker samples without their class: $res"
truth=$(echo "$res" | awk '$1 == "truth" { print $2, $3, $4 }')
ours=$(echo "$res" | awk '$1 == "ours" { print $2, $3, $4 }')
# Sampling error: with a few hundred samples a class can be off by 5
# points by chance alone; then a second run, and both together decide.
verdict() {
	local t=($1) o=($2)
	echo "lockstorm blocks by class: ${t[*]} = $(share ${t[*]}) %; to-idle samples: ${o[*]} = $(share ${o[*]}) %"
	[ $((o[0] + o[1] + o[2])) -ge 100 ] || { echo "too few worker samples"; return 2; }
	paste <(share ${t[*]} | tr ' ' '\n') <(share ${o[*]} | tr ' ' '\n') |
		awk '{ d = $1 - $2; if (d < -5 || d > 5) bad = 1 } END { exit bad }'
}
verdict "$truth" "$ours"
case $? in
0) ;;
*)
	echo "more than 5 points off (or too few samples): a second run, judged with the first"
	res=$(run_classes) || fail "worker samples without their class: $res"
	truth=$(echo "$truth $(echo "$res" | awk '$1 == "truth" { print $2, $3, $4 }')" | awk '{ print $1 + $4, $2 + $5, $3 + $6 }')
	ours=$(echo "$ours $(echo "$res" | awk '$1 == "ours" { print $2, $3, $4 }')" | awk '{ print $1 + $4, $2 + $5, $3 + $6 }')
	verdict "$truth" "$ours" || fail "to-idle samples by TLS class differ from lockstorm's own counts by more than 5 points"
	;;
esac
# The report groups by it.
report=$("$idlevm" report --group-by label:class -K to_idle -n 0 "$IVM_RUNDIR/t64-classes.prof" 2>/dev/null) ||
	fail "idlevm report --group-by label:class failed"
echo "$report" | sed -n '/samples by class/,/== top/p'
echo "$report" | grep -qE '^ *[0-9.]+% +[0-9]+  browse$' || fail "no browse group in the report by class"

# ---- 2. labelset: var, tls and key, static and dynamic -------------------------

start=$(guest_sh "mkdir -p $dir && for b in labelset labelset-pie labelset-dyn; do
		/bin/\$b --threads 2 --sleep-ms 3 >$dir/\$b.out 2>&1 &
		echo \$! >>$dir/pids
	done
	for b in labelset labelset-pie labelset-dyn; do
		i=0; while [ \$i -lt 100 ] && ! grep -q ready $dir/\$b.out; do sleep 0.1; i=\$((i + 1)); done
	done
	cat $dir/*.out") || fail "labelset did not start: $start"
echo "$start" | grep 'ready'
[ "$(echo "$start" | grep -c 'labelset: ready')" = 3 ] || fail "labelset: $start"
# tid -> worker number, from what each copy says.
workers=$(echo "$start" | sed -n 's/.*worker=\([0-9]*\) tid=\([0-9]*\) .*/\2 \1/p')
[ "$(echo "$workers" | wc -l)" = 6 ] || fail "expected 6 labelset workers: $workers"

prof=$IVM_RUNDIR/t64-labelset.prof
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 15 -o "$prof" --no-report \
	--label tenant=key:labelset_key_tenant:str \
	--label far=key:labelset_key_far \
	--label reused=key:labelset_key_reused:str \
	--label code=var:labelset_code \
	--label name=var:labelset_name:str \
	--label big=var:labelset_big:u64 \
	--label worker=tls:labelset_worker \
	--label wname=tls:labelset_worker_name:str 2>&1) ||
	fail "idlevm profile failed: $out"
echo "$out" | grep 'label '
folded=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null) || fail "idlevm report failed"
echo "$folded" | awk -v workers="$workers" '
BEGIN {
	n = split(workers, l, "\n")
	for (i = 1; i <= n; i++) { split(l[i], w, " "); num[w[1]] = w[2] }
}
{ c = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";")
  tid = f[2]; sub(/.*\//, "", tid) }
(tid in num) {
	k = num[tid]
	want = sprintf("tenant=tenant-%d;far=%d;reused=(null);code=31337;name=labelset;big=1311768467463790320;worker=%d;wname=worker-%d",
		       k, 1000 + k, k, k)
	got = f[3]; for (i = 4; i <= 10; i++) got = got ";" f[i]
	if (got != want) { printf "tid %s: %s\n  want %s\n", tid, got, want; bad++ }
	else ok[f[1]] += c
	next
}
f[1] ~ /^lockstorm_/ {
	got = f[3]; for (i = 4; i <= 10; i++) got = got ";" f[i]
	if (got != "tenant=-;far=-;reused=-;code=-;name=-;big=-;worker=-;wname=-") { printf "lockstorm has labelset labels: %s\n", got; bad++ }
	else others += c
}
END {
	for (p in ok) printf "%s: %d to-idle samples of its workers, all with their values\n", p, ok[p]
	printf "lockstorm: %d to-idle samples, without labelset'\''s labels\n", others
	for (p in ok) nok++
	if (nok != 3) { print "not every labelset build was sampled"; bad++ }
	exit bad > 0
}' || fail "labelset's samples do not carry exactly its values"
