# idlevm doctor: on the suite's guest every check passes but those this
# host cannot have, and the exit status says profile will work; each
# broken case a new user meets gets its FAIL or WARN line, the command that
# fixes it, and the right exit status: a wrong domain name, a domain
# defined but not running, libvirtd not running, /dev/kvm only root can
# open, no vmlinux for the guest's release, no helper on the channel, an
# old helper, tracefs not mounted yet (/dev/kvm and tracefs in a private
# mount namespace).  A guest still booting is t_95's; a kernel whose VMCOREINFO
# cannot give its symbols, t_52's (on Debian 11's kernel).
tmp=$(mktemp -d)
stopped=idlevm-e2e-doctor-$$
cleanup_doctor() {
	virsh -c qemu:///system undefine "$stopped" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup_doctor EXIT

# expect_line OUT VERDICT 'WHAT: text'
expect_line() {
	echo "$1" | grep -q "^$2  $3" || fail "no '$2  $3' line in: $1"
}

out=$("$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1) || fail "doctor on a good guest: $out"
echo "$out"
for what in "privileges: root" "tracefs: mounted" "idle gate: a BPF program" \
		"libvirt: qemu:///system answers" \
		"guest: $IVM_DOMAIN" "accelerator: TCG, registers read from QEMU's memory" \
		"guest memory:" "kernel: $IVM_KVER, symbols and layout from" \
		"vmcoreinfo: in guest memory" "helper: idlevm-helper "; do
	expect_line "$out" PASS "$what"
done
echo "$out" | grep -q "^checks: [0-9]* pass, 0 warn, 0 fail: idlevm profile will work$" ||
	fail "doctor's verdict on a good guest: $out"

out=$("$idlevm" doctor --domain "no-such-$$" 2>&1) && fail "doctor on no domain passed: $out"
expect_line "$out" FAIL "guest: cannot open it: no domain named"
echo "$out" | grep -q "^      fix: virsh list --all" || fail "no fix for a wrong name: $out"

# A domain defined but never started: the suite guest's XML, renamed.
virsh -c qemu:///system dumpxml "$IVM_DOMAIN" |
	sed -e "s|<name>.*</name>|<name>$stopped</name>|" -e '/<uuid>/d' >"$tmp/stopped.xml"
virsh -c qemu:///system define "$tmp/stopped.xml" >/dev/null || fail "virsh define"
out=$("$idlevm" doctor --domain "$stopped" 2>&1) && fail "doctor on a stopped domain passed: $out"
echo "$out" | grep "^FAIL" -A1
expect_line "$out" FAIL "guest: cannot open it"
echo "$out" | grep -q "^      fix: virsh start $stopped$" || fail "no fix for a stopped domain: $out"

# No vmlinux anywhere: the kernel from its own memory, a warning.
mkdir "$tmp/debug"
out=$(IDLEVM_DEBUG_DIRS=$tmp/debug "$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1) ||
	fail "doctor without a vmlinux: $out"
expect_line "$out" WARN "kernel: $IVM_KVER, no vmlinux on this host"
echo "$out" | grep -q "^      fix: for file:line .*apt-get install linux-image-$IVM_KVER-dbg" ||
	fail "no fix for a missing vmlinux: $out"

# No helper on the socket named.
out=$("$idlevm" doctor --domain "$IVM_DOMAIN" --helper-socket "$tmp/none.sock" 2>&1) ||
	fail "doctor without a helper: $out"
expect_line "$out" WARN "helper: none answers"
echo "$out" | grep -q "^      fix: install idlevm-helper in the guest" || fail "no fix for no helper: $out"

# libvirtd not running (yet): a connection to a socket nobody serves.
out=$("$idlevm" doctor --domain "$IVM_DOMAIN" \
	--connect "qemu:///system?socket=$tmp/no-libvirtd.sock" 2>&1) &&
	fail "doctor without libvirtd passed: $out"
echo "$out" | grep -E "^(WARN|FAIL)" -A1
expect_line "$out" WARN "libvirt: qemu:///system?socket=$tmp/no-libvirtd.sock does not answer"
expect_line "$out" FAIL "guest: cannot open it"
echo "$out" | grep -q "^      fix: start libvirt: libvirtd -d" || fail "no fix for no libvirtd: $out"

# /dev/kvm that only root can open (no udev rule ran), in a private mount
# namespace where a node of the same device, mode 0600, hides the host's.
# A host without /dev/kvm (some machines of this project have none) has no
# node to hide: doctor says so as a pass, checked above.
if [ -e /dev/kvm ]; then
	mknod -m 0600 "$tmp/kvm" c 10 232 || fail "mknod"
	out=$(unshare -m --propagation private sh -c '
		mount --bind "$1" /dev/kvm && exec "$0" doctor' "$idlevm" "$tmp/kvm" 2>&1) ||
		fail "doctor with a root-only /dev/kvm: $out"
	expect_line "$out" WARN "kvm: /dev/kvm is mode 600, owner only"
	echo "$out" | grep -q "^      fix: chgrp kvm /dev/kvm && chmod 0660 /dev/kvm" ||
		fail "no fix for /dev/kvm's mode: $out"
else
	out=$("$idlevm" doctor 2>&1)
	expect_line "$out" PASS "kvm: no /dev/kvm on this host"
	echo "no /dev/kvm on this host: the root-only /dev/kvm case is not checked"
fi

# An old helper: this tree's helper built as an earlier version, run on
# the host and reached through socat as doctor would reach a guest's
# (it connects to a socket as it opens its virtio port).
mkdir -p "$tmp/gen"
printf '#define IVM_VERSION "0.0.9"\n#define IVM_GIT_REV "old"\n' >"$tmp/gen/ivm_version.h"
cc -std=gnu11 -D_GNU_SOURCE -O1 -pthread -Iguest-helper -I"$tmp/gen" \
	-o "$tmp/old-helper" guest-helper/*.c 2>"$tmp/cc.log" || fail "building an old helper: $(cat "$tmp/cc.log")"
socat UNIX-LISTEN:"$tmp/guest.sock" UNIX-LISTEN:"$tmp/host.sock" 2>/dev/null &
relay=$!
# wait_socket PATH: until something listens there (5 s at most).
wait_socket() {
	local i=0
	while [ ! -S "$1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}
wait_socket "$tmp/guest.sock"
"$tmp/old-helper" --port "$tmp/guest.sock" --journal "$tmp/journal" 2>"$tmp/old-helper.log" &
old=$!
wait_socket "$tmp/host.sock"
out=$("$idlevm" doctor --domain "$IVM_DOMAIN" --helper-socket "$tmp/host.sock" 2>&1)
kill "$old" "$relay" 2>/dev/null
wait "$old" "$relay" 2>/dev/null
expect_line "$out" WARN "helper: idlevm-helper 0.0.9, protocol [0-9]*, at $tmp/host.sock: another version than idlevm "
echo "$out" | grep -q "^      fix: install the helper of this idlevm in the guest" ||
	fail "no fix for an old helper: $out"

# A fresh host's tracefs: not mounted yet, which profile handles itself.
out=$(unshare -m --propagation private sh -c '
	while umount /sys/kernel/tracing 2>/dev/null; do :; done
	exec "$0" doctor' "$idlevm" 2>&1) || fail "doctor without tracefs: $out"
expect_line "$out" PASS "tracefs: not mounted at /sys/kernel/tracing; profile mounts it itself"
