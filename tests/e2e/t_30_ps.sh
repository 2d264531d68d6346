# idlevm ps lists the guest's threads as the guest itself does.
. tests/e2e/lib_tasks.sh

before=$(guest_tasks)
ours=$(idlevm_tasks --domain "$IVM_DOMAIN") || fail "idlevm ps failed"
after=$(guest_tasks)
echo "idlevm ps: $(echo "$ours" | wc -l) threads; guest: $(echo "$before" | wc -l)"
[ "$(echo "$before" | wc -l)" -gt 20 ] || fail "guest list looks empty: $before"
compare_tasks "$ours" "$before" "$after" || fail "task lists differ"
# The workload is there, by name, with all its threads.
case $IVM_WORKLOAD in
lockstorm*)
	n=$(echo "$ours" | grep -c ' ls-worker-')
	[ "$n" -ge 2 ] || fail "expected lockstorm workers in: $ours"
	;;
esac
