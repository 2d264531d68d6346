# Bad input, as a new user would try it: a clear message, a non-zero exit,
# never a crash.

# expect_error WHAT PATTERN COMMAND...: COMMAND fails (not by a signal) and
# says something matching PATTERN.
expect_error() {
	local what=$1 pattern=$2 out rc
	shift 2
	out=$("$@" 2>&1) && fail "$what: succeeded: $out"
	rc=$?
	[ "$rc" -lt 128 ] || fail "$what: killed by signal $((rc - 128)): $out"
	echo "$out" | grep -qiE -e "$pattern" || fail "$what: unclear message: $out"
	echo "ok: $what: $out"
}

expect_error "unknown domain" "no-such-domain-xyz" \
	"$idlevm" info --domain no-such-domain-xyz
expect_error "two guests" "only one" \
	"$idlevm" ps --domain "$IVM_DOMAIN" --qmp /nonexistent
expect_error "no guest" "--domain" "$idlevm" ps
expect_error "missing socket" "/nonexistent/qmp.sock" \
	"$idlevm" info --qmp /nonexistent/qmp.sock
expect_error "vmlinux not ELF" "/etc/passwd" \
	"$idlevm" info --domain "$IVM_DOMAIN" --vmlinux /etc/passwd
# (No debuginfo at all is not an error: t_48 reads the guest's own tables.)
mkdir -p "$IVM_RUNDIR/debug"
ln -sf "$IVM_VMLINUX" "$IVM_RUNDIR/debug/vmlinux-$IVM_KVER"
out=$(IDLEVM_DEBUG_DIRS=/nonexistent:$IVM_RUNDIR/debug "$idlevm" info --domain "$IVM_DOMAIN" 2>&1) ||
	fail "IDLEVM_DEBUG_DIRS not searched: $out"
echo "$out" | grep -q "^vmlinux: *$IVM_RUNDIR/debug/vmlinux-$IVM_KVER" || fail "wrong vmlinux: $out"
# A run that fails in its setup leaves an older profile where it was, and
# no temporary file next to it.
echo "an older profile" >"$IVM_RUNDIR/kvm.prof"
expect_error "kvm tracepoints on a TCG guest" "hardware KVM" \
	"$idlevm" profile --domain "$IVM_DOMAIN" --idle-source kvm -D 1 -o "$IVM_RUNDIR/kvm.prof"
assert_eq "$(cat "$IVM_RUNDIR/kvm.prof")" "an older profile" "profile after a failed setup"
assert_eq "$(ls "$IVM_RUNDIR" | grep -c '^kvm\.prof\.')" 0 "temporary files left"
expect_error "profile of a core" "live guest" \
	"$idlevm" profile --core /etc/passwd
expect_error "core not ELF" "/etc/passwd" \
	"$idlevm" ps --core /etc/passwd --vmlinux "$IVM_VMLINUX"

# A domain that is defined but not running.
stopped=ivm-e2e-stopped-$$
sed -e "s|<name>[^<]*</name>|<name>$stopped</name>|" -e '/<uuid>/d' \
	"$IVM_RUNDIR/domain.xml" >"$IVM_RUNDIR/stopped.xml"
virsh -q -c qemu:///system define "$IVM_RUNDIR/stopped.xml" >/dev/null ||
	fail "cannot define $stopped"
trap 'virsh -q -c qemu:///system undefine "$stopped" >/dev/null 2>&1' EXIT
expect_error "stopped domain" "not running" \
	"$idlevm" info --domain "$stopped"

# A unix socket that is not QMP: an HTTP server's banner, then silence.
sock=$IVM_RUNDIR/not-qmp.sock
socat "UNIX-LISTEN:$sock,fork" SYSTEM:'echo "HTTP/1.1 400 Bad Request"; sleep 5' &
spid=$!
trap 'kill $spid 2>/dev/null; virsh -q -c qemu:///system undefine "$stopped" >/dev/null 2>&1' EXIT
end=$((SECONDS + 30))	# a hang guard: socat only has to start
until [ -S "$sock" ]; do
	kill -0 "$spid" 2>/dev/null && [ "$SECONDS" -lt "$end" ] ||
		fail "socat did not listen on $sock"
	sleep 0.1
done
expect_error "not a QMP socket" "not a QMP" "$idlevm" info --qmp "$sock"
