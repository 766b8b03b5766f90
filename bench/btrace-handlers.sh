#!/usr/bin/env bash
# The branch recorder on programs that install signal handlers (Debian's gzip and sort do,
# as sqlite3, python and git do), side by side with callgrind: median CPU seconds of
# BENCH_RUNS runs (default 5) and the slowdown over native. Until the recorder deferred
# signals that arrive during a trampoline record, each such record blocked and unblocked
# all signals: two system calls per recorded branch once the program had a handler.
# BEFORE=path/to/an older libtkbtrace.so adds a column with that recorder (same tracekit).
# Usage: [BEFORE=LIB] [BENCH_RUNS=N] bench/btrace-handlers.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 262144 "$TK" >"$work/in.bin"   # 256 KiB
python3 -c 'import random; r = random.Random(1); print("\n".join(str(r.randrange(10**9)) for _ in range(20000)))' >"$work/lines.txt"

printf '%-6s %9s %10s %7s' program native_s btrace_s x
[ -n "${BEFORE:-}" ] && printf ' %10s %7s' before_s x
printf ' %12s %7s\n' callgrind_s x
for p in gzip sort; do
	case $p in
	gzip) cmd=(gzip -c "$work/in.bin") ;;
	sort) cmd=(sort "$work/lines.txt") ;;
	esac
	n=$(bench_cpu "${cmd[@]}")
	b=$(bench_cpu "$TK" record --btrace -q -o "$work/t.tkbt" -- "${cmd[@]}")
	printf '%-6s %9s %10s %7s' $p "$n" "$b" "$(bench_ratio "$b" "$n")"
	if [ -n "${BEFORE:-}" ]; then
		o=$(TK_BTRACE_LIB=$BEFORE bench_cpu "$TK" record --btrace -q -o "$work/t0.tkbt" -- "${cmd[@]}")
		printf ' %10s %7s' "$o" "$(bench_ratio "$o" "$n")"
	fi
	c=$(bench_cpu valgrind -q --tool=callgrind --callgrind-out-file=/dev/null "${cmd[@]}")
	printf ' %12s %7s\n' "$c" "$(bench_ratio "$c" "$n")"
done
