#!/usr/bin/env bash
# Progress on long runs, from the source's run (every command that decodes through it):
# under a pseudo-terminal (script -qc, util-linux) `profile` of a large Intel PT stream
# shows at least two progress lines (bytes, percent, rate, time left) on stderr; with
# stderr not a terminal none, unless --progress. The input is a branch trace's PT stream
# repeated until --progress prints 10 lines (the rate limit: nothing in the first second,
# then at most 4 lines a second), whatever the machine's speed.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# progress advances as chunks merge: small ones (the PT splitter's test knob) make the
# lines come as often as the rate limit allows
export TK_IPT_CHUNK=$((256 << 10))
. "$SRC/tests/tools/lj_trace.sh"
lines() { tr '\r' '\n' <"$1" | grep -c '^big.pt: [0-9.]*% ([0-9]* of [0-9]* MB, [0-9]* MB/s' || true; }
# the input doubled until --progress (stderr a file) prints 10 lines: a run under a terminal
# then prints at least 2 even if it goes much faster
cp lj.pt big.pt
while :; do
	cat big.pt big.pt >big2.pt
	mv big2.pt big.pt
	"$TK" profile -j 1 --progress --elf "$work/lj:$bias" big.pt >/dev/null 2>forced.err
	[ "$(lines forced.err)" -ge 10 ] || [ "$(stat -c %s big.pt)" -gt $((1 << 30)) ] && break
done
fail=0
[ "$(lines forced.err)" -ge 10 ] || { echo "--progress: $(lines forced.err) lines on a 1 GB input"; fail=1; }
"$TK" profile -j 1 --elf "$work/lj:$bias" big.pt >/dev/null 2>notty.err
[ "$(lines notty.err)" = 0 ] || { echo "progress without a terminal:"; cat notty.err; fail=1; }
script -qec "'$TK' profile -j 1 --elf '$work/lj:$bias' big.pt >/dev/null" /dev/null >tty.out
n=$(lines tty.out)
[ "$n" -ge 2 ] || { echo "under a terminal: $n progress lines:"; tr '\r' '\n' <tty.out | head; fail=1; }
grep -q 's left)' tty.out || { echo "no time left in the progress lines"; fail=1; }
[ $fail = 0 ] && echo "progress: ok ($n lines under a terminal, $(stat -c %s big.pt) bytes)"
exit $fail
