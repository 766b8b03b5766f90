#!/usr/bin/env bash
# Source it from a test, in its scratch directory: builds tests/data/seams/lj.c, records
# its branch trace (lj.tkbt), converts it to the raw Intel PT stream it holds (lj.pt), and
# sets $bias, lj's load address in the trace (for --elf lj:$bias). Needs $SRC and $TK.
cc -O1 -g -o lj "$SRC/tests/data/seams/lj.c"
"$TK" record --btrace -o lj.tkbt -- ./lj >/dev/null 2>rec.err || { echo "record failed"; cat rec.err; exit 1; }
"$TK" convert --to ipt -q -o lj.pt lj.tkbt
bias=$("$TK" info lj.tkbt | awk -v m="$PWD/lj" '$1 == "module" && $2 == m {
	for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }')
[ -n "$bias" ] || { echo "no bias for lj in the branch trace"; exit 1; }
