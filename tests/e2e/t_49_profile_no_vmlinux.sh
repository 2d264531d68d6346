# A profile of a guest whose vmlinux the host does not have: idlevm reads
# kallsyms, BTF and ORC from guest memory, and the profile carries the
# kernel symbols its samples hit, so the report names kernel frames with
# no debuginfo anywhere; the lockstorm blocking paths come out as with a
# vmlinux.  The module list is recorded too.
case $IVM_WORKLOAD in
lockstorm*) ;;
*) echo "skip: needs lockstorm, guest runs $IVM_WORKLOAD"; exit 0 ;;
esac
. tests/e2e/lib_profile.sh

prof=$IVM_RUNDIR/t49.prof
# A loaded host leaves the guest few idle periods in a short run: a run
# with too few to judge is done again, twice as long, twice at most.
duration=${IVM_PROFILE_SECONDS:-8}
for try in 1 2 3; do
	guest_paths_start || fail "cannot count the guest's switches to idle"
	out=$(IDLEVM_DEBUG_DIRS=/nonexistent "$idlevm" profile --domain "$IVM_DOMAIN" \
		-D "$duration" -o "$prof" --no-report 2>&1) ||
		fail "idlevm profile without a vmlinux failed: $out"
	paths=$(guest_paths_stop) || fail "cannot read the guest's switches to idle"
	echo "$out"
	echo "$out" | grep -q "using the guest's kallsyms, BTF and ORC" ||
		fail "no word that the guest's own symbols are used"

	text=$(IDLEVM_DEBUG_DIRS=/nonexistent "$idlevm" report "$prof" 2>&1) ||
		fail "idlevm report failed: $text"
	echo "$text" | head -n 30
	echo "$text" | grep -q "kernel symbols: the profile's own" ||
		fail "the report did not use the symbols the profile carries"
	n=$(echo "$text" | sed -n 's/^  kernel symbols carried: \([0-9]*\).*/\1/p')
	[ "${n:-0}" -ge 5 ] || fail "only ${n:-0} kernel symbols carried"
	echo "$text" | grep -q "^  modules: [1-9]" || fail "no module list recorded"

	folded=$(IDLEVM_DEBUG_DIRS=/nonexistent "$idlevm" report -f folded -K to_idle "$prof" 2>/dev/null) ||
		fail "idlevm report -f folded failed"
	check_lockstorm_paths "$folded" "no vmlinux" "$paths" "$out"
	case $? in
	0) judged=1; break ;;
	2) echo "too few to judge in $duration s: once more, twice as long"
	   duration=$((duration * 2)) ;;
	*) fail "lockstorm paths without a vmlinux" ;;
	esac
done
[ "$try" -le 3 ] && [ -n "${judged:-}" ] ||
	fail "too few samples to judge the lockstorm paths, in runs up to $((duration / 2)) s"

# The kernel's identity from its own memory: the build-id of the vmlinux
# it was built as (for a symbol server that has it), and its text.
k_id=$(readelf -n "$IVM_VMLINUX" | awk '/Build ID/ { print $3 }')
[ -n "$k_id" ] || fail "no build-id in $IVM_VMLINUX"
echo "$text" | grep -qx "  kernel_build_id: $k_id" ||
	fail "kernel_build_id is not the vmlinux's $k_id: $(echo "$text" | grep kernel_build_id)"
echo "$text" | grep -Eq '^  kernel_text: 0xffffffff[0-9a-f]+ 0xffffffff[0-9a-f]+$' ||
	fail "no kernel_text"
echo "kernel build-id from guest memory: $k_id (the vmlinux's)"
