#!/usr/bin/env bash
# Kanata -> Perfetto protobuf and Chrome JSON through the shared timeline writer, checked
# against facts of the log itself: sample-2 (RSD, Dhrystone) has 4,041 instructions,
# 3,626 retired, 374 flushed, 41 in flight at the end; every S line is one stage slice.
# The Perfetto stream is decoded with protoc against tests/tools/perfetto_trace.proto and
# its slices replayed: every end closes an open begin on its track, stages nest inside
# their instruction, timestamps never go back on a sequence, every track has a parent, no
# name is interned twice on a sequence (a label hashed ahead must find its earlier twin).
set -euo pipefail
: "${TK:?}" "${SRC:?}"
DATA=${DATA:-$SRC/../shared/data}
# worktrees live one level deeper than the main checkout
[ -d "$DATA/kanata" ] || DATA=$SRC/../../shared/data
LOG=$DATA/kanata/kanata-sample-2.log.gz
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"

stages=$(zcat "$LOG" | grep -c '^S')
"$TK" convert --to perfetto -o s2.pftrace "$LOG"
protoc --decode=perfetto.Trace -I "$SRC/tests/tools" "$SRC/tests/tools/perfetto_trace.proto" \
	<s2.pftrace >s2.txt
"$TK" convert --to chrome -o s2.json "$LOG"

python3 - "$stages" "$SRC/tests/tools" <<'PY'
import json, re, sys
stages = int(sys.argv[1])
sys.path.insert(0, sys.argv[2])
sys.dont_write_bytecode = True   # nothing written into the source tree
from timeline_pair import protoc_packets
fail = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fail.append(what)

packets = protoc_packets("s2.txt")   # protoc's text format: packets with nested messages

names, tracks, seq_time = {}, {}, {}
open_, depth0, nested, ends = {}, [], 0, 0
back = bad_end = bad_nest = 0
for p in packets:
    seq = p.get("trusted_packet_sequence_id")
    if p.get("sequence_flags") == "1":
        seq_time[seq] = 0
    for td in p.get("track_descriptor", []):
        tracks[td["uuid"]] = td
    for idata in p.get("interned_data", []):
        for en in idata.get("event_names", []):
            names[(seq, en["iid"])] = en["name"]
    for te in p.get("track_event", []):
        ts = seq_time[seq] + int(p.get("timestamp", "0"))
        if ts < seq_time[seq]:
            back += 1
        seq_time[seq] = ts
        st = open_.setdefault(te["track_uuid"], [])
        if te["type"] == "TYPE_SLICE_BEGIN":
            nm = names[(seq, te["name_iid"])]
            st.append((nm, ts))
            if len(st) == 1:
                depth0.append((te["track_uuid"], nm))
            elif len(st) == 2:
                nested += 1
            else:
                bad_nest += 1
        else:
            if not st or st[-1][1] > ts:
                bad_end += 1
            else:
                st.pop()
                ends += 1

check(all(not s for s in open_.values()), "every slice is closed")
check(bad_end == 0 and back == 0, "ends close an open slice, time never goes back on a sequence")
check(bad_nest == 0, "at most two levels: instruction and stage")
def rooted(u):
    for _ in range(8):
        if u == "1":
            return True
        if u not in tracks or "parent_uuid" not in tracks[u] and "process" not in tracks[u]:
            return False
        u = tracks[u].get("parent_uuid", "1")
    return False
check(all(rooted(u) for u in open_), "every track has a descriptor under the process")
lane0 = {u for u, t in tracks.items() if re.fullmatch(r"row \d+ lane 0", t.get("name", ""))}
insns = [nm for u, nm in depth0 if u in lane0]
flushed = sum(nm.endswith(" (flushed)") for nm in insns)
inflight = sum(nm.endswith(" (in flight)") for nm in insns)
print(len(insns), flushed, inflight, nested, len(depth0) - len(insns))
check(len(insns) == 4041, "4041 instruction slices")
check(flushed == 374, "374 flushed")
check(inflight == 41 and len(insns) - flushed - inflight == 3626, "41 in flight, 3626 retired")
check(nested + len(depth0) - len(insns) == stages, "one stage slice per S line (%d)" % stages)
check(any("jal zero" in nm for nm in insns), "instructions named by their labels")
per_seq = {}
for (seq, iid), nm in names.items():
    per_seq.setdefault(seq, []).append(nm)
repeated = sum(len(v) - len(set(v)) for v in per_seq.values())
labels = {nm for nm in insns if not nm.endswith(")")}
check(repeated == 0 and len(labels) < len(insns) - flushed - inflight,
      "a name is interned once per sequence, though labels repeat (%d)" % repeated)

ev = json.load(open("s2.json"))["traceEvents"]
xi = [e for e in ev if e["ph"] == "X" and "args" in e]
xs = [e for e in ev if e["ph"] == "X" and "args" not in e]
check(len(xi) == 4041 and sum(e["name"].endswith(" (flushed)") for e in xi) == 374,
      "Chrome: 4041 instruction slices, 374 flushed")
check(len(xs) == stages, "Chrome: one stage slice per S line")
byrow = {}
for e in xi:
    byrow.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
over = sum(1 for r in byrow.values() for a, b in zip(sorted(r), sorted(r)[1:]) if b[0] < a[1])
check(over == 0, "Chrome: instructions on one row never overlap")
sys.exit(1 if fail else 0)
PY
