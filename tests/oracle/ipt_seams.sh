#!/usr/bin/env bash
# Chunk seams and longjmp. run() sets a jump point and calls deep(), which recurses and
# longjmps back: the calls it abandons stay open until run() returns to main, and that
# return ends them all (it goes to the return address of main's call, below them). Intel PT
# of the program (a recorded branch trace converted with return compression) is profiled in
# chunks of a few hundred bytes and as one chunk. Where run()'s call and its return fall in
# different chunks, the later chunk cannot tell that the return ends calls made before it:
# the merge must see that and profile that chunk again on the whole stack.
# Ground truth: the program calls run() 40 times from main and counts deep()'s calls itself.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
ndeep=$("$TK" record --btrace -o "$work/lj.tkbt" -- "$work/lj" 2>"$work/rec.err") ||
	{ echo "record failed"; cat "$work/rec.err"; exit 1; }
bias=$("$TK" info "$work/lj.tkbt" | awk -v m="$work/lj" '$1 == "module" && $2 == m {
	for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }')
[ -n "$bias" ] || { echo "no load bias for $work/lj"; "$TK" info "$work/lj.tkbt"; exit 1; }
"$TK" convert --to ipt -q -o "$work/lj.pt" "$work/lj.tkbt"
npsb=$("$TK" dump --no-offset "$work/lj.pt" | grep -c '^psb$' || true)
[ "$npsb" -ge 10 ] || { echo "only $npsb PSBs: too few seams to test"; exit 1; }

for t in calltree csv; do
	TK_IPT_CHUNK=1000000000 "$TK" profile -j 1 --to $t --elf "$work/lj:$bias" "$work/lj.pt" \
		>"$work/one.$t"
	# (TK_PROF_PROBES=1: the first chunks keep no events past their first, so a seam
	# that fails among them is decoded again)
	for run in "1 65536" "2 65536" "2 1"; do
		read -r j bet <<<"$run"
		TK_PROF_PROBES=$bet TK_IPT_CHUNK=300 "$TK" profile -j $j --to $t \
			--elf "$work/lj:$bias" "$work/lj.pt" >"$work/chunks.$t"
		cmp -s "$work/one.$t" "$work/chunks.$t" || {
			echo "--to $t, -j $j, TK_PROF_PROBES=$bet: profile in chunks differs from one chunk"
			diff "$work/one.$t" "$work/chunks.$t" | head -20 || true; exit 1; }
	done
done

# the calls of deep and run, and the calls of run right under main in the call tree
calls() { awk -F, -v n="\"$1\"" '$1 == n {print $2}' "$work/one.csv"; }
[ "$(calls deep)" = "$ndeep" ] || { echo "deep: $(calls deep) calls, the program made $ndeep"; exit 1; }
[ "$(calls run)" = 40 ] || { echo "run: $(calls run) calls, not 40"; exit 1; }
under=$(python3 "$SRC/tests/tools/calltree_calls.py" "$work/one.calltree" main run)
[ "$under" = 40 ] || { echo "main -> run in the call tree: '$under', want one row of 40 calls"; exit 1; }
echo "ipt seams: ok ($npsb PSBs, $ndeep calls of deep)"
