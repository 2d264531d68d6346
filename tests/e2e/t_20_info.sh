# idlevm info reads the guest kernel from outside and agrees with the guest.

out=$("$idlevm" info --domain "$IVM_DOMAIN" 2>&1) ||
	fail "idlevm info failed: $out"
echo "$out"

assert_eq "$(echo "$out" | sed -n 's/^kernel: *//p')" "$(guest_sh 'uname -r')" \
	"kernel release"
assert_eq "$(echo "$out" | sed -n 's/^vcpus: *//p')" "$IVM_VCPUS" "vCPU count"

# The KASLR offset, as the guest itself sees it: where _text ended up,
# minus its link-time address.
text=$(guest_sh "grep ' _text\$' /proc/kallsyms | cut -d' ' -f1")
[ -n "$text" ] || fail "the guest shows no _text in /proc/kallsyms"
want=$(printf '0x%x' $((0x$text - 0xffffffff81000000)))
assert_eq "$(echo "$out" | sed -n 's/^kaslr offset: *//p')" "$want" "KASLR offset"

# Each vCPU line: a halted vCPU must be running its idle task (HLT is only
# executed by the idle loop).  idlevm takes HLT and current from reads
# milliseconds apart and, per vCPU, retries until neither current nor the
# CPU's switch count moved around them (a task that blocks and is woken
# again in between leaves current unchanged); a vCPU where that never
# happened is marked with a trailing '*' and not judged.  How many settle
# depends on how busy the guest and the host are, so the count of marked
# lines is reported, not asserted: runs go on (at least 10) until
# 6 settled lines per vCPU were judged, and every settled line must be
# right.  A guest where lines never settle (60 runs) is a failure.
bad=0 lines=0 settled=0 run=0
want=$((6 * IVM_VCPUS))
while [ "$run" -lt 10 ] || [ "$settled" -lt "$want" ]; do
	run=$((run + 1))
	[ "$run" -le 60 ] || fail "only $settled of $lines vCPU lines settled in 60 runs"
	[ "$run" = 1 ] || out=$("$idlevm" info --domain "$IVM_DOMAIN" 2>&1) ||
		fail "idlevm info failed: $out"
	n=0
	while read -r vcpu thread cpu state cpl current; do
		case $vcpu in [0-9]*) ;; *) continue ;; esac
		lines=$((lines + 1))
		n=$((n + 1))
		[ -d "/proc/$thread" ] || fail "vCPU $vcpu thread $thread is no host thread"
		[ "$cpu" -ge 0 ] || fail "vCPU $vcpu has no guest CPU: $out"
		case $current in
		"?"*) fail "vCPU $vcpu: no current task: $current" ;;
		*" *") continue ;;
		esac
		settled=$((settled + 1))
		if [ "$state" = halted ]; then
			case $current in
			*"(idle)"*) ;;
			*) bad=$((bad + 1)); echo "halted but current is $current" ;;
			esac
		fi
	done <<<"$(echo "$out" | sed -n '/^VCPU/,$p')"
	assert_eq "$n" "$IVM_VCPUS" "vCPU lines in run $run"
done
echo "$settled of $lines vCPU lines settled in $run runs ($((lines - settled)) marked unsettled), $bad halted vCPUs not idle"
[ "$bad" = 0 ] || fail "$bad halted vCPUs were not running their idle task"
