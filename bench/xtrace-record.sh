#!/usr/bin/env bash
# Recording speed of `tracekit record --qemu` in guest instructions per second, against
# qemu-aarch64 running the same program without the plugin. Two parts: the plugin run
# (instruction stream) and the deterministic register run (-singlestep -d cpu,fpu at the
# snapshot points), reported separately by the recorder.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARG=${XTRACE_ARG:-400}
aarch64-linux-gnu-gcc -O2 -march=armv8.2-a+sve -static -o "$TMP/prog" "$SRC/tests/data/xtrace/qemu-prog.c"
run() { env -i PATH="$PATH" "$@"; }
t_qemu=$(BENCH_RUNS=3 bench_time run qemu-aarch64 -seed 1 "$TMP/prog" $ARG)
rec() { rm -rf "$TMP/out"; run "$TK" record --qemu -o "$TMP/out" -- "$TMP/prog" $ARG; }
rec >/dev/null 2>"$TMP/rec.err"
insns=$("$TK" info "$TMP"/out/*.xinsndata.bin | sed -n 's/.*instructions: \([0-9]*\).*/\1/p')
size=$(stat -c %s "$TMP"/out/*.xinsndata.bin)
t_rec=$(BENCH_RUNS=3 bench_time rec)
plugin_only() { rm -rf "$TMP/p"; mkdir -p "$TMP/p"; run qemu-aarch64 -seed 1 -plugin "$SRC/build/recorder/qemu/libtracekit-qemu.so,dir=$TMP/p,ts=1" "$TMP/prog" $ARG; }
t_plugin=$(BENCH_RUNS=3 bench_time plugin_only)
rate() { echo "scale=1; $insns / $1 / 1000000" | bc -l; }
echo "guest instructions: $insns, trace $size bytes ($(echo "scale=1; $size / $insns" | bc -l) bytes/insn)"
printf '%-34s %8s s  %8s M insn/s\n' "qemu-aarch64 (no plugin)" "$t_qemu" "$(rate "$t_qemu")"
printf '%-34s %8s s  %8s M insn/s  x%s slower\n' "qemu + tracekit plugin" "$t_plugin" "$(rate "$t_plugin")" "$(bench_ratio "$t_plugin" "$t_qemu")"
printf '%-34s %8s s  %8s M insn/s  x%s slower\n' "tracekit record --qemu (both runs)" "$t_rec" "$(rate "$t_rec")" "$(bench_ratio "$t_rec" "$t_qemu")"
grep -o 'trace run.*' "$TMP/rec.err" || true
