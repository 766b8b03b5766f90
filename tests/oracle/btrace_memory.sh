#!/usr/bin/env bash
# Branch-trace profile memory does not grow with the trace (issue 31 item 23): a recording
# of about 5 MB (one thread, 3 PSB chunks; small for the sanitizer build). Before, -j 2 held every decoded
# chunk's events until its turn (440 MB for 15 MB) and each thread's stream was joined in
# memory; now a chunk past a few MB of events waits for its turn, and the stream is decoded
# part by part. Peak memory at -j 2 within a fixed margin of -j 1's, and the same profile
# (csv and folded) at -j 1 and -j 2, and with the trace cut into many parts (the source's
# chunks, profiled on the pool and merged).
set -euo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# sanitizer builds: freed buffers must not sit in a quarantine larger than the margin
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
cat >"$W/loop.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static long leaf(long x) { return x % 7 ? x * 3 : x / 2; }
__attribute__((noinline)) static long mid(long x)
{
	long s = 0;
	for (int i = 0; i < 4; i++)
		s += leaf(x + i);
	return s;
}
int main(int argc, char **argv)
{
	long n = atol(argv[1]), s = 0;
	for (long i = 0; i < n; i++)
		s += i & 1 ? mid(i) : leaf(i);
	printf("%ld\n", s);
	return 0;
}
C
cc -O1 -o "$W/loop" "$W/loop.c"
"$TK" record --btrace -o "$W/t.tkbt" -- "$W/loop" 400000 >/dev/null 2>"$W/rec.err" ||
	{ echo "record failed"; cat "$W/rec.err"; exit 1; }
size=$(stat -c %s "$W/t.tkbt")
[ "$size" -gt $((4 << 20)) ] || { echo "FAIL: the recording is only $size bytes"; exit 1; }
fail=0
for to in csv folded; do
	for j in 1 2; do
		/usr/bin/time -f %M -o "$W/rss.$to.$j" "$TK" profile -j $j --to $to "$W/t.tkbt" >"$W/out.$to.$j"
	done
	cmp -s "$W/out.$to.1" "$W/out.$to.2" && echo "ok: --to $to -j 2 = -j 1" ||
		{ echo "FAIL: --to $to differs between -j 1 and -j 2"; fail=1; }
	# the trace in parts of 256 KiB, decoded on the pool and merged: the same profile
	/usr/bin/time -f %M -o "$W/rss.$to.parts" env TK_IPT_CHUNK=262144 "$TK" profile -j 3 --to $to \
		"$W/t.tkbt" >"$W/out.$to.parts"
	cmp -s "$W/out.$to.1" "$W/out.$to.parts" && echo "ok: --to $to in parts on 3 workers = -j 1" ||
		{ echo "FAIL: --to $to differs in parts"; fail=1; }
	[ "$(tail -1 "$W/rss.$to.parts")" -le $(($(tail -1 "$W/rss.$to.1") + 64 * 1024)) ] ||
		{ echo "FAIL: parts held in memory: $(tail -1 "$W/rss.$to.parts") KiB"; fail=1; }
	one=$(tail -1 "$W/rss.$to.1") two=$(tail -1 "$W/rss.$to.2")
	echo "--to $to: peak $one KiB at -j 1, $two KiB at -j 2 (trace $((size >> 10)) KiB)"
	[ "$two" -le $((one + 64 * 1024)) ] || { echo "FAIL: -j 2 holds the trace's events in memory"; fail=1; }
done
grep -q '^"mid",200000,' "$W/out.csv.1" || { echo "FAIL: mid() not called 200000 times"; head "$W/out.csv.1"; fail=1; }
[ $fail -eq 0 ] && echo "btrace memory: all passed"
exit $fail
