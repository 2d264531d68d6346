# idlevm ps lists the Debian guest's threads as its own /proc does, while
# the server is under load (workers and the load generator come and go).
. tests/e2e/lib_tasks.sh
. tests/e2e/web01/lib_web01.sh

before=$(guest_tasks)
ours=$(idlevm_tasks --domain "$IVM_DOMAIN") || fail "idlevm ps failed"
after=$(guest_tasks)
echo "idlevm ps: $(echo "$ours" | wc -l) threads; guest: $(echo "$before" | grep -vc '^#')"
[ "$(echo "$before" | grep -vc '^#')" -gt 50 ] || fail "guest list looks short: $before"
compare_tasks "$ours" "$before" "$after" || fail "task lists differ"
for c in $WEB01_SERVERS systemd; do
	echo "$ours" | awk -v c="$c" '$3 == c {f = 1} END {exit !f}' ||
		fail "idlevm ps shows no $c"
done

# ARGS: each process's command line as the guest's own ps shows it
# (procps: ps -eo args, unlimited width), titles included ("nginx: worker
# process", "php-fpm: pool www"), while the load runs.
guest_args() {
	guest_sh 'ps -ww -eo pid=,args=' | sed 's/^ *//' |
		grep -v ' <defunct>$' | sort -n -k1,1
}
before=$(guest_args)
ours=$(idlevm_args --domain "$IVM_DOMAIN") || fail "idlevm ps failed"
after=$(guest_args)
echo "$ours" | grep -E 'nginx|php-fpm|redis|wrk' | head -n 12
compare_args "$ours" "$before" "$after" || fail "command lines differ from the guest's ps"
for t in 'nginx: master process' 'nginx: worker process' \
	'php-fpm: master process' 'php-fpm: pool www'; do
	echo "$ours" | grep -q "^[0-9]* $t" || fail "no '$t' in idlevm ps ARGS"
done
