#!/usr/bin/env bash
# A recorded branch trace converts like any other trace: folded stacks, pprof and a Perfetto
# timeline whose call counts are the ones examples/loops.c provably makes (inner 10 times,
# leaf 1000 times, twice 4, negate 3), and Chrome JSON that parses.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O0 -g -o "$work/loops" "$SRC/examples/loops.c"
"$TK" record --btrace -o "$work/l.tkbt" -- "$work/loops" >/dev/null 2>&1

"$TK" convert --to folded -o "$work/l.folded" "$work/l.tkbt"
grep -Eq ';inner;leaf 10000$' "$work/l.folded" || { echo "folded: no inner;leaf 10000"; cat "$work/l.folded"; exit 1; }

"$TK" convert --to perfetto -o "$work/l.pftrace" "$work/l.tkbt"
protoc --decode=perfetto.Trace -I "$SRC/tests/tools" "$SRC/tests/tools/perfetto_trace.proto" \
	<"$work/l.pftrace" >"$work/l.txt"
# Names are interned: map iid -> name, then count slice begins per name.
python3 - "$work/l.txt" <<'PY'
import re, sys, collections
text = open(sys.argv[1]).read()
names = dict((int(i), n) for i, n in re.findall(r'event_names \{\s*iid: (\d+)\s*name: "([^"]*)"', text))
begins = collections.Counter()
for m in re.finditer(r'track_event \{([^}]*)\}', text):
    body = m.group(1)
    if 'TYPE_SLICE_BEGIN' in body:
        iid = re.search(r'name_iid: (\d+)', body)
        begins[names.get(int(iid.group(1)), '?') if iid else re.search(r'name: "([^"]*)"', body).group(1)] += 1
want = {'inner': 10, 'leaf': 1000, 'twice': 4, 'negate': 3, 'apply': 7}
bad = {k: (begins.get(k), v) for k, v in want.items() if begins.get(k) != v}
if bad:
    sys.exit(f"perfetto slice counts differ (got, want): {bad}")
print("perfetto slices:", {k: begins[k] for k in want})
PY

"$TK" convert --to chrome -o "$work/l.json" "$work/l.tkbt"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["traceEvents"]) > 2000' "$work/l.json"
"$TK" convert --to pprof -o "$work/l.pb.gz" "$work/l.tkbt"
gzip -t "$work/l.pb.gz"
echo "btrace convert: ok"
