#!/usr/bin/env bash
# Helpers shared by the benchmark scripts. Source it: . "$(dirname "$0")/lib.sh"
# Benchmarks are never tests: they print figures for docs/PERFORMANCE.md.

# the source tree, found while sourcing (the scripts cd to their inputs' directory later)
BENCH_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TK=${TK:-$BENCH_SRC/build/tracekit}
BENCH_RUNS=${BENCH_RUNS:-5}
# what a program linked with build/libtracekit.a needs besides it (CMakeLists.txt's TK_LINK_DEPS)
TK_STATIC_LIBS="-lipt -lelf -ldw -lZydis -liberty -lzstd -lisal -lz -lpthread -ldl -lm"

# bench_time CMD...: median wall-clock seconds of BENCH_RUNS runs (output discarded).
bench_time() {
	local times=() i s e
	for ((i = 0; i < BENCH_RUNS; i++)); do
		s=$(date +%s.%N)
		"$@" >/dev/null 2>&1
		e=$(date +%s.%N)
		times+=("$(echo "$e - $s" | bc -l)")
	done
	printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.4f\n", m}'
}

# bench_cpu CMD...: median CPU seconds (user + system, the command and what it waits for)
# of BENCH_RUNS runs (output discarded). On a loaded machine CPU time moves less than the
# wall clock.
bench_cpu() {
	local all
	all=$(bench_cpu_split "$@") || return
	echo "${all%% *}"
}

# bench_cpu_split CMD...: bench_cpu's median, then the medians of user and of system seconds
# apart: in this project's VMs system time (mostly the kernel zeroing fresh pages) swings
# several-fold between runs of one command, and can hide what the program itself spends
bench_cpu_split() {
	python3 - "$BENCH_RUNS" "$@" <<'PY'
import resource, statistics, subprocess, sys
runs, cmd = int(sys.argv[1]), sys.argv[2:]
t, u, k = [], [], []
for _ in range(runs):
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    u.append(b.ru_utime - a.ru_utime)
    k.append(b.ru_stime - a.ru_stime)
    t.append(u[-1] + k[-1])
print("%.3f %.3f %.3f" % (statistics.median(t), statistics.median(u), statistics.median(k)))
PY
}

# bench_faults CMD...: page faults (minor + major) of one run of CMD, output discarded.
# Fresh memory is what -j 2 adds most often, and in this project's VMs each 4 KiB fault
# costs 15-20 µs (bench_page_fault): a row's faults say whether its extra CPU is there.
bench_faults() {
	python3 - "$@" <<'PY'
import resource, subprocess, sys
a = resource.getrusage(resource.RUSAGE_CHILDREN)
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
b = resource.getrusage(resource.RUSAGE_CHILDREN)
print(b.ru_minflt - a.ru_minflt + b.ru_majflt - a.ru_majflt)
PY
}

# bench_page_fault: µs to fault in 4 KiB of fresh memory now, on 4 KiB pages and on huge
# pages (bench/page-fault.c, 64 MiB, 3 rounds), as "4K/HUGE", then the same after 6 s idle
# (one round: memory the host took back, as a run after a pause meets it); "?" where it
# cannot run.
bench_page_fault() {
	local bin out cold
	bin=$(bench_tool page-fault) && out=$("$bin" 64 3 2>/dev/null) && [ -n "$out" ] &&
		cold=$("$bin" 64 1 6 2>/dev/null) && [ -n "$cold" ] || { echo "?"; return; }
	echo "$(awk '{print $2 "/" $5}' <<<"$out") (after 6 s idle: $(awk '{print $2 "/" $5}' <<<"$cold"))"
}

# bench_peak_kb CMD...: peak resident set size in KiB of one run.
bench_peak_kb() {
	/usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -n 1
}

# bench_ratio A B: A / B with two decimals.
bench_ratio() {
	echo "scale=2; $1 / $2" | bc -l
}

# bench_round_ratio "CMD_A" "CMD_B" [SWAP]: A's time / B's time, B run right after A, or
# with SWAP 1 A right after B. (Commands are split at spaces.)
bench_round_ratio() {
	local s m e ta tb
	s=$(date +%s.%N)
	if [ "${3:-0}" = 1 ]; then $2 >/dev/null 2>&1; else $1 >/dev/null 2>&1; fi
	m=$(date +%s.%N)
	if [ "${3:-0}" = 1 ]; then $1 >/dev/null 2>&1; else $2 >/dev/null 2>&1; fi
	e=$(date +%s.%N)
	ta="$m - $s" tb="$e - $m"
	[ "${3:-0}" = 1 ] && { ta="$e - $m"; tb="$m - $s"; }
	echo "($ta) / ($tb)" | bc -l
}

# bench_interleaved_ratio "CMD_A" "CMD_B": BENCH_RUNS rounds of bench_round_ratio; prints
# their median. On a shared machine whose speed drifts within minutes, medians of A's runs
# and then of B's runs compare different moments; a round compares the same one. Every
# other round runs B first: a run's speed here depends on the run before it (memory the
# last process freed is being taken back by the host: the walk's profile at -j 2 right
# after -j 1 took 5.8-6.2 s, right after -j 2 5.2-5.7 s), and always A first would charge
# that to B alone.
bench_interleaved_ratio() {
	local i ratios=()
	for ((i = 0; i < BENCH_RUNS; i++)); do
		ratios+=("$(bench_round_ratio "$1" "$2" $((i % 2)))")
	done
	bench_median "${ratios[@]}"
}

# bench_interleaved_ratio_near "CMD_A" "CMD_B": as bench_interleaved_ratio, with the two
# CPUs' distance and their speeds taken before each round; prints "ALL NEAR N EVEN M": the
# median ratio of all rounds, that of the N rounds at near distance (under BENCH_NEAR_NS,
# default 300 ns), and that of the M rounds whose CPUs ran at the same speed (the slower at
# least BENCH_EVEN, default 0.9, of the faster: bench_core_speed); "-" when there was none.
bench_interleaved_ratio_near() {
	local i d v r all=() near=() even=()
	for ((i = 0; i < BENCH_RUNS; i++)); do
		d=$(bench_core_distance)
		v=$(bench_core_speed)
		r=$(bench_round_ratio "$1" "$2" $((i % 2)))
		all+=("$r")
		if [ "$d" != "?" ] && [ "$d" -lt "${BENCH_NEAR_NS:-300}" ]; then
			near+=("$r")
		fi
		if [ "$v" != "?" ] && [ "$(echo "$v >= ${BENCH_EVEN:-0.9}" | bc -l)" = 1 ]; then
			even+=("$r")
		fi
	done
	echo "$(bench_median "${all[@]}") $(bench_median "${near[@]}") ${#near[@]}" \
		"$(bench_median "${even[@]}") ${#even[@]}"
}

# bench_median X...: the median with two decimals, or "-" of nothing.
bench_median() {
	[ $# -gt 0 ] || { echo "-"; return; }
	printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f\n", m}'
}

# bench_tool NAME [CFLAGS...]: bench/NAME.c built into build/NAME once (again when the
# source is newer); prints its path, or fails when it cannot be built.
bench_tool() {
	local name=$1 bin=$BENCH_SRC/build/$1
	shift
	if [ ! -x "$bin" ] || [ "$bin" -ot "$BENCH_SRC/bench/$name.c" ]; then
		gcc -O2 "$@" -o "$bin" "$BENCH_SRC/bench/$name.c" || return 1
	fi
	echo "$bin"
}

# bench_core_distance: the two CPUs' distance now, as a cache line's round trip in ns
# (bench/core-distance.c). On this VM it is ~120 ns or ~530 ns as the host places the
# vCPUs, and -j 2 runs that move data between threads are slower at the second; -j 1 runs
# are not. Prints "?" on a machine with one CPU.
bench_core_distance() {
	local bin
	bin=$(bench_tool core-distance -pthread) || { echo "?"; return; }
	"$bin" 3 2>/dev/null || echo "?"
}

# bench_core_speed: the slowest CPU's speed now as a fraction of the fastest's, one thread
# pinned to each in turn (bench/core-speed.c). On this VM one vCPU is at times about 1.6
# times slower than the other for minutes (its host core shared): a -j 1 run is then fast
# or slow as it is placed, and a -j 2 speed-up against it means little. Prints "?" where
# it cannot be built or run.
bench_core_speed() {
	local bin out
	bin=$(bench_tool core-speed) && out=$("$bin" 3 2>/dev/null) && [ -n "$out" ] ||
		{ echo "?"; return; }
	echo "${out%% *}"
}

# bench_xray_fdr LOG PROG BUFFER_BYTES MAX_BUFFERS THREADS ITERS: a real FDR log (in the
# current directory) of tests/data/xray/xray_prog.c built as PROG with clang-16
# -fxray-instrument; its THREADS + 1 threads each run ITERS iterations. PROG is kept for
# --instr-map. Nothing is done when LOG exists. Now and then the runtime loses a few
# records (one 477 MB log had 8 exits without their enters; four made since had none),
# and every profile of such a log exits 1: it is recorded again (at most 3 times).
bench_xray_fdr() {
	local log=$1 prog=$2 buf=$3 max=$4 threads=$5 iters=$6
	local src=$BENCH_SRC try
	[ -s "$log" ] && return
	clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 \
		"$src/tests/data/xray/xray_prog.c" -o "$prog" -lpthread
	for try in 1 2 3; do
		rm -f "fdr-$prog".*
		XRAY_FDR_BUF=$buf XRAY_FDR_MAX=$max \
			XRAY_OPTIONS="patch_premain=false xray_logfile_base=./fdr-" "./$prog" fdr "$threads" "$iters" 2>/dev/null
		mv "fdr-$prog".* "$log"
		"$TK" profile -j 2 --to csv -o /dev/null "$log" 2>/dev/null && return
		echo "bench_xray_fdr: $log: the XRay runtime lost records (try $try of 3)" >&2
	done
}
