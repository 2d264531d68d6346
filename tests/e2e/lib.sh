# Helpers for the real-VM end-to-end tests (tests/e2e/t_*.sh).  The runner
# (tests/e2e/run) sources this before each test, in a subshell of its own,
# with these set:
#   IVM_DOMAIN       libvirt domain of the guest (qemu:///system)
#   IVM_RUNDIR       the run directory (console.log, shell.sock, domain.xml)
#   IVM_CONSOLE_LOG  the guest's console (ttyS0)
#   IVM_SHELL_SOCK   unix socket of a root shell on the guest's ttyS1
#   IVM_WORKLOAD     the workload the guest runs (lockstorm, spin, none...)
#   IVM_VCPUS        its vCPU count
#   IVM_BUILD        absolute build directory ($IVM_BUILD/idlevm)
#   IVM_KVER IVM_KERNEL IVM_INITRD IVM_VMLINUX IVM_SYSTEM_MAP  (image.env)
#   IVM_GUEST_SH_RTT_MS  slowest of a few guest_sh round trips, measured
#                        by the runner after boot (see rtt_guest_sh_ms)
#   IVM_HELPER_RTT_MS    slowest of a few helper pings, likewise
# A test fails by exiting non-zero; `fail` says why.
#
# Tests assert outcomes, not timings: the machine may be loaded.  A wait
# waits for the outcome (wait_for_output), and any time a test needs is
# derived from round trips measured on this run (the two above, or
# measured again by the test), never a constant tuned on a quiet machine.

idlevm=${IVM_BUILD:?}/idlevm

# fail MESSAGE: end the test as failed.
fail() {
	echo "fail: $*" >&2
	exit 1
}

# assert_eq ACTUAL EXPECTED WHAT
assert_eq() {
	[ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
}

# guest_sh 'COMMAND' [TIMEOUT_S]: run COMMAND with /bin/sh in the guest,
# through the test shell on its second serial port (images/testshell),
# and print what it wrote (stdout and stderr together).  Returns the
# command's exit status, 124 when no answer came within TIMEOUT_S (default
# $GUEST_SH_TIMEOUT, else guest_sh_timeout), or 125 when the serial line
# garbled the output every time it was read (the reason is said on
# stderr).
#
# The command goes in base64 with its md5 (images/testshell says how) and
# runs in a fresh sh, killed in the guest after TIMEOUT_S - 1 seconds
# (status 137), so that a hung command does not leave the one guest shell
# busy for the tests after it.  Its output is framed by begin/end lines carrying a
# random token, so anything left on the line by an earlier command, or
# the kernel, is skipped.  One command at a time: the socket takes one
# client.
#
# QEMU 7.2's emulated 16550 here (TCG) can leave received bytes undelivered
# to the guest until more input arrives (measured: a line stuck for
# seconds, the last one forever).  So while waiting for the answer this
# sends an empty line every 0.2 s: nothing to the test shell, and it
# pushes the command through.  It also loses output bytes now and then on
# a loaded host (seen: a newline between two lines of a listing, and one
# before the end marker, which then went unseen for 175 s), so markers are
# found anywhere in a line, and the guest keeps the output in a file and
# sends its md5 with the end line; output that does not match is read
# again from the file (the command does not run twice), up to 3 times.  A
# call the guest received damaged is answered "bad" and sent again.
guest_sh() {
	local cmd=$1 timeout=${2:-${GUEST_SH_TIMEOUT:-$(guest_sh_timeout)}}
	local tok="$RANDOM$RANDOM$RANDOM" line partial out status sum
	local begun end=$((SECONDS + timeout)) rc attempt mark got call
	local t0 ms slowest sends=0
	t0=$(ms_now)

	mark=$tok
	call=$(guest_sh_call "$mark" $((timeout > 1 ? timeout - 1 : 1)) "$cmd")
	coproc IVM_GUEST_SH {
		exec socat - "UNIX-CONNECT:$IVM_SHELL_SOCK" 2>/dev/null
	}
	local rfd=${IVM_GUEST_SH[0]} wfd=${IVM_GUEST_SH[1]}
	local pid=$IVM_GUEST_SH_PID
	printf '%s\n' "$call" >&"$wfd"
	for attempt in 1 2 3; do
		partial="" out="" status="" sum="" begun=0
		while [ "$SECONDS" -lt "$end" ]; do
			IFS= read -r -t 0.2 -u "$rfd" line
			rc=$?
			if [ "$rc" -gt 128 ]; then
				# Timed out: keep the partial line, nudge the UART.
				partial+=$line
				printf '\n' >&"$wfd" 2>/dev/null
				continue
			fi
			[ "$rc" = 0 ] || break	# EOF: socat gone
			line=$partial$line
			partial=""
			line=${line%$'\r'}
			# A marker may come glued to a neighbouring line when
			# the line lost a newline: look for it anywhere in it.
			if [ "$begun" = 0 ]; then
				case $line in
				*"@@IVM-BEGIN-$mark"*)
					begun=1
					[ -n "${IVM_GUEST_SH_BEGUN:-}" ] && { status=0 sum=begun; break; }
					line=${line#*"@@IVM-BEGIN-$mark"}
					[ -n "$line" ] || continue
					;;
				*"@@IVM-BAD-$mark"*)
					[ $((sends += 1)) -lt 3 ] &&
						printf '%s\n' "$call" >&"$wfd"
					continue
					;;
				*) continue ;;
				esac
			fi
			case $line in
			*"@@IVM-END-$mark "*)
				out+=${line%%"@@IVM-END-$mark "*}
				line=${line#*"@@IVM-END-$mark "}
				status=${line%% *}
				sum=${line#* }
				break
				;;
			esac
			out+="$line"$'\n'
		done
		[ -n "$status" ] && [ "$sum" != begun ] || break
		# The end marker starts with a newline of its own: drop it.
		got=$(printf '%s' "${out%$'\n'}" | md5sum | cut -d' ' -f1)
		[ "$got" = "$sum" ] && break
		echo "guest_sh: the serial line garbled the output (read $attempt): $cmd" >&2
		[ "$attempt" = 3 ] && { status=125; break; }
		# The guest keeps the last call's output: read it again, as a
		# call of its own that ends with the first one's status.
		call=$(guest_sh_call "$tok-$attempt" 10 "cat /run/ivm-sh.$mark; exit $status")
		mark=$tok-$attempt
		sends=0
		printf '%s\n' "$call" >&"$wfd"
	done
	# Braces: a bare `exec ... 2>/dev/null` would send the rest of the
	# calling test's stderr (its `fail` messages) to /dev/null.
	{ exec {wfd}>&- {rfd}<&-; } 2>/dev/null
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	# The slowest answer of this run, for the timeouts after it.
	if [ -n "$status" ] && [ -n "${IVM_RUNDIR:-}" ]; then
		ms=$(( $(ms_now) - t0 ))
		slowest=$(cat "$IVM_RUNDIR/guest_sh.slowest" 2>/dev/null)
		[ "$ms" -gt "${slowest:-0}" ] && echo "$ms" >"$IVM_RUNDIR/guest_sh.slowest"
	fi
	if [ -z "$status" ]; then
		echo "guest_sh: no answer from the guest shell within ${timeout} s: $cmd" >&2
		return 124
	fi
	[ "$status" = 125 ] && [ "$got" != "$sum" ] && return 125
	[ "$sum" = begun ] && return 0
	printf '%s' "${out%$'\n'}"
	return "$status"
}

# guest_sh_fatal 'COMMAND' [TIMEOUT_S]: start COMMAND, one that ends the
# guest's boot (a reboot, a panic), and return once the guest said it
# started it; 124 when it did not within TIMEOUT_S.  The connection stays
# open until then: QEMU drops what it has not passed to the UART when the
# client goes (seen: a command sent with socat's input closed after 2 s
# never ran).
guest_sh_fatal() {
	IVM_GUEST_SH_BEGUN=1 guest_sh "$@" >/dev/null
}

# guest_sh_call MARK SECONDS COMMAND: the test shell's call that runs
# COMMAND as MARK, killed after SECONDS (images/testshell): a line that
# says so, then COMMAND in lines of base64.
guest_sh_call() {
	local code
	code=$(printf '%s\n' "$3" | base64 -w 76)
	printf '@@IVM-RUN %s %s %s %s\n%s\n' "$1" "$2" \
		"$(printf '%s\n' "$code" | md5sum | cut -d' ' -f1)" \
		"$(printf '%s\n' "$code" | wc -l)" "$code"
}

# guest_sh_timeout: guest_sh's default timeout in seconds: 30, or 100
# round trips of the guest shell (`true`) as measured after boot, or 10
# times the slowest guest_sh of this run so far, whichever is longest.  A
# loaded host slows the guest's serial line and its shell alike, a command
# that starts a few processes takes many such round trips, and the load
# may grow after boot (seen: 35 s were not enough for a listing of 8
# threads when `true` took 1.2 s at boot and 3 s later).
guest_sh_timeout() {
	local rtt=${IVM_GUEST_SH_RTT_MS:-0} slowest=0 t
	[ -n "${IVM_RUNDIR:-}" ] && [ -f "$IVM_RUNDIR/guest_sh.slowest" ] &&
		slowest=$(cat "$IVM_RUNDIR/guest_sh.slowest" 2>/dev/null)
	t=$(( (rtt * 100 + 999) / 1000 ))
	[ $(( (${slowest:-0} * 10 + 999) / 1000 )) -gt "$t" ] &&
		t=$(( (${slowest:-0} * 10 + 999) / 1000 ))
	echo $(( t > 30 ? t : 30 ))
}

# ms_now: wall clock in milliseconds.
ms_now() { date +%s%3N; }

# rtt_guest_sh_ms [N]: the slowest of N (default 3) round trips of the
# guest shell (guest_sh true), in ms.
rtt_guest_sh_ms() {
	local i t0 t1 max=0
	for ((i = 0; i < ${1:-3}; i++)); do
		t0=$(ms_now)
		guest_sh true >/dev/null || return 1
		t1=$(ms_now)
		[ $((t1 - t0)) -gt "$max" ] && max=$((t1 - t0))
	done
	echo "$max"
}

# rtt_helper_ms [N]: the slowest of N (default 10) pings of the in-guest
# helper through the domain's channel, in ms (rounded up).
rtt_helper_ms() {
	"$idlevm" helper --domain "$IVM_DOMAIN" ping --count "${1:-10}" 2>/dev/null |
		awk '/ pings: / { sub(/.*max /, ""); printf "%d\n", $1 + 0.999; ok = 1 }
		     END { exit !ok }'
}

# wait_for_output FILE REGEX PID: wait until FILE has a line matching the
# extended REGEX; fails (status 1) as soon as PID, the process writing
# FILE, is gone without it.  No time limit of its own: the runner's
# per-test timeout is the hang guard.
wait_for_output() {
	while ! grep -qE -- "$2" "$1" 2>/dev/null; do
		kill -0 "$3" 2>/dev/null || grep -qE -- "$2" "$1" 2>/dev/null ||
			return 1
		sleep 0.1
	done
}

# wait_for_samples PROF PID: wait until the profile PROF, which idlevm
# profile (PID) is writing, holds a to-idle sample (it flushes every
# second); fails as soon as PID is gone without one.
wait_for_samples() {
	until "$idlevm" report -f folded -K to_idle "$1" 2>/dev/null | grep -q .; do
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.5
	done
}

# wait_for_guest_threads PID COMM_PREFIX N: wait until guest process PID
# has N threads whose comm starts with COMM_PREFIX; print their tids.
wait_for_guest_threads() {
	local tids
	for ((;;)); do
		tids=$(guest_sh "for t in /proc/$1/task/*; do c=\$(cat \$t/comm 2>/dev/null); case \$c in $2*) echo \${t##*/} ;; esac; done") ||
			return 1
		[ "$(echo "$tids" | grep -c .)" -ge "$3" ] && break
		guest_sh "test -d /proc/$1" || return 1
	done
	echo "$tids"
}

# guest_stop PID...: kill each PID in the guest and make sure it is gone,
# a few tries (a guest shell round trip can time out on a loaded host): a
# process a test started must not outlive it (t_63 takes the workload by
# name).  Status 1, and a warning, when one would not go.
guest_stop() {
	local p i
	for p; do
		for i in 1 2 3; do
			guest_sh "kill $p 2>/dev/null; sleep 0.2; kill -0 $p 2>/dev/null && exit 1; exit 0" \
				>/dev/null && continue 2
		done
		echo "warning: guest process $p is still there" >&2
		return 1
	done
}

# lockstorm_blocks LO HI SECONDS CALLS: "BLOCK_MS RUN_S" for a lockstorm
# started in the guest whose workers a check must find blocked in the same
# place CALLS guest shell round trips apart (around idlevm stack): the
# blocks are LO:HI ms, stretched so that they last at least 4 times those
# round trips as measured now (up to lockstorm's cap of 60 s), and its
# run time SECONDS stretched alike.
lockstorm_blocks() {
	local rtt lo
	rtt=$(rtt_guest_sh_ms 3) || return 1
	lo=$((4 * $4 * rtt))
	[ "$lo" -gt "$1" ] || lo=$1
	# lockstorm takes blocks of at most 60 s.
	[ $((lo + $2 - $1)) -le 60000 ] || lo=$((60000 - $2 + $1))
	echo "$lo:$((lo + $2 - $1)) $(($3 * lo / $1))"
	echo "lockstorm blocks $lo:$((lo + $2 - $1)) ms: guest shell round trip ${rtt} ms now" >&2
}

# idlevm_has_command NAME: whether this build's `idlevm --help` lists NAME.
idlevm_has_command() {
	"$idlevm" --help 2>/dev/null | grep -qE "^  $1( |\$)"
}

# share_tolerance P N M: how far (in points) two shares of P percent,
# measured over N and M samples, may differ: 10 points, or three standard
# deviations of their difference when the counts are that small (a loaded
# host leaves idlevm and the guest fewer transitions to count).
# In awk: tol(p, n, m); tol_base(p, n, m, POINTS) for another base than 10.
LS_AWK_TOL='function tol_base(p, n, m, base,  sd) {
	sd = 100 * sqrt((p / 100) * (1 - p / 100) * (1 / (n > 0 ? n : 1) + 1 / (m > 0 ? m : 1)))
	return 3 * sd > base ? 3 * sd : base }
function tol(p, n, m) { return tol_base(p, n, m, 10) }'
