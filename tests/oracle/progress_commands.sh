#!/usr/bin/env bash
# Progress of the commands that read their input themselves, not through the chunk
# runner: `stats` of an Intel PT stream (the flow decoder's chunks as
# they merge), `dump` of a Kanata log (the input read in sequence) and its `stats -j 2`
# (the mapped chunks as they merge), `dump` and one-chunk `decode` of an xtrace
# instruction file (its tokens as they are walked), `dump` of an XRay log and of a branch
# trace of 8 threads (one progress over their streams, the whole trace's bytes). Under a
# pseudo-terminal (script -qc, util-linux) each shows at least two progress lines (bytes,
# percent, rate, time left) on stderr; with stderr not a terminal none, unless --progress.
# Each input is doubled until --progress prints 5 lines (nothing in the first second, then
# at most 4 lines a second), whatever the machine's speed (up to 4 GiB: a fast machine
# decodes an xtrace file of 1 GiB within a second), and again if the run under a terminal
# was faster than that.
set -euo pipefail
: "${SRC:?}" "${TK:?}"
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
. "$SRC/tests/tools/lj_trace.sh"
fail=0
lines() { tr '\r' '\n' <"$1" | grep -c "^$2: [0-9.]*% ([0-9]* of [0-9]* MB, [0-9]* MB/s" || true; }
# check INPUT GROW CMD...: GROW makes INPUT twice as large
check() {
	local in=$1 grow=$2 n
	shift 2
	while :; do
		"$TK" "$@" --progress "$in" >/dev/null 2>forced.err || true
		[ "$(lines forced.err "$in")" -ge 5 ] || [ "$(stat -c %s "$in")" -gt $((1 << 32)) ] && break
		$grow
	done
	[ "$(lines forced.err "$in")" -ge 5 ] || { echo "$*: --progress: $(lines forced.err "$in") lines"; fail=1; }
	"$TK" "$@" "$in" >/dev/null 2>notty.err || true
	[ "$(lines notty.err "$in")" = 0 ] || { echo "$*: progress without a terminal:"; head -c 300 notty.err; fail=1; }
	# (a run faster than the --progress one, on a machine whose load just fell, may end
	# within its first second: then a larger input, as above)
	for _ in 1 2 3; do
		script -qec "'$TK' $* '$in' >/dev/null" /dev/null >tty.out || true
		n=$(lines tty.out "$in")
		[ "$n" -ge 2 ] || [ "$(stat -c %s "$in")" -gt $((1 << 32)) ] && break
		$grow
	done
	[ "$n" -ge 2 ] || { echo "$*: under a terminal: $n progress lines:"; tr '\r' '\n' <tty.out | head; fail=1; }
	grep -q 's left)' tty.out || { echo "$*: no time left in the progress lines"; fail=1; }
	echo "$*: $n lines under a terminal, $(stat -c %s "$in") bytes"
}
# (decode and decode --stat advance the same progress, the flow decoder's, as stats: not
# run again here, to keep the test short)
cat lj.pt lj.pt lj.pt lj.pt >big.pt
double_pt() { cat big.pt big.pt >big2.pt && mv big2.pt big.pt; }
check big.pt double_pt stats -j 1 --elf "$work/lj:$bias"
# a Kanata log of N instructions, each fetched, executed and retired
kn=40000
grow_kanata() {
	kn=$((kn * 2))
	awk -v n=$kn 'BEGIN { print "Kanata\t0004"; print "C=\t0"
		for (i = 0; i < n; i++)
			printf "I\t%d\t%d\t0\nL\t%d\t0\tinsn %d\nS\t%d\t0\tF\nC\t1\nE\t%d\t0\tF\nR\t%d\t%d\t0\n", i, i, i, i, i, i, i, i }' >big.kanata
}
grow_kanata
check big.kanata grow_kanata dump
# -j 2 parses chunks of 1 MiB in parallel (the input mapped, not read in sequence)
export TK_KANATA_CHUNK=$((1 << 20))
check big.kanata grow_kanata stats -j 2
unset TK_KANATA_CHUNK
# an xtrace instruction file (tokens only: copies of it follow each other), its snapshots
xt=xtrace.4.1.hint9
cp "$SRC/tests/data/xtrace/$xt.xsnapshot.bin" "$SRC/tests/data/xtrace/$xt.xinsndata.bin" .
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
	cat $xt.xinsndata.bin $xt.xinsndata.bin >x2 && mv x2 $xt.xinsndata.bin
done
double_xt() { cat $xt.xinsndata.bin $xt.xinsndata.bin >x2 && mv x2 $xt.xinsndata.bin; }
cp $xt.xinsndata.bin xt.start
# the snapshots are all at its start: after them, one chunk (--no-disasm: the slowest
# decode that prints is the shortest input)
check $xt.xinsndata.bin double_xt decode --no-disasm
# dump grows from the same start: it is slower per byte than decode, and dumping the
# gigabytes decode needed took minutes
mv xt.start $xt.xinsndata.bin
check $xt.xinsndata.bin double_xt dump
rm -f $xt.*
# a basic-mode XRay log: its header, then its records again and again (2^18 times to start)
basic=$SRC/tests/data/xray/basic-v2.xray
head -c 32 "$basic" >big.xray
tail -c +33 "$basic" >body
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18; do cat body body >b2 && mv b2 body; done
cat body >>big.xray
double_xray() { tail -c +33 big.xray >b2 && cat b2 >>big.xray && rm b2; }
check big.xray double_xray dump
# a branch trace of 8 threads, each with a stream of its own
cat >thr.c <<'EOF'
#include <pthread.h>
#include <stdlib.h>
static long n;
__attribute__((noinline)) int f(int x) { return x % 3 ? x * 2 : x + 1; }
static void *run(void *arg)
{
	volatile int s = 0;
	for (long i = 0; i < n; i++)
		s += f((int)i);
	return arg;
}
int main(int argc, char **argv)
{
	pthread_t t[8];
	n = atol(argv[1]);
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	return 0;
}
EOF
cc -O1 -pthread -o thr thr.c
tn=250000
grow_thr() { tn=$((tn * 2)) && "$TK" record --btrace -q -o thr.tkbt -- ./thr $tn; }
grow_thr
check thr.tkbt grow_thr dump
# the progress is of all the streams (per stream it would be an eighth): read from the
# last run under a terminal, which ran on the file as it is now (check may have doubled it
# after its --progress run: CI saw 387 MB there against 775 MB here)
streams=$("$TK" info thr.tkbt | awk '$1 == "thread" && $4 == "bytes" && $6 == "PT" { s += $3 }
	END { printf "%.0f", s / 1e6 }')
grep -q "of $streams MB" tty.out ||
	{ echo "dump thr.tkbt: no progress of the $streams MB of the 8 streams:"; tr '\r' '\n' <tty.out | head -3; fail=1; }
[ $fail = 0 ] && echo "progress of the commands: ok"
exit $fail
