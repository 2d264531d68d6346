# idlevm maps reads a guest process's mappings from its VMAs as the guest's
# own /proc/PID/maps shows them, line for line (start, end, permissions,
# offset, device, inode, path), for init, the helper, the workload, a shell
# and the mapfiles workload (offsets, a second mount, deleted files, a
# memfd, an escaped newline, a fork child), live and from a memory dump;
# it names the fork child's executable by its build-id from the page
# cache, which its own page tables lack; and the bytes it reads of files
# through the page cache are the guest's own (dd | md5sum in the guest).

. tests/e2e/lib_maps.sh

core=$IVM_RUNDIR/t43.core
dir=/tmp/ivm-maps
cleanup() {
	rm -rf "$core" "$IVM_RUNDIR/t43-nodebug"
	guest_sh "kill $mf_pid $mf_child 2>/dev/null; rm -rf $dir /dev/shm/ivm-shared.bin" >/dev/null 2>&1
}
mf_pid="" mf_child=""
trap cleanup EXIT

# ---- the mapfiles workload ----------------------------------------------------
ready=$(guest_sh "mkdir -p $dir && { /bin/mapfiles $dir /dev/shm >$dir/out 2>&1 & }
	i=0; while [ \$i -lt 50 ] && ! grep -q ready $dir/out; do sleep 0.1; i=\$((i + 1)); done
	cat $dir/out") || fail "mapfiles did not start: $ready"
mf_pid=$(echo "$ready" | sed -n 's/.*ready pid=\([0-9]*\) .*/\1/p')
mf_child=$(echo "$ready" | sed -n 's/.* child=\([0-9]*\).*/\1/p')
[ -n "$mf_pid" ] && [ -n "$mf_child" ] || fail "mapfiles said: $ready"
helper=$(guest_sh 'cat /run/idlevm-helper.pid')
# The shell serving guest_sh (busybox's timeout execs the command).
shell=$(guest_sh 'echo $PPID')
work=$(guest_sh "pidof $IVM_WORKLOAD" | tr -cs '0-9' '\n' | grep -E '^[0-9]+$' | sort -n | head -n 1)

# The processes compared must stay: a missing one is a failure here.
compare_live() {
	maps_compare "$1" "$2" || fail "$2 (pid $1) went away"
}

compare_live 1 init
compare_live "$helper" idlevm-helper
compare_live "$shell" shell
[ -n "$work" ] && compare_live "$work" "$IVM_WORKLOAD"
compare_live "$mf_pid" mapfiles
compare_live "$mf_child" "mapfiles' fork child"

# mapfiles' special cases are there, as the guest names them.
mine=$(maps_ours "$mf_pid" --domain "$IVM_DOMAIN")
for want in "$dir/sub/dir/data.bin" "/dev/shm/ivm-shared.bin" \
	"$dir/gone.bin (deleted)" "/memfd:ivm-memfd (deleted)" \
	"$dir/new\\012line" "[heap]" "[stack]" "[vdso]"; do
	echo "$mine" | grep -qF " $want" || fail "no mapping of $want: $mine"
done
echo "$mine" | grep -F "$dir/sub/dir/data.bin" | grep -q ' r--p 00001000 ' ||
	fail "data.bin's mapping at offset 0x1000 is missing"

# ---- build-ids, and the fork child's from the page cache ---------------------
want=$(readelf -n "$IVM_BUILD/guest/mapfiles" | sed -n 's/.*Build ID: *//p')
[ -n "$want" ] || fail "no build-id in $IVM_BUILD/guest/mapfiles"
for pid in "$mf_pid" "$mf_child"; do
	got=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid "$pid" |
		awk -F'\t' '$1 ~ / \/bin\/mapfiles$/ && $2 != "" { sub("build-id=", "", $2); print $2 }')
	assert_eq "$got" "$want" "build-id of /bin/mapfiles in pid $pid"
done
err=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid "$mf_child" \
	--read-file /bin/mapfiles:0:4096 2>&1 >/dev/null)
echo "fork child: $err"
echo "$err" | grep -q "4096 of 4096 bytes at 0x0 from the page cache$" ||
	fail "the fork child's first page did not come from the page cache: $err"
err=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid "$mf_pid" \
	--read-file /bin/mapfiles:0:4096 2>&1 >/dev/null)
echo "$err" | grep -q "from its own mapping$" ||
	fail "the parent's first page did not come from its own mapping: $err"
# So the child's stack is unwound by the CFI of its executable, found by
# that build-id, down to main.
out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid "$mf_child" \
	--binary "$IVM_BUILD/guest/mapfiles" 2>&1) || fail "idlevm stack of the fork child: $out"
echo "$out" | grep -q " main+" || fail "no main in the fork child's stack: $out"
echo "$out" | grep -q "build-id $want, headers from the page cache; user frames by the CFI of" ||
	fail "the fork child's executable was not identified from the page cache: $out"
echo "fork child: its stack reaches main by CFI"

# ---- file bytes through the page cache, against the guest's dd ----------------
# read_check PID FILE SKIP COUNT: pages SKIP..SKIP+COUNT-1 of FILE.
read_check() {
	local pid=$1 file=$2 skip=$3 count=$4 mine theirs
	mine=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid "$pid" --page-cache \
		--read-file "$file:$((skip * 4096)):$((count * 4096))" 2>"$IVM_RUNDIR/t43.err" |
		md5sum | cut -d' ' -f1) || fail "reading $file: $(cat "$IVM_RUNDIR/t43.err")"
	grep -q "from the page cache" "$IVM_RUNDIR/t43.err" ||
		fail "$file page $skip: $(cat "$IVM_RUNDIR/t43.err")"
	theirs=$(guest_sh "dd if='$file' bs=4096 skip=$skip count=$count 2>/dev/null | md5sum" |
		cut -d' ' -f1)
	assert_eq "$mine" "$theirs" "md5 of $file pages $skip+$count"
}
size=$(guest_sh 'wc -c </bin/busybox')
last=$(((size - 1) / 4096))
read_check 1 /bin/busybox 0 1
read_check 1 /bin/busybox 7 3
read_check 1 /bin/busybox $((last / 2)) 1
read_check "$mf_pid" "$dir/sub/dir/data.bin" 0 5
read_check "$mf_pid" /dev/shm/ivm-shared.bin 0 2
# The last, partial page: its bytes, then the end of the file said.
mine=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid 1 --page-cache \
	--read-file "/bin/busybox:$((last * 4096)):4096" 2>"$IVM_RUNDIR/t43.err" |
	head -c $((size - last * 4096)) | md5sum | cut -d' ' -f1)
theirs=$(guest_sh "dd if=/bin/busybox bs=4096 skip=$last 2>/dev/null | md5sum" | cut -d' ' -f1)
assert_eq "$mine" "$theirs" "md5 of busybox's last page"
grep -q "past the end of the file" "$IVM_RUNDIR/t43.err" ||
	fail "reading past the end: $(cat "$IVM_RUNDIR/t43.err")"
echo "file bytes read through the page cache agree with the guest's dd"

# ---- every process, and a memory dump ----------------------------------------
# The guest's processes with mappings, but the two of guest_sh that list
# them: this sh and the watcher its busybox timeout forked (the loop
# forks nothing: builtins only, no pipe).
guest_pids() {
	guest_sh 'for m in /proc/[0-9]*/maps; do
		p=${m#/proc/}; p=${p%/maps}
		read -r _ comm _ </proc/$p/stat 2>/dev/null
		[ "$p" = $$ ] || [ "$comm" = "(timeout)" ] && continue
		IFS= read -r l <"$m" 2>/dev/null && echo "$p"
	done' | sort -n
}
for tries in 1 2 3; do
	before=$(guest_pids)
	all=$("$idlevm" maps --domain "$IVM_DOMAIN" --all) ||
		fail "idlevm maps --all failed"
	# A watcher lingers up to a second after its guest_sh: not ours.
	mine=$(echo "$all" | grep -v '^# pid [0-9]* (timeout)$' |
		sed -n 's/^# pid \([0-9]*\) .*/\1/p' | sort -n)
	after=$(guest_pids)
	[ "$mine" = "$before" ] || [ "$mine" = "$after" ] && break
	[ "$tries" = 3 ] && fail "--all listed $(echo $mine), the guest $(echo $before) then $(echo $after): $(guest_sh ps)"
done
echo "--all: the same $(echo "$mine" | wc -l) processes as the guest"

# With no vmlinux anywhere: the kernel's own BTF and kallsyms from memory,
# found through VMCOREINFO, which names them since Linux 6.0.  An older
# kernel (Debian 11's 5.10) cannot be read that way, and idlevm says why.
mkdir -p "$IVM_RUNDIR/t43-nodebug"
if [ "${IVM_KVER%%.*}" -lt 6 ]; then
	out=$(IDLEVM_DEBUG_DIRS=$IVM_RUNDIR/t43-nodebug "$idlevm" maps --pid "$mf_pid" \
		--domain "$IVM_DOMAIN" 2>&1) && fail "maps without a vmlinux on $IVM_KVER: $out"
	echo "$out" | grep -q "Linux before 6.0 does not name its kallsyms tables there, so its symbols need its vmlinux or System.map" ||
		fail "no clear reason without a vmlinux on $IVM_KVER: $out"
	echo "without a vmlinux on $IVM_KVER: refused, saying why"
else
	mine=$(IDLEVM_DEBUG_DIRS=$IVM_RUNDIR/t43-nodebug maps_ours "$mf_pid" --domain "$IVM_DOMAIN" 2>/dev/null) ||
		fail "idlevm maps without a vmlinux failed"
	assert_eq "$mine" "$(maps_ours "$mf_pid" --domain "$IVM_DOMAIN")" "maps without a vmlinux"
	echo "without a vmlinux: the same maps"
fi

virsh -q -c qemu:///system dump --memory-only --format elf "$IVM_DOMAIN" "$core" >/dev/null ||
	fail "virsh dump failed"
live=$(maps_ours "$mf_pid" --domain "$IVM_DOMAIN")
dumped=$(maps_ours "$mf_pid" --core "$core" --vmlinux "$IVM_VMLINUX") ||
	fail "idlevm maps --core failed"
assert_eq "$dumped" "$live" "mapfiles' maps from the dump"
echo "the dump shows the same maps"
