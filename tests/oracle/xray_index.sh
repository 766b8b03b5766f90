#!/usr/bin/env bash
# The FDR index on several threads (trace_index.c, index_fdr_parallel): on a log of 16 MB
# and more the workers walk slices of the buffers (four each), and the slices are kept only
# when each walk ends where the next began. The index, the profile and the damage reports at -j 2
# must be those of the serial walk (-j 1) on an intact log, on a log with a damaged
# BufferExtents, and on a log whose custom-event payload holds a plausible buffer start
# right after the point where -j 2 cuts (a walk that trusted it would invent a buffer).
set -uo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
python3 - "$W" <<'PY'
import struct, sys
out = sys.argv[1]
NEWBUF, NEWCPU, WALL, CUSTOM, EXTENTS, PID = 0, 2, 4, 5, 7, 9
def meta(kind, fmt='', *vals, payload=b''):
    body = struct.pack('<' + fmt, *vals) if fmt else b''
    return bytes([kind << 1 | 1]) + body + b'\0' * (15 - len(body)) + payload
def fn(typ, fid, delta):
    return struct.pack('<II', fid << 4 | typ << 1, delta)
hdr = struct.pack('<HHIQQ8x', 5, 1, 3, 2000000000, 0)
NBUF, PAIRS = 280, 4000          # 280 buffers of ~64 KiB: 18 MB
def body(i, payload=None):
    b = meta(NEWBUF, 'i', 100 + i % 3) + meta(WALL, 'QI', 1700000000 + i, 10 * i)
    b += meta(PID, 'i', 4242) + meta(NEWCPU, 'HQ', i % 2, 100000 * (i + 1))
    recs = []
    for k in range(PAIRS):
        f = 1 + (i + k) % 7
        recs.append(fn(0, f, 3) + fn(1, f, 5))
        if payload is not None and k == 8:
            recs.append(meta(CUSTOM, 'ii', len(payload), 1, payload=payload))
    return b + b''.join(recs)
def log(bodies, bad=None):
    parts = [hdr]
    for i, b in enumerate(bodies):
        size = len(b) if i != bad else 0x7fffffffffff0000
        parts.append(meta(EXTENTS, 'Q', size) + b)
    return b''.join(parts)
bodies = [body(i) for i in range(NBUF)]
open(out + '/intact.xray', 'wb').write(log(bodies))
open(out + '/damaged.xray', 'wb').write(log(bodies, bad=NBUF // 2 + 3))
# -j 2 cuts into 8 slices, the fifth at 32 + (n - 32) // 8 * 4: put a fake BufferExtents +
# NewBuffer just after it
n = len(log(bodies)) + 16 + 48
cut = 32 + (n - 32) // 8 * 4
fake = meta(EXTENTS, 'Q', 64) + meta(NEWBUF, 'i', 999) + b'\0' * 16
start = 32
for i, b in enumerate(bodies):
    if start + 16 + len(b) > cut:
        break
    start += 16 + len(b)
# the custom event sits after 8 pairs: 64 header bytes + 9 * 16 bytes into buffer i
off_payload = start + 16 + 64 + 9 * 16 + 16
pad = cut - off_payload + 3 if cut > off_payload else 0
payload = b'x' * pad + fake
bodies[i] = body(i, payload)
data = log(bodies)
assert data.find(fake) >= 32 + (len(data) - 32) // 8 * 4, "the fake start must follow the cut"
open(out + '/fake.xray', 'wb').write(data)
PY
for f in intact damaged fake; do
	for j in 1 2; do
		"$TK" profile -j $j --to csv "$W/$f.xray" >"$W/$f.$j.csv" 2>"$W/$f.$j.err"
		echo "exit $?" >>"$W/$f.$j.err"
		"$TK" info -j $j "$W/$f.xray" >"$W/$f.$j.info" 2>&1
	done
	for j in 2; do
		if cmp -s "$W/$f.1.csv" "$W/$f.$j.csv" && cmp -s "$W/$f.1.err" "$W/$f.$j.err" &&
			cmp -s "$W/$f.1.info" "$W/$f.$j.info"; then
			echo "ok: $f: -j $j = -j 1 ($(grep -c . "$W/$f.$j.csv") rows, $(tail -n 1 "$W/$f.$j.err"))"
		else
			echo "FAIL: $f: -j $j differs from -j 1"
			diff "$W/$f.1.err" "$W/$f.$j.err" | head -5
			diff "$W/$f.1.info" "$W/$f.$j.info" | head -5
			fail=1
		fi
	done
done
# the intact log has its 280 buffers; the damaged one is reported
grep -q "buffers: *280" "$W/intact.2.info" || { echo "FAIL: intact log: $(grep buffers: "$W/intact.2.info")"; fail=1; }
grep -q "exit 1" "$W/damaged.2.err" || { echo "FAIL: damaged log exits $(tail -n 1 "$W/damaged.2.err")"; fail=1; }
exit $fail
