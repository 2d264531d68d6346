# doctor on a host without the guest kernel's vmlinux: from Linux 6.0 the
# kernel is read from its own memory (VMCOREINFO names its kallsyms
# tables), a warning with the debuginfo to install for file:line; before
# 6.0 (Debian 11's 5.10, make e2e-kernels) its VMCOREINFO cannot give its
# symbols, and doctor fails saying so, and what to install.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(IDLEVM_DEBUG_DIRS=$tmp "$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1)
rc=$?
echo "$out" | grep -E "^(WARN|FAIL)" -A1
if [ "${IVM_KVER%%.*}" -lt 6 ]; then
	[ "$rc" = 1 ] || fail "doctor passed on $IVM_KVER without a vmlinux: $out"
	echo "$out" | grep -q "^FAIL  kernel: not found: .*Linux before 6.0 does not name its kallsyms tables there" ||
		fail "doctor does not say why $IVM_KVER cannot be read from memory: $out"
	echo "$out" | grep -q "^      fix: install the guest kernel's debuginfo (Debian: apt-get install linux-image-RELEASE-dbg)" ||
		fail "no fix: $out"
else
	[ "$rc" = 0 ] || fail "doctor failed on $IVM_KVER without a vmlinux: $out"
	echo "$out" | grep -q "^WARN  kernel: $IVM_KVER, no vmlinux on this host: symbols from the guest's kallsyms, BTF and ORC" ||
		fail "doctor: $out"
	echo "$out" | grep -q "^PASS  vmcoreinfo: in guest memory" || fail "doctor: $out"
fi
