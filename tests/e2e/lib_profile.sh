# Checks on lockstorm profiles shared by the profile tests.

# check_lockstorm_paths FOLDED [LABEL]: FOLDED is `idlevm report -f folded
# -K to_idle` output.  At least 90% of the workload's to-idle samples (its
# ls-* threads) must end in its known blocking paths, read from kernel
# frames, and the workers' split between wait_for_lock (futex),
# read_request (pipe) and throttle (nanosleep) must be within 10 points of
# the designed 60/30/10.  LABEL prefixes what it prints.
check_lockstorm_paths() {
	echo "$1" | awk -v label="${2:+$2: }" '
	$0 !~ /;ls-/ { next }
	{ n = $NF; all += n }
	/ls-worker/ && /futex_wait/  { lock += n; w += n; next }
	/ls-worker/ && /pipe_read/   { pipe += n; w += n; next }
	/ls-worker/ && /nanosleep/   { sleep += n; w += n; next }
	/ls-(holder|dispatch)/ && /(do_sys_poll|nanosleep|futex_wait|pipe_read)/ { known += n; next }
	{ other += n }
	END {
		if (all < 50 || w == 0) { printf "too few samples: %d\n", all; exit 1 }
		k = (lock + pipe + sleep + known) * 100 / all
		printf "%sworkload to-idle samples %d: %.1f%% in known blocking paths\n", label, all, k
		printf "%sworkers %d: wait_for_lock %.1f%% read_request %.1f%% throttle %.1f%% (designed 60/30/10)\n",
			label, w, lock * 100 / w, pipe * 100 / w, sleep * 100 / w
		bad = 0
		if (k < 90) { print "FAIL: under 90% in known paths"; bad = 1 }
		d = lock * 100 / w - 60; if (d < -10 || d > 10) { print "FAIL: wait_for_lock share"; bad = 1 }
		d = pipe * 100 / w - 30; if (d < -10 || d > 10) { print "FAIL: read_request share"; bad = 1 }
		d = sleep * 100 / w - 10; if (d < -10 || d > 10) { print "FAIL: throttle share"; bad = 1 }
		exit bad
	}'
}
