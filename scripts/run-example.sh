#!/usr/bin/env bash
# The main job on bundled examples (what `make run` shows a newcomer).
set -euo pipefail
tk=${1:-build/tracekit}
here=$(cd "$(dirname "$0")/.." && pwd)
data=$(cd "$here/../shared/data" 2>/dev/null && pwd) || data=""
[ -n "$data" ] || data="$here/tests/data"
echo "== tracekit info on the bundled samples"
"$tk" info "$data"/kanata/*
