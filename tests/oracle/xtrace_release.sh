#!/usr/bin/env bash
# xtrace info/stats give each finished chunk's mapped pages back (MADV_DONTNEED on the
# worker, so the exit munmap is not a serial tail): results stay identical for -j 1, -j 2
# and a piped copy (not a mapping: nothing given back), and the peak resident set stays
# well below the size of the input.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 "$SRC/bench/xtrace-gen.py" "$TMP" 80 >/dev/null
insn=$TMP/xtrace.1.1.hint9.xinsndata.bin
size=$(stat -c %s "$insn")
for cmd in info stats; do
	"$TK" $cmd -j 1 "$insn" >"$TMP/$cmd.1"
	"$TK" $cmd -j 2 "$insn" >"$TMP/$cmd.2"
	cmp "$TMP/$cmd.1" "$TMP/$cmd.2"
done
grep -q 'chunks' "$TMP/stats.1"
[ "$(sed -n 's/.*, \([0-9]*\) chunks/\1/p' "$TMP/stats.1")" -ge 4 ] || { echo "expected several chunks"; exit 1; }
# From a pipe: read into memory, one chunk, same instruction mix.
"$TK" stats - <"$insn" >"$TMP/stats.pipe"
diff <(sed 1d "$TMP/stats.1") <(sed 1d "$TMP/stats.pipe")
# Peak RSS (KiB) grows by well under the input size (the pages of read chunks are handed
# back; about one 10 MB chunk per worker stays), over the same binary's on a tiny trace.
base=$(/usr/bin/time -f %M "$TK" stats "$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin" 2>&1 >/dev/null | tail -n 1)
for j in 1 2; do
	peak=$(/usr/bin/time -f %M "$TK" stats -j $j "$insn" 2>&1 >/dev/null | tail -n 1)
	[ $((peak - base)) -lt $((size / 1024 / 2)) ] || {
		echo "-j $j: peak RSS $peak KiB ($base KiB on a tiny trace) for a $size-byte input"; exit 1; }
	echo "-j $j: peak RSS $peak KiB ($base on a tiny trace) for $((size / 1024)) KiB of input"
done
