#!/usr/bin/env bash
# uftrace's call filters (-F, -N, -D, -t, --min-insns) in the timelines (convert --to
# chrome|perfetto) and the report: a filtered timeline holds exactly the calls the filtered
# profile counts.
# - a branch trace of examples/recursion.c and a real program's XRay log (several threads,
#   many chunks): for each filter, the Chrome JSON's slices per name (its "B" events) equal
#   `profile --to csv`'s calls per function; -j 1 and -j 2 give the same bytes (a few
#   filters); Perfetto's file is written too
# - report: its function table is the filtered `profile --to csv`, its timeline's calls add
#   up to the filtered calls; with --time A:B the window's table, a timeline of the window
# (their refusals: oracle/profile_filter.sh)
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# slices per name in a Chrome JSON timeline against calls per function in a profile CSV
cat >same.py <<'EOF'
import collections, csv, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
tl = collections.Counter(e["name"] for e in ev if e.get("ph") == "B")
ends = sum(1 for e in ev if e.get("ph") == "E")
prof = collections.Counter()
for row in list(csv.reader(open(sys.argv[2])))[1:]:
    if int(row[1]):
        prof[row[0]] += int(row[1])
if tl != prof or ends != sum(tl.values()):
    for k in sorted(set(tl) | set(prof)):
        if tl[k] != prof[k]:
            print("  %s: timeline %d, profile %d" % (k, tl[k], prof[k]))
    print("  %d ends for %d begins" % (ends, sum(tl.values())))
    sys.exit(1)
print(sum(tl.values()))
EOF
# the report's function table and its timeline's calls
cat >page.py <<'EOF'
import json, re, sys
s = open(sys.argv[1]).read()
d = json.loads(re.search(r'<script type="application/json" id="tk-data">(.*?)</script>', s, re.S).group(1))
open(sys.argv[2], "w").write(d["functions"])
print(sum(sum(l["calls"]) for l in d["timeline"]["lanes"]))
EOF

same() { # name, input, options...
	local n=$1 in=$2 out
	shift 2
	"$TK" convert --to chrome -j 2 -o j2.json "$@" "$in"
	"$TK" profile --to csv "$@" "$in" >p.csv
	if out=$(python3 same.py j2.json p.csv); then
		ok "$n: the timeline's slices are the profile's calls ($out)"
	else bad "$n: timeline != profile"; echo "$out"; fi
}
jobs_same() { # name, input, options...: -j 1 and -j 2 give the same bytes; Perfetto too
	local n=$1 in=$2
	shift 2
	"$TK" convert --to chrome -j 2 -o j2.json "$@" "$in"
	"$TK" convert --to chrome -j 1 -o j1.json "$@" "$in"
	if cmp -s j1.json j2.json; then ok "$n: -j 2 = -j 1"; else bad "$n: -j 2 != -j 1"; fi
	"$TK" convert --to perfetto -o t.pftrace "$@" "$in"
	if [ -s t.pftrace ]; then ok "$n: perfetto written"; else bad "$n: perfetto"; fi
}

# A branch trace of a program with known call counts.
cc -O0 -g -o rec "$SRC/examples/recursion.c"
"$TK" record --btrace -q -o r.tkbt -- ./rec >/dev/null
for f in "" "-N fib" "-F try_dive" "-F is_(even|odd)" "-D 2" "--min-insns 100" \
	 "-F fib -N is_odd" "-D 3 --min-insns 50 -t 1us"; do
	# shellcheck disable=SC2086
	same "branch trace ${f:-(no filter)}" r.tkbt $f
done
jobs_same "branch trace -F fib -N is_odd" r.tkbt -F fib -N is_odd
jobs_same "branch trace -D 3 --min-insns 50" r.tkbt -D 3 --min-insns 50
# -N fib leaves fib's 1973 calls out of the timeline
"$TK" convert --to chrome -N fib -o n.json r.tkbt
if ! grep -q '"name":"fib"' n.json && grep -q '"name":"dive"' n.json; then
	ok "-N fib: no fib slice, dive's kept"
else bad "-N fib: slices"; fi

for f in "-F fib" "-D 2 --min-insns 50"; do
	# shellcheck disable=SC2086
	"$TK" report -o r.html $f r.tkbt
	# shellcheck disable=SC2086
	"$TK" profile --to csv $f r.tkbt >p.csv
	calls=$(python3 page.py r.html page.csv)
	want=$(tail -n +2 p.csv | awk -F, '{s += $2} END {print s}')
	if cmp -s p.csv page.csv && [ "$calls" = "$want" ]; then
		ok "report $f: the filtered function table, $calls calls in its timeline"
	else bad "report $f: timeline calls $calls, profile $want"; diff p.csv page.csv | head -n 5; fi
done

# report --time A:B: the window's function table (profile --time A:B --to csv), and a
# timeline of the window only; a page without a profile to window (Kanata) is refused
"$TK" report -o whole.html r.tkbt
whole=$(python3 page.py whole.html whole.csv)
"$TK" decode --time r.tkbt 2>/dev/null | sed -n 's/^\[\([0-9a-f]*\)\] [0-9a-f]\{16\} .*/\1/p' >times
mid=$(( 16#$(sed -n "$(( $(wc -l <times) / 2 + 1 ))p" times) ))
for w in "0:$mid" "$mid:"; do
	"$TK" report -o r.html --time "$w" r.tkbt
	"$TK" profile --to csv --time "$w" r.tkbt >p.csv
	calls=$(python3 page.py r.html page.csv)
	if cmp -s p.csv page.csv && ! cmp -s p.csv whole.csv && [ "$calls" -gt 0 ] &&
	   [ "$calls" -lt "$whole" ]; then
		ok "report --time $w: the window's function table, $calls of $whole calls in its timeline"
	else bad "report --time $w: timeline calls $calls of $whole"; diff p.csv page.csv | head -n 5; fi
done
printf 'Kanata\t0004\nC=\t0\nI\t0\t0\t0\nS\t0\t0\tF\nC\t1\nE\t0\t0\tF\nR\t0\t0\t0\n' >k.log
rc=0
"$TK" report -o k.html --time 0:10 k.log 2>k.err || rc=$?
if [ $rc = 2 ] && grep -q -- '--time: a .* page has no profile to window' k.err && [ ! -s k.html ]; then
	ok "report --time of a Kanata log: refused"
else bad "report --time of a Kanata log: status $rc"; cat k.err; fi

X=$SRC/tests/data/xray
if command -v clang-16 >/dev/null; then
	clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$X/xray_prog.c" -o prog -lpthread
	XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" \
		./prog fdr 2 20 >/dev/null 2>&1
	log=$(ls -1 real-prog.* | head -n 1)
	for f in "" "-N leaf" "-F work -N fib" "-F ^(fib|leaf)$" "-D 2" "-t 300ns" \
		 "--min-time 1us -D 4 -F work"; do
		# shellcheck disable=SC2086
		same "xray ${f:-(no filter)}" "$log" --instr-map prog $f
	done
	jobs_same "xray -F work -N fib" "$log" --instr-map prog -F work -N fib
	jobs_same "xray --min-time 1us -D 4" "$log" --instr-map prog --min-time 1us -D 4
else
	echo "skip: real XRay log (no clang-16)"
fi

exit $fail
