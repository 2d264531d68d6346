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
# A test fails by exiting non-zero; `fail` says why.

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
# through the root shell on its second serial port, and print what it
# wrote (stdout and stderr, which share the serial line).  Returns the
# command's exit status, or 124 when no answer came within TIMEOUT_S
# (default $GUEST_SH_TIMEOUT or 30).
#
# The guest shell runs without echo; the command's output is framed by
# begin/end lines carrying a random token, so anything left on the line
# by an earlier command, or the kernel, is skipped.  One command at a time:
# the socket takes one client.  The command runs in a fresh sh -c, killed
# in the guest after TIMEOUT_S - 1 seconds (status 137).
#
# QEMU 7.2's emulated 16550 here (TCG) can leave received bytes undelivered
# to the guest until more input arrives (measured: a line stuck for
# seconds, the last one forever).  So while waiting for the answer this
# sends an empty line every 0.2 s: a no-op for the shell, and it pushes
# the command through.
guest_sh() {
	local cmd=$1 timeout=${2:-${GUEST_SH_TIMEOUT:-30}}
	local tok="$RANDOM$RANDOM$RANDOM" line partial="" out="" status=""
	local begun=0 script end=$((SECONDS + timeout)) rc

	# The markers are split by quotes in what is sent, so only the
	# guest's printf output matches them, should the text come back.
	# The guest runs the command under its own timeout, one second
	# shorter than ours, so that a hung command does not leave the one
	# guest shell busy for the tests after it.
	script="printf '%s\\n' '@@IVM-'BEGIN-$tok
timeout -s KILL $((timeout > 1 ? timeout - 1 : 1)) sh -c \"\$(cat <<'IVM_CMD_$tok'
$cmd
IVM_CMD_$tok
)\" </dev/null 2>&1
printf '\\n%s %s\\n' '@@IVM-'END-$tok \$?
"
	coproc IVM_GUEST_SH {
		exec socat - "UNIX-CONNECT:$IVM_SHELL_SOCK" 2>/dev/null
	}
	local rfd=${IVM_GUEST_SH[0]} wfd=${IVM_GUEST_SH[1]}
	local pid=$IVM_GUEST_SH_PID
	printf '%s' "$script" >&"$wfd"
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
		if [ "$begun" = 0 ]; then
			[ "$line" = "@@IVM-BEGIN-$tok" ] && begun=1
			continue
		fi
		case $line in
		"@@IVM-END-$tok "*)
			status=${line##* }
			break
			;;
		esac
		out+="$line"$'\n'
	done
	# Braces: a bare `exec ... 2>/dev/null` would send the rest of the
	# calling test's stderr (its `fail` messages) to /dev/null.
	{ exec {wfd}>&- {rfd}<&-; } 2>/dev/null
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if [ -z "$status" ]; then
		echo "guest_sh: no answer from the guest shell within ${timeout} s: $cmd" >&2
		return 124
	fi
	# The end marker starts with a newline of its own: drop it.
	printf '%s' "${out%$'\n'}"
	return "$status"
}

# idlevm_has_command NAME: whether this build's `idlevm --help` lists NAME.
idlevm_has_command() {
	"$idlevm" --help 2>/dev/null | grep -qE "^  $1( |\$)"
}
