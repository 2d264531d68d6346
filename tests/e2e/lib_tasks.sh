# Task-list helpers shared by the ps tests.

# guest_tasks: "PID TID COMM" of every thread, from the guest's own /proc.
# One grep over every comm file (not a process per thread: a loop of cats
# took over 30 s on a busy TCG guest); threads that exit meanwhile are
# skipped (-s).  Then "# last_pid N", the last pid the guest gave out by
# the end of the listing (when its kernel shows it), for compare_tasks.
guest_tasks() {
	guest_sh 'grep -s -H "" /proc/[0-9]*/task/[0-9]*/comm
		echo "# last_pid $(cat /proc/sys/kernel/ns_last_pid 2>/dev/null)"' |
		sed -n -e 's|^/proc/\([0-9]*\)/task/\([0-9]*\)/comm:|\1 \2 |p' \
			-e '/^# last_pid [0-9][0-9]*$/p' |
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
		c = substr($0, 17, 16); sub(/ +$/, "", c)
		print $1, $2, c }' | sort -n -k2,2
}

# idlevm_args ARGS...: "PID ARGS" of every process (its main thread's row)
# from `idlevm ps ARGS`: the fixed columns "%7d %7d %-16s %c %4u ARGS".
idlevm_args() {
	local out
	out=$("$idlevm" ps "$@" 2>&1) || {
		echo "$out" >&2
		return 1
	}
	echo "$out" | awk 'NR > 1 && $1 != 0 && $1 == $2 { print $1, substr($0, 41) }' |
		sort -n -k1,1
}

# compare_args OURS BEFORE AFTER: "PID ARGS" lines; every process with the
# same ARGS in both guest snapshots (so it neither came, went nor retitled
# itself meanwhile) must have them in ours.  A workqueue worker's name
# ends in what it last worked for ("[kworker/0:1-events]"), which changes
# by the millisecond: there the part before it must agree.  Prints what
# differs and how many agreed; fails on any difference or when none agreed.
compare_args() {
	local ours=$1 before=$2 after=$3
	awk -v ours="$ours" -v after="$after" '
	function kw(s) { match(s, /^\[kworker\/[^]+-]*/); return substr(s, 1, RLENGTH) }
	BEGIN {
		n = split(ours, l, "\n")
		for (i = 1; i <= n; i++) { p = l[i]; sub(/ .*/, "", p); a = l[i]; sub(/^[0-9]+ ?/, "", a); o[p] = a; has[p] = 1 }
		n = split(after, l, "\n")
		for (i = 1; i <= n; i++) { p = l[i]; sub(/ .*/, "", p); a = l[i]; sub(/^[0-9]+ ?/, "", a); af[p] = a; hasaf[p] = 1 }
	}
	{
		p = $1; a = $0; sub(/^[0-9]+ ?/, "", a)
		if (!(p in hasaf) || af[p] != a) next
		# The shell of the listing itself: its script spans lines, which the
		# listing cuts at the first.
		if (a ~ /for d in \/proc\/\[0-9\]\*/) next
		if (!(p in has)) { printf "pid %s (%s) missing from idlevm ps\n", p, a; bad++; next }
		if (o[p] != a && a ~ /^\[kworker\// && o[p] ~ /^\[kworker\// &&
		    kw(o[p]) == kw(a)) { ok++; next }
		if (o[p] != a) { printf "pid %s: idlevm ps says \"%s\", the guest \"%s\"\n", p, o[p], a; bad++; next }
		ok++
	}
	END { printf "ARGS agree for %d processes, differ for %d\n", ok, bad; exit (bad || !ok) }' <<<"$before"
}

# compare_tasks OURS BEFORE AFTER: every thread in both guest snapshots
# must be in ours with the same pid and name, and ours may hold nothing
# that neither snapshot has, but for a thread born after the first and
# gone before the second (a guest's short-lived processes: web01's load
# forks date and grep): its id is above the first snapshot's last pid and
# at most the second's.  /proc shows a busy kworker's comm with its
# workqueue appended ("kworker/0:1-events"): the kernel's comm is the part
# before it.
compare_tasks() {
	local ours=$1 before=$2 after=$3 bad=0
	local stable first last
	first=$(echo "$before" | sed -n 's/^# last_pid //p')
	last=$(echo "$after" | sed -n 's/^# last_pid //p')
	before=$(echo "$before" | grep -v '^#')
	after=$(echo "$after" | grep -v '^#')
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
			if [ -n "$first" ] && [ -n "$last" ] &&
			   [ "$tid" -gt "$first" ] && [ "$tid" -le "$last" ]; then
				echo "born and gone between the guest's listings: $pid $tid $comm"
				continue
			fi
			echo "idlevm ps shows a task the guest never had: $pid $tid $comm"
			bad=$((bad + 1))
		fi
	done <<<"$ours"
	[ "$bad" = 0 ]
}
