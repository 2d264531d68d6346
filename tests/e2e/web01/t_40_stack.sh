# idlevm stack reads every server process's threads from outside: kernel
# frames fully named through the syscall entry, user frames named from
# guest memory alone (the guest's .dynsym, else FILE+0xADDR), never '?'.
. tests/e2e/web01/lib_web01.sh

pids=$(web01_server_pids)
[ -n "$pids" ] || fail "no server processes in the guest"
echo "server processes:"; echo "$pids"
total_user=0 raw_user=0 bad=0
while read -r pid comm; do
	good=0
	# A worker busy with a request has no saved frame to read: try again.
	for try in 1 2 3 4 5; do
		out=$("$idlevm" stack --domain "$IVM_DOMAIN" --pid "$pid" 2>&1) || {
			echo "stack --pid $pid ($comm), try $try: $out"
			# php-fpm recycles its workers: one may be gone.
			case $out in *"no guest process"*) good=1; break ;; esac
			continue
		}
		# Per thread: its kernel frames must all be named, and a
		# blocked one must have entered through a syscall.
		verdict=$(echo "$out" | awk '
		/^tid / { if (tid != "") check(); tid = $2; state = $0; k = 0; rawk = 0; sys = 0; next }
		/^  #/ {
			if ($NF == "[k]") {
				k++
				if ($3 == "?") rawk++
				# A blocked thread came in through a syscall; a
				# preempted one (runnable, not running) through
				# the interrupt or exception that preempted it.
				if ($3 ~ /^(entry_SYSCALL_64|asm_sysvec_|asm_exc_|asm_common_interrupt)/) sys = 1
			}
			next }
		function check() {
			if (k == 0) return
			if (rawk) { print "raw kernel frame in tid " tid; bad = 1 }
			if (state ~ /not running/ && !sys) { print "tid " tid " not running, and its stack does not reach a kernel entry: " state; bad = 1 }
			ok++
		}
		END { if (tid != "") check(); print (bad ? "BAD" : "OK"), ok + 0 }')
		case $verdict in
		*"OK "[1-9]*) good=1; break ;;
		*BAD*) echo "stack --pid $pid ($comm): $verdict"; echo "$out"; bad=$((bad + 1)); good=1; break ;;
		esac
	done
	[ "$good" = 1 ] || { echo "no stack of $pid ($comm) in 5 tries"; bad=$((bad + 1)); }
	u=$(echo "$out" | awk '/^  #/ && $NF != "[k]" { n++; if ($3 == "?") r++ } END { print n + 0, r + 0 }')
	total_user=$((total_user + ${u% *}))
	raw_user=$((raw_user + ${u#* }))
done <<<"$pids"
echo "user frames of the server's threads: $total_user, of which unnamed: $raw_user"
[ "$raw_user" = 0 ] || fail "$raw_user user frames of the server's threads are unnamed"
[ "$bad" = 0 ] || fail "$bad server processes without a well-formed kernel stack"
