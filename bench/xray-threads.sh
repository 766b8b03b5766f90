#!/usr/bin/env bash
# XRay YAML of a log of many short-lived threads: bench/scaling.sh's FDR log (4 threads,
# ~2,340 buffers of 64 KiB) with every buffer's thread id made its own, so that each
# thread has one buffer and only a few overlap in time. The merge by TSC must hold the
# threads whose buffers overlap, not all of them (docs/PERFORMANCE.md, session 88).
# Prints, for BENCH_RUNS rounds of -j 1 and -j 2 (alternating), wall, user and system
# seconds, page faults and peak resident memory; the same for the 4-thread log once.
# The log's exits without their enters make tracekit exit 1 (data lost): expected here.
# usage: bench/xray-threads.sh   (env TK, BENCH_RUNS (default 3), BENCH_DIR as scaling.sh's)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RUNS=${BENCH_RUNS:-3}
D=${BENCH_DIR:-$BENCH_SRC/build/bench-scaling}
mkdir -p "$D"
cd "$D"
bench_xray_fdr fdr.xray xray_prog 65536 2400 3 140000
if [ ! -s threads.xray ]; then
	"$TK" dump fdr.xray | awk '/<Thread ID:/ { print $1 }' >threads.offs
	python3 - fdr.xray threads.offs threads.xray <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
for k, line in enumerate(open(sys.argv[2])):
    o = int(line, 16)
    assert d[o] == 0x01, hex(o)                  # a NewBuffer metadata record
    d[o + 1:o + 5] = struct.pack('<i', 100000 + k)
open(sys.argv[3] + '.tmp', 'wb').write(d)
PY
	mv threads.xray.tmp threads.xray
fi
echo "$(wc -l <threads.offs) threads; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%H:%MZ); $TK"
one() {   # LABEL FILE J
	/usr/bin/time -f "$1 -j $3: %e s wall, %U s user, %S s system, %R faults, %M KB" \
		"$TK" convert --to xray-yaml -j "$3" -o /dev/null "$2" 2>&1 | grep -v '^tracekit:\|^Command exited' || true
}
for r in $(seq "$RUNS"); do
	one threads threads.xray 1
	one threads threads.xray 2
done
one "4 threads" fdr.xray 1
one "4 threads" fdr.xray 2
