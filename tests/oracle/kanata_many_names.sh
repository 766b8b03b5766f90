#!/usr/bin/env bash
# A Perfetto timeline with more names than a sequence keeps a byte per name for (65,536):
# a Kanata log of 66,000 instructions with distinct labels on one simulated thread, then a
# second thread that reuses labels from the end of that range, twice, the first thread
# again, and a third. Past that bound the names a sequence was sent live in a set; wrong there, a slice
# names an iid its sequence never got (caught by the check below and by timeline_pair.py,
# which compares every slice with the Chrome timeline's), or a name goes out twice.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"

python3 - <<'PY'
out = ["Kanata\t0004", "C=\t0"]
n, ident = 66000, 0
def insn(thread, label):
    global ident
    out.extend((f"I\t{ident}\t{ident}\t{thread}", f"L\t{ident}\t0\t{label}", "C\t1",
                f"R\t{ident}\t{ident}\t0"))
    ident += 1
for i in range(n):
    insn(0, f"op {i}")
for rnd in range(2):                       # seen on a second sequence: both go to the sets
    for i in range(n - 200, n):
        insn(1, f"op {i}")
for i in range(n - 200, n):                # and on the first again: already sent there
    insn(0, f"op {i}")
for i in range(n - 200, n):                # a third: not yet (a set that says yes to all)
    insn(2, f"op {i}")
open("many.log", "w").write("\n".join(out) + "\n")
PY
"$TK" convert --to perfetto -o many.pftrace many.log
"$TK" convert --to chrome -o many.json many.log
protoc --decode=perfetto.Trace -I "$SRC/tests/tools" "$SRC/tests/tools/perfetto_trace.proto" \
	<many.pftrace >many.txt
python3 "$SRC/tests/tools/timeline_pair.py" many.txt many.json

python3 - "$SRC/tests/tools" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
sys.dont_write_bytecode = True
from timeline_pair import protoc_packets
sent, strings, twice, unknown, begins = {}, {}, 0, 0, 0
for p in protoc_packets("many.txt"):
    seq = p.get("trusted_packet_sequence_id")
    if p.get("sequence_flags") == "1":
        sent[seq], strings[seq] = {}, set()
    for idata in p.get("interned_data", []):
        for en in idata.get("event_names", []):
            names, seen = sent.setdefault(seq, {}), strings.setdefault(seq, set())
            twice += en["name"] in seen
            seen.add(en["name"])
            names[en["iid"]] = en["name"]
    for te in p.get("track_event", []):
        if te["type"] == "TYPE_SLICE_BEGIN":
            begins += 1
            unknown += te["name_iid"] not in sent.get(seq, {})
print(begins, "slices,", max(len(v) for v in sent.values()), "names on one sequence")
ok = begins == 66000 + 800 and twice == 0 and unknown == 0 and \
    max(len(v) for v in sent.values()) > 65536
print("ok" if ok else "FAIL", "names sent once per sequence, before use:", twice, "twice,",
      unknown, "unknown")
sys.exit(0 if ok else 1)
PY
