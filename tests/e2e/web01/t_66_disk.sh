# e2e-timeout: 600
# Virtual disk waits: the host's service of web01's disk requests (QEMU's
# I/O calls on the image file, followed by idlevm) against the guest's own
# view of each request (block_rq_issue -> block_rq_complete in the guest's
# tracefs), over the same requests: the load runs only while both watch
# (stopped before, synced and stopped after, so neither window holds
# requests the other lacks).  The host's time (its storage's, and QEMU's
# threads' waits for a host CPU as they hand the requests on) never
# exceeds the guest's, and on hardware KVM the storage's is within 20% of
# it in sum (below: why not under TCG); and the report says which guest
# tasks went idle before the device woke the vCPU (php-fpm, the SQLite
# writers) with the host's storage time beside it.  The timeline draws
# the host's disk service in time: spans whose sum (calls in flight,
# merged) is no more than the calls' time, and says what its spans cost
# the profile (spans and bytes a second, printed).
. tests/e2e/web01/lib_web01.sh

prof=$IVM_RUNDIR/t66.prof
I=/sys/kernel/tracing/instances/ivm_t66
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	guest_sh "rmdir $I 2>/dev/null; systemctl start web01-load" >/dev/null
	rm -f "$prof" "$IVM_RUNDIR"/t66.json "$IVM_RUNDIR"/t66.html
}
trap cleanup EXIT

web01_wait_rounds 1 || fail "no load on web01"
dev=$(guest_sh 'cat /sys/block/vda/dev') || fail "no vda in the guest"
dev=${dev%%[!0-9:]*}
dev=${dev/:/,}
# Quiet disk: no load, nothing dirty.  Then the guest's view of vda.
guest_sh "systemctl stop web01-load; sync
rmdir $I 2>/dev/null; mkdir $I && echo 16384 > $I/buffer_size_kb &&
echo 'dev == $(( ${dev%,*} << 20 | ${dev#*,} ))' > $I/events/block/block_rq_issue/filter &&
echo 'dev == $(( ${dev%,*} << 20 | ${dev#*,} ))' > $I/events/block/block_rq_complete/filter &&
echo 1 > $I/events/block/block_rq_issue/enable &&
echo 1 > $I/events/block/block_rq_complete/enable && echo 1 > $I/tracing_on" ||
	fail "cannot start the guest's block tracing"

# QEMU's threads' waits for a host CPU (run_delay, by thread name) over
# the window, to show where the guest's wait went that the storage did not
# take.
qemu=$(virsh -c qemu:///system domid "$IVM_DOMAIN" >/dev/null &&
	pgrep -f -- "guest=$IVM_DOMAIN," | head -n 1)
run_delays() {
	local t
	for t in /proc/"$qemu"/task/*; do
		echo "$(tr ' ' _ <"$t"/comm) $(awk '{ print $2 }' "$t"/schedstat 2>/dev/null)"
	done | awk '{ d[$1] += $2 } END { for (c in d) print c, d[c] }' | sort
}
rd0=$(run_delays)

log=$IVM_RUNDIR/t66.log
"$idlevm" profile --domain "$IVM_DOMAIN" --disk -D 600 -o "$prof" --no-report >"$log" 2>&1 &
pid=$!
# The file takes its name once setup (the disk's session too) is done.
while [ ! -e "$prof" ]; do
	kill -0 "$pid" 2>/dev/null || fail "idlevm profile ended: $(cat "$log")"
	sleep 0.2
done
guest_sh "systemctl start web01-load" || fail "cannot start the load"
sleep 20
guest_sh "systemctl stop web01-load; sync" || fail "cannot stop the load"
kill -INT "$pid"
wait "$pid" || fail "idlevm profile failed: $(cat "$log")"
pid=""
cat "$log"
rd1=$(run_delays)
echo "QEMU's threads waited for a host CPU meanwhile (s, by name; the pool's workers come and go):"
join -a 2 <(echo "$rd0") <(echo "$rd1") |
	awk '{ d = (NF == 3 ? $3 - $2 : $2); printf "  %-16s %8.3f\n", $1, d / 1e9 }'

# The guest's view, per kind (R read, W write, F flush, D discard): "KIND
# REQUESTS SECONDS", from each issue to its completion (a flush completes
# with sector -1; the completion of a write whose flushes the kernel ran
# as requests of their own has no issue: skipped).
guest=$(guest_sh "echo 0 > $I/tracing_on
awk '
/block_rq_(issue|complete):/ {
	for (i = 1; i < NF; i++) if (\$(i + 1) ~ /^block_rq_/) { ts = \$i; sub(/:\$/, \"\", ts) }
	for (i = 1; i <= NF; i++) if (\$i ~ /^block_rq_/) break
	rwbs = \$(i + 2); k = substr(rwbs, 1, 1)
	if (rwbs ~ /^FF/) k = \"F\"
	issue = \$i == \"block_rq_issue:\"
	sector = issue ? \$(i + 5) : \$(i + 4); n = issue ? \$(i + 7) : \$(i + 6)
	key = k == \"F\" ? \"F\" : k \" \" sector \" \" n
	if (issue) { q[key, tail[key]++] = ts; next }
	if (head[key] >= tail[key]) { unmatched++; next }
	h = head[key] + 0; t[k] += ts - q[key, h]; c[k]++; delete q[key, h]; head[key] = h + 1
}
END {
	for (k in c) printf \"%s %d %.6f\\n\", k, c[k], t[k]
	printf \"unmatched %d 0\\n\", unmatched
}' $I/trace
cat $I/per_cpu/cpu*/stats | awk '/^overrun:/ { o += \$2 } END { printf \"overrun %d 0\\n\", o }'") ||
	fail "cannot read the guest's block trace"
echo "the guest's view of vda ($dev): kind requests seconds"
echo "$guest" | sed 's/^/  /'
overrun=$(echo "$guest" | awk '$1 == "overrun" { print $2 }')
[ "${overrun:-1}" = 0 ] || fail "the guest's trace lost $overrun events"
guest_ns=$(echo "$guest" | awk '$1 ~ /^[RWFD]$/ { s += $3 } END { printf "%.0f", s * 1e9 }')
guest_n=$(echo "$guest" | awk '$1 ~ /^[RWFD]$/ { s += $2 } END { print s + 0 }')
[ "$guest_n" -gt 0 ] || fail "no requests in the guest's trace"

report=$("$idlevm" report "$prof" 2>/dev/null) || fail "idlevm report failed"
echo "$report" | sed -n '/^== why idle/,/^  per vCPU/p'
line=$(echo "$report" | grep -E '^  host storage +[0-9.]+ s') ||
	fail "no host storage line in the report"
lost=$(echo "$report" | grep -A3 -E '^  host storage +[0-9.]+ s' |
	sed -n 's/.*not counted: the calls around \([0-9]*\) host records lost.*/\1/p')
[ "${lost:-0}" = 0 ] || fail "idlevm lost $lost host records of QEMU's calls"
host_ns=$(echo "$line" | awk '{ printf "%.0f", $3 * 1e9 }')
handoff_ns=$(echo "$report" | awk '/^      between the calls +[0-9.]+ s/ { printf "%.0f", $4 * 1e9 }')
pct() { awk -v h="$1" -v g="$guest_ns" 'BEGIN { printf "%.1f%%", 100 * h / g }'; }
echo "host service $host_ns ns of the guest's $guest_ns ns ($guest_n requests): $(pct "$host_ns")"
echo "and QEMU's hand-offs ${handoff_ns:-0} ns: together $(pct $((host_ns + ${handoff_ns:-0})))"
[ "$host_ns" -gt 0 ] || fail "no host service time"
[ "$host_ns" -le "$guest_ns" ] || fail "the host's service time is more than the guest waited"
# The hand-offs lie inside the requests too (a worker woken for one, the
# main loop woken by its end).
[ $((host_ns + ${handoff_ns:-0})) -le "$guest_ns" ] ||
	fail "the host's service and QEMU's hand-offs are more than the guest waited"
# Within 20% where the guest's wait is the storage's.  Under TCG on this
# two-core host it is not: the host's calls take 4-31% of the guest's
# wait, less the busier the host (flushes about half, writes into the
# host's page cache under 1%), QEMU's hand-offs as much again, and the
# rest is QEMU's request path on the vCPU threads, which wait for a host
# CPU half the time (the run delays above).
type=$(virsh -c qemu:///system dumpxml "$IVM_DOMAIN" |
	sed -n "s/^<domain type='\([a-z]*\)'.*/\1/p")
if [ "$type" = kvm ]; then
	[ $((host_ns * 100)) -ge $((guest_ns * 80)) ] ||
		fail "the host's service time is not within 20% of the guest's view"
else
	echo "domain type $type: the 20% bound is for hardware KVM, not checked (see above)"
fi

# The report: php-fpm among the tasks a device woke, the host's storage
# beside them.
block=$(echo "$report" | sed -n '/woken by device/,/woken by [a-z]/p')
echo "$block" | grep -E 'went idle after:.* php-fpm8\.2 [0-9.]+ s' ||
	fail "php-fpm is not among the tasks a device woke the vCPU for"
echo "$block" | grep -E 'host storage busy +[0-9.]+ s' || fail "no host storage time beside the device wakeups"

# The timeline: the disks' service in time, never more than the calls'.
"$idlevm" report -f timeline -o "$IVM_RUNDIR/t66.json" "$prof" 2>/dev/null ||
	fail "idlevm report -f timeline failed"
python3 - "$IVM_RUNDIR/t66.json" "$host_ns" <<'PY' || fail "the timeline's disk service is wrong"
import json, sys
t = json.load(open(sys.argv[1]))
calls_us = int(sys.argv[2]) / 1e3
disk = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "host_disk"]
steal = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "host_steal"]
drawn = sum(e["dur"] for e in disk)
hs = t["hostSpans"]
w = hs["written"]
secs = w["elapsed_ms"] / 1e3 or 1
print("timeline: %d disk service spans, %.3f s drawn + %.3f s left out, of the calls' %.3f s; %d steal spans"
      % (len(disk), drawn / 1e6, hs["disk_left_out_us"] / 1e6, calls_us / 1e6, len(steal)))
print("timeline spans written: %d (%d left out), %d bytes in %.1f s: %.0f spans/s, %.0f bytes/s"
      % (w["spans"], w["dropped"], w["bytes"], secs, w["spans"] / secs, w["bytes"] / secs))
if not disk:
    print("FAIL: no disk service drawn"); sys.exit(1)
if drawn > calls_us * 1.001 + 1:
    print("FAIL: more disk service drawn than the calls took"); sys.exit(1)
PY
