# A fresh host, where nothing has mounted tracefs yet (issue 31): the
# first run must still get the sched idle source, mounting tracefs itself
# before it reads any event format, and say so.  Run in a private mount
# namespace with tracefs unmounted, so the host's own mount is untouched.
command -v unshare >/dev/null || fail "unshare missing (util-linux)"
host_mounts() { grep -c " /sys/kernel/tracing tracefs " /proc/mounts; }
before=$(host_mounts)
out=$(unshare -m --propagation private sh -c '
	while umount /sys/kernel/tracing 2>/dev/null; do :; done
	umount /sys/kernel/debug/tracing 2>/dev/null
	if grep -q " /sys/kernel/tracing " /proc/mounts; then
		echo "tracefs is still mounted in the namespace"; exit 3
	fi
	exec "$0" profile --domain "$1" -D 3 --no-report -o "$2"' \
	"$idlevm" "$IVM_DOMAIN" "$IVM_RUNDIR/t61.prof" 2>&1) ||
	fail "profile without tracefs mounted: $out"
echo "$out"
echo "$out" | grep -q "cannot start" && fail "the sched source fell back: $out"
echo "$out" | grep -q "^idlevm: mounted tracefs on /sys/kernel/tracing for the sched idle source" ||
	fail "profile did not say it mounted tracefs: $out"
echo "$out" | grep -q "^idlevm: idle source sched: " ||
	fail "not the sched source: $out"
"$idlevm" report "$IVM_RUNDIR/t61.prof" | grep -q "idle source: sched;" ||
	fail "the profile does not record the sched source"
# The host's own mounts are as they were.
assert_eq "$(host_mounts)" "$before" "tracefs mounts of the host"
