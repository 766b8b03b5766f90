#!/usr/bin/env bash
# record --btrace + profile --to lines gives, for every source line of examples/loops.c,
# the instruction count valgrind's callgrind measures for the same binary (Ir per line),
# at -O0 and -O2 (callgrind with --skip-plt=no: by default it charges PLT stubs to their
# caller); and the per-function call counts and the call tree (calls per caller and callee)
# equal callgrind's calls= counts, at -O2 with tail calls (a jump to a function start).
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
for opt in -O0 -O2; do
	cc $opt -g -o loops "$SRC/examples/loops.c"
	"$TK" record --btrace -q -o l.tkbt -- ./loops >/dev/null
	"$TK" profile --to lines -o lines.txt l.tkbt
	"$TK" profile --to csv -o funcs.csv l.tkbt
	"$TK" profile --to calltree -o tree.txt l.tkbt
	valgrind -q --tool=callgrind --callgrind-out-file=cg.out --compress-strings=no \
		--compress-pos=no --skip-plt=no ./loops >/dev/null
	python3 - "$opt" lines.txt funcs.csv cg.out tree.txt <<'PY'
import collections, csv, re, sys
opt, lines_txt, funcs_csv, cg, tree_txt = sys.argv[1:]
ours = collections.Counter()
for row in open(lines_txt):
    m = re.match(r'\s*(\d+)\s+(\d+)\s+(\S+):(\d+)\s*$', row)
    if m and m.group(3).endswith('/loops.c'):
        ours[int(m.group(4))] += int(m.group(2))
theirs = collections.Counter()
calls = collections.Counter()
arcs = collections.Counter()   # (caller, callee) -> calls
fl = cur = fn = None
skip = False
for line in open(cg):
    if line.startswith('fl='):
        fl = cur = line[3:].strip()
    elif line.startswith(('fi=', 'fe=')):
        cur = line[3:].strip()
    elif line.startswith('fn='):
        cur, fn = fl, line[3:].strip()
        caller = fn
    elif line.startswith('cfn='):
        cfn = line[4:].strip()
    elif line.startswith('calls='):
        calls[cfn] += int(line[6:].split()[0])
        arcs[(caller, cfn)] += int(line[6:].split()[0])
        skip = True
    elif line[:1].isdigit():
        if skip:
            skip = False
            continue
        f = line.split()
        if cur and cur.endswith('/loops.c') and len(f) >= 2:
            theirs[int(f[0])] += int(f[1])
bad = {l: (ours[l], theirs[l]) for l in sorted(set(ours) | set(theirs)) if ours[l] != theirs[l]}
if bad or not ours:
    sys.exit(f"{opt}: per-line instructions differ (tracekit, callgrind): {bad}")
rows = list(csv.DictReader(open(funcs_csv)))
name_key = 'function' if 'function' in rows[0] else list(rows[0])[-1]
# At -O2 apply reaches twice/negate by a tail jump: both count a jump to a function start
# as a call (tail call).
fns = ('leaf', 'inner', 'apply', 'main', 'twice', 'negate')
for fn in fns:
    ours_calls = sum(int(r['calls']) for r in rows if r[name_key] == fn)
    if ours_calls != calls[fn]:
        sys.exit(f"{opt}: calls of {fn}: tracekit {ours_calls}, callgrind {calls[fn]}")
# the call tree: calls per (caller, callee) among these functions
ours_arcs = collections.Counter()
path = []
for row in open(tree_txt):
    m = re.match(r'\s*(\d+)\s+\d+\s+\d+(\s+)(\S.*)$', row)
    if not m:
        continue
    depth = (len(m.group(2)) - 2) // 2
    del path[depth:]
    if path and path[-1] in fns and m.group(3) in fns:
        ours_arcs[(path[-1], m.group(3))] += int(m.group(1))
    path.append(m.group(3))
theirs_arcs = {a: n for a, n in arcs.items() if a[0] in fns and a[1] in fns}
if dict(ours_arcs) != theirs_arcs or not theirs_arcs:
    sys.exit(f"{opt}: call tree differs: tracekit {dict(ours_arcs)}, callgrind {theirs_arcs}")
print(f"{opt}: {len(ours)} lines, {sum(ours.values())} instructions equal callgrind; calls equal")
PY
done

# Mutual tail recursion (tail1 <-> tail2 by jumps at -O2), recursion, a switch table: the
# per-function calls equal callgrind's (its recursion levels, fib'2, summed).
cc -O2 -g -o branches "$SRC/tests/data/btrace/branches.c"
"$TK" record --btrace -q -o b.tkbt -- ./branches 300 >/dev/null
"$TK" profile --to csv -o bfuncs.csv b.tkbt
valgrind -q --tool=callgrind --callgrind-out-file=bcg.out --compress-strings=no \
	--compress-pos=no --skip-plt=no ./branches 300 >/dev/null
python3 - bfuncs.csv bcg.out <<'PY'
import collections, csv, sys
funcs_csv, cg = sys.argv[1:]
calls = collections.Counter()
for line in open(cg):
    if line.startswith('cfn='):
        cfn = line[4:].strip().split("'")[0]
    elif line.startswith('calls='):
        calls[cfn] += int(line[6:].split()[0])
rows = list(csv.DictReader(open(funcs_csv)))
name_key = 'function' if 'function' in rows[0] else list(rows[0])[-1]
ours = collections.Counter()
for r in rows:
    ours[r[name_key]] += int(r['calls'])
fns = ('main', 'dispatch', 'fib', 'tail1', 'tail2', 'sq', 'neg')
bad = {fn: (ours[fn], calls[fn]) for fn in fns if ours[fn] != calls[fn] or not calls[fn]}
if bad:
    sys.exit(f"branches -O2: calls differ (tracekit, callgrind): {bad}")
print("branches -O2: calls equal callgrind:", {fn: ours[fn] for fn in fns})
PY

# Without -g no executed block has a line: the table is empty and a warning says why.
cc -O1 -o nolines "$SRC/examples/loops.c"
"$TK" record --btrace -q -o n.tkbt -- ./nolines >/dev/null
"$TK" profile --to lines -o nlines.txt n.tkbt 2>nlines.err
[ "$(wc -l <nlines.txt)" = 1 ] && grep -q 'executed blocks has a source line: .* -g' nlines.err ||
	{ echo "profile --to lines without line tables: no warning"; cat nlines.err; exit 1; }
echo "without -g: the empty lines table is explained"
