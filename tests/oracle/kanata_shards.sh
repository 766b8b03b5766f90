#!/usr/bin/env bash
# Kanata stats --shard I/N + tracekit merge, and tracekit-mpi stats, print what `stats -j 1`
# prints (text, json, csv; the same diagnostics on stderr and the same exit status): the
# samples, a log whose instructions stay in flight across every seam (small chunks:
# TK_KANATA_CHUNK), 1-7 shards (more than chunks), a damaged line inside a shard, more
# diagnostics in one chunk than a chunk keeps (-j N too), a log whose
# first chunk sets no cycle and a compressed one (both read in order by the merge), ids
# reused across chunks (the merge reads the log again, as -j N does); refusals, among them a
# partial whose slowest instruction ends before it begins.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="$SRC/tests/data/kanata"

same() {   # LABEL N OPTIONS... -- FILE: N shards merged = stats -j 1 (stdout, stderr, status)
	local label=$1 n=$2 opts=() rc want_rc to
	shift 2
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	rm -f "$work"/part-*.tkp
	for i in $(seq 1 "$n"); do
		rc=0; "$TK" stats --shard "$i/$n" -j 2 -o "$work/part-$(printf %02d "$i").tkp" "${opts[@]}" \
			"$1" 2>"$work/shard.err" || rc=$?
		[ "$rc" = 0 ] && [ ! -s "$work/shard.err" ] ||
			{ echo "$label: shard $i/$n: exit $rc"; cat "$work/shard.err"; exit 1; }
	done
	for to in $kinds; do
		want_rc=0; "$TK" stats -j 1 --to "$to" "${opts[@]}" "$1" >"$work/want" 2>"$work/want.err" ||
			want_rc=$?
		[ -s "$work/want" ] || { echo "$label: stats --to $to printed nothing"; exit 1; }
		rc=0; "$TK" merge --to "$to" "$work"/part-*.tkp >"$work/got" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$want_rc" ] || { echo "$label: merge exit $rc, stats -j 1 $want_rc"; cat "$work/got.err"; exit 1; }
		cmp -s "$work/want" "$work/got" || { echo "$label: $n shards merged --to $to differ"
			diff "$work/want" "$work/got" | head -10 || true; exit 1; }
		cmp -s "$work/want.err" "$work/got.err" || { echo "$label: $n shards: other diagnostics"
			diff "$work/want.err" "$work/got.err" | head -10 || true; exit 1; }
	done
}

python3 "$SRC/bench/kanata-inflight.py" 1 "$work/big.log" >/dev/null
head -n 16000 "$work/big.log" >"$work/inflight.log"   # (short under the sanitizers)
zcat "$SRC/../shared/data/kanata/kanata-sample-2.log.gz" >"$work/s2-all.log" 2>/dev/null ||
	cp "$data/kanata-sample-1.log" "$work/s2-all.log"
sed -n 1,20000p "$work/s2-all.log" >"$work/s2.log"
# a damaged line in the middle (inside shard 2 of 3)
awk 'NR == 9000 { print "S\t12x\t0\tDc" } { print }' "$work/inflight.log" >"$work/dmg.log"

export TK_KANATA_CHUNK=40000
kinds="text json csv"
same "in flight across seams" 3 --window 50 --slowest 4 -- "$work/inflight.log"
kinds=text
for n in 1 7; do
	same "in flight across seams" "$n" --window 50 --slowest 4 -- "$work/inflight.log"
done
same "sample 2" 3 --slowest 3 -- "$work/s2.log"
same "sample 1, more shards than chunks" 3 -- "$data/kanata-sample-1.log"
same "basic" 2 -- "$data/kanata-basic.txt"
same "damaged line" 3 -- "$work/dmg.log"
grep -q ':9000: error' "$work/got.err" || { echo "damaged line: not reported"; cat "$work/got.err"; exit 1; }
# more diagnostics in one chunk than a parallel chunk keeps (256): the same note
awk 'NR > 1000 && NR <= 1600 { print "X\tbad" } { print }' "$work/inflight.log" >"$work/many.log"
same "600 bad lines in one chunk" 2 -- "$work/many.log"
rc=0; "$TK" stats -j 3 "$work/many.log" >"$work/got" 2>"$work/got.err" || rc=$?
[ "$rc" = 1 ] && cmp -s "$work/want.err" "$work/got.err" || { echo "600 bad lines: -j 3 reports"
	diff "$work/want.err" "$work/got.err" | head; exit 1; }
# the first chunk sets no cycle (instructions before any C): read in order by the merge
{ printf 'Kanata\t0004\n'; for i in $(seq 0 3000); do printf 'I\t%d\t%d\t0\nS\t%d\t0\tF\nR\t%d\t%d\t0\n' \
	"$i" "$i" "$i" "$i" "$i"; done; printf 'C\t5\n'; } >"$work/nocycle.log"
same "no cycle in the first chunk" 3 -- "$work/nocycle.log"
# an id reused across chunks: the merge reads the log again in order (as -j N)
{ cat "$work/inflight.log"; printf 'I\t5\t5\t0\nR\t5\t1\t0\n'; } >"$work/reuse.log"
same "id reused across chunks" 3 -- "$work/reuse.log"
gzip -c "$work/inflight.log" >"$work/inflight.log.gz"
same "compressed" 2 -- "$work/inflight.log.gz"
# -j N in one process parses the same small chunks
"$TK" stats -j 1 --window 50 "$work/inflight.log" >"$work/want"
"$TK" stats -j 3 --window 50 "$work/inflight.log" >"$work/got"
cmp -s "$work/want" "$work/got" || { echo "-j 3 differs from -j 1"; exit 1; }
# a shard parses its part only; the others only count its lines and cycles
"$TK" stats --shard 1/3 -o "$work/a.tkp" "$work/inflight.log"
"$TK" stats --shard 3/3 -o "$work/b.tkp" "$work/inflight.log"
! cmp -s "$work/a.tkp" "$work/b.tkp" || { echo "shards 1/3 and 3/3 are the same"; exit 1; }

# refused: a Kanata partial with a PT one, another input, a missing shard
. "$SRC/tests/tools/lj-traces.sh"
"$TK" stats --shard 1/2 -o "$work/k1.tkp" "$work/inflight.log"
"$TK" stats --shard 2/2 -o "$work/k2.tkp" "$work/inflight.log"
"$TK" stats --shard 2/2 -o "$work/pt2.tkp" --elf "$work/lj:$bias" "$work/lj.pt"
rc=0; "$TK" merge "$work/k1.tkp" "$work/pt2.tkp" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "pt2.tkp" "$work/err" || { echo "Kanata + PT: exit $rc"; cat "$work/err"; exit 1; }
"$TK" stats --shard 2/2 -o "$work/o2.tkp" "$work/dmg.log"
rc=0; "$TK" merge "$work/k1.tkp" "$work/o2.tkp" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" -ge 2 ] && grep -q "o2.tkp" "$work/err" || { echo "another input: exit $rc"; cat "$work/err"; exit 1; }
rc=0; "$TK" merge "$work/k2.tkp" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "missing" "$work/err" || { echo "missing shard: exit $rc"; cat "$work/err"; exit 1; }
# a partial whose slowest instruction ends before it begins (begin and end swapped in its
# bytes: zigzag LEB128 of cycles 1000000 and 1000077) is refused with its offset
printf 'Kanata\t0004\nC=\t1000000\nI\t0\t0\t0\nS\t0\t0\tF\nC\t77\nR\t0\t0\t0\n' >"$work/slow.log"
"$TK" stats --shard 1/1 --slowest 1 -o "$work/slow.tkp" "$work/slow.log"
python3 - "$work/slow.tkp" "$work/swapped.tkp" <<'PY'
import sys
d = open(sys.argv[1], 'rb').read()
a, b = bytes([0x80, 0x89, 0x7a]), bytes([0x9a, 0x8a, 0x7a])
assert d.count(a + b) == 1, "begin/end bytes not found once"
open(sys.argv[2], 'wb').write(d.replace(a + b, b + a))
PY
rc=0; "$TK" merge "$work/swapped.tkp" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" -ge 2 ] && grep -q "swapped.tkp: offset 0x[0-9a-f]*: .*ending before it began" "$work/err" ||
	{ echo "slowest instruction ending before it began: exit $rc"; cat "$work/err"; exit 1; }
"$TK" merge "$work/slow.tkp" >/dev/null || { echo "the partial before the swap is refused"; exit 1; }
rc=0; "$TK" decode --stat --shard 1/2 -o "$work/x.tkp" "$work/inflight.log" 2>"$work/err" || rc=$?
[ "$rc" = 2 ] && grep -q "decode --stat --shard: not for" "$work/err" || { echo "decode --stat: exit $rc"; exit 1; }

# tracekit-mpi stats: the same bytes, diagnostics and status as stats -j 1
mpi="$BUILD/tracekit-mpi"
if [ -x "$mpi" ]; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # as mpi.sh
	. "$SRC/tests/tools/mpi-run.sh"
	for f in "$work/inflight.log" "$work/dmg.log"; do
		want_rc=0; "$TK" stats -j 1 --to json --window 50 "$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
		rc=0; mpi_run 3 "$mpi" stats -j 1 --to json --window 50 -o "$work/got" "$f" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$want_rc" ] || { echo "mpi stats $f: exit $rc, -j 1 $want_rc"; cat "$work/got.err"; exit 1; }
		cmp -s "$work/want" "$work/got" || { echo "mpi stats $f: differs from -j 1"; exit 1; }
		# (mpirun adds its own lines about the exit status)
		cmp -s "$work/want.err" <(grep '^tracekit' "$work/got.err") || {
			echo "mpi stats $f: other diagnostics"; cat "$work/got.err"; exit 1; }
	done
fi
echo "kanata shards: ok"
