# e2e-timeout: 420
# The whole tool over hostile guest memory: a core of the running guest,
# then tests/tools/core-mutate changes, one at a time, words that info, ps,
# maps and stack read from it (pointers, counts, strings) and runs the
# commands that read them under the ASan + UBSan build.  Crashes, hangs
# (2 s), memory blow-ups (512 MB), errors without a message and control
# bytes in the output fail it; different output and clean errors are what
# hostile memory may cause.
#   IVM_MUTATE_COUNT  mutations (default 300; make mutate-long: thousands)
#   IVM_MUTATE_SEED   seed (default: a random one, printed)
#   IVM_MUTATE_KEEP   a directory to keep the core and the work files in,
#                     to replay a failure (default: removed, even on failure)
. tests/e2e/lib_tasks.sh

asan=build-asan/idlevm
mutate=$IVM_BUILD/tests/core-mutate
if [ ! -x "$asan" ]; then
	echo "no $asan (make asan): the mutations run under ASan + UBSan"
	exit 77
fi
[ -x "$mutate" ] || fail "no $mutate (make $IVM_BUILD/tests/core-mutate)"

count=${IVM_MUTATE_COUNT:-300}
seed=${IVM_MUTATE_SEED:-$RANDOM$RANDOM}
if [ -n "${IVM_MUTATE_KEEP:-}" ]; then
	work=$IVM_MUTATE_KEEP
	mkdir -p "$work" || fail "cannot create $work"
else
	work=$(mktemp -d "$IVM_RUNDIR/mutate.XXXXXX") || fail "mktemp failed"
	trap 'rm -rf "$work"' EXIT
fi
core=$work/guest.core

virsh -q -c qemu:///system dump --memory-only --format elf "$IVM_DOMAIN" "$core" >/dev/null ||
	fail "virsh dump failed"
pid=$(idlevm_tasks --core "$core" --vmlinux "$IVM_VMLINUX" |
	awk -v w="$IVM_WORKLOAD" '$3 == w { print $1; exit }')
[ -n "$pid" ] || pid=1
echo "core of $IVM_DOMAIN, $(($(stat -c %s "$core") >> 20)) MiB; maps and stack of pid $pid; seed $seed"

"$mutate" --idlevm "$asan" --core "$core" --vmlinux "$IVM_VMLINUX" \
	--pid "$pid" --workdir "$work" --seed "$seed" --count "$count"
rc=$?
[ "$rc" = 0 ] || fail "core-mutate found failures (seed $seed, exit $rc)${IVM_MUTATE_KEEP:+; core and patch kept in $work}"
