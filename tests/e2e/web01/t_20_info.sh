# idlevm info reads the Debian guest's kernel from outside: release, vCPUs,
# KASLR offset as the guest's own kallsyms give it.
out=$("$idlevm" info --domain "$IVM_DOMAIN" 2>&1) || fail "idlevm info failed: $out"
echo "$out"
assert_eq "$(echo "$out" | sed -n 's/^kernel: *//p')" "$IVM_KVER" "kernel release"
assert_eq "$(echo "$out" | sed -n 's/^vcpus: *//p')" "$IVM_VCPUS" "vcpus"
text=$(guest_sh "awk '\$3 == \"_text\" {print \$1; exit}' /proc/kallsyms")
link=$(awk '$3 == "_text" {print $1; exit}' "$IVM_SYSTEM_MAP")
want=$(printf '0x%x' $((0x$text - 0x$link)))
assert_eq "$(echo "$out" | sed -n 's/^kaslr offset: *//p')" "$want" "KASLR offset"
n=$(echo "$out" | awk '/^VCPU/ {t = 1; next} t && NF >= 6' | wc -l)
assert_eq "$n" "$IVM_VCPUS" "vCPU lines"
