# idlevm doctor on the Debian server guest: everything profile needs is
# there (its helper installed from our package, the kernel found by its
# release), so every check passes and the exit status says so.
out=$("$idlevm" doctor --domain "$IVM_DOMAIN" 2>&1) || fail "idlevm doctor: $out"
echo "$out"
for what in "guest: $IVM_DOMAIN" "accelerator: " "kernel: $IVM_KVER, symbols and layout from" \
		"vmcoreinfo: " "helper: idlevm-helper "; do
	echo "$out" | grep -q "^PASS  $what" || fail "no 'PASS  $what' line"
done
echo "$out" | grep -q "^checks: [0-9]* pass, 0 warn, 0 fail: idlevm profile will work$" ||
	fail "doctor's verdict on web01"
