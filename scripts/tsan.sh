#!/usr/bin/env bash
# ThreadSanitizer over tracekit's parallel paths: `make tsan` (part of `make test`) builds
# build-tsan (clang-16, -DTK_TSAN=ON) and runs this on it (or: scripts/tsan.sh BUILD_DIR).
# Each command runs at -j 2 into a pipe, at -j 3 into a file and at -j 2 into /dev/null
# with --progress, on small inputs made here:
# - Intel PT: tests/data/seams/lj.c recorded with record --btrace, as a raw trace (decode
#   with and without --no-disasm, --stat, profile, convert --to pprof (and to perfetto
#   past a budget of 50 events: waits for turns, the calling thread decoding); chunks of the
#   default size and of 4 KiB) and as perf.data of exactly adjacent snapshots
#   (tests/oracle/ipt_perf.sh's case)
# - the hostile TNT stream of tests/oracle/ipt_decode_memory.sh: each 4 KiB chunk makes
#   ~12 MB of text, so workers wait for their turn and hand their text on themselves
# - the branch trace itself (profile, convert --to perfetto: its parts on the pool)
# - XRay FDR logs (profile, --to account, convert --to perfetto; a real log of 1 KiB
#   buffers, whose timeline holds its chunks' events) and a Kanata log of 600 KB
#   in small chunks (stats, info; report and convert --to chrome: the decoder's chunks),
#   and gzipped (convert --to chrome: the relay's thread; stats, report, check of a log
#   cut short: decompressed ahead on a thread of its own, or read in chunks off the stream
#   in turn by the jobs); PT
#   convert --to perfetto|chrome too (the timeline's formatter thread); a Kanata timeline
#   of 36,000 labels (the names' helper thread); a gem5 log's stats and report (its
#   converter's thread)
# - a generated xtrace of 30 MB, four snapshots (dump -q, convert --to chrome)
# - one decode with the progress line on a terminal (script -qc)
# Fails on any ThreadSanitizer report, or on an output that differs from -j 1's.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-tsan}
[ -x "$build/tracekit" ] || { echo "no $build/tracekit: make tsan builds it"; exit 1; }
build=$(cd "$build" && pwd)
tk=$build/tracekit
export TK_BTRACE_LIB=$build/recorder/btrace/libtkbtrace.so
# exitcode 66: a report fails the command even where the output is right
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 history_size=4 ${TSAN_OPTIONS:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

cc -O1 -o lj "$src/tests/data/seams/lj.c"
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
TK_BTRACE_CALL_TIMES=0 "$tk" record --btrace -o lj.tkbt --module main --module "$libc" -- ./lj \
	>/dev/null 2>rec.err || { echo "record failed"; cat rec.err; exit 1; }
"$tk" convert --to ipt -q -o lj.pt lj.tkbt
modargs=() elfargs=()
for m in $("$tk" info lj.tkbt | awk '$1 == "module" {
	for (i = 3; i < NF; i++) if ($i == "bias") printf "%s:%s ", $2, $(i + 1) }'); do
	modargs+=(--module "$m") elfargs+=(--elf "$m")
done
python3 "$src/tests/tools/mkperf.py" adj.data --queue 0:4242:lj.pt --snapshot 8192:8192 "${modargs[@]}"
python3 "$src/tests/tools/hostile_tnt.py" .
bash "$src/bench/kanata-gen.sh" "$src/tests/data/kanata/kanata-sample-1.log" 3000 k.log
python3 "$src/bench/xtrace-gen.py" xt 30 >/dev/null
xt=$(ls xt/*.xinsndata.bin)

fails=0
# check NAME CMD...: -j 1's output against -j 2's (pipe) and -j 3's (file); -j 2 into
# /dev/null with --progress: its exit status (0 or 1) and reports only
check() {
	local name=$1 rc=0 r
	shift
	set +e
	"$tk" "$@" -j 1 >"$name.1" 2>"$name.err1"
	r=$?; [ $r -le 1 ] || rc=$r
	"$tk" "$@" -j 2 2>"$name.err2" | cat >"$name.2"
	r=${PIPESTATUS[0]}; [ $r -le 1 ] || rc=$r
	"$tk" "$@" -j 3 >"$name.3" 2>"$name.err3"
	r=$?; [ $r -le 1 ] || rc=$r
	"$tk" "$@" --progress -j 2 >/dev/null 2>"$name.errp"
	r=$?; [ $r -le 1 ] || rc=$r
	set -e
	if grep -q 'WARNING: ThreadSanitizer' "$name".err*; then
		echo "$name: ThreadSanitizer reports"
		grep -h -A30 'WARNING: ThreadSanitizer' "$name".err* | head -60
		fails=$((fails + 1))
	elif [ $rc != 0 ] || ! cmp -s "$name.1" "$name.2" || ! cmp -s "$name.1" "$name.3"; then
		echo "$name: exit $rc, or -j 2 or -j 3 differs from -j 1"
		head -5 "$name".err*
		fails=$((fails + 1))
	fi
}
for chunk in "" 4096; do
	export TK_IPT_CHUNK=$chunk
	[ -n "$chunk" ] || unset TK_IPT_CHUNK
	check "raw$chunk" decode --no-disasm "${elfargs[@]}" lj.pt
	check "raw-disasm$chunk" decode "${elfargs[@]}" lj.pt
	check "raw-stat$chunk" decode --stat "${elfargs[@]}" lj.pt
	check "raw-profile$chunk" profile "${elfargs[@]}" lj.pt
	check "raw-pprof$chunk" convert --to pprof -o /dev/stdout "${elfargs[@]}" lj.pt
	check "raw-perfetto$chunk" convert --to perfetto -o /dev/stdout "${elfargs[@]}" lj.pt
	check "raw-chrome$chunk" convert --to chrome -o /dev/stdout "${elfargs[@]}" lj.pt
	# past a small event budget: workers wait for their chunk's turn and hand it on
	# themselves; the calling thread decodes chunks between its merges and holds its own
	TK_IPT_EV_BUDGET=50 check "raw-perfetto-budget$chunk" convert --to perfetto -o /dev/stdout \
		"${elfargs[@]}" lj.pt
	check "adj$chunk" decode --no-disasm adj.data
	check "adj-time$chunk" decode --time adj.data
	# the branch trace itself: one part on the flow decoder's workers, or parts of a
	# piece each on the pool (their checksums checked there first); its timeline part
	# after part, the next joined on a thread of its own
	check "btrace-profile$chunk" profile lj.tkbt
	check "btrace-perfetto$chunk" convert --to perfetto -o /dev/stdout lj.tkbt
	TK_IPT_EV_BUDGET=50 check "btrace-perfetto-budget$chunk" convert --to perfetto \
		-o /dev/stdout lj.tkbt
	# dump: chunks cut at PSBs walked at once, their text and errors merged in order
	check "raw-dump$chunk" dump lj.pt
	check "btrace-dump$chunk" dump lj.tkbt
done
TK_IPT_CHUNK=4096 check hostile decode --no-disasm --raw loop.bin:0x1000 hostile.pt
for f in fdr-v3 fdr-v4; do
	check "$f" profile "$src/tests/data/xray/$f.xray"
	check "$f-account" profile --to account "$src/tests/data/xray/$f.xray"
	check "$f-perfetto" convert --to perfetto -o /dev/stdout "$src/tests/data/xray/$f.xray"
	TK_XRAY_CHUNK=64 check "$f-dump" dump "$src/tests/data/xray/$f.xray"
	# (a chunk whose turn has come writing its own text, every 16 bytes of it)
	TK_XRAY_CHUNK=64 TK_BUFS_STREAM=16 check "$f-dump-stream" dump "$src/tests/data/xray/$f.xray"
	# YAML: blocks taken off the merge by the calling thread, formatted by it and a worker
	# (at -j 3 the workers also expand the threads' next buffers for the merge)
	TK_XRAY_YAML_BLOCK=3 check "$f-yaml" convert --to xray-yaml -o /dev/stdout "$src/tests/data/xray/$f.xray"
done
# a real FDR log of 1 KiB buffers: its timeline's chunks decoded whole and held
clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$src/tests/data/xray/xray_prog.c" \
	-o xprog -lpthread
XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" ./xprog fdr 2 20 \
	>/dev/null 2>&1
check "xray-held-perfetto" convert --to perfetto -o /dev/stdout --instr-map xprog "$(ls real-xprog.* | head -n 1)"
TK_XRAY_CHUNK=4096 check "xray-held-4k-perfetto" convert --to perfetto -o /dev/stdout --instr-map xprog \
	"$(ls real-xprog.* | head -n 1)"
TK_XRAY_CHUNK=4096 check "xray-real-dump" dump "$(ls real-xprog.* | head -n 1)"
TK_XRAY_YAML_BLOCK=64 check "xray-real-yaml" convert --to xray-yaml -o /dev/stdout --instr-map xprog "$(ls real-xprog.* | head -n 1)"
# (chunk 0's merge and the later chunks' workers: the race fixed in merge_one showed in
# about half of the runs at these sizes)
for chunk in 4096 8192 16384 65536; do
	TK_KANATA_CHUNK=$chunk check "kanata$chunk" stats k.log
	TK_KANATA_CHUNK=$chunk check "kanata-chrome$chunk" convert --to chrome -o /dev/stdout k.log
	TK_KANATA_CHUNK=$chunk check "kanata-info$chunk" info k.log
	TK_KANATA_CHUNK=$chunk check "kanata-dump$chunk" dump k.log
	# the decoder in chunks: each chunk's events held, merged into the report in order
	TK_KANATA_CHUNK=$chunk check "kanata-report$chunk" report -o /dev/stdout k.log
done
# a compressed log is read in order, the timeline's pass on the relay's thread
gzip -k k.log
check "kanata-chrome-gz" convert --to chrome -o /dev/stdout k.log.gz
# ... decompressed ahead on a thread of its own (blocks of 1 MiB: a log of four), and cut
# short: the cut found on that thread, told on the reader's
bash "$src/bench/kanata-gen.sh" "$src/tests/data/kanata/kanata-sample-1.log" 20000 k4.log
gzip -k k4.log
head -c $(($(stat -c %s k4.log.gz) * 3 / 4)) k4.log.gz >k4cut.log.gz
check "kanata-stats-gz" stats k4.log.gz
check "kanata-report-gz" report -o /dev/stdout k4.log.gz
check "kanata-check-cut-gz" check k4cut.log.gz
# ... read in chunks off the stream in turn by their jobs (a compressed log of a chunk or
# more), and cut short: the statistics read again in order, the report's last chunk ending
# at the cut
for chunk in 8192 65536; do
	TK_KANATA_CHUNK=$chunk check "kanata-stats-gz$chunk" stats k4.log.gz
	TK_KANATA_CHUNK=$chunk check "kanata-check-cut-gz$chunk" check k4cut.log.gz
	TK_KANATA_CHUNK=$chunk check "kanata-report-gz$chunk" report -o /dev/stdout k4.log.gz
	TK_KANATA_CHUNK=$chunk check "kanata-report-cut-gz$chunk" report -o /dev/stdout k4cut.log.gz
done
# a gem5 log's statistics and report: converted on a thread into a pipe that they read
check "gem5-stats" stats "$src/tests/data/kanata/gem5-2cpu.txt"
check "gem5-report" report -o /dev/stdout "$src/tests/data/kanata/gem5-2cpu.txt"
# a Kanata timeline of 36,000 distinct labels: the names' next map made and their next
# block populated by a helper thread (from 28,672 names on)
python3 "$src/bench/kanata-inflight.py" 5 kin.log
check "kanata-perfetto-names" convert --to perfetto -o /dev/stdout kin.log
# xtrace: chunks between snapshots on the pool (dump's parts, the timeline's held events)
check "xtrace-dump" dump -q "$xt"
check "xtrace-chrome" convert --to chrome -o /dev/stdout "$xt"
# the progress line drawn on a terminal (stdout a file)
script -qc "$(printf '%q ' "$tk" decode -j 2 --progress -o pty.txt "${elfargs[@]}" lj.pt)" \
	/dev/null >pty.log </dev/null || true
if grep -q 'WARNING: ThreadSanitizer' pty.log || ! cmp -s pty.txt raw-disasm.1; then
	echo "decode with progress on a terminal: reports, or not -j 1's output"
	head -60 pty.log
	fails=$((fails + 1))
fi
[ $fails = 0 ] || { echo "tsan: $fails cases failed"; exit 1; }
echo "tsan: all cases clean"
