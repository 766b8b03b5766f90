#!/usr/bin/env bash
# Intel PT instruction flow: tracekit decode/profile against libipt's block decoder
# (bench/ipt-blk.c: pt_blk_next, as ptxed --block-decoder) on generated traces of at least
# 100 MB over real code: libc, and libc + a large library (libLLVM). The traces come from
# the test generator (tests/oracle/ptgen.h) walking the code loaded in its own process.
# usage: bench/ipt-flow.sh [MBYTES]   (env BENCH_RUNS=N, default 5)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
MB=${1:-100}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
BUILD=$SRC/build
LIBS="-lipt -lelf -ldw -lZydis -lzstd -lz -lpthread -ldl"
gcc -O2 -o "$W/gen" "$SRC/bench/ipt-flow-gen.c" -I"$SRC/tests" -I"$SRC/lib" \
	-I"$SRC/include" "$BUILD/libtracekit.a" $LIBS
gcc -O2 -o "$W/blk" "$SRC/bench/ipt-blk.c" -lipt -lelf
LLVM=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-1[0-9].so.1 2>/dev/null | tail -n 1 || true)

run_case() {
	local name=$1 lib=${2:-}
	local pt=$W/$name.pt args
	"$W/gen" "$pt" "$MB" $lib >"$W/$name.args" 2>"$W/$name.gen"
	args=$(tr '\n' ' ' <"$W/$name.args")
	local insns
	insns=$("$TK" decode --stat -j 1 $args "$pt" | awk '/^insn:/ {print $2}')
	local blk_insns
	blk_insns=$("$W/blk" "$pt" $args | awk '/^insn:/ {print $2}')
	local t_blk t_stat1 t_stat2 t_prof1 t_prof2 t_nodis
	t_blk=$(bench_time "$W/blk" "$pt" $args)
	t_stat1=$(bench_time "$TK" decode --stat -j 1 $args "$pt")
	t_stat2=$(bench_time "$TK" decode --stat -j 2 $args "$pt")
	t_prof1=$(bench_time "$TK" profile -j 1 $args "$pt")
	t_prof2=$(bench_time "$TK" profile -j 2 $args "$pt")
	t_nodis=$(bench_time "$TK" decode --no-disasm -j 1 -o "$W/out.txt" $args "$pt")
	local mem_blk mem_tk
	mem_blk=$(bench_peak_kb "$W/blk" "$pt" $args)
	mem_tk=$(bench_peak_kb "$TK" decode --stat -j 2 $args "$pt")
	echo "== $name: $(stat -c %s "$pt") bytes, $insns instructions (pt_blk: $blk_insns)"
	printf '%-34s %8s s\n' "libipt pt_blk_next" "$t_blk"
	printf '%-34s %8s s  %sx pt_blk\n' "tracekit decode --stat -j 1" "$t_stat1" "$(bench_ratio "$t_blk" "$t_stat1")"
	printf '%-34s %8s s  %sx -j 1\n' "tracekit decode --stat -j 2" "$t_stat2" "$(bench_ratio "$t_stat1" "$t_stat2")"
	printf '%-34s %8s s  %sx pt_blk\n' "tracekit profile -j 1" "$t_prof1" "$(bench_ratio "$t_blk" "$t_prof1")"
	printf '%-34s %8s s  %sx -j 1\n' "tracekit profile -j 2" "$t_prof2" "$(bench_ratio "$t_prof1" "$t_prof2")"
	printf '%-34s %8s s  %s M insn/s\n' "tracekit decode --no-disasm -o F" "$t_nodis" \
		"$(echo "scale=1; $insns / $t_nodis / 1000000" | bc -l)"
	echo "peak memory: pt_blk ${mem_blk} KiB, tracekit -j 2 ${mem_tk} KiB"
}

run_case libc
if [ -n "$LLVM" ]; then
	run_case llvm "$LLVM"
fi
