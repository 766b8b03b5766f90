#!/usr/bin/env bash
# profile --time A:B and convert --to folded|pprof --time A:B: the profile of what ran in
# trace ticks [A, B), clipped as the timeline clips its calls, in every output.
# - XRay logs (hand-made ones and a real program's): every output kind against a reference
#   computed from the log's records without tracekit's profiler (tests/tools/xray_window.py)
# - a branch trace (instruction counts): a window over the whole run is the plain profile,
#   and two windows that split the run add up to it (calls, instructions, ticks per path)
# - -j 1 and -j 4 give the same bytes; a trace without times and --shard are refused (2)
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

# tracekit's JSON functions in the reference's form
cat >funcs.py <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
out = {}
for f in d["functions"]:
    row = {k: f[k] for k in ("calls", "incl_ticks", "excl_ticks")}
    if "min" in f:
        row["min"], row["max"] = f["min"], f["max"]
    out[f["name"].lstrip("#")] = row
print(json.dumps(out, indent=1, sort_keys=True))
PY
ref_part() { python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]], indent=1, sort_keys=True))" "$1" "$2"; }

# window LOG A B: every output of the window against the reference
window() {
	local log=$1 a=$2 b=$3 n="$(basename "$1") [$2,$3)"
	"$TK" convert --to xray-yaml "$log" >log.yaml
	python3 "$SRC/tests/tools/xray_window.py" log.yaml "$a" "$b" >ref.json
	ref_part ref.json functions >ref.funcs
	ref_part ref.json folded | python3 -c "
import json, sys
for p, v in sorted(json.load(sys.stdin).items()): print(p, v)" >ref.folded
	"$TK" profile --to json --time "$a:$b" "$log" >out.json
	python3 funcs.py out.json >out.funcs
	check "$n: json functions (calls, ticks, min, max)" ref.funcs out.funcs
	"$TK" profile --to folded --time "$a:$b" "$log" | sed 's/#//g' | awk '$NF != 0' | sort >out.folded
	check "$n: folded" ref.folded out.folded
	"$TK" profile --to pprof --time "$a:$b" -o out.pb.gz "$log"
	node "$SRC/tests/tools/pprof-folded.js" out.pb.gz | tail -n +2 | sed 's/#//g' |
		awk '$NF != 0' | sort >pprof.folded
	# pprof's samples are nanoseconds: each path's ticks converted as pprof.c does
	local hz
	hz=$(sed -n 's/^ *cycle-frequency: *\([0-9]*\).*/\1/p' log.yaml)
	python3 -c "
import sys
hz = int(sys.argv[1] or 0)
for line in open('ref.folded'):
    p, v = line.rsplit(' ', 1)
    v = int(v) * 1000000000 // hz if hz else int(v)
    if v: print(p, v)" "$hz" | sort >ref.pprof
	check "$n: pprof samples (ns)" ref.pprof pprof.folded
	"$TK" profile --to csv --time "$a:$b" "$log" | tail -n +2 | cut -d, -f1,2 | tr -d '"#' |
		sort >out.calls
	python3 -c "
import json, sys
for k, v in sorted(json.load(open('ref.funcs')).items()): print(f'{k},{v[\"calls\"]}')" >ref.calls
	check "$n: csv calls" ref.calls out.calls
	"$TK" profile --time "$a:$b" "$log" | tail -n +3 | awk '{print $NF "," $1}' | tr -d '#' |
		sort >text.calls
	check "$n: text calls" ref.calls text.calls
	local total
	total=$(python3 -c "print(sum(int(l.split()[-1]) for l in open('ref.folded')))")
	"$TK" profile --to callgrind --time "$a:$b" "$log" | grep '^summary:' >out.cg
	echo "summary: $total" >ref.cg
	check "$n: callgrind summary" ref.cg out.cg
	# the timeline of the same window draws the functions that ran in it
	"$TK" convert --to chrome --time "$a:$b" "$log" | python3 -c "
import json, sys
print('\n'.join(sorted({e['name'].lstrip('#') for e in json.load(sys.stdin)['traceEvents'] if e['ph'] == 'B'})))" >tl.names
	python3 -c "
import json
print('\n'.join(sorted(k for k, v in json.load(open('ref.funcs')).items() if k != '[unknown]' and v['incl_ticks'])))" >ref.names
	check "$n: timeline's functions" ref.names tl.names
	"$TK" profile --to json --time "$a:$b" -j 4 "$log" >out4.json
	check "$n: -j 4 = -j 1" out.json out4.json
}

X=$SRC/tests/data/xray
window "$X/fdr-v5.xray" 1012 1222      # cuts calls at both ends
window "$X/fdr-v5.xray" 1016 1021      # inside one call
window "$X/fdr-v5.xray" 1000 9000000012
# thread 101 steps over the window inside function 1 (no record in it), thread 202 over the
# second inside function 4: the open call spans the window (the timeline drew nothing)
window "$X/fdr-v5.xray" 1023 1200
window "$X/fdr-v5.xray" 6000 7000
window "$X/basic-v3.xray" 0 1
window "$X/fdr-v5-inherit.xray" 0 18446744073709551615

# a real program's FDR log (several threads, many calls), windows at its thirds
if command -v clang-16 >/dev/null; then
	clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$X/xray_prog.c" -o prog -lpthread
	XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" ./prog fdr 2 10 >/dev/null 2>&1
	log=$(ls -1 real-prog.* | head -n 1)
	read -r lo hi < <("$TK" convert --to xray-yaml "$log" | sed -n 's/.*tsc: \([0-9]*\),.*/\1/p' |
		sort -n | sed -n '1p;$p' | paste -sd ' ')
	third=$(( (hi - lo) / 3 ))
	window "$log" $((lo + third)) $((lo + 2 * third))
else
	echo "skip: real XRay log (no clang-16)"
fi

# A branch trace: whole-run window = the plain profile; two halves add up to the whole.
cc -O0 -g -o loops "$SRC/examples/loops.c"
"$TK" record --btrace -q -o l.tkbt -- ./loops >/dev/null
for to in csv json folded lines blocks calltree; do
	"$TK" profile --to $to l.tkbt >plain.$to
	"$TK" profile --to $to --time 0: l.tkbt >whole.$to
	check "branch trace: --time 0: = no window (--to $to)" plain.$to whole.$to
done
# split at the time of the middle instruction (the recorder's times are coarse)
"$TK" decode --time l.tkbt 2>/dev/null | sed -n 's/^\[\([0-9a-f]*\)\] [0-9a-f]\{16\} .*/\1/p' >times
mid=$(( 16#$(sed -n "$(( $(wc -l <times) / 2 + 1 ))p" times) ))
sum_paths() { # folded files... -> path: summed value
	cat "$@" | awk '{v = $NF; $NF = ""; s[$0] += v} END {for (p in s) if (s[p]) print p s[p]}' | sort
}
"$TK" convert --to folded --time "0:$mid" l.tkbt >h1.folded
"$TK" convert --to folded --time "$mid:" l.tkbt >h2.folded
sum_paths plain.folded >plain.sum
sum_paths h1.folded h2.folded >halves.sum
check "branch trace: instructions per path of [0,$mid) + [$mid,end) = the whole" plain.sum halves.sum
"$TK" convert --to pprof --time "$mid:" -o h2.pb.gz l.tkbt
node "$SRC/tests/tools/pprof-folded.js" h2.pb.gz | tail -n +2 | sort >h2.pprof
sort h2.folded >h2.sorted
check "branch trace: convert --to pprof = folded in a window" h2.sorted h2.pprof
calls() { python3 -c "
import json, sys
t = {}
for f in sys.argv[1:]:
    for r in json.load(open(f))['functions']:
        k = r['name']
        t.setdefault(k, [0, 0, 0])
        for i, c in enumerate(('calls', 'incl_insns', 'excl_insns')):
            t[k][i] += r[c]
for k in sorted(t):
    if any(t[k]): print(k, *t[k])" "$@"; }
"$TK" profile --to json --time "0:$mid" l.tkbt >h1.json
"$TK" profile --to json --time "$mid:" l.tkbt >h2.json
calls plain.json >plain.calls
calls h1.json h2.json >halves.calls
check "branch trace: calls and instructions per function add up" plain.calls halves.calls
if [ -s h1.folded ] && [ -s h2.folded ]; then ok "both halves ran code (split at tick $mid)"
else bad "a half is empty (split at tick $mid)"; fi
"$TK" profile --to json --time "$mid:" -j 4 l.tkbt >h2j4.json
check "branch trace: -j 4 = -j 1 in a window" h2.json h2j4.json

# Refused, exit status 2: a trace without times (Intel PT without its TSC), A >= B, --shard.
python3 -c "
d = bytearray(open('$SRC/tests/data/flow/basic.pt', 'rb').read())
assert d[0x10] == 0x19          # the PSB+'s TSC packet becomes PADs
d[0x10:0x18] = bytes(8)
open('notime.pt', 'wb').write(d)"
set +e
"$TK" profile --raw "$SRC/tests/data/flow/code.bin:0x1000" --time 0:100 notime.pt >/dev/null 2>err
rc1=$?
"$TK" profile --time 200:100 "$X/fdr-v5.xray" >/dev/null 2>>err
rc2=$?
"$TK" profile --shard 1/2 -o p.part --time 0:100 "$X/fdr-v5.xray" >/dev/null 2>>err
rc3=$?
set -e
if [ "$rc1$rc2$rc3" = 222 ] && grep -q 'notime.pt: --time: .* no timestamps' err; then
	ok "refused with exit status 2: no times, empty window, --shard"
else bad "refusals: exit statuses $rc1 $rc2 $rc3"; cat err; fi
exit $fail
