#!/usr/bin/env bash
# decode on a hostile stream: an OVF, then 400,000 CBR packets, then the FUP where tracing
# goes on. Where the [overflow] goes (before the events after it when the overflow resolves
# with packets off, else at the FUP) is decided once per overflow: asked at each event, the
# scan ahead made this stream quadratic (minutes; a linear decode takes milliseconds, so
# the bound below is only a hang check). Every [cbr] is told, then the one [overflow].
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=400000
python3 - "$work/ovf.pt" "$n" <<'PY'
import sys
out = bytearray(b'\x02\x82' * 8 + b'\x02\x23')    # PSB, PSBEND: tracing off
out += b'\x02\xf3'                                # OVF
out += b'\x02\x03\x10\x00' * int(sys.argv[2])     # CBR
out += b'\x7d' + (0x1000).to_bytes(6, 'little')   # FUP: tracing goes on at 0x1000
open(sys.argv[1], 'wb').write(out)
PY
status=0
timeout 60 "$TK" decode --no-disasm "$work/ovf.pt" >"$work/out" 2>"$work/err" || status=$?
[ "$status" != 124 ] || { echo "decode did not end in 60 s"; exit 1; }
[ "$status" = 1 ] || { echo "exit status $status, expected 1 (packets were lost)"; cat "$work/err"; exit 1; }
cbrs=$(grep -c '^\[cbr: 10\]$' "$work/out")
[ "$cbrs" = "$n" ] || { echo "$cbrs [cbr] lines, expected $n"; exit 1; }
[ "$(grep -c '^\[overflow at offset 0x12\]$' "$work/out")" = 1 ] || { echo "not one [overflow] at 0x12"; exit 1; }
[ "$(grep -n '^\[overflow' "$work/out" | cut -d: -f1)" = $((n + 1)) ] ||
	{ echo "[overflow] not after the [cbr] lines (it resolves at the FUP)"; exit 1; }
echo "overflow and events: ok ($n events after an OVF)"
