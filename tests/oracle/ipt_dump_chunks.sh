#!/usr/bin/env bash
# dump -j N of Intel PT: chunks cut at PSBs are dumped at once, each walk going on until it
# reaches a later chunk's start on a packet boundary. The text, the errors on stderr and the
# exit status must be -j 1's, for a recorded program's trace (raw, and as the branch trace
# it was recorded as: each thread's stream), and for copies of it damaged where seams fall:
# flipped bytes, runs of 02 82 longer than a PSB, a PSB cut short, a PTW whose payload
# starts a PSB that the walk in order finds only when it resyncs back into the packet.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
"$TK" record --btrace -o "$work/lj.tkbt" -- "$work/lj" >/dev/null 2>"$work/rec.err" ||
	{ echo "record failed"; cat "$work/rec.err"; exit 1; }
"$TK" convert --to ipt -q -o "$work/lj.pt" "$work/lj.tkbt"
[ "$("$TK" dump --no-offset "$work/lj.pt" | grep -c '^psb$')" -ge 10 ] ||
	{ echo "too few PSBs to test"; exit 1; }

python3 - "$work/lj.pt" "$work" <<'EOF'
import random, sys
d = open(sys.argv[1], 'rb').read()
w = sys.argv[2]
random.seed(5)
psb = bytes([2, 0x82]) * 8
a = bytearray(d)
for i in range(200, len(a) - 100, 700):
    a[i + random.randrange(100)] ^= 0xff
open(w + '/flip.pt', 'wb').write(a)
b, pos, k = bytearray(), 0, 0
while True:
    j = d.find(psb, pos + 1)
    if j < 0:
        break
    b += d[pos:j]
    k += 1
    if k % 2 == 0:
        b += bytes([2, 0x82])                     # nine pairs: a PSB at the run's end
    if k % 3 == 0:
        b += bytes([2, 0x82]) * 3 + b'\x99'       # a PSB cut short
    if k % 5 == 0:                                # PTW, its payload four pairs, six more
        b += bytes([2, 0x32]) + bytes([2, 0x82]) * 10 + b'\x99'
    pos = j
b += d[pos:]
open(w + '/runs.pt', 'wb').write(b)
open(w + '/garbage.pt', 'wb').write(bytes(random.getrandbits(8) for _ in range(999)) + d)
EOF

errs=0
for f in lj.pt flip.pt runs.pt garbage.pt lj.tkbt; do
	for opt in "" --no-offset -q; do
		want_rc=0; "$TK" dump -j 1 $opt "$work/$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
		[ -n "$opt" ] || [ -s "$work/want" ] || { echo "$f: dump -j 1 printed nothing"; exit 1; }
		for run in "2 300" "3 300" "2 4000" "3 64"; do
			read -r j chunk <<<"$run"
			rc=0; TK_IPT_CHUNK=$chunk "$TK" dump -j "$j" $opt "$work/$f" >"$work/got" \
				2>"$work/got.err" || rc=$?
			[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" &&
				cmp -s "$work/want.err" "$work/got.err" ||
				{ echo "$f: dump -j $j $opt in chunks of $chunk differs (exit $rc, -j 1 $want_rc)"
				  diff "$work/want" "$work/got" | head -5 || true
				  diff "$work/want.err" "$work/got.err" | head -5 || true; exit 1; }
		done
	done
	[ "$f" = lj.pt ] || [ "$f" = lj.tkbt ] || errs=$((errs + $(wc -l <"$work/want.err")))
done
# a failed write: exit 4 in chunks as in order
for j in 1 2; do
	rc=0; TK_IPT_CHUNK=300 "$TK" dump -j $j -o /dev/full "$work/flip.pt" 2>"$work/full.err" || rc=$?
	[ "$rc" = 4 ] && grep -q 'write failed' "$work/full.err" ||
		{ echo "dump -j $j into /dev/full: exit $rc"; cat "$work/full.err"; exit 1; }
done
# the damaged copies did damage: their dumps report errors
[ "$errs" -ge 20 ] || { echo "only $errs errors in the damaged copies"; exit 1; }
echo "ipt dump chunks: ok ($errs errors in the damaged copies)"
