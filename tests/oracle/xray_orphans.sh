#!/usr/bin/env bash
# Exits without their enters in the middle of an FDR log (the runtime lost a thread's
# records): decoded in chunks, the first such exit is only known at the merge, after the
# depth the chunks before carried in. However deep that depth, -j 2 names the same offset
# as -j 1: the first exit with nothing left to end, computed here from the bytes.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$SRC/tests/data/xray" "$W" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
out = sys.argv[2]
sys.argv = ['mklogs', out + '/hand']
import mklogs as M   # (writes its own logs into out/hand as it loads)
F = M.Fdr(5, False)
bufs, tsc = [], 1000
def buf(body):
    global tsc
    tsc += 1000
    return F.buffer(F.start(7, 1, 1700000000, len(bufs), cpu=0, tsc=tsc) + body)
pair = F.f(M.ENTER, 2, 1) + F.f(M.EXIT, 2, 1)
bufs.append(buf(F.f(M.ENTER, 1, 1) * 6))      # six calls begun: depth 6 at the seam
for _ in range(3):
    bufs.append(buf(pair))
# eight exits: six end those calls, the seventh and eighth have nothing to end
head = F.start(7, 1, 1700000000, len(bufs), cpu=0, tsc=tsc + 1000)
bufs.append(buf(F.f(M.EXIT, 1, 1) * 8))
for _ in range(11):
    bufs.append(buf(pair))
log = M.hdr(5, 1, False) + b''.join(bufs)
# the seventh exit: after the header, the buffers before, the extents record and the
# buffer's start records, six exits
at = 32 + sum(len(b) for b in bufs[:4]) + 16 + len(head) + 6 * 8
open(out + '/mid.xray', 'wb').write(log)
open(out + '/want', 'w').write(hex(at) + '\n')
PY
want=$(cat "$W/want")
for j in 1 2 4; do
	rc=0; "$TK" profile -j "$j" --to csv -o /dev/null "$W/mid.xray" 2>"$W/err.$j" || rc=$?
	[ "$rc" = 1 ] || { echo "-j $j: exit $rc, not 1"; cat "$W/err.$j"; exit 1; }
	grep -q "2 exits without their enters" "$W/err.$j" || { echo "-j $j: not 2 orphan exits"; cat "$W/err.$j"; exit 1; }
	grep -q "first at offset $want)" "$W/err.$j" ||
		{ echo "-j $j: the first exit without an enter is at $want"; cat "$W/err.$j"; exit 1; }
done
cmp -s "$W/err.1" "$W/err.2" && cmp -s "$W/err.1" "$W/err.4" || { echo "stderr differs by -j"; exit 1; }
echo "xray_orphans: the first orphan exit at $want with -j 1, 2 and 4"
