#!/usr/bin/env bash
# Intel PT corners inside a real trace: a recorded branch trace (the program and libc) is
# converted with every return a TIP, decoded for reference, and tests/tools/ptsplice.py
# splices corners into it: transaction aborts, Event Trace page faults, TIPs deferred
# after the next TNT, cuts (end of trace), an overflow inside a PSB+, TIPs that do not fit
# the code or lead to none, TNTs that no conditional branch can use (decoding goes on at
# the next IP in the segment).
# Each stream must decode to the listing the splice implies (the instructions after each
# corner are the recorded ones), and the same with a chunk at every PSB on four threads as
# with -j 1.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/calls" "$SRC/tests/data/btrace/calls.c"
"$TK" record --btrace -o "$work/c.tkbt" --module main --module libc.so.6 -- "$work/calls" 2000 \
	>/dev/null 2>"$work/rec.err" || { echo "record failed"; cat "$work/rec.err"; exit 1; }
mapfile -t ELF < <("$TK" info "$work/c.tkbt" | awk '$1 == "module" {
	for (i = 3; i < NF; i++) if ($i == "bias") printf "--elf\n%s:%s\n", $2, $(i + 1) }')
"$TK" convert --to ipt --no-retcomp -q -o "$work/c.pt" "$work/c.tkbt"
"$TK" dump "$work/c.pt" >"$work/c.dump"
"$TK" decode "${ELF[@]}" "$work/c.pt" >"$work/c.ref"
python3 "$SRC/tests/tools/ptsplice.py" "$work/c.pt" "$work/c.dump" "$work/c.ref" "$work"

check() {   # NAME WANT_STATUS [OPTION...]: decode NAME.pt; stdout in NAME.out
	local name=$1 want=$2 status=0
	shift 2
	local opts=("${ELF[@]}" "$@")
	"$TK" decode "${opts[@]}" "$work/$name.pt" >"$work/$name.out" 2>"$work/$name.err" || status=$?
	[ "$status" = "$want" ] || { echo "$name: exit status $status, want $want"; cat "$work/$name.err"; exit 1; }
	TK_IPT_CHUNK=1 "$TK" decode -j 4 "${opts[@]}" "$work/$name.pt" >"$work/$name.j4" 2>/dev/null || true
	cmp -s "$work/$name.out" "$work/$name.j4" || {
		echo "$name: -j 4 differs from -j 1"; diff "$work/$name.out" "$work/$name.j4" | head; exit 1; }
}
for name in tsx et defer eos0 eos1 eos2; do
	check $name 0
	cmp -s "$work/$name.expected" "$work/$name.out" || {
		echo "$name: listing differs from the recorded flow"
		diff "$work/$name.expected" "$work/$name.out" | head -20; exit 1; }
done
for name in query nomap loop; do   # errors, and decoding goes on in the same PSB segment
	if [ $name = loop ]; then check $name 1 --raw "$work/loop.bin:0x10"; else check $name 1; fi
	cmp -s "$work/$name.expected" "$work/$name.out" || {
		echo "$name: listing differs from the recorded flow with the errors"
		diff "$work/$name.expected" "$work/$name.out" | head -20; exit 1; }
done
check ovf 1
at=$(cat "$work/ovf.at")
[ "$(grep -c '^\[overflow' "$work/ovf.out")" = 1 ] && grep -qx "\[overflow at offset 0x$at\]" "$work/ovf.out" ||
	{ echo "ovf: want one [overflow at offset 0x$at]"; grep '^\[' "$work/ovf.out" | head; exit 1; }
grep -v '^\[overflow' "$work/ovf.out" | cmp -s - "$work/c.ref" ||
	{ echo "ovf: the flow around the overflow differs from the recorded one"; exit 1; }
echo "ipt corners: ok ($(grep -c . "$work/c.ref") lines of reference)"
