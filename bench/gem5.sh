#!/usr/bin/env bash
# gem5 O3PipeView logs: `stats` and `report` convert to Kanata on a thread into a pipe they
# read; their time and peak memory beside the two-process pipe a user would otherwise
# write (`convert --to kanata | stats -`), on a trace of N instructions (bench/gem5-gen.py;
# 1,000,000: 395 MB). Memory must not grow with the trace: the same at N/2.
# usage: bench/gem5.sh [N]   (env: TK)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
TK=${TK:-$here/../build/tracekit}
n=${1:-1000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/gem5-gen.py" "$n" >"$work/big.txt"
python3 "$here/gem5-gen.py" $((n / 2)) >"$work/half.txt"
echo "trace: $n instructions, $(stat -c %s "$work/big.txt") bytes; load $(cut -d' ' -f1-3 /proc/loadavg)"
measure() {   # LABEL COMMAND...: wall seconds and peak KB (of the whole pipeline for sh -c)
	local label=$1
	shift
	/usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>/dev/null
	read -r secs kb <"$work/t"
	printf '%-34s %7.2f s %9d KB\n' "$label" "$secs" "$kb"
}
measure "stats" "$TK" stats -q "$work/big.txt"
measure "stats (half the trace)" "$TK" stats -q "$work/half.txt"
measure "report" "$TK" report -q -o "$work/r.html" "$work/big.txt"
measure "convert | stats - (largest process)" sh -c "'$TK' convert -q --to kanata '$work/big.txt' | '$TK' stats -q -"
