#!/usr/bin/env bash
# A basic-mode XRay log of 22 MB is indexed on the workers from 16 MB on (each finds the runs
# of one thread's records in its slice; runs that go on across a slice's seam are joined,
# then cut at 64K records from their starts). Checked against the serial scan (-j 1): the
# same runs per thread, records, messages and exit status at -j 2 and 3 with seams inside
# long runs of one thread, a run of records with argument payloads, a thread whose process
# changes, runs of one record, and a cut last record (named at its offset), from the file
# and from a pipe; the YAML the same at -j 1 and 2; a long run of records with arguments cut
# where llvm-xray's YAML still agrees.
set -euo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W/b.xray" <<'PY'
import struct, sys
def rec(typ, fid, tsc, tid, pid=77):
    return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, tid, pid)
def arg(fid, tid, pid, value):
    return struct.pack('<HHiIIQ8x', 1, 0, fid, tid, pid, value)
out, t = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0)], 100
def calls(tid, n, pid=77, args=False):
    global t
    for i in range(n // (3 if args else 2)):
        out.append(rec(0, 1 + i % 5, t, tid, pid))
        if args:
            out.append(arg(1 + i % 5, tid, pid, i))
        out.append(rec(1, 1 + i % 5, t + 1, tid, pid))
        t += 2
calls(11, 200000)                      # records [0, 200k): one long run
for i in range(50000):                 # [200k, 300k): runs of one record
    for tid in (11, 12):
        out.append(rec(i % 2, 1, t, tid))
    t += 1
calls(13, 120000, args=True)           # [300k, 420k): the 2-way seam at 350k
calls(12, 50000, pid=78)               # [420k, 470k): the 3-way seam at 466,666
calls(11, 230000)
open(sys.argv[1], 'wb').write(b''.join(out) + b'\x01' * 17)   # and a cut record
PY
cd "$W"
fail=0
for j in 1 2 3; do
	set +e
	"$TK" info -j $j b.xray >info$j.out 2>info$j.err
	echo $? >st$j
	set -e
done
# the cut record's offset (17 bytes before the end) and the records before it all counted
cut=$(printf '0x%x' $(($(stat -c %s b.xray) - 17)))
# (and no argument lost where a long run is cut at 64K records: thread 13's run of 120,000)
grep -q 'records: *660000 (660000 function, .*, 40000 call arguments)' info1.out &&
	grep -q "offset $cut: truncated record" info1.err && ! grep -q 'argument record' info1.err &&
	[ "$(cat st1)" = 1 ] ||
	{ echo "FAIL: -j 1 does not count every record or name the cut at $cut"; cat info1.out info1.err; fail=1; }
for j in 2 3; do
	if cmp -s info1.out info$j.out && cmp -s info1.err info$j.err && cmp -s st1 st$j; then
		echo "ok: info -j $j = -j 1"
	else
		echo "FAIL: info -j $j differs from -j 1"
		diff info1.out info$j.out | head -10 || true
		diff info1.err info$j.err | head -5 || true
		fail=1
	fi
done
# from a pipe (no file to pread: the slices read the log in memory)
"$TK" info -j 1 - <b.xray >pipe1.out 2>pipe1.err || true
"$TK" info -j 2 - <b.xray >pipe2.out 2>pipe2.err || true
if cmp -s pipe1.out pipe2.out && cmp -s pipe1.err pipe2.err && grep -q 'records: *660000 ' pipe1.out; then
	echo "ok: info -j 2 = -j 1 from a pipe"
else
	echo "FAIL: info from a pipe differs at -j 2"
	diff pipe1.out pipe2.out | head -5 || true
	fail=1
fi
for j in 1 2; do "$TK" convert --to xray-yaml -j $j -o y$j b.xray 2>/dev/null || true; done
cmp -s y1 y2 && [ -s y1 ] && echo "ok: YAML -j 2 = -j 1" || { echo "FAIL: YAML differs"; fail=1; }
# A run of 120,000 records cut at 64K records: the cut does not fall between a function
# record and its argument record (llvm-xray's YAML, record for record; it used to be cut
# there, the argument reported as damage and lost)
python3 - "$W/args.xray" <<'PY'
import struct, sys
out, t = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0)], 100
for i in range(40000):
    f = 1 + i % 5
    out += [struct.pack('<HBBiQII8x', 0, 1, 0, f, t, 13, 77), struct.pack('<HHiIIQ8x', 1, 0, f, 13, 77, i),
            struct.pack('<HBBiQII8x', 0, 1, 1, f, t + 1, 13, 77)]
    t += 2
open(sys.argv[1], 'wb').write(b''.join(out))
PY
llvm-xray-16 convert -f yaml args.xray >ref.yaml
for j in 1 2; do
	if "$TK" convert --to xray-yaml -j $j args.xray >a$j.yaml 2>a$j.err && cmp -s ref.yaml a$j.yaml &&
		[ ! -s a$j.err ]; then
		echo "ok: a long run with arguments: the YAML of llvm-xray at -j $j"
	else
		echo "FAIL: a long run with arguments differs from llvm-xray at -j $j"
		head -3 a$j.err
		fail=1
	fi
done
exit $fail
