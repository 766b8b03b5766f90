#!/usr/bin/env bash
# tracekit diff A B against the two profiles it compares: A vs A is all zeros; A vs B
# equals the difference of `profile --to csv` of each (computed here, by name), for branch
# traces of one program run with two arguments (instructions and time) and two XRay logs
# (time); the folded diff has two counts a line whose sums are the two folded files';
# saved profiles (profile --shard 1/1) give what their traces give; bad input is refused.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cat >"$work/p.c" <<'C'
#include <stdlib.h>
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int mid(int n) { int s = 0; for (int i = 0; i < n; i++) s += leaf(i); return s; }
__attribute__((noinline)) int only_big(int n) { return mid(n) + 1; }
int main(int argc, char **argv)
{
	int n = atoi(argv[1]), s = 0;
	for (int i = 0; i < 10; i++)
		s += mid(n);
	if (n > 50)
		s += only_big(n);
	return s == 7;
}
C
cc -O1 -o "$work/p" "$work/p.c"
"$TK" record --btrace -o "$work/a.tkbt" -- "$work/p" 20 2>/dev/null || true
"$TK" record --btrace -o "$work/b.tkbt" -- "$work/p" 70 2>/dev/null || true
[ -s "$work/a.tkbt" ] && [ -s "$work/b.tkbt" ] || { echo "record failed"; exit 1; }
xa="$SRC/tests/data/xray/fdr-v5.xray" xb="$SRC/tests/data/xray/fdr-v3.xray"

# The expected diff CSV of two profile CSVs: per name (rows of equal names added), each
# column's A, B, B - A, percent; times are decimals with 3 places (exact in integers). A
# time a profile leaves empty (a branch trace's unmeasured time) is empty, and so are the
# change and percent from it; a change that rounds to 0 is 0.0, never -0.0.
expect() {
	python3 - "$1" "$2" <<'PY'
import csv, sys
cols = ["calls", "incl_time", "excl_time", "incl_insns", "excl_insns"]
def load(path):
    rows = {}
    for r in csv.DictReader(open(path)):
        v = rows.setdefault(r["function"], [None] * 5)
        for i, c in enumerate(cols):
            if r[c] != "":
                v[i] = (v[i] or 0) + (round(float(r[c]) * 1000) if "time" in c else int(r[c]))
    return rows
a, b = load(sys.argv[1]), load(sys.argv[2])
def fmt(c, x):
    if "time" not in c:
        return str(x)
    s = "-" if x < 0 else ""
    return "%s%d.%03d" % (s, abs(x) // 1000, abs(x) % 1000)
out = {}
for name in set(a) | set(b):
    va, vb = a.get(name, [0] * 5), b.get(name, [0] * 5)
    cells = []
    for i, c in enumerate(cols):
        x, y = va[i], vb[i]
        if x is None or y is None:
            cells += ["" if x is None else fmt(c, x), "" if y is None else fmt(c, y), "", ""]
            continue
        p = 100.0 * (y - x) / x if x else 0
        p = "" if x == 0 and y != 0 else "%.1f" % (0.0 if -0.05 < p < 0.05 else p)
        cells += [fmt(c, x), fmt(c, y), fmt(c, y - x), p]
    out[name] = cells
for name in sorted(out):
    print(",".join([name] + out[name]))
PY
}
# diff's CSV by name (its row order is checked apart)
by_name() {
	python3 -c '
import csv, sys
r = list(csv.reader(open(sys.argv[1])))
for row in sorted(r[1:]): print(",".join(row))' "$1"
}

check_pair() {   # LABEL A B [OPTIONS]: diff A B vs the two profiles
	local label=$1 a=$2 b=$3
	shift 3
	"$TK" profile --to csv "$@" "$a" >"$work/pa.csv" 2>/dev/null || true
	"$TK" profile --to csv "$@" "$b" >"$work/pb.csv" 2>/dev/null || true
	"$TK" diff --to csv "$@" "$a" "$b" >"$work/d.csv" 2>"$work/d.err" || true
	[ -s "$work/d.csv" ] || { echo "$label: diff printed nothing"; cat "$work/d.err"; fail=1; return; }
	expect "$work/pa.csv" "$work/pb.csv" >"$work/want"
	by_name "$work/d.csv" >"$work/got"
	cmp -s "$work/want" "$work/got" || { echo "$label: diff --to csv is not B - A of the profiles"
		diff "$work/want" "$work/got" | head -8; fail=1; }
	# A vs A: every difference and percentage 0
	"$TK" diff --to csv "$@" "$a" "$a" 2>/dev/null | python3 -c '
import csv, sys
r = list(csv.DictReader(sys.stdin))
bad = [x["function"] for x in r for k, v in x.items()
       if k.endswith(("_diff", "_pct")) and v != "" and float(v) != 0]
assert r, "no rows"
sys.exit("A vs A not zero: %s" % bad[:3] if bad else 0)' || { echo "$label: A vs A"; fail=1; }
	# default order: by the absolute change of the main cost, largest first
	python3 - "$work/d.csv" <<'PY' || { echo "$label: default order"; fail=1; }
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
key = "excl_insns_diff" if any(int(x["excl_insns_a"]) or int(x["excl_insns_b"]) for x in r) else "excl_time_diff"
v = [abs(float(x[key])) for x in r]
sys.exit(0 if v == sorted(v, reverse=True) else "not sorted by |%s|: %s" % (key, v[:8]))
PY
}
check_pair "branch traces" "$work/a.tkbt" "$work/b.tkbt"
check_pair "XRay logs" "$xa" "$xb"

# no -0.0 percentages (the XRay logs have a change below 0.05 %)
for to in text csv json; do
	! "$TK" diff --to $to "$xa" "$xb" 2>/dev/null | grep -q -- '-0\.0\b' ||
		{ echo "--to $to: a -0.0 percentage"; fail=1; }
done
# a branch trace's unmeasured times: no key in JSON (as profile; CSV: empty, above), where
# a side did not measure; measured ones compared
"$TK" profile --to json "$work/a.tkbt" >"$work/pa.json" 2>/dev/null || true
"$TK" diff --to json "$work/a.tkbt" "$work/a.tkbt" >"$work/aa.json" 2>/dev/null || true
python3 - "$work/pa.json" "$work/aa.json" <<'PY' || { echo "unmeasured times in JSON"; fail=1; }
import json, sys
p, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
timed = {}
for f in p["functions"]:
    timed[f["name"]] = timed.get(f["name"], False) or "incl_ticks" in f
rows = {f["function"]: f for f in d["functions"]}
unmeasured = [n for n, t in timed.items() if not t]
assert unmeasured and any(timed.values()), "want measured and unmeasured functions"
for n, t in timed.items():
    keys = [k for k in ("incl_time_a", "incl_time_b", "incl_time_diff", "incl_time_pct") if k in rows[n]]
    assert len(keys) == (4 if t else 0), (n, t, keys)
PY

# --top N of a folded diff: the N stacks that changed most, in stack order
"$TK" diff --to folded "$work/a.tkbt" "$work/b.tkbt" >"$work/all.fd" 2>/dev/null || true
"$TK" diff --to folded --top 3 "$work/a.tkbt" "$work/b.tkbt" >"$work/top.fd" 2>/dev/null || true
awk '{ d = $NF - $(NF-1); print (d < 0 ? -d : d), $0 }' "$work/all.fd" | sort -k1,1nr -k2 |
	head -n 3 | cut -d' ' -f2- | sort >"$work/want.fd"
[ "$(wc -l <"$work/all.fd")" -gt 3 ] && cmp -s "$work/want.fd" "$work/top.fd" ||
	{ echo "folded --top 3: not the 3 largest changes"; cat "$work/top.fd"; fail=1; }

# the branch traces' diff names the new function with no percentage
grep -q '^"only_big",0,1,1,,' <("$TK" diff --to csv "$work/a.tkbt" "$work/b.tkbt" 2>/dev/null) ||
	{ echo "only_big: not a new function with 1 call"; fail=1; }
grep -q ' new .*only_big$' <("$TK" diff "$work/a.tkbt" "$work/b.tkbt" 2>/dev/null) ||
	{ echo "text: only_big not marked new"; fail=1; }

# --sort on each column: that column's order (by absolute value for _diff and _pct)
keys=$(head -1 "$work/d.csv" | tr , ' ')
for k in $keys; do
	"$TK" diff --to csv --sort "$k" "$work/a.tkbt" "$work/b.tkbt" 2>/dev/null >"$work/s.$k.csv"
done
python3 - "$work" $keys <<'PY' || fail=1
import csv, sys
bad = 0
for k in sys.argv[2:]:
    r = list(csv.DictReader(open("%s/s.%s.csv" % (sys.argv[1], k))))
    def val(x):
        s = x[k]
        if k == "function": return s
        m = k.rsplit("_", 1)[0]
        if "time" in m and s == "" and "" in (x[m + "_a"], x[m + "_b"]):
            return -1   # unmeasured: after the others
        if k.endswith("_pct") and s == "": return float("inf")
        return abs(float(s)) if k.endswith(("_diff", "_pct")) else float(s)
    v = [val(x) for x in r]
    want = sorted(v) if k == "function" else sorted(v, reverse=True)
    if v != want or len(r) < 3:
        print("--sort %s: not in its order: %s" % (k, v))
        bad = 1
sys.exit(bad)
PY

# folded: "stack countA countB", the sums those of the two folded files
for pair in "$work/a.tkbt $work/b.tkbt" "$xa $xb"; do
	set -- $pair
	"$TK" profile --to folded "$1" >"$work/fa" 2>/dev/null || true
	"$TK" profile --to folded "$2" >"$work/fb" 2>/dev/null || true
	"$TK" diff --to folded "$1" "$2" >"$work/fd" 2>/dev/null || true
	sa=$(awk '{ s += $NF } END { print s + 0 }' "$work/fa")
	sb=$(awk '{ s += $NF } END { print s + 0 }' "$work/fb")
	got=$(awk '!($(NF-1) ~ /^[0-9]+$/ && $NF ~ /^[0-9]+$/) { bad++ } { a += $(NF-1); b += $NF }
		END { print a + 0, b + 0, bad + 0, NR }' "$work/fd")
	[ "$got" = "$sa $sb 0 $(wc -l <"$work/fd")" ] && [ -s "$work/fd" ] ||
		{ echo "folded diff of $1 $2: sums/lines '$got', want '$sa $sb 0 N'"; fail=1; }
	# every stack of either file, each with its own count
	python3 - "$work/fa" "$work/fb" "$work/fd" <<'PY' || { echo "folded diff: stacks differ"; fail=1; }
import sys
def load(p, cols):
    d = {}
    for l in open(p):
        parts = l.rstrip("\n").rsplit(" ", cols)
        d[parts[0]] = [int(x) for x in parts[1:]]
    return d
a, b, d = load(sys.argv[1], 1), load(sys.argv[2], 1), load(sys.argv[3], 2)
want = {k: [a.get(k, [0])[0], b.get(k, [0])[0]] for k in set(a) | set(b)}
sys.exit(0 if want == d and list(d) == sorted(d) else "differ")
PY
done

# saved profiles give the same as their traces
"$TK" profile --shard 1/1 -o "$work/a.tkp" "$work/a.tkbt" 2>/dev/null
"$TK" profile --shard 1/1 -o "$work/b.tkp" "$work/b.tkbt" 2>/dev/null
for to in csv json folded; do
	"$TK" diff --to "$to" "$work/a.tkbt" "$work/b.tkbt" 2>/dev/null | sed 's/tkbt/X/g' >"$work/t.$to" || true
	"$TK" diff --to "$to" "$work/a.tkp" "$work/b.tkp" 2>/dev/null | sed 's/tkp/X/g' >"$work/p.$to" || true
	[ -s "$work/t.$to" ] && cmp -s "$work/t.$to" "$work/p.$to" ||
		{ echo "--to $to: saved profiles differ from their traces"; fail=1; }
done
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["functions"]' "$work/t.json" ||
	{ echo "--to json: not JSON"; fail=1; }

# bad input: a clear message and the README's exit status
refused() {   # WANT_STATUS PATTERN ARGS...
	local want=$1 pat=$2 rc=0
	shift 2
	"$TK" diff "$@" >/dev/null 2>"$work/err" || rc=$?
	[ "$rc" = "$want" ] && grep -q "$pat" "$work/err" ||
		{ echo "diff $*: exit $rc, want $want with '$pat'"; cat "$work/err"; fail=1; }
}
refused 2 "give two inputs" "$xa"
refused 2 "unknown key 'bogus' (function, " --sort bogus "$xa" "$xb"
refused 2 "diff writes text, csv, json or folded" --to pprof "$xa" "$xb"
refused 2 "threads is not an option of diff" --threads "$xa" "$xb"
refused 3 "$work/none" "$xa" "$work/none"
head -c 400 "$xa" >"$work/cut.xray"
refused 1 "cut.xray" "$xa" "$work/cut.xray"
printf 'TKPART\r\nxx' >"$work/bad.tkp"
refused 3 "bad.tkp: offset" "$work/bad.tkp" "$xb"
if "$TK" stats --shard 1/1 -o "$work/s.tkp" "$work/a.tkbt" 2>/dev/null; then
	refused 2 "not a saved profile" "$work/s.tkp" "$work/b.tkp"
fi
exit $fail
