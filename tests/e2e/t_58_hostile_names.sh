# Names a guest user chooses reach the host operator's terminal escaped
# (issue 32): a thread named with a terminal escape (clear screen), BEL
# and an OSC title sequence, and a process whose command line carries one,
# as any unprivileged guest user can make them.  Every command that
# prints them (ps, stack, maps, info) prints "\x1b", "\x07"..., never the
# bytes, and still names the process.
# A shell names itself (only a thread group can write its own comm) and
# carries the title as its $0, then naps 2 ms at a time (so that its
# thread goes to idle, and is sampled).
pid=$(guest_sh 'sh -c "printf \"\\033[2J\\007\\033]0;pwned\\007x\" > /proc/\$\$/comm; while :; do usleep 2000; done" \
	"$(printf "\033]0;title\007\033[31mred")" >/dev/null 2>&1 &
echo $!') || fail "guest shell: $pid"
hostile=$pid
trap 'guest_sh "kill $hostile" >/dev/null 2>&1' EXIT
echo "hostile shell $hostile"
# Its comm is set once the shell ran its first command.
for ((i = 0; i < 50; i++)); do
	c=$(guest_sh "cat /proc/$hostile/comm" | od -An -c | tr -d ' \n')
	case $c in *033*) break ;; esac
	sleep 0.2
done
echo "comm in the guest: $c"
case $c in *033*) ;; *) fail "the guest shell did not rename itself: $c" ;; esac

# Control bytes other than tab and newline in a command's output.
raw_controls() {
	LC_ALL=C tr -d '\t\n' | LC_ALL=C tr -dc '\000-\037\177' | wc -c
}

out=$("$idlevm" ps --domain "$IVM_DOMAIN" 2>&1) || fail "idlevm ps: $out"
assert_eq "$(echo "$out" | raw_controls)" 0 "raw control bytes in idlevm ps"
line=$(echo "$out" | awk -v p="$hostile" '$2 == p')
echo "$line"
case $line in
*'\x1b[2J\x07\x1b]0'*) ;;
*) fail "the hostile comm is not shown escaped: $line" ;;
esac
# Command lines as the guest's own ps shows them: "?" for each control.
case $line in
*'usleep 2000; done ?]0;title??[31mred'*) ;;
*) fail "the hostile command line is not shown made safe: $line" ;;
esac

for cmd in "stack --pid $hostile" "maps --pid $hostile" "info"; do
	# shellcheck disable=SC2086
	out=$("$idlevm" $cmd --domain "$IVM_DOMAIN" 2>&1) ||
		fail "idlevm $cmd: $out"
	assert_eq "$(echo "$out" | raw_controls)" 0 "raw control bytes in idlevm $cmd"
done
echo "$out" | head -n 3
"$idlevm" stack --pid "$hostile" --domain "$IVM_DOMAIN" 2>&1 | grep -q '^tid [0-9]* (\\x1b\[2J' ||
	fail "stack does not name the hostile thread escaped"

# The reports of a profile that sampled it: text (the issue's case), the
# threads table, folded stacks.
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 3 --pid "$hostile" --no-report \
	-o "$IVM_RUNDIR/t58.prof" 2>&1) || fail "idlevm profile: $out"
for fmt in text threads folded periods; do
	rep=$("$idlevm" report "$IVM_RUNDIR/t58.prof" --format "$fmt" 2>&1) ||
		fail "report --format $fmt: $rep"
	assert_eq "$(echo "$rep" | raw_controls)" 0 "raw control bytes in report --format $fmt"
done
rep=$("$idlevm" report "$IVM_RUNDIR/t58.prof" 2>&1)
echo "$rep" | grep -m 3 'x1b'
echo "$rep" | grep -q '\\x1b\[2J\\x07\\x1b\]0;pwned\\x07' ||
	fail "the report does not name the hostile thread, escaped: $rep"
