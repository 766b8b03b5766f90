#!/usr/bin/env bash
# XRay FDR damage that must lose no more than it must (issue 31 items 13, 14, 28):
#  - a BufferExtents size damaged past the end of the file (buffer 6 of 18) is read up to
#    the next buffer: the other 17 buffers give exactly the intact log's records;
#  - extents 16 bytes short per typed event (LLVM's runtime up to 16) are recognised and
#    the buffer read whole: the same records as llvm-xray gives for the corrected log;
#  - every warning names the file.
set -euo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W" <<'PY'
import struct, sys
out = sys.argv[1]
def meta(kind, fmt='', *vals, payload=b''):
    body = struct.pack('<' + fmt, *vals) if fmt else b''
    return bytes([kind << 1 | 1]) + body + b'\0' * (15 - len(body)) + payload
def fn(typ, fid, delta):
    return struct.pack('<II', fid << 4 | typ << 1, delta)
NEWBUF, NEWCPU, WALL, EXTENTS, TYPED, PID = 0, 2, 4, 7, 8, 9
hdr = struct.pack('<HHIQQ8x', 5, 1, 3, 2000000000, 0)
def buffers(typed):
    bufs = []
    for i in range(18):
        tid = 100 + i % 3
        b = meta(NEWBUF, 'i', tid) + meta(WALL, 'QI', 1700000000 + i, 10 * i) + meta(PID, 'i', 4242)
        b += meta(NEWCPU, 'HQ', i % 4, 1000 * (i + 1))
        ntyped = 0
        for k in range(4):
            b += fn(0, 1 + (i + k) % 5, 3) + fn(0, 7, 2)
            if typed and k % 2:
                data = b'ev%02d%d' % (i, k)
                b += meta(TYPED, 'iiH', len(data), 1, 5, payload=data)
                ntyped += 1
            b += fn(1, 7, 4) + fn(1, 1 + (i + k) % 5, 1)
        bufs.append((b, ntyped))
    return bufs
def log(bufs, size_of):
    return hdr + b''.join(meta(EXTENTS, 'Q', size_of(i, b, t)) + b for i, (b, t) in enumerate(bufs))
plain = buffers(False)
open(out + '/intact.xray', 'wb').write(log(plain, lambda i, b, t: len(b)))
# buffer 6 of 18: its size's low four bytes overwritten with 0x7fffffff
open(out + '/bad-size.xray', 'wb').write(
    log(plain, lambda i, b, t: len(b) | 0x7fffffff if i == 5 else len(b)))
# the last buffer's size past the end: the file was cut, nothing follows
open(out + '/cut.xray', 'wb').write(log(plain, lambda i, b, t: len(b) + 64 if i == 17 else len(b)))
typed = buffers(True)
open(out + '/typed.xray', 'wb').write(log(typed, lambda i, b, t: len(b)))
open(out + '/typed-short.xray', 'wb').write(log(typed, lambda i, b, t: len(b) - 16 * t))
# function id 0 in buffers 2 (thread 101) and 4 (thread 100): read thread by thread, the
# later one in the file is met first
two = [(b.replace(fn(0, 7, 2), fn(0, 0, 2), 1) if i in (1, 3) else b, t)
       for i, (b, t) in enumerate(plain)]
open(out + '/two-bad.xray', 'wb').write(log(two, lambda i, b, t: len(b)))
PY
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
cd "$W"
"$TK" convert --to xray-yaml intact.xray >intact.yaml
# 13: only the damaged size is lost, not the 12 buffers after it
st=0; "$TK" convert --to xray-yaml bad-size.xray >bad.yaml 2>bad.err || st=$?
check "damaged extents: same records as the intact log" "cmp -s intact.yaml bad.yaml"
check "damaged extents: exit 1" "[ $st = 1 ]"
check "damaged extents: the message names the file and offset" \
	"grep -q '^tracekit: warning: bad-size.xray: offset 0x[0-9a-f]*: BufferExtents size is past the end' bad.err"
check "damaged extents: no absurd byte count" "! grep -q '[0-9]\{10\} bytes' bad.err"
st=0; "$TK" info bad-size.xray >info.out 2>info.err || st=$?
check "damaged extents: info reports it, exit 1" "[ $st = 1 ] && grep -q 'bad-size.xray: offset 0x' info.err"
st=0; "$TK" dump bad-size.xray >dump.out 2>dump.err || st=$?
check "damaged extents: dump names the file, exit 1" \
	"[ $st = 1 ] && grep -q '^tracekit: warning: bad-size.xray: offset 0x' dump.err && ! grep -q '[0-9]\{10\} bytes' dump.err"
# a size past the end with nothing after it is a cut file: what is missing is counted
st=0; "$TK" convert --to xray-yaml cut.xray >cut.yaml 2>cut.err || st=$?
check "cut file: the records present are read" "cmp -s intact.yaml cut.yaml"
check "cut file: 64 bytes missing, exit 1" "[ $st = 1 ] && grep -q 'cut.xray: .*64 bytes' cut.err"
# 14: extents short by 16 bytes per typed event
st=0; "$TK" convert --to xray-yaml typed-short.xray >short.yaml 2>short.err || st=$?
"$TK" convert --to xray-yaml typed.xray >typed.yaml
check "short extents: every record read" "cmp -s typed.yaml short.yaml"
check "short extents: warned, exit 0" \
	"[ $st = 0 ] && grep -q 'typed-short.xray: offset 0x[0-9a-f]*: BufferExtents is 16 bytes short per typed event' short.err"
if command -v llvm-xray-16 >/dev/null; then
	llvm-xray-16 convert -f yaml typed.xray >ref.yaml
	check "short extents: = llvm-xray on the corrected log" "cmp -s ref.yaml short.yaml"
fi
st=0; "$TK" dump typed-short.xray >/dev/null 2>dshort.err || st=$?
check "short extents: dump reads it whole" "[ $st = 0 ] && ! grep -q Error dshort.err"
# 28: a record-level warning names the file too
if [ -n "${SRC:-}" ]; then
	cp "$SRC/tests/data/xray/bad-kind.xray" .
	"$TK" profile bad-kind.xray >/dev/null 2>kind.err || true
	check "record damage: the warning names the file" \
		"grep -q '^tracekit: warning: bad-kind.xray: offset 0x[0-9a-f]*: unknown metadata record kind' kind.err"
fi
# gaps met out of the file's order: the same messages and summary at every -j, the
# summary's offsets in the file's order
for j in 1 2 3; do
	st=0; "$TK" info -j $j two-bad.xray >info$j.out 2>info$j.err || st=$?
	echo "exit $st" >>info$j.err
	"$TK" profile -j $j -o /dev/null two-bad.xray 2>prof$j.err || true
done
check "gaps met out of order: info the same at -j 1, 2, 3" \
	"cmp -s info1.out info2.out && cmp -s info1.out info3.out && cmp -s info1.err info2.err && cmp -s info1.err info3.err"
check "gaps met out of order: profile's messages the same at -j 1, 2, 3" \
	"cmp -s prof1.err prof2.err && cmp -s prof1.err prof3.err"
offs=$(sed -n 's/.*2 damaged or lost regions.*first at offset \(0x[0-9a-f]*\), \(0x[0-9a-f]*\)).*/\1 \2/p' info1.err)
check "gaps met out of order: the summary lists the lower offset first ($offs)" \
	"[ -n \"\$offs\" ] && [ \$((\${offs% *})) -lt \$((\${offs#* })) ] && grep -q 'exit 1' info1.err"
[ $fail -eq 0 ] && echo "xray damage: all passed"
exit $fail
