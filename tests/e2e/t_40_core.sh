# The same commands on a memory dump taken through libvirt's own API.
. tests/e2e/lib_tasks.sh

core=$IVM_RUNDIR/guest.core
trap 'rm -f "$core"' EXIT

live=$("$idlevm" info --domain "$IVM_DOMAIN" 2>&1) || fail "idlevm info: $live"
before=$(guest_tasks)
virsh -q -c qemu:///system dump --memory-only --format elf "$IVM_DOMAIN" "$core" >/dev/null ||
	fail "virsh dump failed"
after=$(guest_tasks)

out=$("$idlevm" info --core "$core" --vmlinux "$IVM_VMLINUX" 2>&1) ||
	fail "idlevm info --core failed: $out"
echo "$out"
assert_eq "$(echo "$out" | sed -n 's/^kaslr offset: *//p')" \
	"$(echo "$live" | sed -n 's/^kaslr offset: *//p')" "KASLR offset from the core"
assert_eq "$(echo "$out" | sed -n 's/^vcpus: *//p')" "$IVM_VCPUS" "vCPUs in the core"
# Without --vmlinux, the release read from the dump finds the debuginfo.
out=$("$idlevm" info --core "$core" 2>&1) || fail "idlevm info --core without --vmlinux: $out"

ours=$(idlevm_tasks --core "$core" --vmlinux "$IVM_VMLINUX") || fail "idlevm ps --core failed"
compare_tasks "$ours" "$before" "$after" || fail "task lists differ"

# Stacks from the dump: every lockstorm worker, kernel and user.
pid=$(echo "$ours" | awk '$3 == "lockstorm" { print $1; exit }')
[ -n "$pid" ] || fail "no lockstorm in the dump's task list"
out=$("$idlevm" stack --core "$core" --vmlinux "$IVM_VMLINUX" --pid "$pid" \
	--binary "$IVM_BUILD/guest/lockstorm-fp" 2>&1) || fail "idlevm stack --core: $out"
n=$(echo "$out" | grep -c "worker_main+")
echo "$n threads of lockstorm with worker_main in their stack, from the dump"
[ "$n" -ge 3 ] || fail "expected the workers' stacks from the dump: $out"
