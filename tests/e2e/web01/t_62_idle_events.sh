# The sched idle source on web01 under its load, against the guest's own
# trace and interrupt counts (see tests/e2e/lib_idle_truth.sh).
. tests/e2e/web01/lib_web01.sh
. tests/e2e/lib_idle_truth.sh

web01_wait_rounds 1 || fail "no load on web01"
idle_events_check web01-t62
