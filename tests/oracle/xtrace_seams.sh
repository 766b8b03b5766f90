#!/usr/bin/env bash
# Chunk seams and longjmp in xtrace profiles (see ipt_seams.sh): the same program for
# AArch64, recorded under qemu twice, with a snapshot every 1,024 instructions (over 400
# chunks) and with one snapshot (one chunk). The environment strings have one length, so
# both runs execute the same instructions. The call trees and function tables must be the
# same, and right: main calls run() 40 times, deep() as often as the program counted. The
# many-chunk run's timelines are the same bytes at every -j, and so are its dump and decode
# with damage in several chunks.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
command -v qemu-aarch64 >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null || {
	echo "qemu-aarch64 and gcc-aarch64-linux-gnu are required (scripts/install-deps.sh)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
aarch64-linux-gnu-gcc -O1 -static -o "$work/lj" "$SRC/tests/data/seams/lj.c"
# 002000 is octal (1,024): as long as 900000, which is more than the program runs
for iv in 002000 900000; do
	ndeep=$(env -i PATH="$PATH" TK_XTRACE_INTERVAL=$iv "$TK" record --qemu -q -o "$work/$iv" \
		-- "$work/lj")
	insn=$(ls "$work/$iv"/*.xinsndata.bin)
	for t in calltree csv; do
		"$TK" profile -j 2 --to $t --elf "$work/lj" "$insn" >"$work/$iv.$t"
	done
done
nsnap=$("$TK" info "$work/002000"/*.xinsndata.bin | awk '$1 == "snapshots:" {print $2 + 0}')
[ "${nsnap:-0}" -ge 100 ] || { echo "only '$nsnap' snapshots: too few seams to test"; exit 1; }
# the header counts block events, which snapshots cut in two; the instructions must agree
insns() { sed -n '1s/.*instructions \([0-9]*\),.*/\1/p' "$work/$1.calltree"; }
[ "$(insns 002000)" = "$(insns 900000)" ] ||
	{ echo "the runs differ: $(insns 002000) and $(insns 900000) instructions"; exit 1; }
for t in calltree csv; do
	cmp -s <(sed 1d "$work/900000.$t") <(sed 1d "$work/002000.$t") || {
		echo "--to $t: profile in $nsnap chunks differs from one chunk"
		diff <(sed 1d "$work/900000.$t") <(sed 1d "$work/002000.$t") | head -20 || true; exit 1; }
done
calls() { awk -F, -v n="\"$1\"" '$1 == n {print $2}' "$work/900000.csv"; }
[ "$(calls deep)" = "$ndeep" ] || { echo "deep: $(calls deep) calls, the program made $ndeep"; exit 1; }
under=$(python3 "$SRC/tests/tools/calltree_calls.py" "$work/900000.calltree" main run)
[ "$under" = 40 ] || { echo "main -> run in the call tree: '$under', want one row of 40 calls"; exit 1; }
# the timelines of the many-chunk run at -j 1, 2 and 3: the same bytes (chunks decoded on
# the workers, their events handed on in order), and a slice for every call of deep
insn=$(ls "$work/002000"/*.xinsndata.bin)
for to in perfetto chrome; do
	for j in 1 2 3; do
		"$TK" convert --to $to -j $j --elf "$work/lj" -o "$work/tl$j.$to" "$insn"
		cmp -s "$work/tl1.$to" "$work/tl$j.$to" ||
			{ echo "convert --to $to -j $j differs from -j 1"; exit 1; }
	done
done
slices=$(python3 -c 'import json, sys
print(sum(1 for e in json.load(open(sys.argv[1]))["traceEvents"]
          if e.get("ph") == "B" and e.get("name") == "deep"))' "$work/tl1.chrome")
[ "$slices" = "$ndeep" ] || { echo "timeline: $slices slices of deep, the program made $ndeep calls"; exit 1; }
# damage in a few chunks: dump and decode print the same text and the same messages, in
# the same order, at every -j (chunks are read in parallel, their text and messages kept
# until their turn)
cp -r "$work/002000" "$work/bad"
bad=$(ls "$work/bad"/*.xinsndata.bin)
"$TK" dump -j 1 "$bad" | awk 'NR % 20000 == 10000 {print $1}' | head -n 5 >"$work/offsets"
python3 - "$bad" "$work/offsets" <<'PY'
import sys
path, offsets = sys.argv[1], sys.argv[2]
data = bytearray(open(path, 'rb').read())
for line in open(offsets):
    data[int(line, 16)] = 0   # no item's token is 0
open(path, 'wb').write(data)
PY
for cmd in dump "decode --no-disasm"; do
	want_rc=0; "$TK" $cmd -j 1 "$bad" >"$work/want" 2>"$work/want.err" || want_rc=$?
	[ "$want_rc" = 1 ] && [ "$(wc -l <"$work/want.err")" -ge 5 ] ||
		{ echo "$cmd: the damage was not reported (exit $want_rc)"; cat "$work/want.err"; exit 1; }
	for j in 2 3; do
		rc=0; "$TK" $cmd -j $j "$bad" >"$work/got" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" && cmp -s "$work/want.err" "$work/got.err" ||
			{ echo "$cmd -j $j differs from -j 1 on a damaged trace (exit $rc)"; exit 1; }
	done
done
echo "xtrace seams: ok ($nsnap snapshots, $ndeep calls of deep, timelines, dump and decode the same at -j 1/2/3)"
