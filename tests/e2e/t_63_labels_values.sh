# idlevm profile --label, var:, tls: and key: on known values: labelset
# (static, static-pie and dynamically linked against the image's Debian
# libc) holds them in globals, __thread variables and pthread keys (one
# past the first block of 32, one reused after a delete, whose value must
# read as NULL): every to-idle sample of its workers carries exactly its
# own values; lockstorm, which lacks those symbols, carries none ("-").
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

dir=/tmp/t63
cleanup() {
	guest_sh "kill \$(cat $dir/pids 2>/dev/null) 2>/dev/null; rm -rf $dir" >/dev/null 2>&1
}
trap cleanup EXIT

guest_sh "mkdir -p $dir && for b in labelset labelset-pie labelset-dyn; do
		/bin/\$b --threads 2 --sleep-ms 3 >$dir/\$b.out 2>&1 &
		echo \$! >>$dir/pids
	done" >/dev/null || fail "cannot start labelset"
# Until the three say they are ready, however long the guest takes (the
# runner's per-test timeout is the hang guard); a copy that exits fails.
for ((;;)); do
	start=$(guest_sh "cat $dir/*.out; for p in \$(cat $dir/pids); do kill -0 \$p 2>/dev/null || echo gone=\$p; done") ||
		fail "cannot read labelset's output"
	[ "$(echo "$start" | grep -c 'labelset: ready')" = 3 ] && break
	echo "$start" | grep -q '^gone=' && fail "labelset exited: $start"
	sleep 1
done
echo "$start" | grep 'ready'
# tid -> worker number, from what each copy says.
workers=$(echo "$start" | sed -n 's/.*worker=\([0-9]*\) tid=\([0-9]*\) .*/\2 \1/p')
[ "$(echo "$workers" | wc -l)" = 6 ] || fail "expected 6 labelset workers: $workers"

# One profile with every source and type; every to-idle sample of a
# labelset worker must carry exactly its values.  Each build must be
# sampled: a loaded host may leave one out of a run, so up to four runs
# (each checked whole), until all three were.
sampled=""
for run in 1 2 3 4; do
	prof=$IVM_RUNDIR/t63-labelset-$run.prof
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
	folded=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null) ||
		fail "idlevm report failed"
	res=$(echo "$folded" | awk -v workers="$workers" '
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
		for (p in ok) printf "sampled %s %d\n", p, ok[p]
		printf "lockstorm: %d to-idle samples, without labelset'\''s labels\n", others
		exit bad > 0
	}') || fail "labelset's samples do not carry exactly its values: $res"
	echo "run $run:"
	echo "$res" | sed 's/^sampled \(.*\) \([0-9]*\)$/\1: \2 to-idle samples of its workers, all with their values/'
	sampled=$( (echo "$sampled"; echo "$res" | awk '$1 == "sampled" { print $2 }') | grep . | sort -u)
	[ "$(echo "$sampled" | grep -c .)" = 3 ] && break
done
[ "$(echo "$sampled" | grep -c .)" = 3 ] ||
	fail "not every labelset build was sampled in 4 runs: $(echo $sampled)"
