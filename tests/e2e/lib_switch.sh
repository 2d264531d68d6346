# Helpers for the context-switch sampling tests (profile --switch-every).

# workload_pid: the pid of the guest's workload (lockstorm).
workload_pid() {
	guest_sh 'cat /run/idlevm-workload.pid'
}

# workload_freeze PID: SIGSTOP the guest process PID and wait until every
# one of its threads is stopped (state T in /proc/PID/task/TID/stat), so
# that its scheduler counters hold still while the guest and idlevm read
# them.  Fails when they do not all stop within about 10 s.
workload_freeze() {
	guest_sh "kill -STOP $1 || exit 1
	n=0
	while [ \$n -lt 200 ]; do
		s=\$(cat /proc/$1/task/*/stat 2>/dev/null | awk '{ print \$3 }' | sort -u)
		[ \"\$s\" = T ] && exit 0
		sleep 0.05
		n=\$((n + 1))
	done
	echo \"threads of $1 not all stopped: \$s\"; exit 1"
}

# workload_thaw PID: SIGCONT it.
workload_thaw() {
	guest_sh "kill -CONT $1"
}

# workload_sched PID: one line per thread of guest process PID, as the
# guest itself accounts it:
#   TID COMM VOLUNTARY INVOLUNTARY RUN_NS RUN_DELAY_NS
# (/proc/PID/task/TID/status voluntary_ctxt_switches and
# nonvoluntary_ctxt_switches, /proc/PID/task/TID/schedstat run time and
# run delay).  Read it while the process is frozen: the shell reading it
# runs on the guest's CPUs, and would preempt (and so count switches of)
# a running thread.
workload_sched() {
	guest_sh "for t in /proc/$1/task/*; do
		echo \$(basename \$t) \$(cat \$t/comm) \$(awk '/^voluntary_ctxt_switches/ { v = \$2 }
			/^nonvoluntary_ctxt_switches/ { n = \$2 } END { print v, n }' \$t/status) \$(cut -d ' ' -f 1-2 \$t/schedstat)
	done"
}

# lockstorm_counts PID: make lockstorm print a report (SIGUSR1) and print
# its summary line's blocking counts, "LOCK READ THROTTLE", from the
# console, once it is there (at most about 20 s).
lockstorm_counts() {
	local before n line i
	before=$(grep -a -c '^lockstorm: t=' "$IVM_CONSOLE_LOG")
	guest_sh "kill -USR1 $1" >/dev/null || return 1
	for i in $(seq 1 100); do
		n=$(grep -a -c '^lockstorm: t=' "$IVM_CONSOLE_LOG")
		if [ "$n" -gt "$before" ]; then
			line=$(grep -a '^lockstorm: t=' "$IVM_CONSOLE_LOG" | tail -n 1 | tr -d '\r')
			echo "$line" | awk '{
				for (i = 1; i <= NF; i++) {
					split($i, kv, "=")
					if (kv[1] == "wait_for_lock_n") l = kv[2]
					if (kv[1] == "read_request_n") r = kv[2]
					if (kv[1] == "throttle_n") t = kv[2]
				}
				print l, r, t }'
			return 0
		fi
		sleep 0.2
	done
	echo "lockstorm_counts: no report on the console" >&2
	return 1
}

# switch_paths FOLDED: the blocking paths of lockstorm workers' samples in
# FOLDED (report -f folded -K switch), from kernel frames:
#   LOCK READ THROTTLE OTHER
# futex_wait: wait_for_lock; pipe_read: read_request; nanosleep: throttle;
# anything else (preempted in compute_batch, stopped) is OTHER.
switch_paths() {
	echo "$1" | awk '
	$0 !~ /ls-worker/ { next }
	{ n = $NF }
	/futex_wait/ { l += n; next }
	/pipe_read/ { r += n; next }
	/nanosleep/ { t += n; next }
	{ o += n }
	END { print l + 0, r + 0, t + 0, o + 0 }'
}
