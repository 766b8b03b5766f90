#!/usr/bin/env bash
# --top N and --sort KEY in every profile output kind: examples/loops.c (-O0 -g) recorded
# with `tracekit record --btrace`; each limited output must be the first N rows of the full
# output in the --sort order (folded: the N heaviest stacks; calltree: N callees per caller).
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
cc -O0 -g -o loops "$SRC/examples/loops.c"
"$TK" record --btrace -q -o l.tkbt -- ./loops >/dev/null
fail=0
check() { # name, expected file, actual file
	if cmp -s "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1"; diff "$2" "$3" | head; fail=1; fi
}
# lines: by instructions (default), executions, place; --top N = the first N rows
"$TK" profile --lines l.tkbt >lines.all
tail -n +2 lines.all | awk '{print $2, $3}' | sort -k1,1nr -s >lines.byinsns
tail -n +2 lines.all | awk '{print $2, $3}' >lines.ours
check "lines sorted by instructions" lines.byinsns lines.ours
"$TK" profile --lines --top 3 l.tkbt >lines.top
head -4 lines.all >lines.expect
check "lines --top 3" lines.expect lines.top
[ "$(wc -l <lines.top)" -eq 4 ] || { echo "FAIL: lines --top 3 rows"; fail=1; }
"$TK" profile --lines --sort execs l.tkbt | tail -n +2 | awk '{print $1}' >lines.execs
sort -nr -s lines.execs >lines.execs.sorted
check "lines --sort execs" lines.execs.sorted lines.execs
"$TK" profile --lines --sort execs --top 2 l.tkbt >lines.top2
"$TK" profile --lines --sort execs l.tkbt | head -3 >lines.expect2
check "lines --sort execs --top 2" lines.expect2 lines.top2
# the annotated source with --top 2: counts on exactly those two lines
n=$("$TK" profile --to source --top 2 l.tkbt | grep -Ec '^ +[0-9]+ +[0-9]+ +[0-9]+  ')
[ "$n" -eq 2 ] && echo "ok: source --top 2" || { echo "FAIL: source --top 2 annotated $n lines"; fail=1; }
# blocks
"$TK" profile --to blocks --sort execs l.tkbt | head -6 >blocks.expect
"$TK" profile --to blocks --sort execs --top 5 l.tkbt >blocks.top
check "blocks --sort execs --top 5" blocks.expect blocks.top
# function tables
for to in text csv; do
	"$TK" profile --to $to --sort calls l.tkbt >f.all
	skip=$([ $to = text ] && echo 3 || echo 1)
	head -$((skip + 4)) f.all >f.expect
	"$TK" profile --to $to --sort calls --top 4 l.tkbt >f.top
	check "$to --sort calls --top 4" f.expect f.top
done
"$TK" profile --to csv --sort calls l.tkbt | sed -n 2p | grep -q '^"leaf",1000,' && echo "ok: csv leaf first by calls" || { echo "FAIL: csv --sort calls"; fail=1; }
# folded: the N heaviest stacks, in path order
"$TK" profile --to folded l.tkbt | sort -t' ' -k2,2nr | head -3 | sort >folded.expect
"$TK" profile --to folded --top 3 l.tkbt >folded.top
check "folded --top 3" folded.expect folded.top
# calltree: at most one callee per caller, the one that --sort puts first
"$TK" profile --to calltree --top 1 --sort insns l.tkbt | tail -n +4 | sed 's/^ *[0-9]* *[0-9]* *[0-9]*  //' >tree.top
printf '%s\n' '[unknown]' '  _start' '    main' '      inner' '        leaf' >tree.expect
check "calltree --top 1 --sort insns" tree.expect tree.top
# a key that does not apply is a usage error
if "$TK" profile --lines --sort median l.tkbt >/dev/null 2>&1; then echo "FAIL: --lines --sort median accepted"; fail=1; else echo "ok: --lines --sort median refused"; fi
exit $fail
