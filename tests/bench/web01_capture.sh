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
. tests/bench/lib_guests.sh
IVM_BUILD=$(cd "$BUILD" && pwd)
BENCH=$IVM_BUILD/bench/bench_capture
[ -x "$BENCH" ] || ivm_die "$BENCH missing: run 'make bench'"
ivm_web01_env

DOMAIN=idlevm-bench-web01-$$-$RANDOM
trap 'bench_guests_destroy' EXIT
trap 'exit 130' INT TERM

echo "web01_capture: $(uptime | sed 's/^ *//')"
ivm_libvirt_ensure
bench_web01_boot "$DOMAIN"
# A few rounds of load first: every server process has run and blocked.
sleep 15
for comm in nginx php-fpm redis-server; do
	echo "== $comm"
	"$BENCH" --domain "$DOMAIN" --comm "$comm" --rounds "$ROUNDS" 2>&1 ||
		echo "web01_capture: bench_capture failed for $comm"
done
