#!/usr/bin/env bash
# tracekit-mpi on this machine: `mpirun -np 1` against `-np 2` (each rank -j 1), for an
# Intel PT raw trace of at least 100 MB (tests/data/seams/lj.c recorded with --btrace,
# converted to PT and repeated end to end, each copy starting with a PSB, as a longer run
# would be) and an XRay FDR log of about 160 MB (bench/xray-decode.sh's program), with the
# phases rank 0 reports (TK_MPI_TIMES): MPI's start (the ranks decode meanwhile), plan +
# decode + save on the slowest rank from its start, gather of the partials, merge + write;
# and `profile -j 1` for reference. Outputs are checked equal.
# BENCH_SCALE=K makes the inputs K times larger (mpirun's launch and the part of MPI's
# start a rank's decoding does not hide are paid by -np 1 and -np 2 alike: larger inputs
# show the ratio they leave).
# BENCH_CPU=1 runs each rank under `perf stat` and adds the ranks' CPU seconds (task-clock:
# what a loaded machine can still compare; the slowest rank's sets a quiet job's time).
# usage: bench/mpi.sh   (BENCH_RUNS=N, default 3; BENCH_DIR=DIR for the inputs; BENCH_SCALE;
#        BENCH_CPU)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
TK=$BUILD/tracekit
MPI=$BUILD/tracekit-mpi
RUNS=${BENCH_RUNS:-3}
K=${BENCH_SCALE:-1}
PT=big.pt XRAY=fdr.xray
[ "$K" = 1 ] || PT=big-$K.pt XRAY=fdr-$K.xray
D=${BENCH_DIR:-$BUILD/bench-mpi}
mkdir -p "$D"
cd "$D"
# (one recording for every scale: the large traces repeat it, with its binary and bias)
if [ ! -s lj.pt ]; then
	cc -O1 -o lj "$SRC/tests/data/seams/lj.c"
	"$TK" record --btrace -o lj.tkbt -- ./lj >/dev/null 2>&1
	"$TK" convert --to ipt -q -o lj.pt lj.tkbt
	"$TK" info lj.tkbt | awk -v m="$D/lj" '$1 == "module" && $2 == m {
		for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }' >bias
	rm -f big*.pt
fi
if [ ! -s "$PT" ]; then
	n=$(( K * 100 * 1000 * 1000 / $(stat -c %s lj.pt) + 1 ))
	for _ in $(seq "$n"); do cat lj.pt; done >"$PT"
fi
bench_xray_fdr "$XRAY" prog 16384 $((K * 16000)) 3 $((K * 145000))
run() { mpirun --oversubscribe --allow-run-as-root -np "$@"; }
cpu=()
if [ "${BENCH_CPU:-0}" = 1 ]; then
	printf '#!/bin/sh\nexec perf stat -e task-clock -x, -o "%s/cpu.$OMPI_COMM_WORLD_RANK" "$@"\n' \
		"$D" >"$D/cpu.sh"
	chmod +x "$D/cpu.sh"
	cpu=("$D/cpu.sh")
fi
ranks_cpu() {   # NP: the ranks' CPU seconds, rank 0 first
	[ ${#cpu[@]} = 0 ] && return
	local k out=""
	for k in $(seq 0 $(($1 - 1))); do
		out="$out $(awk -F, '/task-clock/ { printf "%.3f", $1 / 1000 }' "$D/cpu.$k")"
	done
	echo "; ranks' CPU s:$out"
}
one() {   # LABEL ARGS...: profile -j 1, then -np 1 and -np 2 with the phases
	local label=$1
	shift
	printf '%s (%s MB)\n' "$label" "$(( $(stat -c %s "${@: -1}") / 1000000 ))"
	for r in $(seq "$RUNS"); do
		local t0 t1
		t0=$(date +%s.%N); "$TK" profile -j 1 --to csv "$@" >want.csv 2>/dev/null || true
		t1=$(date +%s.%N); echo "  profile -j 1: $(echo "$t1 - $t0" | bc) s"
		for np in 1 2; do
			t0=$(date +%s.%N)
			TK_MPI_TIMES=1 run "$np" "${cpu[@]}" "$MPI" profile -j 1 --to csv -o got.csv "$@" 2>times || true
			t1=$(date +%s.%N)
			echo "  -np $np: $(echo "$t1 - $t0" | bc) s; $(grep '^tracekit-mpi:' times | cut -d: -f2-)$(ranks_cpu "$np")"
			cmp -s want.csv got.csv || echo "  -np $np: OUTPUT DIFFERS"
		done
	done
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
one "Intel PT raw, --elf" --elf "$D/lj:$(cat bias)" "$PT"
one "XRay FDR" "$XRAY"
# partial sizes and CPU time of the serialising (perf stat): one shard of all, then merge
for f in "$PT" "$XRAY"; do
	opts=(); [ "$f" = "$PT" ] && opts=(--elf "$D/lj:$(cat bias)")
	"$TK" profile --shard 1/2 -j 1 -o p1.tkp "${opts[@]}" "$f"
	"$TK" profile --shard 2/2 -j 1 -o p2.tkp "${opts[@]}" "$f"
	echo "$f: partials of 2 shards $(stat -c %s p1.tkp) + $(stat -c %s p2.tkp) bytes"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
