# Checks on lockstorm profiles shared by the profile tests.

# The guest's own ground truth for the workers' to-idle split: a hist
# trigger on sched:sched_switch that counts, in the guest kernel, every
# switch from a worker to the idle task by the worker's kernel stack.
# Start it before a profile and read it after, and check_lockstorm_paths
# compares idlevm's split with what the guest saw in that window instead
# of with the workload's design: on a loaded host the design no longer
# says how often each path ends in an idle CPU, the guest still does.
LS_HIST_TRIGGER='hist:keys=stacktrace:vals=hitcount:size=2048 if next_pid == 0 && prev_comm ~ "ls-worker*"'
LS_HIST_EVENT=/sys/kernel/tracing/events/sched/sched_switch

# guest_paths_start: clear and start the count.
guest_paths_start() {
	guest_sh "echo '!$LS_HIST_TRIGGER' > $LS_HIST_EVENT/trigger 2>/dev/null
	echo '$LS_HIST_TRIGGER' > $LS_HIST_EVENT/trigger"
}

# guest_paths_stop: stop the count; print "LOCK PIPE SLEEP OTHER DROPPED",
# the workers' switches to idle in futex_wait, pipe_read, nanosleep,
# elsewhere, and the entries the histogram dropped.
guest_paths_stop() {
	local hist
	hist=$(guest_sh "cat $LS_HIST_EVENT/hist
	echo '!$LS_HIST_TRIGGER' > $LS_HIST_EVENT/trigger") || return 1
	echo "$hist" | awk '
		/^\{ stacktrace:/ { path = "other"; next }
		/futex_wait/ && path == "other" { path = "lock" }
		/pipe_read/ && path == "other" { path = "pipe" }
		/nanosleep/ && path == "other" { path = "sleep" }
		/^\} hitcount:/ { n[path] += $3 }
		/Dropped:/ { dropped = $2 }
		END { printf "%d %d %d %d %d\n", n["lock"], n["pipe"], n["sleep"], n["other"], dropped }'
}

# check_lockstorm_paths FOLDED [LABEL [TRUTH [OUT]]]: FOLDED is `idlevm
# report -f folded -K to_idle` output.  At least 90% of the workload's
# to-idle samples (its ls-* threads) must end in its known blocking paths,
# read from kernel frames, and the workers' split between wait_for_lock
# (futex), read_request (pipe) and throttle (nanosleep) must be within 10
# points (or 3 standard deviations at small counts) of TRUTH
# (guest_paths_stop's output for the profile's window) when given, else of
# the designed 60/30/10.  When idlevm kept under a third of the workers'
# switches to idle the guest counted, the split is printed, not judged:
# what it lost is then not a random sample, and OUT (idlevm profile's
# stderr) must say it lost idle periods.  LABEL prefixes what it prints.
# Status 2 (not 1) when there were too few samples or switches to judge:
# the caller may profile longer.
check_lockstorm_paths() {
	local losses=0
	echo "${4:-}" | grep -qE '(^|[^0-9])[1-9][0-9]* (idle periods too short to see|came and went unseen)' &&
		losses=1
	echo "$1" | awk -v label="${2:+$2: }" -v truth="${3:-}" -v losses="$losses" \
		"$LS_AWK_TOL"'
	$0 !~ /;ls-/ { next }
	{ n = $NF; all += n }
	/ls-worker/ && /futex_wait/  { lock += n; w += n; next }
	/ls-worker/ && /pipe_read/   { pipe += n; w += n; next }
	/ls-worker/ && /nanosleep/   { sleep += n; w += n; next }
	/ls-(holder|dispatch)/ && /(do_sys_poll|nanosleep|futex_wait|pipe_read)/ { known += n; next }
	{ other += n }
	END {
		if (all < 50 || w == 0) { printf "too few samples: %d\n", all; exit 2 }
		k = (lock + pipe + sleep + known) * 100 / all
		printf "%sworkload to-idle samples %d: %.1f%% in known blocking paths\n", label, all, k
		printf "%sworkers %d: wait_for_lock %.1f%% read_request %.1f%% throttle %.1f%% (designed 60/30/10)\n",
			label, w, lock * 100 / w, pipe * 100 / w, sleep * 100 / w
		bad = 0
		if (k < 90) { print "FAIL: under 90% in known paths"; bad = 1 }
		want_lock = 60; want_pipe = 30; want_sleep = 10; against = "the design"
		tw = 1e9	# the design: no count of its own
		if (split(truth, t, " ") >= 3) {
			tw = t[1] + t[2] + t[3]
			if (tw < 50) { printf "too few switches to idle in the guest: %d\n", tw; exit 2 }
			want_lock = t[1] * 100 / tw; want_pipe = t[2] * 100 / tw
			want_sleep = t[3] * 100 / tw; against = "the guest"
			printf "%sthe guest: workers switched to idle %d times: futex %.1f%% pipe %.1f%% nanosleep %.1f%% (elsewhere %d, dropped %d)\n",
				label, tw, want_lock, want_pipe, want_sleep, t[4], t[5]
			if (w * 3 < tw) {
				printf "degraded: %sNOT COMPARED: idlevm kept %d of the %d worker switches to idle the guest counted (under a third)\n",
					label, w, tw
				if (!losses) { print "FAIL: and idlevm did not say it lost idle periods"; bad = 1 }
				exit bad
			}
		}
		d = lock * 100 / w - want_lock; if (d < 0) d = -d
		if (d > tol(want_lock, w, tw)) { printf "FAIL: wait_for_lock share against %s (allowed %.1f points)\n", against, tol(want_lock, w, tw); bad = 1 }
		d = pipe * 100 / w - want_pipe; if (d < 0) d = -d
		if (d > tol(want_pipe, w, tw)) { printf "FAIL: read_request share against %s (allowed %.1f points)\n", against, tol(want_pipe, w, tw); bad = 1 }
		d = sleep * 100 / w - want_sleep; if (d < 0) d = -d
		if (d > tol(want_sleep, w, tw)) { printf "FAIL: throttle share against %s (allowed %.1f points)\n", against, tol(want_sleep, w, tw); bad = 1 }
		exit bad
	}'
}

# lockstorm_split FOLDED: "LOCK PIPE SLEEP N" of the workers' to-idle
# samples in FOLDED (`idlevm report -f folded -K to_idle` output): their
# shares in percent ending in wait_for_lock (futex_wait), read_request
# (pipe_read) and throttle (nanosleep), and their number; nothing when
# there is none.
lockstorm_split() {
	echo "$1" | awk '
	$0 !~ /;ls-worker/ { next }
	{ n = $NF; w += n }
	/futex_wait/ { lock += n } /pipe_read/ { pipe += n } /nanosleep/ { sleep += n }
	END { if (w) printf "%.2f %.2f %.2f %d\n", lock * 100 / w, pipe * 100 / w, sleep * 100 / w, w }'
}

# compare_splits ONE OTHER [POINTS]: two lockstorm_split outputs of one
# guest profiled two ways.  Prints per share both values, their difference
# and how far they may differ: POINTS (default 3), or three standard
# deviations of the difference when the counts are too small for POINTS
# (LS_AWK_TOL's rule).  Status 1 when a share differs by more.
compare_splits() {
	echo "$1 $2" | awk -v base="${3:-3}" "$LS_AWK_TOL"'
	NF >= 8 {
		split("wait_for_lock read_request throttle", name, " ")
		for (i = 1; i <= 3; i++) {
			t = tol_base(($i + $(i + 4)) / 2, $4, $8, base)
			d = $i - $(i + 4); if (d < 0) d = -d
			printf "  %-13s %6.2f%% and %6.2f%% (%d and %d samples): %.2f points apart, allowed %.2f%s\n",
				name[i], $i, $(i + 4), $4, $8, d, t, (d > t ? "  OUTSIDE" : "")
			if (d > t) bad = 1
		}
		done = 1
	}
	END { exit (done ? bad : 2) }'
}
