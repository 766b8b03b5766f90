#!/usr/bin/env bash
# tracekit report on big traces: the page's size (bounded: docs/tracekit-report.md), the
# time to write it, its peak memory, and its load-to-interactive time in headless Chromium
# (bench/report-load.js: navigation start to every section drawn). Inputs: a ~150 MB Kanata
# log (kanata-sample-2 tiled 46 times by kanata-gen.sh) and a 100 MB Intel PT trace (the
# random walk over libc of bench/ipt-flow-gen.c: many functions, deep and wide call paths).
# usage: bench/report.sh [KANATA_COPIES] [PT_MBYTES]   (env: TK, DATA)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
SRC=$(cd "$here/.." && pwd)
copies=${1:-46} mb=${2:-100}
DATA=${DATA:-$here/../../shared/data}
[ -d "$DATA/kanata" ] || DATA=$here/../../../shared/data
mods=$SRC/tests/tools/node_modules
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bash "$here/kanata-gen.sh" "$DATA/kanata/kanata-sample-2.log.gz" "$copies" "$work/big.kanata"
LIBS=$TK_STATIC_LIBS
gcc -O2 -o "$work/gen" "$SRC/bench/ipt-flow-gen.c" -I"$SRC/tests" -I"$SRC/lib" \
	-I"$SRC/include" "$SRC/build/libtracekit.a" $LIBS
"$work/gen" "$work/walk.pt" "$mb" >"$work/walk.args" 2>/dev/null
read -r -a ptargs < <(tr '\n' ' ' <"$work/walk.args"; echo)

one() {   # NAME INPUT BASELINE... -- [OPTIONS...]: one run's wall time, CPU time and peak
	local name=$1 in=$2    # memory (a 100 MB PT page takes minutes on a loaded machine), and
	shift 2                # the CPU time of the command the report costs against (stats for
	local base=()          # Kanata, profile for the others)
	while [ "$1" != -- ]; do base+=("$1"); shift; done
	shift
	local r b
	r=$(/usr/bin/time -f '%e %U %S %M' "$TK" report -q -o "$work/$name.html" "$@" "$in" 2>&1 >/dev/null | tail -n 1)
	b=$(/usr/bin/time -f '%U %S' "$TK" "${base[@]}" -q "$@" "$in" 2>&1 >/dev/null | tail -n 1)
	read -r wall user sys peak <<<"$r"
	read -r buser bsys <<<"$b"
	printf '%-7s input %4d MB  page %8d bytes  report %7.2f s (CPU %.2f s; %s: %.2f s)  peak %5d MB\n' \
		"$name" $(($(stat -c %s "$in") / 1000000)) "$(stat -c %s "$work/$name.html")" "$wall" \
		"$(echo "$user + $sys" | bc)" "${base[0]}" "$(echo "$buser + $bsys" | bc)" $((peak / 1024))
}
echo "== tracekit report (load average $(cut -d' ' -f1 /proc/loadavg))"
one kanata "$work/big.kanata" stats --
one pt "$work/walk.pt" profile -- "${ptargs[@]}"
if [ -x /usr/bin/chromium ] && [ -d "$mods/puppeteer-core" ]; then
	PUPPETEER=$mods/puppeteer-core node "$here/report-load.js" 5 "$work/kanata.html" "$work/pt.html"
else
	echo "no chromium or puppeteer-core: load times not measured (scripts/install-deps.sh)"
fi
