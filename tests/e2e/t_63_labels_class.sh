# idlevm profile --label tls: lockstorm keeps each iteration's request
# class in __thread variables (ls_request_class_name, ls_request_class)
# and counts its blocks per class.  The to-idle samples of its workers,
# grouped by the class idlevm read from their TLS at each capture, must
# split as those counts do, within 5 points; every worker sample must
# have a class (never "?", never "none": a worker blocks only inside a
# request), its name and number agreeing; report --group-by label:class
# makes one tree per class.
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

# The workload the guest started at boot: the lowest pid of that name (a
# lockstorm another test started and could not stop may still run).
ls_pid=$(guest_sh "pidof $IVM_WORKLOAD" | tr -cs '0-9' '\n' | grep -E '^[0-9]+$' | sort -n | head -n 1)
[ -n "$ls_pid" ] || fail "no $IVM_WORKLOAD in the guest"

# class_counts: lockstorm's own blocks per class "B S C", from the report
# SIGUSR1 asks of it (on the console).  Waits for that report however
# long the guest takes: the runner's per-test timeout is the hang guard.
class_counts() {
	local before i=0
	before=$(grep -ac '^lockstorm: t=' "$IVM_CONSOLE_LOG")
	guest_sh "kill -USR1 $ls_pid" >/dev/null || fail "cannot signal lockstorm"
	until [ "$(grep -ac '^lockstorm: t=' "$IVM_CONSOLE_LOG")" -gt "$before" ]; do
		sleep 0.2
		i=$((i + 1))
		# Now and then: is lockstorm still there to answer?
		[ $((i % 100)) = 0 ] && { guest_sh "kill -0 $ls_pid" >/dev/null ||
			fail "lockstorm is gone"; }
	done
	grep -a '^lockstorm: t=' "$IVM_CONSOLE_LOG" | tail -n 1 | tr -d '\r' |
		awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		       print v["browse_n"] + 0, v["search_n"] + 0, v["checkout_n"] + 0 }'
}

# run_classes PROF SEC: lockstorm's counts around a profile of SEC
# seconds; prints "truth B S C" (its blocks per class in that window) and
# "ours B S C" (to-idle samples of its workers by the class read from
# their TLS).  Fails on a worker sample without a class, or whose two
# labels (name and number) disagree.
run_classes() {
	local a b out folded
	a=$(class_counts)
	out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$2" -o "$1" --no-report \
		--label class=tls:ls_request_class_name:str \
		--label cid=tls:ls_request_class 2>&1) || fail "idlevm profile failed: $out"
	b=$(class_counts)
	echo "$out" | grep 'label ' >&2
	folded=$("$idlevm" report -f folded -K to_idle "$1" 2>/dev/null) ||
		fail "idlevm report failed"
	echo "$a" "$b" | awk '{ print "truth", $4 - $1, $5 - $2, $6 - $3 }'
	echo "$folded" | awk -v proc="_[$ls_pid]" '
	{ n = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";") }
	substr(f[1], length(f[1]) - length(proc) + 1) == proc && f[2] ~ /^ls-worker-/ {
		c = f[3]; sub(/^class=/, "", c); id = f[4]; sub(/^cid=/, "", id)
		want = c == "browse" ? 1 : c == "search" ? 2 : c == "checkout" ? 3 : -1
		if (want < 0 || id != want) { printf "bad worker sample: %s\n", $0 > "/dev/stderr"; bad += n }
		s[c] += n
	}
	END { print "ours", s["browse"] + 0, s["search"] + 0, s["checkout"] + 0; exit bad > 0 }'
}

# Worker samples wanted: at 900, three standard deviations of a share
# measured over them are at most 5 points (p = 0.5), so the 5 points are
# a fair test, not a coin toss.  A first run measures how fast this host
# yields them; a second, as long as that rate says, makes up the rest.
WANT=900
prof=$IVM_RUNDIR/t63-classes.prof
res=$(run_classes "$prof" 30) || fail "worker samples without their class: $res"
truth=$(echo "$res" | awk '$1 == "truth" { print $2, $3, $4 }')
ours=$(echo "$res" | awk '$1 == "ours" { print $2, $3, $4 }')
n=$(echo "$ours" | awk '{ print $1 + $2 + $3 }')
echo "run 1 (30 s): blocks by class $truth; worker to-idle samples by class $ours"
[ "$n" -gt 0 ] || fail "no to-idle sample of a lockstorm worker in 30 s"
if [ "$n" -lt "$WANT" ]; then
	sec=$(( (WANT - n) * 30 / n + 5 ))
	[ "$sec" -le 100 ] || sec=100
	res=$(run_classes "$IVM_RUNDIR/t63-classes-2.prof" "$sec") ||
		fail "worker samples without their class: $res"
	t2=$(echo "$res" | awk '$1 == "truth" { print $2, $3, $4 }')
	o2=$(echo "$res" | awk '$1 == "ours" { print $2, $3, $4 }')
	echo "run 2 ($sec s): blocks by class $t2; worker to-idle samples by class $o2"
	truth=$(echo "$truth $t2" | awk '{ print $1 + $4, $2 + $5, $3 + $6 }')
	ours=$(echo "$ours $o2" | awk '{ print $1 + $4, $2 + $5, $3 + $6 }')
fi

# Each class's share of the samples against its share of the blocks:
# within 5 points, or three standard deviations of a share over the
# samples there are when that is more (said so: then the 5 points are not
# what was shown).
echo "$truth $ours" | awk '
{
	tt = $1 + $2 + $3; to = $4 + $5 + $6
	if (tt < 100) { printf "too few blocks counted by lockstorm: %d\n", tt; exit 2 }
	split("browse search checkout", name, " ")
	printf "lockstorm blocks by class: browse %d, search %d, checkout %d; worker to-idle samples: %d, %d, %d\n", $1, $2, $3, $4, $5, $6
	for (i = 1; i <= 3; i++) {
		p = 100 * $i / tt; q = 100 * $(i + 3) / to; d = q - p
		sd = 100 * sqrt((p / 100) * (1 - p / 100) / to); tol = 3 * sd > 5 ? 3 * sd : 5
		printf "  %-8s blocks %5.1f%%  samples %5.1f%%  (%+.1f points; tolerance %.1f)\n", name[i], p, q, d, tol
		if (d > tol || -d > tol) bad = 1
		if (d > 5 || -d > 5) off5 = 1
	}
	printf "within 5 points: %s (%d samples)\n", off5 ? "no" : "yes", to
	exit bad
}' || fail "to-idle samples by TLS class differ from lockstorm's own counts"

# The report groups by it: one tree per class.
report=$("$idlevm" report --group-by label:class -K to_idle -n 0 "$prof" 2>/dev/null) ||
	fail "idlevm report --group-by label:class failed"
echo "$report" | sed -n '/samples by class/,/== top/p'
for c in browse search checkout; do
	echo "$report" | grep -qE "^ *[0-9.]+% +[0-9]+  $c\$" || fail "no $c group in the report by class"
done
