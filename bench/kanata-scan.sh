#!/usr/bin/env bash
# The Kanata scan that -j N adds (kn_prefix_scan) on one thread, against a plain read of
# the same mapping, on bench/scaling.sh's in-flight log (docs/PERFORMANCE.md, session 79).
# usage: bench/kanata-scan.sh [RUNS]   (env BENCH_DIR as bench/scaling.sh's)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
D=${BENCH_DIR:-$BENCH_SRC/build/bench-scaling}
mkdir -p "$D"
cd "$D"
[ -s inflight.log ] || python3 "$BENCH_SRC/bench/kanata-inflight.py" 151 inflight.log
# (-O3: the plain read vectorized, as the scan is)
# shellcheck disable=SC2086  # the libraries are words
gcc -O3 -o kanata-scan "$BENCH_SRC/bench/kanata-scan.c" -I"$BENCH_SRC/lib" -I"$BENCH_SRC/include" \
	"$BENCH_SRC/build/libtracekit.a" $TK_STATIC_LIBS
./kanata-scan inflight.log "${1:-5}"
