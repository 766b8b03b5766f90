#!/usr/bin/env bash
# decode -j N on a hostile stream: one TNT packet repeated (six taken outcomes of a
# 31-instruction loop each) makes ~3 KB of text per byte of trace. Each chunk's text waits
# in memory for its turn; it must stay bounded (the producer blocks) rather than grow with
# the chunk: peak memory at -j 4 within a fixed margin of -j 1's, and the same output.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# sanitizer builds: freed buffers must not sit in a quarantine larger than the margin. A
# text buffer that doubles is copied and its old memory quarantined, so at 8 MB ASan alone
# brought -j 4 within 3-12 MB of the bound (61-75 MB against 73-77, a failure in about one
# run of ten); at 1 MB, 54-62 MB. The bound is the program's, not ASan's bookkeeping.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
python3 "$SRC/tests/tools/hostile_tnt.py" "$work"
# the output's size and digest, and the peak resident memory (KiB) of the decode
run() {
	python3 - "$@" <<'PY'
import hashlib, resource, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
h, n = hashlib.sha1(), 0
for b in iter(lambda: p.stdout.read(1 << 20), b''):
    h.update(b)
    n += len(b)
if p.wait():
    sys.exit('decode failed')
print(n, h.hexdigest(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
args=(--no-disasm --raw "$work/loop.bin:0x1000" "$work/hostile.pt")
# chunks from a multiple of 8 KiB on: two PSB periods, ~24 MB of text each, more than the
# budget on its own (4 KiB gives chunks of one period, each under it)
read -r size sum one < <(TK_IPT_CHUNK=8192 run "$TK" decode -j 1 "${args[@]}")
read -r size4 sum4 four < <(TK_IPT_CHUNK=8192 run "$TK" decode -j 4 "${args[@]}")
[ "$size $sum" = "$size4 $sum4" ] || { echo "-j 4 output differs from -j 1"; exit 1; }
[ "$size" -gt $((50 << 20)) ] || { echo "only $size bytes of text: not hostile enough"; exit 1; }
# the chunks waiting hold 16 MiB of text in all (the budget in flow_text.c) and 1 MiB more
# per worker, in buffers grown by doubling; plus the workers' decoders
limit=$((one + 48 * 1024))
[ "$four" -le "$limit" ] || { echo "-j 4 peaked at $four KiB, -j 1 at $one KiB (limit $limit)"; exit 1; }
echo "decode memory: ok ($size bytes of text; peak -j 1 $one KiB, -j 4 $four KiB)"
