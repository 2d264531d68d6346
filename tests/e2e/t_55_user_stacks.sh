# User stacks with no host copy of anything: lockstorm built dynamically
# against the guest's libc (Debian 12's, as on web01) without frame
# pointers, started plainly, from a fork child (no exec) and from a signal
# handler.  With no --binary, --symdir or debuginfod:
#  - idlevm stack: every user frame is named (the guest's .dynsym) or
#    FILE+0xADDR, never '?'; no stack is truncated; lock waits in libc show
#    their callers; threads end in libc's clone3, main threads reach
#    __libc_start_main, through the signal frame for the one started from
#    a handler, and the fork child's executable is known;
#  - --binary of another executable never names these frames (it once
#    printed _end+0x7f...); --binary of the right one names its functions;
#  - idlevm profile + report: at least 90% of these processes' to-idle
#    samples reach the thread start or __libc_start_main through libc,
#    every user frame named or FILE+0xADDR; with --symdir holding the
#    executable by build-id, its frames get their names and file:line.

dyn=/bin/lockstorm-dyn
args="--threads 2 --seconds 150 --block-ms 1000:2000 --report-interval 0"
pids=""
for how in "" "--fork 1" "--from-signal 1"; do
	p=$(guest_sh "setsid $dyn $args $how >/dev/null 2>&1 & echo \$!")
	case $p in ''|*[!0-9]*) fail "cannot start $dyn $how: $p" ;; esac
	pids="$pids $p"
done
set -- $pids
plain=$1 forked=$2 signalled=$3
# Every process of $dyn goes, the fork child too: one left running
# would be in the next test's profile.
cleanup() { guest_sh "kill $pids 2>/dev/null; pkill -x lockstorm-dyn; true" >/dev/null; }
trap cleanup EXIT
sleep 3
# The fork child does the work: its pid is the parent's child.
child=$(guest_sh "for d in /proc/[0-9]*; do [ \"\$(awk '{print \$4}' \$d/stat 2>/dev/null)\" = $forked ] && echo \${d#/proc/}; done")
case $child in ''|*[!0-9]*) fail "no fork child of $forked: $child" ;; esac

# user_lines OUT: the numbered user frames of idlevm stack output.
user_lines() {
	echo "$1" | awk '$1 ~ /^#/ && $NF != "[k]"'
}

check_process() {
	local pid=$1 what=$2 out bad
	out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid "$pid" 2>&1) ||
		fail "$what: idlevm stack --pid $pid: $out"
	echo "== $what (pid $pid)"
	echo "$out"
	bad=$(user_lines "$out" | awk '$3 == "?" || $3 ~ /^0x/')
	[ -z "$bad" ] || fail "$what: unnamed user frames:
$bad"
	echo "$out" | grep -q "(truncated" && fail "$what: a truncated stack:
$out"
	echo "$out" | grep -q "user frames by the CFI the guest holds" ||
		fail "$what: not unwound by the guest's CFI:
$out"
	# Workers: their last user frame is libc's (clone3); the lock
	# waiters show pthread_mutex_lock and its caller.
	# (A worker that never held still has no stack to judge.)
	echo "$out" | awk '
		/^tid / { if (worker && last != "" && last !~ /libc\.so\.6/) bad = 1
			  worker = $3 ~ /ls-worker/; last = "" }
		$1 ~ /^#/ && $NF != "[k]" { last = $3 }
		END { if (worker && last != "" && last !~ /libc\.so\.6/) bad = 1; exit bad }' ||
		fail "$what: a worker's stack does not end in libc"
	echo "$out" | awk -v pid="$pid" '
		$1 == "tid" && $2 == pid { main = 1; next }
		$1 == "tid" { main = 0 }
		main && /__libc_start_main/ { ok = 1 }
		END { exit !ok }' || fail "$what: main thread misses __libc_start_main"
	stack_out=$out
}

check_process "$plain" "plain"
check_process "$child" "fork child"
check_process "$signalled" "started from a signal handler"
# From the handler back to main: the handler's frames, then raise.
echo "$stack_out" | awk -v pid="$signalled" '
	$1 == "tid" && $2 == pid { main = 1; next }
	$1 == "tid" { main = 0 }
	main && $3 ~ /^raise\+/ { ok = 1 }
	END { exit !ok }' || fail "the signal frame was not unwound through:
$stack_out"

# Another executable's symbols never name these frames.
out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid "$plain" \
	--binary "$IVM_BUILD/guest/lockstorm-nofp" 2>&1) || fail "stack --binary nofp: $out"
echo "$out" | grep -q "_end+" && fail "a foreign binary named a frame:
$out"
# The right one names the executable's functions.
out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid "$plain" \
	--binary "$IVM_BUILD/guest/lockstorm-dyn" 2>&1) || fail "stack --binary dyn: $out"
echo "$out" | grep -q " worker_main+0x[0-9a-f]* .*lockstorm.c:" ||
	fail "--binary lockstorm-dyn does not name worker_main:
$out"

# A profile, reported with nothing but the file.
prof=$IVM_RUNDIR/ustacks.prof
"$idlevm" profile --domain "$IVM_DOMAIN" -D 15 -F 0 -o "$prof" >/dev/null 2>"$IVM_RUNDIR/ustacks.err" ||
	fail "profile: $(cat "$IVM_RUNDIR/ustacks.err")"
folded=$("$idlevm" report "$prof" -f folded 2>&1) || fail "report: $folded"
echo "$folded" | awk -v pids=" $plain $child $signalled " '
	$0 ~ /^to_idle;/ {
		# The process field: "COMM_[PID]", or "pid_PID" with no name.
		split($1, f, ";"); p = f[2]
		if (match(p, /\[[0-9]+\]$/)) p = substr(p, RSTART + 1, RLENGTH - 2)
		else sub(/^pid_/, "", p)
		if (index(pids, " " p " ") == 0) next
		n++
		bare = 0
		for (i = 4; i <= length(f); i++)
			if (f[i] !~ /_\[k\]/ && f[i] ~ /^0x/) bare = 1
		if (!bare && (f[4] ~ /^libc\.so\.6\+/ || $0 ~ /;__libc_start_main;/)) ok++
		else print "not reaching the start: " $0
	}
	END { printf "to-idle samples of the dynamic processes: %d, reaching the start through libc: %d\n", n, ok
	      exit !(n >= 5 && ok * 10 >= n * 9) }' || fail "too few whole stacks"

# By build-id in a symbol directory: names and file:line.
symdir=$IVM_RUNDIR/ustacks-symdir
id=$(readelf -n "$IVM_BUILD/guest/lockstorm-dyn" | awk '/Build ID/ { print $3 }')
mkdir -p "$symdir/.build-id/${id:0:2}"
ln -sf "$IVM_BUILD/guest/lockstorm-dyn" "$symdir/.build-id/${id:0:2}/${id:2}"
text=$("$idlevm" report "$prof" -K to_idle -n 500 --symdir "$symdir" 2>&1) ||
	fail "report --symdir: $text"
echo "$text" | grep -q "worker_main  .*lockstorm.c:" ||
	fail "report --symdir does not name worker_main with file:line:
$text"
