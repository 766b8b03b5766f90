#!/usr/bin/env bash
# The flight recorder (record --btrace --ring SIZE, --snapshot-signal SIG, --max-size SIZE),
# against the full recording of the same deterministic program:
# - a loop, then a crash: the snapshot holds at least SIZE bytes of each thread's stream
#   and less than SIZE + one 64 KiB piece, decodes to exactly the last instructions of the
#   full trace, ending at the crashing instruction ([async disabled] after the call of
#   boom); decode and profile exit 1 and say it is a ring snapshot
# - --snapshot-signal USR2: the trace ends at the program's raise(SIGUSR2), the program
#   goes on (exit 0) untraced; the snapshot ends where the full trace has the raise
# - --max-size: the trace holds at most SIZE bytes of stream, decodes to exactly the first
#   instructions of the full trace and ends with a marked gap (exit 1)
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/ring" "$SRC/tests/data/btrace/ring.c"
cd "$work"
N=200000 SIZE=70000
# the same addresses in every run (no ASLR), so listings compare
norand() { setarch "$(uname -m)" -R "$@"; }
stream_bytes() { "$TK" info "$1" | awk '/^  thread / { print $3 }'; }
# the last / first lines of a decode without the thread header and gap lines
body() { "$TK" decode --no-disasm "$1" 2>/dev/null | grep -v '^\[thread\|^\[gap' || true; }

# a crash
norand "$TK" record --btrace -q -o full.tkbt -- ./ring $N crash 2>/dev/null && exit 1
norand "$TK" record --btrace -q -o r.tkbt --ring $SIZE -- ./ring $N crash 2>/dev/null && exit 1
b=$(stream_bytes r.tkbt)
[ "$b" -ge $SIZE ] && [ "$b" -lt $((SIZE + 65536)) ] || { echo "ring: $b bytes of stream"; exit 1; }
[ "$(stream_bytes full.tkbt)" -gt $((4 * b)) ] || { echo "ring: the full trace is not longer"; exit 1; }
grep -q 'ends at signal 11' <("$TK" info r.tkbt) || { echo "ring: no crash"; "$TK" info r.tkbt; exit 1; }
body full.tkbt >full.txt
body r.tkbt >r.txt
n=$(wc -l <r.txt)
[ "$n" -gt 1000 ] || { echo "ring: $n lines"; exit 1; }
# the snapshot's first block may start mid-way in the full trace's listing: its last n-100 lines
tail -n $((n - 100)) r.txt | cmp -s - <(tail -n $((n - 100)) full.txt) ||
	{ echo "ring: not the full trace's end"; diff <(tail -n 20 full.txt) <(tail -n 20 r.txt); exit 1; }
tail -n 1 r.txt | grep -q '^\[async disabled\]$' || { echo "ring: does not end at the crash"; tail -n 3 r.txt; exit 1; }
rc=0; "$TK" decode r.tkbt >r.dec 2>err.txt || rc=$?
[ $rc = 1 ] && grep -q 'ring snapshot' err.txt || { echo "ring: decode exit $rc"; cat err.txt; exit 1; }
sed -n 2p r.dec 2>/dev/null | grep -q '^\[gap: ring snapshot' || { echo "ring: start not marked"; exit 1; }
rc=0; "$TK" profile r.tkbt >/dev/null 2>err.txt || rc=$?
[ $rc = 1 ] && grep -q 'ring snapshot' err.txt || { echo "ring: profile exit $rc"; cat err.txt; exit 1; }

# a snapshot signal: the program goes on
norand "$TK" record --btrace -q -o sfull.tkbt -- ./ring $N signal 2>/dev/null || true   # USR2 ends it
norand "$TK" record --btrace -q -o s.tkbt --ring $SIZE --snapshot-signal USR2 -- ./ring $N signal ||
	{ echo "snapshot signal: the program did not go on"; exit 1; }
grep -q 'a snapshot at signal 12' <("$TK" info s.tkbt) || { echo "snapshot: not at USR2"; "$TK" info s.tkbt; exit 1; }
body s.tkbt >s.txt
body sfull.tkbt >sfull.txt
n=$(wc -l <s.txt)
tail -n $((n - 100)) s.txt | cmp -s - <(tail -n $((n - 100)) sfull.txt) ||
	{ echo "snapshot: not the trace up to the signal"; diff <(tail -n 5 sfull.txt) <(tail -n 5 s.txt); exit 1; }

# a size limit
norand "$TK" record --btrace -q -o big.tkbt -- ./ring $N
norand "$TK" record --btrace -q -o m.tkbt --max-size 150000 -- ./ring $N
b=$(stream_bytes m.tkbt)
[ "$b" -le 150000 ] && [ "$b" -gt 0 ] || { echo "max-size: $b bytes of stream"; exit 1; }
body m.tkbt >m.txt
body big.tkbt >big.txt
n=$(wc -l <m.txt)
# the last piece's last block ends where the stream stops: compare all but its end
head -n $((n - 100)) m.txt | cmp -s - <(head -n $((n - 100)) big.txt) || { echo "max-size: not the trace's start"; exit 1; }
rc=0; "$TK" decode m.tkbt >m.dec 2>err.txt || rc=$?
[ $rc = 1 ] && grep -q 'max-size' err.txt && tail -n 1 m.dec | grep -q '^\[gap: recording stopped at --max-size\]$' ||
	{ echo "max-size: decode exit $rc, end not marked"; cat err.txt; tail -n 2 m.dec; exit 1; }
grep -q 'LOST' <("$TK" info m.tkbt) && { echo "max-size: pieces counted as lost"; exit 1; }
echo "btrace ring: ok ($(stream_bytes r.tkbt) of $(stream_bytes full.tkbt) bytes kept)"
