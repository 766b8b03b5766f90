#!/usr/bin/env bash
# The trampolines' stub saves the general registers and the flags only (the recorder is
# built -mgeneral-regs-only): a program whose ymm registers (both halves), xmm registers
# and x87 stack hold live values across recorded branches prints the same as without the
# recorder, with the branches recorded by trampolines, not traps, and trace flushes
# happening while they are live.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
grep -qw avx2 /proc/cpuinfo || { echo "no AVX2 on this CPU"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -mavx2 -o "$work/vector" "$SRC/tests/data/btrace/vector.c"
"$work/vector" 2000000 >"$work/native.txt"
"$TK" record --btrace -q -o "$work/v.tkbt" -- "$work/vector" 2000000 >"$work/traced.txt"
diff "$work/native.txt" "$work/traced.txt"
"$TK" info "$work/v.tkbt" >"$work/info.txt"
# "... of the recorded CTIs T trapped and H went through trampolines: P% trapped"
awk '/went through trampolines/ { for (i = 1; i <= NF; i++) if ($i == "went") h = $(i - 1) }
	END { exit !(h >= 2000000) }' "$work/info.txt" || { echo "branches not recorded by trampolines:"; cat "$work/info.txt"; exit 1; }
