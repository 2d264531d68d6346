# Demo guests for the benchmarks that profile several at once, as
# transient libvirt domains.  Source after images/lib.sh (ivm_image_env and
# ivm_libvirt_ensure done), and put bench_guests_destroy in the EXIT trap:
# it destroys every guest bench_guests_boot began, booted or not, and
# removes their run directories.

BENCH_GUESTS=()
BENCH_RUNDIRS=()

# bench_guests_boot PREFIX VCPUS MEMORY_MIB SUFFIX...: one lockstorm guest
# PREFIX-SUFFIX per SUFFIX, all created before any is waited for (they
# boot side by side); dies when one does not boot within 300 s.
bench_guests_boot() {
	local prefix=$1 vcpus=$2 mem=$3 k d i
	shift 3
	for k; do
		d=$(ivm_rundir_create idlevm-bench)
		BENCH_RUNDIRS+=("$d")
		BENCH_GUESTS+=("$prefix-$k")
		ivm_domain_create "$prefix-$k" lockstorm "$d" "$vcpus" "$mem"
	done
	for ((i = 0; i < ${#BENCH_GUESTS[@]}; i++)); do
		ivm_wait_ready "${BENCH_RUNDIRS[$i]}/console.log" 300 \
			"$(ivm_domain_qemu_pid "${BENCH_GUESTS[$i]}")" >/dev/null ||
			ivm_die "guest ${BENCH_GUESTS[$i]} did not boot"
	done
}

# bench_guests_destroy: every guest begun, and its run directory.
bench_guests_destroy() {
	local k
	for k in "${BENCH_GUESTS[@]}"; do
		ivm_domain_destroy "$k"
	done
	for k in "${BENCH_RUNDIRS[@]}"; do
		rm -rf "$k"
	done
	return 0
}

# bench_web01_boot NAME: the cached web01 image (make web01: ivm_web01_env
# done) as transient domain NAME on a copy-on-write disk, under its own
# paced load; dies when it does not come up with its service within
# IVM_BOOT_TIMEOUT (600 s).  bench_guests_destroy removes it too.
# IVM_SHARED_MEMORY=1 backs both kinds of guest with a shared memfd
# (ivm_domain_create, ivm_web01_create).
bench_web01_boot() {
	local name=$1 d ready
	d=$(ivm_rundir_create idlevm-bench)
	BENCH_RUNDIRS+=("$d")
	BENCH_GUESTS+=("$name")
	ivm_web01_create "$name" "$d" 2 1024
	ready=$(ivm_wait_ready "$d/console.log" "${IVM_BOOT_TIMEOUT:-600}" \
		"$(ivm_domain_qemu_pid "$name")") || ivm_die "$name did not come up"
	case $ready in
	*" 200 "*) ;;
	*) ivm_die "$name came up without its service: $ready" ;;
	esac
}
