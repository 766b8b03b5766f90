#!/usr/bin/env bash
# XRay: tracekit vs llvm-xray-16 on a real 4-thread FDR log of about 160 MB, made here by
# the test program (tests/data/xray/xray_prog.c) built with clang-16 -fxray-instrument.
#   convert --to xray-yaml  vs  llvm-xray convert -f yaml
#   profile --to account    vs  llvm-xray account (which rejects multi-thread FDR logs, so
#                               it reads the log converted with `convert -f raw --sort`,
#                               header set to basic mode; conversion time not counted)
#   profile -j 2            vs  profile -j 1
# Usage: bench/xray-decode.sh   (BENCH_RUNS=N, BENCH_DIR=DIR to keep the log elsewhere,
#        BENCH_SKIP_YAML=1 to leave out the slowest row)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
BENCH_RUNS=${BENCH_RUNS:-3}
D=${BENCH_DIR:-$SRC/build/bench-xray}
mkdir -p "$D"
cd "$D"
bench_xray_fdr fdr.xray prog 16384 16000 3 145000
if [ ! -s sorted.raw ]; then
	# llvm-xray's raw writer keeps the FDR header: mark it basic mode v3 so account reads it
	llvm-xray-16 convert -f raw --sort -o sorted.raw fdr.xray
	printf '\x03\x00\x00\x00' | dd of=sorted.raw conv=notrunc bs=1 count=4 2>/dev/null
fi
size=$(stat -L -c %s fdr.xray)
echo "log: $D/fdr.xray, $((size / 1000000)) MB, $("$TK" info fdr.xray | awk '/records:/{print $2}') records, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"

user_time() { /usr/bin/time -f '%U' "$@" 2>&1 >/dev/null | tail -n 1; }
# CPU seconds (user + system) and peak KB of one run: load-independent on a shared machine
cpu_peak() { /usr/bin/time -f '%U %S %M' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%.2f %d\n", $1 + $2, $3}'; }

row() { # label tracekit-cmd... -- anchor-cmd...
	local label=$1; shift
	local tk=() anchor=()
	while [ "$1" != -- ]; do tk+=("$1"); shift; done
	shift
	anchor=("$@")
	local t1 t2 c1 c2 m1 m2
	t1=$(bench_time "${tk[@]}")
	t2=$(bench_time "${anchor[@]}")
	read -r c1 m1 < <(cpu_peak "${tk[@]}")
	read -r c2 m2 < <(cpu_peak "${anchor[@]}")
	printf '%-8s tracekit %6.2f s (cpu %6.2f s) %8d KB | anchor %6.2f s (cpu %6.2f s) %9d KB | %5.1fx faster (cpu %5.1fx), 1/%d memory\n' \
		"$label" "$t1" "$c1" "$m1" "$t2" "$c2" "$m2" "$(bench_ratio "$t2" "$t1")" \
		"$(bench_ratio "$c2" "$c1")" $((m2 / m1))
}

[ -n "${BENCH_SKIP_YAML:-}" ] || row "yaml" "$TK" convert --to xray-yaml -j 1 -o /dev/null fdr.xray -- \
	llvm-xray-16 convert -f yaml -o /dev/null fdr.xray
row "account" "$TK" profile --to account -j 1 -o /dev/null fdr.xray -- \
	llvm-xray-16 account -o /dev/null sorted.raw

j1=$(bench_time "$TK" profile --to account -j 1 -o /dev/null fdr.xray)
j2=$(bench_time "$TK" profile --to account -j 2 -o /dev/null fdr.xray)
u1=$(user_time "$TK" profile --to account -j 1 -o /dev/null fdr.xray)
u2=$(user_time "$TK" profile --to account -j 2 -o /dev/null fdr.xray)
printf 'profile -j 1 %.2f s, -j 2 %.2f s: %.2fx (CPU time %.2f s vs %.2f s)\n' "$j1" "$j2" \
	"$(bench_ratio "$j1" "$j2")" "$u1" "$u2"
