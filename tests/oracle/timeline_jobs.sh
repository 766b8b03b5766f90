#!/usr/bin/env bash
# Timelines (convert --to perfetto|chrome) at -j 1, 2 and 3 are the same bytes, on inputs
# whose chunks end inside calls. With -j N the writer formats its slices on a thread of its
# own (a Kanata log's reader feeds it through a relay thread, lib/common/relay.c), and
# Intel PT's chunks hold their events thinned (the executed blocks that change
# nothing merged away) until their turn; neither may change a byte.
# - Intel PT of tests/data/seams/lj.c (calls abandoned by longjmp, ended by a return far
#   below them) in chunks of 300 bytes and in one: every chunk starts inside run() and most
#   inside deep(); the Chrome JSON holds as many slices of deep as the program counted, and
#   an end for every begin
# - the same in chunks whose events pass a small budget: workers wait for their chunk's
#   turn, the calling thread (which decodes chunks between its merges) holds its own whole
# - a random walk over libc, whose chunks the pass ahead mostly cannot join at their turn:
#   their events, not kept once the pass ahead used them, decoded again at the merge
# - the branch trace it was converted from; both also against a window over the whole
#   trace (every executed block sent, where without one the walker counts them)
# - a real XRay FDR log with 1 KiB buffers (calls open across buffers and chunks), and in
#   held chunks of 4 KiB
# - a Kanata log with instructions in flight across every chunk (its timelines and its
#   report page)
# For the XRay log (three threads), the Kanata log (pipeline tracks) and the branch trace,
# the Perfetto and Chrome timelines hold the same slices (tests/tools/timeline_pair.py):
# Perfetto's times are deltas per packet sequence and its names interned per sequence,
# state the formatter keeps apart from the pass.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# begins and ends in a Chrome JSON timeline, and the begins named $2
cat >count.py <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
b = sum(1 for e in ev if e.get("ph") == "B")
e = sum(1 for e in ev if e.get("ph") == "E")
n = sum(1 for e in ev if e.get("ph") == "B" and e.get("name") == sys.argv[2])
print(b, e, n)
EOF

# LABEL REF ENV INPUT OPTIONS...: -j 1, 2 and 3 (with ENV, e.g. a chunk size) write what
# REF's command wrote, for both timelines
same() {
	local label=$1 ref=$2 env=$3 in=$4 to j
	shift 4
	for to in perfetto chrome; do
		# shellcheck disable=SC2086
		env $ref "$TK" convert --to $to -j 1 -q -o want.$to "$@" "$in"
		[ -s want.$to ] || { bad "$label --to $to: nothing written"; continue; }
		for j in 1 2 3; do
			# shellcheck disable=SC2086
			# (a wait that never ends fails here, not at ctest's timeout)
			if ! env $env timeout 300 "$TK" convert --to $to -j $j -q -o got.$to "$@" "$in"; then
				bad "$label --to $to -j $j: failed"
			elif cmp -s want.$to got.$to; then ok "$label --to $to -j $j: same bytes"
			else bad "$label --to $to -j $j: differs"; fi
		done
	done
}

# LABEL [TICKS_PER_SECOND]: the last want.perfetto and want.chrome, the same slices
pair() {
	if protoc --decode=perfetto.Trace -I "$SRC/tests/tools" "$SRC/tests/tools/perfetto_trace.proto" \
		<want.perfetto >want.txt && python3 "$SRC/tests/tools/timeline_pair.py" want.txt want.chrome ${2:+"$2"}
	then ok "$1: Perfetto and Chrome timelines agree"
	else bad "$1: Perfetto and Chrome timelines differ"; fi
}

cc -O1 -o lj "$SRC/tests/data/seams/lj.c"
ndeep=$("$TK" record --btrace -o lj.tkbt -- ./lj 2>rec.err) || { echo "record failed"; cat rec.err; exit 1; }
bias=$("$TK" info lj.tkbt | awk -v m="$W/lj" '$1 == "module" && $2 == m {
	for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }')
[ -n "$bias" ] || { echo "no load bias for lj"; "$TK" info lj.tkbt; exit 1; }
"$TK" convert --to ipt -q -o lj.pt lj.tkbt
npsb=$("$TK" dump --no-offset lj.pt | grep -c '^psb$' || true)
[ "$npsb" -ge 10 ] || { echo "only $npsb PSBs: too few seams to test"; exit 1; }
same "Intel PT, 300-byte chunks" TK_IPT_CHUNK=1000000000 TK_IPT_CHUNK=300 lj.pt --elf "lj:$bias"
same "Intel PT, default chunks" TK_IPT_CHUNK=1000000000 TK_NONE=1 lj.pt --elf "lj:$bias"
# chunks past a budget of 50 events wait for their turn on a worker, and are held whole on
# the calling thread, which decodes chunks too (it must never wait for its own merges)
same "Intel PT, 300-byte chunks over the event budget" TK_IPT_CHUNK=1000000000 \
	"TK_IPT_CHUNK=300 TK_IPT_EV_BUDGET=50" lj.pt --elf "lj:$bias"
read -r b e n < <(python3 count.py want.chrome deep)
if [ "$n" = "$ndeep" ] && [ "$b" = "$e" ] && [ "$b" -gt "$n" ]; then
	ok "Intel PT: $n slices of deep (the program counted $ndeep), $b begins and ends"
else bad "Intel PT: $n slices of deep, the program counted $ndeep; $b begins, $e ends"; fi
# a random walk over libc: most chunks' guesses fail at their turn, after their held
# events were let go as the pass ahead used them (lean holds): each such chunk is decoded
# again at its merge (and past sixteen the pass ahead stops)
if [ -x "${BUILD:-}/tests/ipt-walk-gen" ]; then
	"$BUILD/tests/ipt-walk-gen" walk.pt 1 >walk.args
	read -r -a wargs <walk.args
	same "Intel PT random walk" TK_NONE=1 TK_NONE=1 walk.pt "${wargs[@]}"
	same "Intel PT random walk, 4 KiB chunks" TK_NONE=1 TK_IPT_CHUNK=4096 walk.pt "${wargs[@]}"
else
	echo "skip: random walk (ipt-walk-gen not built)"
fi
same "branch trace" TK_NONE=1 TK_NONE=1 lj.tkbt
pair "branch trace" "$("$TK" info lj.tkbt | awk '$1 == "TSC" && $3 == "ticks/s" { print $2; exit }')"
# in parts of about 600 bytes: at -j 2 and 3 the next part is joined on a thread of its
# own while one decodes, two buffers in turn
same "branch trace in parts" TK_NONE=1 TK_IPT_CHUNK=600 lj.tkbt
same "branch trace in parts over the event budget" TK_NONE=1 \
	"TK_IPT_CHUNK=600 TK_IPT_EV_BUDGET=50" lj.tkbt
# threads one after another: the next thread's first part is joined while the last part of
# the one before is decoded
cc -O1 -pthread -o thr "$SRC/tests/data/btrace/threads.c"
"$TK" record --btrace -q -o thr.tkbt -- ./thr >/dev/null
[ "$("$TK" info thr.tkbt | awk '$1 == "thread" { n++ } END { print n + 0 }')" -ge 2 ] ||
	bad "the threads' recording has fewer than two threads"
same "branch trace of threads in parts" TK_NONE=1 TK_IPT_CHUNK=600 thr.tkbt
# without a window the walker counts executed blocks instead of sending them (the timeline
# reads only calls and returns); a window over the whole trace sends every block, one by
# one, to the same slices
for in in lj.pt lj.tkbt; do
	for j in 1 2; do
		"$TK" convert --to chrome -j $j -q -o counted.chrome --elf "lj:$bias" $in
		"$TK" convert --to chrome -j $j -q -o each.chrome --time 1:18446744073709551614 \
			--elf "lj:$bias" $in
		if [ -s counted.chrome ] && cmp -s counted.chrome each.chrome; then
			ok "$in -j $j: blocks counted in the walker, the same bytes as sent one by one"
		else bad "$in -j $j: counted blocks change the timeline"; fi
	done
done

if command -v clang-16 >/dev/null; then
	clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 \
		"$SRC/tests/data/xray/xray_prog.c" -o prog -lpthread
	XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" \
		./prog fdr 2 20 >/dev/null 2>&1
	log=$(ls -1 real-prog.* | head -n 1)
	same "XRay FDR" TK_NONE=1 TK_NONE=1 "$log" --instr-map prog
	# held chunks of 4 KiB: at -j 2 each passed ahead on the decoding threads and
	# formatted at its turn on the calling thread, at -j 3 on the writer's threads
	same "XRay FDR, 4 KiB chunks held" TK_NONE=1 TK_XRAY_CHUNK=4096 "$log" --instr-map prog
	pair "XRay FDR" "$("$TK" info "$log" | awk '$1 == "frequency:" { print $2 }')"
	read -r b e n < <(python3 count.py want.chrome fib)
	if [ "$b" = "$e" ] && [ "$n" -gt 0 ]; then ok "XRay: $b begins and ends, $n of fib"
	else bad "XRay: $b begins, $e ends, $n of fib"; fi
else
	echo "skip: real XRay log (no clang-16)"
fi

python3 "$SRC/bench/kanata-inflight.py" 1 big.log >/dev/null
head -n 40000 big.log >inflight.log
same "Kanata" TK_NONE=1 TK_NONE=1 inflight.log
pair "Kanata"
# the Kanata report's page goes through the same relay at -j N
"$TK" report -j 1 -q -o want.html inflight.log
for j in 2 3; do
	"$TK" report -j $j -q -o got.html inflight.log
	if cmp -s want.html got.html; then ok "Kanata report -j $j: same bytes"
	else bad "Kanata report -j $j: differs"; fi
done

exit $fail
