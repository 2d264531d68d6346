# idlevm ps lists the Debian guest's threads as its own /proc does, while
# the server is under load (workers and the load generator come and go).
. tests/e2e/lib_tasks.sh
. tests/e2e/web01/lib_web01.sh

before=$(guest_tasks)
ours=$(idlevm_tasks --domain "$IVM_DOMAIN") || fail "idlevm ps failed"
after=$(guest_tasks)
echo "idlevm ps: $(echo "$ours" | wc -l) threads; guest: $(echo "$before" | wc -l)"
[ "$(echo "$before" | wc -l)" -gt 50 ] || fail "guest list looks short: $before"
compare_tasks "$ours" "$before" "$after" || fail "task lists differ"
for c in $WEB01_SERVERS systemd; do
	echo "$ours" | awk -v c="$c" '$3 == c {f = 1} END {exit !f}' ||
		fail "idlevm ps shows no $c"
done
