#!/usr/bin/env bash
# profile's call filters, uftrace's spellings: -F/--function, -N/--exclude, -D/--depth,
# -t/--min-time, --min-insns.
# - a real program's XRay log (several threads, many chunks): folded paths and calls per
#   function against a reference that applies the filters to each thread's tree of calls
#   built from the log's records (tests/tools/xray_filter.py), not with tracekit's profiler
# - a branch trace of examples/recursion.c (known call counts): each filter against
#   arithmetic on the unfiltered output, in csv and folded
# - -j 1 and -j 4 give the same bytes; a bad regex, -D 0, --shard with a filter, --min-time
#   on a trace without a clock are refused (2), by profile, the timelines and report
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
check() { # name, expected file, actual file
	if cmp -s "$2" "$3"; then ok "$1"; else bad "$1"; diff "$2" "$3" | head -n 8; fi
}
calls() { tail -n +2 | cut -d, -f1,2 | tr -d '"' | awk -F, '$2 != 0' | sort; }

X=$SRC/tests/data/xray
if command -v clang-16 >/dev/null; then
	clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$X/xray_prog.c" -o prog -lpthread
	# small buffers: many chunks, decoded in parallel
	XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" \
		./prog fdr 2 20 >/dev/null 2>&1
	log=$(ls -1 real-prog.* | head -n 1)
	"$TK" convert --to xray-yaml --instr-map prog "$log" >log.yaml
	# the log's clock is 1 GHz (ticks = ns) or the durations are converted: -t in ticks
	hz=$(sed -n 's/^ *cycle-frequency: *\([0-9]*\).*/\1/p' log.yaml)
	xfilter() { # reference flags -- tracekit flags
		local ref=() tk=()
		while [ "$1" != -- ]; do ref+=("$1"); shift; done
		shift
		tk=("$@")
		local n="xray ${tk[*]}"
		python3 "$SRC/tests/tools/xray_filter.py" log.yaml ref.folded ref.calls "${ref[@]}"
		sort -o ref.folded ref.folded
		sort -o ref.calls ref.calls
		"$TK" profile --instr-map prog --to folded "${tk[@]}" "$log" | awk '$NF != 0' | sort >out.folded
		check "$n: folded" ref.folded out.folded
		"$TK" profile --instr-map prog --to csv "${tk[@]}" "$log" | calls >out.calls
		check "$n: csv calls" ref.calls out.calls
		"$TK" profile --instr-map prog --to json -j 4 "${tk[@]}" "$log" >j4.json
		"$TK" profile --instr-map prog --to json -j 1 "${tk[@]}" "$log" >j1.json
		check "$n: -j 4 = -j 1" j1.json j4.json
	}
	xfilter -- 
	xfilter -N leaf -- --exclude leaf
	xfilter -F work -N fib -- -F work -N fib
	xfilter -F fib -F leaf -- --function '^(fib|leaf)$'
	xfilter -D 2 -- --depth 2
	if [ "$hz" = 1000000000 ]; then
		xfilter -t 300 -- -t 300ns
		xfilter -t 1000 -D 4 -F work -- --min-time 1us -D 4 -F work
	else
		echo "skip: --min-time against the reference (the log's clock is $hz Hz)"
	fi
else
	echo "skip: real XRay log (no clang-16)"
fi

# A branch trace of a program with known call counts.
cc -O0 -g -o rec "$SRC/examples/recursion.c"
"$TK" record --btrace -q -o r.tkbt -- ./rec >/dev/null
"$TK" profile --to folded r.tkbt | sort >plain.folded
"$TK" profile --to csv r.tkbt >plain.csv
field() { # csv function column -> value
	awk -F, -v f="\"$2\"" -v c="$3" '$1 == f {print $c}' "$1"
}
if [ "$(field plain.csv fib 2)" = 1973 ] && [ "$(field plain.csv dive 2)" = 18 ]; then
	ok "recursion: fib 1973 calls, dive 18"
else bad "recursion: unexpected call counts"; fi

# -N fib: the paths through fib go; main (fib's only caller) loses fib's inclusive cost
"$TK" profile --to folded -N fib r.tkbt | sort >n.folded
grep -Ev '(^|;)fib[; ]' plain.folded >ref.folded || true
check "-N fib: folded = the paths without fib" ref.folded n.folded
"$TK" profile --to csv --exclude fib r.tkbt >n.csv
main_incl=$(( $(field plain.csv main 5) - $(field plain.csv fib 5) ))
if [ -z "$(field n.csv fib 2)" ] && [ "$(field n.csv main 5)" = "$main_incl" ] &&
   [ "$(field n.csv main 6)" = "$(field plain.csv main 6)" ] &&
   [ "$(field n.csv is_even 2)" = 11 ] && [ "$(field n.csv dive 2)" = 18 ]; then
	ok "-N fib: csv: no fib, main's inclusive instructions less fib's ($main_incl), the rest kept"
else bad "-N fib: csv"; cat n.csv; fi

# -F try_dive: only the paths through it; its row is the unfiltered one
"$TK" profile --to folded -F try_dive r.tkbt | sort >f.folded
grep -E '(^|;)try_dive[; ]' plain.folded >ref.folded
check "-F try_dive: folded = the paths through try_dive" ref.folded f.folded
"$TK" profile --to csv -F try_dive r.tkbt >f.csv
for fn in try_dive dive; do
	if [ "$(field f.csv $fn 2),$(field f.csv $fn 5),$(field f.csv $fn 6)" = \
	     "$(field plain.csv $fn 2),$(field plain.csv $fn 5),$(field plain.csv $fn 6)" ]; then
		ok "-F try_dive: csv: $fn's calls and instructions unchanged"
	else bad "-F try_dive: csv: $fn"; fi
done
if [ -z "$(field f.csv fib 2)" ] && [ "$(field f.csv main 2)" = 0 ] &&
   [ "$(field f.csv main 5)" = "$(field plain.csv try_dive 5)" ]; then
	ok "-F try_dive: csv: main's inclusive instructions are try_dive's, fib gone"
else bad "-F try_dive: csv: callers"; cat f.csv; fi
# a regex: is_even and is_odd, whose paths go through one another
"$TK" profile --to folded -F 'is_(even|odd)' r.tkbt | sort >re.folded
grep -E '(^|;)is_(even|odd)[; ]' plain.folded >ref.folded
check "-F REGEX: folded = the paths through a match" ref.folded re.folded

# -D 2: each path cut at depth 2, what ran deeper added to it
"$TK" profile --to folded -D 2 r.tkbt | sort >d.folded
awk '{v = $NF; $NF = ""; n = split(substr($0, 1, length($0) - 1), f, ";");
      p = f[1]; for (i = 2; i <= n && i <= 2; i++) p = p ";" f[i]; s[p] += v}
     END {for (p in s) print p, s[p]}' plain.folded | sort >ref.folded
check "-D 2: folded = the paths cut at depth 2" ref.folded d.folded
"$TK" profile --to csv -D 2 r.tkbt >d.csv
if [ "$(field d.csv main 5)" = "$(field plain.csv main 5)" ] &&
   [ "$(field d.csv main 6)" = "$(field plain.csv main 5)" ] && [ -z "$(field d.csv fib 2)" ]; then
	ok "-D 2: csv: main (depth 2) keeps its inclusive instructions, all of them its own"
else bad "-D 2: csv"; cat d.csv; fi

# --min-insns: instructions move to the callers (the total stays); 1 keeps every call
sum() { awk '{s += $NF} END {print s}' "$1"; }
"$TK" profile --to folded --min-insns 1 r.tkbt | sort >m1.folded
check "--min-insns 1 = no filter" plain.folded m1.folded
"$TK" profile --to folded --min-insns 100 r.tkbt | sort >m.folded
"$TK" profile --to csv --min-insns 100 r.tkbt >m.csv
if [ "$(sum m.folded)" = "$(sum plain.folded)" ] && [ "$(field m.csv fib 5)" = "$(field plain.csv fib 5)" ] &&
   [ "$(field m.csv fib 2)" -lt 1973 ] && [ "$(field m.csv fib 2)" -gt 0 ]; then
	ok "--min-insns 100: the same total and fib's inclusive count, fewer fib calls ($(field m.csv fib 2))"
else bad "--min-insns 100"; cat m.csv; fi
for f in "-F fib -N is_odd" "-D 3 --min-insns 50 -t 1us"; do
	# shellcheck disable=SC2086
	"$TK" profile --to json -j 1 $f r.tkbt >j1.json
	# shellcheck disable=SC2086
	"$TK" profile --to json -j 4 $f r.tkbt >j4.json
	check "branch trace: -j 4 = -j 1 with $f" j1.json j4.json
done

# Refused, exit status 2.
python3 -c "
d = bytearray(open('$SRC/tests/data/flow/basic.pt', 'rb').read())
assert d[0x10] == 0x19          # the PSB+'s TSC packet becomes PADs
d[0x10:0x18] = bytes(8)
open('notime.pt', 'wb').write(d)"
refused() { # name, command...
	local n=$1 rc=0
	shift
	"$@" >/dev/null 2>err || rc=$?
	if [ $rc = 2 ] && [ -s err ]; then ok "refused (2): $n: $(head -n 1 err)"
	else bad "$n: exit status $rc"; cat err; fi
}
refused "bad regex" "$TK" profile -F 'a(' r.tkbt
refused "-D 0" "$TK" profile -D 0 r.tkbt
refused "--min-time 3 parsecs" "$TK" profile --min-time 3pc r.tkbt
refused "--shard with -N" "$TK" profile --shard 1/2 -o p.part -N fib r.tkbt
refused "--min-time without a clock" "$TK" profile --raw "$SRC/tests/data/flow/code.bin:0x1000" \
	--min-time 1us notime.pt
# the timelines and the report refuse them too (oracle/timeline_filter.sh)
refused "convert --to chrome: bad regex" "$TK" convert --to chrome -o x.json -F 'a(' r.tkbt
refused "report: bad regex" "$TK" report -o x.html -N 'a(' r.tkbt
refused "convert --to chrome: --min-time without a clock" "$TK" convert --to chrome -o x.json \
	--raw "$SRC/tests/data/flow/code.bin:0x1000" --min-time 1us notime.pt
exit $fail
