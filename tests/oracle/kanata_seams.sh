#!/usr/bin/env bash
# Kanata stats -j N parses each chunk before its starting cycle and line are known and
# rebases it once they are; a C= line (or a C near the cycle limit) in such a chunk waits for
# its start. -j 2 and -j 3 must print what -j 1 prints (stdout, stderr, exit status), and
# --shard I/N + merge too (and info, whose counts are the statistics', check, which parses
# as they do at -j N, and report and convert --to chrome, whose decoder parses so too), for:
# C= lines in every chunk, one right at a seam, one that goes back at a seam (an error),
# damaged lines at seams, instructions in flight across every seam, more than 256 warnings
# in a chunk, and cycles that cross the limit after a seam (the parallel run falls back).
# dump -j N, report and the timeline parse each chunk from the start a scan of the C lines
# gives it: the same for these, and for C lines the scan and the reader read apart.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 "$SRC/bench/kanata-inflight.py" 1 "$work/big.log" >/dev/null
head -n 12000 "$work/big.log" >"$work/inflight.log"   # (short under the sanitizers)

# C lines become C= of the same cycle every 97th time; every 301st a C= jumps 1000 ahead
awk -F'\t' '$1 == "C=" { cyc = $2 } $1 == "C" { cyc += $2; n++
	if (n % 301 == 0) { cyc += 1000; printf "C=\t%d\n", cyc; next }
	if (n % 97 == 0) { printf "C=\t%d\n", cyc; next } } { print }' \
	"$work/inflight.log" >"$work/cset.log"
grep -q '^C=' <(tail -n 1000 "$work/cset.log") || { echo "no C= late in the log"; exit 1; }

same_dump() {   # LABEL FILE: dump -j 2, -j 3 (and -q, --no-offset) = -j 1
	local label=$1 f=$2 j rc want_rc opt
	for opt in "" -q --no-offset; do
		want_rc=0; "$TK" dump -j 1 $opt "$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
		[ -n "$opt" ] || [ -s "$work/want" ] || { echo "$label: dump -j 1 printed nothing"; exit 1; }
		for j in 2 3; do
			rc=0; "$TK" dump -j "$j" $opt "$f" >"$work/got" 2>"$work/got.err" || rc=$?
			[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" &&
				cmp -s "$work/want.err" "$work/got.err" ||
				{ echo "$label: dump -j $j $opt differs (exit $rc, -j 1 $want_rc)"
				  diff "$work/want" "$work/got" | head -5 || true
				  diff "$work/want.err" "$work/got.err" | head -5 || true; exit 1; }
		done
	done
}

same() {   # LABEL FILE OPTIONS...: -j 2, -j 3 and 3 shards merged = -j 1
	local label=$1 f=$2 j rc want_rc
	shift 2
	want_rc=0; "$TK" stats -j 1 "$@" "$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
	[ -s "$work/want" ] || { echo "$label: -j 1 printed nothing"; exit 1; }
	for j in 2 3; do
		rc=0; "$TK" stats -j "$j" "$@" "$f" >"$work/got" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$want_rc" ] || { echo "$label: -j $j exit $rc, -j 1 $want_rc"; exit 1; }
		cmp -s "$work/want" "$work/got" || { echo "$label: -j $j differs"
			diff "$work/want" "$work/got" | head -10 || true; exit 1; }
		cmp -s "$work/want.err" "$work/got.err" || { echo "$label: -j $j other diagnostics"
			diff "$work/want.err" "$work/got.err" | head -10 || true; exit 1; }
	done
	rm -f "$work"/part-*.tkp
	for j in 1 2 3; do
		"$TK" stats --shard "$j/3" -j 2 -o "$work/part-$j.tkp" "$@" "$f"
	done
	rc=0; "$TK" merge "$work"/part-*.tkp >"$work/got" 2>"$work/got.err" || rc=$?
	[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" && cmp -s "$work/want.err" "$work/got.err" ||
		{ echo "$label: 3 shards merged differ (exit $rc, -j 1 $want_rc)"
		  diff "$work/want.err" "$work/got.err" | head -5 || true; exit 1; }
	# check -j N is the statistics' parse too, every diagnostic listed in -j 1's order
	want_rc=0; "$TK" check -j 1 "$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
	for j in 2 3; do
		rc=0; "$TK" check -j "$j" "$f" >"$work/got" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" && cmp -s "$work/want.err" "$work/got.err" ||
			{ echo "$label: check -j $j differs (exit $rc, -j 1 $want_rc)"
			  diff "$work/want" "$work/got" | head -5 || true; exit 1; }
	done
	same_dump "$label" "$f"
	# report and the timeline decode the chunks at once, each chunk's events merged in order
	# (the report's pipeline part prepared on the workers for chunks past its diagram:
	# --cycles 0:100 leaves few before)
	local cmd
	for cmd in report "report --cycles 0:100" "convert --to chrome"; do
		agree_out "$label" "$cmd" "$f"
	done
	same_compressed "$label" "$f" "$@"
	# info's counts are the statistics' too
	want_rc=0; "$TK" info -j 1 "$f" >"$work/want" 2>&1 || want_rc=$?
	for j in 2 3; do
		rc=0; "$TK" info -j "$j" "$f" >"$work/got" 2>&1 || rc=$?
		[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" ||
			{ echo "$label: info -j $j differs (exit $rc, -j 1 $want_rc)"
			  diff "$work/want" "$work/got" | head -5 || true; exit 1; }
	done
}

# COMMAND -j 2 and -j 3 print what -j 1 prints (stdout, stderr, exit status); the exit
# status of -j 1 in $agreed_rc
agree_j() {   # LABEL COMMAND ARGS...
	local label=$1 cmd=$2 j rc
	shift 2
	agreed_rc=0; "$TK" "$cmd" -j 1 "$@" >"$work/want" 2>"$work/want.err" || agreed_rc=$?
	for j in 2 3; do
		rc=0; "$TK" "$cmd" -j "$j" "$@" >"$work/got" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$agreed_rc" ] && cmp -s "$work/want" "$work/got" &&
			cmp -s "$work/want.err" "$work/got.err" ||
			{ echo "$label: $cmd -j $j differs (exit $rc, -j 1 $agreed_rc)"
			  diff "$work/want" "$work/got" | head -5 || true
			  diff "$work/want.err" "$work/got.err" | head -5 || true; exit 1; }
	done
}

# COMMAND -j 2 and -j 3 write into -o what -j 1 writes (and its messages, exit status)
agree_out() {   # LABEL COMMAND FILE
	local label=$1 cmd=$2 f=$3 j rc want_rc=0
	"$TK" $cmd -j 1 -o "$work/want.out" "$f" 2>"$work/want.err" || want_rc=$?
	[ -s "$work/want.out" ] || { echo "$label: $cmd -j 1 wrote nothing"; exit 1; }
	for j in 2 3; do
		rc=0; "$TK" $cmd -j "$j" -o "$work/got.out" "$f" 2>"$work/got.err" || rc=$?
		[ "$rc" = "$want_rc" ] && cmp -s "$work/want.out" "$work/got.out" &&
			cmp -s "$work/want.err" "$work/got.err" ||
			{ echo "$label: $cmd -j $j differs (exit $rc, -j 1 $want_rc)"
			  diff "$work/want.err" "$work/got.err" | head -5 || true; exit 1; }
	done
}

# stats, check and report of F gzipped and zstd-compressed: -j 2 and -j 3 read the chunks
# off the stream in turn (a compressed file's own path) and print what -j 1 prints
same_compressed() {   # LABEL FILE OPTIONS...
	local label=$1 f=$2 z
	shift 2
	gzip -c "$f" >"$work/z.gz"
	zstd -q -c "$f" >"$work/z.zst"
	for z in "$work/z.gz" "$work/z.zst"; do
		agree_j "$label (${z##*/})" stats "$@" "$z"
		[ -s "$work/want" ] || { echo "$label: stats of ${z##*/} printed nothing"; exit 1; }
		agree_j "$label (${z##*/})" check "$z"
		agree_out "$label (${z##*/})" report "$z"
	done
}

# the byte offset of the line after line N: a chunk size that puts a seam right before it
seam_before() { head -n "$1" "$2" | wc -c; }

for chunk in 5000 13001 40000; do
	export TK_KANATA_CHUNK=$chunk
	same "C= in every chunk ($chunk)" "$work/cset.log" --window 50 --slowest 4
done

# a C= right at a seam: the chunk starts with it (the first C= after 3000 lines)
n=$(awk -F'\t' 'NR > 3000 && $1 == "C=" { print NR; exit }' "$work/cset.log")
export TK_KANATA_CHUNK=$(( $(seam_before $((n - 1)) "$work/cset.log") - 1 ))
same "C= at a seam" "$work/cset.log" --window 50 --slowest 4
# ... and one that goes back there (an error, the line skipped) after a damaged line
awk -v n="$n" 'NR == n - 1 { print "S\tx\t0\tF" } NR == n { print "C=\t3"; next } { print }' \
	"$work/cset.log" >"$work/back.log"
export TK_KANATA_CHUNK=$(( $(seam_before "$n" "$work/back.log") - 1 ))
rc=0; "$TK" stats -j 1 "$work/back.log" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 1 ] && grep -q ":$((n + 1)): error: C= 3 goes back" "$work/err" ||
	{ echo "C= back at a seam: exit $rc"; cat "$work/err"; exit 1; }
same "C= back at a seam" "$work/back.log" --window 50 --slowest 4
export TK_KANATA_CHUNK=5000
same "C= back at a seam, small chunks" "$work/back.log" --window 50

# damaged lines right after every C=, in flight instructions everywhere
awk -F'\t' '{ print } $1 == "C=" { print "R\t-\t0\t0" }' "$work/cset.log" >"$work/dmg.log"
same "damaged lines after C=" "$work/dmg.log" --window 50

# a warning for most instructions (an L after its R; in a later chunk than the R for some):
# past 256 in a chunk, check -j N still lists each with its text
awk -F'\t' '{ print } $1 == "R" { held[++n] = $2 }
	$1 == "C" { for (; n; n--) printf "L\t%s\t0\tlate\n", held[n] }' \
	"$work/cset.log" >"$work/late.log"
[ "$(grep -c 'after its R' <("$TK" check "$work/late.log" 2>&1))" -gt 1000 ] ||
	{ echo "late labels: too few warnings"; exit 1; }
export TK_KANATA_CHUNK=60000
same "many warnings a chunk" "$work/late.log" --window 50

# cycles near the limit (2^60): a later chunk crosses it; -j N reads in order and agrees
{ printf 'Kanata\t0004\nC=\t%d\n' $(( (1 << 60) - 400 ))
  for i in $(seq 0 599); do printf 'I\t%d\t%d\t0\nS\t%d\t0\tF\nC\t1\nR\t%d\t%d\t0\n' \
	"$i" "$i" "$i" "$i" "$i"; done; } >"$work/limit.log"
export TK_KANATA_CHUNK=2000
rc=0; "$TK" stats -j 1 "$work/limit.log" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 1 ] && grep -q "cycle beyond" "$work/err" || { echo "limit: exit $rc"; cat "$work/err"; exit 1; }
same "cycles past the limit" "$work/limit.log" --window 50

# dump: C deltas whose sum crosses the limit (after a negative C=) while the cycle does not:
# the reader skips the C that crosses it, the scan does not know the sum before its chunk
{ printf 'Kanata\t0004\nC=\t%d\n' $(( -(1 << 60) ))
  for i in $(seq 0 599); do printf 'I\t%d\t%d\t0\nS\t%d\t0\tF\nC\t%d\nR\t%d\t%d\t0\n' \
	"$i" "$i" "$i" $(( (1 << 53) + i )) "$i" "$i"; done; } >"$work/sum.log"
rc=0; "$TK" dump -j 1 "$work/sum.log" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 1 ] && grep -q "cycle beyond" "$work/err" || { echo "sum limit: exit $rc"; exit 1; }
same_dump "C deltas past the limit" "$work/sum.log"
# report and the timeline too: a decode's chunks also start where the scan says
for cmd in report "convert --to chrome"; do
	agree_out "C deltas past the limit" "$cmd" "$work/sum.log"
done
# "C 5" (a space): an unknown command to the reader, a cycle step to the scan
sed '0~50 s/^C\t/C /' "$work/inflight.log" >"$work/space.log"
grep -q '^C [0-9]' "$work/space.log" || { echo "no C with a space"; exit 1; }
for chunk in 3000 20000; do
	export TK_KANATA_CHUNK=$chunk
	same_dump "C with a space ($chunk)" "$work/space.log"
	for cmd in report "convert --to chrome"; do
		agree_out "C with a space ($chunk)" "$cmd" "$work/space.log"
	done
done
# a compressed log cut short or damaged in its middle: -j N reads its chunks in turn until
# the cut, then (the statistics) all of it again in order, and tells the cut where -j 1 does
export TK_KANATA_CHUNK=5000
gzip -c "$work/dmg.log" >"$work/dmg.gz"
head -c $(( $(stat -c %s "$work/dmg.gz") * 2 / 3 )) "$work/dmg.gz" >"$work/cut.log.gz"
cp "$work/dmg.gz" "$work/bad.log.gz"
printf '\377\377\377\377' | dd of="$work/bad.log.gz" bs=1 seek=$(( $(stat -c %s "$work/dmg.gz") / 2 )) \
	conv=notrunc 2>/dev/null
for f in cut bad; do
	agree_j "$f.log.gz" stats "$work/$f.log.gz"
	[ "$agreed_rc" != 0 ] && grep -q "gzip data" "$work/want.err" ||
		{ echo "$f.log.gz: -j 1 exit $agreed_rc"; head -3 "$work/want.err"; exit 1; }
	# the report's chunks end at the cut: the line it cuts short, and the cut, told as
	# -j 1 tells them
	for cmd in report "convert --to chrome"; do
		agree_out "$f.log.gz" "$cmd" "$work/$f.log.gz"
		grep -q "gzip data" "$work/want.err" ||
			{ echo "$f.log.gz: $cmd -j 1 told no cut"; head -3 "$work/want.err"; exit 1; }
	done
done
# cut inside a C line (stored gzip blocks put each byte where it is): the two digits left
# of five are the line cut short, not a smaller cycle step, at -j 2 and -j 3 as at -j 1
python3 - "$work/cline.log.gz" <<'PY'
import random, struct, sys
random.seed(7)
lines = ["Kanata\t0004", "C=\t0"]
for i in range(2000):
    lines += ["I\t%d\t%d\t0" % (i, i), "S\t%d\t0\tF" % i, "C\t%d" % random.randint(10000, 99999),
              "E\t%d\t0\tF" % i, "R\t%d\t%d\t0" % (i, i), "C\t%d" % random.randint(10000, 99999)]
data = ("\n".join(lines) + "\n").encode()
out, at = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", {}
for k in range(0, len(data), 65535):
    blk = data[k:k + 65535]
    out += bytes([k + 65535 >= len(data)]) + struct.pack("<HH", len(blk), 0xffff ^ len(blk))
    at[k] = len(out)
    out += blk
p = data.index(b"\nC\t", len(data) * 2 // 3) + 1 + 4   # C, a tab, two digits
k = p // 65535 * 65535
open(sys.argv[1], "wb").write(out[:at[k] + p - k])
PY
for cmd in report "convert --to chrome"; do
	agree_out "cline.log.gz" "$cmd" "$work/cline.log.gz"
	grep -q "1 skipped line" "$work/want.err" ||
		{ echo "cline.log.gz: $cmd -j 1 did not skip the cut line"; cat "$work/want.err"; exit 1; }
done
agree_j "cline.log.gz" stats "$work/cline.log.gz"
# a report's chunk keeps none of its events once prepared, unless the report refuses it
# (its diagram not full yet: the first chunks when they are small) or its stage names
# would be numbered anew (another chunk in flight met other new ones first): then it is
# parsed again at its merge, keeping them. Stages renamed in stretches, three new names
# met in turns, chunks small enough that several are in flight.
head -n 40000 "$work/big.log" |
	awk -F'\t' -v OFS='\t' '($1 == "S" || $1 == "E") && NR % 4000 < 300 { $4 = "N" int(NR / 4000) % 3 } { print }' \
	>"$work/names.log"
[ "$(grep -c $'^S\t.*\tN2$' "$work/names.log")" -gt 10 ] || { echo "no renamed stages"; exit 1; }
gzip -c "$work/names.log" >"$work/names.log.gz"
for chunk in 4000 30000; do
	export TK_KANATA_CHUNK=$chunk
	for f in names.log names.log.gz; do
		agree_out "stage names met in turns ($f, chunks of $chunk)" report "$work/$f"
		grep -q '"name":"N2"' "$work/want.out" || { echo "$f: no stage N2 in the report"; exit 1; }
	done
done
echo "kanata seams: ok"
