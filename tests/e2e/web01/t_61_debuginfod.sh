# With a real debuginfod serving the guest's debug files, idlevm report
# gives the server's frames file:line and inline frames, found by the
# build-ids the profile recorded from guest memory (no --binary, no
# --symdir).  The debug files are those of web01's Redis, which the image
# build rebuilt from Debian's sources (images/rebuild-from-source); they
# are dwz'ed like every Debian -dbgsym file, so the supplementary DWARF
# file comes from the same server by its build-id.  Debian's debuginfod is
# started here on a free port of 127.0.0.1 over the image's debug/ tree.
. tests/e2e/web01/lib_web01.sh

[ -d "${IVM_WEB01_DEBUG:-}" ] ||
	fail "no debug directory for web01 (IVM_WEB01_DEBUG='${IVM_WEB01_DEBUG:-}'): run 'make web01'"
[ -x /usr/bin/debuginfod ] || fail "no /usr/bin/debuginfod: make deps"

prof=$IVM_RUNDIR/dbgd.prof
out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D 12 -o "$prof" --no-report 2>&1) ||
	fail "idlevm profile failed: $out"

# redis_blocks TEXT: the stacks (blank-line separated blocks of report's
# text output) of the redis-server process.
redis_blocks() {
	echo "$1" | awk 'BEGIN { RS = ""; ORS = "\n\n" } /redis-server[^\n]*\(process\)/'
}

# Before: names from guest memory, no file:line.
plain=$("$idlevm" report "$prof" -K to_idle -n 500 2>&1) ||
	fail "report failed: $plain"
before=$(redis_blocks "$plain")
[ -n "$before" ] || fail "no to-idle stack of redis-server in 12 s:
$plain"
# (Kernel frames, "NAME_[k]", have theirs from the vmlinux.)
if echo "$before" | grep -v '_\[k\]' | grep -qE '\.c:[0-9]+$'; then
	fail "redis-server's user frames had file:line with no debug info:
$before"
fi

dir=$IVM_RUNDIR/debuginfod
mkdir -p "$dir/cache"
# The client remembers a miss for cache_miss_s (600 s by default).
echo 0 >"$dir/cache/cache_miss_s"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
/usr/bin/debuginfod -p "$port" -d "$dir/db.sqlite" -F -t 1 -g 0 \
	"$IVM_WEB01_DEBUG" >"$dir/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT

url=http://127.0.0.1:$port
# The server scans its directory in the background, a file at a time:
# wait until it serves every debug file of the tree (a few), not just the
# first.  Waiting for one only, a report once came while Redis's was still
# unscanned, and got "debug info for 0 of 80 user objects".
ids=$(find "$IVM_WEB01_DEBUG" -path '*/.build-id/*/*.debug' |
	awk -F/ '{ d = $(NF - 1); f = $NF; sub(/\.debug$/, "", f); print d f }')
[ -n "$ids" ] || fail "no debug file under $IVM_WEB01_DEBUG"
end=$((SECONDS + 120))
for id in $ids; do
	until curl -sf -o /dev/null "$url/buildid/$id/debuginfo"; do
		kill -0 "$server" 2>/dev/null ||
			fail "debuginfod exited: $(tail -n 20 "$dir/server.log")"
		[ "$SECONDS" -lt "$end" ] ||
			fail "debuginfod did not serve $id in 120 s: $(tail -n 20 "$dir/server.log")"
		sleep 1
	done
done

full=$(DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$dir/cache DEBUGINFOD_TIMEOUT=30 \
	"$idlevm" report "$prof" -K to_idle -n 500 2>&1) ||
	fail "report with debuginfod failed: $full"
echo "$full" | grep 'debuginfod:' || true
after=$(redis_blocks "$full")
echo "redis-server's to-idle stacks, with debuginfod:"
echo "$after" | head -n 60

echo "$full" | grep -qE 'debuginfod: debug info for [1-9][0-9]* of' ||
	fail "the report says debuginfod gave no debug info; the server's log:
$(tail -n 30 "$dir/server.log")"
# The event loop and main, with their source lines.
echo "$after" | grep -qE '^ +aeProcessEvents  .*ae\.c:[0-9]+$' ||
	fail "no aeProcessEvents with file:line in redis-server's stacks"
echo "$after" | grep -qE '^ +main  .*server\.c:[0-9]+$' ||
	fail "no main with file:line (server.c) in redis-server's stacks"
# Redis's static functions inlined into their callers (aeApiPoll into
# aeProcessEvents, for one) are frames of their own, named: their
# names come from the supplementary file.
echo "$after" | grep -qE '^ +[A-Za-z_][A-Za-z0-9_]*  \(inlined\)  .*src/[a-z_]+\.c:[0-9]+$' ||
	fail "no named inline frame with file:line in redis-server's stacks"
# No redis frame lost its name on the way.
if echo "$after" | grep -E '^ +\?  '; then
	fail "unnamed frames in redis-server's stacks"
fi
# The frames named only FILE+0xOFFSET without debug info (local
# functions, not in .dynsym) now have names.
if echo "$after" | grep -E '^ +redis-check-rdb\+0x'; then
	fail "redis-server frames still named only by offset with its debug info"
fi
