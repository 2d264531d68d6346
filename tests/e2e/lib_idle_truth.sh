# The guest's own account of its idle transitions, for the idle tests:
# its scheduler's switches to and from the idle task (its own tracefs) and
# its interrupt counts (/proc/interrupts), over the window of a profile.

T=/sys/kernel/tracing

# guest_idle_trace_start: clear and start the guest's trace of switches
# into and out of its idle tasks; snapshot its interrupt counts.  The
# events stay enabled afterwards (tests/e2e/run enables them at boot: a
# tracepoint switched at run time patches kernel code); only the ring
# buffer is turned off.
guest_idle_trace_start() {
	guest_sh "echo 0 > $T/tracing_on; echo > $T/trace
	echo perf > $T/trace_clock
	echo 8192 > $T/buffer_size_kb
	echo 'prev_pid == 0 || next_pid == 0' > $T/events/sched/sched_switch/filter
	echo 1 > $T/events/sched/sched_switch/enable
	for e in irq_vectors/local_timer_entry irq_vectors/call_function_entry \
		irq_vectors/call_function_single_entry irq_vectors/reschedule_entry \
		irq/irq_handler_entry; do
		[ -e $T/events/\$e/enable ] && echo 1 > $T/events/\$e/enable
	done
	cat /proc/interrupts > /tmp/ivm-irq0
	echo 1 > $T/tracing_on"
}

# guest_idle_trace_stop: stop tracing (the trace stays for
# guest_idle_trace_count) and snapshot the interrupt counts again.
guest_idle_trace_stop() {
	guest_sh "echo 0 > $T/tracing_on; cat /proc/interrupts > /tmp/ivm-irq1"
}

# profile_windows PROFILE: "CPU FROM TO" per vCPU, the guest run-queue
# clock (ns) at the start of the first and of the last of the profile's
# idle periods on it: the window over which the guest's own counts are
# compared.  The guest's trace clock "perf" (local_clock, sched_clock_cpu)
# is the clock the run queues read.  Both ends are looks that found the
# vCPU idle: its run queue's clock was then last set by the switch into
# idle, after every switch out of idle its counts hold.  A look at a
# running vCPU can read a clock older than a switch it counts (the
# scheduler skips a clock update now and then), and the window's end was
# once such a look: idlevm counted 4 switches more than the trace.
# A fourth field says how many switches out of idle idlevm read on that
# vCPU between the two ends (its idle task's switch counts there).
profile_windows() {
	"$idlevm" report -f periods "$1" 2>/dev/null | awk -F '\t' '
		$12 > 0 && $13 > 0 {
			if (!($1 in lo) || $12 < lo[$1]) { lo[$1] = $12; first[$1] = $14 }
			if ($12 > hi[$1]) { hi[$1] = $12; last[$1] = $14 } }
		END { for (c in lo) print c, lo[c], hi[c], last[c] - first[c] }'
}

# guest_idle_trace_count WINDOWS: the traced switches inside the windows
# ("CPU FROM TO" lines), one per line:
#   T COMM       a switch to idle, COMM the task that went to idle
#   F COMM       a switch from idle, COMM the task dispatched
#   C CPU T F    the counts per CPU, the idlevm helper included
#   W KIND       per switch from idle, the last interrupt the CPU took
#                while idle before it (timer, call, resched, device; none)
#   L LOST       events the guest's trace lost (overruns)
#   I NAME DELTA interrupts of line NAME over the trace, all CPUs
# T and F leave out the helper's threads (idlevm-helper): they run there
# because idlevm asked them to.  Clears the trace.
guest_idle_trace_count() {
	local w
	w=$(echo "$1" | awk '{ printf "%s lo[%d] = %s; hi[%d] = %s;", "", $1, $2, $1, $3 }')
	guest_sh "awk 'BEGIN { $w }
	/(local_timer_entry|call_function_entry|call_function_single_entry|reschedule_entry|irq_handler_entry):/ {
		cpu = \$2; gsub(/[^0-9]/, \"\", cpu); cpu += 0
		k = /local_timer/ ? \"timer\" : /call_function/ ? \"call\" : /reschedule/ ? \"resched\" : \"device\"
		if (idle[cpu]) last[cpu] = k
		next
	}
	/sched_switch:/ {
		cpu = \$2; gsub(/[^0-9]/, \"\", cpu); cpu += 0
		for (i = 1; i <= NF; i++) {
			if (\$i ~ /^prev_comm=/) pc = substr(\$i, 11)
			if (\$i ~ /^prev_pid=/) pp = substr(\$i, 10)
			if (\$i ~ /^next_comm=/) nc = substr(\$i, 11)
			if (\$i ~ /^next_pid=/) np = substr(\$i, 10)
			if (\$i ~ /^[0-9]+\\.[0-9]+:\$/) { ts = \$i; sub(/:/, \"\", ts); split(ts, p, \".\") }
		}
		ns = p[1] * 1000000000 + p[2] * 1000
		inwin = (cpu in lo) && ns > lo[cpu] && ns <= hi[cpu]
		if (pp == 0 && inwin && nc !~ /^idlevm-helper/)
			print \"W\", (last[cpu] ? last[cpu] : \"none\")
		if (np == 0) { idle[cpu] = 1; last[cpu] = \"\" }
		if (pp == 0) idle[cpu] = 0
		if (!inwin) next
		if (np == 0) { ct[cpu]++; if (pc !~ /^idlevm-helper/) print \"T\", pc }
		if (pp == 0) { cf[cpu]++; if (nc !~ /^idlevm-helper/) print \"F\", nc }
	}
	END { for (c in lo) print \"C\", c, ct[c] + 0, cf[c] + 0 }' $T/trace
	lost=0; for s in $T/per_cpu/cpu*/stats; do
		o=\$(awk '/^overrun:/ { print \$2 }' \$s); lost=\$((lost + o)); done
	echo L \$lost
	awk 'NR == FNR { if (FNR > 1) { s = 0; for (i = 2; i <= ncpu + 1; i++) s += \$i; a[\$1] = s }; next }
	     FNR == 1 { next }
	     { s = 0; for (i = 2; i <= ncpu + 1; i++) s += \$i; if (\$1 in a) print \"I\", \$1, s - a[\$1] }' \
		ncpu=\$(head -1 /tmp/ivm-irq0 | wc -w) /tmp/ivm-irq0 /tmp/ivm-irq1
	echo 0 > $T/events/sched/sched_switch/filter; echo > $T/trace" 90
}

# check_timeline_json FILE NR_VCPUS: a Chrome trace-event JSON object whose
# traceEvents are metadata naming each vCPU track (and the host's tracks
# beside them: a vCPU's steal at tid 100000 + N, the disks' service),
# complete events with non-negative times (idle and running on the vCPU
# tracks, host steal on the vCPUs' host tracks), and instants.
check_timeline_json() {
	jq -e --argjson n "$2" '
		(.traceEvents | type == "array") and
		([.traceEvents[] | select(.ph == "M" and .name == "thread_name" and
		  (.args.name | test("^vCPU [0-9]+$")))] | length == $n) and
		([.traceEvents[] | select(.ph == "X" and .cat == "idle")] | length > 0) and
		([.traceEvents[] | select(.ph == "X") |
		  select((.ts | type) != "number" or .ts < 0 or .dur < 0 or .pid != 1)] | length == 0) and
		([.traceEvents[] | select(.ph == "X" and (.cat == "idle" or .cat == "running")) |
		  select(.tid < 0 or .tid >= $n)] | length == 0) and
		([.traceEvents[] | select(.ph == "X" and .cat == "host_steal") |
		  select(.tid < 100000 or .tid >= 100000 + $n)] | length == 0) and
		([.traceEvents[] | select(.ph != "M" and .ph != "X" and .ph != "i")] | length == 0)
	' "$1" >/dev/null || return 1
	jq -r '[.traceEvents[] | select(.ph == "X") | .cat] | group_by(.) | map("\(.[0]) \(length)") | join(", ")' "$1"
}

# render_timeline HTML PNG: headless Chromium opens the page; its DOM must
# hold the vCPU tracks and idle periods, and the screenshot must show the
# idle periods' colours, and with the running colour over 1000 pixels (a
# guest idle thousands of times in the window leaves little of its running
# wider than a pixel: 196 pixels once for 8052 periods in 15 s).
render_timeline() {
	local chrome dir dom
	chrome=$(command -v chromium || command -v chromium-browser) || return 1
	dir=$(mktemp -d)
	set -- "$1" "$2" --headless --no-sandbox --disable-gpu \
		--disable-background-networking --disable-component-update \
		--disable-sync --no-first-run --user-data-dir="$dir" --hide-scrollbars
	dom=$(timeout 90 "$chrome" "${@:3}" --dump-dom "file://$1" 2>/dev/null)
	rm -f "$2"
	timeout 90 "$chrome" "${@:3}" --window-size=1900,400 --screenshot="$2" \
		"file://$1" >/dev/null 2>&1
	rm -rf "$dir"
	echo "$dom" | grep -c 'class="idle"' | sed 's/^/timeline DOM: idle periods /'
	echo "$dom" | grep -q 'class="track"' || return 1
	echo "$dom" | grep -q 'class="idle"' || return 1
	[ -s "$2" ] || return 1
	tests/tools/png-colors "$2" d9d2c5 4e79a7 f28e2b 59a14f e15759 9c9c9c |
		awk '{ print "timeline screenshot: " $0 }
		     $1 == "d9d2c5" { run = $2 } $1 ~ /^(4e79a7|f28e2b|59a14f|e15759|9c9c9c)$/ { idle += $2 }
		     END { exit !(idle > 100 && run + idle > 1000) }'
}

# idle_events_check NAME: profile the guest for $IVM_PROFILE_SECONDS (15)
# with the default idle source while it traces itself, then check idlevm's
# account of its idle transitions against the guest's (t_62 of each suite).
# $IVM_T62_SWITCH_SLACK (2) is how far idlevm's idle switch counts may be
# from the trace's.  $IVM_T62_ARGS adds idlevm profile options; the profile is left in
# $IVM_RUNDIR/NAME.prof.
idle_events_check() {
	local prof=$IVM_RUNDIR/$1.prof
	local duration=${IVM_PROFILE_SECONDS:-15} out rc windows truth report to from periods

	guest_idle_trace_start || fail "cannot start tracing in the guest"
	out=$("$idlevm" profile --domain "$IVM_DOMAIN" -D "$duration" -o "$prof" \
		--no-report ${IVM_T62_ARGS:-} 2>&1)
	rc=$?
	guest_idle_trace_stop || fail "cannot stop tracing in the guest"
	[ "$rc" = 0 ] || fail "idlevm profile failed ($rc): $out"
	echo "$out"
	echo "$out" | grep -q 'idle source sched' || fail "the sched idle source did not run"
	# 0. The loop is woken by the vCPU threads' own sleeps and wakeups,
	# not by every switch into them (thousands more a second on a busy
	# host, each a real-time wakeup of idlevm: sched_events.h).
	echo "$out" | sed -n 's/.* \([0-9]*\) vCPU-thread sleeps .* \([0-9]*\) trace records read.*/\1 \2/p' |
		awk '{ printf "trace records %d for %d vCPU-thread sleeps\n", $2, $1
		       exit !($2 <= 3 * $1 + 200) }' ||
		fail "idlevm read far more trace records than the vCPU threads' sleeps and wakeups"
	# The idle gate (idle_gate.h) ran and let sleeps pass: fewer woke
	# idlevm than the vCPU threads made.  A host that refuses its BPF
	# program profiles without it: degraded, reported.
	case " ${IVM_T62_ARGS:-} " in
	*" --no-idle-gate "*) ;;
	*)	if echo "$out" | grep -q "the idle gate cannot start"; then
			echo "degraded: the idle gate did not start: every vCPU sleep woke idlevm"
		else
			echo "$out" | sed -n 's/.* \([0-9]*\) vCPU-thread sleeps (\([0-9]*\) woke idlevm through the idle gate.*/\1 \2/p' |
				awk '{ printf "idle gate: %d of %d vCPU-thread sleeps woke idlevm\n", $2, $1; ok = $2 > 0 && $2 < $1 }
				     END { exit !ok }' ||
				fail "the idle gate let no vCPU sleep pass, or woke idlevm for none"
		fi ;;
	esac

	windows=$(profile_windows "$prof")
	[ -n "$windows" ] || fail "no idle period with guest clocks in the profile"
	truth=$(guest_idle_trace_count "$windows") || fail "cannot read the guest trace"
	echo "$truth" | grep -v '^[TFW] '

	# 1. The guest's idle-task switch counts as idlevm read them, per vCPU and
	# over the window, are the number of switches out of idle in its trace.
	# The trace's switches into idle over the window agree with those out of
	# it within one, except in a rare run where the trace itself is uneven
	# (3 to 5 apart, twice in about 90 runs; idlevm's count fell between the
	# two each time): within 2 of the range the trace's two counts span,
	# widened by as much as they are apart: a trace that disagrees with
	# itself by d places its window's edges no better than that (a rehearsal
	# on 5.10: into 5027, out of idle 5024, idlevm 5030; the other vCPU
	# 4504 and 4511, idlevm 4504).
	{ echo "$windows" | awk '{ print "K", $1, $4 }'; echo "$truth" | grep '^C '; } |
		awk -v slack="${IVM_T62_SWITCH_SLACK:-2}" '
		$1 == "K" { k[$2] = $3 } $1 == "C" { t[$2] = $3; f[$2] = $4 }
		END {
			bad = 0
			for (c in k) {
				printf "vCPU %s: idle-task switches read by idlevm %d, in the guest trace %d (into idle %d)\n", c, k[c], f[c], t[c]
				lo = t[c] < f[c] ? t[c] : f[c]; hi = t[c] < f[c] ? f[c] : t[c]
				d = hi - lo
				if (k[c] < lo - slack - d || k[c] > hi + slack + d || f[c] == 0) bad = 1
			}
			exit bad }' || {
		# The periods at each vCPU's window edges, flags included
		# (replayed, start unknown: idle_periods.h): what set them.
		"$idlevm" report -f periods "$prof" 2>/dev/null | awk -F '\t' '
			$12 > 0 && $13 > 0 { n[$1]++; row[$1, n[$1]] = $0 }
			END { for (c in n) for (i = 1; i <= n[c]; i++)
				if (i <= 3 || i > n[c] - 3) print "edge:", row[c, i] }'
		fail "idlevm's idle switch counts disagree with the guest trace"
	}

	# 2. Captured against the guest's transitions, and per-thread splits.
	report=$("$idlevm" report "$prof" 2>/dev/null) || fail "idlevm report failed"
	echo "$report" | sed -n '/^== run ==/,/^== top/p' | head -n 40
	# Every idle halt's look is in one delay bucket (idle_periods.h).
	echo "$report" | awk '
		/host events:/ { for (i = 1; i <= NF; i++) if ($i == "idle" && $(i + 1) == "halts,") { h = $(i - 1); sub(/^\(/, "", h) } }
		/looks after an idle halt:/ { n = $6 + $10 + $14; seen = 1 }
		END { exit !(seen && h > 0 && n == h) }' ||
		fail "the looks after idle halts do not add up to the idle halts"
	# A to-idle stack read after its thread ran again belongs to a period
	# rebuilt without a start, one at most each (replay.h).
	echo "$report" | awk '
		/ of them with the stack the thread blocked in next/ { s = $0; sub(/ of them with the stack.*/, "", s); sub(/.*, /, "", s); later = s }
		/rebuilt periods whose start is not known/ { s = $0; sub(/^ *\(/, "", s); sub(/ .*/, "", s); nostart = s }
		END { printf "to-idle stacks read after a later run %d, periods rebuilt without a start %d\n", later, nostart
		      exit !(later + 0 <= nostart + 0) }' ||
		fail "more to-idle stacks read after a later run than periods rebuilt without a start"
	to=$("$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null)
	from=$("$idlevm" report -f folded -K from_idle "$prof" 2>/dev/null)
	by_thread() {
		echo "$1" | awk '{ split($1, f, ";"); t = f[2]; sub(/\/[0-9]+$/, "", t); n[t] += $NF }
			END { for (t in n) print n[t], t }'
	}
	# compare KIND LETTER OURS: idlevm's samples of KIND against the trace's
	# LETTER lines; prints both splits and the capture ratio, fails when a
	# thread with 5% or more of either side is off by more than 10 points
	# or 3 standard deviations (LS_AWK_TOL), with at
	# least 100 transitions in the trace).  The helper's
	# threads are left out on both sides (idlevm's own footprint).
	compare() {
		{ echo "$truth" | awk -v l="$2" '$1 == l { n[$2]++ } END { for (c in n) print "T", n[c], c }'
		  by_thread "$3" | sed 's/^/I /'; } | awk -v kind="$1" "$LS_AWK_TOL"'
			$1 == "T" { t[$3] += $2; tt += $2; next }
			$1 == "I" && $3 !~ /^idlevm-helper/ { i[$3] += $2; it += $2 }
			END {
				if (tt < 100) {
				# A starved guest (a loaded host under TCG):
				# a handful of switches decides nothing.
				printf "%s: only %d in the guest trace, idlevm %d: too few to compare splits\n", kind, tt, it
				exit 0
			}
				printf "%s: guest trace %d, idlevm captured %d (%.1f%%)\n", kind, tt, it, it * 100 / tt
				bad = 0; worst = 0
				for (c in t) seen[c] = 1
				for (c in i) seen[c] = 1
				for (c in seen) {
					a = t[c] * 100 / tt; b = it ? i[c] * 100 / it : 0
					d = a - b; if (d < 0) d = -d
					if (d > worst) worst = d
					if (a >= 2 || b >= 2)
						printf "  %-16s trace %5.1f%%  idlevm %5.1f%%\n", c, a, b
					if ((a >= 5 || b >= 5) && d > tol(a, tt, it)) bad = 1
				}
				printf "%s: largest per-thread difference %.1f points\n", kind, worst
				exit bad
			}'
	}
	compare to-idle T "$to" || fail "to-idle split differs from the guest trace by more than 10 points"
	compare from-idle F "$from" || fail "from-idle split differs from the guest trace by more than 10 points"
	# The same from the idle-period records, which name both tasks of every
	# period, whether or not its stacks were kept.
	periods=$("$idlevm" report -f periods "$prof" 2>/dev/null)
	as_folded() { echo "$periods" | awk -F '\t' -v col="$1" '$col != "?" { print "x;" $col "/0 1" }'; }
	compare "to-idle (period records)" T "$(as_folded 8)" ||
		fail "to-idle split of the period records differs from the guest trace by more than 10 points"
	compare "from-idle (period records)" F "$(as_folded 11)" ||
		fail "from-idle split of the period records differs from the guest trace by more than 10 points"

	# 3. Wake causes against the guest's interrupt counters.
	echo "$truth" | awk '$1 == "I" { n = $2; sub(/:$/, "", n); v = $3
			if (n == "LOC") loc = v; else if (n == "RES") res = v; else if (n == "CAL") cal = v
			else if (n ~ /^[0-9]+$/) dev += v }
		END { t = loc + res + cal + dev
			if (t) printf "guest interrupts: LOC %d RES %d CAL %d devices %d: timer share %.1f%%\n", loc, res, cal, dev, loc * 100 / t }'
	echo "$report" | grep 'timer share'
	echo "$truth" | awk '$1 == "W" { n[$2]++; if ($2 != "none") k++ }
		END { for (c in n) printf "guest trace: %d switches from idle after %s\n", n[c], c
		      if (k) printf "guest trace: timer share of the interrupts that ended idle periods %.1f%% of %d\n", n["timer"] * 100 / k, k }'

	# 4. The timeline: Chrome trace JSON with one track per vCPU, and the HTML
	# page rendered by headless Chromium (not for a run with gaps in it:
	# IVM_T62_NO_TIMELINE=1).
	[ -n "${IVM_T62_NO_TIMELINE:-}" ] && return 0
	local json=$IVM_RUNDIR/$1-timeline.json
	local html=$IVM_RUNDIR/$1-timeline.html
	local png=$IVM_RUNDIR/$1-timeline.png
	"$idlevm" report -f timeline -o "$json" "$prof" 2>/dev/null || fail "timeline report failed"
	check_timeline_json "$json" "$IVM_VCPUS" || fail "timeline JSON is not well formed"
	render_timeline "$html" "$png" || fail "timeline page did not render"
}
