#!/usr/bin/env bash
# Throughput of the analysis layer: synthetic events into the profile builder (instruction
# level: blocks/calls/returns; function level: enter/exit) and into the Perfetto and Chrome
# timeline writers, on one core. There is no anchor tool for this figure: the targets are
# >= 50M events/s for profiling and >= 20M events/s for Perfetto (docs/PERFORMANCE.md).
#   bash bench/analysis-events.sh [EVENTS]   (default 100M; BENCH_RUNS runs, median)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
events=${1:-100000000}
runs=${BENCH_RUNS:-3}
lib="$here/build/libtracekit.a"
[ -f "$lib" ] || { echo "build first: make build" >&2; exit 2; }
bin=$(mktemp -d)/analysis-bench
trap 'rm -rf "$(dirname "$bin")"' EXIT
gcc -O2 -I"$here/include" -o "$bin" "$here/bench/analysis-bench.c" "$lib" \
	$TK_STATIC_LIBS

echo "analysis layer, $events synthetic events, median of $runs runs (M events/s per core, CPU time)"
for mode in prof-insn prof-func prof-insn-nodur prof-func-nodur perfetto chrome; do
	rates=()
	for ((i = 0; i < runs; i++)); do
		rates+=("$("$bin" "$mode" "$events" | sed -n 's/.*: \([0-9.]*\) M events\/s.*/\1/p')")
	done
	median=$(printf '%s\n' "${rates[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	peak=$(bench_peak_kb "$bin" "$mode" "$events")
	printf '  %-16s %6s M events/s   (runs: %s; peak %s MiB)\n' "$mode" "$median" "${rates[*]}" "$((peak / 1024))"
done
