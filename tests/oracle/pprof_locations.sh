#!/usr/bin/env bash
# pprof output points at code: npm pprof-format decodes its mappings (the program's path,
# build-id and run-time range) and its locations: a location per source line that ran,
# with the line's address and line entries that equal `addr2line -f -i` there (an inlined
# function, loops.c's always_inline square, as a line inlined into its caller main), and
# the per-line sums of the samples equal `profile --to lines`; sample types as pprof names
# them (instructions/count) and period 1. `go tool pprof` (Debian's golang-go, offline with
# -symbolize=none) shows the same per-line counts in -lines -top and -list main, and
# disassembles a function with -disasm.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cc -O2 -g -o loops "$SRC/examples/loops.c"
"$TK" record --btrace -q -o loops.tkbt -- ./loops >/dev/null
"$TK" profile --to pprof -o loops.pprof loops.tkbt
"$TK" profile --to lines -o loops.lines loops.tkbt
cat > decode.js <<'JS'
const fs = require('fs'), zlib = require('zlib');
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const S = (i) => p.stringTable.strings[Number(i)];
console.log(JSON.stringify({
  sampleType: p.sampleType.map((t) => [S(t.type), S(t.unit)]),
  period: Number(p.period), periodType: [S(p.periodType.type), S(p.periodType.unit)],
  mappings: p.mapping.map((m) => ({ id: Number(m.id), start: Number(m.memoryStart),
    limit: Number(m.memoryLimit), file: S(m.filename), buildId: S(m.buildId) })),
  locations: p.location.map((l) => ({ id: String(l.id), mapping: Number(l.mappingId),
    address: Number(l.address), lines: l.line.map((x) => {
      const f = p.function.find((f) => Number(f.id) === Number(x.functionId));
      return { name: S(f.name), file: S(f.filename), line: Number(x.line) };
    }) })),
  samples: p.sample.map((s) => ({ leaf: String(s.locationId[0]), value: Number(s.value[0]) })),
}));
JS
decode() { NODE_PATH="$SRC/tests/tools/node_modules" node decode.js "$1"; }
cat > lines.py <<'PY'
def to_lines(path):
    """--to lines' instructions per file:line"""
    want = {}
    for row in open(path).read().split('\n')[1:]:
        if row.strip():
            execs, insns, where = row.split()
            want[where] = int(insns)
    return want

def sample_lines(d):
    """the samples' values per file:line of their own location's innermost line entry"""
    locs = {l['id']: l for l in d['locations']}
    got = {}
    for s in d['samples']:
        ln = locs[s['leaf']]['lines'][0]
        if ln['line']:
            key = f"{ln['file']}:{ln['line']}"
            got[key] = got.get(key, 0) + s['value']
    return got
PY
decode loops.pprof > decoded.json
bid=$(readelf -n loops | sed -n 's/.*Build ID: //p')
python3 - decoded.json "$bid" loops.lines <<'PY'
import json, subprocess, sys
from lines import sample_lines, to_lines
d = json.load(open(sys.argv[1]))
bid = sys.argv[2]
bad = []
if d['sampleType'] != [['instructions', 'count']] or d['periodType'] != ['instructions', 'count'] \
        or d['period'] != 1:
    bad.append(f"sample type {d['sampleType']}, period {d['period']} {d['periodType']}")
maps = {m['id']: m for m in d['mappings']}
prog = [m for m in d['mappings'] if m['file'].endswith('/loops')]
if len(prog) != 1 or prog[0]['buildId'] != bid:
    sys.exit(f"no mapping of loops with build-id {bid}: {d['mappings']}")
locs = {l['id']: l for l in d['locations']}
checked = 0
for l in d['locations']:
    if not l['lines'] or not any(x['line'] for x in l['lines']):
        continue       # no source line (no DWARF, or what ran on no line)
    m = maps.get(l['mapping'])
    if m is not prog[0] or not (m['start'] <= l['address'] < m['limit']):
        bad.append(f"{l}: address not in loops' mapping")
        continue
    # addr2line -i at the file address (a PIE's first segment is at 0): innermost first
    out = subprocess.run(['addr2line', '-f', '-i', '-e', 'loops', hex(l['address'] - m['start'])],
                         capture_output=True, text=True).stdout.split('\n')
    want = [(out[i], out[i + 1].split(' (')[0]) for i in range(0, len(out) - 1, 2)]
    got = [(x['name'], f"{x['file']}:{x['line']}") for x in l['lines']]
    if got != want:
        bad.append(f'location {l["address"]:#x}: lines {got}, addr2line {want}')
    checked += 1
per_line, want = sample_lines(d), to_lines(sys.argv[3])
if per_line != want:
    bad.append(f'per-line sums {sorted(per_line.items())}\n  --to lines {sorted(want.items())}')
inl = [l for l in d['locations']
       if [(x['name'], x['line'] and x['file'].endswith('loops.c')) for x in l['lines']]
       == [('square', True), ('main', True)]]
if not inl or not any(s['leaf'] == inl[0]['id'] and s['value'] for s in d['samples']):
    bad.append('no sampled location with square inlined into main')
if checked < 10:
    bad.append(f'only {checked} locations checked with addr2line')
if bad:
    sys.exit('\n'.join(bad))
print(f'pprof: {len(d["locations"])} locations ({checked} equal addr2line -i), '
      f'{len(per_line)} lines equal --to lines')
PY
# recursion: functions with many call paths, each path's instructions split over the
# function's lines; the paths' sums stay folded's, the lines' --to lines'
cc -O2 -g -o recursion "$SRC/examples/recursion.c"
"$TK" record --btrace -q -o rec.tkbt -- ./recursion >/dev/null
"$TK" profile --to pprof -o rec.pprof rec.tkbt
"$TK" profile --to lines -o rec.lines rec.tkbt
"$TK" profile --to folded rec.tkbt | sort > rec.folded
node "$SRC/tests/tools/pprof-folded.js" rec.pprof | tail -n +2 | sort | diff rec.folded - >&2 ||
	{ echo "recursion: pprof's call paths differ from folded"; exit 1; }
decode rec.pprof > rec.json
python3 - rec.json rec.lines <<'PY'
import json, sys
from lines import sample_lines, to_lines
d = json.load(open(sys.argv[1]))
got, want = sample_lines(d), to_lines(sys.argv[2])
if got != want or len(d['samples']) <= len(open('rec.folded').readlines()):
    sys.exit(f'recursion: per-line sums {sorted(got.items())}\n  --to lines {sorted(want.items())}')
print(f'recursion: {len(d["samples"])} samples, {len(got)} lines equal --to lines')
PY
if ! command -v go >/dev/null 2>&1; then
	echo "go is not installed (Debian: golang-go): go tool pprof not checked"
	echo "pprof_locations: ok"
	exit 0
fi
# go tool pprof -lines -top: flat per function and line; summed per file:line
go tool pprof -symbolize=none -lines -top -nodefraction=0 loops.pprof > top.txt
python3 - top.txt loops.lines <<'PY'
import re, sys
from lines import to_lines
got, want = {}, to_lines(sys.argv[2])
for row in open(sys.argv[1]):
    m = re.match(r'\s*(\d+)\s+\S+%\s+\S+%\s+\d+\s+\S+%\s+\S+ (\S+:\d+)( \(inline\))?$', row)
    if m:
        got[m.group(2)] = got.get(m.group(2), 0) + int(m.group(1))
if got != want:
    sys.exit(f'go tool pprof -lines -top {sorted(got.items())}\n  --to lines {sorted(want.items())}')
print(f'go tool pprof -lines -top: {len(got)} lines equal --to lines')
PY
# -list main: main's own instructions per line of loops.c (square's inlined line 7 is
# its own routine's)
go tool pprof -symbolize=none -list '^main$' loops.pprof > list.txt
python3 - list.txt loops.lines <<'PY'
import re, sys
from lines import to_lines
got = {}
for row in open(sys.argv[1]):
    m = re.match(r'\s*(\d+)\s+\S+\s+(\d+):', row)
    if m:
        got[int(m.group(2))] = int(m.group(1))
want = {}
for where, n in to_lines(sys.argv[2]).items():
    file, line = where.rsplit(':', 1)
    if file.endswith('loops.c') and int(line) in got:
        want[int(line)] = n
if 48 not in got or got != want:
    sys.exit(f'go tool pprof -list main {sorted(got.items())}\n  --to lines {sorted(want.items())}')
print(f'go tool pprof -list main: {len(want)} lines equal --to lines')
PY
# -disasm: the instructions' counts add up to the function's (go 1.19's pprof finds no
# symbols of a PIE's mapping, so this program is built at a fixed address)
cc -O2 -g -no-pie -o loops-np "$SRC/examples/loops.c"
"$TK" record --btrace -q -o np.tkbt -- ./loops-np >/dev/null
"$TK" profile --to pprof -o np.pprof np.tkbt
go tool pprof -disasm inner np.pprof > disasm.txt
python3 - disasm.txt <<'PY'
import re, sys
t = open(sys.argv[1]).read()
head = re.search(r'ROUTINE =+ inner\n\s*(\d+)\s', t)
flat = sum(int(m.group(1)) for m in re.finditer(r'^\s*(\d+)\s+\S+\s+[0-9a-f]+:', t, re.M))
if not head or int(head.group(1)) != flat or not flat:
    sys.exit(f'go tool pprof -disasm inner: routine {head and head.group(1)}, instructions {flat}\n{t}')
print(f'go tool pprof -disasm inner: {flat} instructions on their addresses')
PY
echo "pprof_locations: ok"
