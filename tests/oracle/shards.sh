#!/usr/bin/env bash
# profile --shard I/N + merge print what one process prints (`profile -j 1`), for every
# output kind and every format with a source: an Intel PT raw stream with --elf (300-byte
# chunks, so that shards cut between a setjmp and its longjmp), a perf.data with two
# queues, an XRay FDR log, a branch trace, an xtrace trace; several inputs in one job.
# Partials of another job, a missing or repeated shard, damaged bytes: refused.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$SRC/tests/tools/lj-traces.sh"
xtrace="$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin"
export TK_IPT_CHUNK=300

# LABEL N OPTIONS... -- FILES...: N shards merged, each output kind of $kinds, against -j 1
same() {
	local label=$1 n=$2 opts=() files=()
	shift 2
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	files=("$@")
	rm -f "$work"/part-*.tkp
	for i in $(seq 1 "$n"); do
		"$TK" profile --shard "$i/$n" -j 2 -o "$work/part-$i.tkp" "${opts[@]}" "${files[@]}" \
			2>"$work/shard.err" || { echo "$label: shard $i/$n failed"; cat "$work/shard.err"; exit 1; }
	done
	for to in $kinds; do
		local want_rc=0 got_rc=0
		"$TK" profile -j 1 --to "$to" "${opts[@]}" "${files[@]}" >"$work/want" 2>/dev/null || want_rc=$?
		"$TK" merge --to "$to" "$work"/part-*.tkp >"$work/got" 2>"$work/merge.err" || got_rc=$?
		[ "$want_rc" = "$got_rc" ] || { echo "$label: merge --to $to: exit $got_rc, profile $want_rc"
			cat "$work/merge.err"; exit 1; }
		[ "$want_rc" != 0 ] || [ -s "$work/want" ] || { echo "$label: profile --to $to printed nothing"; exit 1; }
		cmp -s "$work/want" "$work/got" || {
			echo "$label: $n shards merged --to $to differ from -j 1"
			diff <(head -c 4000 "$work/want") <(head -c 4000 "$work/got") | head -10 || true
			exit 1; }
	done
}
kinds="text csv json folded pprof calltree"
same "Intel PT raw" 3 --elf "$work/lj:$bias" -- "$work/lj.pt"
kinds="csv"   # the other formats and shard counts: one output (short under ASan)
same "Intel PT raw" 2 --elf "$work/lj:$bias" -- "$work/lj.pt"
same "Intel PT raw" 1 --elf "$work/lj:$bias" -- "$work/lj.pt"
same "perf.data" 3 -- "$work/two.data"
same "XRay" 3 -- "$SRC/tests/data/xray/fdr-v5.xray"
same "branch trace" 3 -- "$work/lj.tkbt"
same "xtrace" 3 -- "$xtrace"
# more shards than chunks, and two inputs in one plan
same "XRay, 7 shards" 7 -- "$SRC/tests/data/xray/fdr-v5.xray"
# llvm-xray account's table from merged partials
kinds="account account-csv"
same "XRay account" 3 -- "$SRC/tests/data/xray/fdr-v5.xray"
same "XRay account, 1 shard" 1 -- "$SRC/tests/data/xray/fdr-v5.xray"
kinds="text"
same "two inputs" 3 -- "$SRC/tests/data/xray/fdr-v5.xray" "$SRC/tests/data/xray/fdr-v5.xray"

# an XRay log of many buffers, shards of -j 1: the plan is cut for the job's workers (2 x 1),
# not for one thread (a single chunk, all of it in one shard); each shard holds a part
clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$SRC/tests/data/xray/xray_prog.c" \
	-o "$work/prog" -lpthread
(cd "$work" && XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./mt-" \
	./prog fdr 2 300 2>/dev/null && mv mt-prog.* mt.xray)
for i in 1 2; do "$TK" profile --shard "$i/2" -j 1 -o "$work/mt-$i.tkp" "$work/mt.xray"; done
for i in 1 2; do
	[ "$(stat -c %s "$work/mt-$i.tkp")" -gt 1000 ] || { echo "XRay -j 1: shard $i/2 holds no chunk"; exit 1; }
done
"$TK" profile -j 1 --to csv "$work/mt.xray" >"$work/want"
"$TK" merge --to csv "$work"/mt-*.tkp | cmp -s - "$work/want" || { echo "XRay -j 1 shards: merge differs"; exit 1; }

# damaged bytes in the middle of one shard's chunks: that shard reports the gap as -j 1 does
# (file and offset) and exits 1, the others 0; the merge gives -j 1's profile
cp "$work/lj.pt" "$work/dmg.pt"
# (its middle and a sixth of it: the middle and the first shard's, whatever the length of
# the recorded stream; two shards' losses make one summary, as -j 1 prints it)
for at in 2 6; do
	printf '\xff%.0s' $(seq 16) | dd of="$work/dmg.pt" bs=1 \
		seek=$(($(stat -c %s "$work/lj.pt") / at)) conv=notrunc status=none
done
rc=0; "$TK" profile -j 1 --to csv --elf "$work/lj:$bias" "$work/dmg.pt" >"$work/want" 2>"$work/want.err" || rc=$?
[ "$rc" = 1 ] || { echo "damaged: profile exit $rc, not 1"; exit 1; }
statuses=
for i in 1 2 3; do
	rc=0; "$TK" profile --shard "$i/3" -o "$work/d-$i.tkp" --elf "$work/lj:$bias" "$work/dmg.pt" \
		2>>"$work/got.err" || rc=$?
	statuses="$statuses$rc"
done
[ "$statuses" = 110 ] || { echo "damaged: shard statuses $statuses, not 110"; exit 1; }
# each shard names its gap's offset as -j 1 does
for off in $(grep -o 'offset 0x[0-9a-f]*' "$work/want.err" | sort -u | cut -d' ' -f2); do
	grep -q "$off" "$work/got.err" || { echo "damaged: no shard names $off"; cat "$work/got.err"; exit 1; }
done
# the merge repeats the shards' reports (file and offset) and exits 1, as -j 1 does
rc=0; "$TK" merge --to csv "$work"/d-*.tkp >"$work/got" 2>"$work/merge.err" || rc=$?
cmp -s "$work/got" "$work/want" || { echo "damaged: merge differs"; exit 1; }
[ "$rc" = 1 ] || { echo "damaged: merge exit $rc, not 1"; exit 1; }
# the shards' messages once, then one summary of what the input lost: -j 1's words
cmp -s "$work/want.err" "$work/merge.err" ||
	{ echo "damaged: merge reports"; cat "$work/merge.err"; echo "-j 1 reports"; cat "$work/want.err"; exit 1; }

# refusals: each names the partial at fault
refused() {   # LABEL WANT-STATUS WANT-TEXT PARTS...
	local label=$1 want=$2 text=$3 rc=0
	shift 3
	"$TK" merge --to csv "$@" >/dev/null 2>"$work/err" || rc=$?
	[ "$rc" = "$want" ] || { echo "$label: exit $rc, not $want"; cat "$work/err"; exit 1; }
	grep -q -- "$text" "$work/err" || { echo "$label: no '$text' in:"; cat "$work/err"; exit 1; }
}
for i in 1 2 3; do
	"$TK" profile --shard "$i/3" -o "$work/x-$i.tkp" "$SRC/tests/data/xray/fdr-v5.xray"
	"$TK" profile --shard "$i/3" -o "$work/p-$i.tkp" --elf "$work/lj:$bias" "$work/lj.pt"
done
# partials are small: a profile per chunk with its durations as sorted runs (version 1,
# 12 bytes a completed call, made them twice the trace); at the default chunk size the
# three partials of lj.pt are under a tenth of it
for i in 1 2 3; do
	env -u TK_IPT_CHUNK "$TK" profile --shard "$i/3" -o "$work/s-$i.tkp" --elf "$work/lj:$bias" "$work/lj.pt"
done
size=$(cat "$work"/s-*.tkp | wc -c)
[ "$size" -lt $(( $(stat -c %s "$work/lj.pt") / 10 )) ] ||
	{ echo "partials of lj.pt: $size bytes, not under a tenth of $(stat -c %s "$work/lj.pt")"; exit 1; }
refused "missing shard" 2 "shard 2/3 is missing" "$work/x-1.tkp" "$work/x-3.tkp"
refused "repeated shard" 2 "x-1.tkp: shard 1/3 given twice" "$work/x-1.tkp" "$work/x-2.tkp" \
	"$work/x-1.tkp" "$work/x-3.tkp"
refused "another input" 2 "p-2.tkp: not of the same job" "$work/x-1.tkp" "$work/p-2.tkp" "$work/x-3.tkp"
# another version: the version field follows the 8-byte magic
cp "$work/x-2.tkp" "$work/v.tkp"
printf '\x09' | dd of="$work/v.tkp" bs=1 seek=8 conv=notrunc status=none
refused "another version" 3 "v.tkp: offset 0x8: partial format version 9" "$work/x-1.tkp" \
	"$work/v.tkp" "$work/x-3.tkp"
head -c 100 "$work/x-2.tkp" >"$work/cut.tkp"
refused "cut short" 3 "cut.tkp: offset 0x" "$work/x-1.tkp" "$work/cut.tkp" "$work/x-3.tkp"
refused "not a partial" 3 "not a tracekit partial" "$work/x-1.tkp" "$work/lj.pt" "$work/x-3.tkp"
# an input that changed since the shards read it
cp "$work/lj.pt" "$work/moved.pt"
"$TK" profile --shard 1/1 -o "$work/m.tkp" --elf "$work/lj:$bias" "$work/moved.pt"
printf 'x' >>"$work/moved.pt"
refused "changed input" 3 "moved.pt: not the file the shards read" "$work/m.tkp"
# --shard writes a partial only to a file
rc=0; "$TK" profile --shard 1/2 "$work/lj.pt" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "--shard without -o: exit $rc"; exit 1; }
rc=0; "$TK" profile --shard 3/2 -o "$work/z.tkp" "$work/lj.pt" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "--shard 3/2: exit $rc"; exit 1; }
echo "shards: ok"
