# web01 booted as a Debian 12 server guest: systemd, the server stack, the
# load generator and the helper from its Debian package, all running.
. tests/e2e/web01/lib_web01.sh

assert_eq "$(guest_sh 'uname -r')" "$IVM_KVER" "guest kernel release"
assert_eq "$(guest_sh hostname)" web01 "guest hostname"
assert_eq "$(guest_sh nproc)" "$IVM_VCPUS" "guest cpus"
assert_eq "$(guest_sh '. /etc/os-release; echo $VERSION_CODENAME')" bookworm "Debian release"
assert_eq "$(guest_sh 'readlink /proc/1/exe')" /usr/lib/systemd/systemd "PID 1"

# systemd settles (starting) into running; nothing failed.
state=""
for i in $(seq 1 30); do
	state=$(guest_sh 'systemctl is-system-running' || true)
	[ "$state" = running ] && break
	sleep 2
done
failed=$(guest_sh 'systemctl --failed --no-legend --plain' || true)
[ "$state" = running ] || fail "systemd is '$state'; failed units: $failed"

for unit in nginx php8.2-fpm redis-server web01-load idlevm-helper; do
	s=$(guest_sh "systemctl is-active $unit.service") ||
		fail "$unit.service is '$s'"
done

# The helper came from the project's package, installed with dpkg -i, and
# its unit was enabled by the package.
pkg=$(guest_sh "dpkg-query -W -f '\${Status} \${Version}' idlevm-helper")
case $pkg in
"install ok installed $(cat VERSION)") echo "helper package: $pkg" ;;
*) fail "idlevm-helper package: '$pkg'" ;;
esac
assert_eq "$(guest_sh 'systemctl is-enabled idlevm-helper.service')" enabled \
	"idlevm-helper.service enabled by the package"

# The server stack: pre-forked workers, dynamically linked, Debian's.
workers=$(guest_sh 'pgrep -c -f "php-fpm: pool www"')
[ "$workers" -ge 2 ] || fail "expected php-fpm workers, got $workers"
guest_sh 'grep -q "libc.so.6" /proc/$(pgrep -o -f "php-fpm: pool www")/maps' ||
	fail "php-fpm workers are not dynamically linked against libc"

# The load generator's rounds come back with answers.  (How many and how
# fast depends on how busy the host is: TCG.)
last=$(web01_wait_rounds 1 120) || fail "no load round logged"
echo "load: $last"
case $last in
*" requests=0 "*) fail "the load round got no answer: $last" ;;
*" requests="[0-9]*) ;;
*) fail "unexpected load round: $last" ;;
esac

# Ground-truth hooks are there for the tests only.
guest_sh 'grep -q " /sys/kernel/tracing tracefs " /proc/mounts' ||
	fail "tracefs is not mounted in the guest"
guest_sh 'grep -qw idlevm.testshell=1 /proc/cmdline' ||
	fail "test shell running without idlevm.testshell=1"

ready=$(grep -a -m 1 '^IDLEVM-READY ' "$IVM_CONSOLE_LOG" | tr -d '\r')
case $ready in
"IDLEVM-READY guest=web01 helper="[0-9]*" kernel=$IVM_KVER "*) echo "$ready" ;;
*) fail "unexpected readiness line: $ready" ;;
esac
