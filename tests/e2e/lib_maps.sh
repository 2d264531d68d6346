# Helpers of the maps tests (t_43_maps, web01/t_35_maps).

# maps_theirs PID: the guest's /proc/PID/maps (nothing if it is gone),
# without the gate page, which is in no mm.
maps_theirs() {
	guest_sh "cat /proc/$1/maps 2>/dev/null" | grep -v ' \[vsyscall\]$'
}

# maps_ours PID ARGS...: idlevm's lines without the build-id column.
maps_ours() {
	local pid=$1 out
	shift
	out=$("$idlevm" maps "$@" --pid "$pid") || return 1
	echo "$out" | cut -f1
}

# maps_compare PID NAME: idlevm maps against the guest's, read just
# before and just after (a live process may change its mappings in
# between); 0 when they agree, 1 when the process went away, fail when
# they differ three times.
maps_compare() {
	local pid=$1 name=$2 tries before mine after
	for tries in 1 2 3; do
		before=$(maps_theirs "$pid")
		mine=$(maps_ours "$pid" --domain "$IVM_DOMAIN" 2>&1) || {
			[ -z "$(maps_theirs "$pid")" ] && return 1
			fail "idlevm maps --pid $pid ($name): $mine"
		}
		after=$(maps_theirs "$pid")
		[ -z "$after" ] && return 1
		if [ "$mine" = "$before" ] || [ "$mine" = "$after" ]; then
			echo "$name (pid $pid): $(echo "$mine" | wc -l) mappings agree"
			return 0
		fi
	done
	diff <(echo "$after") <(echo "$mine") >&2
	fail "maps of $name (pid $pid) differ from the guest's"
}
