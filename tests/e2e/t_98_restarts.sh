# e2e-timeout: 900
# A continuous run (`profile --window`) follows one guest through five
# boots: a reboot (a new KASLR offset), a pause (the same boot: the
# window goes on), a kernel panic and `virsh reset`, `virsh destroy` and a
# start with another kernel (Debian 11's 5.10: other symbols, BTF and
# layout), QEMU killed by SIGKILL and a start with the suite's kernel
# again.  Every
# window is whole, names the kernel and kaslr_offset of the boot it was
# taken in (read by the guest itself from /proc/kallsyms), the windows go
# boot by boot, the last window of each boot says why it ended
# (end_reason) and the first of the next what came before (after), and
# no window mixes two boots (its to-idle stacks switch away in
# __schedule, as read with its own boot's offset and symbols).
#
# Restarts the shared guest: it ends as it began (the suite's domain.xml,
# kernel and workload), also when the test fails, for t_99.
IVM_PROG=t98
. tests/e2e/lib_boots.sh
boots_need_lockstorm
bullseye_env=${IVM_BULLSEYE_ENV:-$IVM_BUILD/guest-bullseye/image.env}
if [ ! -f "$bullseye_env" ]; then
	echo "skip: no $bullseye_env (IVM_GUEST_SUITE=bullseye images/build-image)"
	exit 77
fi

dir=$IVM_RUNDIR/t98
rm -rf "$dir" "$IVM_RUNDIR"/t98-*.xml
log=$IVM_RUNDIR/t98.log
xml=$IVM_RUNDIR/domain.xml
pid=""
restored=0

# boot XML: start the domain from XML; wait for its workload.
boot() {
	: >"$IVM_CONSOLE_LOG"
	ivm_virsh create "$1" >/dev/null || fail "virsh create $1 failed"
	ivm_wait_ready "$IVM_CONSOLE_LOG" 300 "$(ivm_domain_qemu_pid "$IVM_DOMAIN")" >/dev/null ||
		fail "the guest did not boot from $1"
}

cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	if [ "$restored" = 0 ]; then
		# Back to the suite's guest, whatever state this left it in.
		ivm_domain_destroy "$IVM_DOMAIN"
		: >"$IVM_CONSOLE_LOG"
		ivm_virsh create "$xml" >/dev/null &&
			ivm_wait_ready "$IVM_CONSOLE_LOG" 300 >/dev/null
	fi
	rm -f "$IVM_RUNDIR"/t98-*.xml
	true
}
trap cleanup EXIT

# The suite's guest as a domain that reboots rather than stops.
sed 's|<on_reboot>destroy</on_reboot>|<on_reboot>restart</on_reboot>|' "$xml" \
	>"$IVM_RUNDIR/t98-reboot.xml"
grep -q '<on_reboot>restart' "$IVM_RUNDIR/t98-reboot.xml" || fail "no on_reboot in $xml"
# ... and on Debian 11's kernel.
(
	ivm_image_env "$bullseye_env"
	sed -e "s|<kernel>.*</kernel>|<kernel>$IVM_KERNEL</kernel>|" \
	    -e "s|<initrd>.*</initrd>|<initrd>$IVM_INITRD</initrd>|" "$xml"
) >"$IVM_RUNDIR/t98-bullseye.xml" || fail "no bullseye domain XML"
kver_b=$(. "$bullseye_env" && echo "$IVM_KVER")

ivm_domain_destroy "$IVM_DOMAIN"
boot "$IVM_RUNDIR/t98-reboot.xml"
k1=$(kaslr)
"$idlevm" profile --domain "$IVM_DOMAIN" --window 8 --output-dir "$dir" \
	--no-pprof -D 1200 >"$log" 2>&1 &
pid=$!
wait_windows 2

# 1. A reboot.
n0=$(grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG")
guest_sh_fatal 'reboot -f' || fail "the guest did not take reboot -f"
next_boot "$n0" reboot
k2=$(kaslr)
wait_back 1

# A pause is no new boot: the window goes on, and says the guest was not
# running.
ended=$(grep -c "ended, whole" "$log")
pause_seen
assert_eq "$(grep -c "ended, whole" "$log")" "$ended" "windows ended by the pause"

# 2. A kernel panic (no pvpanic device, the kernel does not reboot by
# itself), then a reset.
n0=$(grep -a -c '^IDLEVM-READY ' "$IVM_CONSOLE_LOG")
guest_sh_fatal 'echo c >/proc/sysrq-trigger' || fail "the guest did not take the panic"
wait_for_output "$log" "^idlevm: the guest's kernel panicked: window .* ended, whole" "$pid" ||
	fail "no word of the panic: $(cat "$log")"
ivm_virsh reset "$IVM_DOMAIN" >/dev/null || fail "virsh reset failed"
next_boot "$n0" reset
k3=$(kaslr)
wait_back 2

# 3. Destroyed, started on another kernel.
ivm_domain_destroy "$IVM_DOMAIN"
boot "$IVM_RUNDIR/t98-bullseye.xml"
k4=$(kaslr)
assert_eq "$(guest_sh 'uname -r')" "$kver_b" "kernel of the fourth boot"
wait_back 3

# 4. QEMU killed, started as the suite's guest again.
qpid=$(ivm_domain_qemu_pid "$IVM_DOMAIN")
[ -n "$qpid" ] || fail "no QEMU pid"
kill -KILL "$qpid"
for i in $(seq 1 100); do
	[ -d "/proc/$qpid" ] || break
	sleep 0.2
done
ivm_domain_destroy "$IVM_DOMAIN"	# libvirt may still list it
boot "$xml"
restored=1
k5=$(kaslr)
wait_back 4
kill -INT "$pid"
wait "$pid" || fail "idlevm failed: $(cat "$log")"
pid=""
grep -E "ended, whole|is back|waiting for|stopped" "$log"
echo "boots: kaslr $k1, $k2 (reboot), $k3 (panic, reset), $k4 ($kver_b), $k5"

# What it said on stderr.
grep -q "^idlevm: the guest rebooted: window .* ended, whole" "$log" ||
	fail "no word of the reboot"
assert_eq "$(grep -c "^idlevm: the guest went away: window .* ended, whole" "$log")" 2 \
	"boots that ended with their QEMU"
grep -q "^idlevm: the guest's kernel panicked: window .* ended, whole; .*(waiting for a reset)" "$log" ||
	fail "no word of waiting for a reset after the panic"
assert_eq "$(grep -c "^idlevm: the guest is back after" "$log")" 4 "boots followed"

# Every window: whole, and of one boot: the boots start at the windows
# that say what came before ("after"), and each window names its boot's
# kernel and offset.
want=("$IVM_KVER $k1" "$IVM_KVER $k2" "$IVM_KVER $k3" "$kver_b $k4" "$IVM_KVER $k5")
[ "$k1" = "$k2" ] && echo "note: the reboot drew the same KASLR offset ($k1): it happens"
i=-1
last=""
for prof in "$dir"/*.prof; do
	name=$(basename "$prof" .prof)
	check=$(check_window "$prof") || exit 1
	meta() { window_meta "$1" "$dir/$2.txt"; }
	after=$(meta after "$name")
	if [ "$i" -lt 0 ] || [ -n "$after" ]; then
		i=$((i + 1))
		# The window before says why its boot ended, this one names it.
		if [ -n "$last" ]; then
			echo "$after" | grep -q "the window before: $last.prof" ||
				fail "$name, first of boot $((i + 1)), does not name $last: $after"
			meta end_reason "$last" | grep -q "^the guest\('s kernel panicked\| rebooted\| went away\)" ||
				fail "$last, last of boot $i, says no end_reason"
		fi
	fi
	[ "$i" -lt 5 ] || fail "$name: more boots than 5"
	b="$(meta kernel "$name") $(meta kaslr_offset "$name")"
	assert_eq "$b" "${want[$i]}" "$name's kernel and kaslr_offset (boot $((i + 1)))"
	echo "$name: boot $((i + 1)) ($b), ${check#*: }${after:+, after: $after}"
	last=$name
done
assert_eq "$((i + 1))" 5 "boots the windows went through"
# The pause is in a window of the second boot.
grep -l "the guest was not running for" "$dir"/*.txt >/dev/null ||
	fail "no window says the guest was paused"
