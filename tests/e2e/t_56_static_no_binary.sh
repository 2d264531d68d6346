# lockstorm built static and without frame pointers, profiled with no
# --binary (its CFI from guest memory: a static executable has no
# .eh_frame_hdr, so .eh_frame is found through the section headers the
# guest's page cache holds) and reported with --symdir: its workers' user
# chains are those of a profile taken with --binary.

bin=$IVM_BUILD/guest/lockstorm-nofp
pid=$(guest_sh "setsid /bin/lockstorm-nofp --threads 3 --seconds 120 --block-ms 2:10 --report-interval 0 >/dev/null 2>&1 & echo \$!")
case $pid in ''|*[!0-9]*) fail "cannot start lockstorm-nofp: $pid" ;; esac
trap 'guest_sh "kill $pid 2>/dev/null; true" >/dev/null' EXIT
sleep 2

symdir=$IVM_RUNDIR/t56-symdir
id=$(readelf -n "$bin" | awk '/Build ID/ { print $3 }')
mkdir -p "$symdir/.build-id/${id:0:2}"
ln -sf "$bin" "$symdir/.build-id/${id:0:2}/${id:2}"

# chains PROFILE [REPORT ARGS]: "COUNT user;chain" of the workers' to-idle
# samples, outermost first, most frequent first.
chains() {
	local prof=$1
	shift
	"$idlevm" report -f folded -K to_idle "$@" "$prof" 2>/dev/null | awk '
		{ n = $NF; line = $0; sub(/ [0-9]+$/, "", line)
		  k = split(line, f, ";")
		  if (f[2] !~ /^ls-worker/) next
		  u = ""
		  for (i = 3; i <= k; i++)
			if (f[i] !~ /_\[[ki]\]$/) u = u (u == "" ? "" : ";") f[i]
		  c[u] += n }
		END { for (u in c) print c[u], u }' | sort -rn
}

for how in binary guest; do
	prof=$IVM_RUNDIR/t56-$how.prof
	args=""
	[ "$how" = binary ] && args="--binary $bin"
	# shellcheck disable=SC2086
	out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 10 -F 0 --pid "$pid" \
		$args -o "$prof" --no-report 2>&1) || fail "profile ($how): $out"
done
with=$(chains "$IVM_RUNDIR/t56-binary.prof" --binary "$bin")
without=$(chains "$IVM_RUNDIR/t56-guest.prof" --symdir "$symdir")
echo "== --binary:"; echo "$with"
echo "== no --binary, report --symdir:"; echo "$without"
[ -n "$without" ] || fail "no worker samples without --binary"
echo "$without" | grep -q "worker_main" || fail "no worker_main without --binary"
# Every chain of the second run is one of the first's, but for a rare one
# (at most 10% of the samples: sampling differs between two runs).  On a
# loaded host the two runs can see the workers wait differently (a wait
# missing from one run's few samples): a chain the first run lacks still
# counts when it is whole, from the thread start through worker_main, and
# every frame is a function of the binary's own symbol table.
funcs=$(nm "$bin" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u | tr '\n' ' ')
echo "$without" | awk -v with="$with" -v funcs="$funcs" '
	BEGIN { n = split(with, w, "\n"); for (i = 1; i <= n; i++) { c = w[i]; sub(/^[0-9]+ /, "", c); known[c] = 1 }
		n = split(funcs, f, " "); for (i = 1; i <= n; i++) fn[f[i]] = 1 }
	function whole(c,   k, i, fr) {
		if (c !~ /^__clone3;start_thread;worker_main;/) return 0
		k = split(c, fr, ";")
		for (i = 1; i <= k; i++) if (!(fr[i] in fn)) return 0
		return 1 }
	{ total += $1; c = $0; sub(/^[0-9]+ /, "", c)
	  if (c in known) next
	  if (whole(c)) { print "not in the --binary run, whole and named from the binary: " $0; next }
	  other += $1; print "not in the --binary run: " $0 }
	END { printf "%d of %d samples on chains the --binary run also has or whole\n", total - other, total
	      exit !(total && other * 10 <= total) }' || fail "the chains differ"
