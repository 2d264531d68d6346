# idlevm stack --symdir: each process's executable is found by the build-id
# its memory shows, in a directory holding only .build-id links, and its
# DWARF CFI unwinds the user part:
#  1. lockstorm-nofp (static, fixed address): the same user frames as
#     --binary gives (what t_45 checks), and the workload's known chain;
#  2. lockstorm-pie (static-pie, loaded at a random address): the known
#     chain, the load bias the guest's own /proc/PID/maps shows, by --symdir
#     and by --binary alike;
#  3. a symdir with only a separate .debug file (its .eh_frame is NOBITS):
#     no CFI is taken from it, frame pointers are used and said so, names
#     still come from it;
#  4. idlevm profile --symdir on the PIE, then idlevm report with no
#     --binary or --symdir: the profile's symdir and the samples' build-id
#     and bias labels name the workload's functions.

nofp=$IVM_BUILD/guest/lockstorm-nofp
pie=$IVM_BUILD/guest/lockstorm-pie
[ -x "$nofp" ] || fail "no $nofp"
[ -x "$pie" ] || fail "no $pie (Makefile: the static-pie build of lockstorm)"
guest_sh "test -x /bin/lockstorm-pie" >/dev/null ||
	fail "the guest has no /bin/lockstorm-pie (images/build-image PAYLOAD)"

symdir=$IVM_RUNDIR/t46-symdir
dbgdir=$IVM_RUNDIR/t46-dbgdir
rm -rf "$symdir" "$dbgdir"
mkdir -p "$symdir" "$dbgdir"
pids=""
cleanup() {
	local p
	for p in $pids; do guest_sh "kill $p" >/dev/null 2>&1; done
	rm -rf "$symdir" "$dbgdir"
}
trap cleanup EXIT

build_id() {
	readelf -n "$1" | awk '/Build ID/ { print $3; exit }'
}

# link BIN DIR [SUFFIX]: DIR/.build-id/xx/rest[SUFFIX] -> BIN
link_build_id() {
	local id
	id=$(build_id "$1")
	[ -n "$id" ] || fail "$1 has no build-id"
	mkdir -p "$2/.build-id/${id:0:2}"
	ln -sf "$1" "$2/.build-id/${id:0:2}/${id:2}$3"
}
link_build_id "$nofp" "$symdir"
link_build_id "$pie" "$symdir"
# Only the separate debug file of the PIE (objcopy --only-keep-debug).
pie_id=$(build_id "$pie")
mkdir -p "$dbgdir/.build-id/${pie_id:0:2}"
objcopy --only-keep-debug "$pie" "$dbgdir/.build-id/${pie_id:0:2}/${pie_id:2}.debug" ||
	fail "objcopy --only-keep-debug"
readelf -SW "$dbgdir/.build-id/${pie_id:0:2}/${pie_id:2}.debug" |
	grep -q '\.eh_frame .*NOBITS' || fail "the .debug file keeps .eh_frame: test premise"

# start EXE [BLOCK_MS SECONDS]: start lockstorm in the guest, wait for its
# 3 workers, print its pid.  Long blocks (default) keep a worker still
# through the few seconds a check (4 guest shell round trips around two
# idlevm calls) takes under TCG, longer on a loaded host.
start() {
	local pid blocks=$2 secs=$3
	if [ -z "$blocks" ]; then
		read -r blocks secs <<<"$(lockstorm_blocks 8000 10000 120 4)" ||
			fail "the guest shell does not answer"
	fi
	pid=$(guest_sh "setsid $1 --threads 3 --seconds $secs --block-ms $blocks --report-interval 0 >/dev/null 2>&1 & echo \$!")
	case $pid in ''|*[!0-9]*) fail "cannot start $1 in the guest: $pid" ;; esac
	wait_for_guest_threads "$pid" ls-worker 3 >/dev/null ||
		fail "$1: no workers in the guest"
	echo "$pid"
}

workers() {
	guest_sh "for t in /proc/$1/task/*; do c=\$(cat \$t/comm 2>/dev/null); case \$c in ls-worker*) echo \${t##*/} ;; esac; done"
}

# The user frames of `idlevm stack` output: "ADDR NAME+OFF" per line.
user_frames() {
	echo "$1" | awk '$1 ~ /^#/ && $NF != "[k]" { print $2, $3 }'
}

# expect_chain OUT BEFORE: the user part is the workload's chain for the
# path /proc/TID/stack (BEFORE) shows.
expect_chain() {
	local path
	case $2 in
	*futex_wait*) path="__lll_lock_wait ___pthread_mutex_lock wait_for_lock worker_main start_thread" ;;
	*pipe_read*) path="read_request worker_main start_thread" ;;
	*nanosleep*) path="throttle worker_main start_thread" ;;
	*) fail "unexpected blocking place: $2" ;;
	esac
	echo "$1" | awk -v want="$path" '
		BEGIN { n = split(want, w, " "); j = 1 }
		$NF != "[k]" && $1 ~ /^#/ { f = $3; sub(/\+0x[0-9a-f]+$/, "", f); if (j <= n && f == w[j]) j++ }
		END { exit j <= n }' || fail "user part is not $path:
$1"
}

# stack_held TID ARGS...: idlevm stack of TID into $held, and the guest's
# /proc/TID/stack into $held_before; status 2 when the thread's kernel
# stack changed during the read (then nothing is comparable).
held="" held_before=""
stack_held() {
	local tid=$1 after
	shift
	held_before=$(guest_sh "cat /proc/$tid/stack")
	held=$("$idlevm" stack --domain "$IVM_DOMAIN" --tid "$tid" "$@" 2>&1) ||
		fail "idlevm stack --tid $tid $*: $held"
	after=$(guest_sh "cat /proc/$tid/stack")
	[ "$held_before" = "$after" ] || return 2
}

# ---- 1. the fixed-address build: --symdir gives what --binary gives ------
check_nofp() {
	local tid=$1 a b before
	stack_held "$tid" --binary "$nofp" || return 2
	a=$held before=$held_before
	stack_held "$tid" --symdir "$symdir" || return 2
	b=$held
	[ "$before" = "$held_before" ] || return 2
	[ "$(user_frames "$a")" = "$(user_frames "$b")" ] ||
		fail "nofp tid $tid: --symdir and --binary differ:
$a
---
$b"
	expect_chain "$b" "$before"
	echo "$b" | grep -q "user frames by the CFI of $symdir/.build-id/" ||
		fail "nofp tid $tid: symdir file not used: $b"
}

# each_worker PID CHECK: CHECK every worker, again when it moved (up to 3
# tries); print how many held still for a check.
each_worker() {
	local tid try n=0
	for tid in $(workers "$1"); do
		for try in 1 2 3; do
			"$2" "$tid" && { n=$((n + 1)); break; }
		done
	done
	echo "$n"
}

pid=$(start /bin/lockstorm-nofp) || exit 1
pids="$pids $pid"
checked=$(each_worker "$pid" check_nofp) || exit 1
echo "lockstorm-nofp: $checked workers identical by --symdir and --binary"
[ "$checked" -ge 2 ] || fail "lockstorm-nofp: only $checked workers held still"
guest_sh "kill $pid" >/dev/null

# ---- 2. the static-pie build ---------------------------------------------
pid=$(start /bin/lockstorm-pie) || exit 1
pids="$pids $pid"
# The guest's own account of where the executable is: its mapping of
# file offset 0.
base=$(guest_sh "cat /proc/$pid/maps" |
	awk '$3 == "00000000" && $6 == "/bin/lockstorm-pie" { print $1; exit }')
base=${base%%-*}
[ -n "$base" ] || fail "no mapping of /bin/lockstorm-pie in the guest"
bias=0x$(echo "$base" | sed 's/^0*//')
check_pie() {
	local tid=$1 out before
	stack_held "$tid" --symdir "$symdir" || return 2
	out=$held before=$held_before
	expect_chain "$out" "$before"
	echo "$out" | grep -qF "(executable build-id $pie_id, PIE at bias $bias; user frames by the CFI of $symdir/.build-id/" ||
		fail "pie tid $tid: not the PIE at $bias by the symdir's CFI: $out"
	# The same with the PIE given as --binary.
	stack_held "$tid" --binary "$pie" || return 2
	[ "$before" = "$held_before" ] || return 2
	[ "$(user_frames "$out")" = "$(user_frames "$held")" ] ||
		fail "pie tid $tid: --binary and --symdir differ: $held"
	echo "$out"
}
checked=$(each_worker "$pid" check_pie) || exit 1
echo "$checked" | head -n -1
checked=$(echo "$checked" | tail -n 1)
echo "lockstorm-pie: $checked workers with the known chain at bias $bias"
[ "$checked" -ge 2 ] || fail "lockstorm-pie: only $checked workers held still"

# ---- 3. only a .debug file: names, but no CFI from it ----------------------
tid=$(workers "$pid" | head -n 1)
out=$("$idlevm" stack --domain "$IVM_DOMAIN" --tid "$tid" --symdir "$dbgdir" 2>&1) ||
	fail "stack with a .debug-only symdir: $out"
echo "$out"
# The executable's own CFI then comes from the guest, and the stack says
# why the host file was not used.
echo "$out" | grep -q "user frames by the CFI the guest holds: the symdir file has no usable CFI" ||
	fail "a NOBITS .eh_frame taken for CFI, or not said: $out"
echo "$out" | awk '$1 ~ /^#/ && $NF != "[k]"' | grep -q "0x[0-9a-f]* [a-z_]" ||
	fail "no user names from the .debug file: $out"

# ---- 4. profile --symdir, report by the profile's own symdir --------------
# Short blocks: many idle transitions.
guest_sh "kill $pid" >/dev/null
pid=$(start /bin/lockstorm-pie 2:10 120) || exit 1
pids="$pids $pid"
prof=$IVM_RUNDIR/t46.prof
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "${IVM_PROFILE_SECONDS:-5}" \
	-o "$prof" --symdir "$symdir" --pid "$pid" --no-report 2>&1) ||
	fail "idlevm profile --symdir failed: $out"
text=$("$idlevm" report -n 5 "$prof" 2>&1) || fail "report: $text"
echo "$text" | head -n 30
echo "$text" | grep -q "^  symdir: $symdir\$" || fail "no symdir in the profile's metadata"
folded=$("$idlevm" report -f folded "$prof" 2>/dev/null) || fail "folded report"
n=$(echo "$folded" | grep -c ';worker_main;')
echo "samples through worker_main named by the profile's symdir: $n"
[ "$n" -ge 1 ] || fail "no PIE user frame named from the profile's symdir:
$folded"
# Blocked workers sit in the executable's code: no raw run-time address
# once the bias is applied.  One CI rehearsal had a raw 0x7f... frame in
# some worker stack (not reproduced in three 5 s runs since: a rare bad
# capture, not the bias, which would put one in every stack); such
# stacks are printed and may be at most 5% of the workers' samples.
idle=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null)
raw=$(echo "$idle" | grep ';ls-worker' | grep ';0x7f')
[ -z "$raw" ] || echo "raw run-time addresses in worker stacks:
$raw"
echo "$idle" | awk '/;ls-worker/ { n += $NF; if ($0 ~ /;0x7f/) r += $NF }
	END { printf "worker to-idle samples %d, with a raw 0x7f frame %d\n", n, r
	      exit !(n > 0 && r * 20 <= n) }' ||
	fail "raw PIE addresses in more than 5% of the blocked worker stacks"
exit 0
