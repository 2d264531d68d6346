# e2e-timeout: 900
# idlevm on KVM: the demo kernel under `-accel kvm` on this host's
# /dev/kvm (plain QEMU, a guest of its own), checked for what can be
# checked while it boots.  On this project's hosts /dev/kvm is PVM, which
# emulates every instruction of a guest without PVM support: the kernel
# gets through early boot (it is booted PVH from its vmlinux, without the
# decompressor) but not much further, so the checks are those of attach:
#  - the firmware's halts traced by the host's kvm: tracepoints, decoded
#    by idlevm's decoder (tests/tools/kvm-records), on the vCPU threads;
#  - info, regs and doctor before the kernel is there (the machine only,
#    exit 1 for info and doctor, with the reason), then info, regs, ps and
#    doctor once it is: KVM's
#    memory map ("pc.ram KVM"), the vCPU threads, registers through the
#    monitor;
#  - profile with --idle-source kvm and auto: starts, runs, ends with a
#    whole file that report reads, and says KVM in its first line.
# Exits 77 (skipped) on a host without a usable /dev/kvm.  The suite's
# TCG guest is paused meanwhile (resumed however this ends), so the KVM
# guest's emulation has the host's CPUs.
if ! [ -c /dev/kvm ] || ! { exec 3<>/dev/kvm; } 2>/dev/null; then
	echo "no usable /dev/kvm on this host: the KVM test cannot run"
	exit 77
fi
exec 3>&-

run=$(mktemp -d /tmp/ivm-e2e-kvm.XXXXXX)
virsh -c qemu:///system suspend "$IVM_DOMAIN" >/dev/null || fail "virsh suspend"
cleanup_kvm() {
	[ -f "$run/qemu.pid" ] && kill "$(cat "$run/qemu.pid")" 2>/dev/null
	rm -rf "$run"
	virsh -c qemu:///system resume "$IVM_DOMAIN" >/dev/null
}
trap cleanup_kvm EXIT

# The firmware waits 3 s at its boot menu, halting between timer ticks.
IVM_ACCEL=kvm IVM_CPU=qemu64 IVM_KERNEL_IMAGE=$IVM_VMLINUX \
	IVM_QEMU_ARGS="-boot menu=on,splash-time=3000" BUILD=$IVM_BUILD \
	images/run-guest --run-dir "$run" >"$run/run-guest.log" 2>&1 ||
	fail "qemu -accel kvm did not start: $(cat "$run/run-guest.log")"
qemu=$(cat "$run/qemu.pid")

# The vCPU threads, as idlevm finds them before any kernel is there.
out=$("$idlevm" info --qmp "$run/qmp.sock" 2>&1)
rc=$?
echo "$out"
echo "$out" | grep -q "^accelerator: *KVM" || fail "info does not say KVM: $out"
tids=$(echo "$out" | awk '/^VCPU/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { print $2 }')
assert_eq "$(echo "$tids" | grep -c .)" 2 "vCPU threads listed by info"
for t in $tids; do
	[ -d "/proc/$qemu/task/$t" ] || fail "vCPU thread $t is not a thread of qemu $qemu"
done
if [ "$rc" != 0 ]; then
	echo "$out" | grep -q "^kernel: *not found (" ||
		fail "info failed without saying why the kernel is missing: $out"
fi

# The firmware's halts, through the host's kvm: tracepoints.
recs=$("$IVM_BUILD/tests/kvm-records" 2.5 $tids 2>&1) ||
	fail "kvm-records: $recs"
echo "$recs" | tail -n 5
echo "$recs" | grep -q "^records: [0-9]* decoded, 0 not decoded" ||
	fail "records not decoded: $(echo "$recs" | tail -n 3)"
wakeups=$(echo "$recs" | awk '$2 == "wakeup" && $4 == "waited=1"' | wc -l)
exits=$(echo "$recs" | awk '$2 == "exit"' | wc -l)
hlt_exits=$(echo "$recs" | awk '$2 == "exit" && $7 == "halt=1"' | wc -l)
echo "kvm records of the firmware's halts: $wakeups wakeups after a sleep, $exits exits ($hlt_exits HLT)"
[ "$wakeups" -ge 1 ] || fail "no kvm_vcpu_wakeup of a halted vCPU in 2.5 s of the firmware's boot menu"
# Every record is of one of this guest's vCPU threads (the session's filter).
others=$(echo "$recs" | awk -v t="$(echo $tids)" '
	BEGIN { n = split(t, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1 }
	$2 ~ /^(exit|entry|wakeup)$/ && !($3 in ok)' | wc -l)
assert_eq "$others" 0 "records of other threads"
# A KVM that runs the guest natively exits for HLT; this host's PVM
# emulates HLT for a guest without PVM support and traces no exit.
if [ "$exits" -gt 0 ]; then
	[ "$hlt_exits" -ge 1 ] || fail "exits traced, but none for HLT while the firmware halted"
fi

# doctor_one_failure PASSED FAILED: doctor on the guest (its output in
# $out) shows the PASS line PASSED, and if it failed, its one failure is
# the FAIL line FAILED.  Returns 1 when it failed.
doctor_one_failure() {
	local rc

	out=$("$idlevm" doctor --qmp "$run/qmp.sock" 2>&1)
	rc=$?
	echo "$out" | grep -E "^(FAIL|WARN)" -A1
	echo "$out" | grep -q "^PASS  $1" || fail "doctor: $out"
	[ "$rc" = 0 ] && return 0
	echo "$out" | grep -q "^FAIL  $2" || fail "doctor failed, but not for '$2': $out"
	assert_eq "$(echo "$out" | grep -c "^FAIL")" 1 "doctor's failures"
	return 1
}

# doctor while the kernel boots: the guest opens; a kernel not there yet
# is its one failure (on a KVM that runs the guest natively it may be).
if ! doctor_one_failure "accelerator: KVM" "kernel: not found"; then
	echo "$out" | grep -q "^      fix: wait for the guest to boot" ||
		fail "doctor's fix for a booting guest: $out"
fi

# regs before the kernel: the monitor's registers, one line per vCPU.
out=$("$idlevm" regs --qmp "$run/qmp.sock" 2>&1) || fail "idlevm regs: $out"
echo "$out"
echo "$out" | grep -q "^registers: the monitor" || fail "regs: $out"
assert_eq "$(echo "$out" | grep -cE '^[0-9]+ +monitor ')" 2 "regs monitor lines"

# Wait for the kernel: each try is one `idlevm info`, and the test's
# timeout bounds the wait.
tries=0
until out=$("$idlevm" info --qmp "$run/qmp.sock" 2>&1); do
	tries=$((tries + 1))
	kill -0 "$qemu" 2>/dev/null || fail "qemu exited: $(tail -n 5 "$run/console.log")"
	echo "$out" | grep -q "^state: *internal-error" &&
		fail "KVM stopped the guest before its kernel could be read: $out"
	sleep 2
done
echo "$out"
echo "kernel found after $tries tries"
echo "$out" | grep -q "^kernel: *$IVM_KVER$" || fail "wrong kernel: $out"
echo "$out" | grep -q "^accelerator: *KVM" || fail "info does not say KVM: $out"
assert_eq "$(echo "$out" | grep -cE '^[0-9]+ +[0-9]+ +[0-9-]+ +(running|halted) ')" 2 "info vCPU lines"

# This host's emulator gives up on the kernel some seconds after it
# appears (`internal-error`, see images/README.md): doctor says so, as
# its one failure, when it comes to that.
doctor_one_failure "kernel: $IVM_KVER" \
	"guest: .*stopped by QEMU after an internal error of KVM" || :

out=$("$idlevm" ps --qmp "$run/qmp.sock" 2>&1) || fail "idlevm ps: $out"
echo "$out" | head -n 5
echo "$out" | awk '$1 == 0 && $3 == "swapper"' | grep -q . || fail "no swapper in ps: $out"

out=$("$idlevm" regs --qmp "$run/qmp.sock" 2>&1) || fail "idlevm regs: $out"
echo "$out"
echo "$out" | grep -q "^registers: the monitor" || fail "regs: $out"
# With every vCPU in long mode, QEMU's own copy is found and compared.
if echo "$out" | grep -q "located, and compared"; then
	echo "$out" | grep -q "^all vCPUs agree$" || fail "regs disagree: $out"
fi

for src in kvm auto; do
	out=$("$idlevm" profile --qmp "$run/qmp.sock" --idle-source "$src" -D 3 \
		--no-report -o "$run/$src.prof" 2>&1) ||
		fail "profile --idle-source $src: $out"
	echo "$out"
	echo "$out" | grep -q "^idlevm: profiling .*, KVM): idle source" ||
		fail "profile does not say KVM: $out"
	echo "$out" | grep -q "registers from the monitor" ||
		fail "profile on KVM must read registers through the monitor: $out"
	rep=$("$idlevm" report "$run/$src.prof" 2>&1) || fail "report of $src: $rep"
	echo "$rep" | grep -q "^  duration: [0-9.]* s; idle source: " ||
		fail "report of $src: $rep"
	echo "$rep" | grep -qi "cut short\|damaged" && fail "$src profile not whole: $rep"
done
echo "$out" | grep -q "idle source sched with kvm HLT exits and wakeups" ||
	fail "auto on KVM: $out"
echo "$rep" | grep -q "^  kvm events: [0-9]* HLT exits" ||
	fail "the report of the auto profile says nothing of the kvm events: $rep"
# The host's side on KVM: the why-idle block with each vCPU's steal from
# the host's records and the kernel's own run_delay of its "CPU N/KVM"
# thread beside it.
why=$(echo "$rep" | sed -n '/^== why idle/,/^$/p')
echo "$why"
echo "$why" | grep -q "^  host steal " || fail "no host steal on KVM: $why"
[ "$(echo "$why" | grep -cE '^    vcpu[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ ')" = 2 ] ||
	fail "not two vCPUs with steal and run_delay on KVM: $why"
