#!/usr/bin/env bash
# convert --to xray-yaml -j N: the merged records are taken off the merge in blocks and
# formatted at once. The YAML, the messages on stderr and the exit status must be -j 1's
# for every log of tests/data/xray (versions 1 to 5, basic mode, both byte orders, damaged
# ones) in blocks of 1 to 1000 records, with and without an instrumentation map, and for a
# real FDR log of four threads (at -j 3 and 4 the workers expand the threads' next
# buffers ahead of the merge); a write that fails is said as -j 1 says it.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=("$SRC"/tests/data/xray/*.xray)
clang-16 -O1 -fxray-instrument -fxray-instruction-threshold=1 "$SRC/tests/data/xray/xray_prog.c" \
	-o "$work/xprog" -lpthread
(cd "$work" && XRAY_FDR_BUF=1024 XRAY_OPTIONS="patch_premain=false xray_logfile_base=./real-" \
	./xprog fdr 4 20 >/dev/null 2>&1)
real=$(ls "$work"/real-xprog.* | head -n 1)
logs+=("$real")
blocked=0
for f in "${logs[@]}"; do
	maps=("")
	[ "$f" = "$real" ] && maps+=("--instr-map $work/xprog")
	for map in "${maps[@]}"; do
		want_rc=0
		"$TK" convert --to xray-yaml -j 1 $map "$f" >"$work/want" 2>"$work/want.err" || want_rc=$?
		for run in "2 1" "3 7" "4 50" "2 1000"; do
			read -r j block <<<"$run"
			rc=0
			TK_XRAY_YAML_BLOCK=$block TK_PHASES=1 "$TK" convert --to xray-yaml -j "$j" $map "$f" \
				>"$work/got" 2>"$work/got.err" || rc=$?
			grep -q '[2-9][0-9]* jobs in' "$work/got.err" && blocked=$((blocked + 1))
			grep -v '^tracekit: phases' "$work/got.err" >"$work/got.msg" || true
			[ "$rc" = "$want_rc" ] && cmp -s "$work/want" "$work/got" &&
				cmp -s "$work/want.err" "$work/got.msg" ||
				{ echo "$(basename "$f") $map: yaml -j $j in blocks of $block differs (exit $rc, -j 1 $want_rc)"
				  diff "$work/want" "$work/got" | head -5 || true
				  diff "$work/want.err" "$work/got.msg" | head -5 || true; exit 1; }
		done
	done
done
# a failed write: exit 4 and "write failed", in blocks as in order
for j in 1 2; do
	rc=0; TK_XRAY_YAML_BLOCK=50 "$TK" convert --to xray-yaml -j $j -o /dev/full "$real" \
		2>"$work/full.err" || rc=$?
	[ "$rc" = 4 ] && grep -q 'write failed' "$work/full.err" ||
		{ echo "yaml -j $j into /dev/full: exit $rc"; cat "$work/full.err"; exit 1; }
done
[ "$blocked" -ge 20 ] || { echo "only $blocked runs in blocks"; exit 1; }
echo "xray yaml blocks: ok ($blocked runs in blocks)"
