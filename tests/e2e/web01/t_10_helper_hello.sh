# The helper installed from the .deb answers over the libvirt channel and
# describes the guest truthfully.
out=$("$idlevm" helper --domain "$IVM_DOMAIN" hello 2>&1) ||
	fail "idlevm helper hello failed: $out"
echo "$out"
assert_eq "$(echo "$out" | sed -n 's/^ *kernel: *//p')" "$(guest_sh 'uname -r')" \
	"helper's kernel release"
assert_eq "$(echo "$out" | sed -n 's/^ *cpus: *//p')" "$(guest_sh nproc)" \
	"helper's cpu count"
assert_eq "$(echo "$out" | sed -n 's/^ *helper_pid: *//p')" \
	"$(guest_sh 'systemctl show -p MainPID --value idlevm-helper.service')" \
	"helper pid (systemd's MainPID)"
