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
# in pools, jobs J = workers, other threads O, of which R in order: a timeline's formatter)
# the model T(N) = S + max((J + M + O) / N, M, R) (the merging main thread and the threads
# outside the pools share the N cores; the merges and R are one thread's each), whose
# speed-ups at 2, 16 and 64 workers are printed beside the measured one; the same model from
# a -j 4 run's phases too, which runs as -j 16 and 64 do where -j 2 does not (the timelines'
# writers format on a thread of their own from -j 3 on; at -j 2 their pass does). A run without a
# pool (Kanata's timeline: a relay of threads, each a stage) is bounded by its longest stage:
# T(N) = max(S, R, (S + O) / N).
# Optional cases (not run by default): kanata-check (check of the Kanata log: the same
# parallel parse as stats), kanata-dump, xray-dump, ipt-dump (dump of the Kanata log, the
# XRay log and the walk into /dev/null: chunks printed at once), xray-yaml (convert --to
# xray-yaml of the XRay log: blocks of merged records formatted at once), xray-basic,
# xray-basic-tl, xray-basic-yaml (profile, convert --to perfetto and --to xray-yaml of a
# basic-mode log whose four threads' records interleave one by one in time:
# bench/xray-basic-gen.py), xray-tl, kanata-tl, ipt-tl (convert --to perfetto
# of the same inputs; ipt-tl on the walk), kanata-report (report of the Kanata log: the
# decoder's chunks parsed at once, their events merged into the report), kanata-gz,
# kanata-report-gz (stats and report of the Kanata log gzipped: their chunks read off the
# stream in turn by their jobs), kanata-far (report of a log of the same shape whose
# instructions are numbered from 200,000,000, as a simulator's sequence numbers may be: a
# chunk's state must not grow with the ids before it), ipt-prof (profile of the walk: its call tree
# is built on the main thread), llvm-walk (decode --stat of the same walk over libc and
# libLLVM, as bench/ipt-flow.sh's llvm-walk), llvm-prof (profile of libLLVM's O2 pipeline as
# bench/ipt-flow.sh records it: run that first, its recording is reused), and btrace-prof,
# btrace-tl (profile and convert --to perfetto of bench/ipt-flow.sh's libc branch trace
# itself, not converted to raw PT: the branch-trace source's own chunks), btrace-decode
# (decode --stat of that branch trace: each thread's stream joined, then split at PSBs),
# btrace-dump (dump -q of it: records checked, streams joined and walked), btrace-gz,
# btrace-zst (decode --stat of it gzipped or zstd-compressed: mapped whole first), libc-tl (the same
# recording converted to raw PT, then convert --to perfetto: a real program's PT timeline,
# under the timeline's event cap, so that its halves do the same work as the whole).
# Each row gives the CPU seconds of -j 1 and -j 2 (medians of three runs), how much more
# user time -j 2 takes, and both runs' system time (the kernel's zeroing of fresh pages,
# which swings several-fold between runs of one command here), and the page faults of one
# -j 1 and one -j 2 run (fresh memory: in this project's VMs a 4 KiB fault costs 2-20 µs,
# printed at the top by bench/page-fault.c, warm and after 6 s idle: bench/cold-pages.sh).
# Besides hyperfine's medians (all -j 1 runs, then all -j 2 runs), each row gives the
# median of RUNS interleaved rounds (-j 1 and -j 2 one right after the other, every other
# round -j 2 first: a run is slower right after one that freed much memory;
# bench_interleaved_ratio), which this machine's drift from minute to minute does not
# bias, and "cores NEAR/FAR ns": the two CPUs' distance before and after the row
# (bench/core-distance.c: ~120 ns when the host's vCPUs are near, ~530 ns when far; -j 2
# is slower at the second), with the median of the interleaved rounds that began at near
# distance (under BENCH_NEAR_NS, 300 ns), and that of the rounds that began with both CPUs
# at the same speed ("even rounds": bench/core-speed.c; at times one vCPU runs 1.6 times
# slower than the other, and a -j 1 run placed on it makes -j 2 look faster than the
# machine allows).
# BENCH_HALVES=1 adds to the Intel PT rows (ipt, ipt-dump, ipt-prof, llvm-prof, llvm-walk,
# libc-tl), to xray and to the plain Kanata rows what this machine gives two independent
# halves of the work: the trace cut at the first PSB (the XRay log: buffer; the Kanata log:
# cycle line) past its middle, one `-j 1` process per half, both started at once (RUNS
# rounds of -j 1, -j 2 and the halves, interleaved). Those processes share nothing but the
# cores, caches and memory, so -j 1 / halves is the -j 2 speed-up this machine allows
# without doing less work than -j 1, and the halves' CPU (user + system of both) over
# -j 1's is the extra CPU two such threads cost on it.
# usage: bench/scaling.sh [CASES]   (CASES: any of the above, default "xray kanata ipt"; env
#        BENCH_RUNS (default 10), BENCH_DIR to keep the inputs (default build/bench-scaling),
#        BENCH_HALVES)
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
make_xray_basic() {
	[ -s basic-runs.xray ] || python3 "$SRC/bench/xray-basic-gen.py" basic-runs.xray
}
make_kanata() {
	[ -s inflight.log ] || python3 "$SRC/bench/kanata-inflight.py" 151 inflight.log
}
make_kanata_far() {
	[ -s farids.log ] || python3 "$SRC/bench/kanata-inflight.py" 151 farids.log 1 200000000
}
make_kanata_gz() {
	make_kanata
	[ -s inflight.log.gz ] || gzip -6 -c inflight.log >inflight.log.gz
}
make_ipt() {
	[ -s walk.pt ] && return
	gcc -O2 -o ptgen "$SRC/bench/ipt-flow-gen.c" -I"$SRC/tests" -I"$SRC/lib" -I"$SRC/include" \
		"$SRC/build/libtracekit.a" $TK_STATIC_LIBS
	./ptgen walk.pt 100 >walk.args 2>/dev/null
}
make_llvm_walk() {
	[ -s llvm-walk.pt ] && return
	local lib
	lib=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-1[0-9].so.1 2>/dev/null | tail -n 1)
	[ -n "$lib" ] || { echo "llvm-walk: no libLLVM" >&2; return 1; }
	make_ipt
	./ptgen llvm-walk.pt 100 "$lib" >llvm-walk.args 2>/dev/null
}

make_llvm() {
	[ -s llvm.pt ] && return
	local c
	c=$(ls -t "$SRC"/build/bench-ipt-flow/llvm-O2-*.tkbt 2>/dev/null | head -n 1)
	[ -n "$c" ] || { echo "llvm-prof: no recording: run bench/ipt-flow.sh first" >&2; return 1; }
	"$TK" convert --to ipt -o llvm.pt "$c"
	tr '\n' ' ' <"${c%.tkbt}.args" >llvm.args
}
make_libc_pt() {
	[ -s libc.pt ] && [ -s libc.args ] && return
	local c
	c=$(ls -t "$SRC"/build/bench-ipt-flow/libc-*.tkbt 2>/dev/null | head -n 1)
	[ -n "$c" ] || { echo "libc-tl: no recording: run bench/ipt-flow.sh first" >&2; return 1; }
	"$TK" convert --to ipt -o libc.pt "$c"
	tr '\n' ' ' <"${c%.tkbt}.args" >libc.args
}
make_btrace() {
	[ -s libc.tkbt ] && return
	local c
	c=$(ls -t "$SRC"/build/bench-ipt-flow/libc-*.tkbt 2>/dev/null | head -n 1)
	[ -n "$c" ] || { echo "btrace: no recording: run bench/ipt-flow.sh first" >&2; return 1; }
	ln -sf "$c" libc.tkbt
}

# make_btrace_packed gz|zst: the branch trace compressed (gzip -1, zstd -3)
make_btrace_packed() {
	make_btrace || return 1
	[ -s "libc.tkbt.$1" ] && return
	case $1 in
	gz) gzip -1 -c libc.tkbt >libc.tkbt.gz ;;
	# (the file itself: zstd skips a symbolic link, and a frame written from a pipe
	# states no size)
	zst) zstd -q -3 -o libc.tkbt.zst "$(readlink -f libc.tkbt)" ;;
	esac
}

# phases CMD...: "S M J O R" seconds from TK_PHASES lines, each the median of three runs'
# (O: threads outside the pools, such as a timeline's formatter and helpers, or a relay's
# consumer; R: what of it goes in order, one thread's; 0 from a binary older than 564ebfd,
# as TK=... may run). One run's serial part as much as doubled on this host (btrace-tl: 17 to
# 34 ms).
phases() {
	local k
	for k in 1 2 3; do
		TK_PHASES=1 "$@" 2>&1 >/dev/null | sed -En 's/.*= serial ([0-9.]+) .*\+ merge ([0-9.]+) .*\+ jobs ([0-9.]+) .*\+ other threads ([0-9.]+)( \(([0-9.]+) in order\))?;.*/\1 \2 \3 \4 \6/p' | tail -n 1
	done | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
if rows:
    print(" ".join(str(statistics.median(float(r[c]) if c < len(r) else 0.0 for r in rows)) for c in range(5)))'
}

# halves FILE: FILE cut into FILE.a and FILE.b (kept): an Intel PT trace at the first PSB
# past its middle; an XRay FDR log (version 2 and later) at the first buffer past its middle,
# following the BufferExtents records, the second half given the file's 32-byte header too;
# a Kanata log at the first cycle line past its middle, the second half given the header
# line and a start cycle (its instructions begun before the cut are reported as errors:
# the same parse)
halves() {
	[ -s "$1.b" ] && [ "$1.b" -nt "$1" ] && return
	python3 - "$1" <<'PY'
import struct, sys
path = sys.argv[1]
data = open(path, 'rb').read()
head = b''
version, kind = struct.unpack_from('<HH', data, 0)
if data.startswith(b'Kanata\t'):
    cut = data.find(b'\nC\t', len(data) // 2) + 1
    head = data[:data.index(b'\n') + 1] + b'C=\t0\n'
elif kind == 1 and 2 <= version <= 5:   # XRay FDR with BufferExtents, little-endian
    off = 32
    while off < len(data) // 2:
        if data[off] != 0x0f:   # the BufferExtents metadata record
            sys.exit(f"{path}: no BufferExtents record at offset {off}")
        off += 16 + struct.unpack_from('<Q', data, off + 1)[0]
    cut, head = off, data[:32]
else:
    cut = data.find(bytes([0x02, 0x82] * 8), len(data) // 2)
if cut <= 0 or cut >= len(data):
    sys.exit(f"{path}: no place to cut past the middle")
open(path + '.a', 'wb').write(data[:cut])
open(path + '.b', 'wb').write(head + data[cut:])
PY
}

# halves_row NAME CMD... (the trace last, -j as in row): medians of RUNS interleaved rounds
# of -j 1, -j 2 and two -j 1 processes on the trace's halves started together, wall and
# CPU (user + system of both halves): what this host gives two threads that share nothing
halves_row() {
	local name=$1; shift
	local c1=() c2=() a
	for a in "$@"; do c1+=("${a/#@J/1}"); c2+=("${a/#@J/2}"); done
	local trace=${c1[-1]} ha=("${c1[@]}") hb=("${c1[@]}")
	halves "$trace"
	ha[-1]=$trace.a
	hb[-1]=$trace.b
	python3 - "$name" "$RUNS" "${#c1[@]}" "${c1[@]}" "${c2[@]}" "${ha[@]}" "${hb[@]}" <<'PY'
import resource, statistics, subprocess, sys, time
name, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c1, c2, ha, hb = (sys.argv[4 + k * n:4 + (k + 1) * n] for k in range(4))
def timed(*cmds):
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    ps = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in cmds]
    for c, p in zip(cmds, ps):   # status 1 (data skipped) counts as done
        if p.wait() > 1:
            sys.exit(f"failed ({p.returncode}): {' '.join(c)}")
    t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    return t1 - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
w = {k: [] for k in "12h"}; u = {k: [] for k in "12h"}
for _ in range(runs):
    for k, cmds in (("1", [c1]), ("2", [c2]), ("h", [ha, hb])):
        t, cpu = timed(*cmds)
        w[k].append(t); u[k].append(cpu)
j1, j2, h = (statistics.median(w[k]) for k in "12h")
p1, p2, ph = (statistics.median(u[k]) for k in "12h")
print(f"{name:9} halves: -j1 {j1:6.3f} s  -j2 {j2:6.3f} s  two -j1 on the halves at once {h:6.3f} s | "
      f"-j2 {j1 / j2:4.2f}x, the halves {j1 / h:4.2f}x (-j2 takes {100 * (j2 / h - 1):+.0f} % over them) | "
      f"cpu -j1 {p1:6.3f} s, -j2 {p2:6.3f} s ({100 * (p2 / p1 - 1):+.0f} %), the halves {ph:6.3f} s "
      f"({100 * (ph / p1 - 1):+.0f} %)")
PY
}

row() { # NAME CMD... (with -j J where the J is)
	local name=$1; shift
	local c1=() c2=() c4=() near far
	near=$(bench_core_distance)
	for a in "$@"; do c1+=("${a/#@J/1}"); c2+=("${a/#@J/2}"); c4+=("${a/#@J/4}"); done
	hyperfine -N -w 2 -r "$RUNS" --export-json "$name.json" "${c1[*]}" "${c2[*]}" >/dev/null 2>&1
	local t1 t2 u1 u2
	read -r t1 t2 < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(r[0]["median"], r[1]["median"])' "$name.json")
	local us1 us2 k1 k2
	read -r u1 us1 k1 < <(BENCH_RUNS=3 bench_cpu_split "${c1[@]}")
	read -r u2 us2 k2 < <(BENCH_RUNS=3 bench_cpu_split "${c2[@]}")
	local f1 f2
	f1=$(bench_faults "${c1[@]}")
	f2=$(bench_faults "${c2[@]}")
	read -r s m j o r < <(phases "${c2[@]}")
	r=${r:-0}
	# the same at -j 4, which runs as -j 16 and 64 do where -j 2 does not (a timeline's pass
	# formats its own records at -j 2, a thread of its own does from 3 on)
	read -r s4 m4 j4 o4 r4 < <(phases "${c4[@]}")
	r4=${r4:-0}
	local inter inear nnear
	read -r inter inear nnear ieven neven < <(BENCH_RUNS=$RUNS bench_interleaved_ratio_near "${c1[*]}" "${c2[*]}")
	far=$(bench_core_distance)
	python3 - "$name" "$t1" "$t2" "$u1" "$u2" "$s" "$m" "$j" "$o" "$r" "$inter" "$near" "$far" "$inear" "$nnear" "$ieven" "$neven" "$f1" "$f2" "$s4" "$m4" "$j4" "$o4" "$r4" "$us1" "$us2" "$k1" "$k2" <<'PY'
import sys
name, near, far, inear, nnear, ieven, neven, f1, f2 = sys.argv[1], *sys.argv[12:20]
t1, t2, u1, u2, s, m, j, o, r, inter = map(float, sys.argv[2:12])
s4, m4, j4, o4, r4 = map(float, sys.argv[20:25])
us1, us2, k1, k2 = map(float, sys.argv[25:29])
tot = s + m + j + o
# the merges and what other threads do in order are each one thread's, beside the rest
model = lambda n: tot / (s + max((j + m + o) / n, m, r))
tot4 = s4 + m4 + j4 + o4
model4 = lambda n: tot4 / (s4 + max((j4 + m4 + o4) / n, m4, r4)) if tot4 else 0
head = (f"{name:9} -j1 {t1:6.3f} s  -j2 {t2:6.3f} s  speed-up {t1 / t2:4.2f}x (interleaved {inter:4.2f}x) | cpu -j1 {u1:6.3f} s "
        f"-j2 {u2:6.3f} s ({100 * (u2 / u1 - 1):+.0f} %; user {100 * (us2 / max(us1, 1e-9) - 1):+.0f} %, system {k1:.3f}/{k2:.3f} s), "
        f"page faults {f1}/{f2} | cores {near}/{far} ns, near rounds {nnear}: "
        f"{inear}x, even rounds {neven}: {ieven}x | ")
if j + m == 0:
    # no pool: threads that each do one stage of a pipeline (a relay's: the calling thread
    # reads, the consumer's R goes in order), whatever -j says; the longest stage bounds
    # the speed-up at any count: T(N) = max(S, R, (S + O) / N)
    relay = lambda n: tot / max(s, r, tot / n)
    print(head + f"no pool: calling thread {s:.3f} s, other threads {o:.3f} s ({r:.3f} s in order) | "
          f"model: {relay(2):4.2f}x at 2, {relay(16):5.2f}x at 16, {relay(64):5.2f}x at 64 "
          f"(the longest stage bounds it)")
else:
    print(head + f"serial {100 * s / tot:4.1f} %, merge {100 * m / tot:4.1f} %, in order elsewhere "
          f"{100 * r / tot:4.1f} % | model: {model(2):4.2f}x at 2, {model(16):5.2f}x at 16, "
          f"{model(64):5.2f}x at 64; from -j 4's phases (merge {100 * m4 / max(tot4, 1e-9):4.1f} %, "
          f"in order elsewhere {100 * r4 / max(tot4, 1e-9):4.1f} %): {model4(16):5.2f}x at 16, "
          f"{model4(64):5.2f}x at 64")
PY
	if [ -n "${BENCH_HALVES:-}" ] && [ "${ROW_HALVES:-}" = 1 ]; then
		halves_row "$name" "$@"
	fi
}

echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), hyperfine -N -w 2 -r $RUNS, $(date -u +%FT%H:%MZ), a page fault $(bench_page_fault) µs per 4 KiB (small/huge pages)"
for c in $CASES; do
	case $c in
	xray) make_xray; ROW_HALVES=1 row xray "$TK" profile --instr-map xray_prog -j @J -o /dev/null fdr.xray ;;
	kanata) make_kanata; ROW_HALVES=1 row kanata "$TK" stats -j @J -o /dev/null inflight.log ;;
	ipt) make_ipt; ROW_HALVES=1 row ipt "$TK" decode --stat -j @J $(cat walk.args) walk.pt ;;
	xray-tl) make_xray; row xray-tl "$TK" convert --to perfetto -j @J -o /dev/null fdr.xray ;;
	kanata-check) make_kanata; ROW_HALVES=1 row kanata-check "$TK" check -j @J -o /dev/null inflight.log ;;
	kanata-dump) make_kanata; ROW_HALVES=1 row kanata-dump "$TK" dump -j @J -o /dev/null inflight.log ;;
	xray-dump) make_xray; row xray-dump "$TK" dump -j @J -o /dev/null fdr.xray ;;
	xray-yaml) make_xray; row xray-yaml "$TK" convert --to xray-yaml -j @J -o /dev/null fdr.xray ;;
	xray-basic) make_xray_basic; row xray-basic "$TK" profile -j @J -o /dev/null basic-runs.xray ;;
	xray-basic-tl) make_xray_basic; row xray-basic-tl "$TK" convert --to perfetto -j @J -o /dev/null basic-runs.xray ;;
	xray-basic-yaml) make_xray_basic; row xray-basic-yaml "$TK" convert --to xray-yaml -j @J -o /dev/null basic-runs.xray ;;
	ipt-dump) make_ipt; ROW_HALVES=1 row ipt-dump "$TK" dump -j @J -o /dev/null walk.pt ;;
	kanata-tl) make_kanata; ROW_HALVES=1 row kanata-tl "$TK" convert --to perfetto -j @J -o /dev/null inflight.log ;;
	kanata-report) make_kanata; ROW_HALVES=1 row kanata-report "$TK" report -j @J -o /dev/null inflight.log ;;
	kanata-far) make_kanata_far; row kanata-far "$TK" report -j @J -o /dev/null farids.log ;;
	kanata-gz) make_kanata_gz; row kanata-gz "$TK" stats -j @J -o /dev/null inflight.log.gz ;;
	kanata-report-gz) make_kanata_gz; row kanata-report-gz "$TK" report -j @J -o /dev/null inflight.log.gz ;;
	ipt-tl) make_ipt; row ipt-tl "$TK" convert --to perfetto -j @J $(cat walk.args) -o /dev/null walk.pt ;;
	ipt-prof) make_ipt; ROW_HALVES=1 row ipt-prof "$TK" profile -j @J $(cat walk.args) -o /dev/null walk.pt ;;
	llvm-walk) make_llvm_walk && ROW_HALVES=1 row llvm-walk "$TK" decode --stat -j @J $(tr '\n' ' ' <llvm-walk.args) llvm-walk.pt ;;
	llvm-prof) make_llvm && ROW_HALVES=1 row llvm-prof "$TK" profile -j @J $(cat llvm.args) -o /dev/null llvm.pt ;;
	btrace-prof) make_btrace && row btrace-prof "$TK" profile -j @J -o /dev/null libc.tkbt ;;
	btrace-decode) make_btrace && row btrace-decode "$TK" decode --stat -j @J libc.tkbt ;;
	btrace-dump) make_btrace && row btrace-dump "$TK" dump -q -j @J libc.tkbt ;;
	btrace-gz) make_btrace_packed gz && row btrace-gz "$TK" decode --stat -j @J libc.tkbt.gz ;;
	btrace-zst) make_btrace_packed zst && row btrace-zst "$TK" decode --stat -j @J libc.tkbt.zst ;;
	btrace-tl) make_btrace && row btrace-tl "$TK" convert --to perfetto -j @J -o /dev/null libc.tkbt ;;
	libc-tl) make_libc_pt && ROW_HALVES=1 row libc-tl "$TK" convert --to perfetto -j @J $(cat libc.args) -o /dev/null libc.pt ;;
	*) echo "unknown case: $c" >&2; exit 2 ;;
	esac
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
