# The guest's own account of its idle transitions, for the idle tests:
# its scheduler's switches to and from the idle task (its own tracefs) and
# its interrupt counts (/proc/interrupts), over a window.

T=/sys/kernel/tracing

# guest_idle_trace_start: clear and start the guest's trace of switches
# into and out of its idle tasks; snapshot its interrupt counts.
guest_idle_trace_start() {
	guest_sh "echo 0 > $T/tracing_on; echo > $T/trace
	echo 8192 > $T/buffer_size_kb
	echo 'prev_pid == 0 || next_pid == 0' > $T/events/sched/sched_switch/filter
	echo 1 > $T/events/sched/sched_switch/enable
	cat /proc/interrupts > /tmp/ivm-irq0
	echo 1 > $T/tracing_on"
}

# guest_idle_trace_stop: stop it and print, one per line,
#   T COMM       a switch to idle, COMM the task that went to idle
#   F COMM       a switch from idle, COMM the task dispatched
#   W SECONDS    the trace's span (first to last switch)
#   I NAME DELTA interrupts of line NAME over the window, all CPUs
#   L LOST       events the guest's trace lost (overruns)
# The helper's own threads (idlevm-helper) are left out: they run there
# because idlevm asked them to.
guest_idle_trace_stop() {
	guest_sh "echo 0 > $T/tracing_on
	cat /proc/interrupts > /tmp/ivm-irq1
	awk '/sched_switch:/ {
		for (i = 1; i <= NF; i++) {
			if (\$i ~ /^prev_comm=/) pc = substr(\$i, 11)
			if (\$i ~ /^prev_pid=/) pp = substr(\$i, 10)
			if (\$i ~ /^next_comm=/) nc = substr(\$i, 11)
			if (\$i ~ /^next_pid=/) np = substr(\$i, 10)
			if (\$i ~ /^[0-9]+\\.[0-9]+:\$/) ts = substr(\$i, 1, length(\$i) - 1)
		}
		if (!first) first = ts; last = ts
		if (np == 0 && pc !~ /^idlevm-helper/) print \"T\", pc
		if (pp == 0 && nc !~ /^idlevm-helper/) print \"F\", nc
	}
	END { printf \"W %.6f\\n\", last - first }' $T/trace
	lost=0; for s in $T/per_cpu/cpu*/stats; do
		o=\$(awk '/^overrun:/ { print \$2 }' \$s); lost=\$((lost + o)); done
	echo L \$lost
	awk 'NR == FNR { if (FNR > 1) { s = 0; for (i = 2; i <= ncpu + 1; i++) s += \$i; a[\$1] = s }; next }
	     FNR == 1 { next }
	     { s = 0; for (i = 2; i <= ncpu + 1; i++) s += \$i; if (\$1 in a) print \"I\", \$1, s - a[\$1] }' \
		ncpu=\$(head -1 /tmp/ivm-irq0 | wc -w) /tmp/ivm-irq0 /tmp/ivm-irq1
	echo 0 > $T/events/sched/sched_switch/enable
	echo 0 > $T/events/sched/sched_switch/filter; echo > $T/trace" 60
}
