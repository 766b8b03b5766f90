#!/usr/bin/env bash
# XRay against llvm-xray-16 and against ground truth, on logs made now by a real
# XRay-instrumented program (tests/data/xray/xray_prog.c) in basic and FDR mode.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 \
	"$SRC/tests/data/xray/xray_prog.c" -o prog -lpthread
export XRAY_BASIC_OPTIONS="func_duration_threshold_us=0"

# run NAME MODE THREADS ITERS [wrap]: leaves the log(s) as NAME-prog.*
run() {
	local name=$1 mode=$2
	shift 2
	if [ "$mode" = basic ]; then
		XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic xray_logfile_base=./$name-" \
			./prog basic "$@" 2>/dev/null
	else
		XRAY_OPTIONS="patch_premain=false xray_logfile_base=./$name-" ./prog fdr "$@" 2>/dev/null
	fi
}
one() { ls -1 "$1"-prog.* | head -n 1; }

run st-basic basic 0 40
run st-fdr fdr 0 40
run mt-basic basic 3 60
run mt-fdr fdr 3 60
XRAY_FDR_BUF=1024 run big-fdr fdr 0 400
XRAY_FDR_BUF=1024 run bigmt-fdr fdr 2 300
run wrap fdr 0 30 wrap

# 1. YAML record for record, and fdr-dump, equal to llvm-xray's.
for log in st-basic st-fdr mt-basic mt-fdr big-fdr; do
	f=$(one $log)
	llvm-xray-16 convert -f yaml "$f" >ref.yaml
	"$TK" convert --to xray-yaml "$f" >out.yaml
	if cmp -s ref.yaml out.yaml; then ok "$log yaml ($(grep -c '^  - ' out.yaml) records)"
	else bad "$log yaml differs"; diff ref.yaml out.yaml | head -5; fi
	# in blocks of 7 merged records formatted at once, as -j N does on any machine
	TK_XRAY_YAML_BLOCK=7 "$TK" convert --to xray-yaml -j 2 "$f" >out.yaml
	cmp -s ref.yaml out.yaml && ok "$log yaml in blocks" || bad "$log yaml in blocks differs"
	llvm-xray-16 convert -y -m prog -f yaml "$f" >ref.yaml
	"$TK" convert --instr-map prog "$f" >out.yaml
	cmp -s ref.yaml out.yaml && ok "$log symbolised yaml" || bad "$log symbolised yaml differs"
	TK_XRAY_YAML_BLOCK=7 "$TK" convert --instr-map prog -j 3 "$f" >out.yaml
	cmp -s ref.yaml out.yaml && ok "$log symbolised yaml in blocks" ||
		bad "$log symbolised yaml in blocks differs"
done
for log in st-fdr mt-fdr big-fdr; do
	f=$(one $log)
	llvm-xray-16 fdr-dump "$f" >ref.dump
	"$TK" dump --no-offset "$f" | tail -n +2 >out.dump
	cmp -s ref.dump out.dump && ok "$log dump" || bad "$log dump differs"
done

# 1b. A log of many short-lived threads: bigmt-fdr with every buffer's thread id made its
# own (hundreds of threads, one buffer each). The merge by TSC expands a thread's first
# buffer only when its lowest TSC comes up; the YAML must still be llvm-xray's, at -j 1
# and with buffers expanded ahead (-j 3).
f=$(one bigmt-fdr)
"$TK" dump "$f" | awk '/<Thread ID:/ { print $1 }' >tids
python3 - "$f" tids many.xray <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
offs = [int(l, 16) for l in open(sys.argv[2])]
for k, o in enumerate(offs):
    assert d[o] == 0x01, hex(o)                  # a NewBuffer metadata record
    d[o + 1:o + 5] = struct.pack('<i', 100000 + k)
open(sys.argv[3], 'wb').write(d)
print(len(offs))
PY
llvm-xray-16 convert -f yaml many.xray >ref.yaml
n=$(grep -c '^  - ' ref.yaml)
"$TK" convert --to xray-yaml many.xray >out.yaml 2>/dev/null || true
cmp -s ref.yaml out.yaml && ok "many-thread yaml ($(wc -l <tids) threads, $n records)" ||
	{ bad "many-thread yaml differs"; diff ref.yaml out.yaml | head -5; }
TK_XRAY_YAML_BLOCK=7 "$TK" convert --to xray-yaml -j 3 many.xray >out.yaml 2>/dev/null || true
cmp -s ref.yaml out.yaml && ok "many-thread yaml, -j 3" || bad "many-thread yaml, -j 3 differs"

# 2. account: counts, min, median, 90p, 99p, max and sums equal llvm-xray account on
# single-thread logs it reads.
for log in st-basic st-fdr; do
	f=$(one $log)
	llvm-xray-16 account -m prog -format=csv "$f" | tail -n +2 | cut -d, -f1-8 | sort >ref.acc
	"$TK" profile --to account-csv "$f" | tail -n +2 | cut -d, -f1-8 | sort >out.acc
	[ -s ref.acc ] && cmp -s ref.acc out.acc && ok "$log account counts, percentiles, sums" ||
		{ bad "$log account differs"; diff ref.acc out.acc | head; }
done

# 3. Ground truth where llvm-xray fails. Per thread, work() runs ITERS iterations of
# tailer (tail call into leaf), witharg and fib(6); so leaf, tailer and witharg are called
# ITERS times per thread and work once; fib's count per fib(6) comes from the basic log.
counts() { "$TK" profile --instr-map prog --to account-csv "$1" | tail -n +2 | awk -F, '$9 ~ /^(fib|leaf|tailer|witharg|work)$/ {print $9 "," $2}' | sort; }
expect() { # threads iters fib_per_iter
	local t=$1 n=$2 c=$3
	printf 'fib,%d\nleaf,%d\ntailer,%d\nwitharg,%d\nwork,%d\n' $((t * n * c)) $((t * n)) \
		$((t * n)) $((t * n)) "$t" | sort
}
fibc=$(counts "$(one st-basic)" | awk -F, '$1=="fib"{print $2 / 40}')
[ "$fibc" -gt 1 ] && ok "fib calls per fib(6): $fibc" || bad "fib count"
counts "$(one st-basic)" >a; expect 1 40 "$fibc" >b
cmp -s a b && ok "st-basic counts = ground truth" || bad "st-basic counts"
counts "$(one mt-basic)" >a; expect 4 60 "$fibc" >b
cmp -s a b && ok "mt-basic counts = ground truth" || { bad "mt-basic counts"; diff a b; }
counts "$(one mt-fdr)" >a
cmp -s a b && ok "mt-fdr counts = ground truth = basic-mode log" || { bad "mt-fdr counts"; diff a b; }
# llvm-xray account reads the same log once it is converted to a TSC-sorted raw log (its
# raw writer keeps the FDR header, so the header is set to basic mode v3 by hand)
llvm-xray-16 convert -f raw --sort -o mt.raw "$(one mt-fdr)"
printf '\x03\x00\x00\x00' | dd of=mt.raw conv=notrunc bs=1 count=4 2>/dev/null
llvm-xray-16 account -format=csv mt.raw | tail -n +2 | cut -d, -f1-8 | sort >c
"$TK" profile --to account-csv "$(one mt-fdr)" | tail -n +2 | cut -d, -f1-8 | sort >d
[ -s c ] && cmp -s c d && ok "mt-fdr account (counts, percentiles, sums) = llvm-xray account on the sorted raw log" ||
	{ bad "mt-fdr vs sorted raw"; diff c d; }
if llvm-xray-16 account -m prog "$(one mt-fdr)" >/dev/null 2>&1; then
	echo "note: llvm-xray account read the multi-thread log"
else ok "llvm-xray account fails on the multi-thread FDR log; tracekit does not"; fi
# more than 16 buffers per thread: llvm-xray orders them with a broken comparator
nb=$("$TK" info "$(one big-fdr)" | awk '/buffers:/{print $2}')
[ "$nb" -gt 16 ] && ok "big-fdr has $nb buffers in one thread" || bad "big-fdr buffers $nb"
counts "$(one big-fdr)" >a; expect 1 400 "$fibc" >b
cmp -s a b && ok "big-fdr counts = ground truth" || { bad "big-fdr counts"; diff a b; }
if llvm-xray-16 account -m prog "$(one big-fdr)" >ref.txt 2>&1; then
	grep -q "^ *1 *$((400 * fibc)) " ref.txt && echo "note: llvm-xray account got this one right" ||
		ok "llvm-xray account miscounts the >16-buffer log"
else ok "llvm-xray account fails on the >16-buffer log (buffer order)"; fi
counts "$(one bigmt-fdr)" >a; expect 3 300 "$fibc" >b
cmp -s a b && ok "bigmt-fdr counts = ground truth" || { bad "bigmt-fdr counts"; diff a b; }
# our buffer order keeps every thread's TSCs monotonic (-j 1 and -j 2 identical)
"$TK" convert --to chrome -j 1 "$(one bigmt-fdr)" >c1.json
"$TK" convert --to chrome -j 2 "$(one bigmt-fdr)" >c2.json
cmp -s c1.json c2.json && ok "chrome -j1 = -j2" || bad "chrome -j1 != -j2"
python3 - "$(one bigmt-fdr)" <<PY || bad "per-thread TSC order"
import subprocess, sys
out = subprocess.run(["$TK", "convert", "--to", "xray-yaml", sys.argv[1]], capture_output=True, text=True).stdout
last = {}
for line in out.splitlines():
    if not line.startswith("  - {"): continue
    f = dict(kv.split(": ", 1) for kv in line[5:-2].split(", ") if ": " in kv)
    t, tsc = f["thread"], int(f["tsc"])
    assert tsc >= last.get(t, 0), "thread %s goes back in time" % t
    last[t] = tsc
print("ok: per-thread TSCs monotonic over", len(last), "threads")
PY
for log in mt-fdr bigmt-fdr; do
	for to in "--threads" "--to pprof" "--to calltree" "--to json" "--to account-csv"; do
		# shellcheck disable=SC2086
		"$TK" profile -j 1 $to "$(one $log)" >p1
		# shellcheck disable=SC2086
		"$TK" profile -j 2 $to "$(one $log)" >p2
		cmp -s p1 p2 && ok "$log profile $to -j1 = -j2" || bad "$log profile $to -j1 != -j2"
	done
done

# 4. Ring-wrapped log: decodes fully, orphan exits counted and reported, exit status 1.
f=$(ls -1t wrap-prog.* | head -n 1)
set +e
"$TK" profile --to account --instr-map prog "$f" >wrap.out 2>wrap.err
st=$?
set -e
[ $st -eq 1 ] && grep -q "exits without their enters" wrap.err && grep -q "^ *1 .* fib" wrap.out &&
	ok "wrapped log: status 1, orphans reported, profile complete" ||
	{ bad "wrapped log (status $st)"; cat wrap.err; }
"$TK" info "$f" >info.out 2>/dev/null || true; grep -q "orphan exits:" info.out && ok "info shows orphan exits" || bad "info orphans"
set +e; "$TK" convert "$f" >out.yaml 2>/dev/null; set -e
llvm-xray-16 convert -f yaml "$f" >ref.yaml
cmp -s ref.yaml out.yaml && ok "wrapped log yaml = llvm-xray" || bad "wrapped yaml differs"

# 5. The YAML instrumentation map names functions like the ELF one.
llvm-xray-16 extract --symbolize prog >map.yaml
"$TK" profile --instr-map map.yaml "$(one st-fdr)" >m1
"$TK" profile --instr-map prog "$(one st-fdr)" >m2
cmp -s m1 m2 && grep -q witharg m1 && ok "YAML map = ELF map" || bad "YAML map"

# 6. record --xray runs a program in basic mode and collects its log.
"$TK" record --xray -o rec.xray -- ./prog basic 0 5 2>/dev/null
grep -q "basic, version" <("$TK" info rec.xray) && ok "record --xray" || bad "record --xray"

# 7. Read through a pipe (held in memory, not a file mapping whose pages can be given
# back): the same table, YAML and dump as from the file.
f=$(one bigmt-fdr)
"$TK" profile --to account-csv "$f" >file.acc
"$TK" profile --to account-csv <(cat "$f") >pipe.acc
"$TK" convert --to xray-yaml "$f" >file.yaml
"$TK" convert --to xray-yaml <(cat "$f") >pipe.yaml
"$TK" dump "$f" >file.dump
"$TK" dump <(cat "$f") >pipe.dump
[ -s file.acc ] && cmp -s file.acc pipe.acc && cmp -s file.yaml pipe.yaml &&
	cmp -s file.dump pipe.dump &&
	ok "pipe input = file input" || bad "pipe input differs from file input"

[ $fail -eq 0 ] && echo "xray oracle: all passed"
exit $fail
