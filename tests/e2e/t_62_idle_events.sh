# The sched idle source on lockstorm, against the guest's own account of
# the same window: its scheduler's switches into and out of idle (its
# tracefs, clock "perf", the clock its run queues read) and its interrupt
# counts.  Asserted: idlevm's idle-task switch counts, read from guest
# memory, are the guest trace's to the switch; the per-thread to-idle and
# from-idle splits agree; the timeline is well formed and renders.
# Printed: the share of the guest's transitions captured, the per-thread
# differences and the timer share of wake causes (the figures of issue 15).
. tests/e2e/lib_profile.sh
. tests/e2e/lib_idle_truth.sh
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac

idle_events_check t62
