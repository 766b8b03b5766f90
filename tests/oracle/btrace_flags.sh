#!/usr/bin/env bash
# The trampolines' stub restores the flags without popfq: a program that sets CF, PF, AF,
# ZF, SF, DF and OF from patterns and reads them back after a recorded `jo rel32` prints
# the same as without the recorder (no round wrong), with the branch recorded by a
# trampoline, not traps, on both of its paths.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/flags" "$SRC/tests/data/btrace/flags.c"
"$work/flags" 200000 >"$work/native.txt"
grep -q '^200000 rounds, 0 wrong' "$work/native.txt" || { cat "$work/native.txt"; exit 1; }
"$TK" record --btrace -q -o "$work/f.tkbt" -- "$work/flags" 200000 >"$work/traced.txt"
diff "$work/native.txt" "$work/traced.txt"
"$TK" info "$work/f.tkbt" >"$work/info.txt"
awk '/went through trampolines/ { for (i = 1; i <= NF; i++) if ($i == "went") h = $(i - 1) }
	END { exit !(h >= 200000) }' "$work/info.txt" || { echo "the branch was not recorded by trampolines:"; cat "$work/info.txt"; exit 1; }
