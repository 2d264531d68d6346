# idlevm report with debuginfo, on a profile of lockstorm: kernel frames
# with inline frames and file:line from the Debian -dbg vmlinux, the
# workload's own functions with lockstorm.c:LINE (its binary, and again a
# stripped copy whose debuginfo is found by build-id in --symdir); pprof
# decodes with protoc and its totals equal the text report's; the SVG flame
# graph renders in headless Chromium (the screenshot is kept in the run
# directory).
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

prof=$IVM_RUNDIR/t65.prof
bin=$IVM_BUILD/guest/lockstorm-fp
[ -x "$bin" ] || fail "no $bin"

out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "${IVM_PROFILE_SECONDS:-5}" \
	-o "$prof" --binary "$bin" --no-report 2>&1) || fail "idlevm profile failed: $out"

# 1. Text, the vmlinux the profile names, the workload's binary.
text=$("$idlevm" report -n 20 --binary "$bin" "$prof" 2>"$IVM_RUNDIR/t65.err") ||
	fail "idlevm report failed: $(cat "$IVM_RUNDIR/t65.err")"
echo "$text" | head -n 40
echo "$text" | grep -q "kernel symbols: .*vmlinux" || fail "no vmlinux used"
echo "$text" | grep -Eq '_\[k\]  \(inlined\)  [^ ]+\.[ch]:[0-9]+$' ||
	fail "no inlined kernel frame with file:line"
echo "$text" | grep -Eq '^ +schedule_\[k\]  kernel/sched/core\.c:[0-9]+$' ||
	fail "no schedule with kernel/sched/core.c:LINE"
echo "$text" | grep -Eq '^ +(worker_main|wait_for_lock|read_request|throttle|holder_main|dispatcher_main)(  \(inlined\))?  [^ ]*lockstorm\.c:[0-9]+$' ||
	fail "no lockstorm function with lockstorm.c:LINE"

# 2. A stripped binary, its debuginfo by build-id in a symbol directory.
sym=$IVM_RUNDIR/t65-symdir
rm -rf "$sym"; mkdir -p "$sym"
objcopy --strip-debug "$bin" "$sym/lockstorm-stripped" || fail "objcopy"
id=$(readelf -n "$bin" | awk '/Build ID/ { print $3 }')
[ -n "$id" ] || fail "lockstorm has no build-id"
mkdir -p "$sym/.build-id/${id:0:2}"
objcopy --only-keep-debug "$bin" "$sym/.build-id/${id:0:2}/${id:2}.debug" || fail "objcopy"
text2=$("$idlevm" report -n 20 --binary "$sym/lockstorm-stripped" --symdir "$sym" "$prof" 2>&1) ||
	fail "report with --symdir failed"
echo "$text2" | grep -q "debuginfo from $sym/.build-id/" || fail "symdir debuginfo not used"
echo "$text2" | grep -Eq 'lockstorm\.c:[0-9]+$' || fail "no lockstorm.c:LINE through --symdir"
# Without the symdir: names only, and said so.
text3=$("$idlevm" report -n 20 --binary "$sym/lockstorm-stripped" "$prof" 2>&1)
echo "$text3" | grep -Eq 'lockstorm\.c:[0-9]+$' && fail "file:line from a stripped binary?"
echo "$text3" | grep -Eq '^ +worker_main$' || fail "stripped binary lost its function names"

# 3. A "vmlinux" that cannot be checked against the guest's release is
# refused, said so, and kernel frames stay raw addresses.
wrong=$("$idlevm" report -f folded --vmlinux "$bin" "$prof" 2>"$IVM_RUNDIR/t65.err")
grep -q "no linux_banner to check against kernel" "$IVM_RUNDIR/t65.err" ||
	fail "unverifiable vmlinux not reported: $(cat "$IVM_RUNDIR/t65.err")"
echo "$wrong" | grep -q "schedule_\[k\]" && fail "kernel names from an unchecked file"
echo "$wrong" | grep -q "0xffffffff[0-9a-f]*_\[k\]" || fail "no raw kernel frames"

# 4. pprof: protoc decodes it; per-kind totals equal the text report's.
"$idlevm" report -f pprof -o "$IVM_RUNDIR/t65.pb.gz" --binary "$bin" "$prof" 2>/dev/null ||
	fail "pprof report failed"
command -v protoc >/dev/null || fail "protoc missing (protobuf-compiler)"
gunzip -c "$IVM_RUNDIR/t65.pb.gz" |
	protoc --decode perftools.profiles.Profile -I vmm/report vmm/report/report_pprof.proto \
	> "$IVM_RUNDIR/t65.pb.txt" || fail "protoc cannot decode the pprof file"
pp=$(awk '/^sample \{/ { i = 0 } /^  value: / { v[i++] += $2 }
	END { printf "%d %d %d", v[0], v[1], v[2] }' "$IVM_RUNDIR/t65.pb.txt")
tx=$(echo "$text" | sed -n 's/^  samples: [0-9]* (to_idle \([0-9]*\), from_idle \([0-9]*\), on_cpu \([0-9]*\))$/\1 \2 \3/p')
echo "totals to_idle/from_idle/on_cpu: pprof $pp, text $tx"
assert_eq "$pp" "$tx" "pprof sample totals"

# 5. SVG flame graph, rendered by headless Chromium.
svg=$IVM_RUNDIR/t65.svg
png=$IVM_RUNDIR/t65-flamegraph.png
"$idlevm" report -f svg -o "$svg" --binary "$bin" "$prof" 2>/dev/null || fail "svg report failed"
grep -q 'data-n="to-idle"' "$svg" || fail "no to-idle in the flame graph"
chrome=$(command -v chromium || command -v chromium-browser) || fail "chromium missing"
rm -f "$png"
timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--window-size=1200,900 --screenshot="$png" "file://$svg" >/dev/null 2>&1
[ -s "$png" ] || fail "no screenshot"
size=$(stat -c %s "$png")
[ "$size" -gt 20000 ] || fail "screenshot of $size bytes: blank?"
echo "flame graph screenshot: $png ($size bytes)"
