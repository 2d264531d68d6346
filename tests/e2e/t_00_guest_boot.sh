# The guest booted the cached kernel and runs its helper and workload.

kver=$(guest_sh 'uname -r') || fail "guest_sh 'uname -r' failed"
assert_eq "$kver" "$IVM_KVER" "guest kernel release"

assert_eq "$(guest_sh hostname)" idlevm-guest "guest hostname"
assert_eq "$(guest_sh nproc)" "$IVM_VCPUS" "guest cpus"

port=$(guest_sh 'for f in /sys/class/virtio-ports/*/name; do
	[ "$(cat "$f")" = org.idlevm.helper.0 ] && basename "${f%/name}"
done') || true
[ -n "$port" ] || fail "no virtio port named org.idlevm.helper.0 in the guest"
guest_sh "test -c /dev/$port" || fail "/dev/$port is not a character device"

guest_sh 'pidof idlevm-helper' >/dev/null ||
	fail "idlevm-helper is not running in the guest"

if [ "$IVM_WORKLOAD" != none ]; then
	guest_sh "pidof $IVM_WORKLOAD" >/dev/null ||
		fail "workload $IVM_WORKLOAD is not running in the guest"
fi

guest_sh 'grep -q " /sys/kernel/tracing tracefs " /proc/mounts' ||
	fail "tracefs is not mounted in the guest"
guest_sh 'test -d /sys/firmware/qemu_fw_cfg' ||
	fail "qemu_fw_cfg is not loaded (no VMCOREINFO in dumps)"

# The readiness line names what the init started.
ready=$(grep -a -m 1 '^IDLEVM-READY ' "$IVM_CONSOLE_LOG" | tr -d '\r')
case $ready in
*" workload=$IVM_WORKLOAD "*" kernel=$IVM_KVER") ;;
*) fail "unexpected readiness line: $ready" ;;
esac
case $ready in
*" helper=none "*) fail "the guest init started no helper: $ready" ;;
esac

# guest_sh passes exit statuses and multi-line output through unchanged.
guest_sh 'exit 3'
assert_eq "$?" 3 "guest_sh exit status"
assert_eq "$(guest_sh 'printf "a\n\nb"')" "a

b" "guest_sh output framing"
