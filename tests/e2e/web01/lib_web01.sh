# Helpers of the web01 end-to-end tests (tests/e2e/web01/t_*.sh).

# The server's processes, as the guest names them (comm).
WEB01_SERVERS="nginx php-fpm8.2 redis-server"

# web01_server_pids: "PID COMM" of every process of the server stack, from
# the guest's own /proc (masters and workers).
web01_server_pids() {
	guest_sh 'for c in '"$WEB01_SERVERS"'; do
		for p in $(pgrep -x "$c"); do echo "$p $c"; done
	done' | sort -n
}

# web01_wait_rounds N [TIMEOUT_S]: wait until the load generator has
# logged N rounds since the guest booted; print the last one.
web01_wait_rounds() {
	local want=$1 timeout=${2:-120} end=$((SECONDS + ${2:-120})) n
	while [ "$SECONDS" -lt "$end" ]; do
		n=$(guest_sh 'grep -c " requests=" /var/log/web01/rounds.log 2>/dev/null || echo 0')
		if [ "${n:-0}" -ge "$want" ]; then
			guest_sh 'grep " requests=" /var/log/web01/rounds.log | tail -n 1'
			return 0
		fi
		sleep 2
	done
	echo "web01: fewer than $want load rounds after ${timeout} s" >&2
	return 1
}

# kernel_raw_frames FOLDED: how many sample-weighted kernel frames of
# `idlevm report -f folded` output are bare addresses (not named).
kernel_raw_frames() {
	echo "$1" | awk '{
		n = $NF; sub(/ [0-9]+$/, "")
		k = split($0, f, ";")
		for (i = 1; i <= k; i++)
			if (f[i] ~ /^0xffff[0-9a-f]+$/) raw += n
	} END { print raw + 0 }'
}

# user_frame_stats FOLDED COMM_REGEX: "samples named raw" over the user
# frames of the processes whose comm matches: named is a function or
# FILE+0xADDR, raw a bare address.
user_frame_stats() {
	echo "$1" | awk -v re="$2" '
	{ n = $NF; line = $0; sub(/ [0-9]+$/, "", line)
	  k = split(line, f, ";")
	  if (f[1] !~ re) next
	  samples += n
	  for (i = 3; i <= k; i++) {
		if (f[i] ~ /_\[k\]/) continue
		if (f[i] ~ /^0x[0-9a-f]+$/) raw += n; else named += n
	  }
	} END { printf "%d %d %d\n", samples, named, raw }'
}

# reach_start_stats FOLDED COMM_REGEX: "samples whole" over the to-idle
# stacks (report -f folded -K to_idle) of the server processes whose
# COMM_[PID] matches, whole as reach_start_by_process says.
reach_start_stats() {
	reach_start_by_process "$1" | awk -v re="$2" '
	$1 ~ re { s += $2; w += $3 } END { printf "%d %d\n", s, w }'
}

# reach_start_by_process FOLDED: for every server process (COMM_[PID]),
# "COMM_[PID] samples whole percent" over its to-idle stacks (report -f
# folded -K to_idle): whole ones have user frames that reach the thread
# start (their outermost frame is libc's clone) or main
# (__libc_start_main), none of them a bare address.
reach_start_by_process() {
	echo "$1" | awk '
	{ n = $NF; line = $0; sub(/ [0-9]+$/, "", line)
	  k = split(line, f, ";")
	  if (f[1] !~ /^(nginx|php-fpm8\.2|redis-server)_\[[0-9]+\]$/) next
	  s[f[1]] += n
	  first = ""; bare = 0
	  for (i = 3; i <= k; i++) {
		if (f[i] ~ /_\[k\]/) continue
		if (first == "") first = f[i]
		if (f[i] ~ /^0x[0-9a-f]+$/) bare = 1
	  }
	  if (!bare && (first ~ /^libc\.so\.6\+/ || first ~ /^_start/ ||
			line ~ /;__libc_start_main;/)) w[f[1]] += n
	} END { for (p in s) printf "%s %d %d %.1f%%\n", p, s[p], w[p] + 0, 100 * w[p] / s[p] }' | sort
}

# web01_put_file LOCAL GUEST_PATH: copy a file into the guest through the
# guest shell (the image has no other way in): gzip'd, in base64 chunks of
# 24 KiB, a call each (the test shell runs a call only when its md5 holds,
# and guest_sh sends it again when it did not), the whole file checked at
# the end.  (A call of 24 KiB is some 32 KiB on the line, half of what the
# guest's tty holds while the shell reads it.)
web01_put_file() {
	local src=$1 dst=$2 tmp n=0 chunk sum
	tmp=$(mktemp -d) || return 1
	gzip -9c "$src" | base64 -w 76 | split -l 320 - "$tmp/c."
	guest_sh "mkdir -p '$(dirname "$dst")' && rm -f '$dst.b64'" || { rm -rf "$tmp"; return 1; }
	for chunk in "$tmp"/c.*; do
		guest_sh "cat >>'$dst.b64' <<'IVM_B64'
$(cat "$chunk")
IVM_B64" >/dev/null || { rm -rf "$tmp"; return 1; }
		n=$((n + 1))
	done
	sum=$(md5sum <"$src" | cut -d' ' -f1)
	rm -rf "$tmp"
	guest_sh "base64 -d '$dst.b64' | gunzip >'$dst' && rm -f '$dst.b64' &&
		[ \"\$(md5sum <'$dst' | cut -d' ' -f1)\" = $sum ]" >/dev/null || return 1
	echo "copied $src to the guest's $dst in $n chunks" >&2
}
