#!/usr/bin/env bash
# Progress of `dump` (it reads the input itself, not through the chunk runner): under a
# pseudo-terminal (script -qc, util-linux) a large Intel PT stream's packet dump shows at
# least two progress lines (bytes, percent, rate, time left) on stderr; with stderr not a
# terminal none, unless --progress. The input is a branch trace's PT stream doubled until
# --progress prints 10 lines (nothing in the first second, then at most 4 lines a second),
# or is past 4 GiB (a fast machine dumps 1 GiB to /dev/null in about two seconds: then at
# least 5 lines), whatever the machine's speed.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
. "$SRC/tests/tools/lj_trace.sh"
lines() { tr '\r' '\n' <"$1" | grep -c '^big.pt: [0-9.]*% ([0-9]* of [0-9]* MB, [0-9]* MB/s' || true; }
cp lj.pt big.pt
while :; do
	cat big.pt big.pt >big2.pt
	mv big2.pt big.pt
	"$TK" dump --progress big.pt >/dev/null 2>forced.err
	[ "$(lines forced.err)" -ge 10 ] || [ "$(stat -c %s big.pt)" -gt $((1 << 32)) ] && break
done
fail=0
[ "$(lines forced.err)" -ge 5 ] || { echo "--progress: $(lines forced.err) lines"; fail=1; }
"$TK" dump big.pt >/dev/null 2>notty.err
[ "$(lines notty.err)" = 0 ] || { echo "progress without a terminal:"; cat notty.err; fail=1; }
script -qec "'$TK' dump big.pt >/dev/null" /dev/null >tty.out
n=$(lines tty.out)
[ "$n" -ge 2 ] || { echo "under a terminal: $n progress lines:"; tr '\r' '\n' <tty.out | head; fail=1; }
grep -q 's left)' tty.out || { echo "no time left in the progress lines"; fail=1; }
[ $fail = 0 ] && echo "dump progress: ok ($n lines under a terminal, $(stat -c %s big.pt) bytes)"
exit $fail
