#!/usr/bin/env bash
# Issue 28's acceptance: the headline commands execute no more instructions (callgrind:
# repeatable on a shared machine) than before the source pipeline (e841869), on the same
# inputs; outputs compared. usage: bench/pipeline-regression.sh OLD-TRACEKIT NEW-TRACEKIT DIR
# DIR holds the inputs (made as docs/PERFORMANCE.md says): walk8.pt (the first 8 MB of
# bench/scaling.sh's PT walk over libc, whose load address --elf names), fdr.xray and prog
# (bench_xray_fdr fdr.xray prog 16384 16000 3 8000), k.log (the first 1.5 M lines of
# bench/kanata-inflight.py's log), xt/ (bench/xtrace-gen.py xt 20), lj.tkbt (oracle's lj.c
# recorded with record --btrace).
set -euo pipefail
old=$1 new=$2
cd "$3"
W="--elf /lib/x86_64-linux-gnu/libc.so.6:${LIBC_BASE:-0x7f72ebeb4000}"
X=$(echo xt/*.xinsndata.bin)
cmds=(
"decode --stat -j 1 $W walk8.pt"
"stats -j 1 $W walk8.pt"
"profile -j 1 --to csv $W walk8.pt"
"profile -j 1 --to csv --instr-map prog fdr.xray"
"stats -j 1 k.log"
"stats -j 1 $X"
"profile -j 1 --to csv lj.tkbt"
)
for c in "${cmds[@]}"; do
	for v in old new; do
		bin=$old; [ $v = new ] && bin=$new
		# shellcheck disable=SC2086
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" $c >"out.$v" 2>"cg.$v" || true
		eval "ir_$v=$(grep -o 'Collected : [0-9]*' "cg.$v" | awk '{print $3}')"
	done
	same=$(cmp -s out.old out.new && echo same || echo different)
	echo "$c | old $ir_old | new $ir_new | ratio $(echo "scale=4; $ir_new / $ir_old" | bc) | output $same"
done
