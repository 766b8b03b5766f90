#!/usr/bin/env bash
# pprof is byte-identical at every -j: its string table interns the functions found in the
# executed blocks, and the block table's order depends on which worker counted a block
# first. A random walk over libc (many functions) at -j 1 and at -j 4 with chunks of 4 KiB,
# three times (before the block table was sorted for it, about one such run in three
# differed: a guard, not a certain reproduction). The same with the table's slots loaded
# ahead at every size (TK_PROF_SLOTS_MIN=0), and both ways a seam that is not exact is
# repaired.
set -euo pipefail
: "${TK:?}" "${BUILD:?}"
[ -x "$BUILD/tests/ipt-walk-gen" ] || { echo "SKIP: ipt-walk-gen not built (no libipt)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# (under the sanitizers a profile of this walk takes ~10x as long: a smaller walk, one run)
mb=2 runs=3
[ "${TK_SANITIZE:-0}" = 1 ] && mb=1 runs=1
"$BUILD/tests/ipt-walk-gen" walk.pt $mb >walk.args
read -r -a args <walk.args
"$TK" profile -j 1 --to pprof -o one.pb "${args[@]}" walk.pt 2>one.err ||
	{ echo "profile -j 1 failed:"; tail -5 one.err; exit 1; }
fail=0
for ((i = 1; i <= runs; i++)); do
	rm -f four.pb
	if ! TK_IPT_CHUNK=4096 "$TK" profile -j 4 --to pprof -o four.pb "${args[@]}" walk.pt 2>four.err; then
		echo "run $i: profile -j 4 failed:"; tail -5 four.err; fail=1
	elif ! cmp -s one.pb four.pb; then
		echo "run $i: pprof at -j 4 differs from -j 1"; fail=1
	fi
done
# the next calls' table slots loaded ahead (tk_prof_events' shadow stack, on big tables
# only) at every table size: the same bytes, and under the sanitizers no stray access
for j in 1 2; do
	rm -f ahead.pb
	if ! TK_PROF_SLOTS_MIN=0 TK_IPT_CHUNK=65536 "$TK" profile -j $j --to pprof -o ahead.pb \
		"${args[@]}" walk.pt 2>ahead.err; then
		echo "slots ahead, -j $j: profile failed:"; tail -5 ahead.err; fail=1
	elif ! cmp -s one.pb ahead.pb; then
		echo "slots ahead, -j $j: pprof differs from -j 1 without"; fail=1
	fi
done
# Seams that are not exact (every one of a walk's): kept events replayed, or with
# TK_PROF_PROBES=0 the chunk decoded again. TK_PHASES says which way each seam went, so
# both paths are known to have run. TK_PROF_PROBES=1: the first chunks stop keeping their
# events at once when no return was doubtful yet (a program's bet), the same bytes.
# With TK_PROF_PROBES=0 each chunk gives its whole pages of the trace's mapping back once
# decoded (tk_ipt_flow_opts.release_read) and its second decoding reads them again: 64 KiB
# chunks have sixteen pages each (pages that read back as zeros fail both runs).
for run in 65536:4096 0:4096 1:4096 0:65536; do
	probes=${run%:*} chunk=${run#*:}
	rm -f seams.pb
	if ! TK_PHASES=1 TK_PROF_PROBES=$probes TK_IPT_CHUNK=$chunk "$TK" profile -j 2 --to pprof \
		-o seams.pb "${args[@]}" walk.pt 2>seams.err; then
		echo "TK_PROF_PROBES=$probes: profile failed:"; tail -5 seams.err; fail=1; continue
	fi
	cmp -s one.pb seams.pb || { echo "TK_PROF_PROBES=$probes, $chunk-byte chunks: pprof differs from -j 1"; fail=1; }
	line=$(grep '^tracekit: seams:' seams.err) || { echo "no seams line"; fail=1; continue; }
	replayed=$(sed -E 's/.* ([0-9]+) replayed.*/\1/' <<<"$line")
	again=$(sed -E 's/.* ([0-9]+) decoded again.*/\1/' <<<"$line")
	if [ $probes = 65536 ] && [ "$replayed" -lt 1 ]; then
		echo "kept events: no seam replayed ($line)"; fail=1
	elif [ $probes = 0 ] && { [ "$replayed" != 0 ] || [ "$again" -lt 1 ]; }; then
		echo "TK_PROF_PROBES=0, $chunk-byte chunks: want seams decoded again and none replayed ($line)"; fail=1
	fi
done
[ $fail = 0 ] && echo "pprof -j 1 = -j 4: ok ($(stat -c %s one.pb) bytes)"
exit $fail
