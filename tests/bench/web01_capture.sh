#!/bin/bash
# Whole captures of the web01 guest's server processes (nginx, php-fpm,
# redis: dynamically linked, no frame pointers, no host copies) with
# bench_capture: per process, the first capture of each process (its
# objects' headers and CFI read from guest memory) and warm captures, the
# memory of the per-build-id caches, and the CFI rows the guest held.
#
#   BUILD=build tests/bench/web01_capture.sh [ROUNDS]
#
# Boots the cached web01 image (make web01) as a transient libvirt domain
# under its own paced load and destroys it at the end.  The machine is
# shared: record `uptime` (printed) with the figures.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
ROUNDS=${1:-50}
IVM_PROG=web01_capture
. images/lib.sh
IVM_BUILD=$(cd "$BUILD" && pwd)
BENCH=$IVM_BUILD/bench/bench_capture
[ -x "$BENCH" ] || ivm_die "$BENCH missing: run 'make bench'"
ivm_web01_env

RUNDIR=$(ivm_rundir_create idlevm-bench-web01)
DOMAIN=idlevm-bench-web01-$$-$RANDOM
cleanup() {
	trap - EXIT INT TERM
	set +e
	ivm_domain_destroy "$DOMAIN"
	rm -rf "$RUNDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "web01_capture: $(uptime | sed 's/^ *//')"
ivm_libvirt_ensure
qemu-img create -q -f qcow2 -b "$IVM_WEB01_DISK" -F qcow2 "$RUNDIR/web01.qcow2"
images/make-domain-xml --guest web01 --name "$DOMAIN" --disk "$RUNDIR/web01.qcow2" \
	--vcpus 2 --memory 1024 --run-dir "$RUNDIR" \
	--cmdline-extra no_timer_check >"$RUNDIR/domain.xml"
: >"$RUNDIR/console.log"
ivm_virsh create "$RUNDIR/domain.xml" >/dev/null || ivm_die "virsh create failed"
ready=$(ivm_wait_ready "$RUNDIR/console.log" "${IVM_BOOT_TIMEOUT:-600}" \
	"$(ivm_domain_qemu_pid "$DOMAIN")") || ivm_die "web01 did not come up"
case $ready in
*" 200 "*) ;;
*) ivm_die "web01 came up without its service: $ready" ;;
esac
# A few rounds of load first: every server process has run and blocked.
sleep 15
for comm in nginx php-fpm redis-server; do
	echo "== $comm"
	"$BENCH" --domain "$DOMAIN" --comm "$comm" --rounds "$ROUNDS" 2>&1 ||
		echo "web01_capture: bench_capture failed for $comm"
done
