#!/usr/bin/env bash
# xtrace reading speed: `tracekit info` (token walk: every item, counts per token) and
# `tracekit stats` (instruction mix, branches, memory, footprint) on a generated trace of
# XTRACE_MB (default 520) MB, one core and two (-j 2, chunks at snapshot positions).
# Anchor: `cat FILE >/dev/null` from the page cache (what reading alone costs).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
MB=${XTRACE_MB:-520}
DIR=${BENCH_TMP:-/tmp}/tk-xtrace-bench
insn=$DIR/xtrace.1.1.hint9.xinsndata.bin
if [ ! -f "$insn" ] || [ "$(stat -c %s "$insn")" -lt $((MB * 1000000)) ]; then
	python3 "$(dirname "$0")/xtrace-gen.py" "$DIR" "$MB" >/dev/null
fi
bytes=$(stat -c %s "$insn")
cat "$insn" >/dev/null  # into the page cache
# Median CPU seconds (user + sys) of BENCH_RUNS runs: on a shared machine wall time mostly
# measures the other jobs; CPU time of a one-thread run is what one core needs.
cpu_time() {
	local i
	for ((i = 0; i < BENCH_RUNS; i++)); do
		/usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{ print $1 + $2 }'
	done | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.4f\n", m}'
}
gbs() { echo "scale=2; $bytes / $1 / 1000000000" | bc -l; }
t_cat=$(bench_time cat "$insn")
t_info1=$(bench_time "$TK" info -j 1 "$insn")
t_info2=$(bench_time "$TK" info -j 2 "$insn")
t_stats1=$(bench_time "$TK" stats -j 1 "$insn")
t_stats2=$(bench_time "$TK" stats -j 2 "$insn")
echo "input: $bytes bytes, $("$TK" info -j 2 "$insn" | sed -n 's/.*instructions: \([0-9]*\).*/\1/p') instructions"
printf '%-26s %8s s  %6s GB/s\n' "cat" "$t_cat" "$(gbs "$t_cat")"
printf '%-26s %8s s  %6s GB/s\n' "info -j 1 (token walk)" "$t_info1" "$(gbs "$t_info1")"
printf '%-26s %8s s  %6s GB/s  x%s\n' "info -j 2" "$t_info2" "$(gbs "$t_info2")" "$(bench_ratio "$t_info1" "$t_info2")"
printf '%-26s %8s s  %6s GB/s\n' "stats -j 1" "$t_stats1" "$(gbs "$t_stats1")"
printf '%-26s %8s s  %6s GB/s  x%s\n' "stats -j 2" "$t_stats2" "$(gbs "$t_stats2")" "$(bench_ratio "$t_stats1" "$t_stats2")"
c_info=$(cpu_time "$TK" info -j 1 "$insn")
c_stats=$(cpu_time "$TK" stats -j 1 "$insn")
printf '%-26s %8s s  %6s GB/s per CPU second\n' "info -j 1, CPU time" "$c_info" "$(gbs "$c_info")"
printf '%-26s %8s s  %6s GB/s per CPU second\n' "stats -j 1, CPU time" "$c_stats" "$(gbs "$c_stats")"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "peak memory: info -j 1 $(bench_peak_kb "$TK" info -j 1 "$insn") KiB, stats -j 2 $(bench_peak_kb "$TK" stats -j 2 "$insn") KiB"
