#!/usr/bin/env bash
# Recording with libc traced: bench/btrace-libc.c (snprintf, qsort, strcmp: ~1400
# instructions per key, nearly all in libc) recorded with `--module main --module
# libc.so.6` and with `--module libc.so.6` alone. Prints native and recording time (median
# of BENCH_RUNS), instructions recorded, trace size, traps and trampoline records per
# second, and whether the trace is complete and decodes cleanly (errors, unresolved
# re-entries). OUT=DIR keeps the traces (and their raw PT, for PT decoder benchmarks), with
# the program they name.
# usage: bench/btrace-libc.sh [N]   (default 40000 keys: ~58 M instructions)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-40000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
OUT=${OUT:-$W}
mkdir -p "$OUT"
P=$OUT/btrace-libc
cc -O2 -g -o "$P" "$SRC/bench/btrace-libc.c"
t_native=$(bench_time "$P" "$N")
echo "btrace-libc $N: native $t_native s"
for mods in "--module main --module libc.so.6" "--module libc.so.6"; do
	tag=$([ "$mods" = "--module libc.so.6" ] && echo libc || echo main+libc)
	t=$(bench_time "$TK" record --btrace -q $mods -o "$W/t.tkbt" -- "$P" "$N")
	"$TK" record --btrace -q $mods -o "$OUT/$tag.tkbt" -- "$P" "$N" >/dev/null
	"$TK" info "$OUT/$tag.tkbt" >"$W/info"
	insns=$("$TK" decode --stat "$OUT/$tag.tkbt" | awk '/^insn:/ {s += $2} END {print s}')
	errors=$("$TK" decode --stat "$OUT/$tag.tkbt" | awk '/^errors:/ {s += $2} END {print s}')
	traps=$(awk '/traps,/ {for (i = 1; i <= NF; i++) if ($i == "traps,") s += $(i - 1)} END {print s}' "$W/info")
	tramp=$(awk '/by trampolines/ {for (i = 1; i <= NF; i++) if ($i == "trampolines") s += $(i - 2)} END {print s + 0}' "$W/info")
	unres=$(grep -o '[0-9]* unresolved' "$W/info" | awk '{s += $1} END {print s + 0}')
	complete=$(grep -q 'complete' "$W/info" && echo complete || echo INCOMPLETE)
	"$TK" convert --to ipt -o "$OUT/$tag.pt" "$OUT/$tag.tkbt"
	printf '%-10s %8s s (%sx native)  %s insns  %s bytes .tkbt, %s bytes PT  %s traps (%s/s) + %s trampoline records (%s/s)  %s, %s decode errors, %s unresolved\n' \
		"$tag" "$t" "$(bench_ratio "$t" "$t_native")" "$insns" "$(stat -c %s "$OUT/$tag.tkbt")" \
		"$(stat -c %s "$OUT/$tag.pt")" "$traps" "$(echo "$traps / $t" | bc)" "$tramp" \
		"$(echo "$tramp / $t" | bc)" "$complete" "$errors" "$unres"
done
