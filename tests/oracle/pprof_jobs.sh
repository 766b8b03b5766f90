#!/usr/bin/env bash
# pprof is byte-identical at every -j: its string table interns the functions found in the
# executed blocks, and the block table's order depends on which worker counted a block
# first. A random walk over libc (many functions) at -j 1 and at -j 4 with chunks of 4 KiB,
# three times (before the block table was sorted for it, about one such run in three
# differed: a guard, not a certain reproduction).
set -euo pipefail
: "${TK:?}" "${BUILD:?}"
[ -x "$BUILD/tests/ipt-walk-gen" ] || { echo "SKIP: ipt-walk-gen not built (no libipt)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$BUILD/tests/ipt-walk-gen" walk.pt 2 >walk.args 2>/dev/null
read -r -a args <walk.args
"$TK" profile -j 1 --to pprof -o one.pb "${args[@]}" walk.pt 2>/dev/null || true
[ -s one.pb ] || { echo "no pprof at -j 1"; exit 1; }
fail=0
for i in 1 2 3; do
	TK_IPT_CHUNK=4096 "$TK" profile -j 4 --to pprof -o four.pb "${args[@]}" walk.pt 2>/dev/null || true
	cmp -s one.pb four.pb || { echo "run $i: pprof at -j 4 differs from -j 1"; fail=1; }
done
[ $fail = 0 ] && echo "pprof -j 1 = -j 4: ok ($(stat -c %s one.pb) bytes)"
exit $fail
