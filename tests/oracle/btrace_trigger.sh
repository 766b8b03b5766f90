#!/usr/bin/env bash
# record --btrace --trigger FUNCTION[:N] against the full recording of the same deterministic
# program (step called directly and through a pointer, in a loop):
# - --trigger step:50 (no ring): the trace is exactly the full trace's listing up to the
#   call of the 50th step (the snapshot ends at its entry), profile counts 50 calls of step,
#   the program goes on (exit 0) and info says where the recording ended
# - with --ring, step:150000: the snapshot's listing is the end of that same prefix
# - a malformed N is a usage error; an unknown function records to the end, saying so
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/trigger" "$SRC/tests/data/btrace/trigger.c"
cd "$work"
N=200000
norand() { setarch "$(uname -m)" -R "$@"; }
body() { "$TK" decode --no-disasm "$1" 2>/dev/null | grep -v '^\[thread\|^\[gap\|^\[enabled\]\|^\[disabled\]\|^\[async disabled\]' || true; }
calls() { "$TK" profile "$1" 2>/dev/null | awk '$NF == "step" { print $1 }'; }

norand "$TK" record --btrace -q -o full.tkbt -- ./trigger $N
[ "$(calls full.tkbt)" = $N ] || { echo "full: $(calls full.tkbt) calls of step"; exit 1; }
bias=$("$TK" info full.tkbt | sed -n 's/^  module .*\/trigger code .* bias \(0x[0-9a-f]*\) .*/\1/p')
step=$(printf '%016x' $((bias + 0x$(nm trigger | awk '$3 == "step" { print $1 }'))))
body full.tkbt >full.txt
# the listing up to the call of the Kth step (the line before its entry)
upto() { awk -v a="$step" -v k="$1" '$1 == a && ++n == k { exit } { print }' full.txt; }

# the 50th call, the whole trace kept
norand "$TK" record --btrace -q -o t.tkbt --trigger step:50 -- ./trigger $N ||
	{ echo "trigger: the program did not go on"; exit 1; }
grep -q 'a snapshot at call 50 of step (--trigger)' <("$TK" info t.tkbt) || { echo "trigger: info"; "$TK" info t.tkbt; exit 1; }
[ "$(calls t.tkbt)" = 50 ] || { echo "trigger: $(calls t.tkbt) calls of step, not 50"; exit 1; }
body t.tkbt | cmp -s - <(upto 50) || { echo "trigger: not the trace up to the 50th call"; diff <(upto 50 | tail -n 5) <(body t.tkbt | tail -n 5); exit 1; }

# with a ring: the end of the trace up to the 150000th call
K=150000
norand "$TK" record --btrace -q -o r.tkbt --ring 70000 --trigger step:$K -- ./trigger $N
grep -q "a snapshot at call $K of step" <("$TK" info r.tkbt) || { echo "ring trigger: info"; exit 1; }
body r.tkbt >r.txt
upto $K >want.txt
n=$(wc -l <r.txt)
[ "$n" -gt 1000 ] && [ "$n" -lt $(($(wc -l <want.txt) / 4)) ] || { echo "ring trigger: $n lines"; exit 1; }
tail -n $((n - 100)) r.txt | cmp -s - <(tail -n $((n - 100)) want.txt) ||
	{ echo "ring trigger: not the end of the trace up to call $K"; diff <(tail -n 5 want.txt) <(tail -n 5 r.txt); exit 1; }

# usage errors and an unknown function
rc=0; "$TK" record --btrace -q -o u.tkbt --trigger step:0 -- ./trigger 10 2>err.txt || rc=$?
[ $rc = 2 ] && grep -q 'trigger step:0' err.txt || { echo "step:0: exit $rc"; cat err.txt; exit 1; }
"$TK" record --btrace -q -o x.tkbt --trigger no_such_fn -- ./trigger 1000 2>err.txt
grep -q 'no_such_fn: no function of that name' err.txt || { echo "unknown function: no message"; cat err.txt; exit 1; }
[ "$(calls x.tkbt)" = 1000 ] || { echo "unknown function: trace not to the end"; exit 1; }
echo "btrace trigger: ok ($n lines kept of $(wc -l <want.txt) up to call $K)"
