#!/usr/bin/env bash
# record shows progress while the program runs: under a pseudo-terminal (script -qc,
# util-linux) at least two lines of elapsed time and trace bytes written on stderr; none
# when stderr is not a terminal, unless --progress. The program sleeps 2 s in all (the
# lines begin after 1 s and come at most 4 a second): a slower machine only adds lines.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >slow.c <<'C'
#include <unistd.h>
__attribute__((noinline)) void nap(void) { usleep(100000); }
int main(void) { for (int i = 0; i < 20; i++) nap(); return 0; }
C
cc -O0 -o slow slow.c
lines() { tr '\r' '\n' <"$1" | grep -c '^recording: [0-9]* s, [0-9.]* MB ([0-9.]* MB/s)' || true; }
fail=0
script -qec "'$TK' record --btrace -o t.tkbt -- ./slow" /dev/null >tty.out
n=$(lines tty.out)
[ "$n" -ge 2 ] || { echo "under a terminal: $n progress lines:"; tr '\r' '\n' <tty.out; fail=1; }
"$TK" record --btrace -o n.tkbt -- ./slow 2>notty.err
[ "$(lines notty.err)" = 0 ] || { echo "progress without a terminal:"; cat notty.err; fail=1; }
"$TK" record --btrace --progress -o p.tkbt -- ./slow 2>forced.err
[ "$(lines forced.err)" -ge 2 ] || { echo "--progress: $(lines forced.err) lines"; cat forced.err; fail=1; }
"$TK" info t.tkbt >/dev/null || { echo "the trace recorded under a terminal does not read"; fail=1; }
[ $fail = 0 ] && echo "record progress: ok ($n lines under a terminal)"
exit $fail
