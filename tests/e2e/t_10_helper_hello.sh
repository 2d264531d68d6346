# The host tool reaches the in-guest helper through the libvirt channel and
# the helper describes the guest truthfully.

out=$("$idlevm" helper --domain "$IVM_DOMAIN" hello 2>&1) ||
	fail "idlevm helper --domain $IVM_DOMAIN hello failed: $out"
echo "$out"

release=$(echo "$out" | sed -n 's/^ *kernel: *//p' | head -n 1)
cpus=$(echo "$out" | sed -n 's/^ *cpus: *//p' | head -n 1)
assert_eq "$release" "$(guest_sh 'uname -r')" "helper's kernel release"
assert_eq "$cpus" "$(guest_sh nproc)" "helper's cpu count"

# A domain that does not exist: a failure that names it.
if out=$("$idlevm" helper --domain no-such-domain-xyz hello 2>&1); then
	fail "hello on a missing domain succeeded: $out"
fi
case $out in
*no-such-domain-xyz*) ;;
*) fail "the error does not name the domain: $out" ;;
esac
