# idlevm maps reads the Debian guest's mappings from its VMAs as its own
# /proc/PID/maps shows them, line for line, for systemd and every process
# of the server (nginx, php-fpm and redis, masters and workers, dynamically
# linked: hundreds of mappings of shared libraries); every ELF file they
# map has its build-id from guest memory; the bytes of a library read
# through the page cache are the guest's own; and every pre-forked worker
# gets its executable identified, from the page cache where its own page
# tables lack the headers (a fork child that never touched them).
. tests/e2e/lib_maps.sh
. tests/e2e/web01/lib_web01.sh

pids=$(web01_server_pids)
[ -n "$pids" ] || fail "no server processes in the guest"
maps_compare 1 systemd || fail "systemd went away"
seen=""
while read -r pid comm; do
	maps_compare "$pid" "$comm" && seen="$seen $comm"
done <<<"$pids"
for c in $WEB01_SERVERS; do
	case " $seen " in *" $c "*) ;; *) fail "no $c process compared" ;; esac
done
[ "$(echo "$pids" | awk '$2 == "nginx"' | wc -l)" -ge 2 ] ||
	fail "nginx has no worker: $pids"

# Every ELF file of the server's: a build-id on its first mapping.
master=$(echo "$pids" | awk '$2 == "php-fpm8.2" { print $1; exit }')
out=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid "$master") ||
	fail "idlevm maps of php-fpm's master"
elfs=$(echo "$out" | awk '$3 == "00000000" && $6 ~ /(\.so[.0-9]*|\/php-fpm8\.2)$/')
n=$(echo "$elfs" | wc -l)
nid=$(echo "$elfs" | grep -c "	build-id=[0-9a-f]\{40\}$")
echo "php-fpm's master maps $n ELF files, $nid with a build-id"
[ "$n" -gt 20 ] || fail "php-fpm maps only $n ELF files: $out"
assert_eq "$nid" "$n" "ELF files of php-fpm with a build-id"
exe_id=$(echo "$out" | awk -F'\t' '$1 ~ /\/php-fpm8\.2$/ && $2 != "" { sub("build-id=", "", $2); print $2; exit }')
[ -n "$exe_id" ] || fail "no build-id for php-fpm's executable"

# A library's bytes through the page cache, against the guest's dd.
libc=$(echo "$out" | awk '$6 ~ /\/libc\.so\.6$/ { print $6; exit }')
[ -n "$libc" ] || fail "php-fpm maps no libc"
for skip in 0 40; do
	mine=$("$idlevm" maps --domain "$IVM_DOMAIN" --pid "$master" --page-cache \
		--read-file "$libc:$((skip * 4096)):4096" 2>"$IVM_RUNDIR/t35.err" |
		md5sum | cut -d' ' -f1)
	grep -q "4096 of 4096 bytes" "$IVM_RUNDIR/t35.err" ||
		fail "libc page $skip: $(cat "$IVM_RUNDIR/t35.err")"
	theirs=$(guest_sh "dd if=$libc bs=4096 skip=$skip count=1 2>/dev/null | md5sum" |
		cut -d' ' -f1)
	assert_eq "$mine" "$theirs" "md5 of $libc page $skip"
done
echo "libc's pages through the page cache agree with the guest's dd"

# Every worker's executable is known, by the master's build-id.  Workers
# come and go: the ones still there when their stack is read count.
workers=0 cached=0
# A thread caught running in the kernel where its kernel stack cannot be
# unwound to user mode (once: a paravirt spinlock's slow path) has no user
# part, and so no executable: read it again, a few times, before failing.
for pid in $(guest_sh 'pgrep -x php-fpm8.2; pgrep -x nginx'); do
	line="" gone=0
	for try in 1 2 3 4 5; do
		out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid "$pid" 2>&1) ||
			{ gone=1; break; }
		line=$(echo "$out" | grep -m1 "(executable build-id") && break
		echo "$out" | grep -q "(user part not unwound)" || break
		echo "pid $pid: user part not unwound in read $try (the thread was in the kernel): read again"
	done
	[ "$gone" = 0 ] || continue	# the worker left
	[ -n "$line" ] || fail "pid $pid: no executable identified: $out"
	comm=$(echo "$out" | sed -n '1s/^tid [0-9]* (\([^)]*\)).*/\1/p')
	if [ "$comm" = php-fpm8.2 ]; then
		echo "$line" | grep -q "build-id $exe_id" ||
			fail "php-fpm pid $pid runs another executable: $line"
	fi
	workers=$((workers + 1))
	echo "$line" | grep -q "headers from the page cache" && cached=$((cached + 1))
done
echo "$workers server processes identified, $cached of them from the page cache"
[ "$workers" -ge 4 ] || fail "only $workers server processes identified"
