# Shared bash functions of the idlevm guest launchers (images/demo,
# images/run-guest, tests/e2e/run).  Source it; it defines functions and
# IVM_IMAGES, and runs nothing.
#
# Functions print diagnostics to stderr prefixed with $IVM_PROG.

IVM_IMAGES=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IVM_PROG=${IVM_PROG:-idlevm}
IVM_VIRSH=${IVM_VIRSH:-virsh -q -c qemu:///system}
# Set to 1 by ivm_libvirt_ensure when it started the daemons itself.
IVM_STARTED_LIBVIRTD=0

ivm_log() { echo "$IVM_PROG: $*" >&2; }
ivm_die() { echo "$IVM_PROG: $*" >&2; exit 1; }

# ivm_accel: "kvm" when the CPU has hardware virtualization (vmx or svm in
# /proc/cpuinfo) and /dev/kvm opens read-write, else "tcg".  A /dev/kvm
# without vmx/svm is a paravirtual KVM that cannot run a stock kernel at
# usable speed.
ivm_accel() {
	if [ -n "${IVM_ACCEL:-}" ]; then
		echo "$IVM_ACCEL"
		return
	fi
	if grep -qwE 'vmx|svm' /proc/cpuinfo 2>/dev/null &&
	   { exec 3<>/dev/kvm; } 2>/dev/null; then
		exec 3>&-
		echo kvm
	else
		echo tcg
	fi
}

# ivm_image_env [FILE]: source the image.env written by images/build-image
# (default $IVM_IMAGE_ENV, else $BUILD/guest/image.env: another kernel's is
# $BUILD/guest-SUITE/image.env) and check the files it names.
ivm_image_env() {
	local env=${1:-${IVM_IMAGE_ENV:-${BUILD:-build}/guest/image.env}}
	[ -f "$env" ] || ivm_die "$env missing: run 'make image' first"
	# shellcheck disable=SC1090
	. "$env"
	local f
	for f in "$IVM_KERNEL" "$IVM_INITRD"; do
		[ -f "$f" ] || ivm_die "$f missing: run 'make image' again"
	done
	export IVM_KVER IVM_KERNEL IVM_INITRD IVM_VMLINUX IVM_SYSTEM_MAP
}

# ivm_web01_env [FILE]: source the web01.env written by images/build-web01
# (default $BUILD/guest/web01.env) and check the files it names.
ivm_web01_env() {
	local env=${1:-${BUILD:-build}/guest/web01.env}
	[ -f "$env" ] || ivm_die "$env missing: run 'make web01' first"
	# shellcheck disable=SC1090
	. "$env"
	local f
	for f in "$IVM_WEB01_DISK" "$IVM_WEB01_KERNEL" "$IVM_WEB01_INITRD"; do
		[ -f "$f" ] || ivm_die "$f missing: run 'make web01' again"
	done
	export IVM_WEB01_DISK IVM_WEB01_KERNEL IVM_WEB01_INITRD IVM_WEB01_KVER
	# The debug files of the packages the image build rebuilt (older
	# images: none).
	export IVM_WEB01_DEBUG=${IVM_WEB01_DEBUG:-}
}

# ivm_virsh ARGS...: virsh on qemu:///system, bounded in time so that a
# wedged libvirtd cannot hang a test run ($IVM_VIRSH_TIMEOUT, default 240 s:
# libvirt 9.0 re-probes QEMU's capabilities, 5 to 20 s on two busy cores,
# on every domain start when /dev/kvm is there but not usable by its QEMU
# user, as on these machines).
ivm_virsh() {
	# shellcheck disable=SC2086
	timeout "${IVM_VIRSH_TIMEOUT:-240}" $IVM_VIRSH "$@"
}

# ivm_kvm_node_fix: give /dev/kvm the owner and mode udev gives it on
# Debian (group kvm, 0660) when it is still root-only, as on these machines
# without udev.  Otherwise libvirt 9.0 sees KVM when it probes QEMU (as
# root) but not when it checks its cache (as its QEMU user), declares the
# cache stale and re-probes QEMU over and over on every domain start: 57 s
# per `virsh create` measured here instead of under 1 s.  The guests still
# run under TCG unless the CPU has vmx/svm (ivm_accel).  IVM_KVM_FIX=0
# leaves /dev/kvm alone.
ivm_kvm_node_fix() {
	[ "${IVM_KVM_FIX:-1}" = 1 ] || return 0
	[ -c /dev/kvm ] && [ "$(id -u)" = 0 ] || return 0
	getent group kvm >/dev/null || return 0
	[ "$(stat -c '%G %a' /dev/kvm)" = "root 600" ] || return 0
	ivm_log "giving /dev/kvm group kvm, mode 0660, as udev would (IVM_KVM_FIX=0 to skip)"
	chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
}

# ivm_libvirt_ensure: make qemu:///system answer, starting virtlogd and
# libvirtd (daemonized) when they are not running.  There is no systemd on
# these machines.  Daemons started here are left running: they are what a
# libvirt user expects, and a later run reuses them.
# ivm_daemon CMD...: run a daemon that outlives us with only stdin, stdout
# and stderr open.  Whatever else we hold would be held for as long as the
# daemon runs: a `flock LOCK tests/e2e/run` that started libvirtd once
# left the lock held by libvirtd and virtlogd, and every later flock on it
# waited forever.
ivm_daemon() {
	(
		for fd in /proc/self/fd/*; do
			fd=${fd##*/}
			[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
		done 2>/dev/null
		exec "$@"
	)
}

ivm_libvirt_ensure() {
	ivm_kvm_node_fix
	if timeout 5 $IVM_VIRSH version >/dev/null 2>&1; then
		return 0
	fi
	command -v libvirtd >/dev/null ||
		ivm_die "libvirtd not installed (make deps)"
	if ! pgrep -x virtlogd >/dev/null; then
		ivm_log "starting virtlogd"
		ivm_daemon virtlogd -d || ivm_die "virtlogd -d failed"
	fi
	if ! pgrep -x libvirtd >/dev/null; then
		ivm_log "starting libvirtd"
		ivm_daemon libvirtd -d || ivm_die "libvirtd -d failed"
		IVM_STARTED_LIBVIRTD=1
	fi
	local i
	for i in $(seq 1 50); do
		if timeout 5 $IVM_VIRSH version >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	ivm_die "libvirtd does not answer on qemu:///system"
}

# ivm_qemu_group: the group libvirt runs QEMU as (qemu.conf, else Debian's
# default libvirt-qemu, else root).
ivm_qemu_group() {
	local g
	g=$(sed -n 's/^[[:space:]]*group[[:space:]]*=[[:space:]]*"\(.*\)".*/\1/p' \
		/etc/libvirt/qemu.conf 2>/dev/null | tail -n 1)
	case $g in
	+*) getent group "${g#+}" | cut -d: -f1 ;;
	?*) echo "$g" ;;
	*)
		if getent group libvirt-qemu >/dev/null; then
			echo libvirt-qemu
		else
			echo root
		fi
		;;
	esac
}

# ivm_rundir_create PREFIX [PARENT]: a new private run directory in PARENT
# (default /tmp; itself reachable by QEMU) that libvirt's QEMU (which may
# run as another user) can create sockets in.  Prints its path.
ivm_rundir_create() {
	local dir group
	dir=$(mktemp -d "${2:-/tmp}/$1.XXXXXX") || ivm_die "mktemp failed"
	group=$(ivm_qemu_group)
	chgrp "$group" "$dir" 2>/dev/null && chmod 0770 "$dir" ||
		chmod 0755 "$dir"
	echo "$dir"
}

# ivm_shared_memory_opt: make-domain-xml's --shared-memory when
# IVM_SHARED_MEMORY is 1, else nothing.
ivm_shared_memory_opt() {
	[ "${IVM_SHARED_MEMORY:-0}" != 1 ] || echo --shared-memory
}

# ivm_domain_create NAME WORKLOAD RUNDIR VCPUS MEMORY_MIB: write
# RUNDIR/domain.xml and start it as a transient libvirt domain (gone once
# destroyed).  $IVM_GUEST_CMDLINE_EXTRA, if set, is added to the guest
# kernel's command line (both guests); IVM_SHARED_MEMORY=1 backs guest RAM
# with a shared memfd (make-domain-xml --shared-memory), both guests too.
ivm_domain_create() {
	local name=$1 workload=$2 rundir=$3 vcpus=$4 mem=$5
	"$IVM_IMAGES/make-domain-xml" --name "$name" --workload "$workload" \
		--vcpus "$vcpus" --memory "$mem" --run-dir "$rundir" \
		${IVM_GUEST_CMDLINE_EXTRA:+--cmdline-extra "$IVM_GUEST_CMDLINE_EXTRA"} \
		$(ivm_shared_memory_opt) \
		>"$rundir/domain.xml" || ivm_die "make-domain-xml failed"
	# virtlogd appends to the console file; create it so its group can
	# be read by the caller whatever the umask.
	: >"$rundir/console.log"
	ivm_virsh create "$rundir/domain.xml" >/dev/null ||
		ivm_die "virsh create $name failed"
}

# ivm_web01_create NAME RUNDIR VCPUS MEMORY_MIB [--test-shell]: start the
# web01 guest as a transient libvirt domain on RUNDIR/web01.qcow2, a fresh
# overlay of the cached image (so every boot starts from the same disk and
# the cache is never written), and write RUNDIR/domain.xml.
ivm_web01_create() {
	local name=$1 rundir=$2 vcpus=$3 mem=$4 shell=${5:-}
	ivm_web01_env
	qemu-img create -q -f qcow2 -b "$IVM_WEB01_DISK" -F qcow2 \
		"$rundir/web01.qcow2" || ivm_die "qemu-img create failed"
	"$IVM_IMAGES/make-domain-xml" --guest web01 --name "$name" \
		--disk "$rundir/web01.qcow2" --vcpus "$vcpus" --memory "$mem" \
		--run-dir "$rundir" $shell \
		${IVM_GUEST_CMDLINE_EXTRA:+--cmdline-extra "$IVM_GUEST_CMDLINE_EXTRA"} \
		$(ivm_shared_memory_opt) \
		>"$rundir/domain.xml" ||
		ivm_die "make-domain-xml failed"
	: >"$rundir/console.log"
	ivm_virsh create "$rundir/domain.xml" >/dev/null ||
		ivm_die "virsh create $name failed"
}

# ivm_domain_qemu_pid NAME: the pid of the domain's QEMU, or nothing.
ivm_domain_qemu_pid() {
	local f=/run/libvirt/qemu/$1.pid pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f" 2>/dev/null)
	case $pid in '' | *[!0-9]*) return 0 ;; esac
	[ -d "/proc/$pid" ] && echo "$pid"
	return 0
}

# ivm_wait_ready LOG TIMEOUT_S [QEMU_PID]: wait for the guest's readiness
# marker in its console log.  Prints the marker line; fails on timeout or
# when QEMU_PID dies first.
ivm_wait_ready() {
	local log=$1 timeout=$2 pid=${3:-} start now line
	start=$(date +%s)
	while :; do
		# The marker may share its line with a getty prompt
		# ("web01 login: IDLEVM-READY ..."): take it from anywhere.
		line=$(grep -a -m 1 -o 'IDLEVM-READY .*' "$log" 2>/dev/null | tr -d '\r')
		if [ -n "$line" ]; then
			echo "$line"
			return 0
		fi
		if [ -n "$pid" ] && [ ! -d "/proc/$pid" ]; then
			ivm_log "QEMU (pid $pid) exited before the guest was ready"
			return 1
		fi
		now=$(date +%s)
		if [ $((now - start)) -ge "$timeout" ]; then
			ivm_log "no readiness marker after ${timeout} s"
			return 1
		fi
		sleep 0.2
	done
}

# ivm_domain_destroy NAME: destroy the libvirt domain and make sure its
# QEMU is gone even if libvirt failed (kill by the pid libvirt recorded).
ivm_domain_destroy() {
	local name=$1 pid i
	pid=$(ivm_domain_qemu_pid "$name")
	IVM_VIRSH_TIMEOUT=60 ivm_virsh destroy "$name" >/dev/null 2>&1
	if [ -n "$pid" ]; then
		for i in $(seq 1 25); do
			[ -d "/proc/$pid" ] || break
			sleep 0.2
		done
		# Only if it is still this domain's QEMU (pids get reused).
		if [ -d "/proc/$pid" ] &&
		   tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
		   grep -q -- "-name guest=$name,"; then
			ivm_log "QEMU $pid survived virsh destroy; killing it"
			kill -9 "$pid" 2>/dev/null
		fi
	fi
	return 0
}

# ivm_now_ms: wall clock in milliseconds.
ivm_now_ms() { date +%s%3N; }
