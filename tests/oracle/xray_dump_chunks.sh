#!/usr/bin/env bash
# dump -j N of XRay: chunks of whole buffers (FDR version 2 on) or records (basic mode)
# dumped at once, each walk going on until it stands at a later chunk's start outside any
# buffer. The text, the warnings on stderr and the exit status must be -j 1's for every log
# of tests/data/xray (versions 1 to 5, basic mode, both byte orders, damaged ones), in
# chunks of 16 to 4000 bytes, and for a real FDR log of 1 KiB buffers from four threads;
# and a write that fails is said as -j 1 says it, by the merge or by a chunk whose turn has
# come writing its own text.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=("$SRC"/tests/data/xray/*.xray)
clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$SRC/tests/data/xray/xray_prog.c" \
	-o "$work/xprog" -lpthread
(cd "$work" && XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" \
	./xprog fdr 4 20 >/dev/null 2>&1)
logs+=("$(ls "$work"/real-xprog.* | head -n 1)")
parallel=0
for f in "${logs[@]}"; do
	for opt in "" --no-offset -q; do
		want_rc=0; "$TK" dump -j 1 $opt "$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
		# (STREAM: a chunk whose turn has come writes its text every STREAM bytes; 0: 1 MiB)
		for run in "2 16 0" "3 100 64" "2 4000 1"; do
			read -r j chunk stream <<<"$run"
			rc=0; TK_XRAY_CHUNK=$chunk TK_BUFS_STREAM=$stream TK_PHASES=1 "$TK" dump -j "$j" $opt "$f" >"$work/got" \
				2>"$work/got.err" || rc=$?
			grep -q '[2-9][0-9]* jobs in' "$work/got.err" && parallel=$((parallel + 1))
			grep -v '^tracekit: phases' "$work/got.err" >"$work/got.msg" || true
			[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" &&
				cmp -s "$work/want.err" "$work/got.msg" ||
				{ echo "$(basename "$f"): dump -j $j $opt in chunks of $chunk (stream $stream) differs (exit $rc, -j 1 $want_rc)"
				  diff "$work/want" "$work/got" | head -5 || true
				  diff "$work/want.err" "$work/got.msg" | head -5 || true; exit 1; }
		done
	done
done
# a failed write is the output's to say, in chunks as in order: exit 4, not "unreadable"
# (a log of 64 KiB buffers, chunks whose text is written as it is merged)
(cd "$work" && XRAY_FDR_BUF=65536 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./big-" \
	./xprog fdr 4 2000 >/dev/null 2>&1)
big=$(ls "$work"/big-xprog.* | head -n 1)
for run in "1 0" "2 0" "2 4096"; do
	read -r j stream <<<"$run"
	rc=0; TK_XRAY_CHUNK=200000 TK_BUFS_STREAM=$stream "$TK" dump -j $j -o /dev/full "$big" 2>"$work/full.err" || rc=$?
	[ "$rc" = 4 ] && grep -q 'write failed' "$work/full.err" && ! grep -q 'not a readable' "$work/full.err" ||
		{ echo "dump -j $j into /dev/full: exit $rc"; cat "$work/full.err"; exit 1; }
done
# most logs were dumped in chunks (version 1's are read in order)
[ "$parallel" -ge 100 ] || { echo "only $parallel runs in chunks"; exit 1; }
echo "xray dump chunks: ok ($parallel runs in chunks)"
