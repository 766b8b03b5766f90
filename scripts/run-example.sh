#!/usr/bin/env bash
# The main job on bundled examples (what `make run` shows a newcomer).
set -euo pipefail
tk=${1:-build/tracekit}
here=$(cd "$(dirname "$0")/.." && pwd)
data=$(cd "$here/../shared/data" 2>/dev/null && pwd) || data=""
[ -n "$data" ] || data="$here/tests/data"
echo "== tracekit info on the bundled samples"
"$tk" info "$data"/kanata/*

# Software branch trace of a bundled example (any x86-64 machine, no Intel PT needed).
if [ "$(uname -m)" = x86_64 ] && command -v cc >/dev/null; then
	bt=$(mktemp -d)
	cc -O2 -g -o "$bt/branches" "$here/tests/data/btrace/branches.c"
	echo "== tracekit record --btrace on tests/data/btrace/branches.c, then profile"
	"$tk" record --btrace -o "$bt/branches.tkbt" -- "$bt/branches" 2000
	"$tk" profile --top 8 "$bt/branches.tkbt"
	rm -rf "$bt"
fi
