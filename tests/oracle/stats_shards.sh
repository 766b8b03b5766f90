#!/usr/bin/env bash
# stats --shard I/N + merge, and tracekit-mpi stats, print what `stats -j 1` prints (text,
# json, csv) for an Intel PT raw stream with --elf (300-byte chunks), a perf.data with two
# queues, a branch trace and xtrace traces, with 1, 2, 3 and more shards than chunks; damaged data in one
# shard: that shard reports the gap (file, offset) and exits 1, the merge repeats it and
# exits 1 with -j 1's statistics (Kanata's shards: kanata_shards.sh).
# decode --stat's counts likewise (Intel PT raw, perf.data, branch traces and xtrace; under
# MPI too).
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$SRC/tests/tools/lj-traces.sh"
export TK_IPT_CHUNK=300

same() {   # LABEL N OPTIONS... -- FILES...
	local label=$1 n=$2 opts=() files=()
	shift 2
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	files=("$@")
	rm -f "$work"/part-*.tkp
	for i in $(seq 1 "$n"); do
		"$TK" stats --shard "$i/$n" -j 2 -o "$work/part-$i.tkp" "${opts[@]}" "${files[@]}" \
			2>"$work/shard.err" || { echo "$label: shard $i/$n failed"; cat "$work/shard.err"; exit 1; }
	done
	for to in $kinds; do
		"$TK" stats -j 1 --to "$to" "${opts[@]}" "${files[@]}" >"$work/want"
		[ -s "$work/want" ] || { echo "$label: stats --to $to printed nothing"; exit 1; }
		"$TK" merge --to "$to" "$work"/part-*.tkp >"$work/got" 2>"$work/merge.err" ||
			{ echo "$label: merge --to $to failed"; cat "$work/merge.err"; exit 1; }
		cmp -s "$work/want" "$work/got" || { echo "$label: $n shards merged --to $to differ"
			diff "$work/want" "$work/got" | head -10 || true; exit 1; }
	done
}
kinds="text json csv"
same "Intel PT raw" 3 --elf "$work/lj:$bias" -- "$work/lj.pt"
kinds="text"
same "Intel PT raw" 1 --elf "$work/lj:$bias" -- "$work/lj.pt"
TK_IPT_CHUNK=1000000 same "Intel PT raw, more shards than chunks" 4 --elf "$work/lj:$bias" -- "$work/lj.pt"
same "perf.data" 2 -- "$work/two.data"
same "branch trace" 3 -- "$work/lj.tkbt"
same "two inputs" 3 --elf "$work/lj:$bias" -- "$work/lj.pt" "$work/lj.pt"
# xtrace: chunks at snapshots (the generated trace has several), merged in trace order
xtrace="$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin"
python3 "$SRC/bench/xtrace-gen.py" "$work/xt" 3 >/dev/null
kinds="text json"
same "xtrace" 2 -- "$xtrace"
same "xtrace, chunks at snapshots" 3 -- "$work"/xt/*.xinsndata.bin
same "xtrace, more shards than chunks" 7 -- "$work"/xt/*.xinsndata.bin
[ "$(cat "$work"/part-*.tkp | grep -c TKXTST)" -gt 0 ] || { echo "xtrace: no statistics in the partials"; exit 1; }
# a shard decodes its part only: three shards' partials are not three copies of one
s1=$(cmp -s <("$TK" stats --shard 1/3 -o /dev/stdout --elf "$work/lj:$bias" "$work/lj.pt") \
	<("$TK" stats --shard 3/3 -o /dev/stdout --elf "$work/lj:$bias" "$work/lj.pt") && echo same || echo differ)
[ "$s1" = differ ] || { echo "shards 1/3 and 3/3 hold the same statistics"; exit 1; }

# damaged bytes in one shard's chunks
cp "$work/lj.pt" "$work/dmg.pt"
# (its middle and a sixth of it: the middle and the first shard's, whatever the length of
# the recorded stream; two shards' losses make one summary, as -j 1 prints it)
for at in 2 6; do
	printf '\xff%.0s' $(seq 16) | dd of="$work/dmg.pt" bs=1 \
		seek=$(($(stat -c %s "$work/lj.pt") / at)) conv=notrunc status=none
done
rc=0; "$TK" stats -j 1 --elf "$work/lj:$bias" "$work/dmg.pt" >"$work/want" 2>"$work/want.err" || rc=$?
[ "$rc" = 1 ] || { echo "damaged: stats exit $rc, not 1"; exit 1; }
statuses=
for i in 1 2 3; do
	rc=0; "$TK" stats --shard "$i/3" -o "$work/d-$i.tkp" --elf "$work/lj:$bias" "$work/dmg.pt" \
		2>>"$work/got.err" || rc=$?
	statuses="$statuses$rc"
done
[ "$statuses" = 110 ] || { echo "damaged: shard statuses $statuses, not 110"; exit 1; }
# each shard names its gap's offset as -j 1 does
for off in $(grep -o 'offset 0x[0-9a-f]*' "$work/want.err" | sort -u | cut -d' ' -f2); do
	grep -q "$off" "$work/got.err" || { echo "damaged: no shard names $off"; cat "$work/got.err"; exit 1; }
done
rc=0; "$TK" merge "$work"/d-*.tkp >"$work/got" 2>"$work/merge.err" || rc=$?
[ "$rc" = 1 ] || { echo "damaged: merge exit $rc, not 1"; cat "$work/merge.err"; exit 1; }
cmp -s "$work/got" "$work/want" || { echo "damaged: merge differs from -j 1"; exit 1; }
# the shards' messages once, then one summary of what the input lost: -j 1's words
cmp -s "$work/want.err" "$work/merge.err" ||
	{ echo "damaged: merge reports"; cat "$work/merge.err"; echo "-j 1 reports"; cat "$work/want.err"; exit 1; }

# decode --stat: its counts as partials, the same bytes as decode --stat -j 1
dsame() {   # LABEL N OPTIONS... FILE: the same bytes and exit status
	local label=$1 n=$2 rc want_rc
	shift 2
	rm -f "$work"/dpart-*.tkp
	for i in $(seq 1 "$n"); do
		rc=0; "$TK" decode --stat --shard "$i/$n" -j 2 -o "$work/dpart-$i.tkp" "$@" 2>/dev/null || rc=$?
		[ "$rc" -le 1 ] || { echo "$label: decode --stat shard $i/$n: exit $rc"; exit 1; }
	done
	want_rc=0; "$TK" decode --stat -j 1 "$@" >"$work/want" 2>/dev/null || want_rc=$?
	grep -q ': [1-9]' "$work/want" || { echo "$label: decode --stat counted nothing"; exit 1; }
	rc=0; "$TK" merge "$work"/dpart-*.tkp >"$work/got" 2>/dev/null || rc=$?
	[ "$rc" = "$want_rc" ] || { echo "$label: decode --stat merge exit $rc, -j 1 $want_rc"; exit 1; }
	cmp -s "$work/want" "$work/got" || { echo "$label: $n decode --stat shards differ"
		diff "$work/want" "$work/got" | head; exit 1; }
}
dsame "decode --stat, Intel PT raw" 3 --elf "$work/lj:$bias" "$work/lj.pt"
dsame "decode --stat, perf.data" 2 "$work/two.data"
TK_IPT_CHUNK=1000000 dsame "decode --stat, more shards than chunks" 3 --elf "$work/lj:$bias" "$work/lj.pt"
rc=0; "$TK" decode --stat -j 1 --elf "$work/lj:$bias" "$work/dmg.pt" >"$work/want" 2>"$work/want.err" || rc=$?
[ "$rc" = 1 ] || { echo "damaged: decode --stat exit $rc, not 1"; exit 1; }
statuses=
for i in 1 2 3; do
	rc=0; "$TK" decode --stat --shard "$i/3" -o "$work/dd-$i.tkp" --elf "$work/lj:$bias" \
		"$work/dmg.pt" 2>/dev/null || rc=$?
	statuses="$statuses$rc"
done
[ "$statuses" = 110 ] || { echo "damaged: decode --stat shard statuses $statuses, not 110"; exit 1; }
rc=0; "$TK" merge "$work"/dd-*.tkp >"$work/got" 2>"$work/merge.err" || rc=$?
[ "$rc" = 1 ] && cmp -s "$work/got" "$work/want" || { echo "damaged: decode --stat merge exit $rc"; exit 1; }
cmp -s "$work/want.err" "$work/merge.err" || { echo "damaged: decode --stat merge reports"
	cat "$work/merge.err"; echo "-j 1 reports"; cat "$work/want.err"; exit 1; }
dsame "decode --stat, xtrace" 3 "$work"/xt/*.xinsndata.bin
# damaged xtrace with snapshots but one chunk: statistics resync where decode does (they
# skipped to the end of the chunk, losing every instruction after the damage)
cp -r "$work/xt" "$work/xd"
xd=$(echo "$work"/xd/*.xinsndata.bin)
printf '\xff%.0s' $(seq 32) | dd of="$xd" bs=1 seek=$(($(stat -c %s "$xd") / 2)) conv=notrunc status=none
dec=$("$TK" decode --stat -j 1 "$xd" 2>/dev/null | awk '{ print $2 }') || true
tot=$("$TK" stats -j 1 --to csv "$xd" 2>/dev/null | awk -F, '$2 == "\"total\"" { print $3; exit }') || true
[ -n "$dec" ] && [ "$dec" = "$tot" ] || { echo "damaged xtrace: decode --stat $dec, stats total $tot"; exit 1; }
dsame "decode --stat, damaged xtrace" 3 "$xd"

rc=0; "$TK" decode --shard 1/2 -o "$work/x.tkp" --elf "$work/lj:$bias" "$work/lj.pt" 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "only the counts of --stat" "$work/err" || { echo "decode --shard without --stat: exit $rc"; exit 1; }
printf 'Kanata\t0004\nC=\t0\nI\t0\t0\t0\n' >"$work/k0.log"
rc=0; "$TK" decode --stat --shard 1/2 -o "$work/x.tkp" "$work/k0.log" 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "decode --stat --shard: not for" "$work/err" || { echo "Kanata decode --stat --shard: exit $rc"; cat "$work/err"; exit 1; }
# branch traces: each thread's counts, in thread order (three threads, one shard each or not)
cc -O1 -pthread -o "$work/thr" "$SRC/tests/data/btrace/threads.c"
"$TK" record --btrace -o "$work/thr.tkbt" -- "$work/thr" >/dev/null 2>&1
[ "$("$TK" decode --stat -j 1 "$work/thr.tkbt" | grep -c '^\[thread')" -ge 3 ] || { echo "threads.c: fewer than 3 threads"; exit 1; }
for n in 1 2 3 5; do dsame "decode --stat, branch trace of threads" "$n" "$work/thr.tkbt"; done
tid=$("$TK" decode --stat -j 1 "$work/thr.tkbt" | sed -n '3{n;s/\[thread \(.*\)\]/\1/p}')
dsame "decode --stat --tid $tid, branch trace" 2 --tid "$tid" "$work/thr.tkbt"

# refused: mixing commands, output to stdout (Kanata's statistics: kanata_shards.sh)
"$TK" profile --shard 2/3 -o "$work/p-2.tkp" --elf "$work/lj:$bias" "$work/lj.pt"
"$TK" stats --shard 1/3 -o "$work/s-1.tkp" --elf "$work/lj:$bias" "$work/lj.pt"
"$TK" stats --shard 3/3 -o "$work/s-3.tkp" --elf "$work/lj:$bias" "$work/lj.pt"
rc=0; "$TK" merge "$work/s-1.tkp" "$work/p-2.tkp" "$work/s-3.tkp" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "p-2.tkp: not of the same job.*another command" "$work/err" ||
	{ echo "mixed commands: exit $rc"; cat "$work/err"; exit 1; }
rc=0; "$TK" stats --shard 1/2 --elf "$work/lj:$bias" "$work/lj.pt" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "stats --shard without -o: exit $rc"; exit 1; }

# tracekit-mpi stats: the same bytes as stats -j 1
mpi="$BUILD/tracekit-mpi"
if [ -x "$mpi" ]; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # as mpi.sh
	. "$SRC/tests/tools/mpi-run.sh"
	for args in "--elf $work/lj:$bias $work/lj.pt" "$work/two.data" "$work/lj.tkbt" "$(echo "$work"/xt/*.xinsndata.bin)"; do
		# shellcheck disable=SC2086
		"$TK" stats -j 1 --to json $args >"$work/want"
		# shellcheck disable=SC2086
		mpi_run 2 "$mpi" stats -j 1 --to json -o "$work/got" $args 2>"$work/err" ||
			{ echo "mpi stats $args failed"; cat "$work/err"; exit 1; }
		cmp -s "$work/want" "$work/got" || { echo "mpi stats $args: differs from -j 1"; exit 1; }
	done
	for args in "--elf $work/lj:$bias $work/lj.pt $work/lj.pt" "$work/two.data" "$xd" "$work/thr.tkbt"; do
		want_rc=0
		# shellcheck disable=SC2086
		"$TK" decode --stat -j 1 $args >"$work/want" 2>/dev/null || want_rc=$?
		rc=0
		# shellcheck disable=SC2086
		mpi_run 3 "$mpi" decode --stat -j 1 $args >"$work/got" 2>"$work/err" || rc=$?
		[ "$rc" = "$want_rc" ] || { echo "mpi decode --stat $args: exit $rc, -j 1 $want_rc"; cat "$work/err"; exit 1; }
		cmp -s "$work/want" "$work/got" || { echo "mpi decode --stat $args: differs from -j 1"; exit 1; }
	done
fi
echo "stats shards: ok"
