#!/bin/bash
# Benchmark: what attaching idlevm costs a real service's latency.
#
#   BUILD=build tests/bench/web01_latency.sh [CYCLES] [SECONDS]
#
# Boots the web01 guest (images/build-web01: nginx -> php-fpm -> Redis +
# SQLite) with its test shell, stops its own load generator and runs the
# same load (wrk -t 1 -c 4 with /etc/web01/paced.lua and the settings of
# /etc/default/web01-load) itself, one round of SECONDS (default 20) at a
# time, through the test shell.  Each cycle (CYCLES, default 5) runs every
# configuration once, each attached round between two detached ones:
#
#   detached, CONFIG1, detached, CONFIG2, ..., detached
#
# so an attached round is compared with the detached rounds on either side
# of it, on the same guest, minutes apart at most: the host's drift under
# TCG (figures move by 10-20% between windows here) mostly cancels.  The
# configurations (IVM_BENCH_CONFIGS, default "default optimistic pin
# pin-always stop") are idlevm profile's defaults and --capture MODE /
# --pin-policy always, or free-form options joined by commas
# ("--capture,optimistic,-F,0"), or "@PATH[,OPTIONS]" for another idlevm
# build (old against new in the same rounds); IDLEVM_ARGS adds options to
# every attached round.
#
# idlevm attaches before the round starts (its attach pauses the guest a
# few ms to find QEMU's register state: not part of any round) and is
# stopped with SIGTERM (as Ctrl-C would) after it.  Per round it prints the service's
# requests/s, p50 and p99 latency (wrk's, in the guest), the guest's
# context switches (/proc/stat ctxt) and those where the helper's threads
# (comm idlevm-helper) or a migration/N thread were switched in or out
# (the guest's own sched_switch event, filtered to those threads; the
# same tracing runs in every round, attached or not), idlevm's host CPU
# (/proc/PID/stat utime+stime over the round) and its closing lines.
# At the end, per configuration: the median and range of p50, p99 and
# requests/s, their ratio to the neighbouring detached rounds (median and
# range), the helper's share of the guest's switches, idlevm's CPU.
#
# Why our own wrk rather than the service's rounds log: the rounds of
# web01-load.service run back to back on their own clock, so attach and
# detach would fall inside rounds, and every round would have to be
# matched to a window after the fact; here a round starts after idlevm has
# attached and ends before it detaches, and the trace counts cover exactly
# the round.
#
# IVM_BENCH_HELPER=FILE boots the cached image with FILE as the guest's
# idlevm-helper (handed in on a second virtio disk and installed before the
# first round): to measure a helper without rebuilding the image.
# The machine is shared: record `uptime` and QEMU count (printed) with the
# figures.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
CYCLES=${1:-5}
SECONDS_PER=${2:-20}
CONFIGS=${IVM_BENCH_CONFIGS:-default optimistic pin pin-always stop}
IVM_PROG=web01_latency
. images/lib.sh
IVM_BUILD=$(cd "$BUILD" && pwd)
IDLEVM=$IVM_BUILD/idlevm
TCK=$(getconf CLK_TCK)
[ -x "$IDLEVM" ] || ivm_die "$IDLEVM missing: run 'make'"
ivm_web01_env

RUNDIR=$(ivm_rundir_create idlevm-bench-web01)
DOMAIN=idlevm-bench-web01-$$-$RANDOM
IDLEVM_PID=""
# stop_idlevm: end the attached idlevm the way Ctrl-C would (SIGTERM: a
# background job of a script starts with SIGINT ignored, and idlevm only
# catches it once it has attached), killing it if it does not end.
stop_idlevm() {
	local i

	kill -TERM "$IDLEVM_PID" 2>/dev/null || true
	for i in $(seq 1 100); do
		awk '{ exit $3 == "Z" }' "/proc/$IDLEVM_PID/stat" 2>/dev/null ||
			break
		sleep 0.1
	done
	kill -KILL "$IDLEVM_PID" 2>/dev/null || true
	wait "$IDLEVM_PID"
}
cleanup() {
	trap - EXIT INT TERM
	set +e
	[ -n "$IDLEVM_PID" ] && stop_idlevm >/dev/null 2>&1
	ivm_domain_destroy "$DOMAIN"
	rm -rf "$RUNDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "web01_latency: $(uptime | sed 's/^ *//'); $(pgrep -c qemu-system || true) QEMU processes before ours"
# Where this host is itself a guest, how long its idle CPUs poll before they
# halt decides how fast a woken vCPU thread runs: with cpuidle-haltpoll's
# guest_halt_poll_ns at 0 the service's p50 here was 28 ms detached, at
# 200000 (the kernel's default) 12 ms, and anything that keeps host CPUs
# busy (a profiler included) then looks like a speed-up.  Say which.
hp=/sys/module/haltpoll/parameters/guest_halt_poll_ns
[ -r "$hp" ] && echo "web01_latency: host cpuidle $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo '?'), guest_halt_poll_ns $(cat "$hp")"
ivm_libvirt_ensure
qemu-img create -q -f qcow2 -b "$IVM_WEB01_DISK" -F qcow2 "$RUNDIR/web01.qcow2"
# trace_event: the guest's sched_switch, counted below, is enabled at boot
# and never switched: enabling a tracepoint in a running kernel patches its
# code (text_poke_bp), which has hung TCG guests (tests/e2e/run says how);
# a filter and the ring buffer's on/off patch nothing.
images/make-domain-xml --guest web01 --name "$DOMAIN" --disk "$RUNDIR/web01.qcow2" \
	--vcpus 2 --memory 1024 --run-dir "$RUNDIR" --test-shell \
	--cmdline-extra "trace_event=sched:sched_switch" \
	>"$RUNDIR/domain.xml"
HELPER_SIZE=0
if [ -n "${IVM_BENCH_HELPER:-}" ]; then
	HELPER_SIZE=$(stat -c %s "$IVM_BENCH_HELPER")
	cp "$IVM_BENCH_HELPER" "$RUNDIR/helper.img"
	truncate -s %512 "$RUNDIR/helper.img"
	disk="    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$RUNDIR/helper.img'/><target dev='vdb' bus='virtio'/><readonly/></disk>"
	DISK=$disk awk '$0 ~ /<\/devices>/ { print ENVIRON["DISK"] } { print }' \
		"$RUNDIR/domain.xml" >"$RUNDIR/domain.xml.new"
	mv "$RUNDIR/domain.xml.new" "$RUNDIR/domain.xml"
fi
: >"$RUNDIR/console.log"
ivm_virsh create "$RUNDIR/domain.xml" >/dev/null || ivm_die "virsh create failed"
ready=$(ivm_wait_ready "$RUNDIR/console.log" "${IVM_BOOT_TIMEOUT:-600}" \
	"$(ivm_domain_qemu_pid "$DOMAIN")") || {
	tail -n 30 "$RUNDIR/console.log" | tr -d '\r' >&2
	ivm_die "web01 did not come up"
}
# A boot starved of CPU can leave a service failed: no figures from that.
case $ready in
*" 200 "*) ;;
*) ivm_die "web01 came up without its service: $ready" ;;
esac

export IVM_DOMAIN=$DOMAIN IVM_RUNDIR=$RUNDIR IVM_BUILD
export IVM_CONSOLE_LOG=$RUNDIR/console.log IVM_SHELL_SOCK=$RUNDIR/shell.sock
. tests/e2e/lib.sh
GUEST_SH_TIMEOUT=60 guest_sh true >/dev/null || ivm_die "the guest's test shell does not answer"

if [ "$HELPER_SIZE" -gt 0 ]; then
	GUEST_SH_TIMEOUT=120 guest_sh "systemctl stop idlevm-helper &&
		head -c $HELPER_SIZE /dev/vdb >/usr/sbin/idlevm-helper.new &&
		chmod 755 /usr/sbin/idlevm-helper.new &&
		mv /usr/sbin/idlevm-helper.new /usr/sbin/idlevm-helper &&
		systemctl start idlevm-helper" >/dev/null ||
		ivm_die "could not install $IVM_BENCH_HELPER in the guest"
	echo "web01_latency: guest helper replaced by $IVM_BENCH_HELPER"
fi
"$IDLEVM" helper --domain "$DOMAIN" hello >/dev/null 2>&1 ||
	ivm_die "the guest's helper does not answer"

# The load generator: ours, not the service's.  The boot-enabled
# sched_switch event, filtered to the helper's threads and migration/N,
# counts their switches.
GUEST_SH_TIMEOUT=60 guest_sh '
systemctl stop web01-load.service
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T
echo 0 >$T/tracing_on
echo "prev_comm == \"idlevm-helper\" || next_comm == \"idlevm-helper\" || prev_comm ~ \"migration/*\" || next_comm ~ \"migration/*\"" \
	>$T/events/sched/sched_switch/filter
grep -qx "sched:sched_switch" $T/set_event
' >/dev/null ||
	ivm_die "cannot set up the guest (load generator, boot-enabled sched_switch)"

# round SECONDS: one wrk round in the guest with its trace buffer on;
# prints wrk's web01-round line and "ctxt= helper_sw= migration_sw=".
ROUND_CMD='. /etc/default/web01-load
export WEB01_THINK_MS WEB01_ORDER_PCT
T=/sys/kernel/tracing
: >$T/trace; echo 1 >$T/tracing_on
c0=$(awk "/^ctxt/ { print \$2 }" /proc/stat)
wrk -t 1 -c "$WEB01_CONNECTIONS" -d @SECONDS@s -s /etc/web01/paced.lua \
	http://127.0.0.1:80/app.php 2>&1 | grep "^web01-round "
c1=$(awk "/^ctxt/ { print \$2 }" /proc/stat)
echo 0 >$T/tracing_on
h=$(grep -v "^#" $T/trace | grep -c "idlevm-helper")
m=$(grep -v "^#" $T/trace | grep -c "migration/")
o=$(cat $T/per_cpu/cpu*/stats | awk "/^overrun/ { s += \$2 } END { print s + 0 }")
echo "ctxt=$((c1 - c0)) helper_sw=$h migration_sw=$m overrun=$o"'

# field NAME LINE: the value of NAME=... in LINE.
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }

# A configuration "@PATH" or "@PATH,OPTIONS..." runs the idlevm at PATH
# (another build, to compare two versions in the same interleaved rounds).
prog_of() {
	case $1 in
	@*) echo "${1%%,*}" | cut -c2- ;;
	*) echo "$IDLEVM" ;;
	esac
}

args_of() {
	case $1 in
	@*,*) echo "${1#*,}" | tr ',' ' ' ;;
	@*) echo "" ;;
	default) echo "" ;;
	optimistic) echo "--capture optimistic" ;;
	pin) echo "--capture pin" ;;
	pin-always) echo "--capture pin --pin-policy always" ;;
	stop) echo "--capture stop" ;;
	-*) echo "$1" | tr ',' ' ' ;;	# free-form: options joined by commas
	*) ivm_die "unknown configuration '$1'" ;;
	esac
}

RES=$RUNDIR/results	# config round p50 p99 rps helper_sw migration_sw ctxt cpu
: >"$RES"
n_round=0
# run_round CONFIG: one round, detached or attached with CONFIG.
run_round() {
	local config=$1 out line prof=$RUNDIR/round.prof t0=0 t1=0 s0 s1 cpu=- i
	local log=$RUNDIR/idlevm.out
	n_round=$((n_round + 1))
	if [ "$config" != detached ]; then
		# Not the last round's output: the redirection below happens
		# in the background job, after the loop may have looked.
		rm -f "$log"
		# shellcheck disable=SC2046
		# -D: a bound should the bench die without stopping it.
		"$(prog_of "$config")" profile --domain "$DOMAIN" -o "$prof" --no-report \
			-D $((SECONDS_PER * 10 + 600)) \
			$(args_of "$config") ${IDLEVM_ARGS:-} >"$log" 2>&1 &
		IDLEVM_PID=$!
		# Attaching takes seconds on a busy host (a few minutes at worst).
		for i in $(seq 1 1800); do
			grep -qs '^idlevm: profiling' "$log" && break
			# Gone, or a zombie (kill -0 still succeeds on one).
			awk '{ exit $3 == "Z" }' "/proc/$IDLEVM_PID/stat" \
				2>/dev/null || break
			sleep 0.1
		done
		grep -qs '^idlevm: profiling' "$log" || {
			echo "web01_latency: idlevm's output:" >&2
			cat "$log" >&2
			ivm_die "idlevm did not attach ($config)"
		}
		sleep 1	# setup after the line: modules, first flush
		t0=$(awk '{ print $14 + $15 }' "/proc/$IDLEVM_PID/stat")
	fi
	s0=$(date +%s.%N)
	out=$(guest_sh "${ROUND_CMD//@SECONDS@/$SECONDS_PER}" $((SECONDS_PER + 90))) ||
		ivm_die "round $n_round ($config) failed in the guest: $out"
	s1=$(date +%s.%N)
	if [ -n "$IDLEVM_PID" ]; then
		t1=$(awk '{ print $14 + $15 }' "/proc/$IDLEVM_PID/stat")
		stop_idlevm || { cat "$log" >&2; ivm_die "idlevm failed ($config)"; }
		IDLEVM_PID=""
		cpu=$(awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v h="$TCK" \
			'BEGIN { printf "%.1f", (b - a) / h / (e - s) * 100 }')
	fi
	line=$(echo "$out" | grep '^web01-round ') || ivm_die "no wrk result: $out"
	local ctr=$(echo "$out" | grep '^ctxt=')
	local p50=$(field p50_us "$line") p99=$(field p99_us "$line")
	local rps=$(field rps "$line") errors=$(field errors "$line")
	local hsw=$(field helper_sw "$ctr") msw=$(field migration_sw "$ctr")
	local ctxt=$(field ctxt "$ctr") overrun=$(field overrun "$ctr")
	printf 'round %2d %-12s p50 %6s us  p99 %7s us  %6s req/s  errors %s  switches %s: helper %s (%.2f%%), migration %s%s  idlevm %s%% CPU\n' \
		"$n_round" "$config" "$p50" "$p99" "$rps" "$errors" "$ctxt" "$hsw" \
		"$(awk -v h="$hsw" -v c="$ctxt" 'BEGIN { print c ? h * 100 / c : 0 }')" \
		"$msw" "$([ "$overrun" = 0 ] || echo " (trace overrun $overrun!)")" "$cpu"
	if [ "$config" != detached ]; then
		sed -n 's/^idlevm: \(stopped\|pin\|helper\)/    &/p' "$log"
	fi
	[ "${WARMUP:-0}" = 1 ] ||
		echo "$config $n_round $p50 $p99 $rps $hsw $msw $ctxt $cpu" >>"$RES"
	rm -f "$prof"
}

echo "web01_latency: $CYCLES cycles of ${SECONDS_PER} s rounds; configurations: $CONFIGS"
WARMUP=1 run_round detached >/dev/null	# warm-up: caches, php opcache, Redis
for c in $(seq 1 "$CYCLES"); do
	for config in $CONFIGS; do
		run_round detached
		run_round "$config"
	done
done
run_round detached

# Summary.  For each attached round, its ratio to the mean of the detached
# rounds just before and after it.
echo
echo "web01_latency: $(uptime | sed 's/^ *//'); $(pgrep -c qemu-system || true) QEMU processes at the end"
awk '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
		t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
	}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# "median (min-max)" of a[1..n], each value times scale, in format f.
function summary(a, n, f, scale,    i, lo, hi, m) {
	lo = hi = a[1]
	for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
	m = median(a, n)
	return sprintf(f " (" f "-" f ")", m * scale, lo * scale, hi * scale)
}
{ cfg[NR] = $1; p50[NR] = $3; p99[NR] = $4; rps[NR] = $5
  hsw[NR] = $6; msw[NR] = $7; ctxt[NR] = $8; cpu[NR] = $9 }
END {
	for (i = 1; i <= NR; i++) {
		c = cfg[i]
		if (!(c in seen)) { seen[c] = 1; order[++nc] = c }
		k = ++cnt[c]
		v50[c, k] = p50[i]; v99[c, k] = p99[i]; vr[c, k] = rps[i]
		sh[c, k] = ctxt[i] ? hsw[i] * 100 / ctxt[i] : 0
		ms[c, k] = ctxt[i] ? msw[i] * 100 / ctxt[i] : 0
		cp[c, k] = cpu[i]
		if (c != "detached" && i > 1 && i < NR) {
			r50[c, k] = p50[i] * 2 / (p50[i - 1] + p50[i + 1])
			r99[c, k] = p99[i] * 2 / (p99[i - 1] + p99[i + 1])
			rr[c, k] = rps[i] * 2 / (rps[i - 1] + rps[i + 1])
		}
	}
	printf "per configuration, median (min-max) over its rounds; ratios to the mean of the detached rounds on either side\n"
	for (o = 1; o <= nc; o++) {
		c = order[o]; n = cnt[c]
		for (k = 1; k <= n; k++) { a[k] = v50[c, k]; b[k] = v99[c, k]; d[k] = vr[c, k] }
		printf "%-12s %2d rounds: p50 %s ms, p99 %s ms, %s req/s\n", c, n,
			summary(a, n, "%.1f", 0.001), summary(b, n, "%.1f", 0.001),
			summary(d, n, "%.1f", 1)
		for (k = 1; k <= n; k++) { a[k] = sh[c, k]; b[k] = ms[c, k]; d[k] = cp[c, k] }
		printf "%-12s            helper %s%% of the guest'"'"'s switches, migration threads %s%%", "",
			summary(a, n, "%.2f", 1), summary(b, n, "%.2f", 1)
		if (c == "detached") { printf "\n"; continue }
		printf ", idlevm %s%% of a host CPU\n", summary(d, n, "%.1f", 1)
		for (k = 1; k <= n; k++) { a[k] = r50[c, k]; b[k] = r99[c, k]; d[k] = rr[c, k] }
		printf "%-12s            attached/detached: p50 %s, p99 %s, req/s %s\n", "",
			summary(a, n, "%.3f", 1), summary(b, n, "%.3f", 1),
			summary(d, n, "%.3f", 1)
	}
}' "$RES"
