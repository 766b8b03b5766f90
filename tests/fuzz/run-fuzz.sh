#!/usr/bin/env bash
# Run one libFuzzer target for a short time on a scratch copy of its seed corpus, so the
# checked-in corpus stays as it is. Fails if the fuzzer finds a crash, leak or hang; the
# input that did it is kept in TK_FUZZ_ARTIFACTS (default /tmp/tracekit-fuzz) to replay:
# TARGET FILE.
set -euo pipefail
target=$1 corpus=$2 seconds=${3:-10}
keep=${TK_FUZZ_ARTIFACTS:-/tmp/tracekit-fuzz}/$(basename "$target")-
mkdir -p "$(dirname "$keep")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
[ -d "$corpus" ] && cp -r "$corpus"/. "$work/corpus/" 2>/dev/null || true
cd "$work"
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-print_final_stats=0 -artifact_prefix="$keep" "$work/corpus" 2>"$work/log" ||
	{ tail -n 60 "$work/log"; exit 1; }
grep -E '^#[0-9]+ *DONE' "$work/log" || tail -n 2 "$work/log"
