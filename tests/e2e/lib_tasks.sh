# Task-list helpers shared by the ps tests.

# guest_tasks: "PID TID COMM" of every thread, from the guest's own /proc.
# One grep over every comm file (not a process per thread: a loop of cats
# took over 30 s on a busy TCG guest); threads that exit meanwhile are
# skipped (-s).
guest_tasks() {
	guest_sh 'grep -s -H "" /proc/[0-9]*/task/[0-9]*/comm; true' |
		sed -n 's|^/proc/\([0-9]*\)/task/\([0-9]*\)/comm:|\1 \2 |p' |
		sort -n -k2,2
}

# idlevm_tasks ARGS...: "PID TID COMM" from `idlevm ps ARGS`, without the
# idle tasks (pid 0), which /proc does not list.
idlevm_tasks() {
	local out
	out=$("$idlevm" ps "$@" 2>&1) || {
		echo "$out" >&2
		return 1
	}
	echo "$out" | awk 'NR > 1 && $1 != 0 {
		c = $3; for (i = 4; i <= NF - 2; i++) c = c " " $i
		print $1, $2, c }' | sort -n -k2,2
}

# compare_tasks OURS BEFORE AFTER: every thread in both guest snapshots
# must be in ours with the same pid and name, and ours may hold nothing
# that neither snapshot has.  /proc shows a busy kworker's comm with its
# workqueue appended ("kworker/0:1-events"): the kernel's comm is the part
# before it.
compare_tasks() {
	local ours=$1 before=$2 after=$3 bad=0
	local stable
	stable=$(join -j 2 -o 1.1,1.2,1.3 <(echo "$before" | awk '{print $1, $2, $3}' | sort -k2,2) \
		<(echo "$after" | awk '{print $2}' | sort) 2>/dev/null)
	while read -r pid tid comm; do
		[ -n "$tid" ] || continue
		line=$(echo "$ours" | awk -v t="$tid" '$2 == t')
		if [ -z "$line" ]; then
			echo "missing from idlevm ps: $pid $tid $comm"
			bad=$((bad + 1))
			continue
		fi
		set -- $line
		local opid=$1 ocomm=$3
		if [ "$opid" != "$pid" ]; then
			echo "tid $tid: pid $opid, guest says $pid"
			bad=$((bad + 1))
		fi
		case $comm in
		"$ocomm" | "$ocomm"-*) ;;
		*) echo "tid $tid: comm '$ocomm', guest says '$comm'"; bad=$((bad + 1)) ;;
		esac
	done <<<"$stable"
	while read -r pid tid comm; do
		[ -n "$tid" ] || continue
		if ! printf '%s\n%s\n' "$before" "$after" | awk -v t="$tid" '$2 == t {f=1} END {exit !f}'; then
			echo "idlevm ps shows a task the guest never had: $pid $tid $comm"
			bad=$((bad + 1))
		fi
	done <<<"$ours"
	[ "$bad" = 0 ]
}
