# idlevm stack on lockstorm's blocked workers, built with and without frame
# pointers: the user part is the workload's known call chain, the kernel
# part agrees with the guest's own /proc/TID/stack.

# to_addresses LINES: each "NAME+0xOFF" as "ADDRESS NAME+0xOFF", its
# link-time address (hex) by the guest's System.map (a name it lacks is
# its own address).
to_addresses() {
	echo "$1" | awk -v map="$IVM_SYSTEM_MAP" '
		BEGIN { while ((getline l < map) > 0) { split(l, f, " "); a[f[3]] = f[1] } }
		{ n = $0; off = 0
		  if (match(n, /\+0x[0-9a-f]+$/)) { off = strtonum(substr(n, RSTART + 1)); n = substr(n, 1, RSTART - 1) }
		  if (n in a) printf "%x %s\n", strtonum("0x" a[n]) + off, $0
		  else print $0, $0 }'
}

# check_worker BUILD TID: compare one worker; returns 2 if it moved.
check_worker() {
	local build=$1 tid=$2 before after ours kproc kours path
	before=$(guest_sh "cat /proc/$tid/stack")
	# No moment it held still (it ran between its blocking paths): moved.
	if ! ours=$("$idlevm" stack --domain "$IVM_DOMAIN" --tid "$tid" \
		--binary "$IVM_BUILD/guest/$build" 2>&1); then
		case $ours in *"no consistent stack"*) return 2 ;; esac
		fail "idlevm stack --tid $tid failed: $ours"
	fi
	after=$(guest_sh "cat /proc/$tid/stack")
	[ "$before" = "$after" ] || return 2
	echo "$ours"
	# /proc: "[<0>] pipe_read+0x3df/0x4a0"; ours: "#2 0x... pipe_read+0x3df [k]"
	kproc=$(echo "$before" | sed -n 's/^\[<[0-9a-f]*>\] \([^/ ]*\)\/.*/\1/p')
	kours=$(echo "$ours" | awk '$NF == "[k]" { print $3 }')
	# The same byte may be named after two symbols (kallsyms takes
	# entry_SYSCALL_64_after_hwframe, a label inside entry_SYSCALL_64,
	# which the debuginfo names): compare link-time addresses.
	kproc=$(to_addresses "$kproc")
	kours=$(to_addresses "$kours")
	# Every /proc frame, in order and to the byte; ours may also show the
	# scheduler functions that /proc/PID/stack leaves out.
	echo "$kproc" | awk -v ours="$kours" '
		BEGIN { n = split(ours, o, "\n"); j = 1 }
		{ while (j <= n && substr(o[j], 1, index(o[j], " ") - 1) != $1) {
			if (o[j] !~ /schedule|nanosleep|futex_wait_queue/) { print "extra frame " o[j]; bad = 1 }
			j++ }
		  if (j > n) { print "missing " $2; exit 1 }
		  j++ }
		END { exit bad }' || fail "kernel part of tid $tid differs from /proc/$tid/stack:
$before
---
$ours"
	# The user part: the workload's chain for the path it blocks in.
	case $before in
	*futex_wait*) path="__lll_lock_wait ___pthread_mutex_lock wait_for_lock worker_main start_thread" ;;
	*pipe_read*) path="read_request worker_main start_thread" ;;
	*nanosleep*) path="throttle worker_main start_thread" ;;
	*) fail "tid $tid blocks in an unexpected place: $before" ;;
	esac
	echo "$ours" | awk -v want="$path" '
		BEGIN { n = split(want, w, " "); j = 1 }
		$NF != "[k]" && $1 ~ /^#/ { f = $3; sub(/\+0x[0-9a-f]+$/, "", f); if (j <= n && f == w[j]) j++ }
		END { exit j <= n }' || fail "user part of tid $tid is not $path:
$ours"
	return 0
}

# The image installs build/guest/lockstorm-fp as /bin/lockstorm.
pid=""
trap '[ -z "$pid" ] || guest_stop "$pid"' EXIT
for build in lockstorm-fp lockstorm-nofp; do
	exe=/bin/${build%-fp}
	# Long blocks: a check is two guest shell round trips around idlevm,
	# seconds on a loaded host, and a worker that moves in between is
	# only retried once: blocks last several of those round trips.
	read -r blocks secs <<<"$(lockstorm_blocks 7000 9000 90 2)" ||
		fail "the guest shell does not answer"
	pid=$(guest_sh "setsid $exe --threads 4 --seconds $secs --block-ms $blocks --report-interval 0 >/dev/null 2>&1 & echo \$!")
	case $pid in ''|*[!0-9]*) fail "cannot start $build in the guest: $pid" ;; esac
	checked=0 moved=0
	tids=$(wait_for_guest_threads "$pid" ls-worker 4) ||
		fail "$build: no workers found in the guest"
	for tid in $tids; do
		for try in 1 2; do
			check_worker "$build" "$tid"
			case $? in
			0) checked=$((checked + 1)); break ;;
			2) moved=$((moved + 1)) ;;
			esac
		done
	done
	guest_stop "$pid"
	pid=""
	echo "$build: $checked workers checked, $moved moved during the check"
	[ "$checked" -ge 2 ] || fail "$build: only $checked workers held still long enough"
done

# A whole process, and a thread that does not exist.
out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid 1 2>&1) || fail "stack --pid 1: $out"
echo "$out" | grep -q "^tid 1 " || fail "no stack for init: $out"
if out=$("$idlevm" stack --domain "$IVM_DOMAIN" --tid 999999 2>&1); then
	fail "a missing thread succeeded: $out"
fi
echo "$out" | grep -q "no guest thread 999999" || fail "unclear message: $out"
