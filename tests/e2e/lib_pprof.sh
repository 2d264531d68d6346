# Reading idlevm's pprof files with the real pprof tool (`go tool pprof`,
# Debian's golang-go), for the tests that compare it with idlevm's own
# reports.  Frames are compared by name: a frame neither side could name
# (idlevm prints its address or FILE+0xADDR, pprof its mapping's "[file]")
# is "?".

# pprof_stacks PB KIND: every stack of samples of KIND in PB, outermost
# frame first, as "frame;frame;... COUNT" with the counts of equal stacks
# summed, sorted; from `go tool pprof -traces` with the file's own names.
pprof_stacks() {
	go tool pprof -symbolize=none -traces -sample_index="$2" "$1" 2>/dev/null |
	awk '
	function flush(  s, i, f) {
		if (n && value > 0) {
			s = ""
			for (i = n - 1; i >= 0; i--) {
				f = frames[i]
				sub(/ \(inline\)$/, "", f)
				if (f ~ /^\[.*\]$/ || f ~ /^0x/ || f == "<unknown>")
					f = "?"
				s = s (s == "" ? "" : ";") f
			}
			count[s] += value
		}
		n = 0
	}
	/^-----------\+/ { flush(); next }
	/^ +[0-9]+   [^ ]/ { flush(); value = $1; sub(/^ +[0-9]+   /, ""); frames[n++] = $0; next }
	n > 0 && /^             [^ ]/ { sub(/^ +/, ""); frames[n++] = $0; next }
	END { flush(); for (s in count) print s, count[s] }' | sort
}

# folded_stacks FOLDED: `idlevm report -f folded -K KIND` output in the
# same form: process and thread fields dropped, _[k] and _[i] marks
# removed, addresses and FILE+0xOFFSET frames (no name: the pprof keeps
# only their address, for a later symbolizer) as "?".
folded_stacks() {
	echo "$1" | awk '
	NF {
		c = $NF; sub(/ [0-9]+$/, "")
		k = split($0, f, ";"); s = ""
		for (i = 3; i <= k; i++) {
			x = f[i]; sub(/_\[i\]$/, "", x); sub(/_\[k\]$/, "", x)
			if (x ~ /^0x/ || x ~ /\+0x[0-9a-f]+$/) x = "?"
			s = s (s == "" ? "" : ";") x
		}
		# A sample without frames has no line in pprof -traces.
		if (s != "")
			count[s] += c
	}
	END { for (s in count) print s, count[s] }' | sort
}

# pprof_total PB KIND: "Total samples = N" of `go tool pprof -top`.
pprof_total() {
	go tool pprof -symbolize=none -top -sample_index="$2" "$1" 2>/dev/null |
		sed -n 's/.*Total samples = \([0-9]*\).*/\1/p'
}

# folded_user_functions FOLDED: "NAME FLAT CUM" of every user function
# (frames without _[k]) in `idlevm report -f folded -K KIND` output: the
# samples it ends and the samples it is in (once per stack), sorted.
folded_user_functions() {
	echo "$1" | awk '
	NF {
		c = $NF; sub(/ [0-9]+$/, "")
		k = split($0, f, ";"); delete seen
		for (i = 3; i <= k; i++) {
			x = f[i]; sub(/_\[i\]$/, "", x)
			if (x ~ /_\[k\]$/ || x ~ /^0x/ || x ~ /\+0x[0-9a-f]+$/)
				continue
			if (i == k)
				flat[x] += c
			if (!(x in seen)) { cum[x] += c; seen[x] = 1 }
		}
	}
	END { for (x in cum) print x, flat[x] + 0, cum[x] }' | sort
}

# pprof_functions PB KIND NAMES...: "NAME FLAT CUM" of those functions in
# `go tool pprof -top` (inline and out-of-line rows of one name summed).
pprof_functions() {
	local pb=$1 kind=$2
	shift 2
	go tool pprof -symbolize=none -top -nodecount=1000000 -nodefraction=0 \
		-sample_index="$kind" "$pb" 2>/dev/null | awk -v names="$*" '
	BEGIN { n = split(names, w, " "); for (i = 1; i <= n; i++) want[w[i]] = 1 }
	$1 ~ /^[0-9]+$/ && NF >= 6 {
		x = $6; if (!(x in want)) next
		flat[x] += $1; cum[x] += $4
	}
	END { for (x in cum) print x, flat[x], cum[x] }' | sort
}

# pprof_field PB FIELD: a top-level integer field of the Profile message
# (time_nanos, duration_nanos, period), decoded by protoc.
pprof_field() {
	gunzip -c "$1" | protoc --decode perftools.profiles.Profile \
		-I vmm/report vmm/report/report_pprof.proto 2>/dev/null |
		sed -n "s/^$2: //p"
}
