# After a reboot of the guest the helper, enabled by its package, is back
# and answers.  Runs last: it restarts the guest.
. tests/e2e/web01/lib_web01.sh

n0=$(grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG")
old=$(guest_sh 'cat /proc/sys/kernel/random/boot_id')
guest_sh 'systemctl reboot' >/dev/null 2>&1 || true
end=$((SECONDS + 300))
while [ "$SECONDS" -lt "$end" ]; do
	[ "$(grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG")" -gt "$n0" ] && break
	sleep 1
done
[ "$(grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG")" -gt "$n0" ] ||
	fail "the guest did not come back within 300 s of the reboot"
new=$(GUEST_SH_TIMEOUT=60 guest_sh 'cat /proc/sys/kernel/random/boot_id')
[ -n "$new" ] && [ "$new" != "$old" ] || fail "boot id did not change: '$old' -> '$new'"
grep -a '^IDLEVM-READY ' "$IVM_CONSOLE_LOG" | tail -n 1 | tr -d '\r'
out=$("$idlevm" helper --domain "$IVM_DOMAIN" hello 2>&1) ||
	fail "helper hello after the reboot failed: $out"
echo "$out"
assert_eq "$(echo "$out" | sed -n 's/^ *helper_pid: *//p')" \
	"$(guest_sh 'systemctl show -p MainPID --value idlevm-helper.service')" \
	"helper pid after the reboot"
