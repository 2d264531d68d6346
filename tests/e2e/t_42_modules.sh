# idlevm modules lists the guest's modules from outside, as the guest does:
# the same names, core addresses and sizes as /proc/modules, every section
# address of /sys/module/NAME/sections, and the build-id of its notes.

out=$("$idlevm" modules --domain "$IVM_DOMAIN" --sections 2>&1) ||
	fail "idlevm modules failed: $out"
echo "$out" | grep -v '^ '

# /proc/modules: name size refs deps state address
guest=$(guest_sh 'cat /proc/modules')
[ -n "$guest" ] || fail "the guest shows no modules"
n=0
while read -r name size _ _ _ addr; do
	[ -n "$name" ] || continue
	n=$((n + 1))
	line=$(echo "$out" | awk -v m="$name" '$1 == m')
	[ -n "$line" ] || fail "module $name missing from idlevm's list"
	read -r _ ibase isize ibuild <<<"$line"
	assert_eq "$((ibase))" "$((addr))" "$name core address"
	assert_eq "$isize" "$size" "$name size"

	# Every section the guest shows, at the same address.
	secs=$(guest_sh "cd /sys/module/$name/sections && for f in .* *; do [ -f \"\$f\" ] && echo \"\$f \$(cat \"\$f\")\"; done")
	nsec=0
	while read -r sec saddr; do
		[ -n "$sec" ] || continue
		nsec=$((nsec + 1))
		got=$(echo "$out" | awk -v m="$name" -v s="$sec" '
			/^[^ ]/ { cur = $1; next }
			cur == m && $1 == s { print $2 }')
		[ -n "$got" ] || fail "$name section $sec missing"
		assert_eq "$((got))" "$((saddr))" "$name section $sec"
	done <<<"$secs"
	[ "$nsec" -gt 3 ] || fail "$name: only $nsec sections in the guest"

	# The build-id: the last 20 bytes of the GNU note.
	want=$(guest_sh "od -An -tx1 -v /sys/module/$name/notes/.note.gnu.build-id | tr -d ' \n' | tail -c 40")
	assert_eq "$ibuild" "$want" "$name build-id"
done <<<"$guest"
nout=$(echo "$out" | grep -c '^[^ ]')
assert_eq "$nout" "$n" "number of modules"
echo "$n modules agree with the guest"

# A profile records the modules, and its report names addresses inside
# them from the modules' debug files (images/build-image caches them next
# to the vmlinux): a few module functions from the guest's /proc/kallsyms.
prof=$IVM_RUNDIR/t42.prof
"$idlevm" profile --domain "$IVM_DOMAIN" -D 1 -o "$prof" --no-report >/dev/null 2>&1 ||
	fail "idlevm profile failed"
funcs=$(guest_sh "grep -E ' [tT] [a-z_0-9]+\\s+\\[(virtio_console|virtio_ring|virtio_pci)\\]' /proc/kallsyms | awk 'NR % 7 == 1' | head -n 8")
[ -n "$funcs" ] || fail "no module functions in the guest's /proc/kallsyms"
args=() want=()
while read -r addr _ name _; do
	args+=(-a "0x$addr")
	want+=("$name")
done <<<"$funcs"
res=$("$idlevm" report "$prof" "${args[@]}" 2>"$IVM_RUNDIR/t42.err") ||
	fail "idlevm report -a failed: $(cat "$IVM_RUNDIR/t42.err")"
echo "$res"
grep -q "malformed" "$IVM_RUNDIR/t42.err" && fail "malformed module records: $(cat "$IVM_RUNDIR/t42.err")"
# One block per address, innermost frame first: the outermost (last line
# of the block) is the function the address is in, at +0x0.
outer=$(echo "$res" | awk '
	/^0x/ { if (a) print a, f; a = $1; f = $2; next }
	/^ / { f = $1 }
	END { if (a) print a, f }')
i=0
while read -r addr func; do
	assert_eq "$func" "${want[$i]}+0x0" "module function at $addr"
	i=$((i + 1))
done <<<"$outer"
[ "$i" = "${#want[@]}" ] || fail "resolved $i of ${#want[@]} addresses"
echo "$i module addresses named as the guest names them"
