#!/usr/bin/env bash
# -j 2 against -j 1 on inputs shaped unlike the ones the parallel paths were tuned on
# (issue #36), with the serial fraction each run measures of itself (TK_PHASES):
#   xray    FDR v5, 4 threads whose 64 KiB buffers interleave (~2,300 buffers, ~18 M
#           records, ~150 MB), made by tests/data/xray/xray_prog.c; profile --instr-map
#   kanata  ~150 MB, 2 simulated threads, 48-entry ROBs: every chunk seam cuts through
#           about a hundred instructions in flight (bench/kanata-inflight.py); stats
#   ipt     100 MB random walk over libc (bench/ipt-flow-gen.c: little repetition);
#           decode --stat
# For each: hyperfine medians of -j 1 and -j 2, CPU seconds (user + system) of each, and from
# the -j 2 run's phases (serial S = main thread outside worker pools, merge M = main thread
# in pools, jobs J = workers) the model T(N) = S + max((J + M) / N, M) (the merging main
# thread shares the N cores), whose speed-ups at 2, 16 and 64 workers are printed beside the
# measured one.
# Optional cases (not run by default): xray-tl, kanata-tl, ipt-tl (convert --to perfetto
# of the same inputs; ipt-tl on the walk), ipt-prof (profile of the walk: its call tree
# is built on the main thread) and llvm-prof (profile of libLLVM's O2 pipeline as
# bench/ipt-flow.sh records it: run that first, its recording is reused).
# Besides hyperfine's medians (all -j 1 runs, then all -j 2 runs), each row gives the
# median of RUNS interleaved rounds (-j 1 then -j 2 at once: bench_interleaved_ratio),
# which this machine's drift from minute to minute does not bias.
# usage: bench/scaling.sh [CASES]   (CASES: any of the above, default "xray kanata ipt"; env
#        BENCH_RUNS (default 10), BENCH_DIR to keep the inputs (default build/bench-scaling))
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
CASES=${1:-xray kanata ipt}
RUNS=${BENCH_RUNS:-10}
D=${BENCH_DIR:-$SRC/build/bench-scaling}
mkdir -p "$D"
cd "$D"

make_xray() {
	bench_xray_fdr fdr.xray xray_prog 65536 2400 3 140000
}
make_kanata() {
	[ -s inflight.log ] || python3 "$SRC/bench/kanata-inflight.py" 151 inflight.log
}
make_ipt() {
	[ -s walk.pt ] && return
	gcc -O2 -o ptgen "$SRC/bench/ipt-flow-gen.c" -I"$SRC/tests" -I"$SRC/lib" -I"$SRC/include" \
		"$SRC/build/libtracekit.a" $TK_STATIC_LIBS
	./ptgen walk.pt 100 >walk.args 2>/dev/null
}

make_llvm() {
	[ -s llvm.pt ] && return
	local c
	c=$(ls -t "$SRC"/build/bench-ipt-flow/llvm-O2-*.tkbt 2>/dev/null | head -n 1)
	[ -n "$c" ] || { echo "llvm-prof: no recording: run bench/ipt-flow.sh first" >&2; return 1; }
	"$TK" convert --to ipt -o llvm.pt "$c"
	tr '\n' ' ' <"${c%.tkbt}.args" >llvm.args
}

# phases CMD...: "S M J" seconds from one run's TK_PHASES line
phases() {
	TK_PHASES=1 "$@" 2>&1 >/dev/null | sed -n 's/.*= serial \([0-9.]*\) .*+ merge \([0-9.]*\) .*+ jobs \([0-9.]*\) .*/\1 \2 \3/p' | tail -n 1
}

row() { # NAME CMD... (with -j J where the J is)
	local name=$1; shift
	local c1=() c2=()
	for a in "$@"; do c1+=("${a/#@J/1}"); c2+=("${a/#@J/2}"); done
	hyperfine -N -w 2 -r "$RUNS" --export-json "$name.json" "${c1[*]}" "${c2[*]}" >/dev/null 2>&1
	local t1 t2 u1 u2
	read -r t1 t2 < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(r[0]["median"], r[1]["median"])' "$name.json")
	u1=$(BENCH_RUNS=3 bench_cpu "${c1[@]}")
	u2=$(BENCH_RUNS=3 bench_cpu "${c2[@]}")
	read -r s m j < <(phases "${c2[@]}")
	local inter
	inter=$(BENCH_RUNS=$RUNS bench_interleaved_ratio "${c1[*]}" "${c2[*]}")
	python3 - "$name" "$t1" "$t2" "$u1" "$u2" "$s" "$m" "$j" "$inter" <<'PY'
import sys
name, t1, t2, u1, u2, s, m, j, inter = sys.argv[1], *map(float, sys.argv[2:])
tot = s + m + j
model = lambda n: tot / (s + max((j + m) / n, m))
print(f"{name:9} -j1 {t1:6.3f} s  -j2 {t2:6.3f} s  speed-up {t1 / t2:4.2f}x (interleaved {inter:4.2f}x) | cpu -j1 {u1:6.3f} s "
      f"-j2 {u2:6.3f} s ({100 * (u2 / u1 - 1):+.0f} %) | serial {100 * s / tot:4.1f} %, merge "
      f"{100 * m / tot:4.1f} % | model: {model(2):4.2f}x at 2, {model(16):5.2f}x at 16, {model(64):5.2f}x at 64")
PY
}

echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), hyperfine -N -w 2 -r $RUNS, $(date -u +%FT%H:%MZ)"
for c in $CASES; do
	case $c in
	xray) make_xray; row xray "$TK" profile --instr-map xray_prog -j @J -o /dev/null fdr.xray ;;
	kanata) make_kanata; row kanata "$TK" stats -j @J -o /dev/null inflight.log ;;
	ipt) make_ipt; row ipt "$TK" decode --stat -j @J $(cat walk.args) walk.pt ;;
	xray-tl) make_xray; row xray-tl "$TK" convert --to perfetto -j @J -o /dev/null fdr.xray ;;
	kanata-tl) make_kanata; row kanata-tl "$TK" convert --to perfetto -j @J -o /dev/null inflight.log ;;
	ipt-tl) make_ipt; row ipt-tl "$TK" convert --to perfetto -j @J $(cat walk.args) -o /dev/null walk.pt ;;
	ipt-prof) make_ipt; row ipt-prof "$TK" profile -j @J $(cat walk.args) -o /dev/null walk.pt ;;
	llvm-prof) make_llvm && row llvm-prof "$TK" profile -j @J $(cat llvm.args) -o /dev/null llvm.pt ;;
	*) echo "unknown case: $c" >&2; exit 2 ;;
	esac
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
