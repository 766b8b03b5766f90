#!/usr/bin/env bash
# tracekit dump of a branch trace (.tkbt), against an independent reading of the container
# as docs/formats/tkbt.md lays it out (tests/tools/tkbt.py):
# - one line per record: its file offset, type, thread and sequence number, payload size
# - each thread's Intel PT: the stream joined from its STREAM payloads, dumped as a raw
#   stream is (same packets, same offsets); a program of five threads, and one whose
#   stream is in several pieces
# - a record damaged in the middle: named with its offset, the records after it listed,
#   exit status 1; --tid picks one thread
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -pthread -o "$work/thr" "$SRC/tests/data/btrace/threads.c"
"$TK" record --btrace -q -o "$work/t.tkbt" -- "$work/thr" >/dev/null
tkbt() { python3 "$SRC/tests/tools/tkbt.py" "$@"; }

# F: records and packets as the independent reader sees them; prints the thread count
check_file() {
	local f=$1 nthr=0
	"$TK" dump "$f" >"$work/dump.txt"
	# the records: "OFFSET TYPE [TID SEQ SIZE]", from the dump and from the container
	awk '/^\[/ {exit} $2 == "stream" {sub(":", "", $6); print $1, $2, $4, $6, $7; next}
		$2 == "thread-end" {sub(":", "", $6); print $1, $2, $4, $6; next}
		$2 != "header" {print $1, $2}' "$work/dump.txt" >"$work/ours.rec"
	tkbt records "$f" >"$work/theirs.rec"
	cmp -s "$work/ours.rec" "$work/theirs.rec" ||
		{ echo "$f: records differ" >&2; diff "$work/theirs.rec" "$work/ours.rec" | head >&2; return 1; }
	# each thread's packets: as a raw stream of the joined payloads dumps
	for tid in $(awk '$2 == "stream" {print $3}' "$work/theirs.rec" | sort -u); do
		tkbt stream "$f" "$tid" >"$work/$tid.pt"
		"$TK" dump "$work/$tid.pt" >"$work/$tid.want"
		awk -v h="[thread $tid: " 'index($0, "[") == 1 {on = index($0, h) == 1; next} on' \
			"$work/dump.txt" >"$work/$tid.got"
		[ -s "$work/$tid.want" ] && cmp -s "$work/$tid.want" "$work/$tid.got" ||
			{ echo "$f: thread $tid: packets differ" >&2; diff "$work/$tid.want" "$work/$tid.got" | head >&2; return 1; }
		"$TK" dump --tid "$tid" "$f" | awk 'index($0, "[") == 1 {n++} END {exit n != 1}' ||
			{ echo "$f: --tid $tid: not one thread" >&2; return 1; }
		nthr=$((nthr + 1))
	done
	echo $nthr
}
# a program of five threads; one whose stream comes in several pieces (libc traced)
nthr=$(check_file "$work/t.tkbt")
[ "$nthr" = 5 ] || { echo "$nthr threads, want 5"; exit 1; }
cp "$work/theirs.rec" "$work/t.rec"
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
"$TK" record --btrace -q -o "$work/lj.tkbt" --module main --module "$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)" \
	-- "$work/lj" >/dev/null
[ "$(check_file "$work/lj.tkbt")" = 1 ] || exit 1
awk '$2 == "stream" && $4 > 0 {n++} END {exit !n}' "$work/theirs.rec" ||
	{ echo "lj.tkbt: its stream is one piece"; exit 1; }

# a damaged payload (the third stream record's): its offset named, the rest listed
off=$(awk '$2 == "stream" {if (++n == 3) {print $1; exit}}' "$work/t.rec")
cp "$work/t.tkbt" "$work/bad.tkbt"
printf '\xff\xff\xff\xff' | dd of="$work/bad.tkbt" bs=1 seek=$((16#$off + 40)) conv=notrunc status=none
rc=0
"$TK" dump "$work/bad.tkbt" >"$work/bad.txt" 2>"$work/bad.err" || rc=$?
[ $rc = 1 ] || { echo "damaged record: exit $rc, want 1"; cat "$work/bad.err"; exit 1; }
grep -q "$(printf 'bad.tkbt: offset 0x%x: damaged record; resynchronised' $((16#$off)))" "$work/bad.err" ||
	{ echo "damaged record: no message with offset $off"; cat "$work/bad.err"; exit 1; }
nrec=$(wc -l <"$work/t.rec")
nbad=$(awk '/^\[/ {exit} $2 != "header" {n++} END {print n}' "$work/bad.txt")
[ "$nbad" = $((nrec - 1)) ] || { echo "damaged record: $nbad records listed, want $((nrec - 1))"; exit 1; }
grep -q "^$off " "$work/bad.txt" && { echo "damaged record listed"; exit 1; }
echo "btrace dump: ok ($nrec records, $nthr threads)"
