# idlevm ps lists the guest's threads as the guest itself does.
. tests/e2e/lib_tasks.sh

before=$(guest_tasks)
ours=$(idlevm_tasks --domain "$IVM_DOMAIN") || fail "idlevm ps failed"
after=$(guest_tasks)
echo "idlevm ps: $(echo "$ours" | wc -l) threads; guest: $(echo "$before" | grep -vc '^#')"
[ "$(echo "$before" | grep -vc '^#')" -gt 20 ] || fail "guest list looks empty: $before"
compare_tasks "$ours" "$before" "$after" || fail "task lists differ"
# The workload is there, by name, with all its threads.
case $IVM_WORKLOAD in
lockstorm*)
	n=$(echo "$ours" | grep -c ' ls-worker-')
	[ "$n" -ge 2 ] || fail "expected lockstorm workers in: $ours"
	;;
esac

# ARGS: each process's command line as the guest's /proc/PID/cmdline
# gives it (NULs as spaces, as ps shows it; busybox ps adds its own
# decorations, so /proc is the reference here); a kernel thread's is
# [comm].
guest_args() {
	guest_sh 'for d in /proc/[0-9]*; do
		a=$(tr "\0" " " < $d/cmdline 2>/dev/null) || continue
		echo "${d#/proc/} ${a% }"
	done' | awk '{ if (NF > 1) print }' | sort -n -k1,1
}
before=$(guest_args)
ours=$(idlevm_args --domain "$IVM_DOMAIN") || fail "idlevm ps failed"
after=$(guest_args)
echo "$ours" | head -n 8
compare_args "$ours" "$before" "$after" || fail "command lines differ"
echo "$ours" | grep -q '^2 \[kthreadd\]$' || fail "kthreadd is not [kthreadd]: $ours"
case $IVM_WORKLOAD in
lockstorm*)
	echo "$ours" | grep -q " /bin/$IVM_WORKLOAD\$" ||
		fail "no /bin/$IVM_WORKLOAD in ARGS"
	;;
esac
