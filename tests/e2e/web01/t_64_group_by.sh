# --group-by on the web01 guest: the server's pre-forked workers, each a
# process of its own, are one tree by their name (comm) and by their role
# (title); the per-process report keeps them apart.
. tests/e2e/web01/lib_web01.sh

prof=$IVM_RUNDIR/t64.prof
# The workers must be seen going idle, several of them: on a host busy
# with other guests a run may catch too few, so up to four runs.
for try in 1 2 3 4; do
	out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 20 -o "$prof" --no-report 2>&1) ||
		fail "idlevm profile failed: $out"
	by_process=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null) ||
		fail "idlevm report failed"
	pids=$(echo "$by_process" | awk '{split($1, f, ";")} f[1] ~ /^php-fpm8\.2_\[[0-9]+\]$/ {print f[1]}' | sort -u | wc -l)
	[ "$pids" -ge 2 ] && break
	echo "run $try: to-idle samples from $pids php-fpm processes; again"
done
by_comm=$("$idlevm" report -f folded -K to_idle --group-by comm "$prof" 2>/dev/null) ||
	fail "idlevm report --group-by comm failed"
by_title=$("$idlevm" report -f folded -K to_idle --group-by title "$prof" 2>/dev/null) ||
	fail "idlevm report --group-by title failed"

top() { echo "$1" | awk '{split($1, f, ";"); n[f[1]] += $NF} END {for (k in n) print n[k], k}' | sort -rn; }
echo "to-idle samples by comm:"; top "$by_comm" | head -n 10
echo "to-idle samples by title:"; top "$by_title" | head -n 10

# The php-fpm processes that went to idle: several by pid, one by name.
total=$(echo "$by_process" | awk '{split($1, f, ";")} f[1] ~ /^php-fpm8\.2_\[/ {s += $NF} END {print s + 0}')
groups=$(top "$by_comm" | awk '$2 ~ /^php-fpm/' | wc -l)
merged=$(top "$by_comm" | awk '$2 == "php-fpm8.2" {print $1}')
echo "php-fpm: $total to-idle samples from $pids processes; --group-by comm: $groups group(s) of ${merged:-0}"
[ "$pids" -ge 2 ] || fail "expected to-idle samples from several php-fpm processes, got $pids"
[ "$groups" = 1 ] || fail "php-fpm processes make $groups groups by comm"
[ "${merged:-0}" = "$total" ] || fail "the php-fpm group has ${merged:-0} samples, its processes $total"
# The same tree, not just the same count: every php-fpm stack of the
# per-process report is in the merged one, as often.
# stacks FOLDED GROUP_RE SKIP: "count frames" summed over the lines whose
# first field matches GROUP_RE, their first SKIP fields left out.
stacks() {
	echo "$1" | awk -v re="$2" -v skip="$3" '{
		n = $NF; line = $0; sub(/ [0-9]+$/, "", line)
		k = split(line, f, ";")
		if (f[1] !~ re) next
		key = ""
		for (i = skip + 1; i <= k; i++) key = key ";" f[i]
		s[key] += n
	} END { for (key in s) print s[key], key }' | sort
}
a=$(stacks "$by_process" '^php-fpm8\.2_\[[0-9]+\]$' 2)
b=$(stacks "$by_comm" '^php-fpm8\.2$' 1)
[ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head; fail "the merged php-fpm tree differs from its processes' trees"; }

# By title the workers are one role, apart from their master.
workers=$(top "$by_title" | awk '$2 == "php-fpm:_pool_www" {print $1}')
[ "${workers:-0}" -gt 0 ] || fail "no 'php-fpm: pool www' group by title"
top "$by_title" | awk '$2 ~ /^nginx:_worker_process$/ {f = 1} END {exit !f}' ||
	fail "no 'nginx: worker process' group by title"
