#!/usr/bin/env bash
# Progress on long runs, from the source's run (every command that decodes through it):
# under a pseudo-terminal (script -qc, util-linux) `profile` of a large Intel PT stream
# shows at least two progress lines (bytes, percent, rate, time left) on stderr; with
# stderr not a terminal none, unless --progress; -q or --no-progress silence it. The input
# is a branch trace's PT stream repeated until one run takes over 2 s here, so that the
# rate limit (nothing in the first second, then at most 4 lines a second) lets two through.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cc -O1 -g -o lj "$SRC/tests/data/seams/lj.c"
"$TK" record --btrace -o lj.tkbt -- ./lj >/dev/null 2>rec.err || { echo "record failed"; cat rec.err; exit 1; }
"$TK" convert --to ipt -q -o lj.pt lj.tkbt
bias=$("$TK" info lj.tkbt | awk -v m="$work/lj" '$1 == "module" && $2 == m {
	for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }')
cp lj.pt big.pt
secs=0
while :; do
	for _ in 1 2 3; do cat big.pt big.pt >>big2.pt; done
	mv big2.pt big.pt
	s=$(date +%s.%N)
	"$TK" profile -j 1 --elf "$work/lj:$bias" big.pt >/dev/null 2>notty.err
	secs=$(echo "$(date +%s.%N) - $s" | bc)
	[ "$(echo "$secs > 2" | bc)" = 1 ] || [ "$(stat -c %s big.pt)" -gt $((1 << 30)) ] && break
done
lines() { tr '\r' '\n' <"$1" | grep -c '^big.pt: [0-9.]*% ([0-9]* of [0-9]* MB, [0-9]* MB/s' || true; }
fail=0
[ "$(lines notty.err)" = 0 ] || { echo "progress without a terminal:"; cat notty.err; fail=1; }
script -qec "'$TK' profile -j 1 --elf '$work/lj:$bias' big.pt >/dev/null" /dev/null >tty.out
n=$(lines tty.out)
[ "$n" -ge 2 ] || { echo "under a terminal: $n progress lines in a ${secs} s run:"; tr '\r' '\n' <tty.out | head; fail=1; }
grep -q 's left)' tty.out || { echo "no time left in the progress lines"; fail=1; }
"$TK" profile -j 1 --progress --elf "$work/lj:$bias" big.pt >/dev/null 2>forced.err
[ "$(lines forced.err)" -ge 2 ] || { echo "--progress without a terminal: $(lines forced.err) lines"; fail=1; }
script -qec "'$TK' profile -q -j 1 --elf '$work/lj:$bias' big.pt >/dev/null" /dev/null >quiet.out
[ "$(lines quiet.out)" = 0 ] || { echo "-q under a terminal: progress lines"; fail=1; }
[ $fail = 0 ] && echo "progress: ok ($n lines under a terminal, $(stat -c %s big.pt) bytes, ${secs} s)"
exit $fail
