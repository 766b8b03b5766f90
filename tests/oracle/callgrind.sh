#!/usr/bin/env bash
# profile --to callgrind, read by valgrind's callgrind_annotate: its program totals and each
# function's exclusive and inclusive costs (Ir = instructions, Ticks = the trace's clock)
# equal tracekit's own profile (--to csv for instructions, --to json for ticks; no Ticks
# event when a function's time was not measured, never a 0 that reads as measured), for a
# branch trace (record --btrace of examples/loops.c, examples/recursion.c: direct and mutual
# recursion, longjmp; and a C++ program) and an XRay log (recursion too);
# and the per-line instructions of the file (fl=/fi= and line numbers, read here without
# tracekit) equal profile --to lines.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# check NAME TRACE [profile options...]
check() {
	local name=$1 trace=$2
	shift 2
	"$TK" profile "$@" --to callgrind -o $name.cg "$trace"
	"$TK" profile "$@" --to csv -o $name.csv "$trace"
	"$TK" profile "$@" --to json -o $name.json "$trace"
	"$TK" profile "$@" --to lines -o $name.lines "$trace" 2>/dev/null || : > $name.lines
	callgrind_annotate --auto=no --threshold=100 $name.cg > $name.excl
	callgrind_annotate --auto=no --threshold=100 --inclusive=yes $name.cg > $name.incl
	python3 - $name <<'PY'
import collections, csv, json, re, sys
name = sys.argv[1]
def annotate(path, combine):
    """callgrind_annotate's table: events, totals, and per function the costs, combined
    over the file:function rows it splits a function into by source file (fi= lines)."""
    text = open(path).read()
    events = re.search(r'^Events shown:\s+(.*)$', text, re.M).group(1).split()
    num = r'([\d,]+)(?:\s+\([^)]*\))?\s+'
    rx = re.compile(r'^\s*' + num * len(events) + r'(\S.*)$')
    totals, funcs = None, collections.defaultdict(lambda: [0] * len(events))
    for line in text.splitlines():
        m = rx.match(line)
        if not m:
            continue
        vals = [int(m.group(i + 1).replace(',', '')) for i in range(len(events))]
        what = m.group(len(events) + 1)
        if what == 'PROGRAM TOTALS':
            totals = vals
        else:
            fn = what.split(':', 1)[1]
            funcs[fn] = [combine(a, b) for a, b in zip(funcs[fn], vals)]
    return events, totals, funcs
# exclusive: the rows add up; inclusive (the calls into the function): its row of the file
# the calls name holds them all, the other rows are parts of its own cost
events, totals, excl = annotate(name + '.excl', lambda a, b: a + b)
_, totals_i, incl = annotate(name + '.incl', max)
js = json.load(open(name + '.json'))
rows = {r['function']: r for r in csv.DictReader(open(name + '.csv'))}
ours = {f['name']: f for f in js['functions']}
bad = []
# a time the trace did not measure has no key in JSON; callgrind cannot say "not measured"
# (a cost left out is 0), so then the file has no Ticks event at all, and says why
unmeasured = [n for n, f in ours.items() if 'excl_ticks' not in f]
want_ev = (['Ir'] if js['summary']['instructions'] or unmeasured else []) + ([] if unmeasured else ['Ticks'])
if events != want_ev:
    bad.append(f'events {events}, expected {want_ev} ({len(unmeasured)} functions unmeasured)')
said = f'# no Ticks event: the times of {len(unmeasured)} functions were not measured\n'
if bool(unmeasured) != (said in open(name + '.cg').read()):
    bad.append('the file does not say why it has no Ticks event' if unmeasured else 'a Ticks note without cause')
tot = {'Ir': js['summary']['instructions'], 'Ticks': sum(f.get('excl_ticks', 0) for f in ours.values())}
for i, e in enumerate(events):
    if totals[i] != tot[e] or totals_i[i] != tot[e]:
        bad.append(f'{e} total {totals[i]} ({totals_i[i]} inclusive), profile {tot[e]}')
if set(excl) != set(ours) or set(rows) != set(ours):
    bad.append(f'functions differ: {sorted(set(excl) ^ set(ours))}')
for fn, f in ours.items():
    for i, e in enumerate(events):
        if e == 'Ir':
            want = (int(rows[fn]['excl_insns']), int(rows[fn]['incl_insns']))
        else:
            want = (f.get('excl_ticks', 0), f.get('incl_ticks', 0))
        got = (excl[fn][i], incl[fn][i])
        if got != want:
            bad.append(f'{fn}: {e} exclusive, inclusive {got}, profile {want}')
# per-line instructions, from the file itself
lines = collections.Counter()
fl = fi = None
skip = False
ir = events.index('Ir') if 'Ir' in events else None
for line in open(name + '.cg'):
    if line.startswith('fl='):
        fl = fi = line[3:].rstrip('\n')
    elif line.startswith(('fi=', 'fe=')):
        fi = line[3:].rstrip('\n')
    elif line.startswith('fn='):
        fi = fl
    elif line.startswith('calls='):
        skip = True
    elif line[:1].isdigit():
        f = line.split()
        if not skip and ir is not None and int(f[0]) > 0:
            lines[(fi, int(f[0]))] += int(f[1 + ir])
        skip = False
want = collections.Counter()
for row in open(name + '.lines'):
    m = re.match(r'\s*(\d+)\s+(\d+)\s+(\S+):(\d+)\s*$', row)
    if m:
        want[(m.group(3), int(m.group(4)))] += int(m.group(2))
if lines != want:
    diff = {k: (lines[k], want[k]) for k in set(lines) | set(want) if lines[k] != want[k]}
    bad.append(f'per-line instructions differ (callgrind, --to lines): {diff}')
if bad:
    sys.exit(name + ':\n  ' + '\n  '.join(bad))
print(f'{name}: {len(ours)} functions, {len(lines)} lines, {events} equal')
PY
}

cc -O2 -g -o loops "$SRC/examples/loops.c"
"$TK" record --btrace -q -o loops.tkbt -- ./loops >/dev/null
check loops loops.tkbt
cc -O2 -g -o recursion "$SRC/examples/recursion.c"
"$TK" record --btrace -q -o recursion.tkbt -- ./recursion >/dev/null
check recursion recursion.tkbt
# without a time stamp at each call's end (version 1 traces) most calls are unmeasured
TK_BTRACE_CALL_TIMES=0 "$TK" record --btrace -q -o recursion1.tkbt -- ./recursion >/dev/null
check recursion-v1 recursion1.tkbt
g++ -O1 -g -o names "$SRC/tests/data/demangle/names.cc"
"$TK" record --btrace -q -o names.tkbt -- ./names >/dev/null
check names names.tkbt

clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 \
	"$SRC/tests/data/xray/xray_prog.c" -o prog -lpthread
XRAY_BASIC_OPTIONS="func_duration_threshold_us=0" \
	XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic xray_logfile_base=./x-" \
	./prog basic 0 40 2>/dev/null
check xray "$(ls x-prog.* | head -n 1)" --instr-map prog
echo "callgrind: ok"
