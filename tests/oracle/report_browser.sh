#!/usr/bin/env bash
# tracekit report's pages in a real browser: Debian's chromium, headless, driven through
# the DevTools protocol (npm puppeteer-core, tests/tools), every request but the page's
# own file refused. For a branch trace, the Intel PT stream it converts to (with --elf),
# an XRay log (one with a function named "</script>..." too) and a Kanata log, it checks
# (report_browser.js): no console errors; the function table's rows = `profile --to csv`;
# the flame graph's root total = the sum of `profile --to folded`; clicking a frame zooms
# to it; the search box highlights exactly the matching frames; the pipeline diagram holds
# the instructions `convert --to kanata --cycles` keeps (for a Kanata log, and for a gem5
# O3PipeView log through its Kanata conversion); the slowest instructions are
# `stats --slowest`'s. Screenshots of every section go to $BUILD/report-shots. Also: the
# page size bound, -j 1 = -j 3, a damaged log's losses on its page, two inputs refused.
set -euo pipefail
: "${SRC:?}" "${BUILD:?}" "${TK:?}" "${DATA:?}"
mods=$SRC/tests/tools/node_modules
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ] || [ ! -d "$mods/puppeteer-core" ]; then
	echo "SKIP: needs $chromium (Debian package chromium) and puppeteer-core in $mods" \
		"(scripts/install-deps.sh installs both)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shots=$BUILD/report-shots
rm -rf "$shots"
mkdir -p "$shots"
cd "$work"

# a branch trace of a program with calls, and the Intel PT stream it holds
. "$SRC/tests/tools/lj_trace.sh"

# an XRay log whose functions have names, one of them hostile to the page's <script>
xray=$SRC/tests/data/xray/fdr-v5.xray
hostile='</script><script>alert(1)</script>'
{
	echo "---"
	for i in 1 2 3 4 5; do
		name=f$i
		[ "$i" = 1 ] && name="main_loop"
		[ "$i" = 2 ] && name="$hostile"
		echo "- { id: $i, address: 0x$((4096 * i)), function: 0x$((4096 * i)), kind: function-enter, always-instrument: true, function-name: '$name' }"
	done
	echo "..."
} >map.yaml

# a Kanata log (its first cycle is -1) and the instructions a cycle window keeps: report
# and convert count --cycles the same way (from the log's first cycle)
zcat "$DATA/kanata/kanata-sample-2.log.gz" >k2.log
a=1010 b=1110
"$TK" convert --to kanata --cycles $a:$b k2.log | awk -F'\t' '$1 == "I" {print $3}' >k2.sims
[ -s k2.sims ] || { echo "convert --cycles kept nothing"; exit 1; }
# a gem5 O3PipeView log (3000 instructions, one fetched every cycle, every tenth squashed),
# whose page is its Kanata conversion's: the window's instructions by seqNum
awk 'BEGIN { n = split("decode rename dispatch issue complete", st, " ");
	for (i = 1; i <= 3000; i++) { f = 1000 + i * 500;
		printf "O3PipeView:fetch:%d:0x%08x:0:%d: add r%d, r2\n", f, 4096 + 4 * i, i, i % 16;
		for (k = 1; k <= n; k++) printf "O3PipeView:%s:%d\n", st[k], f + k * 1000;
		printf "O3PipeView:retire:%d:store:0\n", i % 10 ? f + 6000 : 0 } }' >o3.txt
"$TK" convert --to kanata -q o3.txt >o3.kanata
"$TK" convert --to kanata --cycles 500:600 o3.kanata | awk -F'\t' '$1 == "I" {print $3}' >o3.sims
[ -s o3.sims ] || { echo "gem5: convert --cycles kept nothing"; exit 1; }
"$TK" stats --slowest 100 --to csv k2.log 2>/dev/null | tail -n +2 | cut -d, -f1 >k2.slowest

page() {   # NAME TRACE [OPTIONS...]: the page, the csv and the folded stacks
	local name=$1 trace=$2
	shift 2
	"$TK" report -o "$name.html" "$@" "$trace" 2>"$name.err" ||
		{ echo "$name: tracekit report failed"; cat "$name.err"; exit 1; }
	"$TK" profile --to csv "$@" "$trace" >"$name.csv" 2>/dev/null
	"$TK" profile --to folded "$@" "$trace" >"$name.folded" 2>/dev/null
}
page btrace lj.tkbt
page pt lj.pt --elf "$work/lj:$bias"
page xray "$xray" --instr-map map.yaml
"$TK" report -o kanata.html --cycles $a:$b k2.log 2>kanata.err ||
	{ echo "kanata: tracekit report failed"; cat kanata.err; exit 1; }
"$TK" report -q -o gem5.html --cycles 500:600 o3.txt 2>gem5.err ||
	{ echo "gem5: tracekit report failed"; cat gem5.err; exit 1; }

# the hostile name is in the page only escaped (<\/script> is not enough: it is \u003c)
grep -q 'alert(1)' xray.html || { echo "the hostile name is missing from the page"; exit 1; }
[ "$(grep -c '</script>' xray.html)" = 2 ] || { echo "xray.html: a </script> besides the page's own"; exit 1; }

cat >cases.json <<EOF
[
 { "name": "btrace", "page": "btrace.html", "csv": "btrace.csv", "folded": "btrace.folded", "search": "main" },
 { "name": "pt", "page": "pt.html", "csv": "pt.csv", "folded": "pt.folded", "search": "main" },
 { "name": "xray", "page": "xray.html", "csv": "xray.csv", "folded": "xray.folded", "search": "f4",
   "hostile": "$(printf '%s' "$hostile" | sed 's/"/\\"/g')" },
 { "name": "kanata", "page": "kanata.html", "sims": "k2.sims", "slowest": "k2.slowest" },
 { "name": "gem5", "page": "gem5.html", "sims": "o3.sims" }
]
EOF
PUPPETEER=$mods/puppeteer-core CHROMIUM=$chromium timeout 120 node "$SRC/tests/oracle/report_browser.js" cases.json "$shots"

# every page under the documented bound (8 MiB; bench/report.sh measures big traces)
for f in *.html; do
	[ "$(stat -c %s "$f")" -lt $((8 << 20)) ] || { echo "$f: over 8 MiB"; exit 1; }
done
# the same page for any -j (the profile merges chunks exactly, the events come in order)
"$TK" report -j 1 -o pt-j1.html --elf "$work/lj:$bias" lj.pt 2>/dev/null
"$TK" report -j 3 -o pt-j3.html --elf "$work/lj:$bias" lj.pt 2>/dev/null
cmp -s pt-j1.html pt-j3.html || { echo "report -j 1 and -j 3 differ"; exit 1; }
# one pass: the timeline's bins come from the profile's own run, so a page read from
# standard input (which cannot be read twice) has the same timeline as the file's, and its
# bins hold every instruction of the profile (and, for XRay, every call)
"$TK" report -o stdin.html - <lj.tkbt 2>/dev/null
node -e '
const fs = require("fs");
const data = (f) => JSON.parse(/<script type="application\/json" id="tk-data">([^<]*)<\/script>/.exec(fs.readFileSync(f, "utf8"))[1]);
const sum = (T, k) => T.lanes.reduce((s, l) => s + l[k].reduce((x, y) => x + y, 0), 0);
const [f, s, x] = ["btrace.html", "stdin.html", "xray.html"].map(data);
const bad = [];
if (!s.timeline || JSON.stringify(f.timeline) !== JSON.stringify(s.timeline)) bad.push("stdin page: another timeline");
if (sum(f.timeline, "insns") !== f.summary.insns) bad.push("btrace timeline: " + sum(f.timeline, "insns") + " instructions, profile " + f.summary.insns);
if (sum(x.timeline, "calls") !== x.summary.calls) bad.push("xray timeline: " + sum(x.timeline, "calls") + " calls, profile " + x.summary.calls);
if (f.timeline.lanes[0].insns.length > 600) bad.push("more than 600 columns");
if (bad.length) { console.log(bad.join("\n")); process.exit(1); }'
# damaged input: exit status 1, and the page lists what was lost with its offset
set +e
"$TK" report -o bad.html "$SRC/tests/data/xray/bad-truncated.xray" 2>bad.err
rc=$?
set -e
[ $rc = 1 ] && grep -q '"notes":\["offset 0x40: truncated metadata record' bad.html ||
	{ echo "damaged XRay log: exit $rc, or its loss not in the page"; cat bad.err; exit 1; }
# one page per run
set +e
"$TK" report -o two.html "$xray" "$xray" 2>two.err
rc=$?
set -e
[ $rc = 2 ] && [ ! -e two.html ] || { echo "two inputs: exit $rc"; cat two.err; exit 1; }
echo "report pages: ok ($(ls "$shots" | wc -l) screenshots in $shots)"
