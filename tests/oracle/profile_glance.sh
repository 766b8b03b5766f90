#!/usr/bin/env bash
# The text report at a glance: a module column where the format knows modules (a branch
# trace's), none where not (XRay); --sort takes each column name its header shows and the
# table is then in that column's order (largest first; function: name order), checked by
# parsing the table; the % column is each row's share of the exclusive instructions (else
# time) of the CSV's rows; --color=auto colours under a terminal (script -qc, util-linux)
# and not in a pipe, with NO_COLOR set or with -o.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cat >"$work/p.c" <<'C'
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int mid(int n) { int s = 0; for (int i = 0; i < n; i++) s += leaf(i); return s; }
__attribute__((noinline)) int other(int n) { return n > 2 ? other(n - 1) + mid(n) : 1; }
int main(int argc, char **argv) { (void)argv; return (mid(40) + other(12 + argc)) == 7; }
C
cc -O1 -o "$work/p" "$work/p.c"
"$TK" record --btrace -o "$work/p.tkbt" -- "$work/p" 2>/dev/null || true
[ -s "$work/p.tkbt" ] || { echo "record failed"; exit 1; }
inputs=("$work/p.tkbt" "$SRC/tests/data/xray/fdr-v5.xray"
	"$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin")
n=0
for f in "${inputs[@]}"; do
	n=$((n + 1))
	"$TK" profile --to csv "$f" >"$work/$n.csv" 2>/dev/null || true
	"$TK" profile "$f" >"$work/$n.default" 2>/dev/null || true
	for k in $(grep -m1 '^ *calls ' "$work/$n.default"); do
		"$TK" profile --sort "$k" "$f" >"$work/$n.sort.$k" 2>"$work/err" ||
			{ echo "$f: --sort $k refused: $(cat "$work/err")"; fail=1; }
	done
done
python3 - "$work" "$n" <<'PY' || fail=1
import csv, glob, os, sys
work, n, bad = sys.argv[1], int(sys.argv[2]), 0
def table(path):
    lines = open(path).read().splitlines()
    head = next(i for i, l in enumerate(lines) if l.split()[:1] == ["calls"])
    cols = lines[head].split()
    rows = []
    for l in lines[head + 1:]:
        f = l.split(None, len(cols) - 1)
        rows.append(dict(zip(cols, f)))
    return cols, rows
for i in range(1, n + 1):
    cols, rows = table("%s/%d.default" % (work, i))
    # % is the share of the exclusive instructions, else time, of all rows
    c = list(csv.DictReader(open("%s/%d.csv" % (work, i))))
    key = "excl_insns" if any(int(r["excl_insns"]) for r in c) else "excl_time"
    total = sum(float(r[key]) for r in c)
    want = {r["function"]: 100 * float(r[key]) / total if total else 0 for r in c}
    for r in rows:
        if abs(float(r["%"]) - want[r["function"]]) > 0.006:
            print("input %d: %s is %s %%, want %.3f" % (i, r["function"], r["%"], want[r["function"]]))
            bad = 1
    for k in cols:
        _, rows = table("%s/%d.sort.%s" % (work, i, k))
        names = k in ("function", "module")
        v = [("" if r[k] == "-" else r[k]) if names else 0.0 if r[k] == "-" else float(r[k])
             for r in rows]
        if v != (sorted(v) if names else sorted(v, reverse=True)) or len(rows) < 2:
            print("input %d: --sort %s: not in its order: %s" % (i, k, v))
            bad = 1
# the module column where the format knows modules (a branch trace), none where not (XRay)
cols, rows = table("%s/1.default" % work)
if "module" not in cols or {r["module"] for r in rows if r["function"] in ("mid", "leaf")} != {"p"}:
    print("branch trace: no module column, or mid and leaf not in module p")
    bad = 1
if "module" in table("%s/2.default" % work)[0]:
    print("XRay log: a module column")
    bad = 1
sys.exit(bad)
PY

# --color=auto (the default): colour on a terminal only, not with NO_COLOR or -o
x="$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin"
esc=$(printf '\033\\[3')
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
script -qc "'$TK' profile '$x'" /dev/null >"$work/tty" </dev/null
grep -q "$esc" "$work/tty" || { echo "auto on a terminal: no colour"; fail=1; }
"$TK" profile "$x" | grep -q "$esc" && { echo "auto in a pipe: colour"; fail=1; }
NO_COLOR=1 script -qc "'$TK' profile '$x'" /dev/null >"$work/tty" </dev/null
grep -q "$esc" "$work/tty" && { echo "NO_COLOR on a terminal: colour"; fail=1; }
script -qc "'$TK' profile -o '$work/o.txt' '$x'" /dev/null >/dev/null </dev/null
grep -q "$esc" "$work/o.txt" && { echo "-o FILE from a terminal: colour"; fail=1; }
"$TK" profile --color=sometimes "$x" >/dev/null 2>"$work/err" && { echo "--color=sometimes taken"; fail=1; }
grep -q "auto, always or never" "$work/err" || { echo "--color=sometimes: $(cat "$work/err")"; fail=1; }
exit $fail
