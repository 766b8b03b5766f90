#!/usr/bin/env bash
# Intel PT packet layer vs libipt on two >= 100 MB streams:
#   random: written by libipt's encoder, packet kinds drawn independently at random
#           (TNT-heavy, every packet kind and IP compression, a PSB every 4 KiB): the
#           branch predictor's worst case;
#   flow:   bench/ipt-flow-gen.c, the flow tests' generator walking the real code of
#           libc as a CPU would and emitting what the hardware would (TNT runs, TIP
#           with IP compression, return compression, PSB+ every ~8 KiB, syscalls as
#           TIP.PGD/MODE.Exec/TIP.PGE);
#   flow-timing: the flow stream as in cycle-accurate timing mode (ipt-tools timing):
#           a CYC before each TNT/TIP/FUP, an MTC every 64 packets.
#   1. packet walk on both: tracekit (tk_ipt_pkt_next_batch; and `tracekit dump
#      --quiet`) vs a small program walking with libipt's pt_pkt_next; then the same
#      walks under callgrind on CG_MB MiB of each (instructions per packet, repeatable)
#   2. dump: `tracekit dump` vs pt_pkt_next + ptdump-style printf (the anchor; Debian
#      ships no ptdump binary), to /dev/null (formatting rate) and to a file
#   3. PSB search: tracekit vs libipt's pt_pkt_sync_forward vs plain read bandwidth
# Usage: bench/ipt-packets.sh [MB]   (env BENCH_RUNS, default 5; CG_MB, default 16, 0: no
# callgrind)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
MB=${1:-128}
WORK=${BENCH_WORK:-$SRC/build/bench-ipt}
mkdir -p "$WORK"
TOOLS=$WORK/ipt-tools
gcc -O2 -Wall -I "$SRC/include" -I "$SRC/lib" -I "$SRC/tests" "$SRC/bench/ipt-tools.c" \
	"$SRC/build/libtracekit.a" -lipt -o "$TOOLS"
gcc -O2 -I "$SRC/include" -I "$SRC/lib" -I "$SRC/tests" "$SRC/bench/ipt-flow-gen.c" \
	"$SRC/build/libtracekit.a" $TK_STATIC_LIBS \
	-o "$WORK/ipt-flow-gen" 2>/dev/null
CG_MB=${CG_MB:-16}
PT=$WORK/stream-${MB}m.pt
FLOW=$WORK/flow-${MB}m.pt
[ -f "$PT" ] || "$TOOLS" gen "$PT" "$MB"
[ -f "$FLOW" ] || "$WORK/ipt-flow-gen" "$FLOW" "$MB" >/dev/null 2>&1
[ -f "$WORK/flowt-${MB}m.pt" ] || "$TOOLS" timing "$FLOW" "$WORK/flowt-${MB}m.pt"
BYTES=$(stat -L -c %s "$PT")

# Packet walk on both inputs, each side checked to count the same packets.
walk_case() {
	local name=$1 pt=$2 bytes n
	bytes=$(stat -L -c %s "$pt")
	n=$("$TOOLS" walk "$pt")
	[ "$("$TOOLS" tkwalk "$pt")" = "$n" ] || { echo "$name: packet counts differ"; exit 1; }
	local t_ref t_tk t_quiet
	t_ref=$(bench_time "$TOOLS" walk "$pt")
	t_tk=$(bench_time "$TOOLS" tkwalk "$pt")
	t_quiet=$(bench_time "$TK" dump --quiet "$pt")
	echo "== packet walk, $name: $pt, $bytes bytes, ${n% packets} packets"
	row() {
		printf '%-22s %8.3f s  %6s MB/s  %s\n' "$1" "$2" \
			"$(echo "scale=0; $bytes / $2 / 1000000" | bc -l)" "$3"
	}
	row "libipt pt_pkt_next" "$t_ref" ""
	row "tracekit next_batch" "$t_tk" "$(bench_ratio "$t_ref" "$t_tk")x"
	row "tracekit dump --quiet" "$t_quiet" "$(bench_ratio "$t_ref" "$t_quiet")x"
}
walk_case random "$PT"
walk_case flow "$FLOW"
walk_case flow-timing "$WORK/flowt-${MB}m.pt"

# Instructions per packet (callgrind): the repeatable figure on a shared machine.
if [ "$CG_MB" != 0 ] && command -v valgrind >/dev/null; then
	[ -f "$WORK/stream-${CG_MB}m.pt" ] || "$TOOLS" gen "$WORK/stream-${CG_MB}m.pt" "$CG_MB"
	[ -f "$WORK/flow-${CG_MB}m.pt" ] ||
		"$WORK/ipt-flow-gen" "$WORK/flow-${CG_MB}m.pt" "$CG_MB" >/dev/null 2>&1
	[ -f "$WORK/flowt-${CG_MB}m.pt" ] ||
		"$TOOLS" timing "$WORK/flow-${CG_MB}m.pt" "$WORK/flowt-${CG_MB}m.pt"
	for name in random:stream flow:flow flow-timing:flowt; do
		f=$WORK/${name#*:}-${CG_MB}m.pt
		n=$("$TOOLS" walk "$f" | awk '{print $1}')
		ir() {
			valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
				awk '/Collected/ {print $4}'
		}
		i_ref=$(ir "$TOOLS" walk "$f")
		i_tk=$(ir "$TOOLS" tkwalk "$f")
		printf 'callgrind, %s %s MiB, %s packets: pt_pkt_next %s Ir (%s/packet), next_batch %s Ir (%s/packet), %sx\n' \
			"${name%:*}" "$CG_MB" "$n" "$i_ref" "$(echo "scale=1; $i_ref / $n" | bc -l)" \
			"$i_tk" "$(echo "scale=1; $i_tk / $n" | bc -l)" "$(bench_ratio "$i_ref" "$i_tk")"
	done
fi

echo "== dump and PSB search: $PT, $BYTES bytes"

# The two dumps must agree before their speed means anything.
"$TK" dump -o "$WORK/tk.txt" "$PT"
"$TOOLS" ptdump "$PT" >"$WORK/anchor.txt"
cmp -s "$WORK/tk.txt" "$WORK/anchor.txt" && echo "dump output: identical to the anchor's" \
	|| { echo "dump output differs from the anchor's"; exit 1; }

mbs() { echo "scale=0; $BYTES / $1 / 1000000" | bc -l; }
t_fmt_ref=$(bench_time sh -c "\"$TOOLS\" ptdump \"$PT\" >/dev/null")
t_fmt_tk=$(bench_time "$TK" dump -o /dev/null "$PT")
t_dump_ref=$(bench_time sh -c "\"$TOOLS\" ptdump \"$PT\" >\"$WORK/anchor.txt\"")
t_dump_tk=$(bench_time "$TK" dump -o "$WORK/tk.txt" "$PT")
printf 'dump, no I/O  ptdump-style anchor   %8.3f s  %6s MB/s\n' "$t_fmt_ref" "$(mbs "$t_fmt_ref")"
printf 'dump, no I/O  tracekit dump         %8.3f s  %6s MB/s  %sx\n' "$t_fmt_tk" "$(mbs "$t_fmt_tk")" "$(bench_ratio "$t_fmt_ref" "$t_fmt_tk")"
printf 'dump to file  ptdump-style anchor   %8.3f s  %6s MB/s\n' "$t_dump_ref" "$(mbs "$t_dump_ref")"
printf 'dump to file  tracekit dump -o      %8.3f s  %6s MB/s  %sx\n' "$t_dump_tk" "$(mbs "$t_dump_tk")" "$(bench_ratio "$t_dump_ref" "$t_dump_tk")"
echo "peak memory: tracekit dump $(bench_peak_kb "$TK" dump -o "$WORK/tk.txt" "$PT") KiB," \
	"anchor $(bench_peak_kb "$TOOLS" ptdump "$PT") KiB (both map the input)"
"$TOOLS" psb "$PT"
rm -f "$WORK/tk.txt" "$WORK/anchor.txt"
