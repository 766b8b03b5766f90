#!/usr/bin/env bash
# The main job on bundled examples (what `make run` shows a newcomer): record a bundled
# program's branches in software, then profile it per function, per call path and per
# source line; then recognise the bundled sample traces.
set -euo pipefail
tk=$(cd "$(dirname "${1:-build/tracekit}")" && pwd)/$(basename "${1:-build/tracekit}")
here=$(cd "$(dirname "$0")/.." && pwd)
data=$(cd "$here/../shared/data" 2>/dev/null && pwd) || data=""

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cc -O0 -g -o loops "$here/examples/loops.c"

echo "== tracekit record --btrace -o loops.tkbt -- ./loops   (examples/loops.c, built -O0 -g)"
"$tk" record --btrace -o loops.tkbt -- ./loops
echo
echo "== tracekit profile loops.tkbt   (calls and instructions per function)"
"$tk" profile --top 8 loops.tkbt
echo
echo "== tracekit profile --to calltree loops.tkbt   (call hierarchy)"
"$tk" profile --to calltree loops.tkbt
echo
echo "== tracekit profile --source loops.tkbt   (executions per source line)"
"$tk" profile --source loops.tkbt
echo
if [ -n "$data" ]; then
	echo "== tracekit info on the bundled sample traces"
	(cd "$data" && "$tk" info kanata/*)
fi
echo
echo "More: tracekit help; manual pages in docs/."
