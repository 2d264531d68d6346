# With no vmlinux anywhere, idlevm reads the guest kernel from its own
# memory (VMCOREINFO, kallsyms, BTF, ORC), says so in one line, and info,
# ps and stack still agree with the guest; a core dump too.
. tests/e2e/lib_tasks.sh

tmp=$(mktemp -d)
pid=""
trap 'rm -rf "$tmp"; [ -z "$pid" ] || guest_stop "$pid"' EXIT
mkdir "$tmp/debug"
# IDLEVM_DEBUG_DIRS replaces the default places: an empty one finds nothing.
export IDLEVM_DEBUG_DIRS=$tmp/debug
rel=$(guest_sh 'uname -r')
want_note="idlevm: no vmlinux for $rel; using the guest's kallsyms, BTF and ORC from its memory"

# check_note FILE WHAT: stderr of a command was that one line.
check_note() {
	assert_eq "$(cat "$1")" "$want_note" "$2: stderr"
}

# info: the release, the vmlinux line, the KASLR offset the guest shows.
out=$("$idlevm" info --domain "$IVM_DOMAIN" 2>"$tmp/err") ||
	fail "idlevm info without a vmlinux failed: $(cat "$tmp/err")"
echo "$out"
check_note "$tmp/err" "info"
assert_eq "$(echo "$out" | sed -n 's/^kernel: *//p')" "$rel" "kernel release"
assert_eq "$(echo "$out" | sed -n 's/^vmlinux: *//p')" \
	"none (kallsyms, BTF and ORC from guest memory)" "vmlinux line"
text=$(guest_sh "grep ' _text\$' /proc/kallsyms | cut -d' ' -f1")
link=$(awk '$3 == "_text" { print $1 }' "$IVM_SYSTEM_MAP")
[ -n "$text" ] && [ -n "$link" ] || fail "no _text: guest '$text', System.map '$link'"
want=$(printf '0x%x' $((0x$text - 0x$link)))
assert_eq "$(echo "$out" | sed -n 's/^kaslr offset: *//p')" "$want" "KASLR offset"
echo "$out" | awk '/^VCPU/ { t = 1; next } t && NF' | grep -q '(idle)\|[a-z]' ||
	fail "no vCPU lines: $out"

# ps: the same threads as the guest's /proc.
before=$(guest_tasks)
out=$("$idlevm" ps --domain "$IVM_DOMAIN" 2>"$tmp/err") ||
	fail "idlevm ps without a vmlinux failed: $(cat "$tmp/err")"
after=$(guest_tasks)
check_note "$tmp/err" "ps"
ours=$(echo "$out" | awk 'NR > 1 && $1 != 0 {
	c = $3; for (i = 4; i <= NF - 2; i++) c = c " " $i
	print $1, $2, c }' | sort -n -k2,2)
echo "idlevm ps: $(echo "$ours" | wc -l) threads; guest: $(echo "$before" | grep -vc '^#')"
compare_tasks "$ours" "$before" "$after" || fail "task lists differ"

# stack of blocked lockstorm workers: the kernel part is the guest's own
# /proc/TID/stack, frame for frame (symbols from the guest's kallsyms,
# unwound with its in-memory ORC), the user part the workload's chain.
read -r blocks secs <<<"$(lockstorm_blocks 5000 7000 90 2)" ||
	fail "the guest shell does not answer"
pid=$(guest_sh "setsid /bin/lockstorm --threads 4 --seconds $secs --block-ms $blocks --report-interval 0 >/dev/null 2>&1 & echo \$!")
case $pid in ''|*[!0-9]*) fail "cannot start lockstorm in the guest: $pid" ;; esac
tids=$(wait_for_guest_threads "$pid" ls-worker 4) ||
	fail "no lockstorm workers in the guest"
checked=0 kframes=""
for tid in $tids; do
	stack_before=$(guest_sh "cat /proc/$tid/stack")
	# A worker between blocking paths runs and is preempted: idlevm may
	# find no moment it held still (it says so and exits 1).  That is a
	# thread that moved, like the check below, not a failure.
	if ! ours=$("$idlevm" stack --domain "$IVM_DOMAIN" --tid "$tid" \
		--binary "$IVM_BUILD/guest/lockstorm-fp" 2>"$tmp/err"); then
		case $ours in
		*"no consistent stack"*) echo "$ours"; continue ;;
		esac
		fail "idlevm stack --tid $tid without a vmlinux: $ours $(cat "$tmp/err")"
	fi
	stack_after=$(guest_sh "cat /proc/$tid/stack")
	[ "$stack_before" = "$stack_after" ] || continue	# it moved
	check_note "$tmp/err" "stack"
	echo "$ours"
	kproc=$(echo "$stack_before" | sed -n 's/^\[<[0-9a-f]*>\] \([^/ ]*\)\/.*/\1/p')
	kours=$(echo "$ours" | awk '$NF == "[k]" { print $3 }')
	[ -n "$kproc" ] || fail "tid $tid: empty /proc/$tid/stack"
	echo "$kproc" | awk -v ours="$kours" '
		BEGIN { n = split(ours, o, "\n"); j = 1 }
		{ while (j <= n && o[j] != $0) {
			if (o[j] !~ /schedule|nanosleep|futex_wait_queue/) { print "extra frame " o[j]; bad = 1 }
			j++ }
		  if (j > n) { print "missing " $0; exit 1 }
		  j++ }
		END { exit bad }' || fail "kernel part of tid $tid differs from /proc/$tid/stack:
$stack_before
---
$ours"
	echo "$ours" | grep -Eq " worker_main\+0x[0-9a-f]+( |$)" ||
		fail "tid $tid: no worker_main in the user part: $ours"
	checked=$((checked + 1))
	kframes+=$(echo "$ours" | awk '$NF == "[k]" { print $2, $3 }')$'\n'
done
guest_stop "$pid"
pid=""
echo "$checked workers checked against /proc/TID/stack"
[ "$checked" -ge 2 ] || fail "only $checked workers held still long enough"

# The symbols themselves, decoded from the guest's compressed kallsyms:
# each kernel frame's function starts where the guest's /proc/kallsyms
# says it does (frame pc minus its offset).
syms=$(echo "$kframes" | awk 'NF { sub(/\+0x[0-9a-f]+$/, "", $2); print $2 }' | sort -u)
pattern=$(echo "$syms" | paste -sd'|')
kallsyms=$(guest_sh "grep -E ' ($pattern)\$' /proc/kallsyms")
while read -r pc func; do
	[ -n "$pc" ] || continue
	name=${func%+0x*}
	start=$(printf '%016x' $((pc - ${func##*+})))
	echo "$kallsyms" | grep -q "^$start . $name\$" ||
		fail "$name: idlevm says it starts at $start, the guest's kallsyms: $(echo "$kallsyms" | grep " $name\$")"
done <<<"$kframes"
echo "$(echo "$syms" | wc -l) kernel functions agree with the guest's /proc/kallsyms"

# A core dump, without --vmlinux: its VMCOREINFO note (or its RAM) is used.
core=$tmp/guest.core
virsh -q -c qemu:///system dump --memory-only --format elf "$IVM_DOMAIN" "$core" >/dev/null ||
	fail "virsh dump failed"
out=$("$idlevm" info --core "$core" 2>"$tmp/err") ||
	fail "idlevm info --core without a vmlinux: $(cat "$tmp/err")"
check_note "$tmp/err" "info --core"
assert_eq "$(echo "$out" | sed -n 's/^kaslr offset: *//p')" "$want" "KASLR offset from the core"
out=$("$idlevm" ps --core "$core" 2>"$tmp/err") ||
	fail "idlevm ps --core without a vmlinux: $(cat "$tmp/err")"
echo "$out" | awk '$1 == 1 && $2 == 1 { f = 1 } END { exit !f }' ||
	fail "ps --core does not list init: $out"
