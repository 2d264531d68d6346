# idlevm regs: each vCPU's registers read from QEMU's own TCG state, the
# way `idlevm profile` takes them for on-CPU and from-idle samples, agree
# with what the monitor prints, with the guest paused so both are exact.
# A wrong location, a wrong layout or a wrong field order shows up as a
# disagreement (exit 1).  Under KVM the monitor is profile's source, and
# the command says so (t_95_kvm).
type=$(virsh -c qemu:///system dumpxml "$IVM_DOMAIN" |
	sed -n "s/^<domain type='\([a-z]*\)'.*/\1/p")
if [ "$type" = kvm ]; then
	out=$("$idlevm" regs --domain "$IVM_DOMAIN" 2>&1) ||
		fail "idlevm regs on a KVM guest: $out"
	echo "$out" | grep -q "^registers: the monitor" || fail "regs on KVM: $out"
	exit 0
fi

# Several snapshots: lockstorm keeps its vCPUs moving between user mode,
# the kernel and HLT, so the runs see different register sets.
user=0
for run in 1 2 3 4 5; do
	out=$("$idlevm" regs --domain "$IVM_DOMAIN" 2>&1) ||
		fail "idlevm regs failed (run $run): $out"
	echo "$out"
	echo "$out" | grep -q "^all vCPUs agree$" || fail "no agreement line: $out"
	n=$(echo "$out" | grep -cE '^[0-9]+ +(monitor|memory) ')
	assert_eq "$n" $((2 * IVM_VCPUS)) "vCPU lines (run $run)"
	user=$((user + $(echo "$out" | awk '$2 == "memory" && $6 == 3' | wc -l)))
done
echo "$user vCPU snapshots in user mode"

# The guest is left running, as it was.
state=$(virsh -c qemu:///system domstate "$IVM_DOMAIN" | head -n 1)
assert_eq "$state" running "domain state after idlevm regs"

# A guest someone else paused stays paused, and is read all the same.
virsh -c qemu:///system suspend "$IVM_DOMAIN" >/dev/null || fail "virsh suspend"
out=$("$idlevm" regs --domain "$IVM_DOMAIN" 2>&1)
rc=$?
state=$(virsh -c qemu:///system domstate "$IVM_DOMAIN" | head -n 1)
virsh -c qemu:///system resume "$IVM_DOMAIN" >/dev/null || fail "virsh resume"
[ "$rc" = 0 ] || fail "idlevm regs on a paused guest failed: $out"
assert_eq "$state" paused "domain state after idlevm regs on a paused guest"

# The profiler takes the same source, and says so.
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 2 -F 50 --no-report \
	-o "$IVM_RUNDIR/t44.prof" 2>&1) || fail "idlevm profile failed: $out"
echo "$out"
echo "$out" | grep -q "registers from qemu memory" ||
	fail "profile did not read registers from qemu memory: $out"
# ... and the profile records it for whoever reads the report later.
"$idlevm" report "$IVM_RUNDIR/t44.prof" | grep -q "^  registers: qemu memory$" ||
	fail "the profile does not record its register source"
