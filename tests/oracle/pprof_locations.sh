#!/usr/bin/env bash
# pprof output points at code: npm pprof-format decodes its mappings (the program's path,
# build-id and run-time range) and its locations, each function's with the function's
# run-time entry address inside its mapping and a line entry naming the function, its
# source file and line (addr2line's for that address); sample types as pprof names them
# (instructions/count) and period 1. With Go installed, `go tool pprof -list main` also
# reads it.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cc -O2 -g -o loops "$SRC/examples/loops.c"
"$TK" record --btrace -q -o loops.tkbt -- ./loops >/dev/null
"$TK" profile --to pprof -o loops.pprof loops.tkbt
"$TK" profile --to csv -o loops.csv loops.tkbt
NODE_PATH="$SRC/tests/tools/node_modules" node - loops.pprof > decoded.json <<'JS'
const fs = require('fs'), zlib = require('zlib');
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const S = (i) => p.stringTable.strings[Number(i)];
console.log(JSON.stringify({
  sampleType: p.sampleType.map((t) => [S(t.type), S(t.unit)]),
  period: Number(p.period), periodType: [S(p.periodType.type), S(p.periodType.unit)],
  mappings: p.mapping.map((m) => ({ id: Number(m.id), start: Number(m.memoryStart),
    limit: Number(m.memoryLimit), file: S(m.filename), buildId: S(m.buildId) })),
  locations: p.location.map((l) => ({ id: Number(l.id), mapping: Number(l.mappingId),
    address: Number(l.address), lines: l.line.map((x) => {
      const f = p.function.find((f) => Number(f.id) === Number(x.functionId));
      return { name: S(f.name), file: S(f.filename), line: Number(x.line) };
    }) })),
}));
JS
bid=$(readelf -n loops | sed -n 's/.*Build ID: //p')
python3 - decoded.json "$bid" <<'PY'
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
bid = sys.argv[2]
bad = []
if d['sampleType'] != [['instructions', 'count']] or d['periodType'] != ['instructions', 'count'] \
        or d['period'] != 1:
    bad.append(f"sample type {d['sampleType']}, period {d['period']} {d['periodType']}")
maps = {m['id']: m for m in d['mappings']}
prog = [m for m in d['mappings'] if m['file'].endswith('/loops')]
if len(prog) != 1 or prog[0]['buildId'] != bid:
    bad.append(f"no mapping of loops with build-id {bid}: {d['mappings']}")
named = 0
for l in d['locations']:
    if len(l['lines']) != 1:
        bad.append(f'location {l}: one line expected')
        continue
    ln = l['lines'][0]
    if ln['name'] not in ('leaf', 'inner', 'apply', 'main', 'twice', 'negate'):
        continue
    named += 1
    m = maps.get(l['mapping'])
    if not m or not (m['start'] <= l['address'] < m['limit']) or m is not prog[0]:
        bad.append(f"{ln['name']}: address {l['address']:#x} not in loops' mapping")
        continue
    # addr2line of the entry, at its file address (a PIE's first segment is at 0)
    out = subprocess.run(['addr2line', '-f', '-e', 'loops', hex(l['address'] - m['start'])],
                         capture_output=True, text=True).stdout.split('\n')
    fn, where = out[0], out[1]
    file, line = where.rsplit(':', 1)
    if fn != ln['name'] or file != ln['file'] or int(line.split()[0]) != ln['line']:
        bad.append(f"{ln['name']}: line {ln['file']}:{ln['line']}, addr2line {fn} {where}")
if named < 4:
    bad.append(f'only {named} functions of loops.c located')
if bad:
    sys.exit('\n'.join(bad))
print(f'pprof: {len(d["locations"])} locations ({named} checked with addr2line), '
      f'{len(d["mappings"])} mappings')
PY
if command -v go >/dev/null 2>&1; then
	go tool pprof -list 'main' loops.pprof | grep -q main || { echo "go tool pprof -list failed"; exit 1; }
else
	echo "go is not installed: go tool pprof -list not checked"
fi
echo "pprof_locations: ok"
