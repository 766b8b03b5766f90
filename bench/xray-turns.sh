#!/usr/bin/env bash
# XRay logs of tiny runs (session 53): a basic-mode log whose two threads take turns record
# by record, so every run (a "buffer" to the decoder) holds one 32-byte record. Such a log
# cost a madvise per run (40-82 s for 38 MB) and the YAML in blocks half a gigabyte.
# Prints interleaved rounds (bench/rounds.sh) of info, profile, the timeline and the YAML
# at -j 1 and -j 2, with the madvise calls of each (strace).
# usage: bench/xray-turns.sh [CALLS]   (calls per thread, default 300000: a 38 MB log; env
#        TK, the build to measure; BENCH_RUNS rounds, default 5)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
calls=${1:-300000}
D=${BENCH_DIR:-$BENCH_SRC/build/bench-scaling}
mkdir -p "$D"
log=$D/turns-$calls.xray
[ -s "$log" ] || python3 - "$log" "$calls" <<'PY'
import struct, sys
def rec(typ, fid, tsc, tid):
    return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, tid, 77)
out, t = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0)], 100
for i in range(int(sys.argv[2])):
    for typ in (0, 1):
        for tid in (11, 12):
            out.append(rec(typ, 1 + i % 7, t, tid))
            t += 3
open(sys.argv[1], 'wb').write(b''.join(out))
PY
cmds=()
for j in 1 2; do
	cmds+=("info-j$j|$TK info -j $j $log"
	       "profile-j$j|$TK profile -j $j -o /dev/null $log"
	       "perfetto-j$j|$TK convert --to perfetto -j $j -o /dev/null $log"
	       "yaml-j$j|$TK convert --to xray-yaml -j $j -o /dev/null $log")
done
for spec in "${cmds[@]}"; do
	# shellcheck disable=SC2086  # the command is split at spaces on purpose
	n=$(strace -f -e trace=madvise ${spec#*|} 2>&1 >/dev/null | grep -c MADV_DONTNEED || true)
	echo "${spec%%|*}: $n madvise(MADV_DONTNEED) calls"
done
bash "$(dirname "$0")/rounds.sh" "${BENCH_RUNS:-5}" "${cmds[@]}"
