#!/usr/bin/env bash
# examples/library/profile_csv.c, a program of the library's users, prints the same bytes
# as `tracekit profile --to csv` for every format with calls: an Intel PT raw stream with
# --elf, a perf.data file, an XRay log, a branch trace and an xtrace trace; and
# examples/library/events.c streams as many instructions as `decode --stat` counts, and
# the same counts in chunks of 300 bytes on every core;
# examples/library/kanata_stats.c prints what `tracekit stats` prints for Kanata logs.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ex="$BUILD/examples/library"
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
"$TK" record --btrace -o "$work/lj.tkbt" -- "$work/lj" >/dev/null 2>"$work/rec.err" ||
	{ echo "record failed"; cat "$work/rec.err"; exit 1; }
"$TK" convert --to ipt -q -o "$work/lj.pt" "$work/lj.tkbt"
bias=$("$TK" info "$work/lj.tkbt" | awk -v m="$work/lj" '$1 == "module" && $2 == m {
	for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }')
python3 "$SRC/tests/tools/mkperf.py" "$work/two.data" --queue 0:1:"$work/lj.pt" \
	--queue 3:1:"$work/lj.pt" --module "$work/lj:$bias"

same() {   # LABEL TRACE [ELF...]: the example's CSV against the command's
	local label=$1 trace=$2
	shift 2
	local elfs=()
	for e in "$@"; do elfs+=(--elf "$e"); done
	"$TK" profile --to csv "${elfs[@]}" "$trace" >"$work/want.csv" 2>/dev/null || true
	"$ex/profile_csv" "$trace" "$@" >"$work/got.csv" 2>/dev/null || true
	[ -s "$work/want.csv" ] || { echo "$label: tracekit profile printed nothing"; exit 1; }
	cmp -s "$work/want.csv" "$work/got.csv" || {
		echo "$label: profile_csv differs from tracekit profile --to csv"
		diff "$work/want.csv" "$work/got.csv" | head -10 || true; exit 1; }
}
same "Intel PT raw" "$work/lj.pt" "$work/lj:$bias"
same "perf.data" "$work/two.data"
same "XRay" "$SRC/tests/data/xray/fdr-v5.xray"
same "branch trace" "$work/lj.tkbt"
same "xtrace" "$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin"

want=$("$TK" decode --stat --elf "$work/lj:$bias" "$work/lj.pt" | awk '$1 == "insn:" {print $2}')
got=$("$ex/events" "$work/lj.pt" "$work/lj:$bias" | awk '$1 == "instructions" {print $2}')
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "events: $got instructions, decode: $want"; exit 1; }
# in chunks of about 300 bytes, decoded on every core (the calling thread decodes some too:
# tk_run_events' chunks never wait for a merge), as many events of each kind as in one
for t in "$work/lj.pt $work/lj:$bias" "$work/lj.tkbt"; do
	# shellcheck disable=SC2086
	one=$("$ex/events" $t) && cut=$("$ex/events" -c 300 $t) ||
		{ echo "events failed on $t"; exit 1; }
	[ "$one" = "$cut" ] && [ -n "$one" ] ||
		{ echo "events in chunks of 300 bytes differ on $t:"; diff <(echo "$one") <(echo "$cut"); exit 1; }
done
# Kanata through its source: as many instructions begun, retired and flushed as check counts
kn="$SRC/tests/data/kanata/kanata-sample-1.log"
[ -f "${DATA:-}/kanata/kanata-sample-2.log.gz" ] && kn="$DATA/kanata/kanata-sample-2.log.gz"
kwant=$( ("$TK" check "$kn" 2>/dev/null || true) | sed -n 's/.*; \([0-9]*\) instructions (\([0-9]*\) retired, \([0-9]*\) flushed.*/\1 \2 \3/p')
kgot=$("$ex/events" "$kn" | awk '{ c[$1] = $2 } END { print c["insn"] + 0, c["retire"] + 0, c["flush"] + 0 }')
[ -n "$kwant" ] && [ "$kwant" = "$kgot" ] || { echo "events on Kanata: $kgot, check: $kwant"; exit 1; }
# Kanata's statistics: examples/library/kanata_stats.c prints tracekit stats' bytes, in
# each output, on a clean log, the larger sample and a log with bad lines (exit 1 both)
for log in "$SRC/tests/data/kanata/kanata-sample-1.log" "$kn" \
	"$SRC/tests/golden/kanata/bad-lines-stats/bad.log"; do
	for to in text json csv; do
		wrc=0; grc=0
		"$TK" stats --to "$to" "$log" >"$work/want.st" 2>/dev/null || wrc=$?
		"$ex/kanata_stats" "$log" "$to" >"$work/got.st" 2>/dev/null || grc=$?
		[ -s "$work/want.st" ] || { echo "$log: tracekit stats --to $to printed nothing"; exit 1; }
		[ "$wrc" = "$grc" ] || { echo "$log --to $to: kanata_stats exit $grc, stats $wrc"; exit 1; }
		cmp -s "$work/want.st" "$work/got.st" || {
			echo "$log: kanata_stats $to differs from tracekit stats --to $to"
			diff "$work/want.st" "$work/got.st" | head -10 || true; exit 1; }
	done
done
echo "library examples: ok (6 formats; $got instructions streamed; Kanata stats)"
