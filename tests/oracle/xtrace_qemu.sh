#!/usr/bin/env bash
# xtrace recorder against qemu itself: a real AArch64 program (static, SVE) recorded with
# `tracekit record --qemu`; the PCs `tracekit decode --no-disasm` prints must equal qemu's
# own execution log (-singlestep -d exec,nochain), and every snapshot's registers must
# equal qemu's -d cpu dump before the same instruction. -j 2 must equal -j 1.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
command -v qemu-aarch64 >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null || {
	echo "qemu-aarch64 and gcc-aarch64-linux-gnu are required (scripts/install-deps.sh)"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The same environment for every run (the guest sees it on its stack; a shell would set $_
# to each command's path).
run() { env -i PATH="$PATH" TK_XTRACE_INTERVAL=20000 "$@"; }
aarch64-linux-gnu-gcc -O2 -march=armv8.2-a+sve -static -o "$TMP/prog" "$SRC/tests/data/xtrace/qemu-prog.c"
ARG=14

run "$TK" record --qemu -q -o "$TMP/out" -- "$TMP/prog" $ARG >"$TMP/prog.out"
grep -q '^acc ' "$TMP/prog.out"
insn=$(ls "$TMP"/out/xtrace.*.hint9.xinsndata.bin)
snap=$(ls "$TMP"/out/xtrace.*.hint9.xsnapshot.bin)

# 0. info gives the interval the recording used (TK_XTRACE_INTERVAL), not the header's 1M.
grep -q 'every 20000 user instructions' <("$TK" info "$insn") ||
	{ echo "info does not give the recorded snapshot interval"; "$TK" info "$insn"; exit 1; }

# 1. PCs against qemu's execution log.
run qemu-aarch64 -seed 1 -singlestep -d exec,nochain -D "$TMP/exec.log" "$TMP/prog" $ARG >/dev/null
sed -n 's/^Trace [0-9]*: 0x[0-9a-f]* \[[0-9a-f]*\/\([0-9a-f]*\)\/.*/\1/p' "$TMP/exec.log" >"$TMP/pcs.qemu"
"$TK" decode --no-disasm -j 1 "$insn" >"$TMP/pcs.tk"
n=$(wc -l <"$TMP/pcs.qemu")
[ "$n" -gt 100000 ] || { echo "qemu log too short: $n"; exit 1; }
if ! cmp -s "$TMP/pcs.qemu" "$TMP/pcs.tk"; then
	echo "PCs differ from qemu's execution log:"
	diff "$TMP/pcs.qemu" "$TMP/pcs.tk" | head -20
	exit 1
fi
echo "PCs: $n instructions equal qemu's log"

# 2. -j 2 (chunks from snapshot positions) equals -j 1, with disassembly and memory.
"$TK" decode -j 1 "$insn" >"$TMP/d1"
"$TK" decode -j 2 "$insn" >"$TMP/d2"
cmp "$TMP/d1" "$TMP/d2"
grep -q 'whilelo\|ld1w' "$TMP/d1" || { echo "no SVE instruction disassembled"; exit 1; }
grep -q 'SYSCALL_VEC count 2' "$TMP/d1" || { echo "writev iovecs missing"; exit 1; }
grep -q 'TARGET_B' "$TMP/d1" || { echo "no indirect-branch targets"; exit 1; }
"$TK" stats -j 1 "$insn" >"$TMP/s1"
"$TK" stats -j 2 "$insn" >"$TMP/s2"
cmp "$TMP/s1" "$TMP/s2"

# 3. Snapshot registers against qemu's -d cpu before the same instruction.
run qemu-aarch64 -seed 1 -singlestep -d cpu,nochain -D "$TMP/cpu.log" "$TMP/prog" $ARG >/dev/null
"$TK" dump -q "$snap" >/dev/null
"$TK" dump "$snap" >"$TMP/snap.txt"
nsnap=$(grep -c '^[0-9a-f]*  SNAPSHOT' "$TMP/snap.txt")
[ "$nsnap" -ge 3 ] || { echo "expected at least 3 snapshots, got $nsnap"; exit 1; }
# Our registers, per snapshot: "total x0 .. x30 sp nzcv"
awk '/  SNAPSHOT/ { if (line) print line; for (i = 1; i <= NF; i++) if ($i == "total") t = $(i + 1); line = t; next }
     /^    x0 / || /^    x4 / || /^    x8 / || /^    x1[26] / || /^    x2[048] / {
	for (i = 2; i <= NF; i += 2) line = line " " $i }
     /^    nzcv / { line = line " " $2 }
     END { if (line) print line }' "$TMP/snap.txt" >"$TMP/regs.tk"
# qemu's: the (total+1)-th dump
cut -d' ' -f1 "$TMP/regs.tk" >"$TMP/totals"
awk 'NR == FNR { want[$1 + 1] = $1; next }
     /^ PC=/ { k++; if (line != "") print line; line = ""; cur = (k in want) }
     cur { for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2 && (kv[1] ~ /^X[0-9]+$/ || kv[1] == "SP")) r[kv[1]] = kv[2]
	   else if (split($i, kv, "=") == 2 && kv[1] == "PSTATE") {
		line = want[k]
		for (j = 0; j <= 30; j++) line = line " " r[sprintf("X%02d", j)]
		line = line " " r["SP"] " " "00000000" substr(kv[2], 1, 1) "0000000"
		cur = 0; print line; line = "" } }' "$TMP/totals" "$TMP/cpu.log" >"$TMP/regs.qemu"
[ "$(wc -l <"$TMP/regs.tk")" -eq "$nsnap" ] || { echo "snapshot registers not parsed"; exit 1; }
if ! diff "$TMP/regs.qemu" "$TMP/regs.tk" >"$TMP/regs.diff"; then
	echo "snapshot registers differ from qemu's -d cpu:"
	head -20 "$TMP/regs.diff"
	exit 1
fi
echo "snapshots: $nsnap, registers equal qemu's -d cpu"

# 4. Slices: snapshot 2 for 5000 instructions decodes to the same PCs as the original.
"$TK" convert --slice 2:5000 -o "$TMP/slice.xinsndata.bin" "$insn"
"$TK" decode --no-disasm "$TMP/slice.xinsndata.bin" >"$TMP/slice.pcs"
start=$(awk '/  SNAPSHOT 2 / { for (i = 1; i <= NF; i++) if ($i == "total") print $(i + 1) }' "$TMP/snap.txt")
sed -n "$((start + 1)),$((start + 5000))p" "$TMP/pcs.tk" | cmp - "$TMP/slice.pcs"
grep -q 'snapshots: 1,' <("$TK" info "$TMP/slice.xinsndata.bin")
echo "slice: ok"

# 5. HINT #9 gating: exactly the instructions between the two hints are recorded.
aarch64-linux-gnu-gcc -O1 -static -o "$TMP/gated" "$SRC/tests/data/xtrace/qemu-gated.c"
run "$TK" record --qemu -q -o "$TMP/gout" -- "$TMP/gated" 3000 >/dev/null
hints=$(aarch64-linux-gnu-objdump -d "$TMP/gated" | awk '$2 == "d503213f" { sub(":", "", $1); print $1 }')
run qemu-aarch64 -seed 1 -singlestep -d exec,nochain -D "$TMP/gexec.log" "$TMP/gated" 3000 >/dev/null
sed -n 's/^Trace [0-9]*: 0x[0-9a-f]* \[[0-9a-f]*\/\([0-9a-f]*\)\/.*/\1/p' "$TMP/gexec.log" >"$TMP/gall"
h1=$(grep -c . <<<"$hints")
[ "$h1" -ge 2 ] || { echo "no HINT #9 found in the gated program"; exit 1; }
first=$(printf '%016x' "0x$(sed -n 1p <<<"$hints")")
second=$(printf '%016x' "0x$(sed -n 2p <<<"$hints")")
awk -v a="$first" -v b="$second" '$1 == a && !on { on = 1; next } $1 == b && on { exit } on' "$TMP/gall" >"$TMP/gwant"
"$TK" decode --no-disasm "$TMP"/gout/*.xinsndata.bin >"$TMP/ggot"
[ "$(wc -l <"$TMP/gwant")" -gt 3000 ] || { echo "gated reference too short"; exit 1; }
cmp "$TMP/gwant" "$TMP/ggot" || { echo "gated trace differs from qemu's log between the hints"; exit 1; }
echo "HINT #9 gating: $(wc -l <"$TMP/ggot") instructions between the hints"
