#!/usr/bin/env bash
# Intel PT packet layer vs libipt on one >= 100 MB stream written by libipt's encoder
# (realistic mix: TNT-heavy, a PSB every 4 KiB):
#   1. packet walk: tracekit (tk_ipt_pkt_next_batch; and `tracekit dump --quiet`) vs a
#      small program walking with libipt's pt_pkt_next
#   2. dump: `tracekit dump` vs pt_pkt_next + ptdump-style printf (the anchor; Debian
#      ships no ptdump binary), to /dev/null (formatting rate) and to a file
#   3. PSB search: tracekit vs libipt's pt_pkt_sync_forward vs plain read bandwidth
# Usage: bench/ipt-packets.sh [MB]   (env BENCH_RUNS, default 5)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
MB=${1:-128}
WORK=${BENCH_WORK:-$SRC/build/bench-ipt}
mkdir -p "$WORK"
TOOLS=$WORK/ipt-tools
gcc -O2 -Wall -I "$SRC/include" -I "$SRC/lib" -I "$SRC/tests" "$SRC/bench/ipt-tools.c" \
	"$SRC/build/libtracekit.a" -lipt -o "$TOOLS"
PT=$WORK/stream-${MB}m.pt
[ -f "$PT" ] || "$TOOLS" gen "$PT" "$MB"
BYTES=$(stat -c %s "$PT")
echo "input: $PT, $BYTES bytes"

# The two dumps must agree before their speed means anything.
"$TK" dump -o "$WORK/tk.txt" "$PT"
"$TOOLS" ptdump "$PT" >"$WORK/anchor.txt"
cmp -s "$WORK/tk.txt" "$WORK/anchor.txt" && echo "dump output: identical to the anchor's" \
	|| { echo "dump output differs from the anchor's"; exit 1; }
[ "$("$TOOLS" tkwalk "$PT")" = "$("$TOOLS" walk "$PT")" ] || { echo "packet counts differ"; exit 1; }

mbs() { echo "scale=0; $BYTES / $1 / 1000000" | bc -l; }
t_walk_ref=$(bench_time "$TOOLS" walk "$PT")
t_walk_tk=$(bench_time "$TOOLS" tkwalk "$PT")
t_quiet_tk=$(bench_time "$TK" dump --quiet "$PT")
t_fmt_ref=$(bench_time sh -c "\"$TOOLS\" ptdump \"$PT\" >/dev/null")
t_fmt_tk=$(bench_time "$TK" dump -o /dev/null "$PT")
t_dump_ref=$(bench_time sh -c "\"$TOOLS\" ptdump \"$PT\" >\"$WORK/anchor.txt\"")
t_dump_tk=$(bench_time "$TK" dump -o "$WORK/tk.txt" "$PT")
printf 'packet walk   libipt pt_pkt_next    %8.3f s  %6s MB/s\n' "$t_walk_ref" "$(mbs "$t_walk_ref")"
printf 'packet walk   tracekit next_batch   %8.3f s  %6s MB/s  %sx\n' "$t_walk_tk" "$(mbs "$t_walk_tk")" "$(bench_ratio "$t_walk_ref" "$t_walk_tk")"
printf 'packet walk   tracekit dump --quiet %8.3f s  %6s MB/s  %sx\n' "$t_quiet_tk" "$(mbs "$t_quiet_tk")" "$(bench_ratio "$t_walk_ref" "$t_quiet_tk")"
printf 'dump, no I/O  ptdump-style anchor   %8.3f s  %6s MB/s\n' "$t_fmt_ref" "$(mbs "$t_fmt_ref")"
printf 'dump, no I/O  tracekit dump         %8.3f s  %6s MB/s  %sx\n' "$t_fmt_tk" "$(mbs "$t_fmt_tk")" "$(bench_ratio "$t_fmt_ref" "$t_fmt_tk")"
printf 'dump to file  ptdump-style anchor   %8.3f s  %6s MB/s\n' "$t_dump_ref" "$(mbs "$t_dump_ref")"
printf 'dump to file  tracekit dump -o      %8.3f s  %6s MB/s  %sx\n' "$t_dump_tk" "$(mbs "$t_dump_tk")" "$(bench_ratio "$t_dump_ref" "$t_dump_tk")"
echo "peak memory: tracekit dump $(bench_peak_kb "$TK" dump -o "$WORK/tk.txt" "$PT") KiB," \
	"anchor $(bench_peak_kb "$TOOLS" ptdump "$PT") KiB (both map the input)"
"$TOOLS" psb "$PT"
rm -f "$WORK/tk.txt" "$WORK/anchor.txt"
