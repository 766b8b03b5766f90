#!/usr/bin/env bash
# Time per call in a branch trace (format version 2 and later: a TSC at every return, indirect call
# and where tracing stops or starts):
# - spin busy-waits T TSC ticks per call (a leaf with a loop): each of its 10 calls lasts at
#   least T ticks in the profile, and its exclusive time is between 10 T and the ticks the
#   program measured around the whole loop of calls (no bound tighter than what happened:
#   the machine is shared)
# - tiny (a leaf without a branch: nothing is recorded between its direct call and its
#   return) has no measured time: "-", not 0; unless a PSB+ (with its TSC) happened to be
#   written inside one of its calls (where PSBs fall depends on how long spin's loops ran),
#   then that call's time is measured and not 0
# - no time column of any output (text, CSV, JSON, call tree) shows 0 for a function with
#   calls: where no TSC fell inside, it says "-" (an empty CSV field, no JSON key)
set -euo pipefail
: "${TK:?}" "${SRC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
T=2000000
cc -O1 -o "$work/timed" "$SRC/tests/data/btrace/timed.c"
L=$("$TK" record --btrace -q -o "$work/t.tkbt" -- "$work/timed" $T)
"$TK" info "$work/t.tkbt" | grep -Eq 'version ([2-9]|[1-9][0-9])' || { echo "not version 2 or later"; "$TK" info "$work/t.tkbt"; exit 1; }
# ticks (--tsc-hz 0): function,calls,incl,excl,incl_insns,excl_insns,min,median,p90,p99,max
"$TK" profile --tsc-hz 0 --to csv "$work/t.tkbt" >"$work/ticks.csv"
awk -F, -v T=$T -v L="$L" '$1 == "\"spin\"" { found = 1
	if ($2 != 10 || $4 < 10 * T || $4 > L || $7 < T) { print "spin: " $0; bad = 1 } }
	$1 == "\"tiny\"" { found2 = 1
		if ($2 != 10 || ($3 == "" && ($4 != "" || $7 != "")) || ($3 != "" && ($3 <= 0 || $7 <= 0))) {
			print "tiny: " $0; bad = 1 } }
	END { exit bad || !found || !found2 }' "$work/ticks.csv" ||
	{ echo "spin busy-waits $T ticks per call, the loop took $L:"; cat "$work/ticks.csv"; exit 1; }
# no 0 in a time column, in ticks and in microseconds
"$TK" profile --to csv "$work/t.tkbt" >"$work/us.csv"
for f in "$work/ticks.csv" "$work/us.csv"; do
	awk -F, 'NR > 1 && $2 > 0 { for (i = 3; i <= 11; i++) if (i != 5 && i != 6 && $i ~ /^0(\.0*)?$/) { print; bad = 1 } }
		END { exit bad }' "$f" || { echo "a zero time in $f"; cat "$f"; exit 1; }
done
"$TK" profile --tsc-hz 0 "$work/t.tkbt" >"$work/t.txt"
awk 'NR > 3 && $1 > 0 { for (i = 2; i <= 3; i++) if ($i == "0") { print; bad = 1 }
	for (i = 6; i <= 10; i++) if ($i == "0") { print; bad = 1 } } END { exit bad }' "$work/t.txt" ||
	{ echo "a zero time in the text profile"; cat "$work/t.txt"; exit 1; }
"$TK" profile --to calltree --tsc-hz 0 "$work/t.tkbt" >"$work/tree.txt"
awk 'NR > 3 && $1 > 0 && ($2 == "0" || $3 == "0") { print; bad = 1 } END { exit bad }' "$work/tree.txt" ||
	{ echo "a zero time in the call tree"; cat "$work/tree.txt"; exit 1; }
"$TK" profile --to json "$work/t.tkbt" >"$work/t.json"
python3 - "$work/t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [f for f in d["functions"] + d["calltree"] if f.get("calls", 0) > 0 and
       any(f.get(k) == 0 for k in ("incl_ticks", "excl_ticks", "min", "median", "p90", "p99", "max"))]
spin = [f for f in d["functions"] if f["name"] == "spin"]
if bad or not spin or "excl_ticks" not in spin[0]:
    sys.exit("zero times in JSON: %s" % bad[:3])
PY
echo "btrace time: ok"
