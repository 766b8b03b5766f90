#!/usr/bin/env bash
# A perf.data session of several processes and threads (issue #30): tracekit against perf's
# own decoder on the same file, with per-thread attribution on.
# Input: three programs built from tests/data/seams/lj.c without PIE (-O1, -O2, -Os: other
# code at the same addresses), recorded over libc with `tracekit record --btrace` and
# converted to what the processor would write, as tests/oracle/ipt_perf_threads.sh does;
# tests/tools/mkperf.py --session wraps them as `perf record -e intel_pt//u -a` writes a
# session: process 1000 (lj, threads 1000 and 1001), process 2000 forked from it and
# exec'ing lj2, process 3000 (lj3); each thread runs its program's trace over and over
# ("copies") up to a quarter of MBYTES, cut at PSBs into 2 x MBYTES slices (about 128 KiB)
# that run in turn on CPU 0 with PERF_RECORD_SWITCH_CPU_WIDE records between them; buffers
# of 4 MiB. (A random walk over libc, bench/ipt-flow-gen.c, was tried first: perf script
# decoded it at well under 0.1 M instructions/s, a system call every few instructions.)
# First a small session of the same shape is checked: perf script and tracekit decode list
# the same instructions thread by thread (else the script stops).
# Then, on the large one (MBYTES of trace, default 100), CPU time (user + system: the
# machine is shared) of
#   tracekit decode --no-disasm -j 1     vs  perf script --itrace=i0ns -F ip
#   tracekit profile --threads -j 1      vs  perf report --itrace=i100ig --stdio -s pid,sym
# (output to /dev/null; perf's runs: PERF_RUNS, default 1, since they take minutes).
# BENCH_PROG=FILE.c records another program instead of lj.c (BENCH_ARGS: its arguments),
# e.g. bench/btrace-libc.c, a session without longjmp (the processes are named after it).
# usage: bench/perf-session.sh [MBYTES]   (env BENCH_RUNS=N, default 3; PERF_RUNS=N;
#        BENCH_KEEP=DIR keeps the inputs there; BENCH_PROG, BENCH_ARGS)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$BENCH_SRC
MB=${1:-100}
PROG=${BENCH_PROG:-$SRC/tests/data/seams/lj.c}
P=$(basename "$PROG" .c)
read -r -a ARGS <<<"${BENCH_ARGS:-}"
BENCH_RUNS=${BENCH_RUNS:-3}
PERF_RUNS=${PERF_RUNS:-1}
W=${BENCH_KEEP:-$(mktemp -d)}
mkdir -p "$W"
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
command -v perf >/dev/null || { echo "perf missing"; exit 1; }
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
# each program recorded once: its trace, its dump (the packets mkperf.py needs: PSB+ with
# the packet before each PSB, and TSCs) and its modules as JSON strings "PATH:BIAS"
for p in $P:-O1 ${P}2:-O2 ${P}3:-Os; do
	n=${p%%:*}
	[ -s "$W/$n.dump" ] && continue
	cc "${p#*:}" -no-pie -o "$W/$n" "$PROG"
	TK_BTRACE_CALL_TIMES=0 "$TK" record --btrace -q -o "$W/$n.tkbt" --module main \
		--module "$libc" -- "$W/$n" "${ARGS[@]}" >/dev/null
	"$TK" convert --to ipt -q -o "$W/$n.pt" "$W/$n.tkbt"
	"$TK" info "$W/$n.tkbt" | awk '$1 == "module" { for (i = 3; i < NF; i++)
		if ($i == "bias") printf "%s\"%s:%s\"", n++ ? ", " : "", $2, $(i + 1) }' >"$W/$n.mods"
	"$TK" dump "$W/$n.pt" | awk '$2 == "psb" && prev != "" && !kept { print prev }
		{ kept = $2 == "psb" || $2 == "psbend" || $2 == "fup" || $2 == "tsc"; if (kept) print
		  prev = $0 }' >"$W/$n.dump"
done

# session NAME MBYTES SLICES: NAME.data, each thread's program repeated to MBYTES / 4
session() {
	local name=$1 mb=$2 slices=$3 t th=() n pid tid c
	for t in $P:1000:1000 $P:1000:1001 ${P}2:2000:2000 ${P}3:3000:3000; do
		IFS=: read -r n pid tid <<<"$t"
		c=$(((mb << 20) / 4 / $(stat -c %s "$W/$n.pt") + 1))
		th+=("{\"pid\": $pid, \"tid\": $tid, \"pt\": \"$W/$n.pt\", \"packets\": \"$W/$n.dump\", \"copies\": $c}")
	done
	cat >"$W/$name.json" <<EOF
{"cpu": 0, "slices": $slices,
 "procs": [{"pid": 1000, "comm": "$P", "modules": [$(cat "$W/$P.mods")]},
           {"pid": 2000, "parent": 1000, "comm": "${P}2", "modules": [$(cat "$W/${P}2.mods")]},
           {"pid": 3000, "comm": "${P}3", "modules": [$(cat "$W/${P}3.mods")]}],
 "threads": [$(IFS=,; echo "${th[*]}")]}
EOF
	python3 "$SRC/tests/tools/mkperf.py" "$W/$name.data" --session "$W/$name.json" --buffer $((4 << 20))
}

# "tid ip" of each instruction, thread by thread (perf script; tracekit decode's streams are
# named "[cpu C, pid P, tid T]")
perf_ips() {
	perf script -i "$1" --itrace=i0ns -F tid,ip 2>/dev/null | awk '{ print $1, $NF }' | sort -s -n -k1,1
}
tk_ips() {
	"$TK" decode --no-disasm -j 1 "$1" 2>/dev/null | awk '
		/^\[.*tid [0-9]+\]: [0-9]+ bytes of trace\]$/ { match($0, /tid [0-9]+/)
			who = substr($0, RSTART + 4, RLENGTH - 4); next }
		/^\[/ { next } { a = $1; sub(/^0+/, "", a); print who, a }' | sort -s -n -k1,1
}

echo "== check: a small session of the same shape (1 MB)"
session small 1 8
perf_ips "$W/small.data" >"$W/small.perf"
tk_ips "$W/small.data" >"$W/small.tk" || true
cut -d' ' -f1 "$W/small.perf" | uniq -c | awk '{ printf "  perf: tid %s %s instructions\n", $2, $1 }'
cut -d' ' -f1 "$W/small.tk" | uniq -c | awk '{ printf "  tracekit: tid %s %s instructions\n", $2, $1 }'
[ "$(cut -d' ' -f1 "$W/small.perf" | sort -u | wc -l)" = 4 ] && cmp -s "$W/small.perf" "$W/small.tk" ||
	{ echo "perf and tracekit differ on the small session"; diff "$W/small.perf" "$W/small.tk" | head; exit 1; }
echo "  same instructions, thread by thread"

echo "== session: $MB MB of trace, 4 threads in 3 processes"
session big "$MB" $((MB * 2))
F=$W/big.data
"$TK" info "$F" | grep -E '^  (process|switches|aux|queue)' || true
"$TK" decode --no-disasm -j 1 "$F" 2>/dev/null | awk '/^\[.*tid [0-9]+\]: [0-9]+ bytes of trace\]$/ {
	match($0, /tid [0-9]+/); t = substr($0, RSTART + 4, RLENGTH - 4); next } /^\[/ { next } { n[t]++ }
	END { for (t in n) { printf "  tid %s: %d instructions\n", t, n[t]; s += n[t] } printf "  all: %d\n", s }'
echo "  $(stat -c %s "$F") bytes; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
t_dec=$(bench_cpu "$TK" decode --no-disasm -j 1 "$F")
t_prof=$(bench_cpu "$TK" profile --threads -j 1 "$F")
t_script=$(BENCH_RUNS=$PERF_RUNS bench_cpu perf script -i "$F" --itrace=i0ns -F ip)
t_report=$(BENCH_RUNS=$PERF_RUNS bench_cpu perf report -i "$F" --itrace=i100ig --stdio -s pid,sym)
echo "  load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %9s s CPU\n' "perf script --itrace=i0ns -F ip" "$t_script"
printf '%-44s %9s s CPU  %sx\n' "tracekit decode --no-disasm -j 1" "$t_dec" "$(bench_ratio "$t_script" "$t_dec")"
printf '%-44s %9s s CPU\n' "perf report --itrace=i100ig --stdio -s pid,sym" "$t_report"
printf '%-44s %9s s CPU  %sx\n' "tracekit profile --threads -j 1" "$t_prof" "$(bench_ratio "$t_report" "$t_prof")"
