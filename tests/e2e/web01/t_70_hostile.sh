# e2e-timeout: 600
# A hostile unprivileged program in web01 (tests/workloads/hostile.c, run
# as nobody) while idlevm profiles the guest under its load: crafted ELFs
# with cyclic and oversized CFI, 64 KiB titles of control bytes and
# invalid UTF-8, threads renamed all the time, a 100,000-frame stack,
# threads asleep with their stack pointer or fs base unmapped, 4,000
# mapped files, ~300 forks a second.  Two profiles of the same length,
# without and with it, each against the guest's own trace of its idle
# switches (lib_idle_truth.sh).  Asserted: idlevm ends well both times;
# each server program's capture rate (its to-idle samples over the
# guest trace's switches to idle of its threads) is not above the run
# without by more than HOSTILE_RATE_POINTS (2) points (no samples given
# to the wrong program) nor below it by more than HOSTILE_DROP_POINTS (8;
# beyond 2 it is printed as degraded), compared only when neither run
# had more than HOSTILE_LATE_PCT (5%) of its looks late (a loaded host:
# printed as degraded), and no program has more to-idle samples than
# switches to idle in either run; idlevm's peak RSS
# (VmHWM) stays under HOSTILE_RSS_MB (256 MiB) and within
# HOSTILE_RSS_GROWTH_MB (64 MiB) of the run without; the hostile stacks
# that ended early say why (the profile's counts); no output of idlevm
# holds a raw control byte.  Printed: the rates, VmHWM and the host CPU
# time per look and per sample of both runs (timings are not asserted).
. tests/e2e/web01/lib_web01.sh
. tests/e2e/lib_idle_truth.sh

HOSTILE_RATE_POINTS=${HOSTILE_RATE_POINTS:-2}
HOSTILE_DROP_POINTS=${HOSTILE_DROP_POINTS:-8}
HOSTILE_LATE_PCT=${HOSTILE_LATE_PCT:-5}
HOSTILE_RSS_MB=${HOSTILE_RSS_MB:-256}
HOSTILE_RSS_GROWTH_MB=${HOSTILE_RSS_GROWTH_MB:-64}
# 60 s: under the fork storm nginx and redis go idle a few times a second,
# and in 15 s one sample was a point of their rate (70-200 switches).
duration=${IVM_PROFILE_SECONDS:-60}
bin=$IVM_BUILD/guest/hostile
# /tmp: on the root file system (/run is noexec), private to this boot.
gdir=/tmp/ivm-hostile
[ -x "$bin" ] || fail "no $bin: make all"

# Leave the guest as it was found, whatever happens.
cleanup() {
	guest_sh "pkill -TERM -u nobody -f '^$gdir/hostile' 2>/dev/null; sleep 1
		pkill -KILL -u nobody -f '^$gdir/hostile' 2>/dev/null
		pkill -KILL -u nobody -x 'ivm-evil-[0-9]' 2>/dev/null
		rm -rf $gdir" >/dev/null 2>&1
}
trap cleanup EXIT

web01_wait_rounds 1 || fail "no load on web01"
web01_put_file "$bin" "$gdir/hostile" || fail "cannot copy hostile into the guest"
guest_sh "chmod 755 $gdir $gdir/hostile && mkdir $gdir/w && chown nobody $gdir/w" ||
	fail "cannot prepare $gdir"

# control_bytes FILE: how many raw C0 controls (but tab and newline), DEL
# or C1 controls as UTF-8 (U+0080-U+009F) FILE holds.  idlevm's own status
# line ("\r\033[K") is not in the files checked.
control_bytes() {
	LC_ALL=C tr -d '\t\n' <"$1" | LC_ALL=C tr -dc '\000-\037\177' | wc -c
}

# profile_run NAME: profile for $duration s while the guest traces itself;
# writes $IVM_RUNDIR/NAME.{prof,out,hwm,rates,stats}.
profile_run() {
	local prof=$IVM_RUNDIR/$1.prof pid hwm=0 h windows truth folded
	guest_idle_trace_start || fail "$1: cannot start tracing in the guest"
	"$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" -o "$prof" \
		--no-report >"$IVM_RUNDIR/$1.out" 2>&1 &
	pid=$!
	# Its peak resident set, as the kernel keeps it, read until it ends.
	while kill -0 "$pid" 2>/dev/null; do
		h=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
		[ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
		sleep 0.2
	done
	wait "$pid"
	rc=$?
	guest_idle_trace_stop || fail "$1: cannot stop tracing in the guest"
	sed 's/.*\r//' "$IVM_RUNDIR/$1.out"
	[ "$rc" = 0 ] || fail "$1: idlevm profile failed ($rc)"
	echo "$hwm" >"$IVM_RUNDIR/$1.hwm"
	windows=$(profile_windows "$prof")
	[ -n "$windows" ] || fail "$1: no idle period with guest clocks in the profile"
	truth=$(guest_idle_trace_count "$windows") || fail "$1: cannot read the guest trace"
	echo "$truth" >"$IVM_RUNDIR/$1.truth"
	echo "$truth" | grep -E '^(C|L) ' | tr '\n' ' ' | sed "s/^/$1: guest trace counts: /"; echo
	folded=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null) ||
		fail "$1: idlevm report -f folded failed"
	# "COMM TRACE CAPTURED" per server program, by its threads' comm.
	{ echo "$truth" | awk '$1 == "T" { print "T", $2 }'
	  echo "$folded" | awk '{ split($1, f, ";"); t = f[2]; sub(/\/[0-9]+$/, "", t); print "I", t, $NF }'
	} | awk -v servers="$WEB01_SERVERS" '
		BEGIN { n = split(servers, s, " "); for (i = 1; i <= n; i++) want[s[i]] = 1 }
		$1 == "T" && ($2 in want) { t[$2]++ }
		$1 == "I" && ($2 in want) { c[$2] += $3 }
		END { for (k in want) printf "%s %d %d\n", k, t[k], c[k] }' |
		sort >"$IVM_RUNDIR/$1.rates"
	"$idlevm" report "$prof" >"$IVM_RUNDIR/$1.report" 2>&1 ||
		fail "$1: idlevm report failed"
	echo "$folded" >"$IVM_RUNDIR/$1.folded"
}

echo "== without the hostile program"
profile_run calm

echo "== with it"
guest_sh "cd $gdir/w && HOSTILE_SKIP=${HOSTILE_SKIP:-} setsid setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
	$gdir/hostile $gdir/w 0 >$gdir/out 2>&1 </dev/null & sleep 2; cat $gdir/out" ||
	fail "cannot start the hostile program"
guest_sh "grep -q '^hostile: ready' $gdir/out && ps -u nobody -o pid=,nlwp=,comm= | head -n 40" ||
	fail "the hostile program did not start: $(guest_sh "cat $gdir/out")"
profile_run hostile
guest_sh "pgrep -u nobody -f '^$gdir/hostile' >/dev/null" ||
	fail "the hostile program died during the run: $(guest_sh "cat $gdir/out")"
guest_sh "pkill -TERM -u nobody -f '^$gdir/hostile $gdir/w'; sleep 2; pgrep -u nobody -l" >/dev/null

# 1. The server programs are served as well as without it: their pooled
# capture rate, and each one's, printed.  A rate that rises is not better
# service: idlevm named a server's thread for a switch to idle that the
# guest's trace gives to another task.  It did under the fork storm (a
# child forked and reaped between two walks of the task list is never a
# candidate of last_ran.h, which named the task that ran before it: nginx
# 227 to-idle samples for 209 switches); now last_ran.h reads the
# kernel's count of forks and names nobody rather than the wrong task
# (but on a CPU whose counts of switch-ins say no forked task ran there),
# and the CPU's idle stamp names most to-idle tasks exactly: a rise of
# more than HOSTILE_RATE_POINTS fails.  A fall is the price of those
# refusals: printed beyond HOSTILE_RATE_POINTS, failed beyond
# HOSTILE_DROP_POINTS (8; measured: -4.1 pooled, php-fpm -4.4).
for run in calm hostile; do
	"$idlevm" report -n 1 "$IVM_RUNDIR/$run.prof" 2>/dev/null |
		sed -n -e "s/^  to-idle tasks named/$run: to-idle tasks named/p" \
			-e "s/^  lookups of the stamps after forks/$run: lookups of the stamps after forks/p"
done
echo "capture rates (program: idlevm to-idle samples / the guest's switches to idle):"
rates=$(join "$IVM_RUNDIR/calm.rates" "$IVM_RUNDIR/hostile.rates")
echo "$rates" | awk '
	{ a = $2 ? $3 * 100 / $2 : 0; b = $4 ? $5 * 100 / $4 : 0
	  printf "  %-14s without %5d/%-5d %5.1f%%   with %5d/%-5d %5.1f%%   %+.1f points\n", $1, $3, $2, a, $5, $4, b, b - a
	  t1 += $2; c1 += $3; t2 += $4; c2 += $5 }
	END { printf "  %-14s without %5d/%-5d %5.1f%%   with %5d/%-5d %5.1f%%   %+.1f points\n", "(all three)", c1, t1, c1 * 100 / t1, c2, t2, c2 * 100 / t2, c2 * 100 / t2 - c1 * 100 / t1 }'
# Samples given to the wrong program show first as a program with more
# to-idle samples than the guest's trace has switches to idle (beyond the
# windows' edges: 2%, at least 3), whatever the host's load.
for run in calm hostile; do
	awk -v run="$run" '$2 >= 20 && $3 > $2 + ($2 * 0.02 > 3 ? $2 * 0.02 : 3) {
		printf "%s: %s has %d to-idle samples for %d switches to idle\n", run, $1, $3, $2; bad = 1 }
		END { exit bad }' "$IVM_RUNDIR/$run.rates" ||
		fail "$run: more to-idle samples than switches to idle: misattributed samples"
done
# A loaded host makes looks late and idle periods unseen, by design (the
# closing lines say how many looks came late): a run so degraded is no
# baseline, and the two runs' rates are printed, not compared.
late() {
	sed 's/.*\r//' "$IVM_RUNDIR/$1.out" |
		sed -n 's/^idlevm: looks after an idle halt:.* later (\([0-9.]*\)%).*/\1/p' | tail -n 1
}
calm_late=$(late calm) hostile_late=$(late hostile)
if awk -v a="${calm_late:-0}" -v b="${hostile_late:-0}" -v max="$HOSTILE_LATE_PCT" \
	'BEGIN { exit !(a > max || b > max) }'; then
	echo "degraded: looks came late after ${calm_late}% (without) and ${hostile_late}% (with) of idle halts, over $HOSTILE_LATE_PCT%: the host is loaded; rates not compared"
	rates=
fi
verdict=$(echo "$rates" | awk -v pts="$HOSTILE_RATE_POINTS" -v drop="$HOSTILE_DROP_POINTS" '
	NF < 5 { exit }
	$2 < 20 || $4 < 20 { print "few"; exit }
	{ t1 += $2; c1 += $3; t2 += $4; c2 += $5 }
	END { if (t1 < 20 || t2 < 20) exit; d = c2 * 100 / t2 - c1 * 100 / t1
	      if (d < -drop) print "worse"; else if (d < -pts) print "degraded"
	      else if (d > pts) print "misnamed" }')
case $verdict in
few) fail "under 20 switches to idle of a server program in a run: nothing to compare" ;;
worse) fail "the server programs' capture rate fell more than $HOSTILE_DROP_POINTS points with the hostile program" ;;
degraded) echo "degraded: the server programs' capture rate fell more than $HOSTILE_RATE_POINTS points (lookups refused under the fork storm: above)" ;;
misnamed) fail "the server programs' capture rate rose more than $HOSTILE_RATE_POINTS points: misattributed samples" ;;
esac
# Each program on its own, printed: the bound is per program, not only
# pooled (a program with few switches moves by a few points on its own).
# Printed with the spread two such counts have by chance alone (2 standard
# deviations of the difference of two rates at these counts).
echo "$rates" | awk -v pts="$HOSTILE_RATE_POINTS" '
	NF == 5 && $2 >= 20 && $4 >= 20 { d = $5 * 100 / $4 - $3 * 100 / $2
	  p = ($3 + $5) / ($2 + $4); if (p > 1) p = 1
	  sd = 100 * sqrt(p * (1 - p) * (1 / $2 + 1 / $4))
	  if (d < -pts) printf "degraded: %s %+.1f points (chance alone: +-%.1f at these counts)\n", $1, d, 2 * sd }'

# 2. Bounded memory.
calm_hwm=$(cat "$IVM_RUNDIR/calm.hwm") hostile_hwm=$(cat "$IVM_RUNDIR/hostile.hwm")
echo "idlevm VmHWM: without $((calm_hwm / 1024)) MiB, with $((hostile_hwm / 1024)) MiB"
[ "$hostile_hwm" -le $((HOSTILE_RSS_MB * 1024)) ] ||
	fail "idlevm's peak RSS $((hostile_hwm / 1024)) MiB is over $HOSTILE_RSS_MB MiB"
[ "$hostile_hwm" -le $((calm_hwm + HOSTILE_RSS_GROWTH_MB * 1024)) ] ||
	fail "idlevm's peak RSS grew by more than $HOSTILE_RSS_GROWTH_MB MiB with the hostile program"

# 3. Cost, printed: idlevm's host CPU and its CPU per recorded sample.
for run in calm hostile; do
	sed 's/.*\r//' "$IVM_RUNDIR/$run.out" | awk -v run="$run" '
		/host CPU .* over / { for (i = 1; i <= NF; i++) if ($i == "CPU") { cpu = $(i + 1); share = $(i + 6) } }
		/us of host CPU per sample recorded/ { s = $0; sub(/ us of host CPU.*/, "", s); sub(/.*; /, "", s); us = s }
		END { sub(/^\(/, "", share); printf "%s: host CPU %s s, %s of a core, %s us per sample recorded\n", run, cpu, share, us }'
done

# 4. What was cut short, and why: the report counts user stacks by how
# they ended; the deep stack reaches the frame cap, the unmapped stack
# pointers fault, the crafted CFI is refused or makes no progress.
ended=$(grep '^  user stacks:' "$IVM_RUNDIR/hostile.report") ||
	fail "no count of how user stacks ended in the report"
echo "$ended"
echo "$ended" | awk '{ f = $0; sub(/.*unreadable /, "", f); fault = f + 0
	c = $0; sub(/.*frame cap /, "", c); cap = c + 0
	r = $0; sub(/.*CFI refused /, "", r); bad = r + 0
	l = $0; sub(/.*no progress /, "", l); loop = l + 0
	printf "cut short: unreadable %d, frame cap %d, CFI refused %d, no progress %d\n", fault, cap, bad, loop
	exit !(fault > 0 && cap > 0 && bad + loop > 0) }' ||
	fail "the hostile stacks did not end for their reasons (unmapped stack, 100,000 frames, crafted CFI)"
echo "hostile processes' to-idle samples:"
grep -v -E "^($(echo "$WEB01_SERVERS" | sed 's/ /|/g; s/\./\\./g'))_" "$IVM_RUNDIR/hostile.folded" |
	awk '{ split($1, f, ";"); n[f[1]] += $NF } END { for (p in n) print n[p], p }' | sort -rn | head -n 12 |
	cat -v | sed 's/^/  /'
sed 's/.*\r//' "$IVM_RUNDIR/hostile.out" | grep -iE 'discard|truncat|refused|cfi|lost' | head -n 20

# 5. No raw control byte in anything idlevm wrote about the guest.
"$idlevm" report -f folded "$IVM_RUNDIR/hostile.prof" >"$IVM_RUNDIR/hostile.all.folded" 2>&1
"$idlevm" report -f threads "$IVM_RUNDIR/hostile.prof" >"$IVM_RUNDIR/hostile.threads" 2>&1
sed 's/\r\x1b\[K//g' "$IVM_RUNDIR/hostile.out" >"$IVM_RUNDIR/hostile.out.plain"
for f in hostile.report hostile.all.folded hostile.threads hostile.out.plain; do
	n=$(control_bytes "$IVM_RUNDIR/$f")
	echo "$f: $n raw control bytes"
	[ "$n" = 0 ] || fail "$f holds $n raw control bytes"
done
grep -c 'ivm-evil\|\\x1b\|\\e' "$IVM_RUNDIR/hostile.all.folded" | sed 's/^/folded lines naming the hostile processes (escaped): /'
