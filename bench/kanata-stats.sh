#!/usr/bin/env bash
# tracekit stats on a big Kanata log (kanata-sample-2 tiled 50 times, ~178 MB, generated
# here by kanata-gen.sh so ids and cycles stay valid): throughput on one core (-j 1), the
# -j 2 speed-up, peak memory (against the file size), and the ratio to `wc -l` on the same
# file in the same run as the memory-speed yardstick.
# usage: bench/kanata-stats.sh [COPIES]   (env: BENCH_RUNS, TK, DATA)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
copies=${1:-50}
DATA=${DATA:-$here/../../shared/data}
[ -d "$DATA/kanata" ] || DATA=$here/../../../shared/data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$work/tiled.log
bash "$here/kanata-gen.sh" "$DATA/kanata/kanata-sample-2.log.gz" "$copies" "$log"
bytes=$(stat -c %s "$log")
half=$work/half.log
head -c $((bytes / 2)) "$log" | sed '$d' >"$half"   # a prefix, to show memory does not grow

cat "$log" >/dev/null  # warm the page cache for every contender alike
t_wc=$(bench_time wc -l "$log")
t_j1=$(bench_time "$TK" stats -q -j 1 "$log")
t_j2=$(bench_time "$TK" stats -q -j 2 "$log")
u_j1=$( { /usr/bin/time -f '%U' "$TK" stats -q -j 1 "$log" >/dev/null; } 2>&1 | tail -n 1)
m_j1=$(bench_peak_kb "$TK" stats -q -j 1 "$log")
m_half=$(bench_peak_kb "$TK" stats -q -j 1 "$half")
m_j2=$(bench_peak_kb "$TK" stats -q -j 2 "$log")

mbps() { echo "scale=0; $bytes / 1000000 / $1" | bc -l; }
echo "input: $copies x kanata-sample-2, $bytes bytes, $(wc -l <"$log") lines"
echo "wc -l:                 ${t_wc} s  ($(mbps "$t_wc") MB/s)"
echo "tracekit stats -j 1:   ${t_j1} s  ($(mbps "$t_j1") MB/s; user CPU ${u_j1} s = $(mbps "$u_j1") MB/s)"
echo "tracekit stats -j 2:   ${t_j2} s  ($(mbps "$t_j2") MB/s)"
echo "speed-up -j 2 / -j 1:  $(bench_ratio "$t_j1" "$t_j2")x"
echo "tracekit -j 1 / wc -l: $(bench_ratio "$t_j1" "$t_wc")x the time"
echo "peak memory -j 1:      ${m_j1} KiB (half the file: ${m_half} KiB)"
echo "peak memory -j 2:      ${m_j2} KiB"
echo "cores online:          $(nproc); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
