# idlevm with only the capabilities README's "What idlevm needs" names:
# root whose bounding set setpriv cut to them, so that its exec of idlevm
# (and every exec after) holds those and no other.  QEMU here is
# libvirt's, user libvirt-qemu, so reading it takes CAP_SYS_PTRACE, and
# the helper's channel, a socket of libvirt-qemu's, CAP_DAC_OVERRIDE.
#  1. CAP_SYS_PTRACE and CAP_DAC_OVERRIDE: doctor passes, ps and stack
#     work, and a profile is as good as one of full root taken beside it:
#     samples of every lockstorm thread, to-idle stacks with kernel and
#     user frames, the helper answering;
#  2. CAP_SYS_PTRACE alone: profile works without the helper, and profile
#     and doctor say CAP_DAC_OVERRIDE is what it lacks;
#  3. neither: ps and profile exit 1 naming CAP_SYS_PTRACE, doctor fails
#     naming it;
#  4. --realtime without CAP_SYS_NICE warns naming it, and with it does
#     not;
#  5. the children hold what README says: the pause guardian of a libvirt
#     guest (--capture stop) and a continuous run's pprof child no
#     capability at all, and no_new_privs.
tmp=$(mktemp -d /tmp/ivm-e2e-privs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
qemu_user=$(ps -o user= -p "$(pgrep -f "guest=$IVM_DOMAIN," | head -n 1)")
echo "QEMU runs as $qemu_user"
[ "$qemu_user" != root ] || fail "QEMU runs as root here: the test needs libvirt's QEMU user"

MIN=+sys_ptrace,+dac_override
# capped SET CMD...: CMD as root with the bounding set cut to SET.
capped() {
	local set=$1
	shift
	setpriv --inh-caps=-all --bounding-set="-all${set:+,$set}" -- "$@"
}

# what_idles PROF: "THREADS TO_IDLE USER%": how many lockstorm threads have
# to-idle samples, how many there are, and the share of them whose stack
# has user frames too (after the kernel's).
what_idles() {
	"$idlevm" report -f folded -K to_idle "$1" | awk '
		{ k = split($1, f, ";"); t = f[2]; sub(/\/[0-9]+$/, "", t)
		  if (t !~ /^ls-/) next
		  seen[t] = 1; n += $NF
		  for (i = 3; i <= k; i++) if (f[i] !~ /_\[k\]/) { u += $NF; break } }
		END { for (t in seen) m++; printf "%d %d %d\n", m, n, n ? 100 * u / n : 0 }'
}

# 1. The tested minimum.
out=$(capped $MIN "$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1) ||
	fail "doctor with $MIN: $out"
echo "$out"
for line in "PASS  privileges: CAP_SYS_PTRACE, CAP_DAC_OVERRIDE, as root$" \
		"WARN  privileges: no CAP_SYS_NICE: profile --realtime" \
		"PASS  helper: idlevm-helper" "PASS  kernel: $IVM_KVER"; do
	echo "$out" | grep -q "^$line" || fail "doctor with $MIN: no '$line' line"
done
out=$(capped $MIN "$idlevm" ps --domain "$IVM_DOMAIN" 2>&1) || fail "ps with $MIN: $out"
echo "$out" | awk '$3 == "lockstorm"' | grep -q . || fail "no lockstorm in ps with $MIN: $out"
pid=$(echo "$out" | awk '$3 == "lockstorm" { print $1; exit }')
out=$(capped $MIN "$idlevm" stack --domain "$IVM_DOMAIN" --pid "$pid" 2>&1) ||
	fail "stack with $MIN: $out"
echo "$out" | grep -q "\[k\]" || fail "no kernel frames with $MIN: $out"

for who in root min; do
	set=
	[ $who = min ] && set=$MIN
	if [ $who = root ]; then
		out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 5 --no-report -o "$tmp/$who.prof" 2>&1)
	else
		out=$(capped "$set" "$idlevm" profile --domain "$IVM_DOMAIN" -D 5 --no-report -o "$tmp/$who.prof" 2>&1)
	fi || fail "profile as $who: $out"
	echo "$out" | grep -v "^idlevm: \(profiling\|stopped\)" | grep -i "warning" &&
		fail "profile as $who warned: $out"
	echo "$out" | grep "^idlevm: stopped"
	got=$(what_idles "$tmp/$who.prof")
	echo "$who: lockstorm threads with to-idle samples, samples, % with user frames: $got"
	eval "${who}_got=\$got"
done
set -- $root_got
root_threads=$1 root_user=$3
set -- $min_got
[ "$2" -ge 100 ] || fail "fewer than 100 to-idle samples of lockstorm with $MIN: $min_got"
[ "$1" -ge "$root_threads" ] ||
	fail "to-idle samples of fewer lockstorm threads with $MIN ($1) than as root ($root_threads)"
[ "$3" -ge $((root_user - 10)) ] ||
	fail "user frames in $3% of the to-idle stacks with $MIN, $root_user% as root"

# 2. CAP_SYS_PTRACE alone: the helper's channel is out of reach, said.
out=$(capped +sys_ptrace "$idlevm" profile --domain "$IVM_DOMAIN" -D 3 --no-report \
	-o "$tmp/ptrace.prof" 2>&1) || fail "profile with sys_ptrace alone: $out"
echo "$out" | grep "warning"
echo "$out" | grep -q "warning: no CFI readahead by the helper (.*Permission denied; opening it needs CAP_DAC_OVERRIDE)" ||
	fail "profile does not say the helper needs CAP_DAC_OVERRIDE: $out"
set -- $(what_idles "$tmp/ptrace.prof")
[ "$2" -ge 50 ] || fail "too few to-idle samples with sys_ptrace alone: $*"
out=$(capped +sys_ptrace "$idlevm" profile --domain "$IVM_DOMAIN" -D 2 --no-report \
	--capture pin -o "$tmp/pin.prof" 2>&1) || fail "profile --capture pin with sys_ptrace alone: $out"
echo "$out" | grep -q "warning: no pin capture (.*; opening it needs CAP_DAC_OVERRIDE), capturing optimistic" ||
	fail "--capture pin does not say it needs CAP_DAC_OVERRIDE: $out"
out=$(capped +sys_ptrace "$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1)
echo "$out" | grep -E "^(WARN|FAIL)" -A1
echo "$out" | grep -q "^WARN  privileges: no CAP_DAC_OVERRIDE: the in-guest helper's channel" ||
	fail "doctor does not name CAP_DAC_OVERRIDE: $out"
echo "$out" | grep -q "^WARN  helper: its channel cannot be opened without CAP_DAC_OVERRIDE" ||
	fail "doctor's helper check does not name CAP_DAC_OVERRIDE: $out"

# 3. No CAP_SYS_PTRACE: a clear error, exit 1.
for cmd in ps profile; do
	args=
	[ $cmd = profile ] && args="-D 2 --no-report -o $tmp/none.prof"
	out=$(capped +dac_override "$idlevm" $cmd --domain "$IVM_DOMAIN" $args 2>&1)
	rc=$?
	echo "$cmd without CAP_SYS_PTRACE: exit $rc: $out"
	assert_eq "$rc" 1 "exit status of $cmd without CAP_SYS_PTRACE"
	echo "$out" | grep -q "^idlevm: .*qemu process [0-9]* (user $qemu_user): idlevm needs CAP_SYS_PTRACE" ||
		fail "$cmd without CAP_SYS_PTRACE does not name it: $out"
done
[ -e "$tmp/none.prof" ] && fail "a profile file was left by a run that could not start"
out=$(capped +dac_override "$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1) &&
	fail "doctor passed without CAP_SYS_PTRACE: $out"
echo "$out" | grep -E "^(WARN|FAIL)" -A1
echo "$out" | grep -q "^WARN  privileges: no CAP_SYS_PTRACE" || fail "doctor: $out"
echo "$out" | grep -q "^FAIL  guest: cannot open it: .*needs CAP_SYS_PTRACE" || fail "doctor: $out"
echo "$out" | grep -q "^      fix: run idlevm as root, or give it CAP_SYS_PTRACE" || fail "doctor's fix: $out"

# 4. --realtime: CAP_SYS_NICE.
out=$(capped $MIN "$idlevm" profile --domain "$IVM_DOMAIN" -D 2 --realtime --no-report \
	-o "$tmp/rt.prof" 2>&1) || fail "--realtime with $MIN: $out"
echo "$out" | grep -q "warning: no real-time priority (Operation not permitted; it needs CAP_SYS_NICE)" ||
	fail "--realtime without CAP_SYS_NICE: $out"
out=$(capped $MIN,+sys_nice "$idlevm" profile --domain "$IVM_DOMAIN" -D 2 --realtime --no-report \
	-o "$tmp/rt.prof" 2>&1) || fail "--realtime with $MIN,+sys_nice: $out"
echo "$out" | grep "no real-time priority" && fail "--realtime with CAP_SYS_NICE warned: $out"
echo "$out" | grep -q "waited at real-time priority" || fail "--realtime with CAP_SYS_NICE: $out"

# 5. The children.  watch_children PATTERN: the CapEff, CapBnd and
# NoNewPrivs of every process whose command line matches PATTERN, polled
# while the profile in the background runs, each distinct line once: a
# child must hold nothing from its exec on, not only once its main ran.
watch_children() {
	local p
	while kill -0 "$bg" 2>/dev/null; do
		for p in $(pgrep -f "$1"); do
			grep -E "^(CapEff|CapBnd|NoNewPrivs):" "/proc/$p/status" 2>/dev/null |
				awk '{ printf "%s %s ", $1, $2 } END { print "" }' | grep Cap
		done
		sleep 0.02
	done | sort -u
}
uuid=$(virsh -c qemu:///system domuuid "$IVM_DOMAIN")
for who in root min; do
	set=
	[ $who = min ] && set=$MIN
	capped "${set:-+all}" "$idlevm" profile --domain "$IVM_DOMAIN" -D 4 --capture stop \
		--no-report -o "$tmp/stop.prof" >"$tmp/stop.out" 2>&1 &
	bg=$!
	got=$(watch_children "__pause-guard .*$uuid")
	wait "$bg" || fail "--capture stop as $who: $(cat "$tmp/stop.out")"
	echo "guardian as $who: $got"
	[ -n "$got" ] || fail "no guardian seen during --capture stop as $who"
	echo "$got" | grep -v "CapEff: 0000000000000000 .*NoNewPrivs: 1" &&
		fail "the guardian as $who held more than it needs: $got"
	[ $who = root ] && { echo "$got" | grep -v "CapBnd: 0000000000000000" &&
		fail "the guardian's bounding set as root: $got"; }

	rm -rf "$tmp/win"
	capped "${set:-+all}" "$idlevm" profile --domain "$IVM_DOMAIN" --window 1 -D 5 \
		--output-dir "$tmp/win" >"$tmp/win.out" 2>&1 &
	bg=$!
	got=$(watch_children "idlevm __window-pprof")
	wait "$bg" || fail "--window as $who: $(cat "$tmp/win.out")"
	echo "pprof child as $who: $got"
	grep "windows in" "$tmp/win.out"
	grep -q "pprof made, 0 failed" "$tmp/win.out" || fail "pprofs as $who: $(cat "$tmp/win.out")"
	[ -n "$got" ] || fail "no pprof child seen in a continuous run as $who"
	echo "$got" | grep -v "CapEff: 0000000000000000 .*NoNewPrivs: 1" &&
		fail "the pprof child as $who held more than it needs: $got"
	[ $who = root ] && { echo "$got" | grep -v "CapBnd: 0000000000000000" &&
		fail "the pprof child's bounding set as root: $got"; }
done
true
