#!/usr/bin/env bash
# 10^5 nested calls (an XRay basic-mode log of one recursion) through pprof and JSON (issue
# 31 item 22): pprof finishes with a bounded size (a sample lists its whole stack, so deep
# stacks keep their outer and inner frames, said on stderr) and decodes with the
# pprof-format package; the JSON call tree is a flat node list that Python's json reads.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
N=100000
# an XRay basic-mode log: main (#1) calls #2, which recurses N - 1 times
mklog() {
	python3 - "$1" "$2" <<'PY'
import struct, sys
n = int(sys.argv[2])
def rec(typ, fid, tsc):   # enter 0, exit 1; thread 11 of process 77
    return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, 11, 77)
out = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0), rec(0, 1, 100)]
out += [rec(0, 2, 101 + i) for i in range(n)]
out += [rec(1, 2, 101 + n + i) for i in range(n)]
out.append(rec(1, 1, 101 + 2 * n))
open(sys.argv[1], 'wb').write(b''.join(out))
PY
}
# pprof's samples (names leaf first) from its protobuf, tracekit's ids: location = function
# = string id of the name
samples() {
	python3 - "$1" <<'PY'
import gzip, sys
d = gzip.open(sys.argv[1]).read()
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7f) << s
        s += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i
def fields(b):
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        if tag & 7 == 0:
            v, i = varint(b, i)
            yield tag >> 3, v
        else:
            n, i = varint(b, i)
            yield tag >> 3, b[i:i + n]
            i += n
strings, samples = [], []
for f, v in fields(d):
    if f == 6:
        strings.append(v.decode())
    elif f == 2:
        samples.append(dict(fields(v)))
hi = bytes(range(0x80, 0x100))
deep = max(samples, key=lambda x: len(x[1].translate(None, hi)))   # the most frames
ids, i = [], 0
while i < len(deep[1]):
    v, i = varint(deep[1], i)
    ids.append(v)
total = sum(varint(x[2], 0)[0] for x in samples)
names = [strings[k] for k in ids]
print(len(samples), len(ids), total, names[959], names[960], names[961], names[-1])
PY
}
N=100000
mklog "$W/deep.xray" $N
"$TK" profile --to pprof -o "$W/p.pb.gz" "$W/deep.xray" 2>"$W/err"
grep -q "stacks deeper than 1024 frames (the deepest $((N + 2)))" "$W/err" ||
	{ echo "FAIL: no word of the stacks cut"; cat "$W/err"; exit 1; }
# #1 and N levels of #2 under the base level, which stacks leave off: the deepest keeps
# 960 inner frames, one for the rest, and the 63 outer ones down to #1; the times add up
got=$(samples "$W/p.pb.gz")
want="$((N + 1)) 1024 $(( (2 * N + 1) * 1000 )) #2 [frames left out] #2 #1"
[ "$got" = "$want" ] || { echo "FAIL: pprof samples: $got, expected $want"; exit 1; }
echo "ok: pprof of $N nested calls: $got"
# the pprof-format package reads a cut profile (a smaller one: it decodes slowly)
mklog "$W/small.xray" 3000
"$TK" profile --to pprof -o "$W/s.pb.gz" "$W/small.xray" 2>/dev/null
# (its 1978 cut stacks are one: the same outer and inner frames)
node "$SRC/tests/tools/pprof-folded.js" "$W/s.pb.gz" >"$W/s.folded"
grep -q '^#1;#2;.*;\[frames left out\];#2;.* 3955000$' "$W/s.folded" ||
	{ echo "FAIL: pprof-format"; cut -c 1-100 "$W/s.folded" | tail -3; exit 1; }
echo "ok: pprof-format reads it"

"$TK" profile --to json -o "$W/p.json" "$W/deep.xray"
python3 - "$W/p.json" "$N" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
t = d['calltree']
ids = {x['id']: x for x in t}
assert len(t) == n + 2 and len(ids) == len(t), len(t)
assert all(x['parent'] == 0 or x['parent'] < x['id'] for x in t)
# the innermost call: n + 2 levels below the root ([unknown], #1, then #2 n times)
depth, x = 0, t[-1]
while x['parent']:
    x, depth = ids[x['parent']], depth + 1
assert depth == n + 1 and t[-1]['name'] == '#2', depth
print(f"ok: json call tree of {len(t)} nodes, read by Python's json")
PY

# the text call tree indents by depth (its size grows with the depth squared): 1,000
# levels, then a marker where calls went deeper, said on stderr
mklog "$W/mid.xray" 1500
"$TK" profile --to calltree -o "$W/ct.txt" "$W/mid.xray" 2>"$W/ct.err"
grep -q "callees of 1 calls deeper than 1000 levels are left out" "$W/ct.err" ||
	{ echo "FAIL: no word of the call tree cut"; cat "$W/ct.err"; exit 1; }
python3 - "$W/ct.txt" <<'PY'
import sys
rows = [l for l in open(sys.argv[1]).read().split('\n')[2:] if l]
depth = lambda l: (len(l) - len(l[40:].lstrip(' ')) - 42) // 2
assert len(rows) == 1001 and rows[-1].endswith('[deeper calls left out]'), (len(rows), rows[-1][-40:])
assert depth(rows[-2]) == 999 and depth(rows[-1]) == 1000, (depth(rows[-2]), depth(rows[-1]))
print(f"ok: text call tree of 1,500 nested calls: {len(rows) - 1} levels and the marker")
PY
