#!/usr/bin/env bash
# tracekit report on big traces: the page's size (bounded: docs/tracekit-report.md), the
# time to write it, its peak memory, and its load-to-interactive time in headless Chromium
# (bench/report-load.js: navigation start to every section drawn). Inputs: a ~150 MB Kanata
# log (kanata-sample-2 tiled 46 times by kanata-gen.sh) and a 100 MB Intel PT trace (the
# random walk over libc of bench/ipt-flow-gen.c: many functions, deep and wide call paths).
# usage: bench/report.sh [KANATA_COPIES] [PT_MBYTES]   (env: BENCH_RUNS, TK, DATA)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
SRC=$(cd "$here/.." && pwd)
copies=${1:-46} mb=${2:-100}
BENCH_RUNS=${BENCH_RUNS:-3}
DATA=${DATA:-$here/../../shared/data}
[ -d "$DATA/kanata" ] || DATA=$here/../../../shared/data
mods=$SRC/tests/tools/node_modules
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bash "$here/kanata-gen.sh" "$DATA/kanata/kanata-sample-2.log.gz" "$copies" "$work/big.kanata"
LIBS="-lipt -lelf -ldw -lZydis -lzstd -lz -lpthread -ldl"
gcc -O2 -o "$work/gen" "$SRC/bench/ipt-flow-gen.c" -I"$SRC/tests" -I"$SRC/lib" \
	-I"$SRC/include" "$SRC/build/libtracekit.a" $LIBS
"$work/gen" "$work/walk.pt" "$mb" >"$work/walk.args" 2>/dev/null
read -r -a ptargs < <(tr '\n' ' ' <"$work/walk.args")

one() {   # NAME INPUT [OPTIONS...]
	local name=$1 in=$2
	shift 2
	local t m
	t=$(bench_time "$TK" report -q -o "$work/$name.html" "$@" "$in")
	m=$(bench_peak_kb "$TK" report -q -o "$work/$name.html" "$@" "$in")
	printf '%-8s input %6d MB  page %7d bytes  report %7.2f s  peak %6d MB\n' "$name" \
		$(($(stat -c %s "$in") / 1000000)) "$(stat -c %s "$work/$name.html")" "$t" $((m / 1024))
}
echo "== tracekit report (2 cores shared; medians of $BENCH_RUNS runs)"
one kanata "$work/big.kanata"
one pt "$work/walk.pt" "${ptargs[@]}"
if [ -x /usr/bin/chromium ] && [ -d "$mods/puppeteer-core" ]; then
	PUPPETEER=$mods/puppeteer-core node "$here/report-load.js" 5 "$work/kanata.html" "$work/pt.html"
else
	echo "no chromium or puppeteer-core: load times not measured (scripts/install-deps.sh)"
fi
